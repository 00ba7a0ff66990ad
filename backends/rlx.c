/* rlx.c - error formatting and small shared helpers. */
#include "backends/rlx.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int rlx_errorf(rlx_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

const char *rlx_strerror(int code)
{
    switch (code) {
    case RLX_OK: return "ok";
    case RLX_EINVAL: return "invalid argument";
    case RLX_ENOMEM: return "out of memory";
    case RLX_EIO: return "I/O error";
    case RLX_EFORMAT: return "malformed file";
    case RLX_EUNSUPPORTED: return "unsupported";
    case RLX_ENOTFOUND: return "not found";
    case RLX_ERANGE: return "out of range";
    case RLX_EFULL: return "full";
    case RLX_ECANCELED: return "cancelled";
    case RLX_ETOOLONG: return "too long";
    default: return "unknown error";
    }
}

double rlx_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Length of the valid UTF-8 sequence at s (1..4), 0 when s does not start one. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!n || (n == 2 && c < 0xc2) || c > 0xf4) return n == 1 ? 1 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))) return 0; /* overlong, surrogate */
    if (n == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))) return 0; /* overlong, > U+10FFFF */
    return n;
}

const char *rlx_log_escape(const char *s, bool text, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, fit = 0; /* fit: the last unit boundary with room for "..." after it */
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        char esc[8];
        size_t n = utf8_len(p), k;
        bool c1 = n == 2 && p[0] == 0xc2 && p[1] < 0xa0; /* U+0080..U+009F */
        if (!n || (text && (c1 || *p < 0x20 || *p == 0x7f || *p == ' ' || *p == '"' || *p == '\\'))) {
            unsigned char c = *p;
            esc[0] = '\\';
            if (text && (c == '"' || c == '\\')) { esc[1] = (char)c; k = 2; }
            else if (text && c == '\n') { esc[1] = 'n'; k = 2; }
            else if (text && c == '\r') { esc[1] = 'r'; k = 2; }
            else if (text && c == '\t') { esc[1] = 't'; k = 2; }
            else { esc[1] = 'x'; esc[2] = hex[c >> 4]; esc[3] = hex[c & 15]; k = 4; }
            if (c1) { /* both bytes of the C1 control */
                esc[4] = '\\'; esc[5] = 'x'; esc[6] = hex[p[1] >> 4]; esc[7] = hex[p[1] & 15]; k = 8;
            }
            n = c1 ? 2 : 1;
        } else {
            memcpy(esc, p, n);
            k = n;
        }
        if (o + 4 <= cap) fit = o;
        if (o + k + 1 > cap) { /* cut at a boundary: "..." replaces what does not fit */
            o = fit;
            if (o + 4 <= cap) { memcpy(out + o, "...", 3); o += 3; }
            break;
        }
        memcpy(out + o, esc, k);
        o += k;
        p += n;
    }
    if (cap) out[o < cap ? o : cap - 1] = 0;
    return out;
}

FILE *rlx_tmpfile_beside(const char *path, mode_t mode, char *tmp, size_t cap)
{
    if ((size_t)snprintf(tmp, cap, "%s.XXXXXX", path) >= cap) {
        tmp[0] = 0;
        errno = ENAMETOOLONG;
        return NULL;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        tmp[0] = 0;
        return NULL;
    }
    FILE *f = fchmod(fd, mode) ? NULL : fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        tmp[0] = 0;
        errno = e;
    }
    return f;
}

int rlx_mkdirs(const char *dir, mode_t mode)
{
    char p[PATH_MAX];
    size_t n = strlen(dir);
    if (n >= sizeof p) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(p, dir, n + 1);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/' || s[-1] == '/') continue;
        *s = 0;
        const int r = mkdir(p, mode);
        *s = '/';
        if (r && errno != EEXIST) return -1;
    }
    if (!mkdir(p, mode)) return 0;
    if (errno != EEXIST) return -1;
    struct stat st;
    if (stat(p, &st)) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int rlx_mkdirs_for(const char *file, mode_t mode)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s", file) >= (int)sizeof dir) {
        errno = ENAMETOOLONG;
        return -1;
    }
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0; /* the working folder or the root: there already */
    *slash = 0;
    return rlx_mkdirs(dir, mode);
}
