/* jinja_methods.c - Python methods on str, dict and list values as the immutable sandbox allows
 * them (mutating methods such as list.append fail like Jinja2's SecurityError), loop.cycle,
 * and the globals: range, namespace, dict, raise_exception, strftime_now. */
#include "models/jinja_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static bool is(const char *name, size_t n, const char *s) { return strlen(s) == n && !memcmp(name, s, n); }

static rj_value str_arg(rj_rt *rt, const rj_args *a, int idx, const char *method)
{
    const rj_value *v = rlx__j_arg(a, idx, NULL);
    if (!v || v->type != RJ_STR) rlx__j_fail(rt, RLX_EINVAL, "str.%s() needs a string argument", method);
    return *v;
}

/* An optional integer argument: absent or None gives dflt; another type is Python's TypeError. */
static int64_t opt_int(rj_rt *rt, const rj_value *v, int64_t dflt, const char *what)
{
    if (!v || v->type == RJ_NONE) return dflt;
    if (v->type == RJ_INT) return v->i;
    if (v->type == RJ_BOOL) return v->b;
    if (!strcmp(what, "slice indices"))
        rlx__j_fail(rt, RLX_EINVAL, "slice indices must be integers or None or have an __index__ method");
    rlx__j_fail(rt, RLX_EINVAL, "'%s' object cannot be interpreted as an integer (%s)", rlx__j_type_name(*v), what);
}

/* An optional str argument (None: absent). */
static const rj_value *opt_str(rj_rt *rt, const rj_value *v, const char *method)
{
    if (!v || v->type == RJ_NONE) return NULL;
    if (v->type != RJ_STR) rlx__j_fail(rt, RLX_EINVAL, "str.%s(): must be str or None, not %s", method, rlx__j_type_name(*v));
    return v;
}

/* Python's s.find(sub, start, end) window: [start, end) in code points, negative ones counted
 * from the end, clamped; false when the window is empty for sub (end - start < 0). */
static bool window(rj_rt *rt, rj_value s, const rj_args *a, int64_t *lo, int64_t *hi)
{
    int64_t len = (int64_t)rlx__j_utf8_len(s.s.p, s.s.n);
    *lo = opt_int(rt, rlx__j_arg(a, 1, NULL), 0, "slice indices");
    *hi = opt_int(rt, rlx__j_arg(a, 2, NULL), len, "slice indices");
    if (*lo < 0) *lo = RLX_MAX(*lo + len, 0);
    if (*hi < 0) *hi = RLX_MAX(*hi + len, 0);
    if (*hi > len) *hi = len;
    return *hi >= *lo;
}

static bool prefix_match(rj_value s, rj_value p, bool suffix)
{
    if (p.s.n > s.s.n) return false;
    return !memcmp(suffix ? s.s.p + s.s.n - p.s.n : s.s.p, p.s.p, p.s.n);
}

static bool starts_ends(rj_rt *rt, rj_value s, const rj_args *a, bool suffix)
{
    const char *m = suffix ? "endswith" : "startswith";
    const rj_value *p = rlx__j_arg(a, 0, NULL);
    if (!p) rlx__j_fail(rt, RLX_EINVAL, "%s() takes at least 1 argument (0 given)", m);
    /* start and end slice the string first, as s[start:end].startswith(prefix); a window
     * that starts past its end matches nothing, not even "" */
    int64_t lo, hi;
    if (!window(rt, s, a, &lo, &hi)) return false;
    s = rlx__j_slice(rt, s, rj_int(lo), rj_int(hi), rj_none());
    if (p->type == RJ_LIST && p->tuple && !p->view) {
        for (size_t i = 0; i < p->l->n; i++) {
            if (p->l->v[i].type != RJ_STR)
                rlx__j_fail(rt, RLX_EINVAL, "tuple for %s must only contain str, not %s", m, rlx__j_type_name(p->l->v[i]));
            if (prefix_match(s, p->l->v[i], suffix)) return true;
        }
        return false;
    }
    if (p->type != RJ_STR)
        rlx__j_fail(rt, RLX_EINVAL, "%s first arg must be str or a tuple of str, not %s", m, rlx__j_type_name(*p));
    return prefix_match(s, *p, suffix);
}

/* n bytes reversed, in the render's arena. */
static char *reversed(rj_rt *rt, const char *s, size_t n)
{
    char *r = rlx__j_alloc(rt, n + 1);
    for (size_t i = 0; i < n; i++) r[i] = s[n - 1 - i];
    return r;
}

/* The last occurrence of p (m > 0 bytes) in s[0, n), NULL if none: the first one in the
 * reversed texts, found by memmem (linear; a comparison at every position from the end took
 * n x m: rfind of a 10M needle in a 20M string ran for minutes, past the render's deadline). */
