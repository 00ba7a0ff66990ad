/* pull.c - Hugging Face downloads with libcurl (see pull.h). */
#include "server/pull.h"
#include "server/sha256.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef RLX_VERSION
#define RLX_VERSION "dev"
#endif

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

#ifdef RLX_HAVE_CURL
static int mkdir_p(const char *path, rlx_error *err)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0755) && errno != EEXIST) return rlx_errorf(err, RLX_EIO, "cannot create %s: %s", p, strerror(errno));
        *s = '/';
    }
    if (mkdir(p, 0755) && errno != EEXIST) return rlx_errorf(err, RLX_EIO, "cannot create %s: %s", p, strerror(errno));
    return 0;
}
#endif

static bool is_file(const char *path)
{
    struct stat st;
    return !stat(path, &st) && S_ISREG(st.st_mode);
}

/* The model files already in dir (names without folders), for a reference used offline. */
static int local_names(const char *dir, char ***names, size_t *n)
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
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **g = realloc(*names, cap * sizeof *g);
            if (!g) break;
            *names = g;
        }
        if (!((*names)[*n] = strdup(e->d_name))) break;
        (*n)++;
    }
    closedir(d);
    return 0;
}

static const char *base_name(const char *p)
{
    if (!p) return "";
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

/* Uses what is already downloaded: 0 with path set when every file of r's pick is there. */
static int try_local(const rlx_hf_ref *r, const char *dir, char *path, size_t cap)
{
    char **names = NULL, **files = NULL;
    size_t nn = 0, nf = 0;
    if (local_names(dir, &names, &nn)) return -1;
    rlx_hf_ref lr = *r;
    if (r->file[0]) snprintf(lr.file, sizeof lr.file, "%s", base_name(r->file));
    rlx_error e = {0};
    int rc = rlx_hf_pick((const char *const *)names, nn, &lr, &files, &nf, &e);
    if (!rc) snprintf(path, cap, "%s/%s", dir, files[0]);
    rlx_hf_files_free(files, nf);
    rlx_hf_files_free(names, nn);
    return rc ? -1 : 0;
}

/* The snapshot folder of repo in the Hugging Face hub cache (huggingface_hub's layout:
 * HUB/models--OWNER--REPO/snapshots/<refs/main>/), where other tools' downloads are; -1 when
 * there is none. HUB: $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub,
 * else ~/.cache/huggingface/hub. */
static int hub_snapshot(const char *repo, char *buf, size_t cap)
{
    const char *hub = getenv("HF_HUB_CACHE"), *hf = getenv("HF_HOME"), *x = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    char root[2048];
    if (hub && hub[0]) snprintf(root, sizeof root, "%s", hub);
    else if (hf && hf[0]) snprintf(root, sizeof root, "%s/hub", hf);
    else if (x && x[0] == '/') snprintf(root, sizeof root, "%s/huggingface/hub", x);
    else if (home && home[0]) snprintf(root, sizeof root, "%s/.cache/huggingface/hub", home);
    else return -1;
    const char *slash = strchr(repo, '/');
    if (!slash) return -1;
    char refp[2400], ref[128] = "";
    snprintf(refp, sizeof refp, "%s/models--%.*s--%s/refs/main", root, (int)(slash - repo), repo, slash + 1);
    FILE *f = fopen(refp, "r");
    if (!f) return -1;
    bool got = fgets(ref, sizeof ref, f) != NULL;
    fclose(f);
    ref[strcspn(ref, "\r\n")] = 0;
    if (!got || !ref[0] || strchr(ref, '/') || strstr(ref, "..")) return -1;
    int k = snprintf(buf, cap, "%s/models--%.*s--%s/snapshots/%s", root, (int)(slash - repo), repo, slash + 1, ref);
    return k < 0 || (size_t)k >= cap ? -1 : 0;
}

/* Whether every file (repository paths) is in the hub cache's snapshot of repo: path gets the
 * first one's local path. */
static bool in_hub(const char *repo, char *const *files, size_t n, char *path, size_t cap)
{
    char snap[2600], p[4096];
    if (hub_snapshot(repo, snap, sizeof snap)) return false;
    for (size_t i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/%s", snap, files[i]);
        if (!is_file(p)) return false; /* stat follows the link into blobs/ */
    }
    snprintf(path, cap, "%s/%s", snap, files[0]);
    return true;
}

/* Offline: the rlxd folder, then the hub cache's snapshot (a model at the snapshot's top level). */
static int try_offline(const rlx_hf_ref *r, const char *dir, char *path, size_t cap)
{
    if (!try_local(r, dir, path, cap)) return 0;
    char snap[2600];
    if (hub_snapshot(r->repo, snap, sizeof snap)) return -1;
    char **names = NULL, **files = NULL;
    size_t nn = 0, nf = 0;
    if (local_names(snap, &names, &nn)) return -1;
    rlx_error e = {0};
    int rc = rlx_hf_pick((const char *const *)names, nn, r, &files, &nf, &e);
    if (!rc) rc = in_hub(r->repo, files, nf, path, cap) ? 0 : -1;
    rlx_hf_files_free(files, nf);
    rlx_hf_files_free(names, nn);
    return rc;
}

#ifndef RLX_HAVE_CURL

int rlx_pull(const rlx_hf_ref *r, const rlx_pull_opts *o, char *path, size_t cap, rlx_error *err)
{
    char dest[2048], dir[2300];
    if (o->dest) snprintf(dest, sizeof dest, "%s", o->dest);
    else if (rlx_pull_default_dest(dest, sizeof dest, err)) return err->code;
    if (!rlx_hf_local_dir(dir, sizeof dir, dest, r->repo) && o->offline_first && !try_offline(r, dir, path, cap)) return 0;
    return rlx_errorf(err, RLX_EUNSUPPORTED, "this rlxd was built without libcurl (libcurl4-openssl-dev): it cannot "
                      "download hf:%s", r->repo);
}

#else

#include <curl/curl.h>

typedef struct xfer {
    FILE *f;                 /* the .part file, or NULL: into mem */
    uint64_t offset;         /* bytes the .part file held before this request */
    bool started, bad_range;
    long code;               /* the latest response's status */
    long long cr_start;      /* Content-Range's first byte, -1: none */
    char etag[160], linked[160];
    char errmsg[200];        /* Hugging Face's X-Error-Message, "" when none */
    char *mem;
    size_t mem_len, mem_cap;
    /* progress */
    const char *label;
    bool quiet, tty;
    double t0, last;
    int decile;
} xfer;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void header_value(const char *line, size_t len, size_t name_len, char *out, size_t cap)
{
    const char *v = line + name_len;
    const char *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
    size_t n = (size_t)(end - v);
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), v);
}

