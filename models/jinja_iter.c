/* jinja_iter.c - Jinja2's filters over iterables and the single-use iterators (RJ_GEN) several
 * of them return: map, select, reject, selectattr, rejectattr (lazy, item by item), batch,
 * slice, unique, items and reverse (eager), plus make_attrgetter's dotted paths. A generator
 * cannot be serialised, measured or indexed, and is spent once iterated, as in Python. */
#include "models/jinja_text.h"

#include <stdlib.h>
#include <utf8proc.h>

rj_value rlx__j_gen_of(rj_rt *rt, rj_list *items, const char *type_name)
{
    rj_value g = {0};
    g.type = RJ_GEN;
    g.gen = rlx__j_alloc(rt, sizeof *g.gen);
    g.gen->type_name = type_name;
    g.gen->kind = RJ_GEN_EAGER;
    g.gen->items = items;
    g.gen->started = true;
    return g;
}

static bool arg_bool(const rj_args *a, int idx, const char *name, bool dflt)
{
    const rj_value *v = rlx__j_arg(a, idx, name);
    return v ? rlx__j_truthy(*v) : dflt;
}

/* _prepare_attribute_parts: int(x) for a part where x.isdigit(); Python's int() reads any
 * Unicode decimal digits (Nd, which come in runs of ten from zero) and refuses other digits */
static rj_value digit_part(rj_rt *rt, const char *p, size_t n)
{
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)p + i, (utf8proc_ssize_t)(n - i), &c);
        if (k <= 0 || utf8proc_category(c) != UTF8PROC_CATEGORY_ND)
            rlx__j_fail(rt, RLX_EINVAL, "invalid literal for int() with base 10: '%.*s'", (int)RLX_MIN(n, (size_t)60), p);
        int32_t start = c;
        while (c - start < 200 && utf8proc_category(start - 1) == UTF8PROC_CATEGORY_ND) start--;
        char d = (char)('0' + (c - start) % 10);
        rlx__j_buf_put(rt, &b, &d, 1);
        i += (size_t)k;
    }
    return rlx__j_int_parse(rt, b.p, b.n, 10);
}

/* environment.getitem over each part: "a.0.b" splits at dots, parts that are digits are
 * indexes; None is the item itself. dflt (not None) replaces an undefined after each step. */
static rj_value attr_parts(rj_env *E, rj_value item, rj_value attr, const rj_value *dflt)
{
    if (attr.type == RJ_NONE) return item;
    if (attr.type != RJ_STR) {
        item = rlx__j_getitem(E, item, attr);
        return item.type == RJ_UNDEF && dflt && dflt->type != RJ_NONE ? *dflt : item;
    }
    const char *p = attr.s.p, *e = p + attr.s.n;
    for (;;) {
        const char *d = memchr(p, '.', (size_t)(e - p));
        if (!d) d = e;
        size_t n = (size_t)(d - p);
        bool digits = n > 0, ascii = true;
        for (size_t i = 0; i < n; i++) {
            digits = digits && p[i] >= '0' && p[i] <= '9';
            ascii = ascii && (unsigned char)p[i] < 0x80;
        }
        rj_value key = rj_str(p, n);
        if (digits) key = rlx__j_int_parse(rlx__j_env_rt(E), p, n, 10);
        else if (!ascii && rlx__j_str_is(key, STR_ISDIGIT)) key = digit_part(rlx__j_env_rt(E), p, n);
        item = rlx__j_getitem(E, item, key);
        if (item.type == RJ_UNDEF && dflt && dflt->type != RJ_NONE) item = *dflt;
        if (d == e) break;
        p = d + 1;
    }
    return item;
}

/* make_attrgetter(attribute, postprocess=ignore_case unless case_sensitive, default) */
rj_value rlx__j_attr_key(rj_env *E, rj_value item, const rj_value *attr, const rj_value *dflt, bool case_sensitive)
{
    rj_value k = attr ? attr_parts(E, item, *attr, dflt) : item;
    return !case_sensitive && k.type == RJ_STR ? rlx__j_case(rlx__j_env_rt(E), k, CASE_LOWER) : k;
}

