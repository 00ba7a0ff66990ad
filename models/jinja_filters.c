/* jinja_filters.c - Jinja2's builtin filters and tests (the subset chat templates use), with
 * transformers' tojson (json.dumps with ensure_ascii=False, indent, separators, sort_keys).
 * Unknown names fail at render time with RLX_EUNSUPPORTED, as Jinja2 defers unknown filters
 * inside conditionals to run time. */
#include "models/jinja_text.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef rj_value (*filter_fn)(rj_env *E, rj_value v, const rj_args *a);
typedef bool (*test_fn)(rj_env *E, rj_value v, const rj_args *a);

static rj_value need_str(rj_env *E, rj_value v) { return rlx__j_to_str(rlx__j_env_rt(E), v); }

static bool arg_bool(const rj_args *a, int idx, const char *name, bool dflt)
{
    const rj_value *v = rlx__j_arg(a, idx, name);
    return v ? rlx__j_truthy(*v) : dflt;
}

/* Follows a dotted attribute path ("a.b", "items.0") as jinja's make_attrgetter does. */
static rj_value attr_path(rj_env *E, rj_value v, rj_value path)
{
    rj_rt *rt = rlx__j_env_rt(E);
    if (path.type == RJ_INT) {
        if (v.type == RJ_LIST && path.i >= 0 && (size_t)path.i < v.l->n) return v.l->v[path.i];
        return rj_undef();
    }
    if (path.type != RJ_STR) rlx__j_fail(rt, RLX_EINVAL, "attribute must be a string");
    const char *p = path.s.p, *e = p + path.s.n;
    while (p <= e) {
        const char *d = memchr(p, '.', (size_t)(e - p));
        if (!d) d = e;
        size_t n = (size_t)(d - p);
        rj_value *got = NULL;
        if (v.type == RJ_DICT || v.type == RJ_NS) got = rlx__j_dict_gets(v.d, p, n);
        else if (v.type == RJ_LIST && n && p[0] >= '0' && p[0] <= '9') {
            size_t idx = (size_t)strtoul(p, NULL, 10);
            if (idx < v.l->n) got = &v.l->v[idx];
        }
        v = got ? *got : rlx__j_undef_named(rt, "'%s object' has no attribute '%.*s'", rlx__j_type_name(v), (int)n, p);
        p = d + 1;
    }
    return v;
}

static rj_value lower_key(rj_env *E, rj_value v, bool case_sensitive)
{
    if (!case_sensitive && v.type == RJ_STR) return rlx__j_case(rlx__j_env_rt(E), v, CASE_LOWER);
    return v;
}

