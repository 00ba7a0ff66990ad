/* jinja_print.c - values as text, as Python writes them: str() and repr() (floats as Python's
 * shortest round trip), tojson as transformers' filter writes it, and HTML escaping. Split from
 * jinja_value.c, which holds the values themselves. Everything lives in the render's arena. */
#include "models/jinja_ast.h"
#include "models/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <utf8proc.h>

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

