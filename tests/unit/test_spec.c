/* test_spec.c - speculative decoding by prompt lookup (engine/spec.h): the n-gram lookup and
 * the draft length control on hand-made sequences, then the scheduler: a worker that drafts
 * gives exactly the tokens, logprobs, finish reasons and usage of a worker that does not
 * (greedy, seeded sampling, stop strings, max_tokens, one at a time and all at once), and it
 * did draft and keep drafts. Runs on stories260K from ../shared, whose greedy stories repeat
 * themselves. */
#include "tests/rlx_test.h"
#include "engine/engine.h"
#include "engine/spec.h"
#include "engine/draft.h"
#include "tests/unit/test_synth_util.h"
#include "tests/unit/test_worker_util.h"

#include <pthread.h>

TEST(lookup_finds_the_latest_longest_match)
{
    int32_t d[RLX_SPEC_MAX_DRAFT];
    const int32_t none[] = {1, 2, 3, 4, 5, 6};
    ASSERT_EQ(rlx_spec_lookup(none, 6, 2, 4, d, 8), 0);
    ASSERT_EQ(rlx_spec_lookup(none, 0, 2, 4, d, 8), 0);
    ASSERT_EQ(rlx_spec_lookup(NULL, 6, 2, 4, d, 8), 0);
    /* "7 8" occurred twice before: the latest occurrence's continuation is drafted */
    const int32_t t[] = {7, 8, 1, 2, 3, 7, 8, 4, 5, 6, 9, 7, 8};
    ASSERT_EQ(rlx_spec_lookup(t, 13, 2, 4, d, 3), 3);
    ASSERT(d[0] == 4 && d[1] == 5 && d[2] == 6);
    /* a longer suffix match wins over a later shorter one: "3 7 8" occurs once */
    const int32_t u[] = {3, 7, 8, 1, 1, 7, 8, 2, 2, 3, 7, 8};
    ASSERT_EQ(rlx_spec_lookup(u, 12, 2, 4, d, 2), 2);
    ASSERT(d[0] == 1 && d[1] == 1);
    ASSERT_EQ(rlx_spec_lookup(u, 12, 2, 2, d, 2), 2); /* bigrams only: the latest "7 8" */
    ASSERT(d[0] == 2 && d[1] == 2);
    /* a one-token match does not count with ngram_min 2 */
    const int32_t v[] = {5, 1, 2, 3, 5};
    ASSERT_EQ(rlx_spec_lookup(v, 5, 2, 4, d, 4), 0);
    ASSERT_EQ(rlx_spec_lookup(v, 5, 1, 4, d, 4), 4);
    ASSERT(d[0] == 1 && d[1] == 2 && d[2] == 3 && d[3] == 5);
    /* a loop of period 3 goes on past the end of what was seen */
    const int32_t w[] = {9, 1, 2, 3, 1, 2, 3, 1, 2};
    ASSERT_EQ(rlx_spec_lookup(w, 9, 2, 4, d, 7), 7);
    const int32_t want[] = {3, 1, 2, 3, 1, 2, 3};
    for (int i = 0; i < 7; i++) ASSERT_EQ(d[i], want[i]);
    /* the cap */
    ASSERT_EQ(rlx_spec_lookup(w, 9, 2, 4, d, 1000), RLX_SPEC_MAX_DRAFT);
}

TEST(length_control)
{
    rlx_spec_state st = {0};
    ASSERT_EQ(rlx_spec_allow(&st, 8), 8);
    rlx_spec_update(&st, 8, 3, 8);           /* partial: what was kept plus one */
    ASSERT_EQ(rlx_spec_allow(&st, 8), 4);
    rlx_spec_update(&st, 4, 4, 8);           /* all kept: doubles up to the maximum */
    ASSERT_EQ(rlx_spec_allow(&st, 8), 8);
    rlx_spec_update(&st, 8, 0, 8);           /* first-token misses pause drafting, longer each time */
    ASSERT_EQ(rlx_spec_allow(&st, 8), 0);
    ASSERT_EQ(rlx_spec_allow(&st, 8), 1);
    rlx_spec_update(&st, 1, 0, 8);
    ASSERT_EQ(rlx_spec_allow(&st, 8), 0);
    ASSERT_EQ(rlx_spec_allow(&st, 8), 0);
    ASSERT_EQ(rlx_spec_allow(&st, 8), 1);
    rlx_spec_update(&st, 1, 1, 8);           /* a kept draft ends the pause */
    ASSERT_EQ(rlx_spec_allow(&st, 8), 2);
    ASSERT_EQ(rlx_spec_allow(&st, 0), 0);
    ASSERT_EQ(rlx_spec_allow(&st, 1), 1);     /* a smaller request maximum caps it */
    rlx_spec_pause(&st, 1);                   /* a draft model unsure: one step without */
    ASSERT_EQ(rlx_spec_allow(&st, 8), 0);
    ASSERT(rlx_spec_allow(&st, 8) > 0);
    rlx_spec_update(&st, 4, 0, 8);            /* a refused draft's pause (1 step after one miss)... */
    rlx_spec_pause(&st, 1);                   /* ...is not lengthened by a pause asked on top */
    ASSERT_EQ(rlx_spec_allow(&st, 8), 0);
    ASSERT(rlx_spec_allow(&st, 8) > 0);
}

