/* test_worker_grammar.c - constrained sampling in the worker (engine/sched.c + engine/grammar.c)
 * on stories260K: every generated text follows its grammar, the sequence ends once the grammar
 * is complete, sequences with different grammars share steps without changing each other's
 * output, and a bad grammar fails only its own request. */
#include "tests/rlx_test.h"
#include "engine/engine.h"
#include "engine/grammar.h"
#include "models/tokenizer.h"

#include <pthread.h>

#define N_REQ 6

typedef struct result {
    char text[4096];
    size_t len;
    int32_t tokens[256];
    int n_tokens;
    bool done;
    rlx_finish_reason finish;
    int error;
    bool in_grammar; /* the error event says the grammar is at fault */
    char msg[256];
} result;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pending;

static void on_event(void *user, const rlx_event *ev)
{
    result *r = user;
    pthread_mutex_lock(&mu);
    if (ev->text && ev->text_len && r->len + ev->text_len < sizeof r->text) {
        memcpy(r->text + r->len, ev->text, ev->text_len);
        r->len += ev->text_len;
        r->text[r->len] = 0;
    }
    if (ev->type == RLX_EV_TOKEN && r->n_tokens < 256) r->tokens[r->n_tokens++] = ev->token;
    if (ev->type == RLX_EV_DONE || ev->type == RLX_EV_ERROR) {
        r->done = true;
        r->finish = ev->finish;
        r->error = ev->type == RLX_EV_ERROR ? ev->error_code : 0;
        r->in_grammar = ev->type == RLX_EV_ERROR && ev->error_in_grammar;
        if (ev->error_msg) snprintf(r->msg, sizeof r->msg, "%s", ev->error_msg);
        pending--;
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
}

/* aside: rlx_worker_config.grammar_aside (the helper beside the forward pass) */
static rlx_worker *start_aside(int aside)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) return NULL;
    rlx_worker_config cfg = {.model_path = m, .n_threads = 2, .max_seqs = 8, .max_batch_tokens = 256, .max_queue = 64,
                             .grammar_aside = aside};
    rlx_worker *w = NULL;
    rlx_error err = {0};
    if (rlx_worker_start(&w, &cfg, &err)) {
        fprintf(stderr, "start: %s\n", err.msg);
        return NULL;
    }
    return w;
}

static rlx_worker *start(void) { return start_aside(0); }

/* pattern: lazy on it (engine.h grammar_trigger_pattern), NULL: not lazy */
static int submit_p(rlx_worker *w, uint64_t id, const char *grammar, const char *pattern, float temp, uint64_t seed,
                    int32_t max_tokens, result *res)
{
    memset(res, 0, sizeof *res);
    rlx_request *r = rlx_request_new();
    r->id = id;
    static const int32_t prompt[] = {1, 403, 407, 261, 378};
    r->prompt_ids = malloc(sizeof prompt);
    memcpy(r->prompt_ids, prompt, sizeof prompt);
    r->n_prompt = RLX_ARRAY_LEN(prompt);
    r->max_tokens = max_tokens;
    r->sampling.temperature = temp;
    r->sampling.seed = seed;
    r->sampling.has_seed = true;
    r->grammar = grammar ? strdup(grammar) : NULL;
    r->grammar_trigger_pattern = pattern ? strdup(pattern) : NULL;
    r->on_event = on_event;
    r->user = res;
    rlx_error err = {0};
    pthread_mutex_lock(&mu);
    pending++;
    pthread_mutex_unlock(&mu);
    int rc = rlx_worker_submit(w, r, &err);
    if (rc) {
        pthread_mutex_lock(&mu);
        pending--;
        pthread_mutex_unlock(&mu);
        fprintf(stderr, "submit: %s\n", err.msg);
    }
    return rc;
}

static int submit(rlx_worker *w, uint64_t id, const char *grammar, float temp, uint64_t seed, int32_t max_tokens,
                  result *res)
{
    return submit_p(w, id, grammar, NULL, temp, seed, max_tokens, res);
}

static void wait_all(void)
{
    pthread_mutex_lock(&mu);
    while (pending > 0) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

/* Does the grammar take the whole text (complete = it must be a full sentence)? */
static bool follows(const char *grammar, const char *text, size_t len, bool complete)
{
    rlx_grammar *g = rlx_grammar_compile(grammar, strlen(grammar), NULL, NULL);
    rlx_grammar_state *s = g ? rlx_grammar_state_new(g, NULL) : NULL;
    bool ok = s && rlx_grammar_accept(s, text, len) == 0 && (!complete || rlx_grammar_can_end(s));
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);
    return ok;
}

