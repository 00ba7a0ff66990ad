/* pull.c - Hugging Face downloads (see pull.h): where files go, what is already there (the
 * rlxd folder, the Hugging Face hub cache), the folder lock. The transfers are pull_xfer.c. */
#include "server/pull.h"
#include "models/gguf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int rlx_pull_default_dest(char *buf, size_t cap, rlx_error *err)
{
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int k;
    if (x && x[0] == '/') k = snprintf(buf, cap, "%s/rlxd/models", x);
    else if (home && home[0]) k = snprintf(buf, cap, "%s/.cache/rlxd/models", home);
    else return rlx_errorf(err, RLX_ENOTFOUND, "no cache folder: set XDG_CACHE_HOME or HOME, or give --models-dir DIR");
    if (k < 0 || (size_t)k >= cap) return rlx_errorf(err, RLX_ERANGE, "the cache folder's path is too long");
    return 0;
}

int rlx__pull_path(rlx_error *err, char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    /* a path cut short names another file (or folder, which mkdir would create) */
    if (k < 0 || (size_t)k >= cap)
        return rlx_errorf(err, RLX_ERANGE, "path too long (over %zu bytes): %.120s...", cap - 1, buf);
    return 0;
}

void rlx__pull_printable(const char *s, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0;
    while (*p) {
        size_t k = 1;
        bool ok;
        if (*p < 0x80) {
            ok = *p >= 0x20 && *p != 0x7f;
        } else {
            k = *p >= 0xc2 && *p < 0xe0 ? 2 : *p >= 0xe0 && *p < 0xf0 ? 3 : *p >= 0xf0 && *p < 0xf5 ? 4 : 0;
            ok = k != 0;
            for (size_t i = 1; ok && i < k; i++) ok = (p[i] & 0xc0) == 0x80;
            if (ok && p[0] == 0xc2 && p[1] < 0xa0) ok = false; /* U+0080..U+009F: C1 controls, CSI among them */
            if (!ok) k = 1;
        }
        size_t w = ok ? k : 4;
        if (n + w >= cap) break;
        if (ok) memcpy(out + n, p, k);
        else snprintf(out + n, 5, "\\x%02x", *p);
        n += w;
        p += k;
    }
    if (cap) out[n] = 0;
}

int rlx__pull_clean_token(const char *tok, const char *what, char **out, rlx_error *err)
{
    *out = NULL;
    if (!tok) return 0;
    /* as huggingface_hub's _clean_token: a token read from a file or pasted keeps no line end */
    size_t n = strlen(tok), k = 0;
    char *t = malloc(n + 1);
    if (!t) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (tok[i] != '\r' && tok[i] != '\n') t[k++] = tok[i];
    t[k] = 0;
    size_t a = 0;
    while (t[a] == ' ' || t[a] == '\t' || t[a] == '\v' || t[a] == '\f') a++;
    while (k > a && (t[k - 1] == ' ' || t[k - 1] == '\t' || t[k - 1] == '\v' || t[k - 1] == '\f')) k--;
    memmove(t, t + a, k - a);
    t[k - a] = 0;
    for (const unsigned char *p = (const unsigned char *)t; *p; p++)
        if (*p < 0x20 || *p == 0x7f) {
            unsigned bad = *p;
            free(t);
            /* the token itself is not printed: it is a secret */
            return rlx_errorf(err, RLX_EINVAL, "%s holds a control character (byte 0x%02x): not a Hugging Face "
                              "token", what, bad);
        }
    if (!t[0]) free(t);
    else *out = t;
    return 0;
}

