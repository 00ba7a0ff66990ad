/* toml_flat.c - flat TOML files (see toml_flat.h). */
#include "server/toml_flat.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

const char *rlx_toml_kind_name(rlx_toml_kind k)
{
    switch (k) {
    case RLX_TOML_STRING: return "a string";
    case RLX_TOML_INT: return "an integer";
    case RLX_TOML_FLOAT: return "a float";
    case RLX_TOML_BOOL: return "a boolean";
    }
    return "a value";
}

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static bool put(buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

typedef struct reader {
    const char *path;
    int line;
    rlx_error *err;
    buf key, val, table;
    char **keys; /* the current table's keys, for duplicates */
    size_t n_keys, cap_keys;
    char **tables; /* tables opened so far */
    size_t n_tables, cap_tables;
} reader;

#define FAIL(x, ...) rlx_errorf((x)->err, RLX_EINVAL, "%s:%d: " __VA_ARGS__)
#define NOMEM(x) rlx_errorf((x)->err, RLX_ENOMEM, "out of memory")

static const char *skip_ws(const char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    return s;
}

/* after a value or header: only blanks and a comment */
static int line_end(reader *x, const char *s, const char *what)
{
    s = skip_ws(s);
    if (*s && *s != '#') return FAIL(x, "unexpected '%.20s' after %s", x->path, x->line, s, what);
    return 0;
}

static bool is_bare(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; }

static bool valid_utf8(const char *s, size_t n)
{
    utf8proc_int32_t cp;
    for (size_t i = 0; i < n;) {
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) return false;
        i += (size_t)k;
    }
    return true;
}

/* A string at *sp (its opening quote) into out; *sp moves past the closing quote. */
static int read_string(reader *x, const char **sp, buf *out)
{
    const char *s = *sp;
    char q = *s++;
    out->n = 0;
    if (!put(out, "", 0)) return NOMEM(x);
    if (s[0] == q && s[1] == q) return FAIL(x, "multi-line strings are not supported in a profile", x->path, x->line);
    for (;;) {
        unsigned char c = (unsigned char)*s;
        if (!c) return FAIL(x, "unterminated string", x->path, x->line);
        if (c == (unsigned char)q) break;
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return FAIL(x, "control character 0x%02x in a string (escape it)", x->path, x->line, c);
        if (c != '\\' || q == '\'') {
            const char *run = s;
            while (*s && *s != q && (q == '\'' || *s != '\\') && ((unsigned char)*s >= 0x20 || *s == '\t') &&
                   *s != 0x7f)
                s++;
            if (!put(out, run, (size_t)(s - run))) return NOMEM(x);
            continue;
        }
        char e = s[1];
        const char *rep = NULL;
        switch (e) {
        case 'b': rep = "\b"; break;
        case 't': rep = "\t"; break;
        case 'n': rep = "\n"; break;
        case 'f': rep = "\f"; break;
        case 'r': rep = "\r"; break;
        case '"': rep = "\""; break;
        case '\\': rep = "\\"; break;
        case 'u': case 'U': {
            int nd = e == 'u' ? 4 : 8;
            long cp = 0;
            for (int i = 0; i < nd; i++) {
                char h = s[2 + i];
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0) return FAIL(x, "\\%c needs %d hex digits", x->path, x->line, e, nd);
                cp = cp * 16 + d;
            }
            if (cp == 0 || cp > 0x10ffff || !utf8proc_codepoint_valid((utf8proc_int32_t)cp))
                return FAIL(x, "\\%c%.*s is not a character a profile can hold", x->path, x->line, e, nd, s + 2);
            utf8proc_uint8_t u[4];
            utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)cp, u);
            if (!put(out, (const char *)u, (size_t)k)) return NOMEM(x);
            s += 2 + nd;
            continue;
        }
        default: return FAIL(x, "unknown escape '\\%c' in a string", x->path, x->line, e ? e : ' ');
        }
        if (!put(out, rep, 1)) return NOMEM(x);
        s += 2;
    }
    if (!valid_utf8(out->p, out->n)) return FAIL(x, "a string that is not UTF-8", x->path, x->line);
    *sp = s + 1;
    return 0;
}