/* ---- the scheduler --------------------------------------------------------------------- */

#define MAX_GEN 96 /* <= TW_MAX_GEN, the tokens a result keeps */
#define N_REQ 12

typedef tw_result result;
typedef tw_collector collector;
typedef tw_slot slot;

static rlx_worker *start_pool(const char *m, int32_t draft_max, const char *draft_model, float p_min, int32_t kv_blocks)
{
    if (!m) return NULL;
    rlx_worker_config cfg = {.model_path = m, .n_threads = 2, .max_seqs = 8, .max_batch_tokens = 128,
                             .max_queue = 64, .kv_block = 16, .kv_blocks = kv_blocks, .draft_max = draft_max,
                             .draft_model = draft_model, .draft_p_min = p_min,
                             .backend = getenv("RLXD_BACKEND")}; /* as the integration tests: vulkan too */
    rlx_worker *w = NULL;
    rlx_error err = {0};
    if (rlx_worker_start(&w, &cfg, &err)) { fprintf(stderr, "start: %s\n", err.msg); return NULL; }
    return w;
}

static rlx_worker *start_draft(const char *m, int32_t draft_max, const char *draft_model, float p_min)
{
    return start_pool(m, draft_max, draft_model, p_min, 0);
}

static rlx_worker *start(const char *m, int32_t draft_max) { return start_draft(m, draft_max, NULL, 0); }

/* Request i: prompts that quote a passage twice (the story then tends to repeat it) or not;
 * greedy or seeded sampling; some with logprobs, a stop string, a short max_tokens, or the
 * request's own opt-out. */
static rlx_request *make(int i, slot *sl)
{
    rlx_request *r = rlx_request_new();
    int32_t ids[80];
    size_t n = 0;
    uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 3);
    ids[n++] = 1;
    size_t passage = 6 + (size_t)(i % 4) * 5;
    for (size_t k = 0; k < passage; k++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        ids[n++] = 3 + (int32_t)(x % 500);
    }
    if (i % 3 != 2) /* the passage again */
        for (size_t k = 0; k < passage; k++) ids[n++] = ids[1 + k];
    r->id = (uint64_t)i + 1;
    r->prompt_ids = malloc(n * sizeof *ids);
    memcpy(r->prompt_ids, ids, n * sizeof *ids);
    r->n_prompt = n;
    /* under valgrind (RLX_MEMCHECK) 40 tokens: the same paths (drafts made, kept and refused,
     * the stop string, the short max_tokens), less than half the arithmetic */
    r->max_tokens = i % 5 == 4 ? 7 : getenv("RLX_MEMCHECK") ? 40 : MAX_GEN;
    r->ignore_eos = i % 2 == 0;
    r->sampling.temperature = 0;
    if (i % 4 == 1) { r->sampling.temperature = 0.9f; r->sampling.seed = 77 + (uint64_t)i; r->sampling.has_seed = true; }
    if (i % 3 == 0) r->top_logprobs = 2;
    if (i == 6) {
        r->stop = malloc(sizeof *r->stop);
        r->stop[0] = strdup(" the");
        r->n_stop = 1;
    }
    if (i == 8) r->draft_max = 0;
    r->on_event = tw_on_event;
    r->user = sl;
    return r;
}