int rlx__pull_check_gguf(const char *path, long long size, rlx_error *err)
{
    struct stat st;
    if (stat(path, &st)) return rlx_errorf(err, RLX_EIO, "cannot read %s: %s", path, strerror(errno));
    if (!st.st_size) return rlx_errorf(err, RLX_EFORMAT, "the server sent an empty file");
    if (size >= 0 && st.st_size != size)
        return rlx_errorf(err, RLX_EFORMAT, "the server stated %lld bytes but %lld arrived", size,
                          (long long)st.st_size);
    unsigned char head[4] = {0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(head, 1, sizeof head, f) : 0;
    if (f) fclose(f);
    if (got < 4 || memcmp(head, "GGUF", 4)) {
        char raw[5] = {0}, shown[24];
        memcpy(raw, head, got);
        for (size_t i = 0; i < got; i++)
            if (!raw[i]) raw[i] = '.';
        rlx__pull_printable(raw, shown, sizeof shown);
        return rlx_errorf(err, RLX_EFORMAT, "what the server sent is not a GGUF file (it begins '%s')", shown);
    }
    /* the parser checks every tensor lies inside the file: a body cut short fails here */
    rlx_gguf *g = NULL;
    rlx_error e = {0};
    if (rlx_gguf_open(&g, path, &e))
        return rlx_errorf(err, RLX_EFORMAT, "what the server sent is not a whole GGUF file (%.300s)", e.msg);
    /* ... and one longer than its tensors (a body without a stated length that ran on past the
       model: junk a writer never pads with, a server that never ends) is not the file either */
    uint64_t end = rlx_gguf_data_offset(g), align = rlx_gguf_alignment(g);
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        end = RLX_MAX(end, rlx_gguf_data_offset(g) + t->offset + t->size);
    }
    uint64_t fsize = rlx_gguf_file_size(g);
    rlx_gguf_close(g);
    if (fsize > end + (align ? align : 32))
        return rlx_errorf(err, RLX_EFORMAT, "what the server sent runs %llu bytes past the GGUF file's last tensor (it is "
                          "not the file)", (unsigned long long)(fsize - end));
    return 0;
}

#ifdef RLX_HAVE_CURL
static int mkdir_p(const char *path, rlx_error *err)
{
    if (rlx_mkdirs(path, 0755)) return rlx_errorf(err, RLX_EIO, "cannot create %s: %s", path, strerror(errno));
    return 0;
}
#endif

static bool is_file(const char *path)
{
    struct stat st;
    return !stat(path, &st) && S_ISREG(st.st_mode);
}

/* The model files already in dir: with local, rlxd's names turned back into repository paths
 * (names no download wrote are left out); else the names as they are (the hub cache). */
static int local_names(const char *dir, bool local, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return -1;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t k = strlen(e->d_name);
        if (k <= 5 || strcasecmp(e->d_name + k - 5, ".gguf") || e->d_name[0] == '.') continue;
        char path[512];
        if (local && !rlx_hf_local_path(e->d_name, path, sizeof path)) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **g = realloc(*names, cap * sizeof *g);
            if (!g) break;
            *names = g;
        }
        if (!((*names)[*n] = strdup(local ? path : e->d_name))) break;
        (*n)++;
    }
    closedir(d);
    return 0;
}

/* dir/<the local name of repository path file>. */
static int local_file(rlx_error *err, char *buf, size_t cap, const char *dir, const char *file)
{
    char name[RLX_HF_LOCAL_NAME_MAX + 1];
    if (rlx_hf_local_name(name, sizeof name, file))
        return rlx_errorf(err, RLX_ERANGE, "%.200s...: the repository path is too long for a local file name "
                          "(at most %d bytes, '/' and '%%' written as 3)", file, RLX_HF_LOCAL_NAME_MAX);
    return rlx__pull_path(err, buf, cap, "%s/%s", dir, name);
}

/* Uses what is already downloaded: 0 with path set when every file of r's pick is there. */
static int try_local(const rlx_hf_ref *r, const char *dir, char *path, size_t cap)
{
    char **names = NULL, **files = NULL;
    size_t nn = 0, nf = 0;
    if (local_names(dir, true, &names, &nn)) return -1;
    rlx_error e = {0};
    int rc = rlx_hf_pick((const char *const *)names, nn, r, &files, &nf, &e);
    if (!rc) rc = local_file(&e, path, cap, dir, files[0]);
    rlx_hf_files_free(files, nf);
    rlx_hf_files_free(names, nn);
    return rc ? -1 : 0;
}

/* The snapshot folder of repo in the Hugging Face hub cache (huggingface_hub's layout:
 * HUB/models--OWNER--REPO/snapshots/<refs/main>/), where other tools' downloads are; -1 when
 * there is none (or its path does not fit). HUB: $HF_HUB_CACHE, else $HF_HOME/hub, else
 * $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. */
