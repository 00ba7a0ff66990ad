/* jinja_filters.c - Jinja2's builtin filters (those over iterables live in jinja_iter.c), with
 * transformers' tojson (json.dumps with ensure_ascii=False, indent, separators, sort_keys).
 * Filter names are checked when the template is parsed; an unknown name reaching here came
 * from map('name'). */
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

static rj_value lower_key(rj_env *E, rj_value v, bool case_sensitive)
{
    if (!case_sensitive && v.type == RJ_STR) return rlx__j_case(rlx__j_env_rt(E), v, CASE_LOWER);
    return v;
}

static rj_value copy_list(rj_env *E, rj_list *l)
{
    rj_value r = rlx__j_new_list(rlx__j_env_rt(E), l->n);
    for (size_t i = 0; i < l->n; i++) rlx__j_list_push(rlx__j_env_rt(E), r.l, l->v[i]);
    return r;
}

/* does json.dumps put an item separator (a key separator: dict_only) anywhere in v? */
static bool uses_separator(rj_value v, bool dict_only, int depth)
{
    if (depth > RJ_MAX_DEPTH) return false;
    if (v.type == RJ_DICT || v.type == RJ_NS) {
        if (v.d->n) return true;
    } else if (v.type == RJ_LIST) {
        if (v.l->n && !dict_only) return true;
        for (size_t i = 0; i < v.l->n; i++)
            if (uses_separator(v.l->v[i], dict_only, depth + 1)) return true;
    }
    return false;
}

/* transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
 * json.dumps with those arguments, bound as Python binds them */
static rj_value f_tojson(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    static const char *const names[] = {"ensure_ascii", "indent", "separators", "sort_keys"};
    const rj_value *arg[4] = {0};
    if (a->npos > 4) rlx__j_fail(rt, RLX_EINVAL, "tojson() takes from 1 to 5 positional arguments but %zu were given", a->npos + 1);
    for (size_t i = 0; i < a->npos; i++) arg[i] = &a->pos[i];
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i = 0;
        while (i < 4 && !(strlen(names[i]) == a->kwl[k] && !memcmp(names[i], a->kwn[k], a->kwl[k]))) i++;
        if (i == 4)
            rlx__j_fail(rt, RLX_EINVAL, "tojson() got an unexpected keyword argument '%.*s'", (int)RLX_MIN(a->kwl[k], (size_t)60), a->kwn[k]);
        if (arg[i]) rlx__j_fail(rt, RLX_EINVAL, "tojson() got multiple values for argument '%s'", names[i]);
        arg[i] = &a->kwv[k];
    }
    rj_json_opts o = {.indent = NULL, .item_sep = ", ", .key_sep = ": "};
    const rj_value *ind = arg[1], *seps = arg[2];
    if (ind && ind->type != RJ_NONE) {
        if (ind->type == RJ_STR) {
            o.indent = rlx__j_strdup(rt, ind->s.p, ind->s.n);
        } else if (ind->type == RJ_INT || ind->type == RJ_BOOL) { /* ' ' * indent */
            int64_t n = ind->type == RJ_INT ? RLX_MAX(ind->i, 0) : ind->b;
            if ((uint64_t)n > rt->limit) rlx__j_fail(rt, RLX_ENOMEM, "tojson: indent %" PRId64 " is too large", n);
            char *sp = rlx__j_alloc(rt, (size_t)n + 1);
            memset(sp, ' ', (size_t)n);
            o.indent = sp;
        } else if (ind->type == RJ_BIGINT) {
            rlx__j_fail(rt, RLX_EINVAL, "cannot fit 'int' into an index-sized integer");
        } else {
            rlx__j_fail(rt, RLX_EINVAL, "can't multiply sequence by non-int of type '%s'", rlx__j_type_name(*ind));
        }
        o.item_sep = ",";
    }
    if (seps && seps->type != RJ_NONE) { /* item_separator, key_separator = separators */
        if (seps->type != RJ_LIST && seps->type != RJ_STR && seps->type != RJ_DICT && seps->type != RJ_GEN)
            rlx__j_fail(rt, RLX_EINVAL, "cannot unpack non-iterable %s object", rlx__j_type_name(*seps));
        rj_list *l = rlx__j_iter(rt, *seps);
        if (l->n > 2) rlx__j_fail(rt, RLX_EINVAL, "too many values to unpack (expected 2)");
        if (l->n < 2) rlx__j_fail(rt, RLX_EINVAL, "not enough values to unpack (expected 2, got %zu)", l->n);
        rj_value is = l->v[0], ks = l->v[1];
        /* the C encoder (no indent) checks both; Python's own (indent) fails only where it uses one */
        if (!o.indent && ks.type != RJ_STR)
            rlx__j_fail(rt, RLX_EINVAL, "make_encoder() argument 5 must be str, not %s", rlx__j_type_name(ks));
        if (!o.indent && is.type != RJ_STR)
            rlx__j_fail(rt, RLX_EINVAL, "make_encoder() argument 6 must be str, not %s", rlx__j_type_name(is));
        if (is.type != RJ_STR && uses_separator(v, false, 0))
            rlx__j_fail(rt, RLX_EINVAL, "unsupported operand type(s) for +: '%s' and 'str'", rlx__j_type_name(is));
        if (ks.type != RJ_STR && uses_separator(v, true, 0))
            rlx__j_fail(rt, RLX_EINVAL, "sequence item: expected str instance, %s found", rlx__j_type_name(ks));
        o.item_sep = is.type == RJ_STR ? rlx__j_strdup(rt, is.s.p, is.s.n) : "";
        o.key_sep = ks.type == RJ_STR ? rlx__j_strdup(rt, ks.s.p, ks.s.n) : "";
    }
    o.sort_keys = arg[3] && rlx__j_truthy(*arg[3]);
    o.ensure_ascii = arg[0] && rlx__j_truthy(*arg[0]);
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
    case RJ_DICT: case RJ_NS: return rj_int((int64_t)v.d->n);
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
        rlx__j_str(rt, &b, attr ? rlx__j_attr_getter(E, items->v[i], *attr) : items->v[i]);
    }
    return rj_str(b.p, b.n);
}

