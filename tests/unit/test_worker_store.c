/* test_worker_store.c - sessions of a worker with a database: a snapshot is used only by the
 * model file and history it was taken of (another same-shape model, or a history rewritten
 * under it, recomputes instead, with the same output as a cold run), it round-trips a Q8_0
 * cache, a DELETE while the session's turn runs stays deleted, TTL applies to reads, several
 * models share one database without seeing each other's sessions, and a history that no
 * longer fits is refused with a message naming the session history. */
#include "tests/rlx_test.h"
#include "tests/rlx_test_tmp.h"
#include "engine/engine.h"
#include "engine/session.h"

#include <pthread.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_OUT 64

typedef struct turn {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int err;
    rlx_finish_reason finish;
    rlx_usage usage;
    int32_t out[MAX_OUT];
    int n;
    char msg[600];
} turn;

/* How long an error event's callback keeps the thread that delivered it (the worker's session
 * writer for a store failure) after waking the test: what the writer does after delivering the
 * event then runs late, as on a loaded host. */
static useconds_t g_error_linger_us;

static void on_event(void *user, const rlx_event *ev)
{
    turn *t = user;
    pthread_mutex_lock(&t->mu);
    if (ev->type == RLX_EV_TOKEN && t->n < MAX_OUT) t->out[t->n++] = ev->token;
    if (ev->type != RLX_EV_TOKEN) {
        t->done = true;
        t->usage = ev->usage;
        t->finish = ev->finish;
        t->err = ev->type == RLX_EV_ERROR ? ev->error_code : 0;
        if (ev->error_msg) snprintf(t->msg, sizeof t->msg, "%s", ev->error_msg);
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    if (ev->type == RLX_EV_ERROR && g_error_linger_us) usleep(g_error_linger_us);
}

typedef struct opts { const char *model, *name, *db; int kv_type; double ttl; int32_t ctx; } opts;

static rlx_worker *start(opts o)
{
    rlx_worker_config cfg = {.model_path = o.model, .name = o.name, .n_threads = 1, .max_seqs = 4, .db_path = o.db,
                             .kv_type = o.kv_type ? o.kv_type : RLX_F16, .kv_type_set = true,
                             .session_ttl_s = o.ttl, .n_ctx = o.ctx};
    rlx_worker *w = NULL;
    rlx_error err = {0};
    if (rlx_worker_start(&w, &cfg, &err)) { fprintf(stderr, "start: %s\n", err.msg); return NULL; }
    return w;
}

static void turn_init(turn *t)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
}

/* Submits ids (n of them) greedily; returns the submit code, the turn runs on. */
static int submit(rlx_worker *w, const char *session, const int32_t *ids, size_t n, int32_t max_tokens, turn *t)
{
    turn_init(t);
    rlx_request *r = rlx_request_new();
    r->id = 1;
    r->prompt_ids = malloc(n * sizeof *ids);
    memcpy(r->prompt_ids, ids, n * sizeof *ids);
    r->n_prompt = n;
    r->max_tokens = max_tokens;
    r->ignore_eos = true;
    r->sampling.temperature = 0;
    r->session_id = session ? strdup(session) : NULL;
    r->on_event = on_event;
    r->user = t;
    rlx_error err = {0};
    int rc = rlx_worker_submit(w, r, &err);
    if (rc) { t->err = rc; t->done = true; snprintf(t->msg, sizeof t->msg, "%s", err.msg); }
    return rc;
}

static void wait_turn(turn *t)
{
    pthread_mutex_lock(&t->mu);
    while (!t->done) pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
}

static turn *run(rlx_worker *w, const char *session, const int32_t *ids, size_t n, int32_t max_tokens)
{
    static turn ring[8];
    static int next;
    turn *t = &ring[next++ & 7];
    if (submit(w, session, ids, n, max_tokens, t) == 0) wait_turn(t);
    return t;
}

