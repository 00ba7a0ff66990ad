/* session.c - the sqlite3 session store (see session.h for durability, threads, ownership).
 *
 * Schema history (PRAGMA user_version):
 *   1: sessions(id TEXT PRIMARY KEY, model TEXT, tokens BLOB, created REAL, updated REAL)
 *   2: + kv_path TEXT NULL, kv_model_hash TEXT NULL, and an index on updated for eviction.
 *   3: the key is (model, id): models sharing one database keep separate sessions (a v2 row
 *      keeps the model it was written by); the eviction index is per model.
 * Tokens are stored as int32 little-endian whatever the host order, so a database can move
 * between machines. */
#include "engine/session.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct rlx_session_store {
    sqlite3 *db;
    pthread_mutex_t mu;       /* serializes every use of db (multi-statement transactions) */
    double (*now)(void *);
    void *now_user;
    char *path;               /* for messages */
};

typedef struct strvec { char **v; size_t n, cap; } strvec;

static int strvec_push(strvec *sv, const char *s)
{
    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 8;
        char **v = realloc(sv->v, cap * sizeof *v);
        if (!v) return RLX_ENOMEM;
        sv->v = v;
        sv->cap = cap;
    }
    if (!(sv->v[sv->n] = strdup(s))) return RLX_ENOMEM;
    sv->n++;
    return 0;
}

/* Whether path names a file inside `dir`/ (no ".." component): what a row's kv_path may name. A
 * database copied, moved or edited must not make the store read or remove files elsewhere. */
bool rlx_session_path_within(const char *dir, const char *path)
{
    size_t n = dir ? strlen(dir) : 0;
    if (!n || !path || strncmp(path, dir, n) || path[n] != '/' || !path[n + 1]) return false;
    for (const char *c = path + n; (c = strstr(c, "/..")); c += 3)
        if (c[3] == '/' || c[3] == 0) return false;
    return true;
}

/* Removes the snapshot files (after COMMIT: see session.h) and frees the list: only those in
 * the store's own snapshot directory (<db>.kv/). */
static void strvec_unlink_free(const rlx_session_store *st, strvec *sv, int do_unlink)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s.kv", st->path ? st->path : "");
    for (size_t i = 0; i < sv->n; i++) {
        if (do_unlink && rlx_session_path_within(dir, sv->v[i])) unlink(sv->v[i]); /* already gone is fine */
        free(sv->v[i]);
    }
    free(sv->v);
    memset(sv, 0, sizeof *sv);
}

static double wall_clock(void *user)
{
    (void)user;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int map_sqlite(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_NOTADB: case SQLITE_CORRUPT: case SQLITE_SCHEMA: case SQLITE_MISMATCH:
        return RLX_EFORMAT;
    case SQLITE_NOMEM: return RLX_ENOMEM;
    case SQLITE_TOOBIG: case SQLITE_RANGE: return RLX_ERANGE;
    default: return RLX_EIO;
    }
}

static int db_error(rlx_session_store *st, int rc, const char *what, rlx_error *err)
{
    int code = map_sqlite(rc);
    if (code == RLX_EFORMAT)
        return rlx_errorf(err, code,
                          "sessions database '%s' is not a valid sqlite3 database (%s while %s); "
                          "move the file away or give another --db",
                          st->path, sqlite3_errmsg(st->db), what);
    return rlx_errorf(err, code, "sessions database '%s': %s while %s", st->path,
                      sqlite3_errmsg(st->db), what);
}

static int exec(rlx_session_store *st, const char *sql, const char *what, rlx_error *err)
{
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : db_error(st, rc, what, err);
}

static int prepare(rlx_session_store *st, const char *sql, sqlite3_stmt **stmt, rlx_error *err)
{
    int rc = sqlite3_prepare_v2(st->db, sql, -1, stmt, NULL);
    return rc == SQLITE_OK ? 0 : db_error(st, rc, "preparing a statement", err);
}

/* Runs a statement that returns one integer (a PRAGMA or a count). */
static int query_int(rlx_session_store *st, const char *sql, int64_t *out, const char *what,
                     rlx_error *err)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
    if (rc != SQLITE_OK) return db_error(st, rc, what, err);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) *out = sqlite3_column_int64(s, 0);
    else if (rc == SQLITE_DONE) *out = 0;
    sqlite3_finalize(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : db_error(st, rc, what, err);
}

