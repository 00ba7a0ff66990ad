/* test_worker_session.c - sessions through the worker: the next turn appends to the history and
 * prefills only new tokens; a session survives a worker restart through the sqlite3 store and
 * its KV snapshot (second turn reports cached tokens); list / get / delete; an appended turn
 * continues the sequence (no BOS after the first turn's, unless the client sent it as an id). */
#include "tests/rlx_test.h"
#include "engine/engine.h"

#include <pthread.h>
#include <unistd.h>

typedef struct turn { pthread_mutex_t mu; pthread_cond_t cv; bool done; rlx_usage usage; int err; int n; int32_t tok[64]; } turn;

static void on_event(void *user, const rlx_event *ev)
{
    turn *t = user;
    pthread_mutex_lock(&t->mu);
    if (ev->type == RLX_EV_TOKEN && t->n < 64) t->tok[t->n++] = ev->token;
    else if (ev->type == RLX_EV_TOKEN) t->n++;
    else { t->done = true; t->usage = ev->usage; t->err = ev->type == RLX_EV_ERROR ? ev->error_code : 0; }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

static rlx_worker *start(const char *db)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) return NULL;
    rlx_worker_config cfg = {.model_path = m, .n_threads = 1, .max_seqs = 4, .db_path = db};
    rlx_worker *w = NULL;
    rlx_error err = {0};
    if (rlx_worker_start(&w, &cfg, &err)) { fprintf(stderr, "start: %s\n", err.msg); return NULL; }
    return w;
}

/* Submits r and waits for its final event (t receives the events). */
static void submit_wait(rlx_worker *w, rlx_request *r, turn *t)
{
    r->on_event = on_event;
    r->user = t;
    rlx_error err = {0};
    if (rlx_worker_submit(w, r, &err)) {
        t->err = err.code;
        return;
    }
    pthread_mutex_lock(&t->mu);
    while (!t->done) pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
}

static turn run_turn(rlx_worker *w, const char *session, const char *text, bool replace)
{
    turn t = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, {0}, 0, 0, {0}};
    rlx_request *r = rlx_request_new();
    r->id = 1;
    /* tokenized as the server does (special tokens added, then marked as added) */
    rlx_error err = {0};
    if (rlx_tokenize(rlx_worker_tokenizer(w), text, strlen(text), true, true, &r->prompt_ids, &r->n_prompt, &err)) {
        rlx_request_free(r);
        t.err = err.code;
        return t;
    }
    r->bos_added = true;
    r->max_tokens = 20;
    r->ignore_eos = true;
    r->sampling.temperature = 0;
    r->session_id = session ? strdup(session) : NULL;
    r->session_replace = replace;
    submit_wait(w, r, &t);
    return t;
}

/* A one-shot request of ids on a fresh worker: its generated tokens into t. */
static void one_shot(const int32_t *ids, size_t n, turn *t)
{
    rlx_worker *w = start(NULL);
    ASSERT_MSG(w != NULL, "fresh worker");
    rlx_request *r = rlx_request_new();
    r->prompt_ids = malloc(n * sizeof *ids);
    memcpy(r->prompt_ids, ids, n * sizeof *ids);
    r->n_prompt = n;
    r->max_tokens = 20;
    r->ignore_eos = true;
    r->sampling.temperature = 0;
    submit_wait(w, r, t);
    rlx_worker_stop(w, true);
}