static size_t on_header(char *b, size_t sz, size_t nm, void *u)
{
    xfer *x = u;
    size_t len = sz * nm;
    if (len > 5 && !strncmp(b, "HTTP/", 5)) {
        const char *sp = memchr(b, ' ', len);
        x->code = sp ? strtol(sp + 1, NULL, 10) : 0;
        x->etag[0] = 0; /* per response; X-Linked-Etag (on a redirect) is kept */
        x->cr_start = -1;
    } else if (len > 5 && !strncasecmp(b, "etag:", 5)) {
        header_value(b, len, 5, x->etag, sizeof x->etag);
    } else if (len > 16 && !strncasecmp(b, "x-error-message:", 16)) {
        header_value(b, len, 16, x->errmsg, sizeof x->errmsg);
    } else if (len > 14 && !strncasecmp(b, "x-linked-etag:", 14)) {
        header_value(b, len, 14, x->linked, sizeof x->linked);
    } else if (len > 14 && !strncasecmp(b, "content-range:", 14)) {
        char v[128];
        header_value(b, len, 14, v, sizeof v);
        const char *p = v;
        if (!strncasecmp(p, "bytes", 5)) p += 5;
        while (*p == ' ') p++;
        x->cr_start = strtoll(p, NULL, 10);
    }
    return len;
}