static void rollback(rlx_session_store *st) { sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL); }

/* ---- schema ------------------------------------------------------------------------------ */

#define TABLE_V3                                                                                   \
    "CREATE TABLE sessions(model TEXT NOT NULL, id TEXT NOT NULL, tokens BLOB NOT NULL,"           \
    " created REAL NOT NULL, updated REAL NOT NULL, kv_path TEXT NULL, kv_model_hash TEXT NULL,"   \
    " PRIMARY KEY(model, id));"                                                                    \
    "CREATE INDEX sessions_model_updated ON sessions(model, updated);"

static const char schema_v3[] = TABLE_V3 "PRAGMA user_version = 3;";

static const char migrate_1_to_2[] =
    "ALTER TABLE sessions ADD COLUMN kv_path TEXT NULL;"
    "ALTER TABLE sessions ADD COLUMN kv_model_hash TEXT NULL;"
    "CREATE INDEX IF NOT EXISTS sessions_updated ON sessions(updated);"
    "PRAGMA user_version = 2;";

/* a new primary key needs a new table: copy the rows over, then drop the old one (its index
 * goes with it) */
static const char migrate_2_to_3[] =
    "ALTER TABLE sessions RENAME TO sessions_v2;"
    TABLE_V3
    "INSERT INTO sessions(model, id, tokens, created, updated, kv_path, kv_model_hash)"
    " SELECT model, id, tokens, created, updated, kv_path, kv_model_hash FROM sessions_v2;"
    "DROP TABLE sessions_v2;"
    "PRAGMA user_version = 3;";