static const char *last_in(rj_rt *rt, const char *s, size_t n, const char *p, size_t m)
{
    if (m > n) return NULL;
    const char *rs = reversed(rt, s, n), *rp = reversed(rt, p, m);
    const char *hit = memmem(rs, n, rp, m);
    return hit ? s + (n - (size_t)(hit - rs) - m) : NULL;
}

static int64_t find(rj_rt *rt, rj_value s, rj_value sub, bool from_right)
{
    if (sub.s.n > s.s.n) return -1;
    const char *hit = NULL;
    if (!from_right) hit = memmem(s.s.p, s.s.n, sub.s.p, sub.s.n);
    else hit = sub.s.n ? last_in(rt, s.s.p, s.s.n, sub.s.p, sub.s.n) : s.s.p + s.s.n;
    if (!hit) return -1;
    return (int64_t)rlx__j_utf8_len(s.s.p, (size_t)(hit - s.s.p));
}

/* str.rsplit with a limit: split from the right, at most maxsplit times */
static rj_value rsplit(rj_rt *rt, rj_value s, const rj_value *sep, int64_t maxsplit)
{
    rj_value parts = rlx__j_new_list(rt, 0); /* collected right to left */
    size_t end = s.s.n;
    int64_t done = 0;
    if (!sep) {
        /* the words as split() finds them (whitespace code points, not bytes: 'à' ends in 0xa0,
           which alone is U+00A0), the last maxsplit of them apart; the rest keeps its leading
           whitespace */
        rj_value w = rlx__j_split(rt, s, NULL, -1);
        const size_t k = w.l->n;
        if ((uint64_t)maxsplit + 1 >= k) return w;
        rj_value out = rlx__j_new_list(rt, (size_t)maxsplit + 1);
        const rj_value last = w.l->v[k - (size_t)maxsplit - 1];
        rlx__j_list_push(rt, out.l, rj_str(s.s.p, (size_t)(last.s.p - s.s.p) + last.s.n));
        for (size_t i = k - (size_t)maxsplit; i < k; i++) rlx__j_list_push(rt, out.l, w.l->v[i]);
        return out;
    } else {
        if (!sep->s.n) rlx__j_fail(rt, RLX_EINVAL, "rsplit(): empty separator");
        /* the occurrences from the right are those of the reversed separator, left to right, in
           the reversed text (one linear pass) */
        const char *rs = reversed(rt, s.s.p, s.s.n), *rp = reversed(rt, sep->s.p, sep->s.n);
        for (;;) {
            const char *hit = NULL;
            if (done < maxsplit && sep->s.n <= end) {
                const char *r = memmem(rs + (s.s.n - end), end, rp, sep->s.n);
                if (r) hit = s.s.p + (s.s.n - (size_t)(r - rs) - sep->s.n);
            }
            if (!hit) {
                rlx__j_list_push(rt, parts.l, rj_str(s.s.p, end));
                break;
            }
            size_t at = (size_t)(hit - s.s.p);
            rlx__j_list_push(rt, parts.l, rj_str(s.s.p + at + sep->s.n, end - at - sep->s.n));
            end = at;
            done++;
        }
    }
    rj_value out = rlx__j_new_list(rt, parts.l->n);
    for (size_t i = parts.l->n; i-- > 0;) rlx__j_list_push(rt, out.l, parts.l->v[i]);
    return out;
}

/* Each implemented str method's arguments as CPython binds them: at least min and at most max
 * positional ones (-1: any), and the names it takes by keyword (NULL: none, the method is
 * positional-only). An argument Python refuses with TypeError fails the render (was ignored). */