static int hub_snapshot(const char *repo, char *buf, size_t cap)
{
    const char *hub = getenv("HF_HUB_CACHE"), *hf = getenv("HF_HOME"), *x = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    char root[2048];
    rlx_error e = {0};
    int rc;
    if (hub && hub[0]) rc = rlx__pull_path(&e, root, sizeof root, "%s", hub);
    else if (hf && hf[0]) rc = rlx__pull_path(&e, root, sizeof root, "%s/hub", hf);
    else if (x && x[0] == '/') rc = rlx__pull_path(&e, root, sizeof root, "%s/huggingface/hub", x);
    else if (home && home[0]) rc = rlx__pull_path(&e, root, sizeof root, "%s/.cache/huggingface/hub", home);
    else return -1;
    const char *slash = strchr(repo, '/');
    if (rc || !slash) return -1;
    char refp[2400], ref[128] = "";
    if (rlx__pull_path(&e, refp, sizeof refp, "%s/models--%.*s--%s/refs/main", root, (int)(slash - repo), repo,
                       slash + 1))
        return -1;
    FILE *f = fopen(refp, "r");
    if (!f) return -1;
    bool got = fgets(ref, sizeof ref, f) != NULL;
    fclose(f);
    ref[strcspn(ref, "\r\n")] = 0;
    if (!got || !ref[0] || strchr(ref, '/') || strstr(ref, "..")) return -1;
    return rlx__pull_path(&e, buf, cap, "%s/models--%.*s--%s/snapshots/%s", root, (int)(slash - repo), repo,
                          slash + 1, ref) ? -1 : 0;
}

/* Whether every file (repository paths) is in the hub cache's snapshot of repo: path gets the
 * first one's local path. */
static bool in_hub(const char *repo, char *const *files, size_t n, char *path, size_t cap)
{
    char snap[2600], p[4096];
    rlx_error e = {0};
    if (hub_snapshot(repo, snap, sizeof snap)) return false;
    for (size_t i = 0; i < n; i++) {
        if (rlx__pull_path(&e, p, sizeof p, "%s/%s", snap, files[i])) return false;
        if (!is_file(p)) return false; /* stat follows the link into blobs/ */
    }
    return !rlx__pull_path(&e, path, cap, "%s/%s", snap, files[0]);
}

/* Offline: the rlxd folder, then the hub cache's snapshot (a model at the snapshot's top level). */
static int try_offline(const rlx_hf_ref *r, const char *dir, char *path, size_t cap)
{
    if (!try_local(r, dir, path, cap)) return 0;
    char snap[2600];
    if (hub_snapshot(r->repo, snap, sizeof snap)) return -1;
    char **names = NULL, **files = NULL;
    size_t nn = 0, nf = 0;
    if (local_names(snap, false, &names, &nn)) return -1;
    rlx_error e = {0};
    int rc = rlx_hf_pick((const char *const *)names, nn, r, &files, &nf, &e);
    if (!rc) rc = in_hub(r->repo, files, nf, path, cap) ? 0 : -1;
    rlx_hf_files_free(files, nf);
    rlx_hf_files_free(names, nn);
    return rc;
}

/* DEST/OWNER--REPO for r. */
static int repo_dir(const rlx_hf_ref *r, const rlx_pull_opts *o, char *dir, size_t cap, rlx_error *err)
{
    char dest[2048];
    if (o->dest) {
        if (rlx__pull_path(err, dest, sizeof dest, "%s", o->dest)) return err->code;
    } else if (rlx_pull_default_dest(dest, sizeof dest, err)) {
        return err->code;
    }
    if (rlx_hf_local_dir(dir, cap, dest, r->repo))
        return rlx_errorf(err, RLX_ERANGE, "path too long: %.120s.../%s", dest, r->repo);
    return 0;
}

/* Server text (X-Error-Message, names from a listing) reaches err->msg: no control character
 * of it may reach a terminal or a log. */