static int migrate(rlx_session_store *st, rlx_error *err)
{
    int rc;
    int64_t ver, n_tables, has_sessions;
    /* IMMEDIATE: two daemons opening one new file must not both create the schema */
    if ((rc = exec(st, "BEGIN IMMEDIATE", "starting the schema check", err))) return rc;
    if ((rc = query_int(st, "PRAGMA user_version", &ver, "reading the schema version", err)) ||
        (rc = query_int(st, "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                        &n_tables, "reading the schema", err)) ||
        (rc = query_int(st, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                        "name = 'sessions'", &has_sessions, "reading the schema", err)))
        goto fail;
    if (ver > RLX_SESSION_SCHEMA_VERSION) {
        rc = rlx_errorf(err, RLX_EUNSUPPORTED,
                        "sessions database '%s' has schema version %lld, newer than this rlxd "
                        "understands (%d); upgrade rlxd or give --db another file", st->path,
                        (long long)ver, RLX_SESSION_SCHEMA_VERSION);
        goto fail;
    }
    if ((ver == 0 && n_tables > 0) || (ver > 0 && !has_sessions)) {
        rc = rlx_errorf(err, RLX_EFORMAT,
                        "'%s' is an sqlite3 database of another program (no rlxd sessions "
                        "schema); give --db a new file", st->path);
        goto fail;
    }
    if (ver == 0) rc = exec(st, schema_v3, "creating the schema", err);
    if (!rc && ver == 1) rc = exec(st, migrate_1_to_2, "migrating the schema to version 2", err);
    if (!rc && ver >= 1 && ver < 3) rc = exec(st, migrate_2_to_3, "migrating the schema to version 3", err);
    if (rc) goto fail;
    return exec(st, "COMMIT", "committing the schema", err);
fail:
    rollback(st);
    return rc;
}

int rlx_session_store_open(rlx_session_store **out, const char *path, rlx_error *err)
{
    *out = NULL;
    if (!path || !*path) return rlx_errorf(err, RLX_EINVAL, "sessions database path is empty");
    rlx_session_store *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory opening sessions database '%s'", path);
    }
    pthread_mutex_init(&st->mu, NULL);
    st->now = wall_clock;
    int rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                             SQLITE_OPEN_FULLMUTEX, NULL);
    if (rc != SQLITE_OK) {
        rc = rlx_errorf(err, RLX_EIO, "cannot open sessions database '%s': %s; check that the "
                        "directory exists and is writable", path,
                        st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
        rlx_session_store_close(st);
        return rc;
    }
    sqlite3_busy_timeout(st->db, 5000);
    /* journal_mode is the first statement that reads the file: a foreign file fails here */
    sqlite3_stmt *s = NULL;
    if ((rc = prepare(st, "PRAGMA journal_mode = WAL", &s, err))) goto fail;
    /* Two openers of a new file (two models of one daemon loading at once) can both hold the
     * read lock and want the write lock to switch: sqlite refuses one at once as "locked"
     * rather than wait (the busy handler would deadlock), so retry for the busy timeout. */
    rc = sqlite3_step(s);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (t1 = t0; (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) && t1.tv_sec - t0.tv_sec < 5;
         clock_gettime(CLOCK_MONOTONIC, &t1)) {
        sqlite3_reset(s);
        nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
        rc = sqlite3_step(s);
    }
    if (rc != SQLITE_ROW) {
        rc = db_error(st, rc, "switching to WAL", err);
        sqlite3_finalize(s);
        goto fail;
    }
    const char *mode = (const char *)sqlite3_column_text(s, 0);
    if (!mode || strcmp(mode, "wal") != 0) {
        rc = rlx_errorf(err, RLX_EIO, "sessions database '%s' cannot use WAL (journal mode "
                        "is %s); put it on a local file system", path, mode ? mode : "?");
        sqlite3_finalize(s);
        goto fail;
    }
    sqlite3_finalize(s);
    if ((rc = exec(st, "PRAGMA synchronous = FULL", "setting synchronous", err))) goto fail;
    if ((rc = migrate(st, err))) goto fail;
    *out = st;
    return 0;
fail:
    rlx_session_store_close(st);
    return rc;
}

void rlx_session_store_close(rlx_session_store *st)
{
    if (!st) return;
    if (st->db) sqlite3_close_v2(st->db);
    pthread_mutex_destroy(&st->mu);
    free(st->path);
    free(st);
}

void rlx_session_store_set_clock(rlx_session_store *st, double (*now)(void *), void *user)
{
    pthread_mutex_lock(&st->mu);
    st->now = now ? now : wall_clock;
    st->now_user = now ? user : NULL;
    pthread_mutex_unlock(&st->mu);
}

int rlx_session_store_check(rlx_session_store *st, rlx_error *err)
{
    pthread_mutex_lock(&st->mu);
    sqlite3_stmt *s = NULL;
    int rc = prepare(st, "PRAGMA integrity_check", &s, err);
    if (!rc) {
        int step = sqlite3_step(s);
        const char *r = step == SQLITE_ROW ? (const char *)sqlite3_column_text(s, 0) : NULL;
        if (step != SQLITE_ROW) rc = db_error(st, step, "checking integrity", err);
        else if (!r || strcmp(r, "ok") != 0)
            rc = rlx_errorf(err, RLX_EFORMAT, "sessions database '%s' is damaged: %s; restore "
                            "a backup or move it away", st->path, r ? r : "?");
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->mu);
    return rc;
}

/* ---- ids and values ---------------------------------------------------------------------- */

bool rlx_session_id_valid(const char *id)
{
    if (!id) return false;
    size_t n = 0;
    for (const char *p = id; *p; p++, n++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok || n >= RLX_SESSION_ID_MAX) return false;
    }
    /* "." and ".." are path segments every client removes from /v1/sessions/{id} (RFC 3986):
       a session of that name could never be read or deleted */
    return n > 0 && strcmp(id, ".") && strcmp(id, "..");
}

int rlx_session_id_check(const char *id, rlx_error *err)
{
    if (rlx_session_id_valid(id)) return 0;
    if (!id || !*id) return rlx_errorf(err, RLX_EINVAL, "session_id must not be empty");
    if (strlen(id) > RLX_SESSION_ID_MAX)
        return rlx_errorf(err, RLX_EINVAL, "session_id is longer than %d characters",
                          RLX_SESSION_ID_MAX);
    if (!strcmp(id, ".") || !strcmp(id, ".."))
        return rlx_errorf(err, RLX_EINVAL, "session_id must not be '.' or '..' (a URL path cannot name it)");
    return rlx_errorf(err, RLX_EINVAL, "session_id may only contain letters, digits and "
                      "'.', '_', ':', '-'");
}

