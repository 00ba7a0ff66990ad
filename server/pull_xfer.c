/* pull_xfer.c - the transfers of Hugging Face downloads with libcurl (see pull.h): the listing,
 * and a file through NAME.part with its validator in NAME.part.etag, resumed with Range and
 * If-Range, checked (sha256, else a whole GGUF) before it takes its name. */
#include "server/pull.h"
#include "server/sha256.h"
#include "models/gguf.h"

#ifdef RLX_HAVE_CURL

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#ifndef RLX_VERSION
#define RLX_VERSION "dev"
#endif

#define LISTING_MAX (16u << 20) /* a listing is small; a bigger answer is not one */

typedef struct xfer {
    FILE *f;                 /* the .part file, or NULL: into mem */
    uint64_t offset;         /* bytes the .part file held before this request */
    const char *remembered;  /* the validator the .part began with ("": unknown) */
    const char *vpath;       /* where that validator is kept (NAME.part.etag) */
    bool started, bad_range, changed, too_big, not_file;
    bool began;              /* this response (a 200) began the .part */
    uint64_t got;            /* bytes of this response written to the .part */
    uint64_t probe_at;       /* .part size at which to read its GGUF header next (0: 1 MiB) */
    long long limit;         /* the most bytes the file can have (stated, else its header's), -1: unknown */
    long long space_for;     /* the file size the free space was checked for, -1: not yet */
    char overrun[200];       /* why the body was stopped ("" when it was not): it ran past the file */
    int werrno;              /* errno of a failed write of the .part, 0: none */
    long code;               /* the latest response's status */
    long long cr_start, cr_total; /* Content-Range's first byte and total, -1: none */
    long long linked_size;   /* X-Linked-Size (on a redirect), -1: none */
    long long clen;          /* the final response's Content-Length, -1: none */
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

static bool is_file(const char *path)
{
    struct stat st;
    return !stat(path, &st) && S_ISREG(st.st_mode);
}

/* What identifies the file's version: X-Linked-Etag (Hugging Face's, on the redirect) else the
 * ETag of the answer. */
static const char *validator(const xfer *x) { return x->linked[0] ? x->linked : x->etag; }

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
        x->etag[0] = 0; /* per response; X-Linked-Etag and -Size (on a redirect) are kept */
        x->cr_start = x->cr_total = -1;
    } else if (len > 5 && !strncasecmp(b, "etag:", 5)) {
        header_value(b, len, 5, x->etag, sizeof x->etag);
    } else if (len > 16 && !strncasecmp(b, "x-error-message:", 16)) {
        header_value(b, len, 16, x->errmsg, sizeof x->errmsg);
    } else if (len > 14 && !strncasecmp(b, "x-linked-etag:", 14)) {
        header_value(b, len, 14, x->linked, sizeof x->linked);
    } else if (len > 14 && !strncasecmp(b, "x-linked-size:", 14)) {
        char v[32];
        header_value(b, len, 14, v, sizeof v);
        x->linked_size = v[0] >= '0' && v[0] <= '9' ? strtoll(v, NULL, 10) : -1;
    } else if (len > 14 && !strncasecmp(b, "content-range:", 14)) {
        /* "bytes FIRST-LAST/TOTAL", or "bytes * /TOTAL" on a 416 */
        char v[128];
        header_value(b, len, 14, v, sizeof v);
        const char *p = v;
        if (!strncasecmp(p, "bytes", 5)) p += 5;
        while (*p == ' ') p++;
        x->cr_start = *p >= '0' && *p <= '9' ? strtoll(p, NULL, 10) : -1;
        const char *t = strchr(p, '/');
        x->cr_total = t && t[1] >= '0' && t[1] <= '9' ? strtoll(t + 1, NULL, 10) : -1;
    }
    return len;
}

/* Keeps the validator of the response that began the .part (line 1) and its ETag (line 2, for
 * If-Range) beside it, for a resume in a later run; best effort: without it a later run resumes
 * unchecked, as before it existed. */
