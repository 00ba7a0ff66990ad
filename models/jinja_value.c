/* jinja_value.c - the render arena and values with Python semantics (lists, dicts, equality,
 * order, truth); their text forms are in jinja_print.c. See jinja_value.h for ownership
 * (everything lives in the arena). */
#include "models/jinja_ast.h"
#include "models/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <utf8proc.h>

struct rj_chunk { rj_chunk *next; size_t size, used; _Alignas(16) unsigned char data[]; };

void rlx__j_fail(rj_rt *rt, int code, const char *fmt, ...)
{
    if (rt->err) {
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (rt->line > 0) rlx_errorf(rt->err, code, "chat template line %d: %s", rt->line, msg);
        else rlx_errorf(rt->err, code, "chat template: %s", msg);
    }
    rt->code = code;
    longjmp(rt->jb, 1);
}

void *rlx__j_alloc(rj_rt *rt, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n > rt->limit || rt->used > rt->limit - n)
        rlx__j_fail(rt, RLX_ENOMEM, "rendering needs more than %zu MiB; the template or its context is too large",
                    rt->limit >> 20);
    rj_chunk *c = rt->chunks;
    if (!c || c->size - c->used < n) {
        size_t size = n > (1u << 16) ? n : (1u << 16);
        rj_chunk *nc = malloc(sizeof *nc + size);
        if (!nc) rlx__j_fail(rt, RLX_ENOMEM, "out of memory while rendering the chat template");
        nc->size = size;
        nc->used = 0;
        if (c && n > (1u << 16)) { /* a big block: link it behind the current chunk */
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            rt->chunks = nc;
        }
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    rt->used += n;
    memset(p, 0, n);
    return p;
}

void rlx__j_arena_free(rj_rt *rt)
{
    rj_chunk *c = rt->chunks;
    while (c) {
        rj_chunk *n = c->next;
        free(c);
        c = n;
    }
    rt->chunks = NULL;
    rt->used = 0;
    memset(rt->undef_seen, 0, sizeof rt->undef_seen); /* they pointed into the chunks */
}

char *rlx__j_strdup(rj_rt *rt, const char *p, size_t n)
{
    char *s = rlx__j_alloc(rt, n + 1);
    if (n) memcpy(s, p, n);
    s[n] = 0;
    return s;
}

void rlx__j_buf_put(rj_rt *rt, rj_buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = rlx__j_alloc(rt, cap);
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void rlx__j_buf_printf(rj_rt *rt, rj_buf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) { rlx__j_buf_put(rt, b, tmp, (size_t)n); return; }
    char *big = rlx__j_alloc(rt, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    rlx__j_buf_put(rt, b, big, (size_t)n);
}

rj_value rlx__j_undef_named(rj_rt *rt, const char *fmt, ...)
{
    char tmp[200];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof tmp) n = sizeof tmp - 1;
    rj_value v = rj_undef();
    v.s.n = (size_t)n;
    /* the same message again (msg.tool_calls of every user message, in a loop run per message)
       shares its copy: the arena frees nothing before the render ends */
    for (size_t k = 0; k < RLX_ARRAY_LEN(rt->undef_seen); k++)
        if (rt->undef_seen[k].p && rt->undef_seen[k].n == (size_t)n && !memcmp(rt->undef_seen[k].p, tmp, (size_t)n)) {
            v.s.p = rt->undef_seen[k].p;
            return v;
        }
    v.s.p = rlx__j_strdup(rt, tmp, (size_t)n);
    rt->undef_seen[rt->undef_next++ % RLX_ARRAY_LEN(rt->undef_seen)].p = v.s.p;
    rt->undef_seen[(rt->undef_next - 1) % RLX_ARRAY_LEN(rt->undef_seen)].n = (size_t)n;
    return v;
}

rj_value rlx__j_new_list(rj_rt *rt, size_t cap)
{
    rj_value v = {0};
    v.type = RJ_LIST;
    v.l = rlx__j_alloc(rt, sizeof *v.l);
    if (cap) v.l->v = rlx__j_alloc(rt, cap * sizeof(rj_value));
    v.l->cap = cap;
    return v;
}