void rlx_session_clear(rlx_session *s)
{
    if (!s) return;
    free(s->model);
    free(s->tokens);
    free(s->kv_path);
    free(s->kv_model_hash);
    memset(s, 0, sizeof *s);
}

void rlx_session_list_free(rlx_session *list, size_t n)
{
    if (!list) return;
    for (size_t i = 0; i < n; i++) rlx_session_clear(&list[i]);
    free(list);
}

static int dup_col(sqlite3_stmt *s, int col, char **out)
{
    *out = NULL;
    const unsigned char *t = sqlite3_column_text(s, col);
    if (!t) return 0;
    return (*out = strdup((const char *)t)) ? 0 : RLX_ENOMEM;
}

/* Columns: id, model, created, updated, kv_path, kv_model_hash, length(tokens) [, tokens]. */
static int read_row(rlx_session_store *st, sqlite3_stmt *s, bool with_tokens, rlx_session *out,
                    rlx_error *err)
{
    memset(out, 0, sizeof *out);
    const unsigned char *id = sqlite3_column_text(s, 0);
    snprintf(out->id, sizeof out->id, "%s", id ? (const char *)id : "");
    out->created = sqlite3_column_double(s, 2);
    out->updated = sqlite3_column_double(s, 3);
    int64_t bytes = sqlite3_column_int64(s, 6);
    if ((bytes < 0 || bytes % 4) && with_tokens)
        return rlx_errorf(err, RLX_EFORMAT, "session '%s' in '%s' has a token blob of %lld "
                          "bytes, not a multiple of 4; delete the session", out->id, st->path,
                          (long long)bytes);
    out->damaged = bytes < 0 || bytes % 4; /* listed as such: one bad row must not hide the others */
    out->n_tokens = out->damaged ? 0 : (size_t)bytes / 4;
    if (dup_col(s, 1, &out->model) || dup_col(s, 4, &out->kv_path) ||
        dup_col(s, 5, &out->kv_model_hash))
        goto oom;
    if (with_tokens && out->n_tokens) {
        const unsigned char *b = sqlite3_column_blob(s, 7);
        if (!b || sqlite3_column_bytes(s, 7) != bytes) goto oom;
        if (!(out->tokens = malloc(out->n_tokens * sizeof *out->tokens))) goto oom;
        for (size_t i = 0; i < out->n_tokens; i++, b += 4)
            out->tokens[i] = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 |
                                       (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
    }
    return 0;
oom:
    rlx_session_clear(out);
    return rlx_errorf(err, RLX_ENOMEM, "out of memory reading a session");
}

/* ---- operations -------------------------------------------------------------------------- */

static int check_key(const char *model, const char *id, rlx_error *err)
{
    if (!model || !*model) return rlx_errorf(err, RLX_EINVAL, "a session needs a model name");
    return rlx_session_id_check(id, err);
}

/* Rows updated before this are expired (max_age <= 0: none is). */
static double cutoff(rlx_session_store *st, double max_age)
{
    return max_age > 0 ? st->now(st->now_user) - max_age : -1e300;
}

int rlx_session_put(rlx_session_store *st, const char *model, const char *id,
                    const int32_t *tokens, size_t n_tokens, const char *kv_path,
                    const char *kv_model_hash, rlx_error *err)
{
    int rc;
    if ((rc = check_key(model, id, err))) return rc;
    if (n_tokens && !tokens) return rlx_errorf(err, RLX_EINVAL, "session tokens are missing");
    if (n_tokens > (size_t)INT32_MAX / 4)
        return rlx_errorf(err, RLX_ERANGE, "session '%s' has too many tokens (%zu)", id, n_tokens);
    unsigned char *blob = malloc(n_tokens ? n_tokens * 4 : 1);
    if (!blob) return rlx_errorf(err, RLX_ENOMEM, "out of memory saving session '%s'", id);
    for (size_t i = 0; i < n_tokens; i++) {
        uint32_t t = (uint32_t)tokens[i];
        blob[4 * i] = (unsigned char)t;
        blob[4 * i + 1] = (unsigned char)(t >> 8);
        blob[4 * i + 2] = (unsigned char)(t >> 16);
        blob[4 * i + 3] = (unsigned char)(t >> 24);
    }
    strvec old = {0};
    sqlite3_stmt *sel = NULL, *up = NULL;
    pthread_mutex_lock(&st->mu);
    double now = st->now(st->now_user);
    if ((rc = exec(st, "BEGIN IMMEDIATE", "starting a transaction", err))) goto out;
    if ((rc = prepare(st, "SELECT kv_path FROM sessions WHERE model = ?1 AND id = ?2", &sel, err))) goto fail;
    sqlite3_bind_text(sel, 1, model, -1, SQLITE_STATIC);
    sqlite3_bind_text(sel, 2, id, -1, SQLITE_STATIC);
    int step = sqlite3_step(sel);
    if (step == SQLITE_ROW) {
        const char *p = (const char *)sqlite3_column_text(sel, 0);
        if (p && (!kv_path || strcmp(p, kv_path) != 0) && strvec_push(&old, p)) {
            rc = rlx_errorf(err, RLX_ENOMEM, "out of memory saving session '%s'", id);
            goto fail;
        }
    } else if (step != SQLITE_DONE) {
        rc = db_error(st, step, "reading a session", err);
        goto fail;
    }
    if ((rc = prepare(st,
                      "INSERT INTO sessions(model, id, tokens, created, updated, kv_path, "
                      "kv_model_hash) VALUES(?1, ?2, ?3, ?4, ?4, ?5, ?6) ON CONFLICT(model, id) DO "
                      "UPDATE SET tokens = excluded.tokens, updated = excluded.updated, kv_path = "
                      "excluded.kv_path, kv_model_hash = excluded.kv_model_hash", &up, err)))
        goto fail;
    sqlite3_bind_text(up, 1, model, -1, SQLITE_STATIC);
    sqlite3_bind_text(up, 2, id, -1, SQLITE_STATIC);
    sqlite3_bind_blob(up, 3, blob, (int)(n_tokens * 4), SQLITE_STATIC);
    sqlite3_bind_double(up, 4, now);
    if (kv_path) sqlite3_bind_text(up, 5, kv_path, -1, SQLITE_STATIC);
    if (kv_model_hash) sqlite3_bind_text(up, 6, kv_model_hash, -1, SQLITE_STATIC);
    if ((step = sqlite3_step(up)) != SQLITE_DONE) {
        rc = db_error(st, step, "saving a session", err);
        goto fail;
    }
    rc = exec(st, "COMMIT", "committing a session", err);
    if (rc) goto fail;
    goto out;
fail:
    rollback(st);
out:
    sqlite3_finalize(sel);
    sqlite3_finalize(up);
    pthread_mutex_unlock(&st->mu);
    strvec_unlink_free(st, &old, rc == 0);
    free(blob);
    return rc;
}

#define ROW_COLS "id, model, created, updated, kv_path, kv_model_hash, length(tokens)"

int rlx_session_get(rlx_session_store *st, const char *model, const char *id, double max_age,
                    rlx_session *out, rlx_error *err)
{
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = check_key(model, id, err))) return rc;
    sqlite3_stmt *s = NULL;
    pthread_mutex_lock(&st->mu);
    if ((rc = prepare(st, "SELECT " ROW_COLS ", tokens FROM sessions WHERE model = ?1 AND id = ?2 "
                      "AND updated >= ?3", &s, err)))
        goto out;
    sqlite3_bind_text(s, 1, model, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, id, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 3, cutoff(st, max_age));
    int step = sqlite3_step(s);
    if (step == SQLITE_ROW) rc = read_row(st, s, true, out, err);
    else if (step == SQLITE_DONE) rc = rlx_errorf(err, RLX_ENOTFOUND, "session '%s' not found", id);
    else rc = db_error(st, step, "reading a session", err);
