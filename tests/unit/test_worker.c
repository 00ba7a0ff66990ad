/* test_worker.c - the scheduler: continuous batching is invisible in the outputs (batch
 * invariance), preemption loses nothing, shared prefixes are computed once, cancellation,
 * admission control. Runs on stories260K from ../shared. */
#include "tests/rlx_test.h"
#include "engine/engine.h"
#include "tests/unit/test_worker_util.h"

#include <pthread.h>

#define MAX_GEN 64 /* <= TW_MAX_GEN */

typedef tw_result result;
typedef tw_collector collector;
typedef tw_slot slot;

static rlx_worker *start_kv(int32_t max_seqs, size_t kv_mib, int32_t kv_blocks, int kv_type)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) return NULL;
    rlx_worker_config cfg = {.model_path = m, .n_threads = 2, .max_seqs = max_seqs, .kv_mem_mib = kv_mib,
                             .max_batch_tokens = 256, .max_queue = 64, .kv_block = 16, .kv_blocks = kv_blocks,
                             .kv_type = kv_type, .kv_type_set = true};
    rlx_worker *w = NULL;
    rlx_error err = {0};
    if (rlx_worker_start(&w, &cfg, &err)) { fprintf(stderr, "start: %s\n", err.msg); return NULL; }
    return w;
}

static rlx_worker *start(int32_t max_seqs, size_t kv_mib, int32_t kv_blocks)
{
    return start_kv(max_seqs, kv_mib, kv_blocks, RLX_F16);
}

static void make_prompt(int i, int32_t *ids, size_t *n)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
    *n = 4 + (size_t)(i * 7 % 37);
    ids[0] = 1;
    for (size_t k = 1; k < *n; k++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        ids[k] = 3 + (int32_t)(x % 509);
    }
}

static rlx_request *new_req(int i, slot *sl, int32_t max_tokens, const int32_t *ids, size_t n)
{
    rlx_request *r = rlx_request_new();
    r->id = (uint64_t)i + 1;
    r->prompt_ids = malloc(n * sizeof *ids);
    memcpy(r->prompt_ids, ids, n * sizeof *ids);
    r->n_prompt = n;
    r->max_tokens = max_tokens;
    r->ignore_eos = true;
    r->sampling.temperature = 0;
    r->on_event = tw_on_event;
    r->user = sl;
    return r;
}

#define N_REQ 32

/* runs N_REQ prompts either one at a time or all at once; seeded sampling for odd ones */
static void run_set(rlx_worker *w, bool together, result *res)
{
    collector c = TW_COLLECTOR(0, res);
    slot slots[N_REQ];
    memset(res, 0, sizeof(result) * N_REQ);
    for (int i = 0; i < N_REQ; i++) {
        int32_t ids[64];
        size_t n;
        make_prompt(i, ids, &n);
        slots[i] = (slot){&c, i};
        rlx_request *r = new_req(i, &slots[i], 24 + i % 9, ids, n);
        if (i % 2) { r->sampling.temperature = 0.8f; r->sampling.seed = 1000 + (uint64_t)i; r->sampling.has_seed = true; }
        pthread_mutex_lock(&c.mu);
        c.pending++;
        pthread_mutex_unlock(&c.mu);
        rlx_error err = {0};
        if (rlx_worker_submit(w, r, &err)) { fprintf(stderr, "submit: %s\n", err.msg); res[i].error = err.code; c.pending--; }
        if (!together) tw_wait_all(&c);
    }
    tw_wait_all(&c);
}

/* The batched run gets a fresh worker: on the solo run's worker it would find every prompt's
 * blocks cached and compute less than it would cold. */
static void batching_is_invisible_with(int kv_type)
{
    rlx_worker *w = start_kv(32, 0, 0, kv_type);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    static result solo[N_REQ], batch[N_REQ];
    run_set(w, false, solo);
    rlx_worker_stop(w, true);
    w = start_kv(32, 0, 0, kv_type);
    ASSERT(w != NULL);
    run_set(w, true, batch);
    rlx_worker_stats st;
    rlx_worker_get_stats(w, &st);
    ASSERT_EQ(st.prefix_hits, 0); /* nothing was reused: every prompt was computed in the batch */
    for (int i = 0; i < N_REQ; i++) {
        ASSERT_EQ(solo[i].error, 0);
        ASSERT_EQ(batch[i].error, 0);
        ASSERT_EQ(solo[i].n, 24 + i % 9);
        ASSERT_EQ(batch[i].n, solo[i].n);
        ASSERT_EQ(batch[i].finish, RLX_FINISH_LENGTH);
        for (int k = 0; k < solo[i].n; k++) ASSERT_EQ(batch[i].tokens[k], solo[i].tokens[k]);
    }
    rlx_worker_stop(w, true);
}