static size_t on_body(char *b, size_t sz, size_t nm, void *u)
{
    xfer *x = u;
    size_t len = sz * nm;
    if (!x->f) {
        if (x->mem_len + len + 1 > (16u << 20)) return 0; /* a listing is small */
        if (x->mem_len + len + 1 > x->mem_cap) {
            size_t cap = (x->mem_len + len + 1) * 2;
            char *m = realloc(x->mem, cap);
            if (!m) return 0;
            x->mem = m;
            x->mem_cap = cap;
        }
        memcpy(x->mem + x->mem_len, b, len);
        x->mem_len += len;
        x->mem[x->mem_len] = 0;
        return len;
    }
    if (!x->started) {
        x->started = true;
        if (x->offset && x->code == 200) {
            /* the server sent the whole file instead of the rest: start the .part over */
            if (ftruncate(fileno(x->f), 0)) return 0;
            x->offset = 0;
        } else if (x->offset && x->code == 206 && x->cr_start != (long long)x->offset) {
            x->bad_range = true;
            return 0;
        }
    }
    return fwrite(b, 1, len, x->f);
}

static void fmt_mib(char *buf, size_t cap, double bytes) { snprintf(buf, cap, "%.1f MiB", bytes / (1024.0 * 1024.0)); }

static int on_progress(void *u, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)ultotal;
    (void)ulnow;
    xfer *x = u;
    if (x->quiet || !x->f || !x->started) return 0;
    double total = dltotal > 0 ? (double)x->offset + (double)dltotal : 0, now = (double)x->offset + (double)dlnow;
    double t = now_s(), rate = t > x->t0 ? (double)dlnow / (t - x->t0) : 0;
    char a[32], b[32], c[32];
    fmt_mib(a, sizeof a, now);
    fmt_mib(b, sizeof b, total);
    fmt_mib(c, sizeof c, rate);
    if (x->tty) {
        if (t - x->last < 0.2 && !(total > 0 && now >= total)) return 0;
        x->last = t;
        if (total > 0)
            fprintf(stderr, "\r%s  %s / %s  %3d%%  %s/s   ", x->label, a, b, (int)(100.0 * now / total), c);
        else fprintf(stderr, "\r%s  %s  %s/s   ", x->label, a, c);
        fflush(stderr);
    } else if (total > 0) {
        int d = (int)(10.0 * now / total);
        if (d > x->decile) {
            x->decile = d;
            fprintf(stderr, "rlxd pull: %s: %d%% (%s of %s, %s/s)\n", x->label, d * 10, a, b, c);
        }
    }
    return 0;
}

typedef struct pull_ctx {
    const char *endpoint;
    const char *token;       /* NULL: none */
    const rlx_pull_opts *o;
} pull_ctx;

static CURLcode perform(const pull_ctx *pc, const char *url, xfer *x, char *cerr)
{
    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(cerr, CURL_ERROR_SIZE, "cannot start libcurl");
        return CURLE_FAILED_INIT;
    }
    struct curl_slist *hdr = NULL;
    char auth[1200], range[64];
    if (pc->token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", pc->token);
        hdr = curl_slist_append(hdr, auth);
    }
    cerr[0] = 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
    curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "rlxd/" RLX_VERSION);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
    if (hdr) curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    if (x->f) {
        if (x->offset) {
            snprintf(range, sizeof range, "%llu-", (unsigned long long)x->offset);
            curl_easy_setopt(h, CURLOPT_RANGE, range);
        }
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    x->t0 = x->last = now_s();
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (code) x->code = code;
    if (!cerr[0]) snprintf(cerr, CURL_ERROR_SIZE, "%s", curl_easy_strerror(rc));
    curl_easy_cleanup(h);
    curl_slist_free_all(hdr);
    return rc;
}