out:
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->mu);
    return rc;
}

int rlx_session_delete(rlx_session_store *st, const char *model, const char *id, rlx_error *err)
{
    int rc;
    if ((rc = check_key(model, id, err))) return rc;
    strvec files = {0};
    sqlite3_stmt *s = NULL;
    pthread_mutex_lock(&st->mu);
    if ((rc = exec(st, "BEGIN IMMEDIATE", "starting a transaction", err))) goto out;
    if ((rc = prepare(st, "DELETE FROM sessions WHERE model = ?1 AND id = ?2 RETURNING kv_path", &s, err)))
        goto fail;
    sqlite3_bind_text(s, 1, model, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, id, -1, SQLITE_STATIC);
    int step, found = 0;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        found = 1;
        const char *p = (const char *)sqlite3_column_text(s, 0);
        if (p && strvec_push(&files, p)) { step = SQLITE_NOMEM; break; }
    }
    sqlite3_finalize(s);
    s = NULL;
    if (step != SQLITE_DONE) { rc = db_error(st, step, "deleting a session", err); goto fail; }
    if (!found) { rc = rlx_errorf(err, RLX_ENOTFOUND, "session '%s' not found", id); goto fail; }
    if ((rc = exec(st, "COMMIT", "committing a delete", err))) goto fail;
    goto out;