static void prompt(int32_t *ids, size_t n, int salt)
{
    ids[0] = 1;
    for (size_t k = 1; k < n; k++) ids[k] = 3 + (int32_t)((k * 37 + (size_t)salt * 101) % 500);
}

static const char *synth(const char *name, int seed)
{
    const char *bin = getenv("RLX_BIN");
    const char *vocab = rlx_test_shared("models/stories260K.gguf");
    if (!bin || !vocab) return NULL;
    const char *path = rlx_test_tmp_path(name);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s/rlxd-synth' --arch llama --preset tiny --seed %d --vocab-from '%s' -o '%s' >/dev/null 2>&1",
             bin, seed, vocab, path);
    return system(cmd) == 0 ? path : NULL;
}

/* The session's second turn, then the same tokens cold on a worker without a database: when a
 * snapshot was used, outputs must still agree (the restored KV is the computed KV). */
static void second_turn_matches_cold(opts o, const char *session, turn *a, turn **b_out)
{
    int32_t more[6] = {417, 430, 271, 300, 301, 302};
    rlx_worker *w = start(o);
    ASSERT(w != NULL);
    turn *b = run(w, session, more, 6, 12);
    ASSERT_EQ(b->err, 0);
    int32_t hist = a->usage.prompt_tokens + a->usage.completion_tokens;
    ASSERT_EQ(b->usage.prompt_tokens, hist + 6);
    rlx_session_info info;
    int32_t *toks = NULL;
    size_t nt = 0;
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_session_get(w, session, &info, &toks, &nt, &err), 0);
    ASSERT_EQ((int64_t)nt, b->usage.prompt_tokens + b->usage.completion_tokens);
    rlx_worker_stop(w, true);
    opts cold = o;
    cold.db = NULL;
    w = start(cold);
    ASSERT(w != NULL);
    turn *c = run(w, NULL, toks, (size_t)b->usage.prompt_tokens, 12);
    ASSERT_EQ(c->err, 0);
    ASSERT_EQ(c->n, b->n);
    for (int i = 0; i < b->n; i++) ASSERT_EQ(c->out[i], b->out[i]);
    free(toks);
    rlx_worker_stop(w, true);
    *b_out = b;
}

static void snapshot_round_trip(int kv_type, const char *dbname)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) SKIP("../shared/models/stories260K.gguf absent");
    opts o = {.model = m, .db = rlx_test_tmp_path(dbname), .kv_type = kv_type};
    rlx_worker *w = start(o);
    ASSERT(w != NULL);
    int32_t ids[70];
    prompt(ids, 70, 1);
    turn a = *run(w, "snap", ids, 70, 10);
    ASSERT_EQ(a.err, 0);
    rlx_worker_stop(w, true);
    turn *b = NULL;
    second_turn_matches_cold(o, "snap", &a, &b);
    if (!b) return;
    ASSERT(b->usage.cached_tokens >= 64); /* the snapshot's blocks: the history's full blocks */
}

TEST(snapshot_round_trip_f16) { snapshot_round_trip(RLX_F16, "f16.db"); }
TEST(snapshot_round_trip_q8_0) { snapshot_round_trip(RLX_Q8_0, "q8.db"); }

/* Same shape, other weights, same served name and database: the snapshot must not be used. */
TEST(other_weights_recompute)
{
    const char *m1 = synth("seed1.gguf", 1), *m2 = synth("seed2.gguf", 2);
    if (!m1 || !m2) SKIP("rlxd-synth or stories260K not available");
    opts o = {.model = m1, .name = "chat", .db = rlx_test_tmp_path("weights.db")};
    rlx_worker *w = start(o);
    ASSERT(w != NULL);
    int32_t ids[70];
    prompt(ids, 70, 2);
    turn a = *run(w, "s", ids, 70, 10);
    ASSERT_EQ(a.err, 0);
    rlx_worker_stop(w, true);
    o.model = m2;
    turn *b = NULL;
    second_turn_matches_cold(o, "s", &a, &b);
    if (!b) return;
    ASSERT_EQ(b->usage.cached_tokens, 0);
}