static int http_error_text(rlx_error *err, const pull_ctx *pc, long code, const char *url, const char *repo)
{
    switch (code) {
    case 401:
        if (pc->token)
            return rlx_errorf(err, RLX_EINVAL, "HTTP 401 Unauthorized for %s: the token was refused (check HF_TOKEN "
                              "or --token)", url);
        return rlx_errorf(err, RLX_EINVAL, "HTTP 401 Unauthorized for %s: %s is gated, private or absent (Hugging "
                          "Face answers 401 for all three without a token); for a gated or private one set HF_TOKEN "
                          "or pass --token with a token that may read it", url, repo);
    case 403:
        return rlx_errorf(err, RLX_EINVAL, "HTTP 403 Forbidden for %s: this token may not read %s (a gated "
                          "repository needs its terms accepted on the website first)", url, repo);
    case 404:
        return rlx_errorf(err, RLX_ENOTFOUND, "HTTP 404 Not Found for %s: no repository %s, or no such file in it",
                          url, repo);
    default:
        return rlx_errorf(err, RLX_EIO, "HTTP %ld for %s", code, url);
    }
}

/* The error for an HTTP status, with the server's X-Error-Message when it sent one. */
static int http_error(rlx_error *err, const pull_ctx *pc, const xfer *x, const char *url, const char *repo)
{
    int rc = http_error_text(err, pc, x->code, url, repo);
    if (x->errmsg[0]) {
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, " (the server says: %.150s)", x->errmsg);
    }
    return rc;
}

static int net_error(rlx_error *err, const pull_ctx *pc, CURLcode rc, const char *cerr, const char *url)
{
    if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_PROXY)
        return rlx_errorf(err, RLX_EIO, "cannot reach %s (%s): check the network, or point HF_ENDPOINT / "
                          "--endpoint at a reachable mirror", pc->endpoint,
                          cerr);
    return rlx_errorf(err, RLX_EIO, "%s: %s", url, cerr);
}

