/* jinja_value.c - the render arena, values with Python semantics, str/repr and tojson.
 * See jinja_value.h for ownership (everything lives in the arena). */
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
    v.s.p = rlx__j_strdup(rt, tmp, (size_t)n);
    v.s.n = (size_t)n;
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

/* ---- text conversions ---- */

void rlx__j_float_repr(char *out, size_t cap, double f)
{
    if (isnan(f)) { snprintf(out, cap, "nan"); return; }
    if (isinf(f)) { snprintf(out, cap, f < 0 ? "-inf" : "inf"); return; }
    char tmp[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp = [-]d.ddde[+-]xx: collect the digits and the decimal exponent */
    char digits[24];
    int nd = 0;
    const char *p = tmp;
    bool neg = false;
    if (*p == '-') { neg = true; p++; }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int decpt = exp10 + 1;
    char *o = out;
    size_t left = cap;
#define EMIT(...) do { int k_ = snprintf(o, left, __VA_ARGS__); if (k_ < 0 || (size_t)k_ >= left) return; o += k_; left -= (size_t)k_; } while (0)
    if (neg) EMIT("-");
    if (decpt <= -4 || decpt > 16) {
        EMIT("%c", digits[0]);
        if (nd > 1) EMIT(".%s", digits + 1);
        EMIT("e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (decpt <= 0) {
        EMIT("0.");
        for (int i = 0; i < -decpt; i++) EMIT("0");
        EMIT("%s", digits);
    } else if (decpt >= nd) {
        EMIT("%s", digits);
        for (int i = nd; i < decpt; i++) EMIT("0");
        EMIT(".0");
    } else {
        EMIT("%.*s.%s", decpt, digits, digits + decpt);
    }
#undef EMIT
}

static void put_repr_str(rj_rt *rt, rj_buf *b, const char *s, size_t n)
{
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    rlx__j_buf_put(rt, b, &q, 1);
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            if (c == '\\') rlx__j_buf_puts(rt, b, "\\\\");
            else if (c == (unsigned char)q) { rlx__j_buf_puts(rt, b, "\\"); rlx__j_buf_put(rt, b, &q, 1); }
            else if (c == '\n') rlx__j_buf_puts(rt, b, "\\n");
            else if (c == '\r') rlx__j_buf_puts(rt, b, "\\r");
            else if (c == '\t') rlx__j_buf_puts(rt, b, "\\t");
            else if (c < 0x20 || c == 0x7f) rlx__j_buf_printf(rt, b, "\\x%02x", c);
            else rlx__j_buf_put(rt, b, (const char *)&c, 1);
            i++;
            continue;
        }
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) { rlx__j_buf_printf(rt, b, "\\x%02x", c); i++; continue; }
        utf8proc_category_t cat = utf8proc_category(cp);
        bool printable = !(cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF || cat == UTF8PROC_CATEGORY_CS ||
                           cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CN || cat == UTF8PROC_CATEGORY_ZL ||
                           cat == UTF8PROC_CATEGORY_ZP || cat == UTF8PROC_CATEGORY_ZS);
        if (printable) rlx__j_buf_put(rt, b, s + i, (size_t)k);
        else if (cp <= 0xff) rlx__j_buf_printf(rt, b, "\\x%02x", (unsigned)cp);
        else if (cp <= 0xffff) rlx__j_buf_printf(rt, b, "\\u%04x", (unsigned)cp);
        else rlx__j_buf_printf(rt, b, "\\U%08x", (unsigned)cp);
        i += (size_t)k;
    }
    rlx__j_buf_put(rt, b, &q, 1);
}

static void put_container(rj_rt *rt, rj_buf *b, rj_value v)
{
    if (++rt->depth > RJ_MAX_DEPTH) rlx__j_fail(rt, RLX_ERANGE, "a value nests deeper than %d levels", RJ_MAX_DEPTH);
    if (v.type == RJ_LIST && v.view == RJ_VIEW_RANGE) {
        const int64_t *r = v.l->range;
        if (r[2] == 1) rlx__j_buf_printf(rt, b, "range(%" PRId64 ", %" PRId64 ")", r[0], r[1]);
        else rlx__j_buf_printf(rt, b, "range(%" PRId64 ", %" PRId64 ", %" PRId64 ")", r[0], r[1], r[2]);
    } else if (v.type == RJ_LIST) {
        if (v.view) rlx__j_buf_printf(rt, b, "%s(", rlx__j_type_name(v)); /* dict_keys([...]) */
        rlx__j_buf_puts(rt, b, v.tuple ? "(" : "[");
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) rlx__j_buf_puts(rt, b, ", ");
            rlx__j_repr(rt, b, v.l->v[i]);
        }
        if (v.tuple && v.l->n == 1) rlx__j_buf_puts(rt, b, ",");
        rlx__j_buf_puts(rt, b, v.tuple ? ")" : "]");
        if (v.view) rlx__j_buf_puts(rt, b, ")");
    } else {
        if (v.type == RJ_NS) rlx__j_buf_puts(rt, b, "<Namespace ");
        rlx__j_buf_puts(rt, b, "{");
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) rlx__j_buf_puts(rt, b, ", ");
            rlx__j_repr(rt, b, v.d->k[i]);
            rlx__j_buf_puts(rt, b, ": ");
            rlx__j_repr(rt, b, v.d->v[i]);
        }
        rlx__j_buf_puts(rt, b, v.type == RJ_NS ? "}>" : "}");
    }
    rt->depth--;
}