fail:
    rollback(st);
out:
    pthread_mutex_unlock(&st->mu);
    strvec_unlink_free(st, &files, rc == 0);
    return rc;
}

int rlx_session_list(rlx_session_store *st, const char *model, double max_age, size_t offset,
                     size_t limit, rlx_session **out, size_t *n, size_t *total, rlx_error *err)
{
    *out = NULL;
    *n = 0;
    if (!model || !*model) return rlx_errorf(err, RLX_EINVAL, "listing sessions needs a model name");
    if (limit > 10000) limit = 10000; /* one page, not the whole store */
    if (offset > (size_t)INT64_MAX) offset = (size_t)INT64_MAX;
    /* limit 0 asks only for the total; calloc(1) keeps *out non-NULL either way */
    rlx_session *list = calloc(limit ? limit : 1, sizeof *list);
    if (!list) return rlx_errorf(err, RLX_ENOMEM, "out of memory listing sessions");
    size_t got = 0;
    int64_t count = 0;
    sqlite3_stmt *s = NULL;
    pthread_mutex_lock(&st->mu);
    double cut = cutoff(st, max_age);
    /* one read transaction so the page and the total agree */
    int rc = exec(st, "BEGIN", "starting a transaction", err);
    if (rc) goto out;
    if (total) {
        if ((rc = prepare(st, "SELECT count(*) FROM sessions WHERE model = ?1 AND updated >= ?2", &s, err)))
            goto end;
        sqlite3_bind_text(s, 1, model, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 2, cut);
        int step = sqlite3_step(s);
        if (step == SQLITE_ROW) count = sqlite3_column_int64(s, 0);
        else rc = db_error(st, step, "counting sessions", err);
        sqlite3_finalize(s);
        s = NULL;
        if (rc) goto end;
    }
    if ((rc = prepare(st, "SELECT " ROW_COLS " FROM sessions WHERE model = ?3 AND updated >= ?4 "
                      "ORDER BY updated DESC, id ASC LIMIT ?1 OFFSET ?2", &s, err)))
        goto end;
    sqlite3_bind_int64(s, 1, (int64_t)limit);
    sqlite3_bind_int64(s, 2, (int64_t)offset);
    sqlite3_bind_text(s, 3, model, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 4, cut);
    int step = SQLITE_DONE;
    while (got < limit && (step = sqlite3_step(s)) == SQLITE_ROW) {
        if ((rc = read_row(st, s, false, &list[got], err))) goto end;
        got++;
    }
    if (got < limit && step != SQLITE_DONE) rc = db_error(st, step, "listing sessions", err);
end:
    sqlite3_finalize(s);
    sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
out:
    pthread_mutex_unlock(&st->mu);
    if (rc) {
        rlx_session_list_free(list, got);
        return rc;
    }
    if (total) *total = (size_t)count;
    *out = list;
    *n = got;
    return 0;
}

/* Collects kv_path of the rows a statement selects, then deletes them; adds to *removed.
 * Both statements bind ?1 = model and ?2 = the double or integer argument. */
