/* test_worker_stop.c - stop strings inside the engine: the sequence ends with RLX_FINISH_STOP at
 * the token that completed the match, its text (token events + final event) ends just before
 * the stop string and never shows part of one, usage counts exactly the tokens up to that
 * token, and a session commits the turn up to it. Runs on stories260K from ../shared, whose
 * greedy story for "Once upon a time" is in ../shared/models/README.md. */
#include "tests/rlx_test.h"
#include "engine/engine.h"

#include <pthread.h>

#define PROMPT "Once upon a time"
#define MAX_TOK 48

typedef struct run {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int error;
    rlx_finish_reason finish;
    rlx_usage usage;
    int32_t tokens[MAX_TOK];
    int n_tokens;
    char text[4096];         /* every event's text, in order */
    size_t len;
    size_t piece_end[MAX_TOK]; /* len after each token event */
} run;

static void on_event(void *user, const rlx_event *ev)
{
    run *r = user;
    pthread_mutex_lock(&r->mu);
    if (ev->text_len && r->len + ev->text_len < sizeof r->text) {
        memcpy(r->text + r->len, ev->text, ev->text_len);
        r->len += ev->text_len;
        r->text[r->len] = 0;
    }
    if (ev->type == RLX_EV_TOKEN && r->n_tokens < MAX_TOK) {
        r->piece_end[r->n_tokens] = r->len;
        r->tokens[r->n_tokens++] = ev->token;
    }
    if (ev->type != RLX_EV_TOKEN) {
        r->done = true;
        r->finish = ev->finish;
        r->usage = ev->usage;
        r->error = ev->type == RLX_EV_ERROR ? ev->error_code : 0;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

static rlx_worker *start(void)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) return NULL;
    rlx_worker_config cfg = {.model_path = m, .n_threads = 1, .max_seqs = 4};
    rlx_worker *w = NULL;
    rlx_error err = {0};
    if (rlx_worker_start(&w, &cfg, &err)) { fprintf(stderr, "start: %s\n", err.msg); return NULL; }
    return w;
}

/* One greedy request; stops is NULL-terminated. Returns the submit code. */
static int go(rlx_worker *w, const char *session, const char *prompt, const char *const *stops, run *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_init(&out->mu, NULL);
    pthread_cond_init(&out->cv, NULL);
    rlx_request *r = rlx_request_new();
    r->id = 1;
    /* tokenized as the server does (special tokens added, then marked as added) */
    int rc = rlx_tokenize(rlx_worker_tokenizer(w), prompt, strlen(prompt), true, true, &r->prompt_ids, &r->n_prompt, NULL);
    if (rc) {
        rlx_request_free(r);
        return rc;
    }
    r->bos_added = true;
    r->max_tokens = MAX_TOK;
    r->ignore_eos = true;
    r->sampling.temperature = 0;
    r->session_id = session ? strdup(session) : NULL;
    size_t n = 0;
    while (stops && stops[n]) n++;
    if (n) {
        r->stop = calloc(n, sizeof *r->stop);
        for (size_t i = 0; i < n; i++) r->stop[i] = strdup(stops[i]);
        r->n_stop = n;
    }
    r->on_event = on_event;
    r->user = out;
    rlx_error err = {0};
    rc = rlx_worker_submit(w, r, &err);
    if (rc) return rc;
    pthread_mutex_lock(&out->mu);
    while (!out->done) pthread_cond_wait(&out->cv, &out->mu);
    pthread_mutex_unlock(&out->mu);
    return 0;
}

/* For each stop string: the reference run (no stops) tells at which token its text first holds
 * the stop string; the stopped run must end exactly there. */