rj_value rlx__j_new_dict(rj_rt *rt, size_t cap)
{
    rj_value v = {0};
    v.type = RJ_DICT;
    v.d = rlx__j_alloc(rt, sizeof *v.d);
    if (cap) {
        v.d->k = rlx__j_alloc(rt, cap * sizeof(rj_value));
        v.d->v = rlx__j_alloc(rt, cap * sizeof(rj_value));
    }
    v.d->cap = cap;
    return v;
}

void rlx__j_list_push(rj_rt *rt, rj_list *l, rj_value v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        rj_value *nv = rlx__j_alloc(rt, cap * sizeof *nv);
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

enum { DICT_INDEX_MIN = 16 };

/* Hash of a key consistent with rlx__j_equal (1 == 1.0 == True hash alike). */
static uint64_t key_hash(rj_value k)
{
    uint64_t h = 1469598103934665603ull;
    switch (k.type) {
    case RJ_STR:
        for (size_t i = 0; i < k.s.n; i++) h = (h ^ (unsigned char)k.s.p[i]) * 1099511628211ull;
        return h;
    case RJ_INT: case RJ_BOOL: case RJ_FLOAT: case RJ_BIGINT: {
        double d = rlx__j_num(k);
        if (d == floor(d) && fabs(d) < 9.2e18) return (uint64_t)(int64_t)d * 0x9e3779b97f4a7c15ull;
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        return bits * 0x9e3779b97f4a7c15ull;
    }
    default: return (uint64_t)k.type; /* None, lists, ...: all collide, equality decides */
    }
}

static void index_rebuild(rj_rt *rt, rj_dict *d, size_t cap)
{
    d->index = rlx__j_alloc(rt, cap * sizeof *d->index);
    d->index_cap = cap;
    for (size_t i = 0; i < d->n; i++) {
        size_t slot = (size_t)key_hash(d->k[i]) & (cap - 1);
        while (d->index[slot]) slot = (slot + 1) & (cap - 1);
        d->index[slot] = (uint32_t)(i + 1);
    }
}

static rj_value *dict_find(const rj_dict *d, rj_value k, uint64_t h)
{
    if (d->index) {
        size_t slot = (size_t)h & (d->index_cap - 1);
        for (uint32_t e; (e = d->index[slot]); slot = (slot + 1) & (d->index_cap - 1))
            if (rlx__j_equal(d->k[e - 1], k)) return &d->v[e - 1];
        return NULL;
    }
    for (size_t i = 0; i < d->n; i++)
        if (rlx__j_equal(d->k[i], k)) return &d->v[i];
    return NULL;
}

rj_value *rlx__j_dict_get(const rj_dict *d, rj_value k) { return dict_find(d, k, d->index ? key_hash(k) : 0); }

rj_value *rlx__j_dict_gets(const rj_dict *d, const char *key, size_t n)
{
    if (d->index) return rlx__j_dict_get(d, rj_str(key, n));
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].type == RJ_STR && d->k[i].s.n == n && !memcmp(d->k[i].s.p, key, n)) return &d->v[i];
    return NULL;
}