TEST(next_turn_prefills_only_new_tokens)
{
    rlx_worker *w = start(NULL);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    turn a = run_turn(w, "chat-1", "Once upon a time there was a little girl named Lily who loved", false);
    ASSERT_EQ(a.err, 0);
    int32_t hist = a.usage.prompt_tokens + a.usage.completion_tokens, p1 = a.usage.prompt_tokens;
    int32_t *h1 = NULL;
    size_t nh1 = 0;
    rlx_session_info hi;
    rlx_error herr = {0};
    ASSERT_EQ(rlx_worker_session_get(w, "chat-1", &hi, &h1, &nh1, &herr), 0);
    ASSERT_EQ((int32_t)nh1, hist);
    turn b = run_turn(w, "chat-1", " She went to the park", false);
    ASSERT_EQ(b.err, 0);
    ASSERT(b.usage.prompt_tokens > hist);                   /* history + the new text */
    /* the previous prompt's full blocks of prompt tokens are reused; its answer, computed as
       generated tokens, is computed again as prompt tokens (its K/V differ in the last bits) */
    ASSERT_EQ(b.usage.cached_tokens, (p1 - p1 % 4) / 16 * 16);
    ASSERT(b.usage.cached_tokens > 0);
    /* so the turn gives exactly what the whole history sent at once gives on a fresh worker */
    int32_t *ids = NULL;
    size_t nn = 0;
    ASSERT_EQ(rlx_tokenize(rlx_worker_tokenizer(w), " She went to the park", 21, true, true, &ids, &nn, &herr), 0);
    int32_t *all = malloc((nh1 + nn) * sizeof *all);
    memcpy(all, h1, nh1 * sizeof *all);
    size_t skip = nn && ids[0] == rlx_tokenizer_bos(rlx_worker_tokenizer(w)) ? 1 : 0; /* the session drops it */
    memcpy(all + nh1, ids + skip, (nn - skip) * sizeof *all);
    turn o = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, {0}, 0, 0, {0}};
    one_shot(all, nh1 + nn - skip, &o);
    ASSERT_EQ(o.err, 0);
    ASSERT_EQ(o.usage.prompt_tokens, b.usage.prompt_tokens);
    ASSERT_EQ(o.n, b.n);
    ASSERT(memcmp(o.tok, b.tok, (size_t)b.n * sizeof *b.tok) == 0);
    free(all);
    free(ids);
    free(h1);
    /* list / get / delete */
    rlx_session_info *list = NULL, info;
    size_t n = 0, total = 0, nt = 0;
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_sessions_list(w, 0, 10, &list, &n, &total, &err), 0);
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(list[0].id, "chat-1");
    free(list);
    int32_t *toks = NULL;
    ASSERT_EQ(rlx_worker_session_get(w, "chat-1", &info, &toks, &nt, &err), 0);
    ASSERT_EQ((int64_t)nt, b.usage.prompt_tokens + b.usage.completion_tokens);
    free(toks);
    ASSERT_EQ(rlx_worker_session_delete(w, "chat-1", &err), 0);
    ASSERT_EQ(rlx_worker_session_get(w, "chat-1", &info, NULL, NULL, &err), RLX_ENOTFOUND);
    ASSERT_EQ(rlx_worker_session_delete(w, "bad id!", &err), RLX_EINVAL);
    /* a replaced conversation reuses the cached prefix without appending */
    turn c = run_turn(w, "chat-2", "Once upon a time there was a little girl named Lily who loved", true);
    turn d = run_turn(w, "chat-2", "Once upon a time there was a little girl named Lily who loved to play", true);
    ASSERT_EQ(c.err, 0);
    ASSERT_EQ(d.err, 0);
    ASSERT(d.usage.prompt_tokens < c.usage.prompt_tokens + 20);
    rlx_worker_stop(w, true);
}

TEST(survives_restart)
{
    char dir[] = "/tmp/rlxd-sess-XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    char db[256];
    snprintf(db, sizeof db, "%s/sessions.db", dir);
    rlx_worker *w = start(db);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    /* a long first turn so several full blocks are snapshotted */
    turn a = run_turn(w, "persist", "Once upon a time there was a little girl named Lily. She loved to play outside in the park with her friends and her dog", false);
    ASSERT_EQ(a.err, 0);
    rlx_worker_stop(w, true);
    w = start(db);
    ASSERT(w != NULL);
    rlx_session_info info;
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_session_get(w, "persist", &info, NULL, NULL, &err), 0);
    ASSERT(info.has_kv_snapshot);
    turn b = run_turn(w, "persist", " One day", false);
    ASSERT_EQ(b.err, 0);
    ASSERT(b.usage.prompt_tokens > a.usage.prompt_tokens + a.usage.completion_tokens); /* history + " One day" */
    ASSERT(b.usage.cached_tokens >= 32);
    fprintf(stderr, "  restart: second turn %d prompt tokens, %d cached\n", b.usage.prompt_tokens, b.usage.cached_tokens);
    rlx_worker_stop(w, true);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ASSERT_EQ(system(cmd), 0);
}