static int printable_error(rlx_error *err, int rc)
{
    char m[sizeof err->msg];
    rlx__pull_printable(err->msg, m, sizeof m);
    memcpy(err->msg, m, sizeof m);
    return rc;
}

#ifndef RLX_HAVE_CURL

int rlx_pull(const rlx_hf_ref *r, const rlx_pull_opts *o, char *path, size_t cap, rlx_error *err)
{
    char dir[2300];
    if (repo_dir(r, o, dir, sizeof dir, err)) return printable_error(err, err->code);
    if (o->offline_first && !try_offline(r, dir, path, cap)) return 0;
    return rlx_errorf(err, RLX_EUNSUPPORTED, "this rlxd was built without libcurl (libcurl4-openssl-dev): it cannot "
                      "download hf:%s", r->repo);
}

#else

#include <curl/curl.h>

/* The listing, the pick and the downloads (libcurl initialised by the caller). */
static int pull_net(const rlx_hf_ref *r, const rlx_pull_opts *o, const char *dir, char *path, size_t cap,
                    rlx_error *err)
{
    const char *ep = o->endpoint ? o->endpoint : getenv("HF_ENDPOINT");
    char *tok = NULL;
    int rc = rlx__pull_clean_token(o->token ? o->token : getenv("HF_TOKEN"), o->token ? "--token" : "HF_TOKEN",
                                   &tok, err);
    if (rc) return rc;
    rlx__pull_ctx pc = {.endpoint = ep && ep[0] ? ep : "https://huggingface.co", .token = tok, .o = o};
    char **names = NULL, **files = NULL;
    size_t nn = 0, nf = 0;
    if (!r->file[0] && (rc = rlx__pull_listing(&pc, r->repo, &names, &nn, err))) goto out;
    rc = rlx_hf_pick(r->file[0] ? NULL : (const char *const *)names, nn, r, &files, &nf, err);
    rlx_hf_files_free(names, nn);
    if (rc) goto out;
    /* downloaded by another tool (huggingface-cli, llama.cpp's -hf with the hub cache, ...) */
    bool local = true;
    for (size_t i = 0; i < nf && local; i++) {
        char p[4200];
        if ((rc = local_file(err, p, sizeof p, dir, files[i]))) goto out;
        local = is_file(p);
    }
    if (!local && in_hub(r->repo, files, nf, path, cap)) {
        if (!o->quiet) fprintf(stderr, "rlxd pull: hf:%s: already in the Hugging Face cache (%s)\n", r->repo, path);
        goto out;
    }
    if ((rc = mkdir_p(dir, err))) goto out;
    /* one download into a folder at a time (two would append to one .part): a second pull, or
       a second server starting with the same -m hf:, waits and then finds the files there */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0 && flock(dfd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK) {
        fprintf(stderr, "rlxd pull: waiting for another download into %s\n", dir);
        while (flock(dfd, LOCK_EX) && errno == EINTR) {
        }
    }
    if (!o->quiet && nf > 1) fprintf(stderr, "rlxd pull: hf:%s: %zu split parts\n", r->repo, nf);
    for (size_t i = 0; i < nf && !rc; i++) rc = rlx__pull_file(&pc, r->repo, files[i], dir, err);
    if (!rc) rc = local_file(err, path, cap, dir, files[0]);
    if (dfd >= 0) close(dfd); /* and the lock with it */
out:
    rlx_hf_files_free(files, nf);
    free(tok);
    return rc;
}

int rlx_pull(const rlx_hf_ref *r, const rlx_pull_opts *o, char *path, size_t cap, rlx_error *err)
{
    char dir[2300];
    if (repo_dir(r, o, dir, sizeof dir, err)) return printable_error(err, err->code);
    if (o->offline_first && !try_offline(r, dir, path, cap)) return 0;
    /* reference-counted by libcurl; cleaned up again so nothing of it outlives the call */
    if (curl_global_init(CURL_GLOBAL_DEFAULT)) return rlx_errorf(err, RLX_EIO, "cannot start libcurl");
    int rc = pull_net(r, o, dir, path, cap, err);
    curl_global_cleanup();
    return rc ? printable_error(err, rc) : 0;
}

#endif
