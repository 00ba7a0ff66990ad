/* test_worker_embed.c - embedding requests through the worker (engine/worker_embed.c): inputs of many
 * requests share steps and give the same vectors bit for bit as alone (batch invariance),
 * pooling and normalization of the rows, bidirectional attention where the model declares it,
 * truncation, refusals at submit (wrong kind, empty, too long, bad ids), cancellation and the
 * counters. Models: rlxd-synth llamas declared as embedding models (--pooling, --non-causal), and
 * ../shared's bert / nomic-bert encoders, whose vectors through the worker must be those of
 * rlx_embed_step (the step the parity test holds to llama.cpp's goldens), bit for bit. */
#include "tests/rlx_test.h"
#include "tests/unit/test_synth_util.h"
#include "engine/embed.h"
#include "engine/engine.h"
#include "engine/pool.h"
#include "tests/unit/test_embed_util.h"

#include <pthread.h>
#include <unistd.h>

typedef struct eres {
    float *v;                  /* copy of the final event's vectors */
    size_t n;
    int32_t dim;
    int32_t tokens[80];
    size_t n_inputs;
    int32_t prompt_tokens;
    bool done;
    rlx_finish_reason finish;
    int error;
} eres;

typedef struct ecoll {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
} ecoll;

typedef struct eslot { ecoll *c; eres *r; } eslot;

static void on_event(void *user, const rlx_event *ev)
{
    eslot *s = user;
    pthread_mutex_lock(&s->c->mu);
    eres *r = s->r;
    if (ev->type == RLX_EV_DONE && ev->embd) {
        r->v = malloc(ev->embd_n * sizeof *r->v);
        memcpy(r->v, ev->embd, ev->embd_n * sizeof *r->v);
        r->n = ev->embd_n;
        r->dim = ev->embd_dim;
        r->n_inputs = ev->n_inputs;
        for (size_t i = 0; i < ev->n_inputs && i < 80; i++) r->tokens[i] = ev->embd_tokens[i];
    }
    r->done = true;
    r->finish = ev->finish;
    r->prompt_tokens = ev->usage.prompt_tokens;
    r->error = ev->type == RLX_EV_ERROR ? ev->error_code : 0;
    s->c->pending--;
    pthread_cond_broadcast(&s->c->cv);
    pthread_mutex_unlock(&s->c->mu);
}

static void wait_all(ecoll *c)
{
    pthread_mutex_lock(&c->mu);
    while (c->pending > 0) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

static const char *model(const char *args, const char *name)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ & 3];
    return synth(args, name, p, sizeof paths[0]) ? p : NULL;
}

static rlx_worker *start(const char *path, int32_t n_ctx, int32_t max_seqs)
{
    rlx_worker_config cfg = {.model_path = path, .n_threads = 2, .max_seqs = max_seqs, .n_ctx = n_ctx,
                             .max_batch_tokens = 64, .max_queue = 256};
    rlx_worker *w = NULL;
    rlx_error err = {0};
    if (rlx_worker_start(&w, &cfg, &err)) { fprintf(stderr, "start: %s\n", err.msg); return NULL; }
    return w;
}

/* input i: 1 to 40 pseudo-random ids (BOS first) */
static size_t make_input(int i, int32_t *ids)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 7);
    size_t n = 1 + (size_t)(i * 13 % 40);
    ids[0] = 1;
    for (size_t k = 1; k < n; k++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        ids[k] = 3 + (int32_t)(x % 250);
    }
    return n;
}

/* A request of the given inputs (ids back to back, ends). */
static rlx_request *embed_req(uint64_t id, const int32_t *ids, const int32_t *ends, size_t n_inputs, eslot *sl)
{
    rlx_request *r = rlx_request_new();
    size_t n = (size_t)ends[n_inputs - 1];
    r->id = id;
    r->kind = RLX_REQ_EMBED;
    r->prompt_ids = malloc((n ? n : 1) * sizeof *ids);
    memcpy(r->prompt_ids, ids, n * sizeof *ids);
    r->n_prompt = n;
    r->input_ends = malloc(n_inputs * sizeof *ends);
    memcpy(r->input_ends, ends, n_inputs * sizeof *ends);
    r->n_inputs = n_inputs;
    r->on_event = on_event;
    r->user = sl;
    return r;
}

