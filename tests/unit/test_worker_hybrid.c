/* test_worker_hybrid.c - the scheduler on a hybrid recurrent model (synth-qwen35-tiny-f32 from
 * ../shared: gated DeltaNet layers with state slots beside paged-KV attention layers):
 *   - 16 concurrent requests (greedy, and seeded sampling) give exactly their solo outputs;
 *   - preemption under a tiny KV pool (slots freed, prompts recomputed) changes nothing;
 *   - prompts sharing a prefix share nothing (a recurrent state cannot be cut back), and
 *     still give their solo outputs;
 *   - every state slot is back when a request is done: the concurrent set reuses the worker of
 *     the solo set, with exactly N_REQ slots (a leaked slot would leave a request waiting). */
#include "tests/rlx_test.h"
#include "engine/engine.h"

#include <pthread.h>

#define MAX_GEN 32
#define N_REQ 16

typedef struct result {
    int32_t tokens[MAX_GEN];
    int n;
    rlx_finish_reason finish;
    rlx_usage usage;
    int error;
} result;

typedef struct collector {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
    result *res;
} collector;

typedef struct slot { collector *c; int idx; } slot;

static void on_event(void *user, const rlx_event *ev)
{
    slot *s = user;
    collector *c = s->c;
    pthread_mutex_lock(&c->mu);
    result *r = &c->res[s->idx];
    if (ev->type == RLX_EV_TOKEN && r->n < MAX_GEN) r->tokens[r->n++] = ev->token;
    if (ev->type != RLX_EV_TOKEN) {
        r->finish = ev->finish;
        r->usage = ev->usage;
        r->error = ev->type == RLX_EV_ERROR ? ev->error_code : 0;
        c->pending--;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
}

static rlx_worker *start(int32_t max_seqs, int32_t kv_blocks)
{
    const char *m = rlx_test_shared("models/synth-qwen35-tiny-f32.gguf");
    if (!m) return NULL;
    rlx_worker_config cfg = {.model_path = m, .n_threads = 2, .max_seqs = max_seqs, .max_batch_tokens = 128, .max_queue = 64,
                             .kv_block = 16, .kv_blocks = kv_blocks, .n_ctx = 256};
    rlx_worker *w = NULL;
    rlx_error err = {0};
    if (rlx_worker_start(&w, &cfg, &err)) { fprintf(stderr, "start: %s\n", err.msg); return NULL; }
    return w;
}

/* prompt i: 5 to 61 ordinary token ids; with shared, the first 40 are the same for all */
static void make_prompt(int i, bool shared, int32_t *ids, size_t *n)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1), y = 0x2545F4914F6CDD1DULL;
    *n = shared ? 41 + (size_t)(i * 5 % 20) : 5 + (size_t)(i * 7 % 57);
    for (size_t k = 0; k < *n; k++) {
        uint64_t *s = shared && k < 40 ? &y : &x;
        *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
        ids[k] = 100 + (int32_t)(*s % 150000);
    }
}

static void wait_all(collector *c)
{
    pthread_mutex_lock(&c->mu);
    while (c->pending > 0) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

/* N_REQ requests one at a time or all at once; odd ones sample with a seed */
static void run_set(rlx_worker *w, bool together, bool shared, result *res)
{
    collector c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, res};
    slot slots[N_REQ];
    memset(res, 0, sizeof(result) * N_REQ);
    for (int i = 0; i < N_REQ; i++) {
        int32_t ids[64];
        size_t n;
        make_prompt(i, shared, ids, &n);
        slots[i] = (slot){&c, i};
        rlx_request *r = rlx_request_new();
        r->id = (uint64_t)i + 1;
        r->prompt_ids = malloc(n * sizeof *ids);
        memcpy(r->prompt_ids, ids, n * sizeof *ids);
        r->n_prompt = n;
        r->max_tokens = 12 + i % 9;
        r->ignore_eos = true;
        r->sampling.temperature = 0;
        if (i % 2) { r->sampling.temperature = 0.8f; r->sampling.seed = 500 + (uint64_t)i; r->sampling.has_seed = true; }
        r->on_event = on_event;
        r->user = &slots[i];
        pthread_mutex_lock(&c.mu);
        c.pending++;
        pthread_mutex_unlock(&c.mu);
        rlx_error err = {0};
        if (rlx_worker_submit(w, r, &err)) {
            fprintf(stderr, "submit: %s\n", err.msg);
            pthread_mutex_lock(&c.mu);
            res[i].error = err.code;
            c.pending--;
            pthread_mutex_unlock(&c.mu);
        }
        if (!together) wait_all(&c);
    }
    wait_all(&c);
}