static const struct { const char *type, *name; int min, max; const char *kw; } k_params[] = {
    {"str", "strip", 0, 1, NULL}, {"str", "lstrip", 0, 1, NULL}, {"str", "rstrip", 0, 1, NULL}, {"str", "split", 0, 2, "sep,maxsplit"},
    {"str", "rsplit", 0, 2, "sep,maxsplit"}, {"str", "partition", 1, 1, NULL}, {"str", "rpartition", 1, 1, NULL},
    {"str", "startswith", 1, 3, NULL}, {"str", "endswith", 1, 3, NULL}, {"str", "replace", 2, 3, NULL}, {"str", "format", 0, -1, "*"},
    {"str", "format_map", 1, 1, NULL}, {"str", "expandtabs", 0, 1, "tabsize"}, {"str", "find", 1, 3, NULL}, {"str", "rfind", 1, 3, NULL},
    {"str", "index", 1, 3, NULL}, {"str", "rindex", 1, 3, NULL}, {"str", "count", 1, 3, NULL}, {"str", "join", 1, 1, NULL},
    {"str", "splitlines", 0, 1, "keepends"}, {"str", "removeprefix", 1, 1, NULL}, {"str", "removesuffix", 1, 1, NULL},
    {"str", "zfill", 1, 1, NULL}, {"str", "ljust", 1, 2, NULL}, {"str", "rjust", 1, 2, NULL}, {"str", "center", 1, 2, NULL},
    {"dict", "get", 1, 2, NULL}, {"dict", "items", 0, 0, NULL}, {"dict", "keys", 0, 0, NULL},
    {"dict", "values", 0, 0, NULL}, {"dict", "copy", 0, 0, NULL}, {"list", "index", 1, 3, NULL},
    {"list", "count", 1, 1, NULL}, {"list", "copy", 0, 0, NULL}, {"tuple", "index", 1, 3, NULL},
    {"tuple", "count", 1, 1, NULL},
};

static void check_args(rj_rt *rt, const char *type, const char *m, size_t n, const rj_args *a)
{
    int min = 0, max = strcmp(type, "str") ? -1 : 0; /* the str methods not listed take no arguments */
    const char *kw = strcmp(type, "str") ? "*" : NULL;
    for (size_t i = 0; i < RLX_ARRAY_LEN(k_params); i++)
        if (!strcmp(type, k_params[i].type) && is(m, n, k_params[i].name))
            min = k_params[i].min, max = k_params[i].max, kw = k_params[i].kw;
    int nm = (int)RLX_MIN(n, (size_t)60);
    if (kw && !strcmp(kw, "*")) return;
    if (a->nkw && !kw) rlx__j_fail(rt, RLX_EINVAL, "%s.%.*s() takes no keyword arguments", type, nm, m);
    size_t given = a->npos + a->nkw;
    if (max == 0 && given) rlx__j_fail(rt, RLX_EINVAL, "%s.%.*s() takes no arguments (%zu given)", type, nm, m, given);
    if (min == max && (int)given != min)
        rlx__j_fail(rt, RLX_EINVAL, "%s.%.*s() takes exactly %s argument%s (%zu given)", type, nm, m, min == 1 ? "one" : "two",
                    min == 1 ? "" : "s", given);
    if (max >= 0 && (int)a->npos > max)
        rlx__j_fail(rt, RLX_EINVAL, "%s.%.*s() takes at most %d argument%s (%zu given)", type, nm, m, max, max == 1 ? "" : "s", a->npos);
    if ((int)given < min)
        rlx__j_fail(rt, RLX_EINVAL, "%s.%.*s() takes at least %d argument%s (%zu given)", type, nm, m, min, min == 1 ? "" : "s", given);
    for (size_t k = 0; k < a->nkw; k++) { /* a name it takes, not also given by position */
        size_t pos = 0;
        const char *p = kw;
        for (; *p; pos++) {
            size_t l = strcspn(p, ",");
            if (l == a->kwl[k] && !memcmp(p, a->kwn[k], l)) break;
            p += l + (p[l] == ',');
        }
        if (!*p)
            rlx__j_fail(rt, RLX_EINVAL, "%s.%.*s() got an unexpected keyword argument '%.*s'", type, nm, m,
                        (int)RLX_MIN(a->kwl[k], (size_t)60), a->kwn[k]);
        if (pos < a->npos)
            rlx__j_fail(rt, RLX_EINVAL, "argument for %s.%.*s() given by name ('%.*s') and position (%zu)", type, nm, m,
                        (int)RLX_MIN(a->kwl[k], (size_t)60), a->kwn[k], pos + 1);
    }
}