/* A key (bare or quoted) at *sp into out. */
static int read_key(reader *x, const char **sp, buf *out, const char *what)
{
    const char *s = *sp;
    if (*s == '"' || *s == '\'') {
        int rc = read_string(x, &s, out);
        if (rc) return rc;
    } else {
        const char *b = s;
        while (is_bare(*s)) s++;
        if (s == b) return FAIL(x, "expected %s, got '%.20s'", x->path, x->line, what, b);
        out->n = 0;
        if (!put(out, b, (size_t)(s - b))) return NOMEM(x);
    }
    s = skip_ws(s);
    if (*s == '.') return FAIL(x, "dotted keys and table names are not supported in a profile", x->path, x->line);
    *sp = s;
    return 0;
}

/* digits with single underscores between them, appended to out without the underscores: 1,
 * 0 when there are none or an underscore is misplaced, RLX_ENOMEM */
static int digits(const char **sp, buf *out, int base)
{
    const char *s = *sp;
    bool any = false, under = false;
    for (;; s++) {
        char c = *s;
        int d = rlx_hex_value(c);
        if (c == '_') {
            if (!any || under) return 0;
            under = true;
            continue;
        }
        if (d < 0 || d >= base) break;
        if (!put(out, s, 1)) return RLX_ENOMEM;
        any = true;
        under = false;
    }
    *sp = s;
    return any && !under;
}

/* A number or boolean at *sp: its kind, and its text (decimal for integers) in out. */
static int read_scalar(reader *x, const char **sp, buf *out, rlx_toml_kind *kind)
{
    const char *s = *sp, *start = s;
    out->n = 0;
    if (!put(out, "", 0)) return NOMEM(x);
    for (int b = 0; b < 2; b++) {
        const char *w = b ? "false" : "true";
        size_t n = strlen(w);
        if (strncmp(s, w, n) || is_bare(s[n])) continue;
        if (!put(out, w, n)) return NOMEM(x);
        *kind = RLX_TOML_BOOL;
        *sp = s + n;
        return 0;
    }
    if (*s == '[' || *s == '{')
        return FAIL(x, "%s are not supported in a profile", x->path, x->line, *s == '[' ? "arrays" : "inline tables");
    bool sign = *s == '+' || *s == '-';
    if (sign && !put(out, s++, 1)) return NOMEM(x);
    if ((!strncmp(s, "inf", 3) || !strncmp(s, "nan", 3)) && !is_bare(s[3])) {
        *kind = RLX_TOML_FLOAT;
        if (!put(out, s, 3)) return NOMEM(x);
        *sp = s + 3;
        return 0;
    }
    if (!sign && s[0] == '0' && (s[1] == 'x' || s[1] == 'o' || s[1] == 'b')) {
        int base = s[1] == 'x' ? 16 : s[1] == 'o' ? 8 : 2;
        s += 2;
        buf d = {0};
        int ok = digits(&s, &d, base);
        if (ok < 0) {
            free(d.p);
            return NOMEM(x);
        }
        if (!ok || is_bare(*s) || *s == '.') {
            free(d.p);
            return FAIL(x, "bad integer '%.20s'", x->path, x->line, start);
        }
        errno = 0;
        unsigned long long v = strtoull(d.p, NULL, base);
        free(d.p);
        if (errno || v > INT64_MAX) return FAIL(x, "integer '%.20s' is out of range", x->path, x->line, start);
        char num[32];
        snprintf(num, sizeof num, "%llu", v);
        out->n = 0;
        *kind = RLX_TOML_INT;
        if (!put(out, num, strlen(num))) return NOMEM(x);
        *sp = s;
        return 0;
    }
    const char *int_start = s;
    int ok = digits(&s, out, 10);
    if (ok <= 0) goto bad;
    if (!sign && (*s == '-' || *s == ':'))
        return FAIL(x, "dates and times are not supported in a profile", x->path, x->line);
    if (*int_start == '0' && s - int_start > 1) return FAIL(x, "leading zeros in '%.20s'", x->path, x->line, start);
    *kind = RLX_TOML_INT;
    if (*s == '.') {
        s++;
        if (!put(out, ".", 1)) return NOMEM(x);
        if ((ok = digits(&s, out, 10)) <= 0) goto bad;
        *kind = RLX_TOML_FLOAT;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (!put(out, "e", 1)) return NOMEM(x);
        if ((*s == '+' || *s == '-') && !put(out, s++, 1)) return NOMEM(x);
        if ((ok = digits(&s, out, 10)) <= 0) goto bad;
        *kind = RLX_TOML_FLOAT;
    }
    if (is_bare(*s) || *s == ':' || *s == '.') goto bad;
    *sp = s;
    return 0;
bad:
    if (ok < 0) return NOMEM(x);
    return FAIL(x, "expected a value (a string in quotes, a number or true/false), got '%.20s'", x->path, x->line, start);
}