TEST(batching_is_invisible) { batching_is_invisible_with(RLX_F16); }
TEST(batching_is_invisible_q8_0_kv) { batching_is_invisible_with(RLX_Q8_0); }

/* kv_type is used only with kv_type_set: RLX_F32 is 0, the value of a zeroed config */
TEST(kv_type_selection)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) SKIP("../shared/models/stories260K.gguf absent");
    static const struct { int type; bool set; int want; } cases[] = {
        {0, false, RLX_F16}, {RLX_F32, true, RLX_F32}, {RLX_F16, true, RLX_F16}, {RLX_Q8_0, true, RLX_Q8_0},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(cases); i++) {
        rlx_worker_config cfg = {.model_path = m, .n_threads = 1, .max_seqs = 2, .kv_blocks = 8, .kv_block = 8,
                                 .kv_type = cases[i].type, .kv_type_set = cases[i].set};
        rlx_worker *w = NULL;
        rlx_error err = {0};
        ASSERT_EQ(rlx_worker_start(&w, &cfg, &err), 0);
        int type = -1;
        int32_t bs = 0, nb = 0;
        rlx_worker_kv_layout(w, &type, &bs, &nb);
        ASSERT_EQ(type, cases[i].want);
        ASSERT_EQ(bs, 8);
        ASSERT_EQ(nb, 8);
        rlx_worker_stop(w, true);
    }
}

TEST(preemption_keeps_outputs)
{
    rlx_worker *w = start(32, 0, 0);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    static result solo[N_REQ], tight[N_REQ];
    run_set(w, false, solo);
    rlx_worker_stop(w, true);
    /* 40 blocks of 16 slots for 32 sequences needing ~100 blocks at once */
    w = start(32, 0, 40);
    ASSERT(w != NULL);
    run_set(w, true, tight);
    rlx_worker_stats st;
    rlx_worker_get_stats(w, &st);
    fprintf(stderr, "  preemptions: %llu\n", (unsigned long long)st.preemptions);
    ASSERT(st.preemptions > 0);
    for (int i = 0; i < N_REQ; i++) {
        ASSERT_EQ(tight[i].error, 0);
        ASSERT_EQ(tight[i].n, solo[i].n);
        for (int k = 0; k < solo[i].n; k++) ASSERT_EQ(tight[i].tokens[k], solo[i].tokens[k]);
    }
    rlx_worker_stop(w, true);
}

TEST(shared_prefix_computed_once)
{
    rlx_worker *w = start(4, 0, 0);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    int32_t ids[220];
    ids[0] = 1;
    for (int k = 1; k < 220; k++) ids[k] = 3 + (k * 37) % 500;
    static result res[2];
    collector c = TW_COLLECTOR(0, res);
    slot sl[2] = {{&c, 0}, {&c, 1}};
    for (int i = 0; i < 2; i++) {
        ids[210] = 7 + i; /* same 200-token prefix, different tails */
        c.pending = 1;
        rlx_error err = {0};
        ASSERT_EQ(rlx_worker_submit(w, new_req(i, &sl[i], 8, ids, 220), &err), 0);
        tw_wait_all(&c);
    }
    ASSERT_EQ(res[0].usage.cached_tokens, 0);
    ASSERT(res[1].usage.cached_tokens >= 192);
    ASSERT_EQ(res[1].usage.prompt_tokens, 220);
    rlx_worker_stats st;
    rlx_worker_get_stats(w, &st);
    ASSERT_EQ(st.prefix_queries, 440);
    ASSERT_EQ(st.prefix_hits, (uint64_t)res[1].usage.cached_tokens);
    rlx_worker_stop(w, true);
}