static const char *const grammars[] = {
    "root ::= \" \" (\"yes\" | \"no\") \".\"\n",
    "root ::= (\" \" [a-z]{1,8}){2,4} \".\"\n",
    "root ::= \" The \" [a-z]+ \" was \" (\"happy\" | \"sad\" | \"big\") \".\"\n",
    "root ::= [0-9]{3} \"-\" [0-9]{4}\n",
};

TEST(outputs_follow_their_grammars)
{
    rlx_worker *w = start();
    if (!w) SKIP("stories260K.gguf absent");
    static result res[N_REQ * 4];
    int k = 0;
    for (size_t gi = 0; gi < RLX_ARRAY_LEN(grammars); gi++)
        for (int i = 0; i < N_REQ; i++, k++)
            ASSERT_EQ(submit(w, (uint64_t)k + 1, grammars[gi], i == 0 ? 0.0f : 1.0f, (uint64_t)i, 48, &res[k]), 0);
    wait_all();
    k = 0;
    for (size_t gi = 0; gi < RLX_ARRAY_LEN(grammars); gi++)
        for (int i = 0; i < N_REQ; i++, k++) {
            result *r = &res[k];
            ASSERT_MSG(r->error == 0, "grammar %zu req %d: error %d %s", gi, i, r->error, r->msg);
            /* each grammar is short and finite: complete before 48 tokens, then stopped */
            ASSERT_MSG(r->finish == RLX_FINISH_STOP, "grammar %zu req %d: finish %d, text '%s'", gi, i, r->finish, r->text);
            ASSERT_MSG(follows(grammars[gi], r->text, r->len, true), "grammar %zu req %d: '%s'", gi, i, r->text);
        }
    rlx_worker_stop(w, false);
}

/* JSON mode on a model that never saw JSON: the text is a JSON object, or a valid prefix of one
 * when max_tokens cut it. */
TEST(json_object_mode)
{
    rlx_worker *w = start();
    if (!w) SKIP("stories260K.gguf absent");
    static result res[N_REQ];
    for (int i = 0; i < N_REQ; i++) ASSERT_EQ(submit(w, (uint64_t)i + 1, rlx_grammar_json_object, 1.0f, (uint64_t)i + 7, 96, &res[i]), 0);
    wait_all();
    int complete = 0;
    for (int i = 0; i < N_REQ; i++) {
        result *r = &res[i];
        ASSERT_MSG(r->error == 0, "req %d: %s", i, r->msg);
        ASSERT(r->finish == RLX_FINISH_STOP || r->finish == RLX_FINISH_LENGTH);
        bool full = r->finish == RLX_FINISH_STOP;
        ASSERT_MSG(follows(rlx_grammar_json_object, r->text, r->len, full), "req %d (%s): '%s'", i,
                   full ? "stop" : "length", r->text);
        complete += full;

    }
    fprintf(stderr, "  %d of %d objects complete within 96 tokens\n", complete, N_REQ);
    rlx_worker_stop(w, false);
}

/* A constrained sequence gives the same tokens alone and beside others (different grammars,
 * unconstrained ones); the unconstrained request is untouched by its neighbours' grammars. */
TEST(batch_invariance_with_grammars)
{
    rlx_worker *w = start();
    if (!w) SKIP("stories260K.gguf absent");
    static result solo[2], mixed[8];
    ASSERT_EQ(submit(w, 1, grammars[1], 1.0f, 99, 40, &solo[0]), 0);
    wait_all();
    ASSERT_EQ(submit(w, 2, NULL, 1.0f, 5, 40, &solo[1]), 0);
    wait_all();
    for (int i = 0; i < 8; i++) {
        const char *g = i == 3 ? grammars[1] : i == 5 ? NULL : grammars[i % RLX_ARRAY_LEN(grammars)];
        uint64_t seed = i == 3 ? 99 : i == 5 ? 5 : (uint64_t)(100 + i);
        ASSERT_EQ(submit(w, (uint64_t)(10 + i), g, 1.0f, seed, 40, &mixed[i]), 0);
    }
    wait_all();
    ASSERT_EQ(mixed[3].n_tokens, solo[0].n_tokens);
    ASSERT(!memcmp(mixed[3].tokens, solo[0].tokens, (size_t)solo[0].n_tokens * sizeof(int32_t)));
    ASSERT_EQ(mixed[5].n_tokens, solo[1].n_tokens);
    ASSERT(!memcmp(mixed[5].tokens, solo[1].tokens, (size_t)solo[1].n_tokens * sizeof(int32_t)));
    rlx_worker_stop(w, false);
}