/* make_multi_attrgetter: a string attribute is split at commas into paths; the key is the
 * list of their values (compared as Python compares lists) */
rj_value rlx__j_multi_attr_key(rj_env *E, rj_value item, const rj_value *attr, bool case_sensitive)
{
    rj_rt *rt = rlx__j_env_rt(E);
    rj_value key = rlx__j_new_list(rt, 1);
    if (!attr || attr->type != RJ_STR) {
        rlx__j_list_push(rt, key.l, rlx__j_attr_key(E, item, attr, NULL, case_sensitive));
        return key;
    }
    const char *p = attr->s.p, *e = p + attr->s.n;
    for (;;) {
        const char *c = memchr(p, ',', (size_t)(e - p));
        if (!c) c = e;
        rj_value part = rj_str(p, (size_t)(c - p));
        rlx__j_list_push(rt, key.l, rlx__j_attr_key(E, item, &part, NULL, case_sensitive));
        if (c == e) break;
        p = c + 1;
    }
    return key;
}

rj_value rlx__j_attr_getter(rj_env *E, rj_value item, rj_value attr) { return attr_parts(E, item, attr, NULL); }

static rj_value lazy(rj_env *E, int kind, rj_value src, const rj_args *a)
{
    rj_value g = rlx__j_gen_of(rlx__j_env_rt(E), NULL, "generator");
    g.gen->kind = kind;
    g.gen->started = false;
    g.gen->env = E;
    g.gen->src = src;
    g.gen->args = *a;
    return g;
}

rj_value rlx__j_f_map(rj_env *E, rj_value v, const rj_args *a) { return lazy(E, RJ_GEN_MAP, v, a); }
rj_value rlx__j_f_select(rj_env *E, rj_value v, const rj_args *a, int kind) { return lazy(E, kind, v, a); }

/* the next item of the source of a lazy generator */
static bool src_next(rj_rt *rt, rj_gen *g, rj_value *out)
{
    if (!g->items) return rlx__j_gen_next(rt, g->src.gen, out);
    if (g->pos >= g->items->n) return false;
    *out = g->items->v[g->pos++];
    return true;
}

/* One step of prepare_map / prepare_select_or_reject, applied to x; false: skip it. */
static bool apply(rj_rt *rt, rj_gen *g, rj_value x, rj_value *out)
{
    rj_env *E = g->env;
    const rj_args *a = &g->args;
    if (g->kind == RJ_GEN_MAP) {
        const rj_value *attr = rlx__j_arg(a, -1, "attribute");
        if (!a->npos && attr) {
            *out = attr_parts(E, x, *attr, rlx__j_arg(a, -1, "default"));
            return true;
        }
        if (!a->npos) rlx__j_fail(rt, RLX_EINVAL, "map requires a filter argument");
        if (a->pos[0].type != RJ_STR) rlx__j_fail(rt, RLX_EINVAL, "map: the filter name must be a string");
        rj_args rest = *a;
        rest.pos++;
        rest.npos--;
        *out = rlx__j_filter(E, a->pos[0].s.p, a->pos[0].s.n, x, &rest);
        return true;
    }
    bool by_attr = g->kind == RJ_GEN_SELECTATTR || g->kind == RJ_GEN_REJECTATTR;
    bool keep = g->kind == RJ_GEN_SELECT || g->kind == RJ_GEN_SELECTATTR;
    size_t off = by_attr ? 1 : 0;
    if (by_attr && a->npos < 1) rlx__j_fail(rt, RLX_EINVAL, "Missing parameter for attribute name");
    rj_value t = by_attr ? attr_parts(E, x, a->pos[0], NULL) : x;
    bool ok;
    if (a->npos > off) {
        const rj_value *test = &a->pos[off];
        if (test->type != RJ_STR) rlx__j_fail(rt, RLX_EINVAL, "the test name must be a string");
        rj_args rest = *a;
        rest.pos += off + 1;
        rest.npos -= off + 1;
        ok = rlx__j_test(E, test->s.p, test->s.n, t, &rest);
    } else {
        ok = rlx__j_truthy(t);
    }
    if (ok != keep) return false;
    *out = x;
    return true;
}

