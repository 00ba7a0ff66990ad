/* session.h - the persistent session store: token histories (and optional KV snapshot files)
 * keyed by (model, client-chosen session id), kept in one sqlite3 database so a restarted
 * daemon resumes its sessions. Several models may share one database: each sees only its own
 * sessions, and limits apply per model.
 *
 * Durability: WAL journal with synchronous=FULL. In WAL mode a COMMIT appends the transaction
 * to the -wal file before returning, so a process killed at any moment (kill -9) leaves a
 * consistent database holding every committed transaction (an unfinished one is ignored on
 * the next open because its commit frame is missing or fails its checksum). NORMAL would
 * already give that for process crashes; FULL also fsyncs the WAL on each commit, so a
 * session a client was told about survives a power loss or kernel crash too, at the cost of
 * one fsync per put (sessions are written once per request, not per token).
 *
 * Threads: a store holds one connection behind its own mutex, so any thread may call any
 * function; for heavy parallel use open one store per worker thread on the same path (WAL
 * lets readers and one writer proceed together; a busy timeout absorbs writer contention).
 *
 * Ownership: the store owns its connection. rlx_session values returned by get/list are
 * caller-owned copies; free them with rlx_session_clear / rlx_session_list_free. Strings and
 * token arrays passed in are borrowed. The store owns the KV snapshot files its rows name:
 * delete, eviction and a put that replaces kv_path unlink the old file after the COMMIT (a
 * crash in between leaves an orphan file, never a row naming a file that was removed). */
#ifndef RLX_SESSION_H
#define RLX_SESSION_H

#include "backends/rlx.h"

#define RLX_SESSION_ID_MAX 128
#define RLX_SESSION_SCHEMA_VERSION 3 /* PRAGMA user_version of a current database */

typedef struct rlx_session_store rlx_session_store;

typedef struct rlx_session {
    char id[RLX_SESSION_ID_MAX + 1];
    char *model;              /* owned */
    int32_t *tokens;          /* owned; NULL from rlx_session_list (n_tokens still set) */
    size_t n_tokens;
    double created, updated;  /* seconds since the Unix epoch */
    char *kv_path;            /* owned, NULL if no snapshot */
    char *kv_model_hash;      /* owned, NULL if no snapshot */
    bool damaged;             /* rlx_session_list: its token blob cannot be read (n_tokens 0); the
                                 session can only be deleted */
} rlx_session;

/* Opens (creating if needed) and migrates the database at path. A file that is not an
 * sqlite3 database, or one that belongs to another program, is refused with RLX_EFORMAT; a
 * database from a newer rlxd with RLX_EUNSUPPORTED. Any thread; several stores (threads,
 * processes) may open one new file at once: each waits up to 5 s for the others' WAL switch. */
int rlx_session_store_open(rlx_session_store **out, const char *path, rlx_error *err);
void rlx_session_store_close(rlx_session_store *st);

/* Runs PRAGMA integrity_check; RLX_EFORMAT with sqlite's first complaint if not "ok". */
int rlx_session_store_check(rlx_session_store *st, rlx_error *err);

/* Replaces the wall clock (seconds since the epoch) used for created/updated and TTLs; for
 * tests. NULL restores the real clock. */
void rlx_session_store_set_clock(rlx_session_store *st, double (*now)(void *), void *user);

/* Session ids: 1..128 characters from [A-Za-z0-9._:-]. */
bool rlx_session_id_valid(const char *id);
int rlx_session_id_check(const char *id, rlx_error *err);

/* Inserts or replaces session (model, id) in one transaction; `created` survives replacement.
 * kv_path and kv_model_hash may be NULL. */
int rlx_session_put(rlx_session_store *st, const char *model, const char *id,
                    const int32_t *tokens, size_t n_tokens, const char *kv_path,
                    const char *kv_model_hash, rlx_error *err);

/* Whether path names a file inside dir/ with no ".." component: the store removes (and the
 * worker restores) a row's kv_path only there, so a copied or edited database cannot reach
 * other files. */
bool rlx_session_path_within(const char *dir, const char *path);

/* Copies session (model, id) into *out (clear it afterwards). RLX_ENOTFOUND if absent or not
 * updated for more than max_age seconds (<= 0: any age; an expired row stays until
 * rlx_session_enforce_limits removes it, but is never returned). */
int rlx_session_get(rlx_session_store *st, const char *model, const char *id, double max_age,
                    rlx_session *out, rlx_error *err);

/* Removes a session and its KV snapshot file. RLX_ENOTFOUND if absent. */
int rlx_session_delete(rlx_session_store *st, const char *model, const char *id, rlx_error *err);

/* Page of a model's sessions updated within max_age seconds (<= 0: all), most recently updated
 * first (ties by id), without token arrays; at most 10000 per call, limit 0 for none (just
 * *total). *out is a malloc'ed array of *n (free with rlx_session_list_free); *total
 * (optional) receives the number of such sessions. */
int rlx_session_list(rlx_session_store *st, const char *model, double max_age, size_t offset,
                     size_t limit, rlx_session **out, size_t *n, size_t *total, rlx_error *err);
void rlx_session_list_free(rlx_session *list, size_t n);

/* Deletes a model's sessions not updated for ttl_seconds (<= 0: no TTL), then its least
 * recently updated beyond max_count (<= 0: no cap), with their KV files - but never those of
 * keep[0..n_keep) (sessions whose turn runs: removing their row lost the whole session to a
 * crash mid-turn). *n_removed is optional. */
int rlx_session_enforce_limits(rlx_session_store *st, const char *model, double ttl_seconds,
                               int64_t max_count, const char *const *keep, size_t n_keep, size_t *n_removed,
                               rlx_error *err);

/* Frees what a session owns and zeroes it. */
void rlx_session_clear(rlx_session *s);

#endif