static rj_value str_method(rj_env *E, rj_value s, const char *m, size_t n, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    check_args(rt, "str", m, n, a);
    if (is(m, n, "strip") || is(m, n, "lstrip") || is(m, n, "rstrip")) {
        const rj_value *c = opt_str(rt, rlx__j_arg(a, 0, NULL), "strip");
        return rlx__j_strip(rt, s, c, m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3);
    }
    if (is(m, n, "split") || is(m, n, "rsplit")) {
        const rj_value *sep = opt_str(rt, rlx__j_arg(a, 0, "sep"), "split");
        int64_t maxsplit = opt_int(rt, rlx__j_arg(a, 1, "maxsplit"), -1, "maxsplit");
        if (m[0] == 'r' && maxsplit >= 0) return rsplit(rt, s, sep, maxsplit);
        return rlx__j_split(rt, s, sep, maxsplit);
    }
    if (is(m, n, "partition") || is(m, n, "rpartition")) {
        rj_value sep = str_arg(rt, a, 0, "partition");
        if (!sep.s.n) rlx__j_fail(rt, RLX_EINVAL, "str.partition(): empty separator");
        const char *hit = NULL;
        if (m[0] == 'p') hit = memmem(s.s.p, s.s.n, sep.s.p, sep.s.n);
        else hit = last_in(rt, s.s.p, s.s.n, sep.s.p, sep.s.n);
        rj_value t = rlx__j_new_list(rt, 3);
        t.tuple = 1;
        if (!hit) {
            rj_value e = rj_str("", 0);
            rlx__j_list_push(rt, t.l, m[0] == 'p' ? s : e);
            rlx__j_list_push(rt, t.l, e);
            rlx__j_list_push(rt, t.l, m[0] == 'p' ? e : s);
            return t;
        }
        size_t at = (size_t)(hit - s.s.p);
        rlx__j_list_push(rt, t.l, rj_str(s.s.p, at));
        rlx__j_list_push(rt, t.l, sep);
        rlx__j_list_push(rt, t.l, rj_str(s.s.p + at + sep.s.n, s.s.n - at - sep.s.n));
        return t;
    }
    if (is(m, n, "startswith")) return rj_bool(starts_ends(rt, s, a, false));
    if (is(m, n, "endswith")) return rj_bool(starts_ends(rt, s, a, true));
    static const struct { const char *name; int mode; } cases[] = {
        {"upper", CASE_UPPER}, {"lower", CASE_LOWER}, {"title", CASE_TITLE_PY}, {"capitalize", CASE_CAPITALIZE},
        {"swapcase", CASE_SWAP}, {"casefold", CASE_FOLD}};
    for (size_t i = 0; i < RLX_ARRAY_LEN(cases); i++)
        if (is(m, n, cases[i].name)) return rlx__j_case(rt, s, cases[i].mode);
    static const struct { const char *name; int what; } preds[] = {
        {"islower", STR_ISLOWER}, {"isupper", STR_ISUPPER}, {"istitle", STR_ISTITLE}, {"isalpha", STR_ISALPHA},
        {"isdigit", STR_ISDIGIT}, {"isdecimal", STR_ISDECIMAL}, {"isnumeric", STR_ISNUMERIC}, {"isalnum", STR_ISALNUM},
        {"isspace", STR_ISSPACE}, {"isascii", STR_ISASCII}, {"isprintable", STR_ISPRINTABLE}, {"isidentifier", STR_ISIDENTIFIER}};
    for (size_t i = 0; i < RLX_ARRAY_LEN(preds); i++)
        if (is(m, n, preds[i].name)) return rj_bool(rlx__j_str_is(s, preds[i].what));
    if (is(m, n, "replace")) {
        int64_t count = opt_int(rt, rlx__j_arg(a, 2, NULL), -1, "count");
        return rlx__j_replace(rt, s, str_arg(rt, a, 0, "replace"), str_arg(rt, a, 1, "replace"), count);
    }
    if (is(m, n, "format")) {
        rj_value kw = rlx__j_new_dict(rt, a->nkw);
        for (size_t i = 0; i < a->nkw; i++) rlx__j_dict_set(rt, kw.d, rj_str(a->kwn[i], a->kwl[i]), a->kwv[i]);
        return rlx__j_str_format(E, s, a->pos, a->npos, a->nkw ? &kw : NULL);
    }
    if (is(m, n, "format_map")) { /* the sandbox's wrapper: kwargs = args[0] */
        if (a->nkw) rlx__j_fail(rt, RLX_EINVAL, "format_map() takes no keyword arguments");
        if (a->npos != 1) rlx__j_fail(rt, RLX_EINVAL, "format_map() takes exactly one argument (%zu given)", a->npos);
        return rlx__j_str_format(E, s, NULL, 0, &a->pos[0]);
    }
    if (is(m, n, "expandtabs")) {
        const rj_value *ts = rlx__j_arg(a, 0, "tabsize");
        if (ts && ts->type == RJ_NONE) rlx__j_fail(rt, RLX_EINVAL, "'NoneType' object cannot be interpreted as an integer");
        int64_t tab = opt_int(rt, ts, 8, "tabsize");
        rj_buf b = {0};
        rlx__j_buf_put(rt, &b, "", 0);
        int64_t col = 0;
        for (size_t i = 0; i < s.s.n; i++) {
            char c = s.s.p[i];
            if (c == '\t') {
                int64_t k = tab > 0 ? tab - col % tab : 0;
                for (int64_t j = 0; j < k; j++) rlx__j_buf_puts(rt, &b, " ");
                col += k;
            } else {
                rlx__j_buf_put(rt, &b, &c, 1);
                if (c == '\n' || c == '\r') col = 0;
                else if (((unsigned char)c & 0xc0) != 0x80) col++;
            }
        }
        return rj_str(b.p, b.n);
    }
    if (is(m, n, "find") || is(m, n, "rfind") || is(m, n, "index") || is(m, n, "rindex")) {
        rj_value sub = str_arg(rt, a, 0, "find");
        int64_t lo, hi, r = -1;
        if (window(rt, s, a, &lo, &hi)) {
            r = find(rt, rlx__j_slice(rt, s, rj_int(lo), rj_int(hi), rj_none()), sub, m[0] == 'r');
            if (r >= 0) r += lo;
        }
        if (r < 0 && (m[0] == 'i' || (m[0] == 'r' && m[1] == 'i'))) rlx__j_fail(rt, RLX_EINVAL, "substring not found"); /* index, rindex */
        return rj_int(r);
    }
    if (is(m, n, "count")) {
        rj_value sub = str_arg(rt, a, 0, "count");
        int64_t lo, hi;
        if (!window(rt, s, a, &lo, &hi)) return rj_int(0);
        s = rlx__j_slice(rt, s, rj_int(lo), rj_int(hi), rj_none());
        if (!sub.s.n) return rj_int(hi - lo + 1);
        int64_t c = 0;
        for (const char *p = s.s.p, *e = s.s.p + s.s.n; (p = memmem(p, (size_t)(e - p), sub.s.p, sub.s.n)); p += sub.s.n) c++;
        return rj_int(c);
    }
    if (is(m, n, "join")) {
        const rj_value *it = rlx__j_arg(a, 0, NULL);
        if (!it) rlx__j_fail(rt, RLX_EINVAL, "str.join() needs an iterable");
        rj_list *l = rlx__j_iter(rt, *it);
        rj_buf b = {0};
        rlx__j_buf_put(rt, &b, "", 0);
        for (size_t i = 0; i < l->n; i++) {
            if (l->v[i].type != RJ_STR) rlx__j_fail(rt, RLX_EINVAL, "sequence item %zu: expected str instance, %s found", i, rlx__j_type_name(l->v[i]));
            if (i) rlx__j_buf_put(rt, &b, s.s.p, s.s.n);
            rlx__j_buf_put(rt, &b, l->v[i].s.p, l->v[i].s.n);
        }
        return rj_str(b.p, b.n);
    }
    if (is(m, n, "splitlines")) {
        const rj_value *k = rlx__j_arg(a, 0, "keepends");
        return rlx__j_splitlines(rt, s, k && rlx__j_truthy(*k));
    }
    if (is(m, n, "removeprefix") || is(m, n, "removesuffix")) {
        rj_value p = str_arg(rt, a, 0, "removeprefix");
        bool suf = m[6] == 's';
        if (!prefix_match(s, p, suf)) return s;
        return rj_str(suf ? s.s.p : s.s.p + p.s.n, s.s.n - p.s.n);
    }
    if (is(m, n, "zfill") || is(m, n, "ljust") || is(m, n, "rjust") || is(m, n, "center")) {
        const rj_value *w = rlx__j_arg(a, 0, NULL);
        if (!w) rlx__j_fail(rt, RLX_EINVAL, "%.*s() takes at least 1 argument (0 given)", (int)n, m);
        return rlx__j_pad(rt, s, m[0], *w, m[0] == 'z' ? NULL : rlx__j_arg(a, 1, NULL));
    }
    rlx__j_fail(rt, RLX_EUNSUPPORTED, "the str method '%.*s' is not supported", (int)RLX_MIN(n, (size_t)60), m);
}