static rj_value f_first(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    rj_rt *rt = rlx__j_env_rt(E);
    if (v.type == RJ_GEN) { /* takes one item, the rest stays in the iterator */
        rj_value x;
        return rlx__j_gen_next(rt, v.gen, &x) ? x : rlx__j_undef_named(rt, "no first item, sequence was empty");
    }
    rj_list *l = rlx__j_iter(rt, v);
    return l->n ? l->v[0] : rlx__j_undef_named(rt, "no first item, sequence was empty");
}

static rj_value f_last(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    if (v.type == RJ_GEN) rlx__j_fail(rlx__j_env_rt(E), RLX_EINVAL, "'%s' object is not reversible", rlx__j_type_name(v));
    rj_list *l = rlx__j_iter(rlx__j_env_rt(E), v);
    return l->n ? l->v[l->n - 1] : rlx__j_undef_named(rlx__j_env_rt(E), "no last item, sequence was empty");
}

static rj_value f_list(rj_env *E, rj_value v, const rj_args *a) { (void)a; return copy_list(E, rlx__j_iter(rlx__j_env_rt(E), v)); }

static rj_value f_dictsort(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    if (v.type == RJ_UNDEF) rlx__j_fail_undefined(rt, v); /* dictsort calls value.items() */
    bool cs = arg_bool(a, 0, "case_sensitive", false), rev = arg_bool(a, 2, "reverse", false);
    const rj_value *by = rlx__j_arg(a, 1, "by");
    bool by_value = by && by->type == RJ_STR && by->s.n == 5 && !memcmp(by->s.p, "value", 5);
    if (by && !by_value && !(by->type == RJ_STR && by->s.n == 3 && !memcmp(by->s.p, "key", 3)))
        rlx__j_fail(rt, RLX_EINVAL, "You can only sort by either \"key\" or \"value\"");
    rj_value items = copy_list(E, rlx__j_iter(rt, rlx__j_f_items(E, v, a)));
    size_t n = items.l->n;
    rj_value *keys = rlx__j_alloc(rt, (n + 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) keys[i] = lower_key(E, items.l->v[i].l->v[by_value], cs);
    rlx__j_sort(rt, items.l->v, keys, n, rev);
    return items;
}

/* sorted(value, key=make_multi_attrgetter(attribute), reverse=reverse): each key is a list */
static rj_value f_sort(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    rj_value r = copy_list(E, rlx__j_iter(rt, v));
    const rj_value *attr = rlx__j_arg(a, 2, "attribute");
    bool cs = arg_bool(a, 1, "case_sensitive", false);
    size_t n = r.l->n;
    rj_value *keys = rlx__j_alloc(rt, (n + 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) keys[i] = rlx__j_multi_attr_key(E, r.l->v[i], attr, cs);
    rlx__j_sort(rt, r.l->v, keys, n, arg_bool(a, 0, "reverse", false));
    return r;
}

/* min()/max() with key=make_attrgetter(attribute): the first of equal extremes */
static rj_value minmax(rj_env *E, rj_value v, const rj_args *a, int sign)
{
    rj_rt *rt = rlx__j_env_rt(E);
    rj_list *l = rlx__j_iter(rt, v);
    bool cs = arg_bool(a, 0, "case_sensitive", false);
    const rj_value *attr = rlx__j_arg(a, 1, "attribute");
    if (!l->n) return rlx__j_undef_named(rt, "no aggregated item, sequence was empty");
    size_t best = 0;
    rj_value bk = rlx__j_attr_key(E, l->v[0], attr, NULL, cs);
    for (size_t i = 1; i < l->n; i++) {
        rj_value k = rlx__j_attr_key(E, l->v[i], attr, NULL, cs);
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
    if (acc.type == RJ_STR) rlx__j_fail(rt, RLX_EINVAL, "sum() can't sum strings [use ''.join(seq) instead]");
    for (size_t i = 0; i < l->n; i++) /* Python's sum(): start + x + ... with the `+` of the values */
        acc = rlx__j_binop(E, OP_ADD, acc, attr && attr->type != RJ_NONE ? rlx__j_attr_getter(E, l->v[i], *attr) : l->v[i]);
    return acc;
}

static rj_value f_abs(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    if (rlx__j_is_int(v)) return rlx__j_int_cmp(v, rj_int(0)) < 0 ? rlx__j_int_neg(rlx__j_env_rt(E), v) : v.type == RJ_BOOL ? rj_int(v.b) : v;
    if (v.type == RJ_FLOAT) return rj_float(fabs(v.f));
    rlx__j_fail(rlx__j_env_rt(E), RLX_EINVAL, "bad operand type for abs(): '%s'", rlx__j_type_name(v));
}

static rj_value f_round(rj_env *E, rj_value v, const rj_args *a)
{
    const rj_value *pp = rlx__j_arg(a, 0, "precision"), *mp = rlx__j_arg(a, 1, "method");
    int prec = pp && pp->type == RJ_INT ? (int)RLX_MAX(-20, RLX_MIN(pp->i, 20)) : 0;
    if (!rlx__j_is_number(v)) rlx__j_fail(rlx__j_env_rt(E), RLX_EINVAL, "round: a number is required, not %s", rlx__j_type_name(v));
    bool common = !mp || (mp->type == RJ_STR && mp->s.n == 6 && !memcmp(mp->s.p, "common", 6));
    if (common && rlx__j_is_int(v) && prec >= 0) return v.type == RJ_BOOL ? rj_int(v.b) : v;
    if (common && (v.type == RJ_INT || v.type == RJ_BOOL)) { /* Python's round(int, -k): an int, half to even */
        int64_t x = v.type == RJ_BOOL ? v.b : v.i, m = 1, r;
        if (-prec >= 20 || (-prec == 19 && x > -5000000000000000000LL && x < 5000000000000000000LL)) return rj_int(0);
        for (int k = 0; k < -prec && m <= INT64_MAX / 10; k++) m *= 10;
        int64_t q = x / m, rem = x % m;
        if (rem < 0) { q--; rem += m; }
        if (rem > m - rem || (rem == m - rem && (q & 1))) q++;
        if (-prec <= 18 && !__builtin_mul_overflow(q, m, &r)) return rj_int(r);
    }
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
    rj_rt *rt = rlx__j_env_rt(E);
    switch (v.type) {
    case RJ_INT: case RJ_BIGINT: return v;
    case RJ_BOOL: return rj_int(v.b);
    case RJ_FLOAT: return isfinite(v.f) ? rlx__j_int_from_double(rt, v.f) : dflt;
    case RJ_STR: { /* int(value, base), else int(float(value)) */
        const rj_value *bp = rlx__j_arg(a, 1, "base");
        int base = bp && bp->type == RJ_INT && (bp->i == 0 || (bp->i >= 2 && bp->i <= 36)) ? (int)bp->i : 10;
        rj_value t = rlx__j_strip(rt, v, NULL, 3);
        size_t i = 0, n = t.s.n;
        const char *p = t.s.p;
        bool ok = n > 0;
        if (ok && (p[0] == '-' || p[0] == '+')) i++;
        /* Python's prefixes: 0x for base 16, 0o for 8, 0b for 2; base 0 takes the one written
           (none: decimal, without leading zeros) */
        const int pb = n - i > 2 && p[i] == '0' ? ((p[i + 1] | 0x20) == 'x' ? 16 : (p[i + 1] | 0x20) == 'o' ? 8
                                                    : (p[i + 1] | 0x20) == 'b' ? 2 : 0) : 0;
        if (pb && (base == pb || base == 0)) {
            base = pb;
            i += 2;
            if (i < n && p[i] == '_') i++; /* int('0x_1f', 16): one '_' may follow the prefix */
        } else if (base == 0) {
            base = 10;
            size_t z = i;
            while (z < n && (p[z] == '0' || p[z] == '_')) z++;
            if (z - i > 1 && z < n) ok = false; /* int('007', 0) refuses leading zeros */
        }
        ok = ok && i < n && p[i] != '_' && p[n - 1] != '_';
        for (size_t k = i; ok && k < n; k++) {
            int c = p[k] | 0x20, d = p[k] >= '0' && p[k] <= '9' ? p[k] - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : p[k] == '_' ? 0 : 99;
            ok = d < base && !(p[k] == '_' && p[k - 1] == '_');
        }
        if (ok) {
            rj_value r = rlx__j_int_parse(rt, p + i, n - i, base);
            return p[0] == '-' ? rlx__j_int_neg(rt, r) : r;
        }
        char *s = rlx__j_strdup(rt, p, n), *end;
        double f = strtod(s, &end);
        if (n && end == s + n && isfinite(f) && !strpbrk(s, "xXpP")) return rlx__j_int_from_double(rt, f);
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
        rj_value t = rlx__j_strip(rlx__j_env_rt(E), v, NULL, 3);
        char *s = rlx__j_strdup(rlx__j_env_rt(E), t.s.p, t.s.n), *end;
        double f = strtod(s, &end);
        if (t.s.n && end == s + t.s.n && !strpbrk(s, "xXpP")) return rj_float(f);
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
        int64_t n = w && w->type == RJ_INT ? RLX_MAX(0, w->i) : 4; /* ' ' * width, as Python (was capped at 1000) */
        if (n > 1000000) rlx__j_fail(rt, RLX_ENOMEM, "indent: a width of %" PRId64 " characters is too large", n);
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
    rj_value lines = rlx__j_splitlines(rt, rj_str(tb.p, tb.n), false);
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

/* do_format: soft_str(value) % (kwargs or args), args a tuple */
static rj_value f_format(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    rj_value s = need_str(E, v);
    if (a->npos && a->nkw) rlx__j_fail(rt, RLX_EINVAL, "can't handle positional and keyword arguments at the same time");
    if (a->nkw) {
        rj_value d = rlx__j_new_dict(rt, a->nkw);
        for (size_t i = 0; i < a->nkw; i++) rlx__j_dict_set(rt, d.d, rj_str(a->kwn[i], a->kwl[i]), a->kwv[i]);
        return rlx__j_percent_format(rt, s, &d, 1, true);
    }
    return rlx__j_percent_format(rt, s, a->pos, a->npos, false);
}

static rj_value f_attr(rj_env *E, rj_value v, const rj_args *a)
{
    const rj_value *n = rlx__j_arg(a, 0, "name");
    if (!n || n->type != RJ_STR) rlx__j_fail(rlx__j_env_rt(E), RLX_EINVAL, "attr needs an attribute name");
    /* attr() reads Python attributes only: a dict's keys are not attributes, its methods are */
    bool found;
    rj_value got = rlx__j_pyattr(E, v, n->s.p, n->s.n, &found);
    if (found) return got;
    return rlx__j_undef_named(rlx__j_env_rt(E), "'%s object' has no attribute '%.*s'", rlx__j_type_name(v), (int)RLX_MIN(n->s.n, (size_t)60), n->s.p);
}

static rj_value f_center(rj_env *E, rj_value v, const rj_args *a)
{
    const rj_value *w = rlx__j_arg(a, 0, "width");
    return rlx__j_pad(rlx__j_env_rt(E), need_str(E, v), 'c', w ? *w : rj_int(80), NULL);
}

static rj_value f_wordwrap(rj_env *E, rj_value v, const rj_args *a) { return rlx__j_f_wordwrap(E, v, a); }

/* do_filesizeformat: decimal (kB, MB, ...) or binary (KiB, MiB, ...) prefixes */
static rj_value f_filesizeformat(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    double bytes; /* float(value), which raises on anything else */
    if (v.type == RJ_STR) {
        rj_value t = rlx__j_strip(rt, v, NULL, 3);
        char *s = rlx__j_strdup(rt, t.s.p, t.s.n), *end;
        bytes = strtod(s, &end);
        if (!t.s.n || end != s + t.s.n || strpbrk(s, "xXpP"))
            rlx__j_fail(rt, RLX_EINVAL, "could not convert string to float: '%.*s'", (int)RLX_MIN(v.s.n, (size_t)60), v.s.p);
    } else if (rlx__j_is_number(v)) {
        bytes = rlx__j_num(v);
    } else {
        rlx__j_fail(rt, RLX_EINVAL, "float() argument must be a string or a real number, not '%s'", rlx__j_type_name(v));
    }
    bool binary = arg_bool(a, 0, "binary", false);
    double base = binary ? 1024 : 1000;
    static const char *const dec[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
    static const char *const bin[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
    char out[64];
    if (bytes == 1) return rj_cstr("1 Byte");
    if (bytes < base) {
        rj_buf b = {0};
        rlx__j_int_str(rt, &b, rlx__j_int_from_double(rt, bytes));
        rlx__j_buf_puts(rt, &b, " Bytes");
        return rj_str(b.p, b.n);
    }
    double unit = base;
    int i;
    for (i = 0; i < 8; i++) {
        unit = pow(base, i + 2);
        if (bytes < unit) break;
    }
    if (i == 8) i = 7;
    snprintf(out, sizeof out, "%.1f %s", base * bytes / unit, binary ? bin[i] : dec[i]);
    return rj_str(rlx__j_strdup(rt, out, strlen(out)), strlen(out));
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
    if (!attr) rlx__j_fail(rt, RLX_EINVAL, "groupby() missing 1 required positional argument: 'attribute'");
    rj_value items = copy_list(E, rlx__j_iter(rt, v));
    size_t n = items.l->n;
    /* sorted by the (lowered) key, then runs of equal keys; the grouper is the first item's
       own key, before lowering */
    rj_value *keys = rlx__j_alloc(rt, (n + 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) keys[i] = rlx__j_attr_key(E, items.l->v[i], attr, dflt, cs);
    rlx__j_sort(rt, items.l->v, keys, n, false);
    rj_value out = rlx__j_new_list(rt, 0);
    for (size_t i = 0; i < n;) {
        rj_value group = rlx__j_new_list(rt, 0);
        size_t j = i;
        while (j < n && rlx__j_equal(keys[j], keys[i])) rlx__j_list_push(rt, group.l, items.l->v[j++]);
        rj_value t = rlx__j_new_list(rt, 2);
        t.tuple = 2;
        rlx__j_list_push(rt, t.l, cs ? keys[i] : rlx__j_attr_key(E, items.l->v[i], attr, dflt, true));
        rlx__j_list_push(rt, t.l, group);
        rlx__j_list_push(rt, out.l, t);
        i = j;
    }
    return out;
}

static rj_value f_select(rj_env *E, rj_value v, const rj_args *a) { return rlx__j_f_select(E, v, a, RJ_GEN_SELECT); }
static rj_value f_reject(rj_env *E, rj_value v, const rj_args *a) { return rlx__j_f_select(E, v, a, RJ_GEN_REJECT); }
static rj_value f_selectattr(rj_env *E, rj_value v, const rj_args *a) { return rlx__j_f_select(E, v, a, RJ_GEN_SELECTATTR); }
static rj_value f_rejectattr(rj_env *E, rj_value v, const rj_args *a) { return rlx__j_f_select(E, v, a, RJ_GEN_REJECTATTR); }

/* Each filter with its parameters after the value, as Jinja2 3.1 declares them (tojson as
 * transformers' does), so that arguments Jinja2 refuses (TypeError) are refused here too rather
 * than ignored ('!': a parameter without a default); "*": it takes *args / **kwargs and checks
 * them itself. */
static const struct { const char *name; filter_fn fn; const char *params; } filters[] = {
    {"groupby", f_groupby, "!attribute,default,case_sensitive"}, {"truncate", f_truncate, "length,killwords,end,leeway"},
    {"wordwrap", f_wordwrap, "width,break_long_words,wrapstring,break_on_hyphens"},
    {"filesizeformat", f_filesizeformat, "binary"}, {"slice", rlx__j_f_slice, "!slices,fill_with"},
    {"batch", rlx__j_f_batch, "!linecount,fill_with"}, {"tojson", f_tojson, "ensure_ascii,indent,separators,sort_keys"},
    {"length", f_length, ""}, {"count", f_length, ""}, {"string", f_string, ""}, {"trim", f_trim, "chars"},
    {"default", f_default, "default_value,boolean"}, {"d", f_default, "default_value,boolean"},
    {"join", f_join, "d,attribute"}, {"lower", f_lower, ""}, {"upper", f_upper, ""}, {"title", f_title, ""},
    {"capitalize", f_capitalize, ""}, {"safe", f_safe, ""}, {"items", rlx__j_f_items, ""}, {"list", f_list, ""},
    {"first", f_first, ""}, {"last", f_last, ""}, {"dictsort", f_dictsort, "case_sensitive,by,reverse"},
    {"sort", f_sort, "reverse,case_sensitive,attribute"}, {"reverse", rlx__j_f_reverse, ""},
    {"unique", rlx__j_f_unique, "case_sensitive,attribute"}, {"min", f_min, "case_sensitive,attribute"},
    {"max", f_max, "case_sensitive,attribute"}, {"sum", f_sum, "attribute,start"}, {"abs", f_abs, ""},
    {"round", f_round, "precision,method"}, {"int", f_int, "default,base"}, {"float", f_float, "default"},
    {"replace", f_replace, "!old,!new,count"}, {"escape", f_escape, ""}, {"e", f_escape, ""},
    {"forceescape", f_forceescape, ""}, {"indent", f_indent, "width,first,blank"}, {"wordcount", f_wordcount, ""},
    {"format", f_format, "*"}, {"attr", f_attr, "!name"}, {"map", rlx__j_f_map, "*"}, {"select", f_select, "*"},
    {"reject", f_reject, "*"}, {"selectattr", f_selectattr, "*"}, {"rejectattr", f_rejectattr, "*"},
    {"center", f_center, "width"}, {"striptags", rlx__j_f_striptags, ""}, {"urlencode", rlx__j_f_urlencode, ""},
};

/* The i-th name of a comma-separated list into out (NUL-terminated); false past its end. */
static bool param_at(const char *list, size_t i, char *out, size_t cap)
{
    for (; i && *list; list++)
        if (*list == ',') i--;
    if (i || !*list) return false;
    list += *list == '!';
    size_t n = strcspn(list, ",");
    snprintf(out, cap, "%.*s", (int)RLX_MIN(n, cap - 1), list);
    return true;
}

/* Jinja2's binding of a call's arguments to the filter's parameters: too many positional
 * arguments, an unknown keyword or one already given by position is its TypeError. */
static void check_params(rj_rt *rt, const char *filter, const char *params, const rj_args *a)
{
    if (!strcmp(params, "*")) return;
    size_t np = params[0] ? 1 : 0, req = 1; /* Python counts the value as the first positional argument */
    for (const char *c = params; *c; c++) np += *c == ',', req += *c == '!';
    if (a->npos > np) {
        if (req == np + 1)
            rlx__j_fail(rt, RLX_EINVAL, "%s() takes %zu positional argument%s but %zu were given", filter, np + 1,
                        np ? "s" : "", a->npos + 1);
        rlx__j_fail(rt, RLX_EINVAL, "%s() takes from %zu to %zu positional arguments but %zu were given", filter, req, np + 1,
                    a->npos + 1);
    }
    for (size_t k = 0; k < a->nkw; k++) {
        char p[48];
        size_t i = 0;
        while (param_at(params, i, p, sizeof p) && (strlen(p) != a->kwl[k] || memcmp(p, a->kwn[k], a->kwl[k]))) i++;
        if (i == np)
            rlx__j_fail(rt, RLX_EINVAL, "%s() got an unexpected keyword argument '%.*s'", filter,
                        (int)RLX_MIN(a->kwl[k], (size_t)60), a->kwn[k]);
        if (i < a->npos)
            rlx__j_fail(rt, RLX_EINVAL, "%s() got multiple values for argument '%s'", filter, p);
    }
}

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
        check_params(rlx__j_env_rt(E), filters[i].name, filters[i].params, a);
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