static size_t count_bos(rlx_worker *w, const char *session, size_t *first)
{
    int32_t bos = rlx_tokenizer_bos(rlx_worker_tokenizer(w)), *toks = NULL;
    size_t nt = 0, cnt = 0;
    rlx_session_info info;
    rlx_error err = {0};
    *first = (size_t)-1;
    if (rlx_worker_session_get(w, session, &info, &toks, &nt, &err)) return (size_t)-1;
    for (size_t i = 0; i < nt; i++)
        if (toks[i] == bos) { if (!cnt) *first = i; cnt++; }
    free(toks);
    return cnt;
}

static turn run_ids(rlx_worker *w, const char *session, const int32_t *ids, size_t n, bool bos_added)
{
    turn t = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, {0}, 0, 0, {0}};
    rlx_request *r = rlx_request_new();
    r->id = 2;
    r->prompt_ids = malloc(n * sizeof *ids);
    memcpy(r->prompt_ids, ids, n * sizeof *ids);
    r->n_prompt = n;
    r->bos_added = bos_added;
    r->max_tokens = 4;
    r->sampling.temperature = 0;
    r->session_id = strdup(session);
    submit_wait(w, r, &t);
    return t;
}

TEST(appended_turn_has_no_bos)
{
    rlx_worker *w = start(NULL);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    int32_t bos = rlx_tokenizer_bos(rlx_worker_tokenizer(w));
    ASSERT(bos >= 0);
    ASSERT_EQ(run_turn(w, "c", "Once upon a time", false).err, 0);
    size_t first;
    ASSERT_EQ(count_bos(w, "c", &first), 1);  /* the first turn keeps its BOS */
    ASSERT_EQ(first, 0);
    ASSERT_EQ(run_turn(w, "c", " One day", false).err, 0);
    ASSERT_EQ(count_bos(w, "c", &first), 1);  /* text tokenized with add_special: dropped */
    int32_t ids[3] = {bos, 400, 401};
    ASSERT_EQ(run_ids(w, "c", ids, 3, true).err, 0);
    ASSERT_EQ(count_bos(w, "c", &first), 1);  /* ids the server tokenized: dropped */
    ASSERT_EQ(run_ids(w, "c", ids, 3, false).err, 0);
    ASSERT_EQ(count_bos(w, "c", &first), 2);  /* ids the client sent: kept */
    ASSERT_EQ(first, 0);
    /* a new session's first turn keeps it even when marked */
    ASSERT_EQ(run_ids(w, "d", ids, 3, true).err, 0);
    ASSERT_EQ(count_bos(w, "d", &first), 1);
    ASSERT_EQ(first, 0);
    rlx_worker_stop(w, true);
}

/* A turn whose first token event holds the worker thread until the test lets it go: its
 * session is attached (busy) meanwhile, and requests submitted then stay in the inbox. */
typedef struct gate { pthread_mutex_t mu; pthread_cond_t cv; bool in, open; turn t; } gate;

static void gated_event(void *user, const rlx_event *ev)
{
    gate *g = user;
    pthread_mutex_lock(&g->mu);
    g->in = true;
    pthread_cond_broadcast(&g->cv);
    while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    on_event(&g->t, ev);
}

static rlx_request *turn_req(rlx_worker *w, const char *session, int max_tokens)
{
    rlx_request *r = rlx_request_new();
    rlx_error err = {0};
    if (rlx_tokenize(rlx_worker_tokenizer(w), "Once upon a time", 16, true, true, &r->prompt_ids, &r->n_prompt, &err)) {
        rlx_request_free(r);
        return NULL;
    }
    r->bos_added = true;
    r->max_tokens = max_tokens;
    r->sampling.temperature = 0;
    r->session_id = strdup(session);
    return r;
}

/* A turn on a session another request holds (running, or submitted and not yet taken in) is
 * refused at submit with RLX_EFULL, so the server can answer a stream 503 before it starts (it
 * used to be accepted, then failed by an error event after the stream's 200). */