/* Opens a download's own file for writing (append: resume), never through a symbolic link or
 * into anything but a regular file: a NAME.part or NAME.part.etag planted as a link (in a shared
 * models folder) made the pull overwrite the file it pointed at, and the model become that link.
 * A link found there is removed (not what it points at) and a fresh file made. */
static FILE *open_own(const char *path, bool append)
{
    int flags = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (append ? O_APPEND : O_TRUNC); /* read: within_file */
    int fd = open(path, flags, 0644);
    if (fd < 0 && errno == ELOOP && !unlink(path)) fd = open(path, flags, 0644);
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    FILE *f = fdopen(fd, append ? "ab+" : "w+");
    if (!f) close(fd);
    return f;
}

static void write_sidecar(const char *vpath, const char *valid, const char *etag)
{
    if (!valid[0] && !etag[0]) {
        unlink(vpath);
        return;
    }
    FILE *f = open_own(vpath, false);
    if (!f) return;
    fprintf(f, "%s\n%s\n", valid, etag);
    if (fclose(f)) unlink(vpath);
}

static void read_sidecar(const char *vpath, char *valid, char *etag, size_t cap)
{
    valid[0] = etag[0] = 0;
    FILE *f = fopen(vpath, "r");
    if (!f) return;
    if (fgets(valid, (int)cap, f) && fgets(etag, (int)cap, f)) {
        valid[strcspn(valid, "\r\n")] = 0;
        etag[strcspn(etag, "\r\n")] = 0;
    } else {
        valid[0] = etag[0] = 0;
    }
    fclose(f);
}

#define PROBE_MAX (512u << 20) /* no GGUF header is this long: a body without one is not a model */

/* An answer whose length nothing states (chunked) must not fill the disk before the check at
 * the end: the .part's own GGUF header says how long the file is (its data section's end), read
 * when the .part reaches 1, 2, 4, ... MiB until the header is whole; a body running past that
 * plus the alignment (or past the size the server stated) is stopped. False: stop, x->overrun
 * says why. */
static bool within_file(xfer *x)
{
    uint64_t total = x->offset + x->got;
    long long stated = x->linked_size >= 0 ? x->linked_size : x->cr_total >= 0 ? x->cr_total : x->code == 200 ? x->clen : -1;
    if (stated >= 0 && total > (uint64_t)stated) {
        snprintf(x->overrun, sizeof x->overrun, "the server stated %lld bytes and sent more", stated);
        return false;
    }
    if (x->limit < 0 && total >= (x->probe_at ? x->probe_at : (1u << 20))) {
        size_t n = (size_t)RLX_MIN(total, (uint64_t)PROBE_MAX);
        uint8_t *head = fflush(x->f) ? NULL : malloc(n);
        rlx_error e = {0};
        uint64_t extent, align;
        if (head && pread(fileno(x->f), head, n, 0) == (ssize_t)n && !rlx_gguf_extent(head, n, &extent, &align, &e))
            x->limit = (long long)(extent + (align ? align : 32)); /* the padding rlx__pull_check_gguf allows */
        else if (head && n >= 4 && memcmp(head, "GGUF", 4)) {
            snprintf(x->overrun, sizeof x->overrun, "what the server sent is not a GGUF file");
            free(head);
            return false;
        } else if (head && n == PROBE_MAX) {
            snprintf(x->overrun, sizeof x->overrun, "no whole GGUF header in its first %u MiB", PROBE_MAX >> 20);
            free(head);
            return false;
        }
        free(head);
        x->probe_at = (x->probe_at ? x->probe_at : (1u << 20)) * 2;
    }
    if (x->limit >= 0 && total > (uint64_t)x->limit) {
        snprintf(x->overrun, sizeof x->overrun, "it ran past the %lld bytes its GGUF header gives the file", x->limit);
        return false;
    }
    /* a size (stated, or the header's - which the server chose) that the disk cannot hold: stopped
       now, not once the disk is full (a header claiming a 1 TiB tensor wrote on and on) */
    const long long size = stated >= 0 ? stated : x->limit;
    struct statvfs vs;
    if (size >= 0 && size != x->space_for && !fstatvfs(fileno(x->f), &vs)) {
        x->space_for = size;
        const unsigned long long room = (unsigned long long)vs.f_bavail * vs.f_frsize;
        if ((unsigned long long)size > total && (unsigned long long)size - total > room) {
            snprintf(x->overrun, sizeof x->overrun, "the file is %lld bytes, %llu more than the %llu bytes free where it goes",
                     size, (unsigned long long)size - total, room);
            return false;
        }
    }
    return true;
}