static int remember(reader *x, char ***v, size_t *n, size_t *cap, const char *s)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        char **p = realloc(*v, c * sizeof *p);
        if (!p) return NOMEM(x);
        *v = p;
        *cap = c;
    }
    if (!((*v)[*n] = strdup(s))) return NOMEM(x);
    (*n)++;
    return 0;
}

static bool seen(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], s)) return true;
    return false;
}

static int one_line(reader *x, const char *s, rlx_toml_key_fn fn, void *user)
{
    s = skip_ws(s);
    if (!*s || *s == '#') return 0;
    if (*s == '[') {
        if (s[1] == '[') return FAIL(x, "arrays of tables are not supported in a profile", x->path, x->line);
        s = skip_ws(s + 1);
        int rc = read_key(x, &s, &x->table, "a table name");
        if (rc) return rc;
        if (*s != ']') return FAIL(x, "expected ']' after the table name", x->path, x->line);
        if ((rc = line_end(x, s + 1, "a table header"))) return rc;
        if (seen(x->tables, x->n_tables, x->table.p))
            return FAIL(x, "table [%s] opened twice", x->path, x->line, x->table.p);
        for (size_t i = 0; i < x->n_keys; i++) free(x->keys[i]);
        x->n_keys = 0;
        return remember(x, &x->tables, &x->n_tables, &x->cap_tables, x->table.p);
    }
    int rc = read_key(x, &s, &x->key, "a key");
    if (rc) return rc;
    if (*s != '=') return FAIL(x, "expected '=' after the key '%s'", x->path, x->line, x->key.p);
    s = skip_ws(s + 1);
    rlx_toml_kind kind = RLX_TOML_STRING;
    if (!*s || *s == '#') return FAIL(x, "the key '%s' has no value", x->path, x->line, x->key.p);
    rc = *s == '"' || *s == '\'' ? read_string(x, &s, &x->val) : read_scalar(x, &s, &x->val, &kind);
    if (rc || (rc = line_end(x, s, "the value"))) return rc;
    if (seen(x->keys, x->n_keys, x->key.p))
        return FAIL(x, "the key '%s' is given twice", x->path, x->line, x->key.p);
    if ((rc = remember(x, &x->keys, &x->n_keys, &x->cap_keys, x->key.p))) return rc;
    char src[4200];
    snprintf(src, sizeof src, "%s:%d", x->path, x->line);
    return fn(user, x->table.p ? x->table.p : "", x->key.p, kind, x->val.p, src, x->err);
}

int rlx_toml_flat_read(FILE *f, const char *path, rlx_toml_key_fn fn, void *user, rlx_error *err)
{
    reader x = {.path = path, .err = err};
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    while (!rc && (n = getline(&line, &cap, f)) >= 0) {
        x.line++;
        if (n && line[n - 1] == '\n') line[--n] = 0;
        if (n && line[n - 1] == '\r') line[--n] = 0;
        if (strlen(line) != (size_t)n) rc = FAIL(&x, "a NUL byte in the file", path, x.line);
        else if (x.line == 1 && !strncmp(line, "\xef\xbb\xbf", 3)) rc = one_line(&x, line + 3, fn, user);
        else rc = one_line(&x, line, fn, user);
    }
    if (!rc && ferror(f)) rc = rlx_errorf(err, RLX_EIO, "%s: read error", path);
    free(line);
    for (size_t i = 0; i < x.n_keys; i++) free(x.keys[i]);
    for (size_t i = 0; i < x.n_tables; i++) free(x.tables[i]);
    free(x.keys);
    free(x.tables);
    free(x.key.p);
    free(x.val.p);
    free(x.table.p);
    return rc;
}