TEST(bad_grammar_fails_its_request_only)
{
    rlx_worker *w = start();
    if (!w) SKIP("stories260K.gguf absent");
    static result bad, good;
    ASSERT_EQ(submit(w, 1, "root ::= undefined-rule\n", 1.0f, 1, 8, &bad), 0);
    ASSERT_EQ(submit(w, 2, grammars[0], 0.0f, 1, 8, &good), 0);
    wait_all();
    ASSERT_EQ(bad.error, RLX_EINVAL);
    ASSERT(strstr(bad.msg, "undefined-rule") != NULL);
    ASSERT(bad.in_grammar);
    ASSERT_EQ(good.error, 0);
    ASSERT(follows(grammars[0], good.text, good.len, true));
    /* a grammar whose output soon needs more than RLX_GRAMMAR_MAX_STACKS stacks (each character
     * read may end the x* run or not, and x has 53 alternatives): the request fails saying so
     * (RLX_ERANGE), not "out of memory" */
    static char amb[1024];
    size_t n = (size_t)snprintf(amb, sizeof amb, "root ::= x* x{900}\nx ::= \" \"");
    for (char c = 'a'; c <= 'z'; c++) n += (size_t)snprintf(amb + n, sizeof amb - n, " | \"%c\" | \"%c\"", c, c - 32);
    snprintf(amb + n, sizeof amb - n, "\n");
    static result over;
    ASSERT_EQ(submit(w, 3, amb, 1.0f, 3, 200, &over), 0);
    wait_all();
    ASSERT_MSG(over.error == RLX_ERANGE, "%d %s", over.error, over.msg);
    ASSERT_MSG(strstr(over.msg, "too ambiguous") != NULL, "%s", over.msg);
    ASSERT(over.in_grammar);
    rlx_worker_stop(w, false);
}

/* A lazy grammar on a pattern, through the worker: one that matches the output's first byte on
 * (empty group 1) puts the grammar on the whole output (at most 12 characters, then the end);
 * one that cannot match leaves the output as it is without a grammar (same seed, same tokens);
 * a pattern that does not compile fails its own request (RLX_EINVAL), not the others. */
TEST(lazy_pattern_in_the_worker)
{
    rlx_worker *w = start();
    if (!w) SKIP("stories260K.gguf absent");
    const char *g = "root ::= [^\\x00]{0,12}\n";
    static result fired, never, plain, bad;
    ASSERT_EQ(submit_p(w, 1, g, "()", 1.0f, 3, 48, &fired), 0);
    ASSERT_EQ(submit_p(w, 2, g, "\\x01", 1.0f, 3, 48, &never), 0);
    ASSERT_EQ(submit_p(w, 3, NULL, NULL, 1.0f, 3, 48, &plain), 0);
    ASSERT_EQ(submit_p(w, 4, g, "(\\{", 1.0f, 3, 48, &bad), 0);
    wait_all();
    ASSERT_MSG(fired.error == 0 && never.error == 0 && plain.error == 0, "%s %s %s", fired.msg, never.msg, plain.msg);
    ASSERT_MSG(fired.finish == RLX_FINISH_STOP && follows(g, fired.text, fired.len, true), "fired: '%s'", fired.text);
    ASSERT_EQ(plain.finish, RLX_FINISH_LENGTH);
    ASSERT(plain.len > 48); /* without the grammar: longer than 12 characters */
    ASSERT_EQ(never.n_tokens, plain.n_tokens);
    ASSERT(!memcmp(never.tokens, plain.tokens, (size_t)plain.n_tokens * sizeof(int32_t)));
    ASSERT_EQ(bad.error, RLX_EINVAL);
    ASSERT_MSG(strstr(bad.msg, "pattern") != NULL, "%s", bad.msg);
    rlx_worker_stop(w, false);
}