TEST(busy_session_refused_at_submit)
{
    rlx_worker *w = start(NULL);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false,
              {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, {0}, 0, 0, {0}}};
    rlx_request *a = turn_req(w, "held", 8);
    ASSERT(a);
    a->on_event = gated_event;
    a->user = &g;
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_submit(w, a, &err), 0);
    pthread_mutex_lock(&g.mu);
    while (!g.in) pthread_cond_wait(&g.cv, &g.mu); /* the worker thread now waits in a's event */
    pthread_mutex_unlock(&g.mu);

    turn tb = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, {0}, 0, 0, {0}};
    rlx_request *b = turn_req(w, "held", 4);
    ASSERT(b);
    b->on_event = on_event;
    b->user = &tb;
    ASSERT_EQ(rlx_worker_submit(w, b, &err), RLX_EFULL); /* attached and running */
    ASSERT(strstr(err.msg, "session 'held' is busy"));

    turn tc = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, {0}, 0, 0, {0}}, td = tc;
    rlx_request *c = turn_req(w, "queued", 4), *d = turn_req(w, "queued", 4);
    ASSERT(c && d);
    c->on_event = d->on_event = on_event;
    c->user = &tc;
    d->user = &td;
    ASSERT_EQ(rlx_worker_submit(w, c, &err), 0);         /* another session: queued */
    ASSERT_EQ(rlx_worker_submit(w, d, &err), RLX_EFULL); /* the queued one holds it */
    ASSERT(strstr(err.msg, "session 'queued' is busy"));

    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    for (turn *t = &g.t; t; t = t == &g.t ? &tc : NULL) {
        pthread_mutex_lock(&t->mu);
        while (!t->done) pthread_cond_wait(&t->cv, &t->mu);
        pthread_mutex_unlock(&t->mu);
        ASSERT_EQ(t->err, 0);
    }
    ASSERT_EQ(g.t.n, 8);
    ASSERT_EQ(run_turn(w, "held", " then", false).err, 0); /* free again once the turn ended */
    rlx_worker_stop(w, true);
}

/* --max-queue bounds the requests that wait, not those a free sequence slot takes: with one of
 * two slots busy and max_queue 2, three more are taken (one runs next, two wait) and a fourth
 * is refused (the old count refused the third: a burst into free slots was turned away). */
TEST(max_queue_counts_waiting_only)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) SKIP("../shared/models/stories260K.gguf absent");
    rlx_worker_config cfg = {.model_path = m, .n_threads = 1, .max_seqs = 2, .max_queue = 2};
    rlx_worker *w = NULL;
    rlx_error err = {0};
    ASSERT_MSG(rlx_worker_start(&w, &cfg, &err) == 0, "%s", err.msg);
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false,
              {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, {0}, 0, 0, {0}}};
    rlx_request *a = turn_req(w, "a", 4);
    ASSERT(a);
    free(a->session_id);
    a->session_id = NULL;
    a->on_event = gated_event;
    a->user = &g;
    ASSERT_EQ(rlx_worker_submit(w, a, &err), 0);
    pthread_mutex_lock(&g.mu);
    while (!g.in) pthread_cond_wait(&g.cv, &g.mu); /* a runs; the worker thread waits in its event */
    pthread_mutex_unlock(&g.mu);
    turn t[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (turn){PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, {0}, 0, 0, {0}};
        rlx_request *r = turn_req(w, "x", 4);
        ASSERT(r);
        free(r->session_id);
        r->session_id = NULL;
        r->on_event = on_event;
        r->user = &t[i];
        int rc = rlx_worker_submit(w, r, &err);
        ASSERT_MSG(rc == (i < 3 ? 0 : RLX_EFULL), "request %d: %d %s", i, rc, err.msg);
        if (rc) t[i].done = true;
    }
    ASSERT(strstr(err.msg, "too many requests are waiting (2)"));
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    for (int i = -1; i < 4; i++) {
        turn *x = i < 0 ? &g.t : &t[i];
        pthread_mutex_lock(&x->mu);
        while (!x->done) pthread_cond_wait(&x->cv, &x->mu);
        pthread_mutex_unlock(&x->mu);
        ASSERT_EQ(x->err, 0);
    }
    rlx_worker_stop(w, true);
}

/* A client that stops a turn (its connection closes: the server cancels the request) and sends
 * its next turn at once is taken (it was a 503 "busy" until the worker had applied the cancel): the
 * worker applies cancels before it takes in new requests, so the next turn finds the session free
 * and continues the history before the stopped turn. */