static int delete_where(rlx_session_store *st, const char *select_paths, const char *del,
                        const char *model, double arg_d, int64_t arg_i, bool use_d, strvec *files,
                        size_t *removed, rlx_error *err)
{
    sqlite3_stmt *s = NULL;
    int rc, step;
    if ((rc = prepare(st, select_paths, &s, err))) return rc;
    sqlite3_bind_text(s, 1, model, -1, SQLITE_STATIC);
    if (use_d) sqlite3_bind_double(s, 2, arg_d); else sqlite3_bind_int64(s, 2, arg_i);
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        const char *p = (const char *)sqlite3_column_text(s, 0);
        if (p && strvec_push(files, p)) { step = SQLITE_NOMEM; break; }
    }
    sqlite3_finalize(s);
    if (step != SQLITE_DONE) return db_error(st, step, "selecting sessions to evict", err);
    if ((rc = prepare(st, del, &s, err))) return rc;
    sqlite3_bind_text(s, 1, model, -1, SQLITE_STATIC);
    if (use_d) sqlite3_bind_double(s, 2, arg_d); else sqlite3_bind_int64(s, 2, arg_i);
    step = sqlite3_step(s);
    sqlite3_finalize(s);
    if (step != SQLITE_DONE) return db_error(st, step, "evicting sessions", err);
    *removed += (size_t)sqlite3_changes(st->db);
    return 0;
}

#define OVER_CAP "SELECT id FROM sessions WHERE model = ?1 ORDER BY updated DESC, id ASC LIMIT -1 OFFSET ?2"

/* The ids kept whatever their age or rank (sessions whose turn runs) into temp.rlx_keep. */
static int keep_ids(rlx_session_store *st, const char *const *keep, size_t n_keep, rlx_error *err)
{
    int rc = exec(st, "CREATE TEMP TABLE IF NOT EXISTS rlx_keep(id TEXT PRIMARY KEY)", "keeping sessions in use", err);
    if (!rc) rc = exec(st, "DELETE FROM temp.rlx_keep", "keeping sessions in use", err);
    sqlite3_stmt *s = NULL;
    if (!rc && n_keep && !(rc = prepare(st, "INSERT OR IGNORE INTO temp.rlx_keep(id) VALUES (?1)", &s, err))) {
        for (size_t i = 0; i < n_keep && !rc; i++) {
            sqlite3_bind_text(s, 1, keep[i], -1, SQLITE_STATIC);
            int step = sqlite3_step(s);
            if (step != SQLITE_DONE) rc = db_error(st, step, "keeping sessions in use", err);
            sqlite3_reset(s);
        }
        sqlite3_finalize(s);
    }
    return rc;
}

#define NOT_KEPT " AND id NOT IN (SELECT id FROM temp.rlx_keep)"

int rlx_session_enforce_limits(rlx_session_store *st, const char *model, double ttl_seconds,
                               int64_t max_count, const char *const *keep, size_t n_keep, size_t *n_removed,
                               rlx_error *err)
{
    size_t removed = 0;
    strvec files = {0};
    if (n_removed) *n_removed = 0;
    if (!model || !*model) return rlx_errorf(err, RLX_EINVAL, "session limits need a model name");
    pthread_mutex_lock(&st->mu);
    double cut = cutoff(st, ttl_seconds);
    int rc = exec(st, "BEGIN IMMEDIATE", "starting a transaction", err);
    if (rc) goto out;
    if ((rc = keep_ids(st, keep, n_keep, err))) goto fail;
    if (ttl_seconds > 0 &&
        (rc = delete_where(st, "SELECT kv_path FROM sessions WHERE model = ?1 AND updated < ?2" NOT_KEPT,
                           "DELETE FROM sessions WHERE model = ?1 AND updated < ?2" NOT_KEPT, model, cut, 0,
                           true, &files, &removed, err)))
        goto fail;
    if (max_count > 0 &&
        (rc = delete_where(st, "SELECT kv_path FROM sessions WHERE model = ?1 AND id IN (" OVER_CAP ")" NOT_KEPT,
                           "DELETE FROM sessions WHERE model = ?1 AND id IN (" OVER_CAP ")" NOT_KEPT, model, 0,
                           max_count, false, &files, &removed, err)))
        goto fail;
    if ((rc = exec(st, "COMMIT", "committing evictions", err))) goto fail;
    goto out;
fail:
    rollback(st);
    removed = 0;
out:
    pthread_mutex_unlock(&st->mu);
    strvec_unlink_free(st, &files, rc == 0);
    if (n_removed) *n_removed = removed;
    return rc;
}