static int submit(rlx_worker *w, ecoll *c, rlx_request *r, rlx_error *err)
{
    pthread_mutex_lock(&c->mu);
    c->pending++;
    pthread_mutex_unlock(&c->mu);
    int rc = rlx_worker_submit(w, r, err);
    if (rc) {
        pthread_mutex_lock(&c->mu);
        c->pending--;
        pthread_mutex_unlock(&c->mu);
    }
    return rc;
}

#define N 64

/* 64 inputs alone, then 64 requests at once, then one request of all 64: the same bits. */
static void invariance(const char *path)
{
    rlx_worker *w = start(path, 0, 16);
    ASSERT(w);
    ASSERT(rlx_worker_embeds(w));
    int32_t D = rlx_worker_n_embd(w);
    ASSERT_EQ(D, 64);
    /* under valgrind (RLX_MEMCHECK) 12 inputs: the same paths, a fifth of the arithmetic */
    const int nn = getenv("RLX_MEMCHECK") ? 12 : N;
    static eres solo[N], many[N], one;
    memset(solo, 0, sizeof solo);
    memset(many, 0, sizeof many);
    memset(&one, 0, sizeof one);
    ecoll c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    eslot ss[N], ms[N], os = {&c, &one};
    static int32_t all[N * 40];
    int32_t ends[N], total = 0;
    rlx_error err = {0};
    for (int i = 0; i < nn; i++) {
        int32_t ids[40];
        int32_t n = (int32_t)make_input(i, ids);
        memcpy(all + total, ids, (size_t)n * sizeof *ids);
        total += n;
        ends[i] = total;
        ss[i] = (eslot){&c, &solo[i]};
        ASSERT_EQ(submit(w, &c, embed_req((uint64_t)i + 1, ids, &n, 1, &ss[i]), &err), 0);
        wait_all(&c);
    }
    for (int i = 0; i < nn; i++) {
        int32_t n = (i ? ends[i] - ends[i - 1] : ends[0]);
        ms[i] = (eslot){&c, &many[i]};
        ASSERT_EQ(submit(w, &c, embed_req((uint64_t)(100 + i), all + ends[i] - n, &n, 1, &ms[i]), &err), 0);
    }
    ASSERT_EQ(submit(w, &c, embed_req(1000, all, ends, (size_t)nn, &os), &err), 0);
    wait_all(&c);
    ASSERT_EQ(one.error, 0);
    ASSERT_EQ(one.n, (size_t)nn * (size_t)D);
    ASSERT_EQ(one.n_inputs, (size_t)nn);
    ASSERT_EQ(one.prompt_tokens, total);
    for (int i = 0; i < nn; i++) {
        ASSERT_EQ(solo[i].error, 0);
        ASSERT_EQ(many[i].error, 0);
        ASSERT_EQ(solo[i].n, (size_t)D);
        ASSERT_EQ(solo[i].prompt_tokens, i ? ends[i] - ends[i - 1] : ends[0]);
        ASSERT_MSG(!memcmp(solo[i].v, many[i].v, (size_t)D * sizeof(float)), "input %d: alone != among %d others", i, nn - 1);
        ASSERT_MSG(!memcmp(solo[i].v, one.v + (size_t)i * (size_t)D, (size_t)D * sizeof(float)),
                   "input %d: alone != as input %d of one request", i, i);
        double l2 = 0;
        for (int32_t k = 0; k < D; k++) l2 += (double)solo[i].v[k] * solo[i].v[k];
        ASSERT_NEAR(l2, 1.0, 1e-5); /* L2 by default */
    }
    /* different inputs give different vectors (the rows are not all the same) */
    ASSERT(memcmp(solo[3].v, solo[4].v, (size_t)D * sizeof(float)));
    rlx_worker_stats st;
    rlx_worker_get_stats(w, &st);
    ASSERT_EQ(st.embd_inputs, 3 * (uint64_t)nn);
    ASSERT_EQ(st.embd_tokens, 3 * (uint64_t)total);
    for (int i = 0; i < nn; i++) { free(solo[i].v); free(many[i].v); }
    free(one.v);
    rlx_worker_stop(w, true);
}