/* A prompt holding an earlier request's prompt and part of its answer gets exactly the numbers
 * a fresh worker gives it: the answer's blocks (computed as generated tokens, whose K/V differ
 * in the last bits) are not reused as prompt tokens; the earlier prompt's blocks are. The old
 * cache reused both: logprobs differed by ~1e-6 here (greedy tokens flipped on Q4_K weights). */
TEST(generated_blocks_not_reused_as_prompt)
{
    rlx_worker *w = start(4, 0, 0);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    int32_t ids[128];
    size_t n = 21;
    ids[0] = 1;
    for (size_t k = 1; k < n; k++) ids[k] = 3 + (int32_t)((k * 131) % 500);
    static result res[3];
    collector c = TW_COLLECTOR(0, res);
    slot sl[3] = {{&c, 0}, {&c, 1}, {&c, 2}};
    rlx_error err = {0};
    c.pending = 1;
    ASSERT_EQ(rlx_worker_submit(w, new_req(0, &sl[0], 60, ids, n), &err), 0);
    tw_wait_all(&c);
    ASSERT_EQ(res[0].n, 60);
    memcpy(ids + n, res[0].tokens, 43 * sizeof *ids); /* the prompt and 43 of its tokens: 64 */
    for (int i = 1; i < 3; i++) {
        if (i == 2) { /* the same prompt on a fresh worker */
            rlx_worker_stop(w, true);
            w = start(4, 0, 0);
            ASSERT(w);
        }
        c.pending = 1;
        rlx_request *r = new_req(i, &sl[i], 20, ids, n + 43);
        r->top_logprobs = 0;
        ASSERT_EQ(rlx_worker_submit(w, r, &err), 0);
        tw_wait_all(&c);
    }
    ASSERT_EQ(res[1].usage.cached_tokens, 16); /* the first prompt's one full block of prompt tokens */
    ASSERT_EQ(res[2].usage.cached_tokens, 0);
    ASSERT_EQ(res[1].n, 20);
    ASSERT_EQ(res[2].n, 20);
    ASSERT(memcmp(res[1].tokens, res[2].tokens, 20 * sizeof *res[1].tokens) == 0);
    for (int k = 0; k < 20; k++)
        ASSERT_MSG(res[1].logprob[k] == res[2].logprob[k], "token %d: logprob %.9g after the cache, %.9g fresh", k,
                   res[1].logprob[k], res[2].logprob[k]);
    rlx_worker_stop(w, true);
}

/* ignore_eos bans the end-of-generation tokens, as llama-server does: even a +50 bias on </s>
 * never samples it (it was sampled, skipped in the text and the logprobs, counted in usage). */
TEST(ignore_eos_bans_eog)
{
    rlx_worker *w = start(2, 0, 0);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    int32_t ids[4] = {1, 400, 401, 402};
    static result res[1];
    collector c = TW_COLLECTOR(1, res);
    slot sl = {&c, 0};
    rlx_request *r = new_req(0, &sl, 8, ids, 4);
    rlx_logit_bias *eos_up = malloc(sizeof *eos_up); /* the request owns it */
    *eos_up = (rlx_logit_bias){2, 50.0f};
    r->sampling.logit_bias = eos_up;
    r->sampling.n_logit_bias = 1;
    r->top_logprobs = 0;
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_submit(w, r, &err), 0);
    tw_wait_all(&c);
    ASSERT_EQ(res[0].error, 0);
    ASSERT_EQ(res[0].n, 8);
    ASSERT_EQ(res[0].usage.completion_tokens, 8);
    for (int k = 0; k < 8; k++) ASSERT_MSG(res[0].tokens[k] != 2, "token %d is </s>", k);
    ASSERT(res[0].text_len > 0);
    /* -100 on every token (or on all but </s> with ignore_eos) leaves nothing: refused at
       submit, where token 0 (<unk>) came out every step */
    for (int eos = 0; eos < 2; eos++) {
        rlx_request *q = new_req(1, &sl, 4, ids, 4);
        q->ignore_eos = eos;
        rlx_logit_bias *all = malloc(512 * sizeof *all);
        int32_t nb = 0;
        for (int32_t t = 0; t < 512; t++)
            if (!eos || t != 2) all[nb++] = (rlx_logit_bias){t, -100.0f};
        q->sampling.logit_bias = all;
        q->sampling.n_logit_bias = (size_t)nb;
        ASSERT_EQ(rlx_worker_submit(w, q, &err), RLX_EINVAL);
        ASSERT(strstr(err.msg, "nothing is left to sample"));
    }
    rlx_worker_stop(w, true);
}

