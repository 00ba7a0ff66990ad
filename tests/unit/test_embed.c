/* test_embed.c - one encoder step over several inputs (engine/embed.h) on the shared synthetic
 * bert and nomic-bert models:
 *  - batch invariance: 64 inputs of 1 to 120 tokens in one step (and in another order, and on
 *    another thread count) give every input's pooled vector and per-token rows bit for bit as
 *    that input alone;
 *  - pooling: mean/cls/last of the per-token rows (pool.h) and the normalization applied;
 *  - rank: a copy of the bert model given a `cls` head scores the CLS row as
 *    cls.output(tanh(cls x + b) ) + b; without a head rank is refused;
 *  - load errors: an unknown pooling type and a causal bert are refused by name;
 *  - bad input: empty input, too long, token id outside the vocabulary, too many tokens for one
 *    step, a decoder model;
 *  - rlxd-synth's encoders (--arch bert / nomic-bert, built-in WordPiece): load, tokenize
 *    without [UNK], embed (pooling from --pooling), batch invariant. */
#include "tests/rlx_test.h"
#include "tests/unit/test_synth_util.h"
#include "engine/embed.h"
#include "tests/unit/test_embed_util.h"
#include "models/tokenizer.h"

#include <math.h>
#include <unistd.h>

static const char *model_path(const char *stem)
{
    char rel[128];
    snprintf(rel, sizeof rel, "models/%s.gguf", stem);
    return rlx_test_shared(rel);
}

static int open_runner(rlx_runner **r, const char *path, int threads, int32_t max_tokens, rlx_error *err)
{
    rlx_runner_config cfg = {.model_path = path, .max_seqs = 64, .max_batch_tokens = max_tokens,
                             .backend = {.name = "cpu", .n_threads = threads}};
    return rlx_runner_open(r, &cfg, err);
}

#define N_IN 64

