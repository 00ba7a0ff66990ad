/* jinja_ops.c - Python operator semantics on template values: + - * / // % ** and ~, `in`,
 * slicing with negative and stepped bounds (strings by code point), and Markup's escaping `+`. */
#include "models/jinja_text.h"

#include <math.h>
#include <stdio.h>

void rlx__j_fail_undefined(rj_rt *rt, rj_value u)
{
    if (u.s.n) rlx__j_fail(rt, RLX_EINVAL, "%.*s", (int)u.s.n, u.s.p);
    rlx__j_fail(rt, RLX_EINVAL, "a value is undefined");
}

/* Python slice bounds over len elements. */
static void slice_bounds(rj_rt *rt, rj_value lo, rj_value hi, rj_value st, size_t len, int64_t *start, int64_t *stop, int64_t *step)
{
    int64_t L = (int64_t)len;
    *step = 1;
    if (st.type != RJ_NONE && st.type != RJ_UNDEF) {
        if (st.type != RJ_INT) rlx__j_fail(rt, RLX_EINVAL, "slice indices must be integers");
        *step = st.i;
        if (*step == 0) rlx__j_fail(rt, RLX_EINVAL, "slice step cannot be zero");
    }
    rj_value b[2] = {lo, hi};
    int64_t out[2];
    for (int k = 0; k < 2; k++) {
        if (b[k].type == RJ_NONE || b[k].type == RJ_UNDEF) {
            out[k] = *step > 0 ? (k == 0 ? 0 : L) : (k == 0 ? L - 1 : -1);
            continue;
        }
        if (b[k].type != RJ_INT && b[k].type != RJ_BOOL) rlx__j_fail(rt, RLX_EINVAL, "slice indices must be integers or None");
        int64_t v = b[k].type == RJ_INT ? b[k].i : b[k].b;
        if (v < 0) {
            v += L;
            if (v < 0) v = *step > 0 ? 0 : -1;
        } else if (v >= L) {
            v = *step > 0 ? L : L - 1;
        }
        out[k] = v;
    }
    *start = out[0];
    *stop = out[1];
}

rj_value rlx__j_slice(rj_rt *rt, rj_value obj, rj_value lo, rj_value hi, rj_value st)
{
    int64_t a, b, s;
    if (obj.type == RJ_LIST && (!obj.view || obj.view == RJ_VIEW_RANGE)) {
        slice_bounds(rt, lo, hi, st, obj.l->n, &a, &b, &s);
        rj_value r = rlx__j_new_list(rt, 0);
        r.tuple = obj.tuple;
        for (int64_t i = a; s > 0 ? i < b : i > b; i += s) rlx__j_list_push(rt, r.l, obj.l->v[i]);
        return r;
    }
    if (obj.type == RJ_STR) {
        size_t len = rlx__j_utf8_len(obj.s.p, obj.s.n);
        slice_bounds(rt, lo, hi, st, len, &a, &b, &s);
        if (s == 1) {
            if (b <= a) return rj_str("", 0);
            size_t x = rlx__j_utf8_off(obj.s.p, obj.s.n, (size_t)a), y = rlx__j_utf8_off(obj.s.p, obj.s.n, (size_t)b);
            return rj_str(obj.s.p + x, y - x);
        }
        rj_list *chars = rlx__j_iter(rt, obj);
        rj_buf buf = {0};
        rlx__j_buf_put(rt, &buf, "", 0);
        for (int64_t i = a; s > 0 ? i < b : i > b; i += s) rlx__j_buf_put(rt, &buf, chars->v[i].s.p, chars->v[i].s.n);
        return rj_str(buf.p, buf.n);
    }
    if (obj.type == RJ_UNDEF) rlx__j_fail_undefined(rt, obj);
    /* Jinja2's getitem turns the TypeError into an undefined */
    return rlx__j_undef_named(rt, "'%s' object is not subscriptable", rlx__j_type_name(obj));
}


_Noreturn static void bad_operands(rj_rt *rt, const char *op, rj_value a, rj_value b)
{
    if (a.type == RJ_UNDEF) rlx__j_fail_undefined(rt, a);
    if (b.type == RJ_UNDEF) rlx__j_fail_undefined(rt, b);
    if (a.type == RJ_STR && !strcmp(op, "+"))
        rlx__j_fail(rt, RLX_EINVAL, "can only concatenate str (not \"%s\") to str", rlx__j_type_name(b));
    rlx__j_fail(rt, RLX_EINVAL, "unsupported operand type(s) for %s: '%s' and '%s'", op, rlx__j_type_name(a), rlx__j_type_name(b));
}