TEST(cancel_and_limits)
{
    rlx_worker *w = start(2, 0, 0);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    static result res[3];
    collector c = TW_COLLECTOR(1, res);
    slot sl = {&c, 0};
    int32_t ids[4] = {1, 403, 407, 261};
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_submit(w, new_req(0, &sl, 400, ids, 4), &err), 0);
    rlx_worker_cancel(w, 1);
    tw_wait_all(&c);
    ASSERT_EQ(res[0].finish, RLX_FINISH_CANCELLED);
    ASSERT(res[0].n < 400);
    /* can never fit: prompt + max_tokens over the context */
    ASSERT_EQ(rlx_worker_submit(w, new_req(1, &sl, 100000, ids, 4), &err), RLX_ETOOLONG);
    ASSERT(strstr(err.msg, "context") != NULL);
    /* token ids outside the vocabulary */
    int32_t bad[2] = {1, 999999};
    ASSERT_EQ(rlx_worker_submit(w, new_req(2, &sl, 4, bad, 2), &err), RLX_EINVAL);
    rlx_worker_stop(w, true);
}

TEST(text_prompt_and_eos)
{
    rlx_worker *w = start(2, 0, 0);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    static result res[1];
    collector c = TW_COLLECTOR(1, res);
    slot sl = {&c, 0};
    rlx_request *r = rlx_request_new();
    r->id = 1;
    static const char text[] = "Once upon a time"; /* tokenized as the server does */
    ASSERT_EQ(rlx_tokenize(rlx_worker_tokenizer(w), text, sizeof text - 1, true, true, &r->prompt_ids, &r->n_prompt, NULL), 0);
    r->bos_added = true;
    r->max_tokens = 16;
    r->sampling.temperature = 0;
    r->on_event = tw_on_event;
    r->user = &sl;
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_submit(w, r, &err), 0);
    tw_wait_all(&c);
    ASSERT_EQ(res[0].usage.prompt_tokens, 5); /* BOS + 4 */
    ASSERT_EQ(res[0].n, 16);
    ASSERT_EQ(res[0].tokens[0], 432); /* llama.cpp's greedy continuation starts with "," */
    rlx_worker_stop(w, true);
}

/* Two identical prompts admitted in the same step: the second reuses the first one's blocks
 * (it waits a step for them) instead of computing the same prefix twice. A long request keeps
 * the worker inside a step while both are queued, so they arrive in one intake. */
TEST(identical_prompts_in_one_step_computed_once)
{
    rlx_worker *w = start(4, 0, 0);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    static result res[3];
    collector c = TW_COLLECTOR(3, res);
    slot sl[3] = {{&c, 0}, {&c, 1}, {&c, 2}};
    int32_t busy[4] = {1, 403, 407, 261}, ids[100];
    ids[0] = 1;
    for (int k = 1; k < 100; k++) ids[k] = 3 + (k * 53) % 500;
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_submit(w, new_req(0, &sl[0], 300, busy, 4), &err), 0);
    ASSERT_EQ(rlx_worker_submit(w, new_req(1, &sl[1], 4, ids, 100), &err), 0);
    ASSERT_EQ(rlx_worker_submit(w, new_req(2, &sl[2], 4, ids, 100), &err), 0);
    tw_wait_all(&c);
    ASSERT_EQ(res[1].error, 0);
    ASSERT_EQ(res[2].error, 0);
    ASSERT_EQ(res[1].usage.cached_tokens + res[2].usage.cached_tokens, 96); /* 6 full blocks of the 99 before the last */
    for (int k = 0; k < 4; k++) ASSERT_EQ(res[1].tokens[k], res[2].tokens[k]);
    rlx_worker_stop(w, true);
}

/* Pins of idle sessions give way when a request that fits the pool needs their blocks: the
 * request completes instead of failing mid-generation. Pool: 12 blocks of 16, so sessions may
 * pin 3; the session below pins exactly 3, the request needs all 12. */