/* A history rewritten under an existing snapshot (its row names the old file and hash) must
 * not get the old blocks: the chain hash in the file no longer matches. */
TEST(rewritten_history_recomputes)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) SKIP("../shared/models/stories260K.gguf absent");
    opts o = {.model = m, .name = "tiny", .db = rlx_test_tmp_path("chain.db")};
    rlx_worker *w = start(o);
    ASSERT(w != NULL);
    int32_t ids[70];
    prompt(ids, 70, 3);
    turn a = *run(w, "c", ids, 70, 10);
    ASSERT_EQ(a.err, 0);
    rlx_worker_stop(w, true);
    rlx_session_store *st;
    rlx_error err = {0};
    ASSERT_EQ(rlx_session_store_open(&st, o.db, &err), 0);
    rlx_session s;
    ASSERT_EQ(rlx_session_get(st, "tiny", "c", 0, &s, &err), 0);
    ASSERT(s.kv_path != NULL);
    s.tokens[5] = s.tokens[5] == 7 ? 8 : 7;
    ASSERT_EQ(rlx_session_put(st, "tiny", "c", s.tokens, s.n_tokens, s.kv_path, s.kv_model_hash, &err), 0);
    rlx_session_clear(&s);
    rlx_session_store_close(st);
    turn *b = NULL;
    second_turn_matches_cold(o, "c", &a, &b);
    if (!b) return;
    ASSERT_EQ(b->usage.cached_tokens, 0);
}

static bool exists(const char *p) { struct stat sb; return stat(p, &sb) == 0; }

/* DELETE while the session's turn is generating: the finished turn must not write it back. */
TEST(delete_during_turn_stays_deleted)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) SKIP("../shared/models/stories260K.gguf absent");
    opts o = {.model = m, .name = "tiny", .db = rlx_test_tmp_path("del.db")};
    rlx_worker *w = start(o);
    ASSERT(w != NULL);
    int32_t ids[40];
    prompt(ids, 40, 4);
    turn *a = run(w, "gone", ids, 40, 8); /* stored, with a snapshot */
    ASSERT_EQ(a->err, 0);
    char snap[512];
    snprintf(snap, sizeof snap, "%s.kv/tiny/gone.kv", o.db);
    ASSERT(exists(snap));
    static turn t;
    ASSERT_EQ(submit(w, "gone", ids, 1, 400, &t), 0);
    pthread_mutex_lock(&t.mu);
    while (t.n < 2 && !t.done) pthread_cond_wait(&t.cv, &t.mu);
    bool running = !t.done;
    pthread_mutex_unlock(&t.mu);
    ASSERT(running);
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_session_delete(w, "gone", &err), 0);
    wait_turn(&t);
    ASSERT_EQ(t.err, 0);
    ASSERT_EQ(t.finish, RLX_FINISH_LENGTH);
    rlx_session_info info;
    ASSERT_EQ(rlx_worker_session_get(w, "gone", &info, NULL, NULL, &err), RLX_ENOTFOUND);
    ASSERT(!exists(snap));
    /* a new turn of that id starts empty */
    turn *c = run(w, "gone", ids, 3, 2);
    ASSERT_EQ(c->usage.prompt_tokens, 3);
    rlx_worker_stop(w, true);
    w = start(o);
    ASSERT(w != NULL);
    ASSERT_EQ(rlx_worker_session_get(w, "gone", &info, NULL, NULL, &err), 0);
    ASSERT_EQ(info.n_tokens, 5);
    rlx_worker_stop(w, true);
}

