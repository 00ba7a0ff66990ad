/* membw.c - read bandwidth of main memory: every thread sums its own slice of a buffer much
 * larger than the caches; the best of several passes is reported in GB/s (decimal). Used by
 * bench/run.sh to express decode speed as a fraction of the memory limit.
 *   usage: membw [THREADS] [MiB]   (defaults 2, 1024) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct slice { const uint64_t *p; size_t n; uint64_t sum; } slice;

static void *reader(void *arg)
{
    slice *s = arg;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 4 <= s->n; i += 4) { a0 += s->p[i]; a1 += s->p[i + 1]; a2 += s->p[i + 2]; a3 += s->p[i + 3]; }
    s->sum = a0 + a1 + a2 + a3; /* kept so the loads are not optimised away */
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int nt = argc > 1 ? atoi(argv[1]) : 2;
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 1024;
    if (nt < 1 || nt > 256 || mib < 64) { fprintf(stderr, "usage: membw [THREADS 1-256] [MiB >= 64]\n"); return 2; }
    size_t bytes = mib << 20, n = bytes / 8;
    uint64_t *buf = aligned_alloc(64, bytes);
    if (!buf) { fprintf(stderr, "membw: cannot allocate %zu MiB\n", mib); return 1; }
    memset(buf, 1, bytes);
    double best = 0;
    uint64_t check = 0;
    for (int pass = 0; pass < 5; pass++) {
        pthread_t th[256];
        slice sl[256];
        double t0 = now();
        for (int t = 0; t < nt; t++) {
            sl[t] = (slice){buf + n / (size_t)nt * (size_t)t, n / (size_t)nt, 0};
            pthread_create(&th[t], NULL, reader, &sl[t]);
        }
        for (int t = 0; t < nt; t++) { pthread_join(th[t], NULL); check += sl[t].sum; }
        double gbs = (double)(n / (size_t)nt * (size_t)nt * 8) / (now() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    printf("%.2f\n", best);
    fprintf(stderr, "membw: %d threads, %zu MiB, best of 5 passes (checksum %llu)\n", nt, mib, (unsigned long long)(check & 0xff));
    free(buf);
    return 0;
}