TEST(idle_session_pins_give_way)
{
    rlx_worker *w = start(4, 0, 12);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    static result res[2];
    collector c = TW_COLLECTOR(1, res);
    slot sl[2] = {{&c, 0}, {&c, 1}};
    int32_t ids[32];
    for (int k = 0; k < 32; k++) ids[k] = k ? 3 + (k * 29) % 500 : 1;
    rlx_request *r = new_req(0, &sl[0], 18, ids, 30);
    r->session_id = strdup("pinned");
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_submit(w, r, &err), 0);
    tw_wait_all(&c);
    ASSERT_EQ(res[0].error, 0); /* 48 tokens: 3 full blocks pinned */
    c.pending = 1;
    ASSERT_EQ(rlx_worker_submit(w, new_req(1, &sl[1], 170, ids + 2, 20), &err), 0);
    tw_wait_all(&c);
    ASSERT_MSG(res[1].error == 0, "the request failed with %d", res[1].error);
    ASSERT_EQ(res[1].n, TW_MAX_GEN); /* the tokens a result keeps */
    ASSERT_EQ(res[1].usage.completion_tokens, 170);
    /* the session is still there (its history; its blocks are recomputed next turn) */
    rlx_session_info info;
    ASSERT_EQ(rlx_worker_session_get(w, "pinned", &info, NULL, NULL, &err), 0);
    ASSERT_EQ(info.n_tokens, 48);
    rlx_worker_stop(w, true);
}

/* Requests that can never fit are refused by submit itself (a streaming route then answers
 * 400 before its first byte): prompt ids plus max_tokens over the KV pool, and a session's
 * known history plus the prompt over it. Pool: 4 blocks of 16 = 64 tokens. */
TEST(never_fits_refused_at_submit)
{
    rlx_worker *w = start(2, 0, 4);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    static result res[2];
    collector c = TW_COLLECTOR(0, res);
    slot sl = {&c, 0};
    int32_t ids[40];
    for (int k = 0; k < 40; k++) ids[k] = k ? 3 + (k * 31) % 500 : 1;
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_submit(w, new_req(0, &sl, 30, ids, 40), &err), RLX_ETOOLONG);
    ASSERT_MSG(strstr(err.msg, "KV pool of 64 tokens") != NULL, "%s", err.msg);
    rlx_request *r = new_req(1, &sl, 10, ids, 30);
    r->session_id = strdup("grows");
    c.pending = 1;
    ASSERT_EQ(rlx_worker_submit(w, r, &err), 0);
    tw_wait_all(&c);
    ASSERT_EQ(res[0].error, 0);
    r = new_req(2, &sl, 10, ids, 20);
    r->session_id = strdup("grows");
    ASSERT_EQ(rlx_worker_submit(w, r, &err), RLX_ETOOLONG); /* 40 + 20 + 10 > 64 */
    ASSERT_MSG(strstr(err.msg, "session history (40 tokens)") != NULL, "%s", err.msg);
    r = new_req(3, &sl, 10, ids, 20); /* the same without the session fits */
    c.pending = 1;
    ASSERT_EQ(rlx_worker_submit(w, r, &err), 0);
    tw_wait_all(&c);
    r = new_req(4, &sl, 4, ids, 4);
    r->session_id = strdup("bad\001id");
    ASSERT_EQ(rlx_worker_submit(w, r, &err), RLX_EINVAL);
    rlx_worker_stop(w, true);
}

TEST_MAIN(TEST_ENTRY(batching_is_invisible), TEST_ENTRY(batching_is_invisible_q8_0_kv), TEST_ENTRY(kv_type_selection),
          TEST_ENTRY(preemption_keeps_outputs), TEST_ENTRY(shared_prefix_computed_once),
          TEST_ENTRY(generated_blocks_not_reused_as_prompt), TEST_ENTRY(ignore_eos_bans_eog),
          TEST_ENTRY(cancel_and_limits), TEST_ENTRY(text_prompt_and_eos),
          TEST_ENTRY(identical_prompts_in_one_step_computed_once), TEST_ENTRY(idle_session_pins_give_way),
          TEST_ENTRY(never_fits_refused_at_submit))