static void invariance(const char *stem)
{
    const char *path = model_path(stem);
    if (!path) SKIP("../shared/models/%s.gguf is absent", stem);
    rlx_error err = {0};
    rlx_runner *r = NULL, *r4 = NULL;
    ASSERT_MSG(open_runner(&r, path, 2, 8192, &err) == 0, "%s", err.msg);
    ASSERT_MSG(open_runner(&r4, path, 4, 8192, &err) == 0, "%s", err.msg);
    const int64_t d = r->model->cfg.n_embd;
    /* under valgrind (RLX_MEMCHECK) a smaller set: the same paths, a tenth of the arithmetic */
    const int n_in = getenv("RLX_MEMCHECK") ? 16 : N_IN, max_len = getenv("RLX_MEMCHECK") ? 40 : 120;
    static int32_t ids[N_IN][120];
    rlx_embed_seq in[N_IN], rev[N_IN];
    uint32_t seed = 12345;
    int64_t total = 0;
    for (int i = 0; i < n_in; i++) {
        seed = seed * 1664525u + 1013904223u;
        int n = 1 + (int)(seed >> 8) % max_len;
        if (i < 8) n = i + 1; /* every short length, where one-row kernels take over */
        for (int t = 0; t < n; t++) {
            seed = seed * 1664525u + 1013904223u;
            ids[i][t] = t == 0 ? 101 : (int32_t)((seed >> 8) % (uint32_t)r->n_vocab);
        }
        in[i] = (rlx_embed_seq){ids[i], n};
        total += n;
    }
    for (int i = 0; i < n_in; i++) rev[i] = in[n_in - 1 - i];
    float *alone = malloc((size_t)n_in * d * sizeof *alone), *all = malloc((size_t)n_in * d * sizeof *all);
    float *all_rev = malloc((size_t)n_in * d * sizeof *all_rev), *all4 = malloc((size_t)n_in * d * sizeof *all4);
    float *rows_alone = malloc((size_t)total * d * sizeof *rows_alone), *rows_all = malloc((size_t)total * d * sizeof *rows_all);
    ASSERT(alone && all && all_rev && all4 && rows_alone && rows_all);
    for (rlx_pooling p = RLX_POOL_MEAN; p <= RLX_POOL_LAST; p++) {
        /* under valgrind (RLX_MEMCHECK) the reversed batch and the 4-thread runner with mean
         * pooling only: cls and last pooling still run alone and batched (their own code), and
         * another order or thread count runs the same code over other rows (mean covers it);
         * the forward repeated twice less for two of the three poolings */
        bool again = p == RLX_POOL_MEAN || !getenv("RLX_MEMCHECK");
        for (int i = 0; i < n_in; i++) ASSERT_MSG(rlx_embed_step(r, &in[i], 1, p, 2, alone + i * d, &err) == 0, "%s", err.msg);
        ASSERT_MSG(rlx_embed_step(r, in, n_in, p, 2, all, &err) == 0, "%s", err.msg);
        if (again) ASSERT_MSG(rlx_embed_step(r, rev, n_in, p, 2, all_rev, &err) == 0, "%s", err.msg);
        if (again) ASSERT_MSG(rlx_embed_step(r4, in, n_in, p, 2, all4, &err) == 0, "%s", err.msg);
        for (int i = 0; i < n_in; i++) {
            ASSERT_MSG(!memcmp(alone + i * d, all + i * d, (size_t)d * 4), "%s %s: input %d in a batch of %d differs",
                       stem, rlx_pooling_name(p), i, n_in);
            if (again) {
                ASSERT_MSG(!memcmp(alone + i * d, all_rev + (n_in - 1 - i) * d, (size_t)d * 4), "%s: input %d reversed", stem, i);
                ASSERT_MSG(!memcmp(alone + i * d, all4 + i * d, (size_t)d * 4), "%s: input %d on 4 threads", stem, i);
            }
            double n2 = 0;
            for (int64_t c = 0; c < d; c++) n2 += (double)alone[i * d + c] * alone[i * d + c];
            ASSERT_NEAR(n2, 1.0, 1e-5); /* norm 2 */
        }
    }
    /* per-token rows, and pooling them by hand gives the pooled vectors */
    int64_t off = 0;
    for (int i = 0; i < n_in; i++) {
        ASSERT_MSG(rlx_embed_step(r, &in[i], 1, RLX_POOL_NONE, 2, rows_alone + off * d, &err) == 0, "%s", err.msg);
        off += in[i].n_tokens;
    }
    ASSERT_MSG(rlx_embed_step(r, in, n_in, RLX_POOL_NONE, 2, rows_all, &err) == 0, "%s", err.msg);
    ASSERT(!memcmp(rows_alone, rows_all, (size_t)total * d * 4));
    ASSERT_MSG(rlx_embed_step(r, in, n_in, RLX_POOL_MEAN, -1, all, &err) == 0, "%s", err.msg);
    off = 0;
    for (int i = 0; i < n_in; i++) {
        float want[1024];
        ASSERT_EQ(rlx_pool_rows(RLX_POOL_MEAN, rows_all + off * d, in[i].n_tokens, d, want), 0);
        ASSERT(!memcmp(want, all + i * d, (size_t)d * 4));
        off += in[i].n_tokens;
    }
    free(alone);
    free(all);
    free(all_rev);
    free(all4);
    free(rows_alone);
    free(rows_all);
    rlx_runner_close(r);
    rlx_runner_close(r4);
}

TEST(batch_invariance_bert) { invariance("synth-bert-tiny-f32"); }
TEST(batch_invariance_nomic_bert) { invariance("synth-nomic-bert-tiny-f32"); }