void rlx__j_dict_set(rj_rt *rt, rj_dict *d, rj_value k, rj_value v)
{
    uint64_t h = key_hash(k);
    rj_value *slot = dict_find(d, k, h);
    if (slot) { *slot = v; return; }
    if (d->n >= UINT32_MAX - 1) rlx__j_fail(rt, RLX_ERANGE, "a dict has too many keys");
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        rj_value *nk = rlx__j_alloc(rt, cap * sizeof *nk), *nv = rlx__j_alloc(rt, cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
    if (d->n >= DICT_INDEX_MIN && d->n * 2 > d->index_cap) {
        size_t cap = 64;
        while (cap < d->n * 4) cap *= 2;
        index_rebuild(rt, d, cap);
    } else if (d->index) {
        size_t s2 = (size_t)h & (d->index_cap - 1);
        while (d->index[s2]) s2 = (s2 + 1) & (d->index_cap - 1);
        d->index[s2] = (uint32_t)d->n;
    }
}

void rlx__j_sort(rj_rt *rt, rj_value *v, rj_value *keys, size_t n, bool reverse)
{
    if (n < 2) return;
    rj_value *tv = rlx__j_alloc(rt, n * sizeof *tv), *tk = rlx__j_alloc(rt, n * sizeof *tk);
    for (size_t width = 1; width < n; width *= 2) { /* bottom-up merge: stable, no recursion */
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = RLX_MIN(lo + width, n), hi = RLX_MIN(lo + 2 * width, n), i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                int c = rlx__j_compare(rt, keys[j], keys[i]);
                bool take_right = reverse ? c > 0 : c < 0;
                if (take_right) { tv[o] = v[j]; tk[o++] = keys[j++]; }
                else { tv[o] = v[i]; tk[o++] = keys[i++]; }
            }
            while (i < mid) { tv[o] = v[i]; tk[o++] = keys[i++]; }
            while (j < hi) { tv[o] = v[j]; tk[o++] = keys[j++]; }
        }
        memcpy(v, tv, n * sizeof *v);
        memcpy(keys, tk, n * sizeof *keys);
    }
}

/* Python's json: a literal with a fraction or exponent (or NaN/Infinity) is a float, any other
 * an exact int. Numbers made by cJSON_Create* carry no literal: integral ones become ints. */
static rj_value number_from_json(rj_rt *rt, const cJSON *j)
{
    const char *lit = j->valuestring;
    if (!lit) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9.007199254740992e15) return rj_int((int64_t)d);
        return rj_float(d);
    }
    size_t n = strlen(lit);
    if (strpbrk(lit, ".eEIN")) return rj_float(strtod(lit, NULL));
    if (n <= 18) return rj_int(strtoll(lit, NULL, 10));
    return rlx__j_int_parse(rt, lit, n, 10);
}

static rj_value string_from_json(rj_rt *rt, const cJSON *j)
{
    if (j->valueint != RLX_JSON_STR_NUL) return rj_cstr(j->valuestring);
    /* NULs were stored as C0 80 (models/json.h) */
    size_t n = strlen(j->valuestring), o = 0;
    char *p = rlx__j_alloc(rt, n + 1);
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)j->valuestring[i] == 0xc0 && i + 1 < n && (unsigned char)j->valuestring[i + 1] == 0x80) {
            p[o++] = 0;
            i++;
        } else {
            p[o++] = j->valuestring[i];
        }
    }
    return rj_str(p, o);
}

rj_value rlx__j_from_json(rj_rt *rt, const cJSON *j)
{
    if (++rt->depth > RJ_MAX_DEPTH) rlx__j_fail(rt, RLX_ERANGE, "the context nests deeper than %d levels", RJ_MAX_DEPTH);
    rj_value v = rj_none();
    if (cJSON_IsBool(j)) v = rj_bool(cJSON_IsTrue(j));
    else if (cJSON_IsNumber(j)) v = number_from_json(rt, j);
    else if (cJSON_IsString(j)) v = string_from_json(rt, j);
    else if (cJSON_IsArray(j)) {
        v = rlx__j_new_list(rt, (size_t)cJSON_GetArraySize(j));
        for (const cJSON *c = j->child; c; c = c->next) rlx__j_list_push(rt, v.l, rlx__j_from_json(rt, c));
    } else if (cJSON_IsObject(j)) {
        v = rlx__j_new_dict(rt, (size_t)cJSON_GetArraySize(j));
        for (const cJSON *c = j->child; c; c = c->next)
            rlx__j_dict_set(rt, v.d, rj_cstr(c->string ? c->string : ""), rlx__j_from_json(rt, c));
    }
    rt->depth--;
    return v;
}

bool rlx__j_truthy(rj_value v)
{
    switch (v.type) {
    case RJ_UNDEF: case RJ_NONE: return false;
    case RJ_BOOL: return v.b;
    case RJ_INT: return v.i != 0;
    case RJ_FLOAT: return v.f != 0.0;
    case RJ_STR: return v.s.n != 0;
    case RJ_LIST: return v.l->n != 0;
    case RJ_DICT: return v.d->n != 0;
    default: return true;
    }
}