/* The header before the bytes of a string made by concatenation: `{% set ns.s = ns.s ~ x %}` in
 * a loop (a template building its prompt piece by piece) would copy the whole string each time
 * into the arena, which frees nothing until the render ends: quadratic memory (Reka-Edge failed
 * past ~400 KB of prompt). A string that is the longest use of its buffer (len == its length,
 * self == its bytes: no other value sees bytes past its end) grows in place instead, and a
 * buffer that grows again doubles, so a chain costs linear memory. */
typedef struct rj_grow {
    const char *self;       /* the bytes this header belongs to */
    size_t cap, len;        /* bytes the buffer holds (the NUL included), bytes in use */
} rj_grow;

rj_value rlx__j_concat(rj_rt *rt, rj_value a, rj_value b)
{
    if (a.type == RJ_STR) {
        size_t n = a.s.n + b.s.n;
        rj_grow *h = a.grow ? (rj_grow *)(void *)(a.s.p - sizeof(rj_grow)) : NULL;
        bool mine = h && h->self == a.s.p && h->len == a.s.n;
        if (mine && n < h->cap) {
            char *p = (char *)a.s.p;
            if (b.s.n) memcpy(p + a.s.n, b.s.p, b.s.n);
            p[n] = 0;
            h->len = n;
        } else {
            size_t cap = mine ? 2 * (n + 1) : n + 1; /* a second growth: room for more */
            if (cap < n + 1) rlx__j_fail(rt, RLX_ENOMEM, "a string is too large");
            h = rlx__j_alloc(rt, sizeof *h + cap);
            char *p = (char *)(h + 1);
            if (a.s.n) memcpy(p, a.s.p, a.s.n);
            if (b.s.n) memcpy(p + a.s.n, b.s.p, b.s.n);
            p[n] = 0;
            *h = (rj_grow){.self = p, .cap = cap, .len = n};
        }
        rj_value r = rj_str((const char *)(h + 1), n);
        r.grow = 1;
        return r;
    }
    rj_value r = rlx__j_new_list(rt, a.l->n + b.l->n);
    r.tuple = a.tuple;
    for (size_t i = 0; i < a.l->n; i++) rlx__j_list_push(rt, r.l, a.l->v[i]);
    for (size_t i = 0; i < b.l->n; i++) rlx__j_list_push(rt, r.l, b.l->v[i]);
    return r;
}

static rj_value repeat_seq(rj_rt *rt, rj_value s, int64_t k)
{
    if (k < 0) k = 0;
    size_t unit = s.type == RJ_STR ? s.s.n : s.l->n;
    if (unit && (uint64_t)k > (rt->limit / unit)) rlx__j_fail(rt, RLX_ENOMEM, "sequence repetition is too large");
    if (s.type == RJ_STR) {
        rj_buf b = {0};
        rlx__j_buf_put(rt, &b, "", 0);
        for (int64_t i = 0; i < k; i++) rlx__j_buf_put(rt, &b, s.s.p, s.s.n);
        return rj_str(b.p, b.n);
    }
    rj_value r = rlx__j_new_list(rt, 0);
    r.tuple = s.tuple;
    for (int64_t i = 0; i < k; i++)
        for (size_t j = 0; j < s.l->n; j++) rlx__j_list_push(rt, r.l, s.l->v[j]);
    return r;
}

static int64_t ival(rj_value v) { return v.type == RJ_INT ? v.i : (int64_t)v.b; }
static bool small_int(rj_value v) { return v.type == RJ_INT || v.type == RJ_BOOL; }