TEST(rank_head_and_load_errors)
{
    const char *src = model_path("synth-bert-tiny-f32");
    if (!src) SKIP("../shared/models/synth-bert-tiny-f32.gguf is absent");
    char dir[] = "/tmp/rlx_test_embed_XXXXXX", path[256];
    ASSERT(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    rlx_error err = {0};
    rlx_runner *r = NULL;

    /* unknown pooling, causal attention: refused at load, naming the key */
    ASSERT_MSG(derive(src, path, 9, false, NULL, NULL, NULL, NULL, &err) == 0, "%s", err.msg);
    ASSERT_EQ(open_runner(&r, path, 1, 512, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "pooling_type 9 is unknown"), "%s", err.msg);
    ASSERT_MSG(derive(src, path, -1, true, NULL, NULL, NULL, NULL, &err) == 0, "%s", err.msg);
    ASSERT_EQ(open_runner(&r, path, 1, 512, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "bert.attention.causal"), "%s", err.msg);
    /* rank without a head */
    ASSERT_MSG(derive(src, path, 4, false, NULL, NULL, NULL, NULL, &err) == 0, "%s", err.msg);
    ASSERT_EQ(open_runner(&r, path, 1, 512, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "cls"), "%s", err.msg);

    /* rank with a head */
    static float cw[64 * 64], cb[64], ow[64], ob[1] = {0.25f};
    uint32_t seed = 7;
    for (int i = 0; i < 64 * 64; i++) { seed = seed * 1664525u + 1013904223u; cw[i] = ((int)(seed >> 9) % 2001 - 1000) / 8000.0f; }
    for (int i = 0; i < 64; i++) { seed = seed * 1664525u + 1013904223u; cb[i] = ((int)(seed >> 9) % 2001 - 1000) / 4000.0f; }
    for (int i = 0; i < 64; i++) { seed = seed * 1664525u + 1013904223u; ow[i] = ((int)(seed >> 9) % 2001 - 1000) / 2000.0f; }
    ASSERT_MSG(derive(src, path, 4, false, cw, cb, ow, ob, &err) == 0, "%s", err.msg);
    ASSERT_MSG(open_runner(&r, path, 1, 512, &err) == 0, "%s", err.msg);
    ASSERT_EQ(rlx_embed_default_pooling(r), RLX_POOL_RANK);
    ASSERT_EQ(rlx_embed_dim(r, RLX_POOL_RANK), 1);
    const int32_t q1[6] = {101, 7592, 2088, 1010, 2003, 102}, q2[3] = {101, 4248, 102};
    rlx_embed_seq in[2] = {{q1, 6}, {q2, 3}};
    float scores[2], cls[2][64];
    ASSERT_MSG(rlx_embed_step(r, in, 2, RLX_POOL_RANK, 2, scores, &err) == 0, "%s", err.msg);
    ASSERT_MSG(rlx_embed_step(r, in, 2, RLX_POOL_CLS, -1, &cls[0][0], &err) == 0, "%s", err.msg);
    for (int s = 0; s < 2; s++) {
        double out = ob[0];
        for (int o = 0; o < 64; o++) {
            double h = cb[o];
            for (int i = 0; i < 64; i++) h += (double)cw[o * 64 + i] * cls[s][i];
            out += ow[o] * tanh(h);
        }
        ASSERT_NEAR(scores[s], out, 1e-5);
    }
    rlx_runner_close(r);
    r = NULL;
    /* the original has no head: rank is refused at the step */
    ASSERT_MSG(open_runner(&r, src, 1, 512, &err) == 0, "%s", err.msg);
    ASSERT_EQ(rlx_embed_step(r, in, 1, RLX_POOL_RANK, 2, scores, &err), RLX_EINVAL);
    ASSERT_MSG(strstr(err.msg, "classifier head"), "%s", err.msg);
    rlx_runner_close(r);
    unlink(path);
    rmdir(dir);
}

TEST(bad_input)
{
    const char *src = model_path("synth-bert-tiny-f32");
    if (!src) SKIP("../shared/models/synth-bert-tiny-f32.gguf is absent");
    rlx_error err = {0};
    rlx_runner *r = NULL;
    ASSERT_MSG(open_runner(&r, src, 1, 1000, &err) == 0, "%s", err.msg);
    ASSERT(rlx_embed_is_encoder(r));
    ASSERT_EQ(rlx_embed_max_tokens(r), 512); /* the position embeddings' rows */
    static int32_t ids[600];
    for (int i = 0; i < 600; i++) ids[i] = 1000 + i;
    float *out = malloc(600 * 64 * sizeof *out);
    rlx_embed_seq in[3] = {{ids, 0}, {ids, 513}, {ids, 512}};
    ASSERT_EQ(rlx_embed_step(r, in, 1, RLX_POOL_MEAN, 2, out, &err), RLX_EINVAL);
    ASSERT_MSG(strstr(err.msg, "empty"), "%s", err.msg);
    ASSERT_EQ(rlx_embed_step(r, in + 1, 1, RLX_POOL_MEAN, 2, out, &err), RLX_ETOOLONG);
    ASSERT_MSG(strstr(err.msg, "513 tokens"), "%s", err.msg);
    ASSERT_EQ(rlx_embed_step(r, in + 2, 1, RLX_POOL_MEAN, 2, out, &err), 0); /* exactly the limit */
    rlx_embed_seq two[2] = {{ids, 512}, {ids, 512}};
    ASSERT_EQ(rlx_embed_step(r, two, 2, RLX_POOL_MEAN, 2, out, &err), RLX_ETOOLONG); /* 1024 tokens > one step's 1000 */
    ASSERT_MSG(strstr(err.msg, "one step"), "%s", err.msg);
    two[1].n_tokens = 488;
    ASSERT_EQ(rlx_embed_step(r, two, 2, RLX_POOL_MEAN, 2, out, &err), 0);
    ids[3] = 30522;
    ASSERT_EQ(rlx_embed_step(r, in + 2, 1, RLX_POOL_MEAN, 2, out, &err), RLX_ERANGE);
    ids[3] = 1003;
    ASSERT_EQ(rlx_embed_step(r, in + 2, 1, RLX_POOL_MEAN, -2, out, &err), RLX_EINVAL);
    rlx_runner_close(r);
    r = NULL;
    const char *dec = model_path("stories260K");
    if (dec) {
        ASSERT_MSG(open_runner(&r, dec, 1, 64, &err) == 0, "%s", err.msg);
        ASSERT(!rlx_embed_is_encoder(r));
        rlx_embed_seq one = {ids, 4};
        for (int i = 0; i < 4; i++) ids[i] = i + 1;
        ASSERT_EQ(rlx_embed_step(r, &one, 1, RLX_POOL_MEAN, 2, out, &err), RLX_EINVAL);
        ASSERT_MSG(strstr(err.msg, "not an encoder"), "%s", err.msg);
        rlx_runner_close(r);
    }
    free(out);
}

TEST(synth_encoders)
{
    const char *const args[] = {"--arch bert --preset tiny --seed 3", "--arch nomic-bert --preset tiny --pooling cls --seed 4"};
    const rlx_pooling want[] = {RLX_POOL_MEAN, RLX_POOL_CLS};
    char path[512];
    if (!synth(args[0], "bert.gguf", path, sizeof path)) SKIP("rlxd-synth is not built (RLX_BIN)");
    ASSERT(!synth("--arch bert --pooling rank", "bad.gguf", path, sizeof path)); /* no head to rank with */
    /* a decoder neither (it wrote a file rlxd serve then refused) */
    ASSERT(!synth("--arch qwen3 --preset tiny --pooling rank", "bad2.gguf", path, sizeof path));
    for (int m = 0; m < 2; m++) {
        ASSERT(synth(args[m], m ? "nomic.gguf" : "bert.gguf", path, sizeof path));
        rlx_error err = {0};
        rlx_runner *r = NULL;
        ASSERT_MSG(open_runner(&r, path, 2, 512, &err) == 0, "%s", err.msg);
        ASSERT_EQ(rlx_embed_default_pooling(r), want[m]);
        rlx_tokenizer *tok = NULL;
        ASSERT_MSG(rlx_tokenizer_from_gguf(&tok, r->model->gguf, &err) == 0, "%s", err.msg);
        const char *texts[2] = {"Once upon a time, the little girl went to the forest!", "The quick brown fox."};
        int32_t *ids[2] = {NULL, NULL};
        size_t n[2] = {0, 0};
        rlx_embed_seq in[2];
        for (int i = 0; i < 2; i++) {
            ASSERT_MSG(rlx_tokenize(tok, texts[i], strlen(texts[i]), true, true, &ids[i], &n[i], &err) == 0, "%s", err.msg);
            ASSERT(n[i] > 4 && ids[i][0] == 2 && ids[i][n[i] - 1] == 3); /* [CLS] ... [SEP] */
            for (size_t k = 0; k < n[i]; k++) ASSERT_MSG(ids[i][k] != 1, "[UNK] in '%s' at %zu", texts[i], k);
            in[i] = (rlx_embed_seq){ids[i], (int32_t)n[i]};
        }
        float alone[2][64], both[2][64];
        ASSERT_EQ(rlx_embed_dim(r, want[m]), 64);
        for (int i = 0; i < 2; i++) ASSERT_MSG(rlx_embed_step(r, &in[i], 1, want[m], 2, alone[i], &err) == 0, "%s", err.msg);
        ASSERT_MSG(rlx_embed_step(r, in, 2, want[m], 2, &both[0][0], &err) == 0, "%s", err.msg);
        ASSERT(!memcmp(alone, both, sizeof alone));
        double n2 = 0;
        for (int c = 0; c < 64; c++) n2 += (double)alone[0][c] * alone[0][c];
        ASSERT_NEAR(n2, 1.0, 1e-5);
        ASSERT(memcmp(alone[0], alone[1], sizeof alone[0])); /* different texts, different vectors */
        free(ids[0]);
        free(ids[1]);
        rlx_tokenizer_free(tok);
        rlx_runner_close(r);
    }
}

TEST_MAIN(TEST_ENTRY(batch_invariance_bert), TEST_ENTRY(batch_invariance_nomic_bert), TEST_ENTRY(rank_head_and_load_errors),
          TEST_ENTRY(bad_input), TEST_ENTRY(synth_encoders))