static void run(rlx_worker *w, bool together, result *res)
{
    collector c = TW_COLLECTOR(0, res);
    slot slots[N_REQ];
    memset(res, 0, sizeof(result) * N_REQ);
    for (int i = 0; i < N_REQ; i++) {
        slots[i] = (slot){&c, i};
        pthread_mutex_lock(&c.mu);
        c.pending++;
        pthread_mutex_unlock(&c.mu);
        rlx_error err = {0};
        if (rlx_worker_submit(w, make(i, &slots[i]), &err)) {
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

static void same(const result *a, const result *b, int i)
{
    ASSERT_MSG(a->error == 0 && b->error == 0, "request %d: errors %d %d", i, a->error, b->error);
    ASSERT_MSG(a->n == b->n, "request %d: %d tokens without drafts, %d with", i, a->n, b->n);
    for (int k = 0; k < a->n; k++) {
        ASSERT_MSG(a->tokens[k] == b->tokens[k], "request %d token %d: %d vs %d", i, k, a->tokens[k], b->tokens[k]);
        ASSERT_MSG(a->logprob[k] == b->logprob[k], "request %d token %d: logprob %.9g vs %.9g", i, k, a->logprob[k],
                   b->logprob[k]);
        ASSERT(a->top[k][0] == b->top[k][0] && a->top[k][1] == b->top[k][1]);
    }
    ASSERT_EQ(a->finish, b->finish);
    ASSERT_EQ(a->usage.completion_tokens, b->usage.completion_tokens);
    ASSERT_EQ(a->usage.prompt_tokens, b->usage.prompt_tokens);
    ASSERT_EQ(a->text_len, b->text_len);
    ASSERT(memcmp(a->text, b->text, a->text_len) == 0);
}

static void drafting_changes_nothing(const char *model, const char *draft_model, float p_min)
{
    static result off[N_REQ], solo[N_REQ], together[N_REQ];
    static char off_model[1024]; /* the model `off` holds the outputs of (the reference runs once per model) */
    rlx_worker_stats st;
    rlx_worker *w;
    if (strcmp(off_model, model)) {
        w = start(model, -1);
        ASSERT(w != NULL);
        run(w, false, off);
        rlx_worker_get_stats(w, &st);
        ASSERT_EQ(st.draft_tokens, 0);
        rlx_worker_stop(w, true);
        snprintf(off_model, sizeof off_model, "%s", model);
    }

    w = start_draft(model, 0, draft_model, p_min); /* the default maximum */
    ASSERT(w != NULL);
    run(w, false, solo);
    rlx_worker_get_stats(w, &st);
    fprintf(stderr, "  one at a time: %llu drafted, %llu kept\n", (unsigned long long)st.draft_tokens,
            (unsigned long long)st.draft_accepted);
    ASSERT(st.draft_tokens > 0);
    if (draft_model && p_min > 0) ASSERT(st.draft_accepted < st.draft_tokens); /* a random draft: refused */
    else ASSERT(st.draft_accepted > 0);
    /* its own Q8_0 file agrees with the model almost always: the draft's KV follows the text */
    if (draft_model && p_min == 0) ASSERT(st.draft_accepted * 10 > st.draft_tokens * 8);
    uint64_t kept = st.draft_accepted;
    uint64_t drafted = st.draft_tokens;
    run(w, true, together);
    rlx_worker_get_stats(w, &st);
    fprintf(stderr, "  all at once: %llu drafted, %llu kept\n", (unsigned long long)(st.draft_tokens - drafted),
            (unsigned long long)(st.draft_accepted - kept));
    rlx_worker_stop(w, true);
    for (int i = 0; i < N_REQ; i++) {
        same(&off[i], &solo[i], i);
        same(&off[i], &together[i], i);
    }
    ASSERT_EQ(off[4].usage.completion_tokens, 7); /* a short max_tokens is not overrun by drafts */
    ASSERT_EQ(off[4].finish, RLX_FINISH_LENGTH);
    if (!draft_model) return;
    /* a KV pool of 20 blocks for 8 sequences: preemptions (the draft's KV is given back and
     * rebuilt at readmission), the same outputs */
    w = start_pool(model, 0, draft_model, p_min, 20);
    ASSERT(w != NULL);
    run(w, true, together);
    rlx_worker_get_stats(w, &st);
    fprintf(stderr, "  a small pool: %llu preemptions, %llu drafted, %llu kept\n", (unsigned long long)st.preemptions,
            (unsigned long long)st.draft_tokens, (unsigned long long)st.draft_accepted);
    ASSERT(st.preemptions > 0 && st.draft_tokens > 0);
    rlx_worker_stop(w, true);
    for (int i = 0; i < N_REQ; i++) same(&off[i], &together[i], i);
}

/* stories260K: head size 8, attention through the transposed-V product */
TEST(drafting_changes_nothing_stories)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) SKIP("stories260K is not in ../shared/models");
    drafting_changes_nothing(m, NULL, 0);
}

/* ---- a draft model (engine/draft.h) ------------------------------------------------------ */

/* stories260K drafted by its own Q8_0 file (the same model, rounded: most drafts kept), and by a
 * random-weight llama with its vocabulary drafting whatever it likes (p_min 0.01: most drafts
 * refused): the outputs are those of the worker that does not draft, whatever the draft. */
TEST(draft_model_changes_nothing)
{
    static char rnd[512];
    const char *m = rlx_test_shared("models/stories260K.gguf");
    char q8[1024];
    if (!m) SKIP("stories260K is not in ../shared/models");
    snprintf(q8, sizeof q8, "%s", m);
    snprintf(strstr(q8, ".gguf"), 16, "-q8_0.gguf");
    fprintf(stderr, "  draft: stories260K-q8_0\n");
    drafting_changes_nothing(m, q8, 0);
    /* under valgrind the Q8_0 draft's case alone (the same code; refused drafts run in the
     * prompt-lookup cases) */
    if (getenv("RLX_MEMCHECK")) return;
    char args[700];
    snprintf(args, sizeof args, "--arch llama --preset tiny --hidden 32 --layers 1 --heads 2 --kv-heads 1 --ffn 64 --seed 5 --vocab-from %s", m);
    if (!synth(args, "draft-rnd.gguf", rnd, sizeof rnd)) SKIP("rlxd-synth is not built");
    fprintf(stderr, "  draft: a random llama with its vocabulary\n");
    drafting_changes_nothing(m, rnd, 0.01f);
}

/* The draft's KV follows a sequence: a proposal computes only the positions past the longest
 * prefix it already holds (the last token always, for its logits), a diverged history is
 * recomputed from where it differs, and the greedy drafts equal the draft model's own greedy
 * continuation step by step. */
TEST(draft_kv_follows_the_text)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) SKIP("stories260K is not in ../shared/models");
    rlx_runner *t = NULL;
    rlx_error err = {0};
    /* under valgrind (RLX_MEMCHECK) a 384-token context (the model's is 512): the pool then has
     * 48 blocks, not 64 (still room for the sequences held at once before the last step), and
     * the two sequences that fill it are 372 tokens long, not 500; the same paths (parked KV
     * given back when the pool is short, the context's end), half of their attention, which
     * was most of this case's time there */
    rlx_runner_config rc = {.model_path = m, .backend = {.n_threads = 1}, .n_ctx = getenv("RLX_MEMCHECK") ? 384 : 0,
                            .max_seqs = 2, .max_batch_tokens = 64};
    ASSERT_MSG(rlx_runner_open(&t, &rc, &err) == 0, "%s", err.msg);
    rlx_draft *d = NULL;
    rlx_backend_config bc = {.n_threads = 1};
    ASSERT_MSG(rlx_draft_open(&d, m, t, &bc, 2, 64, 0.0f, &err) == 0, "%s", err.msg); /* p_min 0: always max */
    int32_t tok[200], out[8];
    int32_t n = 0;
    tok[n++] = 1;
    for (int i = 0; i < 99; i++) tok[n++] = 10 + (i * 37) % 400; /* 100 tokens: two catch-up chunks */
    rlx_draft_seq ds = {0};
    ASSERT_EQ(rlx_draft_propose(d, &ds, tok, n, 4, out, &err), 4);
    ASSERT_EQ(rlx_draft_positions(d), 100 + 3); /* the tokens, then three drafts fed back */
    /* the model's own greedy continuation, one token at a time on a fresh sequence */
    rlx_draft_seq ref = {0};
    int32_t one;
    for (int k = 0; k < 4; k++) {
        ASSERT_EQ(rlx_draft_propose(d, &ref, tok, n + k, 1, &one, &err), 1);
        ASSERT_EQ(one, out[k]);
        tok[n + k] = one;
    }
    /* two drafts kept and a token of the model's after them: only the new token and the
     * drafts past the kept ones run (the first draft's K/V stands, so does the second's) */
    uint64_t before = rlx_draft_positions(d);
    tok[n + 2] = out[2] == 5 ? 6 : 5; /* the model sampled something else at the third */
    ASSERT_EQ(rlx_draft_propose(d, &ds, tok, n + 3, 2, out, &err), 2);
    ASSERT_EQ(rlx_draft_positions(d) - before, 1 + 1); /* position n+2, then one draft fed back */
    /* a history that differs from position 50 on: recomputed from there */
    before = rlx_draft_positions(d);
    tok[50] ^= 1;
    ASSERT_EQ(rlx_draft_propose(d, &ds, tok, n, 1, out, &err), 1);
    ASSERT_EQ(rlx_draft_positions(d) - before, (uint64_t)(n - 50));
    /* batched: three sequences (one longer than a forward's 64 tokens, one sharing ds's
     * history) proposed together draft what each drafts alone */
    {
        int32_t other[150], outs[3][4], alone[4];
        for (int i = 0; i < 150; i++) other[i] = i ? 20 + (i * 11) % 300 : 1;
        rlx_draft_seq s3[3] = {{0}}, solo1 = {0};
        rlx_draft_job jobs[3] = {
            {.ds = &s3[0], .tokens = other, .n = 150, .max = 4, .out = outs[0]},
            {.ds = &s3[1], .tokens = tok, .n = 30, .max = 2, .out = outs[1]},
            {.ds = &s3[2], .tokens = other, .n = 7, .max = 3, .out = outs[2]},
        };
        ASSERT_EQ(rlx_draft_propose_many(d, jobs, 3, &err), 0);
        for (int j = 0; j < 3; j++) {
            ASSERT_EQ(jobs[j].got, jobs[j].max);
            ASSERT_EQ(rlx_draft_propose(d, &solo1, jobs[j].tokens, jobs[j].n, jobs[j].max, alone, &err), jobs[j].max);
            for (int k = 0; k < jobs[j].max; k++) ASSERT_MSG(alone[k] == outs[j][k], "job %d draft %d", j, k);
            rlx_draft_seq_free(d, &solo1);
            rlx_draft_seq_free(d, &s3[j]);
        }
    }
    /* a sequence that ends parks its draft KV; a later one that begins with the same 80 tokens
     * takes it over and computes only from there */
    rlx_draft_seq_park(d, &ds);
    ASSERT(ds.n_hist == 0 && ds.blocks == NULL);
    int32_t later[120];
    memcpy(later, tok, 80 * sizeof *later);
    for (int i = 80; i < 120; i++) later[i] = 30 + i;
    rlx_draft_seq ds2 = {0};
    before = rlx_draft_positions(d);
    ASSERT_EQ(rlx_draft_propose(d, &ds2, later, 120, 1, out, &err), 1);
    ASSERT_EQ(rlx_draft_positions(d) - before, 120 - 80);
    ASSERT_EQ(rlx_draft_propose(d, &ref, later, 120, 1, &one, &err), 1); /* as computed from scratch */
    ASSERT_EQ(one, out[0]);
    /* a beginning shorter than a block is not worth parking: the next computes it all */
    rlx_draft_seq tiny = {0}, ds3 = {0};
    ASSERT_EQ(rlx_draft_propose(d, &tiny, later, 10, 1, out, &err), 1);
    rlx_draft_seq_park(d, &tiny);
    before = rlx_draft_positions(d);
    ASSERT_EQ(rlx_draft_propose(d, &ds3, later, 10, 1, out, &err), 1);
    ASSERT_EQ(rlx_draft_positions(d) - before, 10);
    rlx_draft_seq_free(d, &ds3);
    /* a pool short of blocks takes them from parked draft KV: two sequences of 500 tokens (the
     * context less 12) fill the 64 blocks (48 under memcheck) of a two-sequence pool only once
     * the parked ones are given back */
    rlx_draft_seq_park(d, &ds2);
    rlx_draft_seq_park(d, &ref);
    {
        static int32_t big[2][500];
        const int32_t n_big = t->n_ctx - 12;
        ASSERT(n_big > 0 && n_big <= 500);
        rlx_draft_seq b[2] = {{0}};
        for (int j = 0; j < 2; j++) {
            for (int i = 0; i < n_big; i++) big[j][i] = i ? 3 + (i * (7 + j)) % 450 : 1;
            ASSERT_MSG(rlx_draft_propose(d, &b[j], big[j], n_big, 1, out, &err) == 1, "sequence %d found no room", j);
        }
        for (int j = 0; j < 2; j++) rlx_draft_seq_free(d, &b[j]);
    }
    ds2 = (rlx_draft_seq){0};
    ref = (rlx_draft_seq){0};
    ASSERT_EQ(rlx_draft_propose(d, &ds2, later, 120, 1, out, &err), 1);
    ds = ds2;
    /* no room past the context: nothing drafted, nothing fails */
    ASSERT_EQ(rlx_draft_propose(d, &ds, tok, t->n_ctx, 4, out, &err), 0);
    rlx_draft_seq_free(d, &ds);
    rlx_draft_seq_free(d, &ref);
    rlx_draft_close(d);
    rlx_runner_close(t);
}

