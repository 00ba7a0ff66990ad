/* rlx.h - error codes and the error record shared by every layer.
 *
 * Functions that can fail return int: 0 on success, a negative RLX_E* code on failure, and
 * (when given a non-NULL rlx_error) fill it with a sentence a user can act on. Library code
 * never prints to stdout and never calls exit(). */
#ifndef RLX_H
#define RLX_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

enum {
    RLX_OK = 0,
    RLX_EINVAL = -1,      /* bad argument or bad user input */
    RLX_ENOMEM = -2,      /* allocation failed */
    RLX_EIO = -3,         /* file or socket I/O failed */
    RLX_EFORMAT = -4,     /* malformed file contents */
    RLX_EUNSUPPORTED = -5,/* valid but not implemented (unknown arch, tensor type, ...) */
    RLX_ENOTFOUND = -6,   /* key, tensor, model or session absent */
    RLX_ERANGE = -7,      /* value out of the accepted range */
    RLX_EFULL = -8,       /* queue or pool full: retry later */
    RLX_ECANCELED = -9,   /* the request was cancelled */
    RLX_ETOOLONG = -10,   /* request can never fit (context or KV pool) */
};

typedef struct rlx_error {
    int code;            /* last RLX_E* code, 0 if none */
    char msg[512];       /* NUL-terminated human message */
} rlx_error;

/* Formats msg into err (if non-NULL) and returns code, so callers can `return rlx_errorf(...)`. */
int rlx_errorf(rlx_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *rlx_strerror(int code);

#define RLX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
/* the value of a hexadecimal digit, -1 for any other character */
static inline int rlx_hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}
#define RLX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define RLX_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Monotonic time in seconds. */
double rlx_now(void);

/* Copies s into out (cap > 0 bytes, always NUL-terminated) so that text a client chose (a path,
 * a model name, a session id) can go into a one-line log without forging lines or reaching the
 * terminal as control sequences. text: control bytes, DEL, C1 controls, ' ', '"' and '\\' are
 * escaped (\n, \r, \t, \", \\, else \xNN) as are bytes that are not valid UTF-8; otherwise
 * (for a JSON encoder, which escapes the rest itself) only the invalid UTF-8 bytes are. Text that
 * does not fit is cut (never inside an escape or a character) and ends with "...". Returns out. */
const char *rlx_log_escape(const char *s, bool text, char *out, size_t cap);

/* A new file beside `path`, named path.XXXXXX by mkstemp (so no other writer, in this process or
 * another, has it: two models of one daemon may save the same cache file at once), open for
 * writing with permissions `mode`; its name into tmp (cap > 0 bytes), for the caller to rename over
 * `path` once complete (or unlink). NULL with errno set and tmp "" when it cannot be made. */
FILE *rlx_tmpfile_beside(const char *path, mode_t mode, char *tmp, size_t cap);

/* Creates the folder `dir` and those above it that are missing (as `mkdir -p`), each new one with
 * permissions `mode`; folders that exist are left as they are. 0, or -1 with errno set
 * (ENAMETOOLONG past PATH_MAX, ENOTDIR where a file stands in the way, EACCES, ...). For the
 * caches under $XDG_CACHE_HOME, which need not exist (a container's fresh volume). */
int rlx_mkdirs(const char *dir, mode_t mode);

/* rlx_mkdirs for the folder that will hold the file `file` (its path up to the last '/'; nothing
 * to make for a bare name or one in the root). 0, or -1 with errno set as rlx_mkdirs does. */
int rlx_mkdirs_for(const char *file, mode_t mode);

#endif