static bool sha_hex(const char *etag, char out[65])
{
    const char *p = etag;
    if (!strncmp(p, "W/", 2)) p += 2;
    if (*p == '"') p++;
    size_t n = strcspn(p, "\"");
    if (n != 64) return false;
    for (size_t i = 0; i < 64; i++) {
        char c = p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
        out[i] = (char)(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
    }
    out[64] = 0;
    return true;
}

static bool retryable(CURLcode rc)
{
    return rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
           rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_GOT_NOTHING || rc == CURLE_HTTP2_STREAM ||
           rc == CURLE_HTTP2;
}

static int fetch_file(const pull_ctx *pc, const char *repo, const char *file, const char *dir, rlx_error *err)
{
    char final[4096], part[4200], url[4096], label[600];
    snprintf(final, sizeof final, "%s/%s", dir, base_name(file));
    snprintf(part, sizeof part, "%s.part", final);
    snprintf(label, sizeof label, "%s", base_name(file));
    if (is_file(final)) {
        if (!pc->o->quiet) fprintf(stderr, "rlxd pull: %s: already downloaded (%s)\n", label, final);
        return 0;
    }
    if (rlx_hf_file_url(url, sizeof url, pc->endpoint, repo, file))
        return rlx_errorf(err, RLX_ERANGE, "the URL of %s is too long", file);
    int retries = pc->o->retries < 0 ? 3 : pc->o->retries;
    bool restarted = false;
    char want[65] = "";
    double t0 = now_s();
    uint64_t first_offset = 0;
    for (int attempt = 0;; attempt++) {
        FILE *f = fopen(part, "ab");
        if (!f) return rlx_errorf(err, RLX_EIO, "cannot write %s: %s", part, strerror(errno));
        struct stat st;
        uint64_t offset = !fstat(fileno(f), &st) ? (uint64_t)st.st_size : 0;
        if (!attempt) first_offset = offset;
        if (offset && !pc->o->quiet)
            fprintf(stderr, "rlxd pull: %s: resuming at %llu bytes (%s)\n", label, (unsigned long long)offset, part);
        xfer x = {.f = f, .offset = offset, .cr_start = -1, .label = label, .quiet = pc->o->quiet,
                  .tty = isatty(2) == 1, .decile = offset ? -1 : 0};
        char cerr[CURL_ERROR_SIZE];
        CURLcode rc = perform(pc, url, &x, cerr);
        if (x.tty && !x.quiet && x.started) fputc('\n', stderr);
        bool werr = fflush(f) != 0;
        werr |= fclose(f) != 0;
        if (werr) return rlx_errorf(err, RLX_EIO, "cannot write %s: %s", part, strerror(errno));
        struct stat pst;
        if (rc != CURLE_OK && !stat(part, &pst) && pst.st_size == 0) unlink(part); /* nothing arrived */
        if (rc == CURLE_OK && (x.code == 200 || x.code == 206)) {
            if (!sha_hex(x.linked, want)) sha_hex(x.etag, want);
            break;
        }
        if (rc == CURLE_HTTP_RETURNED_ERROR && x.code == 416 && offset && !restarted) {
            /* the .part is as long as the file or longer: not a prefix of it, start over */
            restarted = true;
            unlink(part);
            if (!pc->o->quiet) fprintf(stderr, "rlxd pull: %s: the server refused the resume (416), starting over\n", label);
            continue;
        }
        if (x.bad_range) {
            unlink(part);
            return rlx_errorf(err, RLX_EIO, "%s: the server answered the resume at %llu bytes with another range; "
                              "the partial file was removed, run again", url, (unsigned long long)offset);
        }
        if (rc == CURLE_HTTP_RETURNED_ERROR) return http_error(err, pc, &x, url, repo);
        if (retryable(rc) && attempt < retries) {
            struct stat st2;
            unsigned long long have = !stat(part, &st2) ? (unsigned long long)st2.st_size : 0;
            fprintf(stderr, "rlxd pull: %s: connection cut at %llu bytes (%s), resuming (retry %d of %d)\n", label,
                    have, cerr, attempt + 1, retries);
            usleep(200000u * (unsigned)(attempt + 1));
            continue;
        }
        if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_CONNECT) return net_error(err, pc, rc, cerr, url);
        return rlx_errorf(err, RLX_EIO, "download of %s failed: %s; what arrived is kept in %s and the next "
                          "`rlxd pull` resumes there", url, cerr, part);
    }
    struct stat st;
    double bytes = !stat(part, &st) ? (double)st.st_size : 0;
    char mib[32];
    fmt_mib(mib, sizeof mib, bytes);
    if (want[0]) {
        char got[65];
        if (rlx_sha256_file(part, got)) return rlx_errorf(err, RLX_EIO, "cannot read %s: %s", part, strerror(errno));
        if (strcmp(got, want)) {
            unlink(part);
            return rlx_errorf(err, RLX_EFORMAT, "checksum mismatch for %s: the server states sha256 %s, the download "
                              "has %s; the file was removed (run again to download it anew)", file, want, got);
        }
    }
    if (rename(part, final))
        return rlx_errorf(err, RLX_EIO, "cannot rename %s to %s: %s", part, final, strerror(errno));
    if (!pc->o->quiet)
        fprintf(stderr, "rlxd pull: %s: %s in %.1f s%s, %s -> %s\n", label, mib, now_s() - t0,
                first_offset ? " (resumed)" : "", want[0] ? "sha256 verified" : "not verified (the server states no sha256)",
                final);
    return 0;
}

