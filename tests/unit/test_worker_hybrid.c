/* test_worker_hybrid.c - the scheduler on a hybrid recurrent model (synth-qwen35-tiny-f32 from
 * ../shared: gated DeltaNet layers with state slots beside paged-KV attention layers):
 *   - 16 concurrent requests (greedy, and seeded sampling) give exactly their solo outputs;
 *   - preemption under a tiny KV pool (slots freed, prompts recomputed) changes nothing;
 *   - without state checkpoints prompts sharing a prefix share nothing (a recurrent state
 *     cannot be cut back); with them the shared prefix is computed once: the first request
 *     checkpoints its state at its prompt's end rounded down to a block, the 15 others start
 *     there, and every output equals the one computed from position 0;
 *   - a session's second turn starts from the checkpoint at its first prompt's end rounded down
 *     to a block (cached tokens in usage) and gives exactly the output of the whole text
 *     computed fresh, greedy and seeded;
 *   - every state slot is back when a request is done: the concurrent set reuses the worker of
 *     the solo set, with exactly N_REQ slots (a leaked slot would leave a request waiting). */
#include "tests/rlx_test.h"
#include "engine/engine.h"
#include "tests/unit/test_worker_util.h"

#include <pthread.h>

#define MAX_GEN 32 /* <= TW_MAX_GEN, the tokens a result keeps */
#define N_REQ 16

typedef tw_result result;
typedef tw_collector collector;
typedef tw_slot slot;

/* cache_mib: the state checkpoint budget (-1: none; 0: the default) */
static rlx_worker *start(int32_t max_seqs, int32_t kv_blocks, int64_t cache_mib)
{
    const char *m = rlx_test_shared("models/synth-qwen35-tiny-f32.gguf");
    if (!m) return NULL;
    rlx_worker_config cfg = {.model_path = m, .n_threads = 2, .max_seqs = max_seqs, .max_batch_tokens = 128, .max_queue = 64,
                             .kv_block = 16, .kv_blocks = kv_blocks, .n_ctx = 256, .state_cache_mib = cache_mib};
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

/* N_REQ requests one at a time or all at once; odd ones sample with a seed */
static void run_set(rlx_worker *w, bool together, bool shared, result *res)
{
    collector c = TW_COLLECTOR(0, res);
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
        r->on_event = tw_on_event;
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
        if (!together) tw_wait_all(&c);
    }
    tw_wait_all(&c);
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
    rlx_worker *w = start(N_REQ, 0, -1);
    if (!w) SKIP("../shared/models/synth-qwen35-tiny-f32.gguf absent");
    static result solo[N_REQ], batch[N_REQ];
    run_set(w, false, false, solo);
    run_set(w, true, false, batch);
    expect_same(solo, batch);
    expect_no_sharing(w);
    rlx_worker_stop(w, true);
}

TEST(shared_prefixes_recomputed_without_checkpoints)
{
    rlx_worker *w = start(N_REQ, 0, -1);
    if (!w) SKIP("../shared/models/synth-qwen35-tiny-f32.gguf absent");
    static result solo[N_REQ], batch[N_REQ];
    run_set(w, false, true, solo);
    run_set(w, true, true, batch);
    expect_same(solo, batch);
    for (int i = 0; i < N_REQ; i++) ASSERT_EQ(batch[i].usage.cached_tokens, 0);
    expect_no_sharing(w);
    rlx_worker_stop(w, true);
}

/* Every prompt starts with the same 40 tokens; the first (41 tokens) stops its first chunk at
 * 32 (its end rounded down to a block of 16) and checkpoints its state there; the others wait
 * for that block and start at 32. The reference is a worker without checkpoints. */
TEST(shared_prefix_computed_once)
{
    rlx_worker *w = start(N_REQ, 0, -1);
    if (!w) SKIP("../shared/models/synth-qwen35-tiny-f32.gguf absent");
    static result ref[N_REQ], batch[N_REQ], again[N_REQ];
    run_set(w, false, true, ref);
    rlx_worker_stop(w, true);
    w = start(N_REQ, 0, 0);
    ASSERT(w != NULL);
    run_set(w, true, true, batch);
    expect_same(ref, batch);
    rlx_worker_stats st;
    rlx_worker_get_stats(w, &st);
    fprintf(stderr, "  prefix hits %llu, checkpoints %d (%llu bytes), restores %llu\n", (unsigned long long)st.prefix_hits,
            st.state_ckpt_entries, (unsigned long long)st.state_ckpt_bytes, (unsigned long long)st.state_ckpt_hits);
    ASSERT_EQ(batch[0].usage.cached_tokens, 0);
    for (int i = 1; i < N_REQ; i++) ASSERT_MSG(batch[i].usage.cached_tokens == 32, "request %d: %d cached", i,
                                               batch[i].usage.cached_tokens);
    ASSERT_EQ(st.prefix_hits, 32 * (N_REQ - 1));
    ASSERT_EQ(st.state_ckpt_hits, N_REQ - 1);
    ASSERT(st.state_ckpt_entries > 0 && st.state_ckpt_bytes > 0);
    /* the same prompts one at a time, now with every prompt's own checkpoint held: each starts
     * at its own end rounded down to a block, and still gives the same tokens */
    run_set(w, false, true, again);
    expect_same(ref, again);
    for (int i = 0; i < N_REQ; i++) {
        size_t n;
        int32_t ids[64];
        make_prompt(i, true, ids, &n);
        ASSERT_EQ(again[i].usage.cached_tokens, (int32_t)((n - 1) / 16 * 16));
    }
    rlx_worker_stop(w, true);
}