TEST(next_turn_after_a_cancel_is_taken)
{
    rlx_worker *w = start(NULL);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    ASSERT_EQ(run_turn(w, "chat", "Once", false).err, 0);
    int32_t *h = NULL;
    size_t nh = 0;
    rlx_session_info info;
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_session_get(w, "chat", &info, &h, &nh, &err), 0);
    free(h);
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false,
              {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, {0}, 0, 0, {0}}};
    rlx_request *a = turn_req(w, "chat", 16);
    ASSERT(a);
    a->id = 41;
    a->on_event = gated_event;
    a->user = &g;
    ASSERT_EQ(rlx_worker_submit(w, a, &err), 0);
    pthread_mutex_lock(&g.mu);
    while (!g.in) pthread_cond_wait(&g.cv, &g.mu); /* turn 2 runs: the worker waits in its event */
    pthread_mutex_unlock(&g.mu);
    rlx_worker_cancel(w, 41);
    turn tb = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, {0}, 0, 0, {0}};
    rlx_request *b = turn_req(w, "chat", 4);
    ASSERT(b);
    b->id = 42;
    b->on_event = on_event;
    b->user = &tb;
    ASSERT_MSG(rlx_worker_submit(w, b, &err) == 0, "%s", err.msg);
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    for (turn *t = &g.t; t; t = t == &g.t ? &tb : NULL) {
        pthread_mutex_lock(&t->mu);
        while (!t->done) pthread_cond_wait(&t->cv, &t->mu);
        pthread_mutex_unlock(&t->mu);
    }
    ASSERT_EQ(tb.err, 0);
    ASSERT_EQ(tb.n, 4);
    ASSERT(tb.usage.prompt_tokens > (int32_t)nh); /* the history before the stopped turn, then this one */
    rlx_worker_stop(w, true);
}

/* A new session whose first turn is cancelled (a client gone mid-stream) leaves no session: it
 * was listed with 0 tokens, and reading it copied from a null history (UBSan stopped the daemon);
 * with --db no row was ever written, so both ways now agree. A session with history keeps it. */
TEST(cancelled_first_turn_leaves_no_session)
{
    rlx_worker *w = start(NULL);
    if (!w) SKIP("../shared/models/stories260K.gguf absent");
    ASSERT_EQ(run_turn(w, "kept", "Once", false).err, 0);
    for (int round = 0; round < 2; round++) { /* a new session, then one with history */
        const char *id = round ? "kept" : "ghost";
        gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false,
                  {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, {0}, 0, 0, {0}}};
        rlx_request *a = turn_req(w, id, 16);
        ASSERT(a);
        a->id = 7;
        a->on_event = gated_event;
        a->user = &g;
        rlx_error err = {0};
        ASSERT_EQ(rlx_worker_submit(w, a, &err), 0);
        pthread_mutex_lock(&g.mu);
        while (!g.in) pthread_cond_wait(&g.cv, &g.mu); /* attached and generating */
        pthread_mutex_unlock(&g.mu);
        rlx_worker_cancel(w, 7);
        pthread_mutex_lock(&g.mu);
        g.open = true;
        pthread_cond_broadcast(&g.cv);
        pthread_mutex_unlock(&g.mu);
        pthread_mutex_lock(&g.t.mu);
        while (!g.t.done) pthread_cond_wait(&g.t.cv, &g.t.mu);
        pthread_mutex_unlock(&g.t.mu);
    }
    rlx_session_info info;
    int32_t *toks = NULL;
    size_t n = 0, total = 0;
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_session_get(w, "ghost", &info, &toks, &n, &err), RLX_ENOTFOUND);
    ASSERT_EQ(rlx_worker_session_get(w, "kept", &info, &toks, &n, &err), 0);
    ASSERT(n > 1);
    free(toks);
    rlx_session_info *list = NULL;
    ASSERT_EQ(rlx_worker_sessions_list(w, 0, 100, &list, &n, &total, &err), 0);
    ASSERT_EQ(total, 1);
    ASSERT_EQ(n, 1);
    ASSERT(!strcmp(list[0].id, "kept"));
    free(list);
    ASSERT_EQ(run_turn(w, "ghost", "Once", false).err, 0); /* the id is free for a real first turn */
    rlx_worker_stop(w, true);
}

TEST_MAIN(TEST_ENTRY(next_turn_prefills_only_new_tokens), TEST_ENTRY(survives_restart),
          TEST_ENTRY(appended_turn_has_no_bos), TEST_ENTRY(busy_session_refused_at_submit),
          TEST_ENTRY(max_queue_counts_waiting_only), TEST_ENTRY(cancelled_first_turn_leaves_no_session),
          TEST_ENTRY(next_turn_after_a_cancel_is_taken))