rj_value rlx__j_binop(rj_env *E, int op, rj_value a, rj_value b)
{
    rj_rt *rt = rlx__j_env_rt(E);
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
    bool nums = rlx__j_is_number(a) && rlx__j_is_number(b);
    bool ints = nums && a.type != RJ_FLOAT && b.type != RJ_FLOAT;
    switch (op) {
    case OP_ADD:
        if (ints) return rlx__j_int_op(rt, RJ_IADD, a, b);
        if (nums) return rj_float(rlx__j_num(a) + rlx__j_num(b));
        if (a.type == RJ_STR && b.type == RJ_STR && (a.safe || b.safe)) { /* Markup + str escapes the str */
            rj_value r = rlx__j_concat(rt, rlx__j_escape(rt, a), rlx__j_escape(rt, b));
            r.safe = 1;
            return r;
        }
        if ((a.type == RJ_STR && b.type == RJ_STR) || (a.type == RJ_LIST && b.type == RJ_LIST && a.tuple == b.tuple && !a.view && !b.view))
            return rlx__j_concat(rt, a, b);
        break;
    case OP_SUB:
        if (ints) return rlx__j_int_op(rt, RJ_ISUB, a, b);
        if (nums) return rj_float(rlx__j_num(a) - rlx__j_num(b));
        break;
    case OP_MUL:
        if (ints) return rlx__j_int_op(rt, RJ_IMUL, a, b);
        if (nums) return rj_float(rlx__j_num(a) * rlx__j_num(b));
        if (((a.type == RJ_STR || (a.type == RJ_LIST && !a.view)) && rlx__j_is_int(b)) ||
            ((b.type == RJ_STR || (b.type == RJ_LIST && !b.view)) && rlx__j_is_int(a))) {
            bool a_seq = a.type == RJ_STR || a.type == RJ_LIST;
            rj_value seq = a_seq ? a : b, k = a_seq ? b : a;
            if (k.type == RJ_BIGINT) {
                if (k.big->neg) return repeat_seq(rt, seq, 0);
                rlx__j_fail(rt, RLX_ENOMEM, "cannot repeat a sequence that many times");
            }
            return repeat_seq(rt, seq, ival(k));
        }
        break;
    case OP_DIV:
        if (ints) return rj_float(rlx__j_int_truediv(rt, a, b));
        if (nums) {
            if (rlx__j_num(b) == 0.0) rlx__j_fail(rt, RLX_EINVAL, "division by zero");
            return rj_float(rlx__j_num(a) / rlx__j_num(b));
        }
        break;
    case OP_FLOORDIV: case OP_MOD:
        if (nums) {
            if (rlx__j_num(b) == 0.0) rlx__j_fail(rt, RLX_EINVAL, "integer division or modulo by zero");
            if (ints) return rlx__j_int_op(rt, op == OP_MOD ? RJ_IMOD : RJ_IFLOORDIV, a, b);
            /* CPython's float_divmod */
            double x = rlx__j_num(a), y = rlx__j_num(b);
            double m = fmod(x, y), div = (x - m) / y;
            if (m != 0 && ((m < 0) != (y < 0))) { m += y; div -= 1.0; }
            else if (m == 0) m = copysign(0.0, y); /* a zero takes the divisor's sign */
            double fd = floor(div);
            if (div - fd > 0.5) fd += 1.0;
            if (div == 0) fd = copysign(0.0, x / y);
            return rj_float(op == OP_MOD ? m : fd);
        }
        if (op == OP_MOD && a.type == RJ_STR) { /* a tuple's items, or the lone operand */
            if (b.type == RJ_LIST && b.tuple) return rlx__j_percent_format(rt, a, b.l->v, b.l->n, false);
            return rlx__j_percent_format(rt, a, &b, 1, true);
        }
        break;
    case OP_POW:
        if (ints && rlx__j_int_cmp(b, rj_int(0)) >= 0) {
            if (!small_int(b)) { /* only 0, 1 and -1 survive a huge exponent */
                if (small_int(a) && (ival(a) == 0 || ival(a) == 1)) return rj_int(ival(a));
                if (small_int(a) && ival(a) == -1) return rj_int(b.big->d[0] & 1 ? -1 : 1);
                rlx__j_fail(rt, RLX_ERANGE, "integer result has more than %d digits (Python will not print it either)", RJ_INT_MAX_DIGITS);
            }
            return rlx__j_int_pow(rt, a, ival(b));
        }
        if (nums) return rj_float(pow(rlx__j_num(a), rlx__j_num(b)));
        break;
    }
    bad_operands(rt, names[op], a, b);
}

bool rlx__j_contains(rj_rt *rt, rj_value needle, rj_value hay)
{
    switch (hay.type) {
    case RJ_UNDEF: return false;
    case RJ_STR:
        if (needle.type != RJ_STR)
            rlx__j_fail(rt, RLX_EINVAL, "'in <string>' requires string as left operand, not %s", rlx__j_type_name(needle));
        return needle.s.n == 0 || memmem(hay.s.p, hay.s.n, needle.s.p, needle.s.n) != NULL;
    case RJ_LIST:
        for (size_t i = 0; i < hay.l->n; i++)
            if (rlx__j_equal(needle, hay.l->v[i])) return true;
        return false;
    case RJ_DICT: return rlx__j_dict_get(hay.d, needle) != NULL;
    case RJ_GEN: { /* consumes the iterator up to the match, as Python does */
        rj_value x;
        while (rlx__j_gen_next(rt, hay.gen, &x))
            if (rlx__j_equal(needle, x)) return true;
        return false;
    }
    default:
        rlx__j_fail(rt, RLX_EINVAL, "argument of type '%s' is not iterable", rlx__j_type_name(hay));
    }
}

