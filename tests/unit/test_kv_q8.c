/* test_kv_q8.c - a Q8_0 KV cache (backend.h's layout) through the runner: logits stay close to
 * those of an F16 cache, and a model whose KV row width is not a multiple of 32 is refused at
 * init with a sentence naming the fix.
 *
 * Tolerance, per position (41: a 40-token prefill, then a decode step reading the cache): every logit within max_rel of that position's logit range (max - min) of the
 * F16 run; the mean |difference| over all logits under mean_abs. Measured: stories260K (head_dim
 * 8, so one Q8_0 scale spans four heads) max 1.07 = 3.9% of the range, mean 0.084;
 * synth-llama-mid (head_dim 64) max 0.042 = 0.65%, mean 0.007. */
#include "tests/rlx_test.h"
#include "engine/runner.h"
#include "backends/dtype.h"

#include <unistd.h>

#define N_TOK 40

/* Prefill of N_TOK tokens (every position an output), then one decode token reading the
 * cache: N_TOK + 1 rows of logits into out (malloc'ed). */
static int run(const char *model, int kv_type, float **out, int32_t *n_vocab)
{
    rlx_runner_config cfg = {.model_path = model, .kv_type = kv_type, .kv_type_set = true, .n_ctx = 64,
                             .max_batch_tokens = N_TOK, .max_outputs = N_TOK, .backend = {.n_threads = 2}};
    rlx_runner *r = NULL;
    rlx_error err = {0};
    if (rlx_runner_open(&r, &cfg, &err)) { fprintf(stderr, "open: %s\n", err.msg); return -1; }
    int32_t ids[N_TOK + 1], pos[N_TOK + 1], seq[N_TOK + 1] = {0}, *table = NULL, nb = 0, cap = 0;
    uint8_t outm[N_TOK];
    for (int i = 0; i <= N_TOK; i++) { ids[i] = i ? 3 + (i * 37) % 500 : 1; pos[i] = i; }
    memset(outm, 1, sizeof outm);
    int rc = rlx_runner_reserve(r, &table, &nb, &cap, N_TOK + 1);
    *n_vocab = r->n_vocab;
    *out = malloc((size_t)(N_TOK + 1) * (size_t)r->n_vocab * sizeof **out);
    rlx_batch_seq bs = {table, nb, -1};
    rlx_batch b = {N_TOK, ids, pos, seq, outm, N_TOK, 1, &bs, NULL};
    if (!rc) rc = rlx_runner_forward(r, &b, &err);
    if (!rc) memcpy(*out, r->logits, (size_t)N_TOK * (size_t)r->n_vocab * sizeof **out);
    rlx_batch d = {1, ids + N_TOK, pos + N_TOK, seq, outm, 1, 1, &bs, NULL};
    if (!rc) rc = rlx_runner_forward(r, &d, &err);
    if (!rc) memcpy(*out + (size_t)N_TOK * (size_t)r->n_vocab, r->logits, (size_t)r->n_vocab * sizeof **out);
    if (rc) fprintf(stderr, "forward: %s\n", err.msg);
    free(table);
    rlx_runner_close(r);
    return rc;
}

TEST(logits_close_to_f16)
{
    static const struct { const char *file; double max_rel, mean_abs; } files[] = {
        {"models/stories260K.gguf", 0.05, 0.15},         /* head_dim 8: four heads share a scale */
        {"models/synth-llama-mid-f32.gguf", 0.015, 0.02}, /* head_dim 64 */
    };
    int ran = 0;
    for (size_t f = 0; f < RLX_ARRAY_LEN(files); f++) {
        const char *m = rlx_test_shared(files[f].file);
        if (!m) continue;
        float *a = NULL, *b = NULL;
        int32_t V = 0;
        ASSERT_EQ(run(m, RLX_F16, &a, &V), 0);
        ASSERT_EQ(run(m, RLX_Q8_0, &b, &V), 0);
        double worst = 0, worst_rel = 0, sum = 0;
        for (int p = 0; p <= N_TOK; p++) {
            const float *x = a + (size_t)p * (size_t)V, *y = b + (size_t)p * (size_t)V;
            float lo = x[0], hi = x[0];
            for (int32_t v = 0; v < V; v++) {
                lo = x[v] < lo ? x[v] : lo;
                hi = x[v] > hi ? x[v] : hi;
            }
            for (int32_t v = 0; v < V; v++) {
                double d = fabs((double)x[v] - y[v]);
                ASSERT_MSG(d <= files[f].max_rel * (hi - lo), "%s position %d token %d: f16 %g, q8_0 %g (range %g)",
                           files[f].file, p, v, x[v], y[v], hi - lo);
                worst = d > worst ? d : worst;
                worst_rel = d / (hi - lo) > worst_rel ? d / (hi - lo) : worst_rel;
                sum += d;
            }
        }
        double mean = sum / ((N_TOK + 1.0) * V);
        fprintf(stderr, "  %s: max |f16 - q8_0| %.4f (%.2f%% of the range), mean %.4f\n", files[f].file, worst,
                100 * worst_rel, mean);
        ASSERT(mean <= files[f].mean_abs);
        free(a);
        free(b);
        ran++;
    }
    if (!ran) SKIP("../shared models absent");
}

TEST(row_width_not_multiple_of_32_refused)
{
    const char *bin = getenv("RLX_BIN");
    if (!bin) SKIP("rlxd-synth not available (RLX_BIN)");
    char path[256], cmd[1024];
    snprintf(path, sizeof path, "/tmp/rlxd-kvq8-%d.gguf", (int)getpid());
    /* 2 KV heads of 8: rows of 16 values */
    snprintf(cmd, sizeof cmd, "'%s/rlxd-synth' --arch llama --preset tiny --hidden 32 --heads 4 --kv-heads 2 "
             "--head-dim 8 -o '%s' >/dev/null 2>&1", bin, path);
    if (system(cmd) != 0) SKIP("rlxd-synth failed");
    rlx_runner_config cfg = {.model_path = path, .kv_type = RLX_Q8_0, .kv_type_set = true, .n_ctx = 64,
                             .backend = {.n_threads = 1}};
    rlx_runner *r = NULL;
    rlx_error err = {0};
    ASSERT_EQ(rlx_runner_open(&r, &cfg, &err), RLX_EUNSUPPORTED);
    ASSERT(strstr(err.msg, "multiple of 32") != NULL);
    ASSERT(strstr(err.msg, "= 16") != NULL);
    cfg.kv_type = RLX_F16;
    ASSERT_EQ(rlx_runner_open(&r, &cfg, &err), 0);
    rlx_runner_close(r);
    unlink(path);
}

TEST_MAIN(TEST_ENTRY(logits_close_to_f16), TEST_ENTRY(row_width_not_multiple_of_32_refused))