/* Marker control tokens (rlx_worker_set_marker_tokens): the Qwen2 vocabulary's <|im_start|> is
 * a control token (standing in for a format's marker such as [TOOL_CALLS]). Marked, the grammar
 * literal is produced by that token (biased, greedy)
 * and the output writes its text; unmarked the grammar cannot take it (no bytes), and the same
 * literal is spelled with ordinary tokens. */
TEST(marker_control_tokens)
{
    const char *m = rlx_test_shared("models/synth-qwen3-tiny-f32.gguf");
    if (!m) SKIP("synth-qwen3-tiny-f32.gguf absent");
    const char *tag = "<|im_start|>", *g = "root ::= \"<|im_start|>\" [a-z]{1,4}\n";
    for (int marked = 0; marked < 2; marked++) {
        rlx_worker_config cfg = {.model_path = m, .n_threads = 2, .max_seqs = 2, .max_batch_tokens = 64, .max_queue = 8};
        rlx_worker *w = NULL;
        rlx_error err = {0};
        ASSERT_MSG(rlx_worker_start(&w, &cfg, &err) == 0, "%s", err.msg);
        int32_t *ids = NULL;
        size_t n = 0;
        ASSERT(rlx_tokenize(rlx_worker_tokenizer(w), tag, strlen(tag), false, true, &ids, &n, &err) == 0 && n == 1);
        int32_t id = ids[0];
        free(ids);
        char buf[32];
        ASSERT_EQ(rlx_token_to_bytes(rlx_worker_tokenizer(w), id, false, buf, sizeof buf), 0); /* a control token */
        if (marked) {
            const char *texts[] = {"[TOOL_CALLS]", tag};
            ASSERT_EQ(rlx_worker_set_marker_tokens(w, texts, 2), 1);
        }
        result res;
        memset(&res, 0, sizeof res);
        rlx_request *r = rlx_request_new();
        r->id = 1;
        static const int32_t prompt[] = {9707, 11, 1879, 0};
        r->prompt_ids = malloc(sizeof prompt);
        memcpy(r->prompt_ids, prompt, sizeof prompt);
        r->n_prompt = RLX_ARRAY_LEN(prompt);
        r->max_tokens = 32;
        r->sampling.temperature = 0;
        rlx_logit_bias *b = malloc(sizeof *b);
        b->token = id;
        b->bias = 100;
        r->sampling.logit_bias = b;
        r->sampling.n_logit_bias = 1;
        r->grammar = strdup(g);
        r->on_event = on_event;
        r->user = &res;
        pthread_mutex_lock(&mu);
        pending++;
        pthread_mutex_unlock(&mu);
        ASSERT_MSG(rlx_worker_submit(w, r, &err) == 0, "%s", err.msg);
        wait_all();
        ASSERT_MSG(res.error == 0, "%s", res.msg);
        ASSERT_MSG(follows(g, res.text, res.len, true), "marked %d: '%s'", marked, res.text);
        bool used = false;
        for (int i = 0; i < res.n_tokens; i++) used = used || res.tokens[i] == id;
        ASSERT_MSG(marked ? res.tokens[0] == id : !used, "marked %d: first token %d, tag %d", marked, res.tokens[0], id);
        rlx_worker_stop(w, false);
    }
}

/* Token references through the worker (stories260K: <unk> 0, <s> 1, </s> 2 ends generation):
 * <s> resolved by the tokenizer and matched by id (a control token, no bytes), then three
 * tokens that are not <s> (nor the end), then text; at temperature 1 over several seeds. A
 * reference the vocabulary does not have, an id past it and the end token fail their own
 * requests with a message. */