static size_t on_body(char *b, size_t sz, size_t nm, void *u)
{
    xfer *x = u;
    size_t len = sz * nm;
    if (!x->f) {
        if (x->mem_len + len + 1 > LISTING_MAX) {
            x->too_big = true;
            return 0;
        }
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
        /* a 3xx without Location (not followed) and the like: its body is not the file */
        x->not_file = x->code != 200 && x->code != 206;
        if (x->not_file) return len;
        if (x->code == 206 && x->offset) {
            if (x->cr_start != (long long)x->offset) {
                x->bad_range = true;
                return 0;
            }
            /* the rest of another version of the file would splice two files into one */
            if (x->remembered[0] && strcmp(validator(x), x->remembered)) {
                x->changed = true;
                return 0;
            }
        } else {
            if (x->code == 206 && x->cr_start != 0) {
                x->bad_range = true;
                return 0;
            }
            /* the whole file (also a 200 to a Range request: the server ignores Range, or
               If-Range found another version): start the .part over */
            if (x->offset && ftruncate(fileno(x->f), 0)) {
                x->werrno = errno;
                return 0;
            }
            x->offset = 0;
            x->began = true;
            write_sidecar(x->vpath, validator(x), x->etag);
        }
    }
    if (x->not_file) return len;
    size_t w = fwrite(b, 1, len, x->f);
    if (w < len) x->werrno = errno ? errno : EIO;
    x->got += w;
    return w == len && !within_file(x) ? 0 : w;
}

static void fmt_mib(char *buf, size_t cap, double bytes) { snprintf(buf, cap, "%.1f MiB", bytes / (1024.0 * 1024.0)); }

static int on_progress(void *u, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)ultotal;
    (void)ulnow;
    xfer *x = u;
    if (x->quiet || !x->f || !x->started || x->not_file) return 0;
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

/* One GET of url (redirects followed) into x; if_range: the ETag a resume must still match. */
static CURLcode perform(const rlx__pull_ctx *pc, const char *url, xfer *x, const char *if_range, char *cerr)
{
    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(cerr, CURL_ERROR_SIZE, "cannot start libcurl");
        return CURLE_FAILED_INIT;
    }
    struct curl_slist *hdr = NULL;
    char range[64], ifr[200];
    cerr[0] = 0;
    x->linked_size = x->clen = -1;
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
    if (pc->token) {
        /* libcurl writes "Authorization: Bearer TOKEN" (any length), and only to the host the
           request began at: a redirect to another host goes without it */
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, pc->token);
    }
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    if (x->f) {
        if (x->offset) {
            snprintf(range, sizeof range, "%llu-", (unsigned long long)x->offset);
            curl_easy_setopt(h, CURLOPT_RANGE, range);
            /* a strong validator only (RFC 9110 13.1.5); the file's other version then comes whole */
            if (if_range[0] && strncmp(if_range, "W/", 2) &&
                snprintf(ifr, sizeof ifr, "If-Range: %s", if_range) < (int)sizeof ifr) {
                struct curl_slist *l = curl_slist_append(hdr, ifr);
                if (l) hdr = l;
            }
        }
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    if (hdr) curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    x->t0 = x->last = now_s();
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (code) x->code = code;
    curl_off_t cl = -1;
    if (!curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) && cl >= 0) x->clen = (long long)cl;
    if (!cerr[0]) snprintf(cerr, CURL_ERROR_SIZE, "%s", curl_easy_strerror(rc));
    curl_easy_cleanup(h);
    curl_slist_free_all(hdr);
    return rc;
}