TEST(batch_invariance_mean_bidirectional)
{
    const char *p = model("--arch llama --preset tiny --pooling 1 --non-causal", "mean-bidir.gguf");
    if (!p) SKIP("rlxd-synth not built (RLX_BIN)");
    invariance(p);
}

TEST(batch_invariance_last_causal)
{
    const char *p = model("--arch qwen3 --preset tiny --pooling 3", "last-causal.gguf");
    if (!p) SKIP("rlxd-synth not built (RLX_BIN)");
    invariance(p);
}

/* One input's per-token rows, and its pooled vector with a normalization. */
static void run_one(rlx_worker *w, const int32_t *ids, int32_t n, bool per_token, int norm, bool truncate, eres *r,
                    int *submit_rc)
{
    ecoll c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    eslot s = {&c, r};
    memset(r, 0, sizeof *r);
    rlx_request *q = embed_req(7, ids, &n, 1, &s);
    q->embd_per_token = per_token;
    q->embd_normalize = norm;
    q->truncate = truncate;
    rlx_error err = {0};
    *submit_rc = submit(w, &c, q, &err);
    wait_all(&c);
}

TEST(pooling_and_normalization)
{
    const char *p = model("--arch llama --preset tiny --pooling 1 --non-causal", "mean-bidir.gguf");
    if (!p) SKIP("rlxd-synth not built (RLX_BIN)");
    rlx_worker *w = start(p, 0, 4);
    ASSERT(w);
    ASSERT_EQ(rlx_worker_pooling(w), RLX_POOL_MEAN);
    int32_t ids[40];
    int32_t n = (int32_t)make_input(5, ids), D = rlx_worker_n_embd(w);
    eres rows, raw, l2, taxi, maxabs;
    int rc;
    run_one(w, ids, n, true, 2, false, &rows, &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(rows.n, (size_t)n * (size_t)D);
    ASSERT_EQ(rows.tokens[0], n);
    run_one(w, ids, n, false, -1, false, &raw, &rc);
    run_one(w, ids, n, false, 2, false, &l2, &rc);
    run_one(w, ids, n, false, 1, false, &taxi, &rc);
    run_one(w, ids, n, false, 0, false, &maxabs, &rc);
    double sum_abs = 0, max_abs = 0, sq = 0;
    for (int32_t k = 0; k < D; k++) {
        double s = 0;
        for (int32_t t = 0; t < n; t++) s += (double)rows.v[(size_t)t * (size_t)D + (size_t)k];
        ASSERT_MSG(raw.v[k] == (float)(s / n), "mean of column %d: %.9g vs %.9g", k, raw.v[k], (float)(s / n));
        sum_abs += fabs(taxi.v[k]);
        max_abs = fmax(max_abs, fabs(maxabs.v[k]));
        sq += (double)l2.v[k] * l2.v[k];
    }
    ASSERT_NEAR(sq, 1.0, 1e-5);
    ASSERT_NEAR(sum_abs, 1.0, 1e-5);
    ASSERT_NEAR(max_abs, 32760.0, 0.01);
    free(rows.v); free(raw.v); free(l2.v); free(taxi.v); free(maxabs.v);
    rlx_worker_stop(w, true);
}

/* With bidirectional attention the first token's row depends on the last token; causal not. */
static bool first_row_depends_on_last(const char *path)
{
    rlx_worker *w = start(path, 0, 4);
    if (!w) return false;
    int32_t a[6] = {1, 10, 11, 12, 13, 14}, b[6] = {1, 10, 11, 12, 13, 99};
    eres ra, rb;
    int rc;
    run_one(w, a, 6, true, -1, false, &ra, &rc);
    run_one(w, b, 6, true, -1, false, &rb, &rc);
    int32_t D = rlx_worker_n_embd(w);
    bool differs = memcmp(ra.v, rb.v, (size_t)D * sizeof(float)) != 0;
    bool last_differs = memcmp(ra.v + 5 * D, rb.v + 5 * D, (size_t)D * sizeof(float)) != 0;
    free(ra.v);
    free(rb.v);
    rlx_worker_stop(w, true);
    return differs && last_differs;
}

TEST(attention_mask_follows_the_model)
{
    const char *bi = model("--arch llama --preset tiny --pooling 1 --non-causal", "mean-bidir.gguf");
    const char *ca = model("--arch llama --preset tiny --pooling 1", "mean-causal.gguf");
    if (!bi || !ca) SKIP("rlxd-synth not built (RLX_BIN)");
    ASSERT(first_row_depends_on_last(bi));
    ASSERT(!first_row_depends_on_last(ca));
}

TEST(refusals_truncation_and_kinds)
{
    const char *p = model("--arch llama --preset tiny --pooling 2 --non-causal", "cls.gguf");
    const char *gen = model("--arch llama --preset tiny", "gen.gguf");
    if (!p || !gen) SKIP("rlxd-synth not built (RLX_BIN)");
    rlx_worker *w = start(p, 32, 4);
    ASSERT(w);
    ASSERT_EQ(rlx_worker_pooling(w), RLX_POOL_CLS);
    ASSERT_EQ(rlx_worker_embd_limit(w), 32);
    ecoll c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    eres r;
    eslot s = {&c, &r};
    rlx_error err = {0};
    int32_t ids[40];
    for (int i = 0; i < 40; i++) ids[i] = 5 + i;
    int32_t n33 = 33, n32 = 32, two[2] = {3, 3};
    /* too long, without truncate */
    ASSERT_EQ(submit(w, &c, embed_req(1, ids, &n33, 1, &s), &err), RLX_ETOOLONG);
    ASSERT(strstr(err.msg, "33 tokens") && strstr(err.msg, "32"));
    /* an empty input among others */
    ASSERT_EQ(submit(w, &c, embed_req(2, ids, two, 2, &s), &err), RLX_EINVAL);
    ASSERT(strstr(err.msg, "input 1"));
    /* an id outside the vocabulary */
    int32_t bad[2] = {1, 1 << 20}, n2 = 2;
    ASSERT_EQ(submit(w, &c, embed_req(3, bad, &n2, 1, &s), &err), RLX_EINVAL);
    /* a generation request to an embedding model */
    rlx_request *g = embed_req(4, ids, &n2, 1, &s);
    g->kind = RLX_REQ_GENERATE;
    ASSERT_EQ(submit(w, &c, g, &err), RLX_EINVAL);
    ASSERT(strstr(err.msg, "embedding model"));
    /* exactly the limit fits; truncation keeps the first 32 tokens */
    eres full, cut;
    int rc;
    run_one(w, ids, 32, false, 2, false, &full, &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(full.error, 0);
    run_one(w, ids, 40, false, 2, true, &cut, &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(cut.tokens[0], 32);
    ASSERT_EQ(cut.prompt_tokens, 32);
    ASSERT(!memcmp(full.v, cut.v, (size_t)rlx_worker_n_embd(w) * sizeof(float)));
    (void)n32;
    free(full.v);
    free(cut.v);
    rlx_worker_stop(w, true);

    /* an embedding request to a generative model */
    rlx_worker_config cfg = {.model_path = gen, .n_threads = 1, .max_seqs = 2};
    ASSERT_EQ(rlx_worker_start(&w, &cfg, &err), 0);
    ASSERT(!rlx_worker_embeds(w));
    ASSERT_EQ(rlx_worker_pooling(w), -1);
    ASSERT_EQ(submit(w, &c, embed_req(5, ids, &n2, 1, &s), &err), RLX_EINVAL);
    ASSERT(strstr(err.msg, "generates text"));
    rlx_worker_stop(w, true);
}

/* Coalescing (worker_embed.c rlx__embed_coalesce): after a step shared by several inputs, a
 * request followed 0.3 ms later by another runs in one step with it (the worker waits up to a
 * quarter of the last step, at most 4 ms, for the clients it answered). Steps of a MiniLM-shaped
 * encoder take milliseconds, so the window is wide; a scheduling hiccup can still split a
 * pair, so one of five attempts must share. Then inputs after steps of one input run alone. */
static uint64_t embd_steps(rlx_worker *w)
{
    rlx_worker_stats st;
    rlx_worker_get_stats(w, &st);
    return st.embd_steps;
}

TEST(steps_coalesce)
{
    if (getenv("RLX_MEMCHECK")) SKIP("a timing window: under valgrind every step is 50x slower (the sanitizer build runs it)");
    const char *vocab = rlx_test_shared("models/synth-bert-tiny-f32.gguf");
    if (!vocab) SKIP("../shared/models/synth-bert-tiny-f32.gguf absent");
    char args[600];
    snprintf(args, sizeof args, "--arch bert --preset minilm --pooling mean --type f32 --seed 3 --vocab-from '%s'", vocab);
    const char *p = model(args, "minilm.gguf");
    if (!p) SKIP("rlxd-synth not built (RLX_BIN)");
    rlx_worker_config cfg = {.model_path = p, .n_threads = 2, .max_seqs = 16, .n_ctx = 512, .max_batch_tokens = 512,
                             .max_queue = 64};
    rlx_worker *w = NULL;
    rlx_error err = {0};
    ASSERT_MSG(rlx_worker_start(&w, &cfg, &err) == 0, "%s", err.msg);
    ecoll c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    static eres rs[8];
    eslot sl[8];
    int32_t ids[16], end = 16;
    for (int k = 0; k < 16; k++) ids[k] = k ? 1000 + 37 * k : 101;
    int shared = 0;
    uint64_t id = 1;
    for (int attempt = 0; attempt < 5 && !shared; attempt++) {
        memset(rs, 0, sizeof rs);
        for (int i = 0; i < 4; i++) { /* a burst: steps of several inputs */
            sl[i] = (eslot){&c, &rs[i]};
            ASSERT_EQ(submit(w, &c, embed_req(id++, ids, &end, 1, &sl[i]), &err), 0);
        }
        wait_all(&c);
        uint64_t s0 = embd_steps(w);
        sl[4] = (eslot){&c, &rs[4]};
        sl[5] = (eslot){&c, &rs[5]};
        ASSERT_EQ(submit(w, &c, embed_req(id++, ids, &end, 1, &sl[4]), &err), 0);
        usleep(300);
        ASSERT_EQ(submit(w, &c, embed_req(id++, ids, &end, 1, &sl[5]), &err), 0);
        wait_all(&c);
        if (embd_steps(w) - s0 == 1) shared++;
        for (int i = 0; i < 6; i++) {
            ASSERT_EQ(rs[i].error, 0);
            ASSERT(rs[i].v && rs[i].n == rs[0].n && !memcmp(rs[i].v, rs[0].v, rs[0].n * sizeof *rs[0].v)); /* batch invariance */
        }
        for (int i = 0; i < 6; i++) free(rs[i].v);
    }
    fprintf(stderr, "  a request and one 0.3 ms later shared a step after %s\n", shared ? "a shared step" : "(never)");
    ASSERT(shared);
    /* a lone client: one input at a time, one step each */
    uint64_t s0 = embd_steps(w);
    for (int i = 0; i < 3; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        sl[i] = (eslot){&c, &rs[i]};
        ASSERT_EQ(submit(w, &c, embed_req(id++, ids, &end, 1, &sl[i]), &err), 0);
        wait_all(&c);
        ASSERT_EQ(rs[i].error, 0);
        free(rs[i].v);
    }
    ASSERT_EQ(embd_steps(w) - s0, 3);
    rlx_worker_stop(w, true);
}

TEST(cancel_and_stop)
{
    const char *p = model("--arch llama --preset tiny --pooling 1 --non-causal", "mean-bidir.gguf");
    if (!p) SKIP("rlxd-synth not built (RLX_BIN)");
    rlx_worker *w = start(p, 0, 1); /* 20 requests of 4 inputs of 40 tokens: they queue */
    ASSERT(w);
    ecoll c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    static eres rs[20];
    memset(rs, 0, sizeof rs);
    eslot sl[20];
    rlx_error err = {0};
    static int32_t ids[20 * 40];
    int32_t ends[20];
    for (int i = 0; i < 20; i++) {
        for (int k = 0; k < 40; k++) ids[i * 40 + k] = 3 + (i + k) % 200;
        ends[i] = (i + 1) * 40;
    }
    for (int i = 0; i < 20; i++) {
        sl[i] = (eslot){&c, &rs[i]};
        ASSERT_EQ(submit(w, &c, embed_req((uint64_t)i + 1, ids, ends, 4, &sl[i]), &err), 0);
    }
    rlx_worker_cancel(w, 20);
    wait_all(&c);
    ASSERT_EQ(rs[19].finish, RLX_FINISH_CANCELLED);
    ASSERT(!rs[19].v);
    ASSERT_EQ(rs[0].error, 0);
    ASSERT_EQ(rs[0].n_inputs, 4);
    for (int i = 0; i < 20; i++) free(rs[i].v);
    /* stop without draining: queued requests end cancelled */
    for (int i = 0; i < 5; i++) {
        sl[i] = (eslot){&c, &rs[i]};
        memset(&rs[i], 0, sizeof rs[i]);
        ASSERT_EQ(submit(w, &c, embed_req((uint64_t)i + 100, ids, ends, 4, &sl[i]), &err), 0);
    }
    rlx_worker_stop(w, false);
    ASSERT_EQ(c.pending, 0);
    for (int i = 0; i < 5; i++) {
        ASSERT(rs[i].done);
        free(rs[i].v);
    }
}

/* The worker's vectors for an encoder (16 texts, one request, batched with each other) are those
 * of rlx_embed_step computing each text alone, bit for bit; per-token rows too. */
static void same_as_embed_step(const char *stem)
{
    char rel[128];
    snprintf(rel, sizeof rel, "models/%s.gguf", stem);
    const char *path = rlx_test_shared(rel);
    if (!path) SKIP("../shared/%s absent", rel);
    rlx_worker *w = start(path, 0, 4);
    ASSERT(w);
    rlx_runner_config rc = {.model_path = path, .max_seqs = 4, .max_batch_tokens = 512, .backend = {.name = "cpu", .n_threads = 2}};
    rlx_runner *r = NULL;
    rlx_error err = {0};
    ASSERT_MSG(rlx_runner_open(&r, &rc, &err) == 0, "%s", err.msg);
    const rlx_tokenizer *tok = rlx_worker_tokenizer(w);
    rlx_pooling pool = (rlx_pooling)rlx_worker_pooling(w);
    ASSERT_EQ(pool, rlx_embed_default_pooling(r));
    int64_t D = rlx_embed_dim(r, pool == RLX_POOL_NONE ? RLX_POOL_MEAN : pool);
    static int32_t all[16 * 64];
    int32_t ends[16], total = 0;
    for (int i = 0; i < 16; i++) {
        char text[160];
        snprintf(text, sizeof text, "Text %d: the quick brown fox %s jumps over %d lazy dogs.", i, i % 2 ? "never" : "often", i * 3);
        int32_t *ids = NULL;
        size_t n = 0;
        ASSERT_EQ(rlx_tokenize(tok, text, strlen(text), true, true, &ids, &n, &err), 0);
        ASSERT(n <= 64);
        memcpy(all + total, ids, n * sizeof *ids);
        free(ids);
        total += (int32_t)n;
        ends[i] = total;
    }
    for (int per_token = 0; per_token < 2; per_token++) {
        ecoll c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
        eres res;
        memset(&res, 0, sizeof res);
        eslot sl = {&c, &res};
        rlx_request *q = embed_req(1, all, ends, 16, &sl);
        q->embd_per_token = per_token;
        ASSERT_EQ(submit(w, &c, q, &err), 0);
        wait_all(&c);
        ASSERT_EQ(res.error, 0);
        const float *v = res.v;
        for (int i = 0; i < 16; i++) {
            int32_t a = i ? ends[i - 1] : 0, n = ends[i] - a;
            rlx_embed_seq in = {all + a, n};
            rlx_pooling p = per_token ? RLX_POOL_NONE : pool;
            size_t m = p == RLX_POOL_NONE ? (size_t)n * (size_t)r->out_cols : (size_t)D;
            float *want = malloc(m * sizeof *want);
            ASSERT_MSG(rlx_embed_step(r, &in, 1, p, 2, want, &err) == 0, "%s", err.msg);
            ASSERT_MSG(!memcmp(v, want, m * sizeof *want), "%s text %d (%s): worker != rlx_embed_step", stem, i,
                       per_token ? "per token" : rlx_pooling_name(p));
            free(want);
            v += m;
        }
        ASSERT_EQ((size_t)(v - res.v), res.n);
        free(res.v);
    }
    rlx_runner_close(r);
    rlx_worker_stop(w, true);
}

TEST(bert_as_embed_step) { same_as_embed_step("synth-bert-tiny-f32"); }
TEST(bert_cls_as_embed_step) { same_as_embed_step("synth-bert-cls-tiny-f32"); }
TEST(nomic_bert_as_embed_step) { same_as_embed_step("synth-nomic-bert-tiny-f32"); }

/* A reranker (bert given a cls head, pooling rank): the worker's scores are rlx_embed_step's, and
 * a decoder declaring rank (no head) is refused at start. */
TEST(rank_scores)
{
    const char *src = rlx_test_shared("models/synth-bert-tiny-f32.gguf");
    char path[512];
    if (!src || !synth("--arch llama --preset tiny --pooling 4", "rank-decoder.gguf", path, sizeof path))
        SKIP("../shared's bert or rlxd-synth absent");
    rlx_worker *w = NULL;
    rlx_error err = {0};
    rlx_worker_config cfg = {.model_path = path, .n_threads = 1, .max_seqs = 2};
    ASSERT_EQ(rlx_worker_start(&w, &cfg, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "classifier head"), "%s", err.msg);
    static float cw[64 * 64], cb[64], ow[64], ob[1] = {-0.5f};
    uint32_t seed = 11;
    for (int i = 0; i < 64 * 64; i++) { seed = seed * 1664525u + 1013904223u; cw[i] = ((int)(seed >> 9) % 2001 - 1000) / 8000.0f; }
    for (int i = 0; i < 64; i++) { seed = seed * 1664525u + 1013904223u; cb[i] = ((int)(seed >> 9) % 2001 - 1000) / 4000.0f; }
    for (int i = 0; i < 64; i++) { seed = seed * 1664525u + 1013904223u; ow[i] = ((int)(seed >> 9) % 2001 - 1000) / 2000.0f; }
    snprintf(path + strlen(path) - strlen("rank-decoder.gguf"), 32, "rank-bert.gguf");
    ASSERT_MSG(derive(src, path, 4, false, cw, cb, ow, ob, &err) == 0, "%s", err.msg);
    w = start(path, 0, 4);
    ASSERT(w);
    ASSERT_EQ(rlx_worker_pooling(w), RLX_POOL_RANK);
    rlx_runner_config rc = {.model_path = path, .max_seqs = 4, .max_batch_tokens = 512, .backend = {.name = "cpu", .n_threads = 2}};
    rlx_runner *r = NULL;
    ASSERT_MSG(rlx_runner_open(&r, &rc, &err) == 0, "%s", err.msg);
    const int32_t ids[9] = {101, 7592, 2088, 1010, 2003, 102, 101, 4248, 102};
    int32_t ends[2] = {6, 9};
    ecoll c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    eres res;
    memset(&res, 0, sizeof res);
    eslot sl = {&c, &res};
    ASSERT_EQ(submit(w, &c, embed_req(1, ids, ends, 2, &sl), &err), 0);
    wait_all(&c);
    ASSERT_EQ(res.error, 0);
    ASSERT_EQ(res.dim, 1);
    ASSERT_EQ(res.n, 2);
    rlx_embed_seq in[2] = {{ids, 6}, {ids + 6, 3}};
    float want[2];
    ASSERT_MSG(rlx_embed_step(r, in, 2, RLX_POOL_RANK, 2, want, &err) == 0, "%s", err.msg);
    ASSERT_MSG(!memcmp(res.v, want, sizeof want), "scores %.9g %.9g vs %.9g %.9g", res.v[0], res.v[1], want[0], want[1]);
    ASSERT(res.v[0] != res.v[1]);
    free(res.v);
    rlx_runner_close(r);
    rlx_worker_stop(w, true);
}

TEST_MAIN(TEST_ENTRY(rank_scores), TEST_ENTRY(steps_coalesce), TEST_ENTRY(bert_as_embed_step), TEST_ENTRY(bert_cls_as_embed_step), TEST_ENTRY(nomic_bert_as_embed_step),
          TEST_ENTRY(batch_invariance_mean_bidirectional), TEST_ENTRY(batch_invariance_last_causal),
          TEST_ENTRY(pooling_and_normalization), TEST_ENTRY(attention_mask_follows_the_model),
          TEST_ENTRY(refusals_truncation_and_kinds), TEST_ENTRY(cancel_and_stop))