bool rlx__j_is_number(rj_value v) { return v.type == RJ_FLOAT || rlx__j_is_int(v); }

double rlx__j_num(rj_value v)
{
    return v.type == RJ_FLOAT ? v.f : rlx__j_is_int(v) ? rlx__j_int_to_double(v) : 0.0;
}

/* <0, 0, >0, or 2 when unordered (NaN), for two numbers */
static int num_cmp(rj_value a, rj_value b)
{
    if (a.type != RJ_FLOAT && b.type != RJ_FLOAT) return rlx__j_int_cmp(a, b);
    if (a.type == RJ_FLOAT && b.type == RJ_FLOAT) {
        if (isnan(a.f) || isnan(b.f)) return 2;
        return (a.f > b.f) - (a.f < b.f);
    }
    if (a.type == RJ_FLOAT) {
        int c = rlx__j_int_cmp_float(b, a.f);
        return c == 2 ? 2 : -c;
    }
    return rlx__j_int_cmp_float(a, b.f);
}

/* One pair: whether it can be equal, its children (lists, dicts) pushed for the caller. */
typedef struct eq_pair { rj_value a, b; } eq_pair;
typedef struct eq_stack { eq_pair *p; size_t n, cap; bool oom; } eq_stack;

static void eq_push(eq_stack *st, rj_value a, rj_value b)
{
    if (st->n == st->cap) {
        size_t nc = st->cap ? 2 * st->cap : 64;
        eq_pair *np = realloc(st->p, nc * sizeof *np);
        if (!np) { st->oom = true; return; }
        st->p = np;
        st->cap = nc;
    }
    st->p[st->n++] = (eq_pair){a, b};
}

static bool equal_one(rj_value a, rj_value b, eq_stack *st)
{
    if (rlx__j_is_number(a) && rlx__j_is_number(b)) return num_cmp(a, b) == 0;
    if (a.type != b.type) return false;
    switch (a.type) {
    case RJ_UNDEF: case RJ_NONE: return true;
    case RJ_STR: return a.s.n == b.s.n && (a.s.n == 0 || !memcmp(a.s.p, b.s.p, a.s.n));
    case RJ_LIST:
        if (a.tuple != b.tuple || a.view != b.view || a.l->n != b.l->n) return false;
        for (size_t i = a.l->n; i-- > 0;) eq_push(st, a.l->v[i], b.l->v[i]); /* compared first to last */
        return !st->oom;
    case RJ_DICT:
        if (a.d->n != b.d->n) return false;
        for (size_t i = a.d->n; i-- > 0;) {
            rj_value *o = rlx__j_dict_get(b.d, a.d->k[i]);
            if (!o) return false;
            eq_push(st, a.d->v[i], *o);
        }
        return !st->oom;
    case RJ_NS: return a.d == b.d;
    case RJ_MACRO: return a.m == b.m;
    case RJ_FUNC: return a.fn == b.fn;
    case RJ_LOOP: return a.loop == b.loop;
    case RJ_OBJ: return a.obj == b.obj;
    case RJ_GEN: return a.gen == b.gen;
    case RJ_METHOD: return a.meth == b.meth;
    default: return false;
    }
}

/* Python's ==, containers compared through an explicit stack: any depth (values nested past
 * 600 levels compared unequal, where Python compares them; `in` with them too). */
bool rlx__j_equal(rj_value a, rj_value b)
{
    eq_stack st = {0};
    bool eq = equal_one(a, b, &st);
    while (eq && st.n) {
        eq_pair x = st.p[--st.n];
        eq = equal_one(x.a, x.b, &st);
    }
    free(st.p);
    return eq;
}