/* stable sort of values by key(v) */
static void sort_values(rj_env *E, rj_value *v, size_t n, const rj_value *attr, bool case_sensitive, bool reverse)
{
    rj_rt *rt = rlx__j_env_rt(E);
    rj_value *keys = rlx__j_alloc(rt, (n + 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) keys[i] = lower_key(E, attr ? attr_path(E, v[i], *attr) : v[i], case_sensitive);
    rlx__j_sort(rt, v, keys, n, reverse);
}

static rj_value copy_list(rj_env *E, rj_list *l)
{
    rj_value r = rlx__j_new_list(rlx__j_env_rt(E), l->n);
    for (size_t i = 0; i < l->n; i++) rlx__j_list_push(rlx__j_env_rt(E), r.l, l->v[i]);
    return r;
}

static rj_value f_tojson(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    rj_json_opts o = {.indent = NULL, .item_sep = ", ", .key_sep = ": "};
    const rj_value *ind = rlx__j_arg(a, 0, "indent"), *seps = rlx__j_arg(a, -1, "separators");
    if (ind && ind->type == RJ_INT) {
        char *s = rlx__j_alloc(rt, (size_t)(ind->i > 0 ? ind->i : 0) + 1);
        for (int64_t i = 0; i < ind->i && i < 64; i++) s[i] = ' ';
        o.indent = s;
    } else if (ind && ind->type == RJ_STR) {
        o.indent = rlx__j_strdup(rt, ind->s.p, ind->s.n);
    }
    if (o.indent) o.item_sep = ",";
    if (seps && seps->type == RJ_LIST && seps->l->n == 2 && seps->l->v[0].type == RJ_STR && seps->l->v[1].type == RJ_STR) {
        o.item_sep = rlx__j_strdup(rt, seps->l->v[0].s.p, seps->l->v[0].s.n);
        o.key_sep = rlx__j_strdup(rt, seps->l->v[1].s.p, seps->l->v[1].s.n);
    }
    o.sort_keys = arg_bool(a, -1, "sort_keys", false);
    o.ensure_ascii = arg_bool(a, -1, "ensure_ascii", false);
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    rlx__j_tojson(rt, &b, v, &o, 0);
    return rj_str(b.p, b.n);
}

static rj_value f_length(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    switch (v.type) {
    case RJ_UNDEF: return rj_int(0);
    case RJ_STR: return rj_int((int64_t)rlx__j_utf8_len(v.s.p, v.s.n));
    case RJ_LIST: return rj_int((int64_t)v.l->n);
    case RJ_DICT: return rj_int((int64_t)v.d->n);
    default: rlx__j_fail(rlx__j_env_rt(E), RLX_EINVAL, "object of type '%s' has no len()", rlx__j_type_name(v));
    }
}

static rj_value f_string(rj_env *E, rj_value v, const rj_args *a) { (void)a; return need_str(E, v); }
static rj_value f_safe(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    rj_value s = need_str(E, v);
    s.safe = 1;
    return s;
}
static rj_value f_lower(rj_env *E, rj_value v, const rj_args *a) { (void)a; return rlx__j_case(rlx__j_env_rt(E), need_str(E, v), CASE_LOWER); }
static rj_value f_upper(rj_env *E, rj_value v, const rj_args *a) { (void)a; return rlx__j_case(rlx__j_env_rt(E), need_str(E, v), CASE_UPPER); }
static rj_value f_title(rj_env *E, rj_value v, const rj_args *a) { (void)a; return rlx__j_case(rlx__j_env_rt(E), need_str(E, v), CASE_TITLE_JINJA); }
static rj_value f_capitalize(rj_env *E, rj_value v, const rj_args *a) { (void)a; return rlx__j_case(rlx__j_env_rt(E), need_str(E, v), CASE_CAPITALIZE); }

static rj_value f_trim(rj_env *E, rj_value v, const rj_args *a)
{
    return rlx__j_strip(rlx__j_env_rt(E), need_str(E, v), rlx__j_arg(a, 0, "chars"), 3);
}

static rj_value f_default(rj_env *E, rj_value v, const rj_args *a)
{
    (void)E;
    const rj_value *d = rlx__j_arg(a, 0, "default_value");
    bool boolean = arg_bool(a, 1, "boolean", false);
    if (v.type == RJ_UNDEF || (boolean && !rlx__j_truthy(v))) return d ? *d : rj_str("", 0);
    return v;
}

static rj_value f_join(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    const rj_value *d = rlx__j_arg(a, 0, "d"), *attr = rlx__j_arg(a, 1, "attribute");
    rj_value sep = d ? need_str(E, *d) : rj_str("", 0);
    rj_list *items = rlx__j_iter(rt, v);
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    for (size_t i = 0; i < items->n; i++) {
        if (i) rlx__j_buf_put(rt, &b, sep.s.p, sep.s.n);
        rlx__j_str(rt, &b, attr ? attr_path(E, items->v[i], *attr) : items->v[i]);
    }
    return rj_str(b.p, b.n);
}

static rj_value f_first(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    rj_list *l = rlx__j_iter(rlx__j_env_rt(E), v);
    return l->n ? l->v[0] : rlx__j_undef_named(rlx__j_env_rt(E), "no first item, sequence was empty");
}

static rj_value f_last(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    rj_list *l = rlx__j_iter(rlx__j_env_rt(E), v);
    return l->n ? l->v[l->n - 1] : rlx__j_undef_named(rlx__j_env_rt(E), "no last item, sequence was empty");
}

static rj_value f_list(rj_env *E, rj_value v, const rj_args *a) { (void)a; return copy_list(E, rlx__j_iter(rlx__j_env_rt(E), v)); }

static rj_value pair(rj_rt *rt, rj_value k, rj_value v)
{
    rj_value t = rlx__j_new_list(rt, 2);
    t.tuple = 1;
    rlx__j_list_push(rt, t.l, k);
    rlx__j_list_push(rt, t.l, v);
    return t;
}

static rj_value f_items(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    rj_rt *rt = rlx__j_env_rt(E);
    if (v.type == RJ_UNDEF) return rlx__j_new_list(rt, 0);
    if (v.type != RJ_DICT && v.type != RJ_NS) rlx__j_fail(rt, RLX_EINVAL, "items: can only get item pairs from a mapping, not %s", rlx__j_type_name(v));
    rj_value r = rlx__j_new_list(rt, v.d->n);
    for (size_t i = 0; i < v.d->n; i++) rlx__j_list_push(rt, r.l, pair(rt, v.d->k[i], v.d->v[i]));
    return r;
}

static rj_value f_dictsort(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    if (v.type == RJ_UNDEF) rlx__j_fail_undefined(rt, v); /* dictsort calls value.items() */
    rj_value items = f_items(E, v, a);
    bool cs = arg_bool(a, 0, "case_sensitive", false), rev = arg_bool(a, 2, "reverse", false);
    const rj_value *by = rlx__j_arg(a, 1, "by");
    rj_value idx = rj_int(by && by->type == RJ_STR && by->s.n == 5 && !memcmp(by->s.p, "value", 5) ? 1 : 0);
    sort_values(E, items.l->v, items.l->n, &idx, cs, rev);
    return items;
}

static rj_value f_sort(rj_env *E, rj_value v, const rj_args *a)
{
    rj_value r = copy_list(E, rlx__j_iter(rlx__j_env_rt(E), v));
    sort_values(E, r.l->v, r.l->n, rlx__j_arg(a, 2, "attribute"), arg_bool(a, 1, "case_sensitive", false), arg_bool(a, 0, "reverse", false));
    return r;
}

static rj_value f_reverse(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    rj_rt *rt = rlx__j_env_rt(E);
    rj_list *l = rlx__j_iter(rt, v);
    if (v.type == RJ_STR) {
        rj_buf b = {0};
        rlx__j_buf_put(rt, &b, "", 0);
        for (size_t i = l->n; i-- > 0;) rlx__j_buf_put(rt, &b, l->v[i].s.p, l->v[i].s.n);
        return rj_str(b.p, b.n);
    }
    rj_value r = rlx__j_new_list(rt, l->n);
    for (size_t i = l->n; i-- > 0;) rlx__j_list_push(rt, r.l, l->v[i]);
    return r;
}

static rj_value f_unique(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    rj_list *l = rlx__j_iter(rt, v);
    bool cs = arg_bool(a, 0, "case_sensitive", false);
    const rj_value *attr = rlx__j_arg(a, 1, "attribute");
    rj_value r = rlx__j_new_list(rt, l->n), seen = rlx__j_new_list(rt, l->n);
    for (size_t i = 0; i < l->n; i++) {
        rj_value k = lower_key(E, attr ? attr_path(E, l->v[i], *attr) : l->v[i], cs);
        bool dup = false;
        for (size_t j = 0; j < seen.l->n && !dup; j++) dup = rlx__j_equal(seen.l->v[j], k);
        if (dup) continue;
        rlx__j_list_push(rt, seen.l, k);
        rlx__j_list_push(rt, r.l, l->v[i]);
    }
    return r;
}

static rj_value minmax(rj_env *E, rj_value v, const rj_args *a, int sign)
{
    rj_rt *rt = rlx__j_env_rt(E);
    rj_list *l = rlx__j_iter(rt, v);
    bool cs = arg_bool(a, 0, "case_sensitive", false);
    const rj_value *attr = rlx__j_arg(a, 1, "attribute");
    if (!l->n) return rlx__j_undef_named(rt, "no aggregated item, sequence was empty");
    size_t best = 0;
    rj_value bk = lower_key(E, attr ? attr_path(E, l->v[0], *attr) : l->v[0], cs);
    for (size_t i = 1; i < l->n; i++) {
        rj_value k = lower_key(E, attr ? attr_path(E, l->v[i], *attr) : l->v[i], cs);
        if (rlx__j_compare(rt, k, bk) * sign > 0) { best = i; bk = k; }
    }
    return l->v[best];
}
static rj_value f_min(rj_env *E, rj_value v, const rj_args *a) { return minmax(E, v, a, -1); }
static rj_value f_max(rj_env *E, rj_value v, const rj_args *a) { return minmax(E, v, a, 1); }

static rj_value f_sum(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    rj_list *l = rlx__j_iter(rt, v);
    const rj_value *attr = rlx__j_arg(a, 0, "attribute"), *start = rlx__j_arg(a, 1, "start");
    rj_value acc = start ? *start : rj_int(0);
    for (size_t i = 0; i < l->n; i++) {
        rj_value x = attr ? attr_path(E, l->v[i], *attr) : l->v[i];
        if (!rlx__j_is_number(acc) || !rlx__j_is_number(x)) rlx__j_fail(rt, RLX_EINVAL, "sum: unsupported operand types '%s' and '%s'", rlx__j_type_name(acc), rlx__j_type_name(x));
        if (acc.type != RJ_FLOAT && x.type != RJ_FLOAT) acc = rj_int((int64_t)((uint64_t)(acc.type == RJ_INT ? acc.i : acc.b) + (uint64_t)(x.type == RJ_INT ? x.i : x.b)));
        else acc = rj_float(rlx__j_num(acc) + rlx__j_num(x));
    }
    return acc;
}

static rj_value f_abs(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    if (v.type == RJ_INT) return rj_int(v.i < 0 ? (int64_t)(0 - (uint64_t)v.i) : v.i);
    if (v.type == RJ_BOOL) return rj_int(v.b);
    if (v.type == RJ_FLOAT) return rj_float(fabs(v.f));
    rlx__j_fail(rlx__j_env_rt(E), RLX_EINVAL, "bad operand type for abs(): '%s'", rlx__j_type_name(v));
}

static rj_value f_round(rj_env *E, rj_value v, const rj_args *a)
{
    const rj_value *pp = rlx__j_arg(a, 0, "precision"), *mp = rlx__j_arg(a, 1, "method");
    int prec = pp && pp->type == RJ_INT ? (int)RLX_MAX(-20, RLX_MIN(pp->i, 20)) : 0;
    if (!rlx__j_is_number(v)) rlx__j_fail(rlx__j_env_rt(E), RLX_EINVAL, "round: a number is required, not %s", rlx__j_type_name(v));
    bool common = !mp || (mp->type == RJ_STR && mp->s.n == 6 && !memcmp(mp->s.p, "common", 6));
    if (common && (v.type == RJ_INT || v.type == RJ_BOOL) && prec >= 0) return rj_int(v.type == RJ_INT ? v.i : v.b);
    double x = rlx__j_num(v), p10 = pow(10.0, prec);
    if (mp && mp->type == RJ_STR && mp->s.n == 4 && !memcmp(mp->s.p, "ceil", 4)) return rj_float(ceil(x * p10) / p10);
    if (mp && mp->type == RJ_STR && mp->s.n == 5 && !memcmp(mp->s.p, "floor", 5)) return rj_float(floor(x * p10) / p10);
    if (prec >= 0) { /* correctly rounded, half to even, like Python's round() */
        char tmp[400];
        snprintf(tmp, sizeof tmp, "%.*f", prec, x);
        return rj_float(strtod(tmp, NULL));
    }
    return rj_float(nearbyint(x * p10) / p10);
}

static rj_value f_int(rj_env *E, rj_value v, const rj_args *a)
{
    if (v.type == RJ_UNDEF) rlx__j_fail_undefined(rlx__j_env_rt(E), v); /* int(Undefined) raises */
    const rj_value *d = rlx__j_arg(a, 0, "default");
    rj_value dflt = d ? *d : rj_int(0);
    switch (v.type) {
    case RJ_INT: return v;
    case RJ_BOOL: return rj_int(v.b);
    case RJ_FLOAT: return isfinite(v.f) ? rj_int(rj_trunc(v.f)) : dflt;
    case RJ_STR: {
        char *s = rlx__j_strdup(rlx__j_env_rt(E), v.s.p, v.s.n), *end;
        const rj_value *bp = rlx__j_arg(a, 1, "base");
        long long x = strtoll(s, &end, bp && bp->type == RJ_INT ? (int)bp->i : 10);
        while (*end == ' ' || *end == '\t' || *end == '\n') end++;
        if (end != s && !*end) return rj_int(x);
        double f = strtod(s, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n') end++;
        if (end != s && !*end && isfinite(f)) return rj_int(rj_trunc(f));
        return dflt;
    }
    default: return dflt;
    }
}

static rj_value f_float(rj_env *E, rj_value v, const rj_args *a)
{
    if (v.type == RJ_UNDEF) rlx__j_fail_undefined(rlx__j_env_rt(E), v);
    const rj_value *d = rlx__j_arg(a, 0, "default");
    rj_value dflt = d ? *d : rj_float(0.0);
    if (rlx__j_is_number(v)) return rj_float(rlx__j_num(v));
    if (v.type == RJ_STR) {
        char *s = rlx__j_strdup(rlx__j_env_rt(E), v.s.p, v.s.n), *end;
        double f = strtod(s, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n') end++;
        if (end != s && !*end) return rj_float(f);
    }
    return dflt;
}

static rj_value f_replace(rj_env *E, rj_value v, const rj_args *a)
{
    const rj_value *o = rlx__j_arg(a, 0, "old"), *n = rlx__j_arg(a, 1, "new"), *c = rlx__j_arg(a, 2, "count");
    if (!o || !n) rlx__j_fail(rlx__j_env_rt(E), RLX_EINVAL, "replace needs the old and new strings");
    return rlx__j_replace(rlx__j_env_rt(E), need_str(E, v), need_str(E, *o), need_str(E, *n),
                          c && c->type == RJ_INT ? c->i : -1);
}

static rj_value f_escape(rj_env *E, rj_value v, const rj_args *a) { (void)a; return rlx__j_escape(rlx__j_env_rt(E), v); }

static rj_value f_forceescape(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    rj_value s = need_str(E, v);
    s.safe = 0;
    return rlx__j_escape(rlx__j_env_rt(E), s);
}

static rj_value f_indent(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    const rj_value *w = rlx__j_arg(a, 0, "width");
    bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
    rj_value ind;
    if (w && w->type == RJ_STR) ind = *w;
    else {
        int64_t n = w && w->type == RJ_INT ? RLX_MAX(0, RLX_MIN(w->i, 1000)) : 4;
        char *s = rlx__j_alloc(rt, (size_t)n + 1);
        memset(s, ' ', (size_t)n);
        ind = rj_str(s, (size_t)n);
    }
    if (v.type != RJ_STR) /* jinja2 appends "\n" to the value itself */
        rlx__j_fail(rt, RLX_EINVAL, "indent: unsupported operand type(s) for +=: '%s' and 'str'", rlx__j_type_name(v));
    rj_value s = v;
    rj_value text = rj_str(rlx__j_strdup(rt, s.s.p, s.s.n), s.s.n);
    rj_buf tb = {0};
    rlx__j_buf_put(rt, &tb, text.s.p, text.s.n);
    rlx__j_buf_puts(rt, &tb, "\n"); /* as jinja2 does, so splitlines keeps a trailing empty line */
    rj_value lines = rlx__j_splitlines(rt, rj_str(tb.p, tb.n));
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    if (first) rlx__j_buf_put(rt, &b, ind.s.p, ind.s.n);
    for (size_t i = 0; i < lines.l->n; i++) {
        rj_value ln = lines.l->v[i];
        if (i) {
            rlx__j_buf_puts(rt, &b, "\n");
            if (blank || ln.s.n) rlx__j_buf_put(rt, &b, ind.s.p, ind.s.n);
        }
        rlx__j_buf_put(rt, &b, ln.s.p, ln.s.n);
    }
    return rj_str(b.p, b.n);
}

static rj_value f_wordcount(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    rj_value s = need_str(E, v);
    int64_t n = 0;
    bool in = false;
    for (size_t i = 0; i < s.s.n; i++) {
        unsigned char c = (unsigned char)s.s.p[i];
        bool w = c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (w && !in) n++;
        in = w;
    }
    return rj_int(n);
}

static rj_value f_format(rj_env *E, rj_value v, const rj_args *a)
{
    rj_value s = need_str(E, v);
    if (a->nkw) {
        rj_value d = rlx__j_new_dict(rlx__j_env_rt(E), a->nkw);
        for (size_t i = 0; i < a->nkw; i++) rlx__j_dict_set(rlx__j_env_rt(E), d.d, rj_str(a->kwn[i], a->kwl[i]), a->kwv[i]);
        return rlx__j_percent_format(rlx__j_env_rt(E), s, NULL, 0, &d);
    }
    if (a->npos == 1 && a->pos[0].type == RJ_DICT) return rlx__j_percent_format(rlx__j_env_rt(E), s, a->pos, 1, &a->pos[0]);
    return rlx__j_percent_format(rlx__j_env_rt(E), s, a->pos, a->npos, NULL);
}

static rj_value f_attr(rj_env *E, rj_value v, const rj_args *a)
{
    const rj_value *n = rlx__j_arg(a, 0, "name");
    if (!n || n->type != RJ_STR) rlx__j_fail(rlx__j_env_rt(E), RLX_EINVAL, "attr needs an attribute name");
    /* attr() reads Python attributes only: a dict's keys are not attributes */
    if (v.type == RJ_NS) {
        rj_value *got = rlx__j_dict_gets(v.d, n->s.p, n->s.n);
        if (got) return *got;
    }
    return rlx__j_undef_named(rlx__j_env_rt(E), "'%s object' has no attribute '%.*s'", rlx__j_type_name(v), (int)RLX_MIN(n->s.n, (size_t)60), n->s.p);
}

static rj_value f_batch(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    const rj_value *c = rlx__j_arg(a, 0, "linecount"), *fill = rlx__j_arg(a, 1, "fill_with");
    if (!c || c->type != RJ_INT || c->i <= 0) rlx__j_fail(rt, RLX_EINVAL, "batch needs a positive count");
    rj_list *l = rlx__j_iter(rt, v);
    rj_value r = rlx__j_new_list(rt, 0), cur = rlx__j_new_list(rt, 0);
    for (size_t i = 0; i < l->n; i++) {
        rlx__j_list_push(rt, cur.l, l->v[i]);
        if ((int64_t)cur.l->n == c->i) { rlx__j_list_push(rt, r.l, cur); cur = rlx__j_new_list(rt, 0); }
    }
    if (cur.l->n) {
        while (fill && (int64_t)cur.l->n < c->i) rlx__j_list_push(rt, cur.l, *fill);
        rlx__j_list_push(rt, r.l, cur);
    }
    return r;
}

/* map('filter', args...) or map(attribute='x', default=...) */
static rj_value f_map(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    if (!rlx__j_truthy(v)) return rlx__j_new_list(rt, 0);
    rj_list *l = rlx__j_iter(rt, v);
    rj_value r = rlx__j_new_list(rt, l->n);
    const rj_value *attr = rlx__j_arg(a, -1, "attribute"), *dflt = rlx__j_arg(a, -1, "default");
    if (attr) {
        for (size_t i = 0; i < l->n; i++) {
            rj_value x = attr_path(E, l->v[i], *attr);
            rlx__j_list_push(rt, r.l, x.type == RJ_UNDEF && dflt ? *dflt : x);
        }
        return r;
    }
    if (a->npos < 1 || a->pos[0].type != RJ_STR) rlx__j_fail(rt, RLX_EINVAL, "map needs a filter name or attribute=");
    rj_args rest = *a;
    rest.pos++;
    rest.npos--;
    for (size_t i = 0; i < l->n; i++) rlx__j_list_push(rt, r.l, rlx__j_filter(E, a->pos[0].s.p, a->pos[0].s.n, l->v[i], &rest));
    return r;
}

static rj_value select_common(rj_env *E, rj_value v, const rj_args *a, bool by_attr, bool keep)
{
    rj_rt *rt = rlx__j_env_rt(E);
    if (!rlx__j_truthy(v)) return rlx__j_new_list(rt, 0); /* jinja2: `if value:` guards the loop */
    rj_list *l = rlx__j_iter(rt, v);
    rj_value r = rlx__j_new_list(rt, l->n);
    size_t off = by_attr ? 1 : 0;
    if (by_attr && (a->npos < 1)) rlx__j_fail(rt, RLX_EINVAL, "selectattr/rejectattr need an attribute name");
    const rj_value *test = a->npos > off ? &a->pos[off] : NULL;
    if (test && test->type != RJ_STR) rlx__j_fail(rt, RLX_EINVAL, "the test name must be a string");
    rj_args rest = *a;
    rest.pos += off + (test ? 1 : 0);
    rest.npos -= off + (test ? 1 : 0);
    for (size_t i = 0; i < l->n; i++) {
        rj_value x = by_attr ? attr_path(E, l->v[i], a->pos[0]) : l->v[i];
        bool ok = test ? rlx__j_test(E, test->s.p, test->s.n, x, &rest) : rlx__j_truthy(x);
        if (ok == keep) rlx__j_list_push(rt, r.l, l->v[i]);
    }
    return r;
}
static rj_value f_select(rj_env *E, rj_value v, const rj_args *a) { return select_common(E, v, a, false, true); }
static rj_value f_reject(rj_env *E, rj_value v, const rj_args *a) { return select_common(E, v, a, false, false); }
static rj_value f_selectattr(rj_env *E, rj_value v, const rj_args *a) { return select_common(E, v, a, true, true); }
static rj_value f_rejectattr(rj_env *E, rj_value v, const rj_args *a) { return select_common(E, v, a, true, false); }

static rj_value f_center(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    rj_value s = need_str(E, v);
    const rj_value *w = rlx__j_arg(a, 0, "width");
    size_t width = w && w->type == RJ_INT && w->i > 0 ? (size_t)RLX_MIN(w->i, 10000) : 80;
    size_t len = rlx__j_utf8_len(s.s.p, s.s.n);
    if (len >= width) return s;
    size_t pad = width - len, left = pad / 2 + (pad & width & 1);
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    for (size_t i = 0; i < left; i++) rlx__j_buf_puts(rt, &b, " ");
    rlx__j_buf_put(rt, &b, s.s.p, s.s.n);
    for (size_t i = left; i < pad; i++) rlx__j_buf_puts(rt, &b, " ");
    return rj_str(b.p, b.n);
}

static rj_value f_truncate(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    rj_value s = need_str(E, v);
    const rj_value *lp = rlx__j_arg(a, 0, "length"), *ep = rlx__j_arg(a, 2, "end"), *lw = rlx__j_arg(a, 3, "leeway");
    int64_t length = lp && lp->type == RJ_INT ? lp->i : 255, leeway = lw && lw->type == RJ_INT ? lw->i : 5;
    rj_value end = ep && ep->type == RJ_STR ? *ep : rj_cstr("...");
    size_t len = rlx__j_utf8_len(s.s.p, s.s.n), elen = rlx__j_utf8_len(end.s.p, end.s.n);
    if (length < (int64_t)elen) rlx__j_fail(rt, RLX_EINVAL, "truncate: expected length >= %zu, got %" PRId64, elen, length);
    if (leeway < 0) rlx__j_fail(rt, RLX_EINVAL, "truncate: expected leeway >= 0");
    if ((int64_t)len <= length + leeway) return s;
    size_t cut = rlx__j_utf8_off(s.s.p, s.s.n, (size_t)(length - (int64_t)elen));
    rj_value head = rj_str(s.s.p, cut);
    if (!arg_bool(a, 1, "killwords", false)) { /* rsplit(" ", 1)[0] */
        size_t i = cut;
        while (i > 0 && s.s.p[i - 1] != ' ') i--;
        if (i > 0) head.s.n = i - 1;
    }
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, head.s.p, head.s.n);
    rlx__j_buf_put(rt, &b, end.s.p, end.s.n);
    return rj_str(b.p, b.n);
}

/* groupby(attribute, default=None, case_sensitive=False): sorted (grouper, list) pairs; the
 * pairs answer .grouper and .list (tuple == 2 marks jinja2's _GroupTuple). */
static rj_value f_groupby(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    const rj_value *attr = rlx__j_arg(a, 0, "attribute"), *dflt = rlx__j_arg(a, 1, "default");
    bool cs = arg_bool(a, 2, "case_sensitive", false);
    if (!attr) rlx__j_fail(rt, RLX_EINVAL, "groupby needs an attribute");
    rj_value items = copy_list(E, rlx__j_iter(rt, v));
    size_t n = items.l->n;
    rj_value *keys = rlx__j_alloc(rt, (n + 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) {
        rj_value k = attr_path(E, items.l->v[i], *attr);
        keys[i] = k.type == RJ_UNDEF && dflt ? *dflt : k;
    }
    rj_value *folded = rlx__j_alloc(rt, (n + 1) * sizeof *folded), *perm = rlx__j_alloc(rt, (n + 1) * sizeof *perm);
    for (size_t i = 0; i < n; i++) { folded[i] = lower_key(E, keys[i], cs); perm[i] = rj_int((int64_t)i); }
    rlx__j_sort(rt, perm, folded, n, false);
    rj_value *sv = rlx__j_alloc(rt, (n + 1) * sizeof *sv), *sk = rlx__j_alloc(rt, (n + 1) * sizeof *sk);
    for (size_t i = 0; i < n; i++) { sv[i] = items.l->v[perm[i].i]; sk[i] = keys[perm[i].i]; }
    memcpy(items.l->v, sv, n * sizeof *sv);
    memcpy(keys, sk, n * sizeof *sk);
    rj_value out = rlx__j_new_list(rt, 0);
    for (size_t i = 0; i < n;) {
        rj_value group = rlx__j_new_list(rt, 0);
        rj_value gk = lower_key(E, keys[i], cs);
        size_t j = i;
        while (j < n && rlx__j_equal(lower_key(E, keys[j], cs), gk)) rlx__j_list_push(rt, group.l, items.l->v[j++]);
        rj_value t = rlx__j_new_list(rt, 2);
        t.tuple = 2;
        rlx__j_list_push(rt, t.l, keys[i]);
        rlx__j_list_push(rt, t.l, group);
        rlx__j_list_push(rt, out.l, t);
        i = j;
    }
    return out;
}

static const struct { const char *name; filter_fn fn; } filters[] = {
    {"groupby", f_groupby},
    {"truncate", f_truncate},
    {"tojson", f_tojson}, {"length", f_length}, {"count", f_length}, {"string", f_string}, {"trim", f_trim},
    {"default", f_default}, {"d", f_default}, {"join", f_join}, {"lower", f_lower}, {"upper", f_upper},
    {"title", f_title}, {"capitalize", f_capitalize}, {"safe", f_safe}, {"items", f_items}, {"list", f_list},
    {"first", f_first}, {"last", f_last}, {"dictsort", f_dictsort}, {"sort", f_sort}, {"reverse", f_reverse},
    {"unique", f_unique}, {"min", f_min}, {"max", f_max}, {"sum", f_sum}, {"abs", f_abs}, {"round", f_round},
    {"int", f_int}, {"float", f_float}, {"replace", f_replace}, {"escape", f_escape}, {"e", f_escape},
    {"forceescape", f_forceescape}, {"indent", f_indent}, {"wordcount", f_wordcount}, {"format", f_format},
    {"attr", f_attr}, {"batch", f_batch}, {"map", f_map}, {"select", f_select}, {"reject", f_reject},
    {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"center", f_center},
};

static bool name_is(const char *a, const char *name, size_t n) { return strlen(a) == n && !memcmp(a, name, n); }

bool rlx__j_has_filter(const char *name, size_t n)
{
    for (size_t i = 0; i < RLX_ARRAY_LEN(filters); i++)
        if (name_is(filters[i].name, name, n)) return true;
    return false;
}

rj_value rlx__j_filter(rj_env *E, const char *name, size_t n, rj_value v, const rj_args *a)
{
    for (size_t i = 0; i < RLX_ARRAY_LEN(filters); i++) {
        if (!name_is(filters[i].name, name, n)) continue;
        rj_value r = filters[i].fn(E, v, a);
        /* these call Markup's own str methods in jinja2, so a safe string stays safe */
        if (v.type == RJ_STR && v.safe && r.type == RJ_STR &&
            (name_is("trim", name, n) || name_is("upper", name, n) || name_is("lower", name, n) ||
             name_is("capitalize", name, n) || name_is("string", name, n)))
            r.safe = 1;
        return r;
    }
    rlx__j_fail(rlx__j_env_rt(E), RLX_EUNSUPPORTED, "no filter named '%.*s' (not supported)", (int)RLX_MIN(n, (size_t)60), name);
}

/* ---- tests ---- */

static const rj_value *targ(rj_env *E, const rj_args *a, const char *test)
{
    const rj_value *x = rlx__j_arg(a, 0, NULL);
    if (!x) rlx__j_fail(rlx__j_env_rt(E), RLX_EINVAL, "test '%s' needs an argument", test);
    return x;
}

static bool is_lower_upper(rj_env *E, rj_value v, int mode)
{
    if (v.type != RJ_STR) return false;
    rj_value c = rlx__j_case(rlx__j_env_rt(E), v, mode), o = rlx__j_case(rlx__j_env_rt(E), v, mode == CASE_LOWER ? CASE_UPPER : CASE_LOWER);
    return rlx__j_equal(c, v) && !rlx__j_equal(o, v);
}

bool rlx__j_test(rj_env *E, const char *name, size_t n, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
#define T(s) name_is(s, name, n)
    if (T("defined")) return v.type != RJ_UNDEF;
    if (T("undefined")) return v.type == RJ_UNDEF;
    if (T("none")) return v.type == RJ_NONE;
    if (T("string")) return v.type == RJ_STR;
    if (T("number")) return v.type == RJ_INT || v.type == RJ_FLOAT || v.type == RJ_BOOL;
    if (T("integer")) return v.type == RJ_INT;
    if (T("float")) return v.type == RJ_FLOAT;
    if (T("boolean")) return v.type == RJ_BOOL;
    if (T("true")) return v.type == RJ_BOOL && v.b;
    if (T("false")) return v.type == RJ_BOOL && !v.b;
    if (T("mapping")) return v.type == RJ_DICT;
    if (T("iterable")) return v.type == RJ_LIST || v.type == RJ_DICT || v.type == RJ_STR || v.type == RJ_UNDEF || v.type == RJ_LOOP;
    if (T("sequence")) return v.type == RJ_LIST || v.type == RJ_DICT || v.type == RJ_STR || v.type == RJ_UNDEF;
    if (T("callable")) return v.type == RJ_MACRO || v.type == RJ_FUNC;
    /* odd/even/divisibleby are `value % n == ...` in Python: floats take part too */
    if (T("odd")) return rlx__j_equal(rlx__j_binop(E, OP_MOD, v, rj_int(2)), rj_int(1));
    if (T("even")) return rlx__j_equal(rlx__j_binop(E, OP_MOD, v, rj_int(2)), rj_int(0));
    if (T("divisibleby")) return rlx__j_equal(rlx__j_binop(E, OP_MOD, v, *targ(E, a, "divisibleby")), rj_int(0));
    if (T("eq") || T("equalto") || T("==")) return rlx__j_equal(v, *targ(E, a, "eq"));
    if (T("ne") || T("!=")) return !rlx__j_equal(v, *targ(E, a, "ne"));
    if (T("sameas")) {
        rj_value o = *targ(E, a, "sameas");
        return o.type == v.type && rlx__j_equal(v, o);
    }
    if (T("lt") || T("lessthan")) return rlx__j_compare(rt, v, *targ(E, a, "lt")) < 0;
    if (T("le")) return rlx__j_compare(rt, v, *targ(E, a, "le")) <= 0;
    if (T("gt") || T("greaterthan")) return rlx__j_compare(rt, v, *targ(E, a, "gt")) > 0;
    if (T("ge")) return rlx__j_compare(rt, v, *targ(E, a, "ge")) >= 0;
    if (T("in")) {
        rj_value seq = *targ(E, a, "in");
        if (seq.type == RJ_STR && v.type == RJ_STR) return v.s.n == 0 || memmem(seq.s.p, seq.s.n, v.s.p, v.s.n);
        if (seq.type == RJ_DICT) return rlx__j_dict_get(seq.d, v) != NULL;
        rj_list *l = rlx__j_iter(rt, seq);
        for (size_t i = 0; i < l->n; i++)
            if (rlx__j_equal(v, l->v[i])) return true;
        return false;
    }
    if (T("lower")) return is_lower_upper(E, v, CASE_LOWER);
    if (T("upper")) return is_lower_upper(E, v, CASE_UPPER);
    if (T("escaped")) return false;
    if (T("filter")) return v.type == RJ_STR && rlx__j_has_filter(v.s.p, v.s.n);
    if (T("test")) return v.type == RJ_STR && rlx__j_has_test(v.s.p, v.s.n);
#undef T
    rlx__j_fail(rt, RLX_EUNSUPPORTED, "no test named '%.*s' (not supported)", (int)RLX_MIN(n, (size_t)60), name);
}

bool rlx__j_has_test(const char *name, size_t n)
{
    static const char *const names[] = {"defined", "undefined", "none", "string", "number", "integer", "float",
        "boolean", "true", "false", "mapping", "iterable", "sequence", "callable", "odd", "even", "divisibleby",
        "eq", "equalto", "==", "ne", "!=", "sameas", "lt", "lessthan", "le", "gt", "greaterthan", "ge", "in",
        "lower", "upper", "escaped", "filter", "test"};
    for (size_t i = 0; i < RLX_ARRAY_LEN(names); i++)
        if (name_is(names[i], name, n)) return true;
    return false;
}