bool rlx__j_gen_next(rj_rt *rt, rj_gen *g, rj_value *out)
{
    if (g->done) return false;
    if (!g->started) {
        g->started = true;
        /* Jinja2's `if value:` guards the loop; a generator source is always true */
        if (!rlx__j_truthy(g->src)) { g->done = true; return false; }
        if (g->src.type != RJ_GEN) g->items = rlx__j_iter(rt, g->src);
    }
    if (g->kind == RJ_GEN_EAGER) {
        if (g->pos < g->items->n) { *out = g->items->v[g->pos++]; return true; }
        g->done = true;
        return false;
    }
    rj_value x;
    while (src_next(rt, g, &x))
        if (apply(rt, g, x, out)) return true;
    g->done = true;
    return false;
}

/* ---- eager ones ---- */

rj_value rlx__j_f_batch(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    const rj_value *c = rlx__j_arg(a, 0, "linecount"), *fill = rlx__j_arg(a, 1, "fill_with");
    if (!c || !rlx__j_is_int(c->type == RJ_BOOL ? rj_int(c->b) : *c) || c->type == RJ_BIGINT)
        rlx__j_fail(rt, RLX_EINVAL, "batch needs an integer count");
    int64_t count = c->type == RJ_INT ? c->i : c->b;
    rj_list *l = rlx__j_iter(rt, v);
    rj_value r = rlx__j_new_list(rt, 0), cur = rlx__j_new_list(rt, 0);
    for (size_t i = 0; i < l->n; i++) {
        if ((int64_t)cur.l->n == count) { rlx__j_list_push(rt, r.l, cur); cur = rlx__j_new_list(rt, 0); }
        rlx__j_list_push(rt, cur.l, l->v[i]);
    }
    if (cur.l->n) {
        while (fill && fill->type != RJ_NONE && (int64_t)cur.l->n < count) rlx__j_list_push(rt, cur.l, *fill);
        rlx__j_list_push(rt, r.l, cur);
    }
    return rlx__j_gen_of(rt, r.l, "generator");
}

rj_value rlx__j_f_slice(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    const rj_value *c = rlx__j_arg(a, 0, "slices"), *fill = rlx__j_arg(a, 1, "fill_with");
    if (!c || (c->type != RJ_INT && c->type != RJ_BOOL)) rlx__j_fail(rt, RLX_EINVAL, "slice needs an integer count");
    int64_t slices = c->type == RJ_INT ? c->i : c->b;
    rj_list *seq = rlx__j_iter(rt, v);
    if (slices == 0) rlx__j_fail(rt, RLX_EINVAL, "integer division or modulo by zero");
    if (slices < 0 || slices > 1000000) rlx__j_fail(rt, RLX_EINVAL, "slice: the count must be between 1 and 1000000");
    int64_t len = (int64_t)seq->n, per = len / slices, extra = len % slices, offset = 0;
    rj_value r = rlx__j_new_list(rt, (size_t)slices);
    for (int64_t k = 0; k < slices; k++) {
        int64_t start = offset + k * per;
        if (k < extra) offset++;
        int64_t end = offset + (k + 1) * per;
        rj_value tmp = rlx__j_new_list(rt, (size_t)(end - start + 1));
        for (int64_t i = start; i < end; i++) rlx__j_list_push(rt, tmp.l, seq->v[i]);
        if (fill && fill->type != RJ_NONE && k >= extra) rlx__j_list_push(rt, tmp.l, *fill);
        rlx__j_list_push(rt, r.l, tmp);
    }
    return rlx__j_gen_of(rt, r.l, "generator");
}