void rlx__j_str(rj_rt *rt, rj_buf *b, rj_value v)
{
    char num[48];
    switch (v.type) {
    case RJ_UNDEF: return;
    case RJ_NONE: rlx__j_buf_puts(rt, b, "None"); return;
    case RJ_BOOL: rlx__j_buf_puts(rt, b, v.b ? "True" : "False"); return;
    case RJ_INT: snprintf(num, sizeof num, "%" PRId64, v.i); rlx__j_buf_puts(rt, b, num); return;
    case RJ_BIGINT: rlx__j_int_str(rt, b, v); return;
    case RJ_FLOAT: rlx__j_float_repr(num, sizeof num, v.f); rlx__j_buf_puts(rt, b, num); return;
    case RJ_STR: rlx__j_buf_put(rt, b, v.s.p, v.s.n); return;
    case RJ_LIST: case RJ_DICT: case RJ_NS: put_container(rt, b, v); return;
    case RJ_MACRO:
        if (v.m->def->name) rlx__j_buf_printf(rt, b, "<Macro '%.*s'>", (int)v.m->def->nlen, v.m->def->name);
        else rlx__j_buf_puts(rt, b, "<Macro 'caller'>");
        return;
    /* Python adds the object's address here, which no other run can reproduce */
    case RJ_METHOD:
        rlx__j_buf_printf(rt, b, "<built-in method %.*s of %s object>", (int)v.meth->n, v.meth->name, rlx__j_type_name(v.meth->self));
        return;
    case RJ_GEN: rlx__j_buf_printf(rt, b, "<%s object>", v.gen->type_name); return;
    case RJ_FUNC: rlx__j_buf_puts(rt, b, "<built-in function>"); return;
    case RJ_OBJ: rlx__j_buf_puts(rt, b, v.obj->is_cycler ? "<Cycler>" : "<Joiner>"); return;
    default: rlx__j_buf_puts(rt, b, "<LoopContext>"); return;
    }
}

void rlx__j_repr(rj_rt *rt, rj_buf *b, rj_value v)
{
    if (v.type == RJ_STR) put_repr_str(rt, b, v.s.p, v.s.n);
    else if (v.type == RJ_UNDEF) rlx__j_buf_puts(rt, b, "Undefined");
    else rlx__j_str(rt, b, v);
}

rj_value rlx__j_to_str(rj_rt *rt, rj_value v)
{
    if (v.type == RJ_STR) return v;
    rj_buf b = {0};
    rlx__j_str(rt, &b, v);
    return rj_str(b.p ? b.p : "", b.n);
}

static void json_str(rj_rt *rt, rj_buf *b, const char *s, size_t n, bool ascii)
{
    rlx__j_buf_puts(rt, b, "\"");
    size_t run = 0, i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[16];
        size_t adv = 1;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20 || (c == 0x7f && ascii)) { snprintf(tmp, sizeof tmp, "\\u%04x", c); esc = tmp; } /* Python: [^ -~] */
            else if (c >= 0x80 && ascii) { /* ensure_ascii: \uXXXX, astral code points as surrogate pairs */
                utf8proc_int32_t cp;
                utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
                if (k <= 0) { cp = 0xfffd; k = 1; }
                adv = (size_t)k;
                if (cp >= 0x10000) {
                    cp -= 0x10000;
                    snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xd800 + (unsigned)(cp >> 10), 0xdc00 + (unsigned)(cp & 0x3ff));
                } else snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)cp);
                esc = tmp;
            }
        }
        if (esc) {
            rlx__j_buf_put(rt, b, s + run, i - run);
            rlx__j_buf_puts(rt, b, esc);
            run = i + adv;
        }
        i += adv;
    }
    rlx__j_buf_put(rt, b, s + run, n - run);
    rlx__j_buf_puts(rt, b, "\"");
}

static void json_newline(rj_rt *rt, rj_buf *b, const rj_json_opts *o, int level)
{
    rlx__j_buf_puts(rt, b, "\n");
    for (int i = 0; i < level; i++) rlx__j_buf_puts(rt, b, o->indent);
}