TEST(token_references_in_the_worker)
{
    rlx_worker *w = start();
    if (!w) SKIP("stories260K.gguf absent");
    const char *g = "root ::= <s> !<s>{3} \" the end.\"\n";
    static result ok[4], bad[3];
    for (int i = 0; i < 4; i++) ASSERT_EQ(submit(w, (uint64_t)i + 1, g, 1.0f, (uint64_t)(70 + i), 32, &ok[i]), 0);
    ASSERT_EQ(submit(w, 11, "root ::= \"a\" <nope>\n", 1.0f, 1, 8, &bad[0]), 0);
    ASSERT_EQ(submit(w, 12, "root ::= <[512]>\n", 1.0f, 1, 8, &bad[1]), 0);
    ASSERT_EQ(submit(w, 13, "root ::= \"a\" </s>\n", 1.0f, 1, 8, &bad[2]), 0);
    wait_all();
    for (int i = 0; i < 4; i++) {
        ASSERT_MSG(ok[i].error == 0, "%s", ok[i].msg);
        ASSERT_EQ(ok[i].finish, RLX_FINISH_STOP);
        ASSERT_MSG(ok[i].n_tokens >= 5 && ok[i].tokens[0] == 1, "%d tokens, first %d", ok[i].n_tokens, ok[i].tokens[0]);
        for (int k = 1; k <= 3; k++) ASSERT(ok[i].tokens[k] != 1 && ok[i].tokens[k] != 2);
        ASSERT_MSG(ok[i].len >= 9 && !strcmp(ok[i].text + ok[i].len - 9, " the end."), "'%s'", ok[i].text);
    }
    ASSERT(bad[0].error == RLX_EINVAL && strstr(bad[0].msg, "<nope> is not one token"));
    ASSERT(bad[1].error == RLX_EINVAL && strstr(bad[1].msg, "not in the vocabulary (512 tokens)"));
    ASSERT_MSG(bad[2].error == RLX_EINVAL && strstr(bad[2].msg, "ends generation"), "%s", bad[2].msg);
    rlx_worker_stop(w, false);
}

/* The helper beside the forward pass (engine/gaside.h) changes where masks and tables are
 * built, not what is drawn: the same seeded requests (JSON objects, counted words, an
 * unconstrained one, a lazy grammar) give the same tokens with it on and off; on, it ran beside
 * the forward passes, prefetched masks and built the walks' tables (none in-line); off, it never
 * ran. */
TEST(helper_beside_the_forward_pass_changes_no_output)
{
    static result res[2][8];
    rlx_worker_stats st[2];
    for (int on = 0; on < 2; on++) {
        rlx_worker *w = start_aside(on ? 1 : -1);
        if (!w) SKIP("stories260K.gguf absent");
        for (int i = 0; i < 8; i++) {
            const char *g = i < 4 ? rlx_grammar_json_object : i < 6 ? grammars[1] : i == 6 ? NULL : grammars[3];
            ASSERT_EQ(submit_p(w, (uint64_t)i + 1, g, i == 7 ? "()" : NULL, 1.0f, (uint64_t)(40 + i), 64, &res[on][i]), 0);
        }
        wait_all();
        rlx_worker_get_stats(w, &st[on]);
        rlx_worker_stop(w, false);
        for (int i = 0; i < 8; i++) ASSERT_MSG(res[on][i].error == 0, "on %d req %d: %s", on, i, res[on][i].msg);
    }
    for (int i = 0; i < 8; i++) {
        ASSERT_MSG(res[0][i].n_tokens == res[1][i].n_tokens &&
                       !memcmp(res[0][i].tokens, res[1][i].tokens, (size_t)res[0][i].n_tokens * sizeof(int32_t)),
                   "req %d differs: '%s' vs '%s'", i, res[0][i].text, res[1][i].text);
        if (i < 4) ASSERT(follows(rlx_grammar_json_object, res[1][i].text, res[1][i].len, res[1][i].finish == RLX_FINISH_STOP));
    }
    ASSERT_EQ(st[0].grammar_aside_runs, 0);
    ASSERT_EQ(st[0].grammar_aside_tables, 0);
    fprintf(stderr, "  helper: %llu steps, %llu masks prefetched, %lld tables, %.1f ms\n",
            (unsigned long long)st[1].grammar_aside_runs, (unsigned long long)st[1].grammar_aside_prefetches,
            (long long)st[1].grammar_aside_tables, st[1].grammar_aside_s * 1e3);
    ASSERT(st[1].grammar_aside_runs > 0);
    ASSERT(st[1].grammar_aside_prefetches > 0);
    ASSERT(st[1].grammar_aside_tables > 0);
}

TEST_MAIN(TEST_ENTRY(outputs_follow_their_grammars), TEST_ENTRY(json_object_mode),
          TEST_ENTRY(batch_invariance_with_grammars), TEST_ENTRY(bad_grammar_fails_its_request_only),
          TEST_ENTRY(marker_control_tokens), TEST_ENTRY(lazy_pattern_in_the_worker),
          TEST_ENTRY(token_references_in_the_worker), TEST_ENTRY(helper_beside_the_forward_pass_changes_no_output))