/* ---- Python's method names ---- */

static const char *const k_str_methods[] = {"capitalize", "casefold", "center", "count", "encode", "endswith",
    "expandtabs", "find", "format", "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
    "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower",
    "lstrip", "maketrans", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust",
    "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate",
    "upper", "zfill", NULL};
/* those of them rlx__j_method implements */
static const char *const k_str_done[] = {"capitalize", "casefold", "center", "count", "endswith", "expandtabs",
    "find", "format", "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier",
    "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip",
    "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
    "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "upper", "zfill", NULL};
static const char *const k_dict_methods[] = {"clear", "copy", "fromkeys", "get", "items", "keys", "pop", "popitem",
    "setdefault", "update", "values", NULL};
static const char *const k_dict_done[] = {"copy", "get", "items", "keys", "values", NULL};
static const char *const k_list_methods[] = {"append", "clear", "copy", "count", "extend", "index", "insert", "pop",
    "remove", "reverse", "sort", NULL};
static const char *const k_tuple_methods[] = {"count", "index", NULL};
static const char *const k_cycler_methods[] = {"next", "reset", NULL};
/* the immutable sandbox's _mutable_spec */
static const char *const k_list_mutating[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort", NULL};
static const char *const k_dict_mutating[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};

static bool in_table(const char *const *t, const char *name, size_t n)
{
    for (; *t; t++)
        if (is(name, n, *t)) return true;
    return false;
}

bool rlx__j_is_py_method(rj_value self, const char *name, size_t n)
{
    switch (self.type) {
    case RJ_STR: return in_table(k_str_methods, name, n);
    case RJ_DICT: return in_table(k_dict_methods, name, n);
    case RJ_LIST:
        if (self.view == RJ_VIEW_RANGE || self.tuple) return in_table(k_tuple_methods, name, n);
        if (self.view) return false;
        return in_table(k_list_methods, name, n);
    case RJ_OBJ: return self.obj->is_cycler && in_table(k_cycler_methods, name, n);
    default: return false;
    }
}

bool rlx__j_is_unsafe_method(rj_value self, const char *name, size_t n)
{
    if (self.type == RJ_DICT) return in_table(k_dict_mutating, name, n);
    if (self.type == RJ_LIST && !self.tuple && !self.view) return in_table(k_list_mutating, name, n);
    return false;
}

/* implemented, or refused at run time exactly as the immutable sandbox refuses them */
bool rlx__j_has_method(const char *name, size_t n)
{
    return in_table(k_str_done, name, n) || in_table(k_dict_done, name, n) || in_table(k_dict_mutating, name, n) ||
           in_table(k_list_methods, name, n) || in_table(k_cycler_methods, name, n);
}

_Noreturn static void unsafe(rj_rt *rt, const char *m, size_t n, const char *type)
{
    rlx__j_fail(rt, RLX_EINVAL, "access to attribute '%.*s' of '%s' object is unsafe (templates cannot modify values)",
                (int)RLX_MIN(n, (size_t)60), m, type);
}

rj_value rlx__j_method(rj_env *E, rj_value obj, const char *m, size_t n, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    if (obj.type == RJ_STR) return str_method(E, obj, m, n, a);
    if (obj.type == RJ_DICT || (obj.type == RJ_LIST && !obj.view))
        check_args(rt, obj.type == RJ_DICT ? "dict" : obj.tuple ? "tuple" : "list", m, n, a);
    if (obj.type == RJ_DICT) {
        if (is(m, n, "get")) {
            const rj_value *k = rlx__j_arg(a, 0, NULL), *d = rlx__j_arg(a, 1, NULL);
            if (!k) rlx__j_fail(rt, RLX_EINVAL, "dict.get() needs a key");
            rj_value *v = rlx__j_dict_get(obj.d, *k);
            return v ? *v : d ? *d : rj_none();
        }
        if (is(m, n, "items") || is(m, n, "keys") || is(m, n, "values")) {
            rj_value r = rlx__j_new_list(rt, obj.d->n);
            r.view = m[0] == 'k' ? RJ_VIEW_KEYS : m[0] == 'v' ? RJ_VIEW_VALUES : RJ_VIEW_ITEMS;
            for (size_t i = 0; i < obj.d->n; i++) {
                if (m[0] == 'k') rlx__j_list_push(rt, r.l, obj.d->k[i]);
                else if (m[0] == 'v') rlx__j_list_push(rt, r.l, obj.d->v[i]);
                else {
                    rj_value t = rlx__j_new_list(rt, 2);
                    t.tuple = 1;
                    rlx__j_list_push(rt, t.l, obj.d->k[i]);
                    rlx__j_list_push(rt, t.l, obj.d->v[i]);
                    rlx__j_list_push(rt, r.l, t);
                }
            }
            return r;
        }
        if (is(m, n, "copy")) {
            rj_value r = rlx__j_new_dict(rt, obj.d->n);
            for (size_t i = 0; i < obj.d->n; i++) rlx__j_dict_set(rt, r.d, obj.d->k[i], obj.d->v[i]);
            return r;
        }
        if (rlx__j_is_unsafe_method(obj, m, n)) unsafe(rt, m, n, "dict");
        if (rlx__j_is_py_method(obj, m, n))
            rlx__j_fail(rt, RLX_EUNSUPPORTED, "the dict method '%.*s' is not supported", (int)RLX_MIN(n, (size_t)60), m);
        rlx__j_fail(rt, RLX_EINVAL, "'dict object' has no attribute '%.*s'", (int)RLX_MIN(n, (size_t)60), m);
    }
    if (obj.type == RJ_LIST) {
        if (is(m, n, "index") || is(m, n, "count")) {
            const rj_value *x = rlx__j_arg(a, 0, NULL);
            if (!x) rlx__j_fail(rt, RLX_EINVAL, "list.%.*s() needs an argument", (int)n, m);
            int64_t c = 0, len = (int64_t)obj.l->n;
            int64_t lo = opt_int(rt, rlx__j_arg(a, 1, NULL), 0, "slice indices"), hi = opt_int(rt, rlx__j_arg(a, 2, NULL), len, "slice indices");
            if (lo < 0) lo = RLX_MAX(lo + len, 0);
            if (hi < 0) hi = RLX_MAX(hi + len, 0);
            for (int64_t i = lo; i < RLX_MIN(hi, len); i++)
                if (rlx__j_equal(obj.l->v[i], *x)) {
                    if (m[0] == 'i') return rj_int(i);
                    c++;
                }
            if (m[0] == 'i') rlx__j_fail(rt, RLX_EINVAL, "value is not in list");
            return rj_int(c);
        }
        if (is(m, n, "copy")) {
            rj_value r = rlx__j_new_list(rt, obj.l->n);
            for (size_t i = 0; i < obj.l->n; i++) rlx__j_list_push(rt, r.l, obj.l->v[i]);
            return r;
        }
        if (rlx__j_is_unsafe_method(obj, m, n)) unsafe(rt, m, n, "list");
        rlx__j_fail(rt, RLX_EINVAL, "'%s object' has no attribute '%.*s'", obj.tuple ? "tuple" : "list", (int)RLX_MIN(n, (size_t)60), m);
    }
    if (obj.type == RJ_OBJ && obj.obj->is_cycler) {
        rj_obj *c = obj.obj;
        if (is(m, n, "next")) {
            rj_value v = c->items->v[c->pos];
            c->pos = (c->pos + 1) % c->items->n;
            return v;
        }
        if (is(m, n, "reset")) { c->pos = 0; return rj_none(); }
    }
    if (obj.type == RJ_UNDEF) rlx__j_fail(rt, RLX_EINVAL, "%.*s", (int)obj.s.n, obj.s.p);
    rlx__j_fail(rt, RLX_EINVAL, "'%s object' has no attribute '%.*s'", rlx__j_type_name(obj), (int)RLX_MIN(n, (size_t)60), m);
}

/* strftime_now: the fixed ISO time of the render, or the local wall clock, like datetime.now(). */
static rj_value strftime_now(rj_rt *rt, const rj_args *a)
{
    const rj_value *f = rlx__j_arg(a, 0, NULL);
    if (!f || f->type != RJ_STR) rlx__j_fail(rt, RLX_EINVAL, "strftime_now() needs a format string");
    struct tm tm = {0};
    long usec = 0;
    if (rt->now_iso) {
        int y, mo, d, h = 0, mi = 0, s = 0;
        int k = sscanf(rt->now_iso, "%d-%d-%d%*[T ]%d:%d:%d", &y, &mo, &d, &h, &mi, &s);
        if (k < 3) rlx__j_fail(rt, RLX_EINVAL, "the fixed time '%s' is not ISO 8601 (YYYY-MM-DDTHH:MM:SS)", rt->now_iso);
        tm.tm_year = y - 1900;
        tm.tm_mon = mo - 1;
        tm.tm_mday = d;
        tm.tm_hour = h;
        tm.tm_min = mi;
        tm.tm_sec = s;
        time_t t = timegm(&tm); /* fills weekday and day of year */
        gmtime_r(&t, &tm);
        /* a date that does not exist (2026-13-45T99:99:99) is refused, not moved on to 2027 */
        if (tm.tm_year != y - 1900 || tm.tm_mon != mo - 1 || tm.tm_mday != d || tm.tm_hour != h || tm.tm_min != mi ||
            tm.tm_sec != s)
            rlx__j_fail(rt, RLX_EINVAL, "the fixed time '%s' is no date and time of the calendar", rt->now_iso);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        usec = ts.tv_nsec / 1000;
        localtime_r(&ts.tv_sec, &tm);
    }
    /* Python's datetime.strftime handles %f, %z and %Z itself: the time is naive, so the
     * zone codes give nothing, and the fixed time has no microseconds */
    rj_buf fb = {0};
    rlx__j_buf_put(rt, &fb, "", 0);
    for (size_t i = 0; i < f->s.n; i++) {
        char c = f->s.p[i];
        if (c == '%' && i + 1 < f->s.n) {
            char d = f->s.p[++i];
            if (d == 'z' || d == 'Z') continue;
            if (d == 'f') { rlx__j_buf_printf(rt, &fb, "%06ld", usec); continue; }
            rlx__j_buf_put(rt, &fb, &c, 1);
            rlx__j_buf_put(rt, &fb, &d, 1);
            continue;
        }
        if (c == 0) rlx__j_fail(rt, RLX_EINVAL, "embedded null character in the strftime format");
        rlx__j_buf_put(rt, &fb, &c, 1);
    }
    rlx__j_buf_puts(rt, &fb, "\x01"); /* a sentinel tells an empty result from an overflow */
    for (size_t cap = 256; cap <= (1u << 20); cap *= 4) {
        char *out = rlx__j_alloc(rt, cap);
        size_t k = strftime(out, cap, fb.p, &tm);
        if (k > 0) return rj_str(out, k - 1);
    }
    rlx__j_fail(rt, RLX_EINVAL, "strftime_now: the format gives too long a result");
}

rj_value rlx__j_call_builtin(rj_env *E, int fn, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    switch (fn) {
    case FN_RANGE: {
        int64_t v[3] = {0, 0, 1};
        if (a->npos < 1 || a->npos > 3) rlx__j_fail(rt, RLX_EINVAL, "range() takes 1 to 3 integer arguments");
        for (size_t i = 0; i < a->npos; i++) {
            if (a->pos[i].type != RJ_INT && a->pos[i].type != RJ_BOOL) rlx__j_fail(rt, RLX_EINVAL, "range() arguments must be integers, not %s", rlx__j_type_name(a->pos[i]));
            v[a->npos == 1 ? 1 : i] = a->pos[i].type == RJ_INT ? a->pos[i].i : a->pos[i].b;
        }
        if (v[2] == 0) rlx__j_fail(rt, RLX_EINVAL, "range() step must not be zero");
        double count = ((double)v[1] - (double)v[0]) / (double)v[2];
        if (count > 1e7) rlx__j_fail(rt, RLX_ERANGE, "range() is too large (more than 10000000 items)");
        rj_value r = rlx__j_new_list(rt, 0);
        /* the next item computed wide: near INT64_MAX a step past the end must not wrap */
        for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1];) {
            rlx__j_list_push(rt, r.l, rj_int(i));
            if (__builtin_add_overflow(i, v[2], &i)) break;
        }
        r.view = RJ_VIEW_RANGE; /* prints as range(a, b) and is no list for tojson or `+` */
        memcpy(r.l->range, v, sizeof v);
        return r;
    }
    case FN_NAMESPACE: case FN_DICT: {
        rj_value r = rlx__j_new_dict(rt, a->nkw);
        for (size_t i = 0; i < a->npos; i++) {
            if (a->pos[i].type != RJ_DICT) rlx__j_fail(rt, RLX_EINVAL, "%s() takes keyword arguments or a dict", fn == FN_DICT ? "dict" : "namespace");
            for (size_t j = 0; j < a->pos[i].d->n; j++) rlx__j_dict_set(rt, r.d, a->pos[i].d->k[j], a->pos[i].d->v[j]);
        }
        for (size_t i = 0; i < a->nkw; i++) rlx__j_dict_set(rt, r.d, rj_str(a->kwn[i], a->kwl[i]), a->kwv[i]);
        if (fn == FN_NAMESPACE) r.type = RJ_NS;
        return r;
    }
    case FN_RAISE: {
        const rj_value *m = rlx__j_arg(a, 0, NULL);
        rj_value s = m ? rlx__j_to_str(rt, *m) : rj_cstr("raise_exception() was called");
        rlx__j_fail(rt, RLX_EINVAL, "%.*s", (int)RLX_MIN(s.s.n, (size_t)380), s.s.p);
    }
    case FN_STRFTIME: return strftime_now(rt, a);
    case FN_JOINER: case FN_CYCLER: {
        rj_value o = {0};
        o.type = RJ_OBJ;
        o.obj = rlx__j_alloc(rt, sizeof *o.obj);
        if (fn == FN_JOINER) {
            const rj_value *sep = rlx__j_arg(a, 0, "sep");
            o.obj->sep = sep ? rlx__j_to_str(rt, *sep) : rj_str(", ", 2);
        } else {
            if (!a->npos) rlx__j_fail(rt, RLX_EINVAL, "cycler() needs at least one item");
            rj_value items = rlx__j_new_list(rt, a->npos);
            for (size_t i = 0; i < a->npos; i++) rlx__j_list_push(rt, items.l, a->pos[i]);
            o.obj->is_cycler = true;
            o.obj->items = items.l;
        }
        return o;
    }
    default: rlx__j_fail(rt, RLX_EUNSUPPORTED, "this global function is not supported");
    }
}
