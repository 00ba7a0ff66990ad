/* pull.h - downloads of Hugging Face model files with libcurl (`rlxd pull`, `rlxd serve -m
 * hf:...`): the listing picks the files (server/hf.h), each file goes to DEST/OWNER--REPO/NAME,
 * NAME the repository path with '%' written "%25" and '/' "%2F" (rlx_hf_local_name: files of
 * two subfolders never share a name, and the folder stays flat for `serve --models-dir`),
 * through NAME.part (a cut download resumes there with a Range request, also in a later run;
 * NAME.part.etag remembers the validator of the response that began it, sent as If-Range, and a
 * resume answered for another version of the file starts the file over), redirects are
 * followed, the sha256 the server states (X-Linked-Etag, else a 64-hex ETag) is checked before
 * the file takes its name (a mismatch removes it); a file no sha256 vouches for must be a whole
 * GGUF file of the size the server stated (else it is removed). A token is sent as
 * "Authorization: Bearer" (line ends and surrounding blanks dropped; never to another host a
 * redirect leads to). A partial file is never given the final name, so nothing loads one. Files
 * found complete in the Hugging Face hub cache (another tool's downloads) are used in place, not
 * downloaded again. One download into a folder at a time: another (a second pull, a second
 * server) waits on the folder's flock. Control characters of server text in messages are
 * escaped.
 *
 * Threads: the caller's (blocking); not for the serving loop. Ownership: paths are written into
 * the caller's buffers. */
#ifndef RLX_PULL_H
#define RLX_PULL_H

#include "server/hf.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct rlx_pull_opts {
    const char *endpoint;    /* NULL: $HF_ENDPOINT, else https://huggingface.co */
    const char *token;       /* NULL: $HF_TOKEN (empty: none) */
    const char *dest;        /* NULL: rlx_pull_default_dest */
    int retries;             /* resumes after a cut connection per file (3 when < 0) */
    bool offline_first;      /* use files already downloaded without asking the server (serve -m) */
    bool quiet;              /* no progress output */
} rlx_pull_opts;

/* $XDG_CACHE_HOME/rlxd/models, else $HOME/.cache/rlxd/models; RLX_ENOTFOUND when neither is set. */
int rlx_pull_default_dest(char *buf, size_t cap, rlx_error *err);

/* Downloads what r means (every part of a split model) unless already there, and writes the
 * local path of its first file into path. Errors (RLX_EIO, RLX_ENOTFOUND, RLX_EINVAL,
 * RLX_EUNSUPPORTED without libcurl) carry a message naming the URL and what to do: HTTP 401
 * (a token is needed or was refused), 403, 404, an unreachable endpoint, a checksum mismatch. */
int rlx_pull(const rlx_hf_ref *r, const rlx_pull_opts *o, char *path, size_t cap, rlx_error *err);

/* ---- internal: shared by pull.c and pull_xfer.c (the transfers), tested by tests/unit ---- */

typedef struct rlx__pull_ctx {
    const char *endpoint;
    const char *token;       /* cleaned; NULL: none */
    const rlx_pull_opts *o;
} rlx__pull_ctx;

/* Formats a path into buf: RLX_ERANGE "path too long" naming its start when it does not fit. */
int rlx__pull_path(rlx_error *err, char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* s into out with control characters (C0, DEL, C1) and bytes that are not UTF-8 written \xNN. */
void rlx__pull_printable(const char *s, char *out, size_t cap);
/* tok without '\r', '\n' and surrounding blanks (huggingface_hub's _clean_token) into *out
 * (malloc'ed; NULL when nothing is left). RLX_EINVAL naming what (HF_TOKEN or --token), not the
 * token, when another control character is left. */
int rlx__pull_clean_token(const char *tok, const char *what, char **out, rlx_error *err);
/* Whether path is a whole GGUF file (its magic, size bytes when size >= 0, the parser's checks):
 * the test for a download no sha256 verified. RLX_EFORMAT saying what is wrong. */
int rlx__pull_check_gguf(const char *path, long long size, rlx_error *err);
/* The repository listing's names (pull_xfer.c). */
int rlx__pull_listing(const rlx__pull_ctx *pc, const char *repo, char ***names, size_t *n, rlx_error *err);
/* Downloads repository path file into dir under its local name unless it is there (pull_xfer.c). */
int rlx__pull_file(const rlx__pull_ctx *pc, const char *repo, const char *file, const char *dir, rlx_error *err);

#endif