const char *rlx__j_type_name(rj_value v)
{
    switch (v.type) {
    case RJ_UNDEF: return "Undefined";
    case RJ_NONE: return "NoneType";
    case RJ_BOOL: return "bool";
    case RJ_INT: return "int";
    case RJ_FLOAT: return "float";
    case RJ_STR: return "str";
    case RJ_LIST: {
        static const char *const views[] = {"list", "dict_keys", "dict_values", "dict_items", "range"};
        return v.tuple ? "tuple" : views[v.view];
    }
    case RJ_BIGINT: return "int";
    case RJ_METHOD: return "builtin_function_or_method";
    case RJ_GEN: return v.gen->type_name;
    case RJ_DICT: return "dict";
    case RJ_NS: return "Namespace";
    case RJ_MACRO: return "Macro";
    case RJ_FUNC: return "function";
    case RJ_OBJ: return v.obj->is_cycler ? "Cycler" : "Joiner";
    default: return "LoopContext";
    }
}

int rlx__j_compare(rj_rt *rt, rj_value a, rj_value b)
{
    if (rlx__j_is_number(a) && rlx__j_is_number(b)) {
        int c = num_cmp(a, b);
        return c == 2 ? 0 : c; /* NaN: neither order holds; callers see "equal" */
    }
    if (a.type == RJ_STR && b.type == RJ_STR) {
        size_t n = RLX_MIN(a.s.n, b.s.n);
        int c = n ? memcmp(a.s.p, b.s.p, n) : 0;
        if (c) return c;
        return (a.s.n > b.s.n) - (a.s.n < b.s.n);
    }
    if (a.type == RJ_LIST && b.type == RJ_LIST && a.tuple == b.tuple) {
        size_t n = RLX_MIN(a.l->n, b.l->n);
        for (size_t i = 0; i < n; i++) {
            if (rlx__j_equal(a.l->v[i], b.l->v[i])) continue;
            if (++rt->depth > RJ_MAX_DEPTH) rlx__j_fail(rt, RLX_ERANGE, "compared values nest deeper than %d levels", RJ_MAX_DEPTH);
            int c = rlx__j_compare(rt, a.l->v[i], b.l->v[i]);
            rt->depth--;
            return c;
        }
        return (a.l->n > b.l->n) - (a.l->n < b.l->n);
    }
    /* Undefined's ordering raises its own UndefinedError */
    if (a.type == RJ_UNDEF) rlx__j_fail_undefined(rt, a);
    if (b.type == RJ_UNDEF) rlx__j_fail_undefined(rt, b);
    rlx__j_fail(rt, RLX_EINVAL, "cannot order values of type '%s' and '%s'", rlx__j_type_name(a), rlx__j_type_name(b));
}

size_t rlx__j_utf8_len(const char *p, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)p[i] & 0xc0) != 0x80) c++;
    return c;
}

size_t rlx__j_utf8_off(const char *p, size_t n, size_t idx)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)p[i] & 0xc0) != 0x80) {
            if (c == idx) return i;
            c++;
        }
    }
    return n;
}

rj_list *rlx__j_iter(rj_rt *rt, rj_value v)
{
    rj_value out;
    switch (v.type) {
    case RJ_UNDEF: return rlx__j_new_list(rt, 0).l;
    case RJ_LIST: return v.l;
    case RJ_GEN: { /* takes every item left: the iterator is spent afterwards, as in Python */
        out = rlx__j_new_list(rt, 0);
        rj_value x;
        while (rlx__j_gen_next(rt, v.gen, &x)) rlx__j_list_push(rt, out.l, x);
        return out.l;
    }
    case RJ_DICT:
        out = rlx__j_new_list(rt, v.d->n);
        for (size_t i = 0; i < v.d->n; i++) rlx__j_list_push(rt, out.l, v.d->k[i]);
        return out.l;
    case RJ_STR: {
        out = rlx__j_new_list(rt, v.s.n);
        size_t i = 0;
        while (i < v.s.n) {
            size_t j = i + 1;
            while (j < v.s.n && ((unsigned char)v.s.p[j] & 0xc0) == 0x80) j++;
            rlx__j_list_push(rt, out.l, rj_str(v.s.p + i, j - i));
            i = j;
        }
        return out.l;
    }
    default:
        rlx__j_fail(rt, RLX_EINVAL, "'%s' object is not iterable", rlx__j_type_name(v));
    }
}