TEST(preemption_keeps_outputs)
{
    rlx_worker *w = start(N_REQ, 0, -1);
    if (!w) SKIP("../shared/models/synth-qwen35-tiny-f32.gguf absent");
    static result solo[N_REQ], tight[N_REQ];
    run_set(w, false, true, solo);
    rlx_worker_stop(w, true);
    /* 12 blocks of 16 positions for 16 sequences of up to 81 positions; with checkpoints, so a
     * preempted sequence may come back at one */
    w = start(N_REQ, 12, 0);
    ASSERT(w != NULL);
    run_set(w, true, true, tight);
    rlx_worker_stats st;
    rlx_worker_get_stats(w, &st);
    fprintf(stderr, "  preemptions: %llu, restores %llu\n", (unsigned long long)st.preemptions,
            (unsigned long long)st.state_ckpt_hits);
    ASSERT(st.preemptions > 0);
    expect_same(solo, tight);
    ASSERT_EQ(st.state_slots_total, N_REQ);
    ASSERT(st.state_slots_used >= 0 && st.state_slots_used <= N_REQ);
    rlx_worker_stop(w, true);
}

/* One request on w: ids, then its tokens and usage; with a session id when sid. */
static void one(rlx_worker *w, const char *sid, const int32_t *ids, size_t n, int32_t max_tokens, bool seeded, result *res)
{
    collector c = TW_COLLECTOR(1, res);
    slot sl = {&c, 0};
    memset(res, 0, sizeof *res);
    rlx_request *r = rlx_request_new();
    r->id = 99;
    r->prompt_ids = malloc(n * sizeof *ids);
    memcpy(r->prompt_ids, ids, n * sizeof *ids);
    r->n_prompt = n;
    r->max_tokens = max_tokens;
    r->ignore_eos = true;
    r->sampling.temperature = 0;
    if (seeded) { r->sampling.temperature = 0.9f; r->sampling.seed = 4242; r->sampling.has_seed = true; }
    if (sid) r->session_id = strdup(sid);
    r->on_event = tw_on_event;
    r->user = &sl;
    rlx_error err = {0};
    if (rlx_worker_submit(w, r, &err)) {
        fprintf(stderr, "submit: %s\n", err.msg);
        res->error = err.code ? err.code : -1;
        return;
    }
    tw_wait_all(&c);
}

static void session_turns(bool seeded)
{
    rlx_worker *w = start(4, 0, 0), *ref = start(4, 0, -1);
    if (!w || !ref) SKIP("../shared/models/synth-qwen35-tiny-f32.gguf absent");
    int32_t p1[64], p2[64], all[128];
    size_t n1, n2;
    make_prompt(3, false, p1, &n1); /* 26 tokens */
    make_prompt(5, false, p2, &n2); /* 40 tokens */
    result t1, t2, fresh;
    one(w, "conv", p1, n1, 30, false, &t1);
    ASSERT_EQ(t1.error, 0);
    ASSERT_EQ(t1.n, 30);
    ASSERT_EQ(t1.usage.cached_tokens, 0);
    one(w, "conv", p2, n2, 12, seeded, &t2);
    ASSERT_EQ(t2.error, 0);
    /* the whole text, computed from position 0 by a worker without checkpoints */
    size_t n = 0;
    memcpy(all, p1, n1 * sizeof *all); n += n1;
    memcpy(all + n, t1.tokens, (size_t)t1.n * sizeof *all); n += (size_t)t1.n;
    memcpy(all + n, p2, n2 * sizeof *all); n += n2;
    one(ref, NULL, all, n, 12, seeded, &fresh);
    ASSERT_EQ(fresh.error, 0);
    int32_t hist = (int32_t)n1 + t1.n;
    fprintf(stderr, "  history %d, turn 2 prompt %d, cached %d\n", hist, t2.usage.prompt_tokens, t2.usage.cached_tokens);
    ASSERT_EQ(t2.usage.prompt_tokens, (int32_t)n);
    /* the first turn's prompt end rounded down to a block: the generated tokens after it are
     * recomputed as prompt tokens, as the fresh run computes them */
    ASSERT_EQ(t2.usage.cached_tokens, ((int32_t)n1 - 1) / 16 * 16);
    ASSERT(t2.usage.cached_tokens > 0 && hist > t2.usage.cached_tokens);
    ASSERT_EQ(t2.n, 12);
    ASSERT_EQ(fresh.n, 12);
    for (int k = 0; k < 12; k++) ASSERT_MSG(t2.tokens[k] == fresh.tokens[k], "token %d: %d, fresh %d", k, t2.tokens[k],
                                            fresh.tokens[k]);
    rlx_worker_stop(w, true);
    rlx_worker_stop(ref, true);
}

TEST(session_second_turn_greedy) { session_turns(false); }
TEST(session_second_turn_seeded) { session_turns(true); }

TEST_MAIN(TEST_ENTRY(concurrent_equal_solo), TEST_ENTRY(shared_prefixes_recomputed_without_checkpoints),
          TEST_ENTRY(shared_prefix_computed_once), TEST_ENTRY(preemption_keeps_outputs),
          TEST_ENTRY(session_second_turn_greedy), TEST_ENTRY(session_second_turn_seeded))