static void expect_same(const result *solo, const result *other)
{
    for (int i = 0; i < N_REQ; i++) {
        ASSERT_EQ(solo[i].error, 0);
        ASSERT_EQ(other[i].error, 0);
        ASSERT_EQ(solo[i].n, 12 + i % 9);
        ASSERT_EQ(other[i].n, solo[i].n);
        ASSERT_EQ(other[i].finish, RLX_FINISH_LENGTH);
        for (int k = 0; k < solo[i].n; k++) ASSERT_MSG(other[i].tokens[k] == solo[i].tokens[k], "request %d token %d: %d, solo %d",
                                                       i, k, other[i].tokens[k], solo[i].tokens[k]);
    }
}

static void expect_no_sharing(rlx_worker *w)
{
    rlx_worker_stats st;
    rlx_worker_get_stats(w, &st);
    ASSERT_EQ(st.prefix_hits, 0); /* a model with recurrent state shares no prefix */
    ASSERT_EQ(st.state_slots_total, N_REQ);
    ASSERT(st.state_slots_used >= 0 && st.state_slots_used <= N_REQ);
}

TEST(concurrent_equal_solo)
{
    rlx_worker *w = start(N_REQ, 0);
    if (!w) SKIP("../shared/models/synth-qwen35-tiny-f32.gguf absent");
    static result solo[N_REQ], batch[N_REQ];
    run_set(w, false, false, solo);
    run_set(w, true, false, batch);
    expect_same(solo, batch);
    expect_no_sharing(w);
    rlx_worker_stop(w, true);
}

TEST(shared_prefixes_recomputed)
{
    rlx_worker *w = start(N_REQ, 0);
    if (!w) SKIP("../shared/models/synth-qwen35-tiny-f32.gguf absent");
    static result solo[N_REQ], batch[N_REQ];
    run_set(w, false, true, solo);
    run_set(w, true, true, batch);
    expect_same(solo, batch);
    for (int i = 0; i < N_REQ; i++) ASSERT_EQ(batch[i].usage.cached_tokens, 0);
    expect_no_sharing(w);
    rlx_worker_stop(w, true);
}

TEST(preemption_keeps_outputs)
{
    rlx_worker *w = start(N_REQ, 0);
    if (!w) SKIP("../shared/models/synth-qwen35-tiny-f32.gguf absent");
    static result solo[N_REQ], tight[N_REQ];
    run_set(w, false, false, solo);
    rlx_worker_stop(w, true);
    /* 12 blocks of 16 positions for 16 sequences of up to 81 positions */
    w = start(N_REQ, 12);
    ASSERT(w != NULL);
    run_set(w, true, false, tight);
    rlx_worker_stats st;
    rlx_worker_get_stats(w, &st);
    fprintf(stderr, "  preemptions: %llu\n", (unsigned long long)st.preemptions);
    ASSERT(st.preemptions > 0);
    expect_same(solo, tight);
    expect_no_sharing(w);
    rlx_worker_stop(w, true);
}

TEST_MAIN(TEST_ENTRY(concurrent_equal_solo), TEST_ENTRY(shared_prefixes_recomputed), TEST_ENTRY(preemption_keeps_outputs))