/* An expired session is gone for every read at once, with and without a database. */
static void ttl_on_read(const char *db)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) SKIP("../shared/models/stories260K.gguf absent");
    opts o = {.model = m, .db = db, .ttl = 1.0};
    rlx_worker *w = start(o);
    ASSERT(w != NULL);
    int32_t ids[20];
    prompt(ids, 20, 5);
    turn *a = run(w, "brief", ids, 20, 4);
    double t_done = rlx_now(); /* the turn was stored before this */
    ASSERT_EQ(a->err, 0);
    rlx_session_info info, *list = NULL;
    size_t n = 0, total = 9;
    rlx_error err = {0};
    int rc = rlx_worker_session_get(w, "brief", &info, NULL, NULL, &err);
    /* a host slow enough (valgrind on a loaded machine) may reach this read after the TTL */
    if (rc == RLX_ENOTFOUND && rlx_now() - t_done >= o.ttl) {
        rlx_worker_stop(w, true);
        SKIP("the first read came after the TTL on this slow host");
    }
    ASSERT_EQ(rc, 0);
    usleep(1500 * 1000);
    ASSERT_EQ(rlx_worker_session_get(w, "brief", &info, NULL, NULL, &err), RLX_ENOTFOUND);
    ASSERT_EQ(rlx_worker_sessions_list(w, 0, 10, &list, &n, &total, &err), 0);
    free(list);
    ASSERT_EQ(total, 0);
    ASSERT_EQ(rlx_worker_session_delete(w, "brief", &err), RLX_ENOTFOUND);
    turn *b = run(w, "brief", ids, 5, 2); /* resuming it starts from nothing */
    ASSERT_EQ(b->err, 0);
    ASSERT_EQ(b->usage.prompt_tokens, 5);
    rlx_worker_stop(w, true);
}

TEST(ttl_applies_to_reads_in_memory) { ttl_on_read(NULL); }
TEST(ttl_applies_to_reads_with_db) { ttl_on_read(rlx_test_tmp_path("ttl.db")); }

TEST(models_share_a_database)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) SKIP("../shared/models/stories260K.gguf absent");
    const char *db = rlx_test_tmp_path("shared.db");
    opts oa = {.model = m, .name = "a", .db = db}, ob = {.model = m, .name = "b/x", .db = db};
    rlx_worker *wa = start(oa), *wb = start(ob);
    ASSERT(wa && wb);
    int32_t ids[40];
    prompt(ids, 40, 6);
    turn *ta = run(wa, "same", ids, 40, 4);
    turn *tb = run(wb, "same", ids, 20, 4);
    ASSERT_EQ(ta->err, 0);
    ASSERT_EQ(tb->err, 0);
    rlx_session_info info, *list = NULL;
    size_t n = 0, total = 0;
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_session_get(wa, "same", &info, NULL, NULL, &err), 0);
    ASSERT_EQ(info.n_tokens, 44);
    ASSERT_STR_EQ(info.model, "a");
    ASSERT_EQ(rlx_worker_session_get(wb, "same", &info, NULL, NULL, &err), 0);
    ASSERT_EQ(info.n_tokens, 24);
    ASSERT_STR_EQ(info.model, "b/x");
    ASSERT_EQ(rlx_worker_sessions_list(wa, 0, 10, &list, &n, &total, &err), 0);
    free(list);
    ASSERT_EQ(total, 1);
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s.kv/a/same.kv", db);
    snprintf(pb, sizeof pb, "%s.kv/b%%2Fx/same.kv", db);
    ASSERT(exists(pa));
    ASSERT(exists(pb));
    /* deleting one model's session leaves the other's */
    ASSERT_EQ(rlx_worker_session_delete(wb, "same", &err), 0);
    ASSERT_EQ(rlx_worker_session_get(wa, "same", &info, NULL, NULL, &err), 0);
    ASSERT(exists(pa));
    rlx_worker_stop(wa, true);
    rlx_worker_stop(wb, true);
    /* after a restart each resumes its own history */
    wa = start(oa);
    ASSERT(wa != NULL);
    turn *t2 = run(wa, "same", ids, 2, 2);
    ASSERT_EQ(t2->usage.prompt_tokens, 46);
    ASSERT(t2->usage.cached_tokens >= 32);
    rlx_worker_stop(wa, true);
}

