/* sgemm_peak.c - f32 matrix-multiply peak through OpenBLAS: C = A*B with 1024x1024 matrices,
 * best of several calls, printed in GFLOP/s. Used by bench/run.sh to express prefill speed as
 * a fraction of the arithmetic limit.   usage: sgemm_peak [THREADS] (default 2) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void openblas_set_num_threads(int n);

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int nt = argc > 1 ? atoi(argv[1]) : 2;
    const int n = 1024;
    if (nt < 1) { fprintf(stderr, "usage: sgemm_peak [THREADS >= 1]\n"); return 2; }
    openblas_set_num_threads(nt);
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
    if (!a || !b || !c) { fprintf(stderr, "sgemm_peak: out of memory\n"); return 1; }
    for (int i = 0; i < n * n; i++) { a[i] = (float)(i % 7) * 0.25f; b[i] = (float)(i % 5) * 0.5f; }
    double best = 0;
    for (int k = 0; k < 8; k++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double gf = 2.0 * n * n * (double)n / (now() - t0) / 1e9;
        if (gf > best) best = gf;
    }
    printf("%.1f\n", best);
    fprintf(stderr, "sgemm_peak: %d threads, %dx%dx%d, best of 8 (c[0] = %g)\n", nt, n, n, n, (double)c[0]);
    free(a); free(b); free(c);
    return 0;
}
