/* test_session.c - the sqlite3 session store: CRUD, ids, listing, TTL and count limits with
 * their KV files, foreign and corrupt files, schema migration, reopen persistence, concurrent
 * threads, and kill -9 of a writer at random moments. */
#include "tests/rlx_test.h"
#include "tests/rlx_test_tmp.h"
#include "engine/session.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


static void rm_db(const char *path)
{
    char p[600];
    unlink(path);
    snprintf(p, sizeof p, "%s-wal", path); unlink(p);
    snprintf(p, sizeof p, "%s-shm", path); unlink(p);
}

static bool file_exists(const char *p) { struct stat sb; return stat(p, &sb) == 0; }

static void touch(const char *p) { FILE *f = fopen(p, "w"); if (f) { fputs("kv", f); fclose(f); } }

/* Deterministic token content for crash checks. */
static int32_t tok_of(uint32_t id, uint32_t j) { return (int32_t)((id * 2654435761u) ^ (j * 40503u)); }
static size_t len_of(uint32_t id) { return 1 + id % 97; }

static double fake_now;
static double fake_clock(void *u) { (void)u; return fake_now; }

TEST(ids)
{
    ASSERT(rlx_session_id_valid("abc"));
    ASSERT(rlx_session_id_valid("user-1:chat_2.v3"));
    ASSERT(!rlx_session_id_valid(""));
    ASSERT(!rlx_session_id_valid(NULL));
    ASSERT(!rlx_session_id_valid("a b"));
    ASSERT(!rlx_session_id_valid("../etc"));
    ASSERT(!rlx_session_id_valid("x/y"));
    char id[130];
    memset(id, 'a', 128); id[128] = 0;
    ASSERT(rlx_session_id_valid(id));
    id[128] = 'a'; id[129] = 0;
    ASSERT(!rlx_session_id_valid(id));
    rlx_error err = {0};
    ASSERT_EQ(rlx_session_id_check(id, &err), RLX_EINVAL);
    ASSERT(strstr(err.msg, "128") != NULL);
    ASSERT_EQ(rlx_session_id_check("é", &err), RLX_EINVAL);
    ASSERT(strstr(err.msg, "letters") != NULL);
}

