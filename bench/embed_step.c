/* embed_step.c - encoder throughput of one worker's step function (engine/embed.h
 * rlx_embed_step) without the server: N texts of L random token ids, S texts per step, mean
 * pooling + L2; one warm-up pass, then a timed pass. Prints texts/s and tokens/s (wall).
 *   build: cc -O2 -I. bench/embed_step.c -o build/embed_step build/librlx_engine.a \
 *          build/librlx_models.a build/librlx_backends.a -lm -lutf8proc -lpcre2-8 -lpthread
 *   usage: embed_step MODEL.gguf [THREADS 2] [N 256] [L 16] [S 16] */
#include "engine/embed.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: embed_step MODEL.gguf [THREADS] [N] [L] [S]\n"); return 2; }
    const int threads = argc > 2 ? atoi(argv[2]) : 2, n_texts = argc > 3 ? atoi(argv[3]) : 256;
    const int len = argc > 4 ? atoi(argv[4]) : 16, per_step = argc > 5 ? atoi(argv[5]) : 16;
    if (n_texts < 1 || len < 1 || per_step < 1) { fprintf(stderr, "embed_step: N, L and S must be positive\n"); return 2; }
    rlx_error err = {0};
    rlx_runner *r = NULL;
    rlx_runner_config cfg = {.model_path = argv[1], .max_seqs = per_step, .max_batch_tokens = per_step * len,
                             .backend = {.name = "cpu", .n_threads = threads}};
    if (rlx_runner_open(&r, &cfg, &err)) { fprintf(stderr, "embed_step: %s\n", err.msg); return 1; }
    const int64_t d = rlx_embed_dim(r, RLX_POOL_MEAN);
    int32_t *ids = malloc(sizeof *ids * (size_t)n_texts * (size_t)len);
    rlx_embed_seq *in = malloc(sizeof *in * (size_t)n_texts);
    float *out = malloc(sizeof *out * (size_t)d * (size_t)per_step);
    if (!ids || !in || !out) { fprintf(stderr, "embed_step: out of memory\n"); return 1; }
    uint32_t s = 1;
    for (size_t i = 0; i < (size_t)n_texts * (size_t)len; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = (int32_t)((s >> 8) % (uint32_t)r->n_vocab);
    }
    for (int i = 0; i < n_texts; i++) in[i] = (rlx_embed_seq){ids + (size_t)i * (size_t)len, len};
    for (int pass = 0; pass < 2; pass++) {
        const double t0 = now();
        for (int i = 0; i < n_texts; i += per_step) {
            const int n = n_texts - i < per_step ? n_texts - i : per_step;
            if (rlx_embed_step(r, in + i, n, RLX_POOL_MEAN, 2, out, &err)) { fprintf(stderr, "embed_step: %s\n", err.msg); return 1; }
        }
        const double dt = now() - t0;
        if (pass)
            printf("threads %d, %d texts x %d tokens, %d per step: %.3f s, %.1f texts/s, %.0f tokens/s\n", threads, n_texts, len,
                   per_step, dt, n_texts / dt, (double)n_texts * len / dt);
    }
    free(ids);
    free(in);
    free(out);
    rlx_runner_close(r);
    return 0;
}