void rlx__j_tojson(rj_rt *rt, rj_buf *b, rj_value v, const rj_json_opts *o, int level)
{
    char num[48];
    switch (v.type) {
    case RJ_NONE: rlx__j_buf_puts(rt, b, "null"); return;
    case RJ_BOOL: rlx__j_buf_puts(rt, b, v.b ? "true" : "false"); return;
    case RJ_INT: snprintf(num, sizeof num, "%" PRId64, v.i); rlx__j_buf_puts(rt, b, num); return;
    case RJ_BIGINT: rlx__j_int_str(rt, b, v); return;
    case RJ_FLOAT:
        if (isnan(v.f)) rlx__j_buf_puts(rt, b, "NaN");
        else if (isinf(v.f)) rlx__j_buf_puts(rt, b, v.f < 0 ? "-Infinity" : "Infinity");
        else { rlx__j_float_repr(num, sizeof num, v.f); rlx__j_buf_puts(rt, b, num); }
        return;
    case RJ_STR: json_str(rt, b, v.s.p, v.s.n, o->ensure_ascii); return;
    case RJ_DICT: break;
    case RJ_LIST:
        if (!v.view) break;
        rlx__j_fail(rt, RLX_EINVAL, "tojson: Object of type %s is not JSON serializable", rlx__j_type_name(v));
    default:
        rlx__j_fail(rt, RLX_EINVAL, "tojson: Object of type %s is not JSON serializable", rlx__j_type_name(v));
    }
    if (++rt->depth > RJ_MAX_DEPTH) rlx__j_fail(rt, RLX_ERANGE, "tojson: a value nests deeper than %d levels", RJ_MAX_DEPTH);
    size_t n = v.type == RJ_LIST ? v.l->n : v.d->n;
    rlx__j_buf_puts(rt, b, v.type == RJ_LIST ? "[" : "{");
    if (n == 0) {
        rlx__j_buf_puts(rt, b, v.type == RJ_LIST ? "]" : "}");
        rt->depth--;
        return;
    }
    size_t *order = NULL;
    if (v.type == RJ_DICT) {
        order = rlx__j_alloc(rt, n * sizeof *order);
        for (size_t i = 0; i < n; i++) order[i] = i;
        if (o->sort_keys) {
            rj_value *keys = rlx__j_alloc(rt, n * sizeof *keys), *idx = rlx__j_alloc(rt, n * sizeof *idx);
            for (size_t i = 0; i < n; i++) { keys[i] = v.d->k[i]; idx[i] = rj_int((int64_t)i); }
            rlx__j_sort(rt, idx, keys, n, false);
            for (size_t i = 0; i < n; i++) order[i] = (size_t)idx[i].i;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (i) rlx__j_buf_puts(rt, b, o->item_sep);
        if (o->indent) json_newline(rt, b, o, level + 1);
        if (v.type == RJ_LIST) {
            rlx__j_tojson(rt, b, v.l->v[i], o, level + 1);
        } else {
            rj_value k = v.d->k[order[i]];
            if (k.type == RJ_STR) json_str(rt, b, k.s.p, k.s.n, o->ensure_ascii);
            else if (rlx__j_is_number(k) || k.type == RJ_NONE) {
                rj_buf kb = {0};
                rlx__j_tojson(rt, &kb, k, o, level + 1);
                json_str(rt, b, kb.p, kb.n, false);
            } else rlx__j_fail(rt, RLX_EINVAL, "tojson: keys must be str, int, float, bool or None, not %s", rlx__j_type_name(k));
            rlx__j_buf_puts(rt, b, o->key_sep);
            rlx__j_tojson(rt, b, v.d->v[order[i]], o, level + 1);
        }
    }
    if (o->indent) json_newline(rt, b, o, level);
    rlx__j_buf_puts(rt, b, v.type == RJ_LIST ? "]" : "}");
    rt->depth--;
}

rj_value rlx__j_escape(rj_rt *rt, rj_value v)
{
    if (v.type == RJ_STR && v.safe) return v;
    rj_value s = rlx__j_to_str(rt, v);
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    size_t run = 0;
    for (size_t i = 0; i < s.s.n; i++) {
        const char *rep;
        switch (s.s.p[i]) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&#34;"; break;
        case '\'': rep = "&#39;"; break;
        default: continue;
        }
        rlx__j_buf_put(rt, &b, s.s.p + run, i - run);
        rlx__j_buf_puts(rt, &b, rep);
        run = i + 1;
    }
    rlx__j_buf_put(rt, &b, s.s.p + run, s.s.n - run);
    rj_value r = rj_str(b.p, b.n);
    r.safe = 1;
    return r;
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