TEST(crud_and_reopen)
{
    const char *db = rlx_test_tmp_path("crud.db");
    rm_db(db);
    rlx_session_store *st;
    rlx_error err = {0};
    ASSERT_EQ(rlx_session_store_open(&st, db, &err), 0);
    rlx_session_store_set_clock(st, fake_clock, NULL);
    fake_now = 1000.0;
    int32_t toks[] = {1, -2, 151935, INT32_MIN, INT32_MAX};
    ASSERT_EQ(rlx_session_put(st, "qwen", "s1", toks, 5, NULL, NULL, &err), 0);
    rlx_session s;
    ASSERT_EQ(rlx_session_get(st, "qwen", "s1", 0, &s, &err), 0);
    ASSERT_STR_EQ(s.id, "s1");
    ASSERT_STR_EQ(s.model, "qwen");
    ASSERT_EQ(s.n_tokens, 5);
    ASSERT(memcmp(s.tokens, toks, sizeof toks) == 0);
    ASSERT(s.kv_path == NULL && s.kv_model_hash == NULL);
    ASSERT_NEAR(s.created, 1000.0, 0);
    rlx_session_clear(&s);
    /* upsert keeps created, moves updated, replaces content */
    fake_now = 1010.0;
    ASSERT_EQ(rlx_session_put(st, "qwen", "s1", toks, 2, "/x/kv.bin", "abc", &err), 0);
    ASSERT_EQ(rlx_session_get(st, "qwen", "s1", 0, &s, &err), 0);
    ASSERT_STR_EQ(s.model, "qwen");
    ASSERT_EQ(s.n_tokens, 2);
    ASSERT_EQ(s.tokens[1], -2);
    ASSERT_STR_EQ(s.kv_path, "/x/kv.bin");
    ASSERT_STR_EQ(s.kv_model_hash, "abc");
    ASSERT_NEAR(s.created, 1000.0, 0);
    ASSERT_NEAR(s.updated, 1010.0, 0);
    rlx_session_clear(&s);
    /* another model's session of the same id is another session */
    ASSERT_EQ(rlx_session_get(st, "llama", "s1", 0, &s, &err), RLX_ENOTFOUND);
    ASSERT_EQ(rlx_session_put(st, "llama", "s1", toks, 3, NULL, NULL, &err), 0);
    ASSERT_EQ(rlx_session_get(st, "llama", "s1", 0, &s, &err), 0);
    ASSERT_EQ(s.n_tokens, 3);
    rlx_session_clear(&s);
    ASSERT_EQ(rlx_session_get(st, "qwen", "s1", 0, &s, &err), 0);
    ASSERT_EQ(s.n_tokens, 2);
    rlx_session_clear(&s);
    /* max_age: a session not updated within it is not returned */
    fake_now = 1100.0;
    ASSERT_EQ(rlx_session_get(st, "qwen", "s1", 89.0, &s, &err), RLX_ENOTFOUND);
    ASSERT_EQ(rlx_session_get(st, "qwen", "s1", 91.0, &s, &err), 0);
    rlx_session_clear(&s);
    ASSERT_EQ(rlx_session_delete(st, "llama", "s1", &err), 0);
    /* empty history is allowed */
    ASSERT_EQ(rlx_session_put(st, "m", "empty", NULL, 0, NULL, NULL, &err), 0);
    ASSERT_EQ(rlx_session_get(st, "m", "empty", 0, &s, &err), 0);
    ASSERT_EQ(s.n_tokens, 0);
    rlx_session_clear(&s);
    /* bad input */
    ASSERT_EQ(rlx_session_put(st, "m", "bad id", toks, 1, NULL, NULL, &err), RLX_EINVAL);
    ASSERT_EQ(rlx_session_put(st, NULL, "ok", toks, 1, NULL, NULL, &err), RLX_EINVAL);
    ASSERT_EQ(rlx_session_get(st, "m", "nope", 0, &s, &err), RLX_ENOTFOUND);
    ASSERT(strstr(err.msg, "nope") != NULL);
    ASSERT_EQ(rlx_session_store_check(st, &err), 0);
    rlx_session_store_close(st);

    /* reopen: everything is still there */
    ASSERT_EQ(rlx_session_store_open(&st, db, &err), 0);
    ASSERT_EQ(rlx_session_get(st, "qwen", "s1", 0, &s, &err), 0);
    ASSERT_STR_EQ(s.model, "qwen");
    ASSERT_EQ(s.n_tokens, 2);
    rlx_session_clear(&s);
    ASSERT_EQ(rlx_session_delete(st, "qwen", "s1", &err), 0);
    ASSERT_EQ(rlx_session_delete(st, "qwen", "s1", &err), RLX_ENOTFOUND);
    ASSERT_EQ(rlx_session_get(st, "qwen", "s1", 0, &s, &err), RLX_ENOTFOUND);
    rlx_session_store_close(st);
    sqlite3 *raw;
    ASSERT_EQ(sqlite3_open(db, &raw), SQLITE_OK);
    sqlite3_stmt *q;
    ASSERT_EQ(sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    ASSERT_STR_EQ((const char *)sqlite3_column_text(q, 0), "wal");
    sqlite3_finalize(q);
    sqlite3_close(raw);
    rm_db(db);
}

TEST(kv_files_follow_their_rows)
{
    const char *db = rlx_test_tmp_path("kv.db");
    char kvdir[600], a[700], b[700], outside[700];
    snprintf(kvdir, sizeof kvdir, "%s.kv", db);
    snprintf(a, sizeof a, "%s/a.kv", kvdir);
    snprintf(b, sizeof b, "%s/b.kv", kvdir);
    snprintf(outside, sizeof outside, "%s", rlx_test_tmp_path("victim.txt"));
    rm_db(db);
    mkdir(kvdir, 0700);
    touch(a);
    touch(b);
    touch(outside);
    rlx_session_store *st;
    rlx_error err = {0};
    ASSERT_EQ(rlx_session_store_open(&st, db, &err), 0);
    int32_t t = 5;
    ASSERT_EQ(rlx_session_put(st, "m", "k", &t, 1, a, "h1", &err), 0);
    ASSERT_EQ(rlx_session_put(st, "m", "k", &t, 1, a, "h1", &err), 0); /* same file: kept */
    ASSERT(file_exists(a));
    ASSERT_EQ(rlx_session_put(st, "m", "k", &t, 1, b, "h2", &err), 0); /* replaced: removed */
    ASSERT(!file_exists(a));
    ASSERT(file_exists(b));
    ASSERT_EQ(rlx_session_delete(st, "m", "k", &err), 0);
    ASSERT(!file_exists(b));
    /* a row naming a file outside <db>.kv/ (a copied or edited database): never removed */
    char up[800];
    snprintf(up, sizeof up, "%s/../%s", kvdir, outside + strlen(rlx_test_tmp_dir()) + 1); /* the same file */
    ASSERT_EQ(rlx_session_put(st, "m", "x", &t, 1, outside, "h1", &err), 0);
    ASSERT_EQ(rlx_session_delete(st, "m", "x", &err), 0);
    ASSERT(file_exists(outside));
    ASSERT_EQ(rlx_session_put(st, "m", "y", &t, 1, up, "h1", &err), 0);
    ASSERT_EQ(rlx_session_delete(st, "m", "y", &err), 0);
    ASSERT(file_exists(outside));
    ASSERT(rlx_session_path_within(kvdir, a) && !rlx_session_path_within(kvdir, kvdir) &&
           !rlx_session_path_within(kvdir, up) && !rlx_session_path_within("/x.kv", "/x.kvother/a"));
    unlink(outside);
    rmdir(kvdir);
    rlx_session_store_close(st);
    rm_db(db);
}

TEST(list_pages)
{
    const char *db = rlx_test_tmp_path("list.db");
    rm_db(db);
    rlx_session_store *st;
    rlx_error err = {0};
    ASSERT_EQ(rlx_session_store_open(&st, db, &err), 0);
    rlx_session_store_set_clock(st, fake_clock, NULL);
    int32_t toks[10] = {0};
    char id[32];
    for (int i = 0; i < 7; i++) {
        fake_now = 100.0 + i;
        snprintf(id, sizeof id, "s%d", i);
        ASSERT_EQ(rlx_session_put(st, "m", id, toks, (size_t)i, NULL, NULL, &err), 0);
    }
    rlx_session *l;
    size_t n, total;
    ASSERT_EQ(rlx_session_list(st, "m", 0, 0, 3, &l, &n, &total, &err), 0);
    ASSERT_EQ(n, 3);
    ASSERT_EQ(total, 7);
    ASSERT_STR_EQ(l[0].id, "s6"); /* most recent first */
    ASSERT_EQ(l[0].n_tokens, 6);
    ASSERT(l[0].tokens == NULL);
    ASSERT_STR_EQ(l[2].id, "s4");
    rlx_session_list_free(l, n);
    ASSERT_EQ(rlx_session_list(st, "m", 0, 6, 3, &l, &n, NULL, &err), 0);
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(l[0].id, "s0");
    rlx_session_list_free(l, n);
    ASSERT_EQ(rlx_session_list(st, "m", 0, 100, 3, &l, &n, &total, &err), 0);
    ASSERT_EQ(n, 0);
    rlx_session_list_free(l, n);
    total = 0;
    ASSERT_EQ(rlx_session_list(st, "m", 0, 0, 0, &l, &n, &total, &err), 0);
    ASSERT_EQ(n, 0);
    ASSERT_EQ(total, 7);
    rlx_session_list_free(l, n);
    /* per model, and within a max age (now = 106: s3..s6 were updated in the last 3.5 s) */
    fake_now = 106.0;
    ASSERT_EQ(rlx_session_put(st, "other", "s0", toks, 1, NULL, NULL, &err), 0);
    ASSERT_EQ(rlx_session_list(st, "other", 0, 0, 10, &l, &n, &total, &err), 0);
    ASSERT_EQ(total, 1);
    ASSERT_EQ(n, 1);
    rlx_session_list_free(l, n);
    ASSERT_EQ(rlx_session_list(st, "m", 3.5, 0, 10, &l, &n, &total, &err), 0);
    ASSERT_EQ(total, 4);
    ASSERT_EQ(n, 4);
    ASSERT_STR_EQ(l[3].id, "s3");
    rlx_session_list_free(l, n);
    rlx_session_store_close(st);
    /* a row whose token blob was damaged (3 bytes): listed as damaged among the others (before,
       the whole list failed and the server answered an empty one); a get of it is an error */
    sqlite3 *raw;
    ASSERT_EQ(sqlite3_open(db, &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, "UPDATE sessions SET tokens = x'010203' WHERE id = 's5'", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    ASSERT_EQ(rlx_session_store_open(&st, db, &err), 0);
    ASSERT_MSG(rlx_session_list(st, "m", 0, 0, 10, &l, &n, &total, &err) == 0, "%s", err.msg);
    ASSERT_EQ(n, 7);
    ASSERT_STR_EQ(l[1].id, "s5");
    ASSERT(l[1].damaged);
    ASSERT_EQ(l[1].n_tokens, 0);
    ASSERT(!l[0].damaged && !l[2].damaged);
    rlx_session_list_free(l, n);
    rlx_session got;
    ASSERT_EQ(rlx_session_get(st, "m", "s5", 0, &got, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "delete the session"), "%s", err.msg);
    rlx_session_store_close(st);
    rm_db(db);
}

TEST(limits_ttl_and_count)
{
    char db[512];
    snprintf(db, sizeof db, "%s", rlx_test_tmp_path("lim.db")); /* the path ring is reused below */
    rm_db(db);
    rlx_session_store *st;
    rlx_error err = {0};
    ASSERT_EQ(rlx_session_store_open(&st, db, &err), 0);
    rlx_session_store_set_clock(st, fake_clock, NULL);
    int32_t t = 1;
    char id[32], kv[10][600], kvdir[560];
    snprintf(kvdir, sizeof kvdir, "%s.kv", db); /* the store removes files only there */
    mkdir(kvdir, 0700);
    for (int i = 0; i < 10; i++) {
        fake_now = 1000.0 + 10 * i; /* s0 oldest ... s9 newest */
        snprintf(id, sizeof id, "s%d", i);
        snprintf(kv[i], sizeof kv[i], "%s/%s", kvdir, id);
        touch(kv[i]);
        ASSERT_EQ(rlx_session_put(st, "m", id, &t, 1, kv[i], "h", &err), 0);
    }
    fake_now = 1100.0;
    size_t removed = 99;
    /* nothing to do */
    ASSERT_EQ(rlx_session_enforce_limits(st, "m", 0, 0, NULL, 0, &removed, &err), 0);
    ASSERT_EQ(removed, 0);
    /* TTL 65 s at t = 1100: updated < 1035 goes, i.e. s0..s3 - but a kept one (its turn runs)
       stays whatever its age: first s2 kept, then no more */
    const char *busy[] = {"s2"};
    ASSERT_EQ(rlx_session_enforce_limits(st, "m", 65.0, 0, busy, 1, &removed, &err), 0);
    ASSERT_EQ(removed, 3);
    rlx_session s;
    ASSERT_EQ(rlx_session_get(st, "m", "s2", 0, &s, &err), 0);
    rlx_session_clear(&s);
    ASSERT(file_exists(kv[2]));
    ASSERT_EQ(rlx_session_enforce_limits(st, "m", 65.0, 0, NULL, 0, &removed, &err), 0);
    ASSERT_EQ(removed, 1);
    ASSERT_EQ(rlx_session_get(st, "m", "s3", 0, &s, &err), RLX_ENOTFOUND);
    ASSERT_EQ(rlx_session_get(st, "m", "s4", 0, &s, &err), 0);
    rlx_session_clear(&s);
    ASSERT(!file_exists(kv[3]));
    ASSERT(file_exists(kv[4]));
    /* touching s4 makes it the newest: the cap of 3 then keeps s4, s9, s8 (and s5, kept as in
       use the first time; it goes the second) */
    fake_now = 1200.0;
    ASSERT_EQ(rlx_session_put(st, "m", "s4", &t, 1, kv[4], "h", &err), 0);
    const char *busy5[] = {"s5"};
    ASSERT_EQ(rlx_session_enforce_limits(st, "m", 0, 3, busy5, 1, &removed, &err), 0);
    ASSERT_EQ(removed, 2);
    ASSERT_EQ(rlx_session_get(st, "m", "s5", 0, &s, &err), 0);
    rlx_session_clear(&s);
    ASSERT_EQ(rlx_session_enforce_limits(st, "m", 0, 3, NULL, 0, &removed, &err), 0);
    ASSERT_EQ(removed, 1);
    const char *keep[] = {"s4", "s8", "s9"}, *gone[] = {"s5", "s6", "s7"};
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(rlx_session_get(st, "m", keep[i], 0, &s, &err), 0);
        rlx_session_clear(&s);
        ASSERT_EQ(rlx_session_get(st, "m", gone[i], 0, &s, &err), RLX_ENOTFOUND);
    }
    ASSERT(!file_exists(kv[5]) && !file_exists(kv[7]));
    ASSERT(file_exists(kv[4]) && file_exists(kv[9]));
    rlx_session_store_close(st);
    for (int i = 0; i < 10; i++) unlink(kv[i]);
    rm_db(db);
}

TEST(foreign_and_corrupt_files)
{
    rlx_session_store *st = (rlx_session_store *)1;
    rlx_error err = {0};
    /* plain text */
    const char *txt = rlx_test_tmp_path("notes.txt");
    FILE *f = fopen(txt, "w");
    ASSERT(f);
    for (int i = 0; i < 200; i++) fputs("this is not a database at all\n", f);
    fclose(f);
    ASSERT_EQ(rlx_session_store_open(&st, txt, &err), RLX_EFORMAT);
    ASSERT(st == NULL);
    ASSERT_MSG(strstr(err.msg, "not a valid sqlite3 database") && strstr(err.msg, "notes.txt"),
               "message: %s", err.msg);
    unlink(txt);
    /* an sqlite database of another program */
    const char *other = rlx_test_tmp_path("other.db");
    rm_db(other);
    sqlite3 *raw;
    ASSERT_EQ(sqlite3_open(other, &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, "CREATE TABLE users(name TEXT)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    ASSERT_EQ(rlx_session_store_open(&st, other, &err), RLX_EFORMAT);
    ASSERT(strstr(err.msg, "another program") != NULL);
    rm_db(other);
    /* a valid database whose pages were overwritten */
    const char *bad = rlx_test_tmp_path("bad.db");
    rm_db(bad);
    ASSERT_EQ(rlx_session_store_open(&st, bad, &err), 0);
    int32_t toks[200] = {0};
    char id[16];
    for (int i = 0; i < 50; i++) {
        snprintf(id, sizeof id, "s%d", i);
        ASSERT_EQ(rlx_session_put(st, "m", id, toks, 200, NULL, NULL, &err), 0);
    }
    rlx_session_store_close(st); /* checkpoints the WAL into the main file */
    int fd = open(bad, O_WRONLY);
    ASSERT(fd >= 0);
    char junk[4096];
    memset(junk, 0xA5, sizeof junk);
    ASSERT_EQ(pwrite(fd, junk, sizeof junk, 4096), (ssize_t)sizeof junk);
    ASSERT_EQ(pwrite(fd, junk, 100, 0), 100); /* the header too */
    close(fd);
    ASSERT_EQ(rlx_session_store_open(&st, bad, &err), RLX_EFORMAT);
    rm_db(bad);
    /* a directory that does not exist */
    ASSERT_EQ(rlx_session_store_open(&st, "/nonexistent-dir/x/s.db", &err), RLX_EIO);
    ASSERT(strstr(err.msg, "/nonexistent-dir/x/s.db") != NULL);
}

TEST(newer_schema_refused_and_v1_migrated)
{
    const char *db = rlx_test_tmp_path("ver.db");
    rm_db(db);
    sqlite3 *raw;
    ASSERT_EQ(sqlite3_open(db, &raw), SQLITE_OK);
    /* a version-1 database with one session (tokens 7, 8 little-endian) */
    ASSERT_EQ(sqlite3_exec(raw,
        "CREATE TABLE sessions(id TEXT PRIMARY KEY, model TEXT NOT NULL, tokens BLOB NOT NULL,"
        " created REAL NOT NULL, updated REAL NOT NULL);"
        "INSERT INTO sessions VALUES('old', 'm', x'0700000008000000', 1.0, 2.0);"
        "PRAGMA user_version = 1;", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    rlx_session_store *st;
    rlx_error err = {0};
    ASSERT_EQ(rlx_session_store_open(&st, db, &err), 0);
    rlx_session s;
    ASSERT_EQ(rlx_session_get(st, "m", "old", 0, &s, &err), 0);
    ASSERT_EQ(s.n_tokens, 2);
    ASSERT_EQ(s.tokens[0], 7);
    ASSERT_EQ(s.tokens[1], 8);
    ASSERT(s.kv_path == NULL);
    rlx_session_clear(&s);
    ASSERT_EQ(rlx_session_put(st, "m", "old", NULL, 0, "/p", "h", &err), 0);
    rlx_session_store_close(st);
    ASSERT_EQ(sqlite3_open(db, &raw), SQLITE_OK);
    sqlite3_stmt *q;
    ASSERT_EQ(sqlite3_prepare_v2(raw, "PRAGMA user_version", -1, &q, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    ASSERT_EQ(sqlite3_column_int(q, 0), RLX_SESSION_SCHEMA_VERSION);
    sqlite3_finalize(q);
    ASSERT_EQ(sqlite3_exec(raw, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    ASSERT_EQ(rlx_session_store_open(&st, db, &err), RLX_EUNSUPPORTED);
    ASSERT(strstr(err.msg, "99") != NULL);
    rm_db(db);
}

/* A version-2 database (id alone was the key) moves to (model, id) keys with every row, its
 * model, snapshot path and times kept; afterwards two models may use one id. */
TEST(v2_migrated_to_model_keys)
{
    const char *db = rlx_test_tmp_path("v2.db");
    rm_db(db);
    sqlite3 *raw;
    ASSERT_EQ(sqlite3_open(db, &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw,
        "PRAGMA journal_mode = WAL;"
        "CREATE TABLE sessions(id TEXT PRIMARY KEY, model TEXT NOT NULL, tokens BLOB NOT NULL,"
        " created REAL NOT NULL, updated REAL NOT NULL, kv_path TEXT NULL, kv_model_hash TEXT NULL);"
        "CREATE INDEX sessions_updated ON sessions(updated);"
        "INSERT INTO sessions VALUES('a', 'llama', x'07000000', 1.0, 5.0, '/kv/a.kv', 'h1');"
        "INSERT INTO sessions VALUES('b', 'qwen', x'0800000009000000', 2.0, 6.0, NULL, NULL);"
        "PRAGMA user_version = 2;", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    rlx_session_store *st;
    rlx_error err = {0};
    ASSERT_MSG(rlx_session_store_open(&st, db, &err) == 0, "%s", err.msg);
    rlx_session s;
    ASSERT_EQ(rlx_session_get(st, "llama", "a", 0, &s, &err), 0);
    ASSERT_EQ(s.n_tokens, 1);
    ASSERT_EQ(s.tokens[0], 7);
    ASSERT_STR_EQ(s.kv_path, "/kv/a.kv");
    ASSERT_STR_EQ(s.kv_model_hash, "h1");
    ASSERT_NEAR(s.created, 1.0, 0);
    ASSERT_NEAR(s.updated, 5.0, 0);
    rlx_session_clear(&s);
    ASSERT_EQ(rlx_session_get(st, "qwen", "a", 0, &s, &err), RLX_ENOTFOUND);
    ASSERT_EQ(rlx_session_get(st, "qwen", "b", 0, &s, &err), 0);
    ASSERT_EQ(s.n_tokens, 2);
    rlx_session_clear(&s);
    int32_t t = 3;
    ASSERT_EQ(rlx_session_put(st, "qwen", "a", &t, 1, NULL, NULL, &err), 0);
    size_t n = 0, total = 0;
    rlx_session *l;
    ASSERT_EQ(rlx_session_list(st, "qwen", 0, 0, 10, &l, &n, &total, &err), 0);
    ASSERT_EQ(total, 2);
    rlx_session_list_free(l, n);
    ASSERT_EQ(rlx_session_list(st, "llama", 0, 0, 10, &l, &n, &total, &err), 0);
    ASSERT_EQ(total, 1);
    rlx_session_list_free(l, n);
    ASSERT_EQ(rlx_session_store_check(st, &err), 0);
    rlx_session_store_close(st);
    rm_db(db);
}

typedef struct thr_arg { rlx_session_store *st; int k; int fails; } thr_arg;

static void *thr_main(void *p)
{
    thr_arg *a = p;
    char id[32];
    for (int i = 0; i < 100; i++) {
        snprintf(id, sizeof id, "t%d-%d", a->k, i);
        int32_t tok[3] = {a->k, i, 42};
        rlx_session s;
        if (rlx_session_put(a->st, "m", id, tok, 3, NULL, NULL, NULL) ||
            rlx_session_get(a->st, "m", id, 0, &s, NULL) || s.tokens[1] != i)
            a->fails++;
        rlx_session_clear(&s);
    }
    return NULL;
}

TEST(threads_share_a_store)
{
    const char *db = rlx_test_tmp_path("thr.db");
    rm_db(db);
    rlx_session_store *st;
    ASSERT_EQ(rlx_session_store_open(&st, db, NULL), 0);
    pthread_t th[4];
    thr_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thr_arg){st, i, 0};
        pthread_create(&th[i], NULL, thr_main, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ASSERT_EQ(args[i].fails, 0);
    }
    size_t n, total;
    rlx_session *l;
    ASSERT_EQ(rlx_session_list(st, "m", 0, 0, 1, &l, &n, &total, NULL), 0);
    ASSERT_EQ(total, 400);
    rlx_session_list_free(l, n);
    rlx_session_store_close(st);
    rm_db(db);
}

/* Two models of one daemon load on two threads and open the same new database at once: each
 * must get a store (the WAL switch of one waits for the other, never fails as "locked"). */
typedef struct { const char *db; pthread_barrier_t *go; int rc; rlx_error err; } open_arg;
static void *open_main(void *p)
{
    open_arg *a = p;
    rlx_session_store *st = NULL;
    pthread_barrier_wait(a->go);
    a->rc = rlx_session_store_open(&st, a->db, &a->err);
    rlx_session_store_close(st);
    return NULL;
}

TEST(concurrent_opens_of_a_new_file)
{
    const char *db = rlx_test_tmp_path("race.db");
    for (int round = 0; round < 40; round++) {
        rm_db(db);
        enum { N = 4 };
        pthread_t th[N];
        open_arg args[N];
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, N);
        for (int i = 0; i < N; i++) {
            args[i] = (open_arg){.db = db, .go = &go};
            pthread_create(&th[i], NULL, open_main, &args[i]);
        }
        for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
        pthread_barrier_destroy(&go);
        for (int i = 0; i < N; i++) ASSERT_MSG(args[i].rc == 0, "round %d opener %d: %s", round, i, args[i].err.msg);
    }
    rm_db(db);
}

/* The child writes sessions in a tight loop and reports each id after its COMMIT returned;
 * every tenth write also rewrites "hot" whose first token records the write number. */
static void crash_child(const char *db, int wfd, uint32_t base)
{
    rlx_session_store *st;
    if (rlx_session_store_open(&st, db, NULL)) _exit(3);
    int32_t toks[129];
    char id[32];
    for (uint32_t i = base;; i++) {
        size_t n = len_of(i);
        toks[0] = (int32_t)i;
        for (size_t j = 0; j < n; j++) toks[j + 1] = tok_of(i, (uint32_t)j);
        snprintf(id, sizeof id, "c%u", i);
        if (rlx_session_put(st, "m", id, toks + 1, n, NULL, NULL, NULL)) _exit(4);
        if (i % 10 == 0 && rlx_session_put(st, "m", "hot", toks, n + 1, NULL, NULL, NULL)) _exit(4);
        if (write(wfd, &i, sizeof i) != sizeof i) _exit(5);
    }
}

TEST(kill9_keeps_committed_sessions)
{
    const char *db = rlx_test_tmp_path("crash.db");
    rm_db(db);
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    srand(seed);
    fprintf(stderr, "  crash seed %u\n", seed);
    uint32_t base = 0, total_reported = 0;
    double t0 = rlx_now();
    for (int round = 0; round < 6 && rlx_now() - t0 < 7.0; round++) {
        int fds[2];
        ASSERT_EQ(pipe(fds), 0);
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            crash_child(db, fds[1], base);
        }
        close(fds[1]);
        /* the first commit starts the clock (a slow host, or valgrind, may take longer than the
         * whole window to open the store); then kill at a random moment 20..400 ms later */
        uint32_t id, last = base, last_hot = UINT32_MAX, n_rep = 0;
        ssize_t r = read(fds[0], &id, sizeof id);
        if (r == sizeof id) {
            last = id;
            n_rep++;
            if (id % 10 == 0) last_hot = id;
        }
        struct timespec d = {0, (20 + rand() % 380) * 1000000L};
        nanosleep(&d, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        ASSERT_MSG(WIFSIGNALED(status), "child ended on its own (status %d)", status);
        while ((r = read(fds[0], &id, sizeof id)) == sizeof id) {
            last = id;
            n_rep++;
            if (id % 10 == 0) last_hot = id;
        }
        close(fds[0]);
        total_reported += n_rep;

        rlx_session_store *st;
        rlx_error err = {0};
        ASSERT_MSG(rlx_session_store_open(&st, db, &err) == 0, "reopen: %s", err.msg);
        ASSERT_MSG(rlx_session_store_check(st, &err) == 0, "integrity: %s", err.msg);
        for (uint32_t i = base; n_rep && i <= last; i++) {
            char sid[32];
            snprintf(sid, sizeof sid, "c%u", i);
            rlx_session s;
            ASSERT_MSG(rlx_session_get(st, "m", sid, 0, &s, &err) == 0, "round %d: committed %s lost: %s",
                       round, sid, err.msg);
            int ok = s.n_tokens == len_of(i);
            for (size_t j = 0; ok && j < s.n_tokens; j++) ok = s.tokens[j] == tok_of(i, (uint32_t)j);
            rlx_session_clear(&s);
            ASSERT_MSG(ok, "round %d: session %s damaged", round, sid);
        }
        if (last_hot != UINT32_MAX) {
            rlx_session h;
            ASSERT_EQ(rlx_session_get(st, "m", "hot", 0, &h, &err), 0);
            uint32_t v = h.n_tokens ? (uint32_t)h.tokens[0] : 0;
            int ok = v >= last_hot && h.n_tokens == len_of(v) + 1;
            for (size_t j = 0; ok && j + 1 < h.n_tokens; j++) ok = h.tokens[j + 1] == tok_of(v, (uint32_t)j);
            rlx_session_clear(&h);
            ASSERT_MSG(ok, "round %d: hot holds v%u, reported v%u", round, v, last_hot);
        }
        rlx_session_store_close(st);
        base = last + 1000; /* fresh ids for the next round */
    }
    ASSERT_MSG(total_reported > 0, "the writer never committed anything");
    fprintf(stderr, "  %u committed writes checked\n", total_reported);
    rm_db(db);
}

int main(void)
{
    static const rlx_test_case cases[] = {
        TEST_ENTRY(ids), TEST_ENTRY(crud_and_reopen), TEST_ENTRY(kv_files_follow_their_rows),
        TEST_ENTRY(list_pages), TEST_ENTRY(limits_ttl_and_count),
        TEST_ENTRY(foreign_and_corrupt_files), TEST_ENTRY(newer_schema_refused_and_v1_migrated),
        TEST_ENTRY(v2_migrated_to_model_keys),
        TEST_ENTRY(threads_share_a_store), TEST_ENTRY(concurrent_opens_of_a_new_file), TEST_ENTRY(kill9_keeps_committed_sessions),
    };
    return rlx_test_run(cases, RLX_ARRAY_LEN(cases));
}