static int fetch_listing(const pull_ctx *pc, const char *repo, char ***names, size_t *n, rlx_error *err)
{
    char url[2048], cerr[CURL_ERROR_SIZE];
    if (rlx_hf_api_url(url, sizeof url, pc->endpoint, repo)) return rlx_errorf(err, RLX_ERANGE, "the URL is too long");
    xfer x = {.cr_start = -1, .quiet = true};
    CURLcode rc = perform(pc, url, &x, cerr);
    int r = 0;
    if (rc == CURLE_HTTP_RETURNED_ERROR) r = http_error(err, pc, &x, url, repo);
    else if (rc != CURLE_OK) r = net_error(err, pc, rc, cerr, url);
    else if (!x.mem) r = rlx_errorf(err, RLX_EFORMAT, "%s: an empty answer", url);
    else if ((r = rlx_hf_listing_names(x.mem, names, n, err))) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        rlx_errorf(err, r, "%s: %s", url, m);
    }
    free(x.mem);
    return r;
}

/* The listing, the pick and the downloads (libcurl initialised by the caller). */
static int pull_net(const rlx_hf_ref *r, const rlx_pull_opts *o, const char *dir, char *path, size_t cap,
                    rlx_error *err)
{
    const char *ep = o->endpoint ? o->endpoint : getenv("HF_ENDPOINT");
    const char *tok = o->token ? o->token : getenv("HF_TOKEN");
    pull_ctx pc = {.endpoint = ep && ep[0] ? ep : "https://huggingface.co", .token = tok && tok[0] ? tok : NULL, .o = o};
    char **names = NULL, **files = NULL;
    size_t nn = 0, nf = 0;
    int rc = 0;
    if (!r->file[0] && (rc = fetch_listing(&pc, r->repo, &names, &nn, err))) return rc;
    rc = rlx_hf_pick(r->file[0] ? NULL : (const char *const *)names, nn, r, &files, &nf, err);
    rlx_hf_files_free(names, nn);
    if (rc) return rc;
    /* downloaded by another tool (huggingface-cli, llama.cpp's -hf with the hub cache, ...) */
    bool local = true;
    for (size_t i = 0; i < nf && local; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, base_name(files[i]));
        local = is_file(p);
    }
    if (!local && in_hub(r->repo, files, nf, path, cap)) {
        if (!o->quiet) fprintf(stderr, "rlxd pull: hf:%s: already in the Hugging Face cache (%s)\n", r->repo, path);
        rlx_hf_files_free(files, nf);
        return 0;
    }
    if ((rc = mkdir_p(dir, err))) {
        rlx_hf_files_free(files, nf);
        return rc;
    }
    /* one download into a folder at a time (two would append to one .part): a second pull, or
       a second server starting with the same -m hf:, waits and then finds the files there */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0 && flock(dfd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK) {
        fprintf(stderr, "rlxd pull: waiting for another download into %s\n", dir);
        while (flock(dfd, LOCK_EX) && errno == EINTR) {
        }
    }
    if (!o->quiet && nf > 1) fprintf(stderr, "rlxd pull: hf:%s: %zu split parts\n", r->repo, nf);
    for (size_t i = 0; i < nf && !rc; i++) rc = fetch_file(&pc, r->repo, files[i], dir, err);
    if (!rc) snprintf(path, cap, "%s/%s", dir, base_name(files[0]));
    if (dfd >= 0) close(dfd); /* and the lock with it */
    rlx_hf_files_free(files, nf);
    return rc;
}

int rlx_pull(const rlx_hf_ref *r, const rlx_pull_opts *o, char *path, size_t cap, rlx_error *err)
{
    char dest[2048], dir[2300];
    if (o->dest) snprintf(dest, sizeof dest, "%s", o->dest);
    else if (rlx_pull_default_dest(dest, sizeof dest, err)) return err->code;
    if (rlx_hf_local_dir(dir, sizeof dir, dest, r->repo)) return rlx_errorf(err, RLX_ERANGE, "the path is too long");
    if (o->offline_first && !try_offline(r, dir, path, cap)) return 0;
    /* reference-counted by libcurl; cleaned up again so nothing of it outlives the call */
    if (curl_global_init(CURL_GLOBAL_DEFAULT)) return rlx_errorf(err, RLX_EIO, "cannot start libcurl");
    int rc = pull_net(r, o, dir, path, cap, err);
    curl_global_cleanup();
    return rc;
}

#endif