TEST(stop_ends_at_the_matching_token)
{
    rlx_worker *w = start();
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    static run ref, got;
    ASSERT_EQ(go(w, NULL, PROMPT, NULL, &ref), 0);
    ASSERT_EQ(ref.n_tokens, MAX_TOK);
    ASSERT(strstr(ref.text, "Lily") != NULL);
    /* one token, a string ending inside a token, one spanning tokens, and two where the earlier wins */
    static const char *const cases[][3] = {{"Lily", NULL}, {"med Li", NULL}, {"little girl", NULL},
                                           {"park", "girl", NULL}, {"zzz", NULL}};
    for (size_t c = 0; c < RLX_ARRAY_LEN(cases); c++) {
        const char *const *stops = cases[c];
        size_t cut = strlen(ref.text);
        for (size_t i = 0; stops[i]; i++) {
            const char *p = strstr(ref.text, stops[i]);
            if (p && (size_t)(p - ref.text) < cut) cut = (size_t)(p - ref.text);
        }
        int want_tokens = MAX_TOK;
        for (int t = 0; t < ref.n_tokens && cut < strlen(ref.text); t++) {
            bool hit = false;
            for (size_t i = 0; stops[i]; i++) {
                const char *p = strstr(ref.text, stops[i]);
                if (p && (size_t)(p - ref.text) + strlen(stops[i]) <= ref.piece_end[t]) hit = true;
            }
            if (hit) { want_tokens = t + 1; break; }
        }
        ASSERT_EQ(go(w, NULL, PROMPT, stops, &got), 0);
        ASSERT_EQ(got.error, 0);
        bool matched = cut < strlen(ref.text);
        ASSERT_EQ(got.finish, matched ? RLX_FINISH_STOP : RLX_FINISH_LENGTH);
        ASSERT_EQ(got.usage.completion_tokens, want_tokens);
        ASSERT_EQ(got.n_tokens, want_tokens);
        for (int t = 0; t < got.n_tokens; t++) ASSERT_EQ(got.tokens[t], ref.tokens[t]);
        ASSERT_EQ(got.len, cut);
        ASSERT(memcmp(got.text, ref.text, cut) == 0);
        fprintf(stderr, "  stop '%s'%s: %d tokens, text \"%s\"\n", stops[0], stops[1] ? " + 1" : "", want_tokens, got.text);
    }
    rlx_worker_stop(w, true);
}

/* Text is never released while it may still become a stop string: each token event's text
 * stays a prefix of the text before the match. */
TEST(no_partial_stop_string_is_sent)
{
    rlx_worker *w = start();
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    static run got;
    static const char *const stops[] = {"Lily. She loved to fly", NULL}; /* shares a long prefix with the story */
    ASSERT_EQ(go(w, NULL, PROMPT, stops, &got), 0);
    ASSERT_EQ(got.finish, RLX_FINISH_LENGTH);
    const char *lily = strstr(got.text, "Lily");
    ASSERT(lily != NULL);
    /* "Lily. She loved to " was held until " play" ruled the stop string out */
    size_t at = (size_t)(lily - got.text);
    for (int t = 0; t < got.n_tokens; t++)
        if (got.piece_end[t] > at) {
            ASSERT(got.piece_end[t] >= at + strlen("Lily. She loved to play"));
            break;
        }
    rlx_worker_stop(w, true);
}

TEST(session_commits_the_stopped_turn)
{
    rlx_worker *w = start();
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    static run a, b;
    static const char *const stops[] = {"Lily", NULL};
    ASSERT_EQ(go(w, "stop-1", PROMPT, stops, &a), 0);
    ASSERT_EQ(a.finish, RLX_FINISH_STOP);
    rlx_session_info info;
    int32_t *hist = NULL;
    size_t n = 0;
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_session_get(w, "stop-1", &info, &hist, &n, &err), 0);
    ASSERT_EQ((int64_t)n, a.usage.prompt_tokens + a.usage.completion_tokens);
    for (int t = 0; t < a.n_tokens; t++) ASSERT_EQ(hist[a.usage.prompt_tokens + t], a.tokens[t]);
    free(hist);
    /* the next turn continues from the token that completed the stop string */
    ASSERT_EQ(go(w, "stop-1", ". She", NULL, &b), 0);
    ASSERT_EQ(b.error, 0);
    ASSERT(b.usage.prompt_tokens > a.usage.prompt_tokens + a.usage.completion_tokens);
    rlx_worker_stop(w, true);
}

TEST(empty_stop_string_rejected)
{
    rlx_worker *w = start();
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    static run r;
    static const char *const stops[] = {"ok", "", NULL};
    ASSERT_EQ(go(w, NULL, PROMPT, stops, &r), RLX_EINVAL);
    rlx_worker_stop(w, true);
}

TEST_MAIN(TEST_ENTRY(stop_ends_at_the_matching_token), TEST_ENTRY(no_partial_stop_string_is_sent),
          TEST_ENTRY(session_commits_the_stopped_turn), TEST_ENTRY(empty_stop_string_rejected))