static int http_error_text(rlx_error *err, const rlx__pull_ctx *pc, long code, const char *url, const char *repo)
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

/* The error for an HTTP status, with the server's X-Error-Message when it sent one (its control
 * characters escaped, as everything of err->msg is by rlx_pull). */
static int http_error(rlx_error *err, const rlx__pull_ctx *pc, const xfer *x, const char *url, const char *repo)
{
    int rc = http_error_text(err, pc, x->code, url, repo);
    if (x->errmsg[0]) {
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, " (the server says: %.150s)", x->errmsg);
    }
    return rc;
}

static int net_error(rlx_error *err, const rlx__pull_ctx *pc, CURLcode rc, const char *cerr, const char *url)
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

/* The .part and its validator go together. */
static void drop_part(const char *part, const char *vpath)
{
    unlink(part);
    unlink(vpath);
}

/* What became of the .part after a failure: kept for a resume when bytes arrived, else removed. */
static const char *part_fate(const char *part, const char *vpath, char *buf, size_t cap)
{
    struct stat st;
    if (!stat(part, &st) && st.st_size > 0) {
        snprintf(buf, cap, "what arrived is kept in %s and the next `rlxd pull` resumes there", part);
        return buf;
    }
    drop_part(part, vpath);
    return "nothing arrived";
}