/* A history that grew past the context is refused with a message naming it: synchronously
 * when the worker knows the history, from the worker when it is read from the store. */
TEST(history_too_long_is_named)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) SKIP("../shared/models/stories260K.gguf absent");
    opts o = {.model = m, .db = rlx_test_tmp_path("long.db"), .ctx = 64};
    rlx_worker *w = start(o);
    ASSERT(w != NULL);
    int32_t ids[40];
    prompt(ids, 40, 7);
    turn *a = run(w, "long", ids, 40, 10);
    ASSERT_EQ(a->err, 0);
    static turn t;
    ASSERT_EQ(submit(w, "long", ids, 10, 10, &t), RLX_ETOOLONG);
    ASSERT_MSG(strstr(t.msg, "session history (50 tokens)") != NULL, "%s", t.msg);
    rlx_worker_stop(w, true);
    w = start(o);
    ASSERT(w != NULL);
    ASSERT_EQ(submit(w, "long", ids, 10, 10, &t), 0); /* history not in memory yet */
    wait_turn(&t);
    ASSERT_EQ(t.err, RLX_ETOOLONG);
    ASSERT_MSG(strstr(t.msg, "session history (50 tokens)") != NULL, "%s", t.msg);
    rlx_worker_stop(w, true);
}

/* A turn the database does not take (locked by another connection past the busy timeout: as a
 * full disk fails a commit) is an error to its client, and the session stays as stored: its next
 * turn continues the history before the failed one (the failed turn answered as stored, memory
 * went on from it, while the database, a restart or a failed delete held the older history). */
TEST(unstored_turn_is_an_error)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) SKIP("../shared/models/stories260K.gguf absent");
    opts o = {.model = m, .db = rlx_test_tmp_path("fail.db")};
    rlx_worker *w = start(o);
    ASSERT(w != NULL);
    int32_t ids[12];
    prompt(ids, 12, 3);
    turn *a = run(w, "f", ids, 12, 6);
    ASSERT_EQ(a->err, 0);
    const int32_t hist = a->usage.prompt_tokens + a->usage.completion_tokens;
    sqlite3 *db = NULL;
    ASSERT_EQ(sqlite3_open(o.db, &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
    g_error_linger_us = 500000; /* the next turn starts before the writer's own work after the event */
    turn *b = run(w, "f", ids + 1, 4, 6); /* the writer waits out its busy timeout, then fails */
    ASSERT_EQ(b->err, RLX_EIO);
    ASSERT_MSG(strstr(b->msg, "could not be stored") != NULL, "%s", b->msg);
    ASSERT_EQ(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    rlx_session_info info;
    rlx_error err = {0};
    ASSERT_EQ(rlx_worker_session_get(w, "f", &info, NULL, NULL, &err), 0);
    ASSERT_EQ(info.n_tokens, hist);
    turn *c = run(w, "f", ids + 1, 4, 6);
    ASSERT_EQ(c->err, 0);
    g_error_linger_us = 0;
    ASSERT_EQ(c->usage.prompt_tokens, hist + 4); /* after turn 1, not after the failed turn 2 */
    rlx_worker_stop(w, true);
}


int main(void)
{
    static const rlx_test_case cases[] = {
        TEST_ENTRY(snapshot_round_trip_f16), TEST_ENTRY(snapshot_round_trip_q8_0), TEST_ENTRY(other_weights_recompute),
        TEST_ENTRY(rewritten_history_recomputes), TEST_ENTRY(delete_during_turn_stays_deleted),
        TEST_ENTRY(ttl_applies_to_reads_in_memory), TEST_ENTRY(ttl_applies_to_reads_with_db),
        TEST_ENTRY(models_share_a_database), TEST_ENTRY(history_too_long_is_named), TEST_ENTRY(unstored_turn_is_an_error),
    };
    return rlx_test_run(cases, RLX_ARRAY_LEN(cases));
}
