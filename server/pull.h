/* pull.h - downloads of Hugging Face model files with libcurl (`rlxd pull`, `rlxd serve -m
 * hf:...`): the listing picks the files (server/hf.h), each file goes to DEST/OWNER--REPO/NAME
 * through NAME.part (a cut download resumes there with a Range request, also in a later run),
 * redirects are followed, the sha256 the server states (X-Linked-Etag, else a 64-hex ETag) is
 * checked before the file takes its name (a mismatch removes it), and a token is sent as
 * "Authorization: Bearer" (never to another host a redirect leads to). A partial file is never
 * given the final name, so nothing loads one. Files found complete in the Hugging Face hub
 * cache (another tool's downloads) are used in place, not downloaded again. One download into a
 * folder at a time: another (a second pull, a second server) waits on the folder's flock.
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

#endif
