/* synth_bench.c - `rlxd-synth --bench`: a micro benchmark of rlx_matmul_rows on one thread for
 * every tensor type and every kernel path this CPU has (decode shape by default: T=1, K=1024,
 * N=3072). Reports weight bytes streamed per second, the figure to compare with memory
 * bandwidth. Not used by tests. */
#include "tools/synth.h"
#include "backends/quant.h"
#include "backends/cpu/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_dim(const char *flag, const char *v, int64_t *out)
{
    char *end;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || *end || x <= 0 || x > (1 << 20)) {
        fprintf(stderr, "rlxd-synth --bench: %s needs a positive integer up to 1048576\n", flag);
        return -1;
    }
    *out = x;
    return 0;
}

int rlx_synth_bench(int argc, char **argv)
{
    int64_t K = 1024, N = 3072, T = 1;
    double seconds = 0.3;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--bench")) continue;
        if (!v) { fprintf(stderr, "rlxd-synth --bench: missing value for %s\n", f); return 2; }
        i++;
        if (!strcmp(f, "-K")) { if (parse_dim(f, v, &K)) return 2; }
        else if (!strcmp(f, "-N")) { if (parse_dim(f, v, &N)) return 2; }
        else if (!strcmp(f, "-T")) { if (parse_dim(f, v, &T)) return 2; }
        else if (!strcmp(f, "--type")) only = v;
        else { fprintf(stderr, "rlxd-synth --bench: unknown option %s (use -K, -N, -T, --type)\n", f); return 2; }
    }
    static const int types[] = {RLX_F32, RLX_F16, RLX_BF16, RLX_Q8_0, RLX_Q4_0, RLX_Q4_K, RLX_Q5_K, RLX_Q6_K};
    static const char *const paths[] = {"scalar", "avx2", "avx512"};
    printf("rlx_matmul_rows, one thread, T=%lld K=%lld N=%lld: weight GB/s per path (best run)\n",
           (long long)T, (long long)K, (long long)N);
    float *x = malloc((size_t)K * sizeof(float)), *out = malloc((size_t)(T * N) * sizeof(float));
    if (!x || !out) { free(x); free(out); fprintf(stderr, "rlxd-synth --bench: out of memory\n"); return 1; }
    uint64_t s = 88172645463325252ull;
    for (int64_t i = 0; i < K; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
    int rc = 0;
    for (size_t ti = 0; ti < RLX_ARRAY_LEN(types); ti++) {
        const int type = types[ti], at = rlx_vec_dot_type(type);
        if (only && strcmp(only, rlx_dtype_get(type)->name)) continue;
        const size_t wrow = rlx_row_bytes(type, K), arow = rlx_row_bytes(at, K);
        if (!wrow || !arow) { printf("%-5s  K=%lld is not a multiple of its block size\n", rlx_dtype_get(type)->name, (long long)K); continue; }
        char *w = malloc(wrow * (size_t)N), *act = malloc(arow * (size_t)T);
        if (!w || !act) { free(w); free(act); rc = 1; fprintf(stderr, "rlxd-synth --bench: out of memory\n"); break; }
        for (int64_t n = 0; n < N; n++) rlx_quantize_row(type, x, w + wrow * (size_t)n, K);
        for (int64_t t = 0; t < T; t++) rlx_quantize_row(at, x, act + arow * (size_t)t, K);
        printf("%-5s", rlx_dtype_get(type)->name);
        for (size_t p = 0; p < RLX_ARRAY_LEN(paths); p++) {
            if (rlx_cpu_force_path(paths[p])) { printf("  %s -", paths[p]); continue; }
            rlx_matmul_rows(type, w, 0, N, act, arow, T, K, out, N); /* warm caches */
            double best = 1e30, start = rlx_now();
            do {
                const double t0 = rlx_now();
                rlx_matmul_rows(type, w, 0, N, act, arow, T, K, out, N);
                const double dt = rlx_now() - t0;
                if (dt < best) best = dt;
            } while (rlx_now() - start < (p == 0 ? seconds / 4 : seconds));
            printf("  %s %6.1f", paths[p], (double)wrow * (double)N / best / 1e9);
        }
        printf("\n");
        free(w);
        free(act);
    }
    free(x);
    free(out);
    return rc;
}