/* What cannot draft is refused at start, naming why: another vocabulary, a hybrid model (its
 * state cannot be rolled back), a draft model that is not a decoder. */
TEST(draft_model_refusals)
{
    static char other[512];
    const char *m = rlx_test_shared("models/stories260K.gguf");
    const char *hy = rlx_test_shared("models/synth-qwen35-tiny-f32.gguf");
    const char *enc = rlx_test_shared("models/synth-bert-tiny-f32.gguf");
    if (!m || !hy || !enc) SKIP("../shared/models is absent");
    if (!synth("--arch llama --preset tiny --seed 2", "draft-other.gguf", other, sizeof other)) SKIP("rlxd-synth is not built");
    static const struct { int target; int draft; const char *says; } cases[] = {
        {0, 1, "tokenizer.ggml"}, {2, 0, "recurrent state"}, {0, 3, "decoder"}, {0, 4, "draft"}};
    const char *paths[] = {m, other, hy, enc, "/nonexistent/draft.gguf"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rlx_worker_config cfg = {.model_path = paths[cases[i].target], .n_threads = 1, .max_seqs = 2,
                                 .draft_model = paths[cases[i].draft]};
        rlx_worker *w = NULL;
        rlx_error err = {0};
        int rc = rlx_worker_start(&w, &cfg, &err);
        ASSERT_MSG(rc != 0 && w == NULL, "case %zu started", i);
        ASSERT_MSG(strstr(err.msg, cases[i].says) != NULL, "case %zu: %s", i, err.msg);
        fprintf(stderr, "  refused: %s\n", err.msg);
    }
    /* drafting off (draft_max < 0): the draft model is not opened */
    rlx_worker_config cfg = {.model_path = m, .n_threads = 1, .max_seqs = 2, .draft_max = -1, .draft_model = other};
    rlx_worker *w = NULL;
    rlx_error err = {0};
    ASSERT_MSG(rlx_worker_start(&w, &cfg, &err) == 0, "%s", err.msg);
    rlx_worker_stop(w, true);
}

/* a Q8_0 llama of head size 16 (the AVX-512 decode rows' V^T.p in registers, where a draft row
 * once summed probabilities past its own position), and RLX_SPEC_MODEL when set */
TEST(drafting_changes_nothing_q8_0)
{
    static char path[512];
    const char *m = getenv("RLX_SPEC_MODEL");
    /* valgrind hides AVX-512, the path this case is for; the stories case covers the rest */
    if (!m && getenv("RLX_MEMCHECK")) SKIP("under memcheck: the AVX-512 decode rows this case is for do not run");
    if (!m && !synth("--arch llama --preset tiny --type q8_0 --seed 1", "tiny-q8.gguf", path, sizeof path))
        SKIP("rlxd-synth is not built");
    drafting_changes_nothing(m ? m : path, NULL, 0);
}

TEST_MAIN(TEST_ENTRY(lookup_finds_the_latest_longest_match), TEST_ENTRY(length_control),
          TEST_ENTRY(draft_kv_follows_the_text), TEST_ENTRY(draft_model_changes_nothing), TEST_ENTRY(draft_model_refusals),
          TEST_ENTRY(drafting_changes_nothing_stories),
          TEST_ENTRY(drafting_changes_nothing_q8_0))