int rlx__pull_file(const rlx__pull_ctx *pc, const char *repo, const char *file, const char *dir, rlx_error *err)
{
    char name[RLX_HF_LOCAL_NAME_MAX + 1], final[4096], part[4200], vpath[4300], url[4096], label[300];
    if (rlx_hf_local_name(name, sizeof name, file))
        return rlx_errorf(err, RLX_ERANGE, "%.200s...: the repository path is too long for a local file name", file);
    if (rlx__pull_path(err, final, sizeof final, "%s/%s", dir, name) ||
        rlx__pull_path(err, part, sizeof part, "%s.part", final) ||
        rlx__pull_path(err, vpath, sizeof vpath, "%s.etag", part))
        return err->code;
    rlx__pull_printable(file, label, sizeof label); /* a name from the listing: server text */
    if (is_file(final)) {
        if (!pc->o->quiet) fprintf(stderr, "rlxd pull: %s: already downloaded (%s)\n", label, final);
        return 0;
    }
    if (rlx_hf_file_url(url, sizeof url, pc->endpoint, repo, file))
        return rlx_errorf(err, RLX_ERANGE, "the URL of %.200s is too long", file);
    int retries = pc->o->retries < 0 ? 3 : pc->o->retries, cuts = 0;
    bool restarted = false, changed = false, resumed = false, complete = false;
    /* valid/ifr: the validator and ETag of the response that began the .part (also in an
       earlier run); stated: the sha256 the server stated for it; expect: the size it stated */
    char valid[160] = "", ifr[160] = "", stated[65] = "", fate[4400];
    long long expect = -1;
    struct stat st0;
    if (!stat(part, &st0) && st0.st_size > 0) read_sidecar(vpath, valid, ifr, sizeof valid);
    else unlink(vpath);
    if (!sha_hex(valid, stated)) stated[0] = 0;
    double t0 = now_s();
    for (int attempt = 0;; attempt++) {
        FILE *f = open_own(part, true);
        if (!f) return rlx_errorf(err, RLX_EIO, "cannot write %s: %s", part,
                                  errno == EINVAL ? "not a regular file" : strerror(errno));
        struct stat st;
        uint64_t offset = !fstat(fileno(f), &st) ? (uint64_t)st.st_size : 0;
        if (!attempt) resumed = offset > 0;
        if (offset && !pc->o->quiet)
            fprintf(stderr, "rlxd pull: %s: resuming at %llu bytes (%s)\n", label, (unsigned long long)offset, part);
        xfer x = {.f = f, .offset = offset, .remembered = valid, .vpath = vpath, .cr_start = -1, .cr_total = -1, .limit = -1, .space_for = -1,
                  .label = label, .quiet = pc->o->quiet, .tty = isatty(2) == 1, .decile = offset ? -1 : 0};
        char cerr[CURL_ERROR_SIZE];
        CURLcode rc = perform(pc, url, &x, offset ? ifr : "", cerr);
        if (x.tty && !x.quiet && x.started) fputc('\n', stderr);
        bool werr = fflush(f) != 0;
        werr |= fclose(f) != 0;
        if (x.werrno || werr)
        {
            int e = x.werrno ? x.werrno : errno;
            return rlx_errorf(err, RLX_EIO, "cannot write %s: %s; %s", part, strerror(e),
                              part_fate(part, vpath, fate, sizeof fate));
        }
        if (x.began) {
            snprintf(valid, sizeof valid, "%s", validator(&x));
            snprintf(ifr, sizeof ifr, "%s", x.etag);
            stated[0] = 0;
            resumed = false;
        }
        bool accepted = x.started && !x.not_file && !x.bad_range && !x.changed;
        if (accepted) {
            char s[65];
            if (sha_hex(x.linked, s) || sha_hex(x.etag, s)) memcpy(stated, s, sizeof s);
            expect = x.linked_size >= 0 ? x.linked_size : x.cr_total >= 0 ? x.cr_total
                     : x.code == 200 ? x.clen : -1;
        }
        if (x.overrun[0]) { /* stopped: kept going, it would have filled the disk */
            drop_part(part, vpath);
            return rlx_errorf(err, RLX_EFORMAT, "%s from %s: %s; the download was stopped and removed", label, url,
                              x.overrun);
        }
        if (rc == CURLE_OK && (x.code == 200 || x.code == 206)) break;
        if (rc == CURLE_OK) {
            part_fate(part, vpath, fate, sizeof fate);
            return rlx_errorf(err, RLX_EIO, "%s: the server answered HTTP %ld without the file", url, x.code);
        }
        if (x.changed) {
            char was[80], now[80];
            rlx__pull_printable(valid, was, sizeof was);
            rlx__pull_printable(validator(&x)[0] ? validator(&x) : "none", now, sizeof now);
            drop_part(part, vpath);
            if (changed)
                return rlx_errorf(err, RLX_EIO, "%s: the file changed on the server again during the download (ETag "
                                  "%s, now %s); the partial file was removed, run again later", url, was, now);
            changed = true;
            valid[0] = ifr[0] = stated[0] = 0;
            resumed = false;
            fprintf(stderr, "rlxd pull: %s: the file changed on the server since the partial download began (ETag "
                    "%s, now %s): starting over\n", label, was, now);
            continue;
        }
        if (rc == CURLE_HTTP_RETURNED_ERROR && x.code == 416 && offset) {
            const char *v = validator(&x);
            if (x.cr_total == (long long)offset && !(valid[0] && v[0] && strcmp(v, valid))) {
                /* "bytes * /SIZE" with the .part's size: it is whole (huggingface_hub takes it
                   so too); checked below as any download */
                char s[65];
                if (sha_hex(x.linked, s) || sha_hex(x.etag, s)) memcpy(stated, s, sizeof s);
                expect = x.linked_size >= 0 ? x.linked_size : x.cr_total;
                complete = true;
                if (!pc->o->quiet)
                    fprintf(stderr, "rlxd pull: %s: the partial file is already whole (%llu bytes)\n", label,
                            (unsigned long long)offset);
                break;
            }
            if (!restarted) {
                /* the .part is longer than the file, or of another version: start over */
                restarted = true;
                drop_part(part, vpath);
                valid[0] = ifr[0] = stated[0] = 0;
                resumed = false;
                if (!pc->o->quiet)
                    fprintf(stderr, "rlxd pull: %s: the server refused the resume (416), starting over\n", label);
                continue;
            }
        }
        if (x.bad_range) {
            drop_part(part, vpath);
            return rlx_errorf(err, RLX_EIO, "%s: the server answered the resume at %llu bytes with another range; "
                              "the partial file was removed, run again", url, (unsigned long long)offset);
        }
        if (rc == CURLE_HTTP_RETURNED_ERROR) {
            part_fate(part, vpath, fate, sizeof fate);
            return http_error(err, pc, &x, url, repo);
        }
        if (retryable(rc) && cuts < retries) {
            struct stat st2;
            unsigned long long have = !stat(part, &st2) ? (unsigned long long)st2.st_size : 0;
            cuts++;
            fprintf(stderr, "rlxd pull: %s: connection cut at %llu bytes (%s), resuming (retry %d of %d)\n", label,
                    have, cerr, cuts, retries);
            usleep(200000u * (unsigned)cuts);
            continue;
        }
        const char *why = part_fate(part, vpath, fate, sizeof fate);
        if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_CONNECT) return net_error(err, pc, rc, cerr, url);
        return rlx_errorf(err, RLX_EIO, "download of %s failed: %s; %s", url, cerr, why);
    }
    struct stat st;
    double bytes = !stat(part, &st) ? (double)st.st_size : 0;
    char mib[32];
    fmt_mib(mib, sizeof mib, bytes);
    if (stated[0]) {
        char got[65];
        if (rlx_sha256_file(part, got)) return rlx_errorf(err, RLX_EIO, "cannot read %s: %s", part, strerror(errno));
        if (strcmp(got, stated)) {
            drop_part(part, vpath);
            return rlx_errorf(err, RLX_EFORMAT, "checksum mismatch for %s: the server states sha256 %s, the download "
                              "has %s; the file was removed (run again to download it anew)", label, stated, got);
        }
    } else if (rlx__pull_check_gguf(part, expect, err)) {
        /* nothing vouches for it: an error page, an empty or cut-short answer must not become a
           model every later pull finds "already downloaded" */
        char m[300];
        snprintf(m, sizeof m, "%.299s", err->msg);
        drop_part(part, vpath);
        return rlx_errorf(err, RLX_EFORMAT, "%s from %s: %s (and no sha256 stated): removed", label, url, m);
    }
    if (rename(part, final))
        return rlx_errorf(err, RLX_EIO, "cannot rename %s to %s: %s", part, final, strerror(errno));
    unlink(vpath);
    if (!pc->o->quiet)
        fprintf(stderr, "rlxd pull: %s: %s in %.1f s%s, %s -> %s\n", label, mib, now_s() - t0,
                resumed ? " (resumed)" : complete ? " (found whole)" : "",
                stated[0] ? "sha256 verified" : "not verified (the server states no sha256; a whole GGUF file)", final);
    return 0;
}

int rlx__pull_listing(const rlx__pull_ctx *pc, const char *repo, char ***names, size_t *n, rlx_error *err)
{
    char url[2048], cerr[CURL_ERROR_SIZE];
    if (rlx_hf_api_url(url, sizeof url, pc->endpoint, repo)) return rlx_errorf(err, RLX_ERANGE, "the URL is too long");
    xfer x = {.cr_start = -1, .cr_total = -1, .quiet = true};
    CURLcode rc = perform(pc, url, &x, "", cerr);
    int r = 0;
    if (x.too_big) r = rlx_errorf(err, RLX_EFORMAT, "%s: the repository listing is larger than %u MiB: not a "
                                  "Hugging Face model listing", url, LISTING_MAX >> 20);
    else if (rc == CURLE_HTTP_RETURNED_ERROR) r = http_error(err, pc, &x, url, repo);
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

#else

typedef int rlx__pull_xfer_none; /* without libcurl rlx_pull (pull.c) downloads nothing */

#endif