/* the type name of what makes k unusable in a set (a list, a dict, or a tuple holding one) */
static const char *unhashable(rj_value k, int depth)
{
    if (k.type == RJ_DICT || (k.type == RJ_LIST && !k.tuple && k.view != RJ_VIEW_RANGE)) return rlx__j_type_name(k);
    if (k.type == RJ_LIST && k.tuple)
        for (size_t i = 0; i < k.l->n && depth < RJ_MAX_DEPTH; i++) {
            const char *bad = unhashable(k.l->v[i], depth + 1);
            if (bad) return bad;
        }
    return NULL;
}

/* unique: the first item of each key (make_attrgetter with ignore_case), keys in a set */
rj_value rlx__j_f_unique(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    rj_list *l = rlx__j_iter(rt, v);
    bool cs = arg_bool(a, 0, "case_sensitive", false);
    const rj_value *attr = rlx__j_arg(a, 1, "attribute");
    rj_value r = rlx__j_new_list(rt, l->n), seen = rlx__j_new_dict(rt, l->n);
    for (size_t i = 0; i < l->n; i++) {
        rj_value k = rlx__j_attr_key(E, l->v[i], attr, NULL, cs);
        const char *bad = unhashable(k, 0);
        if (bad) rlx__j_fail(rt, RLX_EINVAL, "unhashable type: '%s'", bad);
        if (rlx__j_dict_get(seen.d, k)) continue;
        rlx__j_dict_set(rt, seen.d, k, rj_none());
        rlx__j_list_push(rt, r.l, l->v[i]);
    }
    return rlx__j_gen_of(rt, r.l, "generator");
}

rj_value rlx__j_f_items(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    rj_rt *rt = rlx__j_env_rt(E);
    rj_value r = rlx__j_new_list(rt, 0);
    if (v.type != RJ_UNDEF) {
        if (v.type != RJ_DICT) rlx__j_fail(rt, RLX_EINVAL, "items: Can only get item pairs from a mapping, not %s", rlx__j_type_name(v));
        for (size_t i = 0; i < v.d->n; i++) {
            rj_value t = rlx__j_new_list(rt, 2);
            t.tuple = 1;
            rlx__j_list_push(rt, t.l, v.d->k[i]);
            rlx__j_list_push(rt, t.l, v.d->v[i]);
            rlx__j_list_push(rt, r.l, t);
        }
    }
    return rlx__j_gen_of(rt, r.l, "generator");
}

/* do_reverse: a string reversed; reversed(value) where Python has it (an iterator); else a list */
rj_value rlx__j_f_reverse(rj_env *E, rj_value v, const rj_args *a)
{
    (void)a;
    rj_rt *rt = rlx__j_env_rt(E);
    if (v.type != RJ_STR && v.type != RJ_LIST && v.type != RJ_DICT && v.type != RJ_GEN && v.type != RJ_UNDEF)
        rlx__j_fail(rt, RLX_EINVAL, "reverse: argument must be iterable");
    rj_list *l = rlx__j_iter(rt, v);
    if (v.type == RJ_STR) {
        rj_buf b = {0};
        rlx__j_buf_put(rt, &b, "", 0);
        for (size_t i = l->n; i-- > 0;) rlx__j_buf_put(rt, &b, l->v[i].s.p, l->v[i].s.n);
        return rj_str(b.p, b.n);
    }
    rj_value r = rlx__j_new_list(rt, l->n);
    for (size_t i = l->n; i-- > 0;) rlx__j_list_push(rt, r.l, l->v[i]);
    if (v.type == RJ_GEN || v.type == RJ_UNDEF) return r; /* not reversible: list(value), reversed */
    static const char *const names[] = {"list_reverseiterator", "dict_reversekeyiterator", "dict_reversevalueiterator",
                                        "dict_reverseitemiterator", "range_iterator"};
    const char *name = v.type == RJ_DICT ? "dict_reversekeyiterator" : v.tuple ? "reversed" : names[v.view];
    return rlx__j_gen_of(rt, r.l, name);
}
