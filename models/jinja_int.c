/* jinja_int.c - Python's arbitrary-precision int for template values. Small ints stay int64
 * (RJ_INT); a result that leaves int64 becomes RJ_BIGINT (sign + magnitude in 32-bit limbs),
 * and one that fits again comes back to RJ_INT, so each value has one representation and
 * RJ_INT never equals RJ_BIGINT. Beyond RJ_INT_MAX_DIGITS decimal digits a result fails, as
 * Python refuses to print such ints (sys.int_info.default_max_str_digits). */
#include "models/jinja_value.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>


enum { MAX_LIMBS = (RJ_INT_MAX_DIGITS * 3322 / 1000) / 32 + 2 };

/* a magnitude under construction */
typedef struct mag { size_t n; uint32_t *d; } mag;

static mag mag_new(rj_rt *rt, size_t n)
{
    if (n > 4 * MAX_LIMBS)
        rlx__j_fail(rt, RLX_ERANGE, "integer result has more than %d digits (Python will not print it either)", RJ_INT_MAX_DIGITS);
    mag m = {0, rlx__j_alloc(rt, (n ? n : 1) * sizeof(uint32_t))};
    return m;
}

static void mag_trim(mag *m) { while (m->n && !m->d[m->n - 1]) m->n--; }

static mag mag_from_u64(rj_rt *rt, uint64_t u)
{
    mag m = mag_new(rt, 2);
    m.d[0] = (uint32_t)u;
    m.d[1] = (uint32_t)(u >> 32);
    m.n = 2;
    mag_trim(&m);
    return m;
}

/* magnitude and sign of any int-like value */
static mag mag_of(rj_rt *rt, rj_value v, bool *neg)
{
    if (v.type == RJ_BIGINT) {
        *neg = v.big->neg;
        mag m = {v.big->n, v.big->d};
        return m;
    }
    int64_t x = v.type == RJ_INT ? v.i : (int64_t)v.b;
    *neg = x < 0;
    return mag_from_u64(rt, x < 0 ? 0 - (uint64_t)x : (uint64_t)x);
}

static int mag_cmp(mag a, mag b)
{
    if (a.n != b.n) return a.n > b.n ? 1 : -1;
    for (size_t i = a.n; i-- > 0;)
        if (a.d[i] != b.d[i]) return a.d[i] > b.d[i] ? 1 : -1;
    return 0;
}

static mag mag_add(rj_rt *rt, mag a, mag b)
{
    if (a.n < b.n) { mag t = a; a = b; b = t; }
    mag r = mag_new(rt, a.n + 1);
    uint64_t carry = 0;
    for (size_t i = 0; i < a.n; i++) {
        uint64_t s = (uint64_t)a.d[i] + (i < b.n ? b.d[i] : 0) + carry;
        r.d[i] = (uint32_t)s;
        carry = s >> 32;
    }
    r.d[a.n] = (uint32_t)carry;
    r.n = a.n + 1;
    mag_trim(&r);
    return r;
}

/* a - b with a >= b */
static mag mag_sub(rj_rt *rt, mag a, mag b)
{
    mag r = mag_new(rt, a.n);
    int64_t borrow = 0;
    for (size_t i = 0; i < a.n; i++) {
        int64_t s = (int64_t)a.d[i] - (i < b.n ? b.d[i] : 0) - borrow;
        borrow = s < 0;
        r.d[i] = (uint32_t)(s + (borrow ? ((int64_t)1 << 32) : 0));
    }
    r.n = a.n;
    mag_trim(&r);
    return r;
}

static mag mag_mul(rj_rt *rt, mag a, mag b)
{
    mag r = mag_new(rt, a.n + b.n);
    for (size_t i = 0; i < a.n; i++) {
        uint64_t carry = 0;
        for (size_t j = 0; j < b.n; j++) {
            uint64_t t = (uint64_t)a.d[i] * b.d[j] + r.d[i + j] + carry;
            r.d[i + j] = (uint32_t)t;
            carry = t >> 32;
        }
        r.d[i + b.n] = (uint32_t)carry;
    }
    r.n = a.n + b.n;
    mag_trim(&r);
    return r;
}

/* q = a / d, returns the remainder (single-limb divisor) */
static uint32_t mag_divsmall(rj_rt *rt, mag a, uint32_t d, mag *q)
{
    *q = mag_new(rt, a.n);
    uint64_t rem = 0;
    for (size_t i = a.n; i-- > 0;) {
        uint64_t cur = (rem << 32) | a.d[i];
        q->d[i] = (uint32_t)(cur / d);
        rem = cur % d;
    }
    q->n = a.n;
    mag_trim(q);
    return (uint32_t)rem;
}

static int nlz32(uint32_t x) { return x ? __builtin_clz(x) : 32; }

/* Knuth's algorithm D (as in Hacker's Delight divmnu): q = a / b, r = a % b, b.n >= 2, a >= b */
static void mag_divmod(rj_rt *rt, mag a, mag b, mag *q, mag *r)
{
    if (b.n == 1) {
        uint32_t rm = mag_divsmall(rt, a, b.d[0], q);
        *r = mag_from_u64(rt, rm);
        return;
    }
    size_t m = a.n, n = b.n;
    int s = nlz32(b.d[n - 1]);
    uint32_t *vn = rlx__j_alloc(rt, n * sizeof *vn), *un = rlx__j_alloc(rt, (m + 1) * sizeof *un);
    for (size_t i = n - 1; i > 0; i--) vn[i] = (b.d[i] << s) | (s ? (uint32_t)((uint64_t)b.d[i - 1] >> (32 - s)) : 0);
    vn[0] = b.d[0] << s;
    un[m] = s ? (uint32_t)((uint64_t)a.d[m - 1] >> (32 - s)) : 0;
    for (size_t i = m - 1; i > 0; i--) un[i] = (a.d[i] << s) | (s ? (uint32_t)((uint64_t)a.d[i - 1] >> (32 - s)) : 0);
    un[0] = a.d[0] << s;
    *q = mag_new(rt, m - n + 1);
    q->n = m - n + 1;
    const uint64_t B = (uint64_t)1 << 32;
    for (size_t j = m - n + 1; j-- > 0;) {
        uint64_t num = ((uint64_t)un[j + n] << 32) | un[j + n - 1];
        uint64_t qhat = num / vn[n - 1], rhat = num % vn[n - 1];
        while (qhat >= B || qhat * vn[n - 2] > ((rhat << 32) | un[j + n - 2])) {
            qhat--;
            rhat += vn[n - 1];
            if (rhat >= B) break;
        }
        int64_t borrow = 0;
        uint64_t carry = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t p = qhat * vn[i] + carry;
            carry = p >> 32;
            int64_t t = (int64_t)un[i + j] - (int64_t)(uint32_t)p - borrow;
            un[i + j] = (uint32_t)t;
            borrow = t < 0;
        }
        int64_t t = (int64_t)un[j + n] - (int64_t)carry - borrow;
        un[j + n] = (uint32_t)t;
        if (t < 0) { /* added back: qhat was one too large */
            qhat--;
            uint64_t c = 0;
            for (size_t i = 0; i < n; i++) {
                uint64_t sum = (uint64_t)un[i + j] + vn[i] + c;
                un[i + j] = (uint32_t)sum;
                c = sum >> 32;
            }
            un[j + n] += (uint32_t)c;
        }
        q->d[j] = (uint32_t)qhat;
    }
    mag_trim(q);
    *r = mag_new(rt, n);
    r->n = n;
    for (size_t i = 0; i < n; i++) r->d[i] = (un[i] >> s) | (s ? (uint32_t)((uint64_t)un[i + 1] << (32 - s)) : 0);
    mag_trim(r);
}

/* back to a value: RJ_INT when it fits */
static rj_value make(rj_rt *rt, mag m, bool neg)
{
    mag_trim(&m);
    if (m.n == 0) return rj_int(0);
    if (m.n <= 2) {
        uint64_t u = m.d[0] | (m.n > 1 ? (uint64_t)m.d[1] << 32 : 0);
        if (!neg && u <= (uint64_t)INT64_MAX) return rj_int((int64_t)u);
        if (neg && u <= (uint64_t)INT64_MAX + 1) return rj_int((int64_t)(0 - u));
    }
    if (m.n > MAX_LIMBS)
        rlx__j_fail(rt, RLX_ERANGE, "integer result has more than %d digits (Python will not print it either)", RJ_INT_MAX_DIGITS);
    rj_value v = {0};
    v.type = RJ_BIGINT;
    v.big = rlx__j_alloc(rt, sizeof *v.big + m.n * sizeof(uint32_t));
    v.big->neg = neg;
    v.big->n = m.n;
    memcpy(v.big->d, m.d, m.n * sizeof(uint32_t));
    return v;
}

bool rlx__j_is_int(rj_value v) { return v.type == RJ_INT || v.type == RJ_BOOL || v.type == RJ_BIGINT; }

rj_value rlx__j_int_parse(rj_rt *rt, const char *s, size_t n, int base)
{
    bool neg = false;
    size_t i = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    if (n - i > RJ_INT_MAX_DIGITS)
        rlx__j_fail(rt, RLX_ERANGE, "an integer literal exceeds the limit of %d digits (as in Python)", RJ_INT_MAX_DIGITS);
    mag m = mag_new(rt, n * 6 / 32 + 2); /* at most 6 bits per digit (base <= 36) */
    for (; i < n; i++) {
        char c = s[i];
        if (c == '_') continue;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : c >= 'A' && c <= 'Z' ? c - 'A' + 10 : 99;
        if (d >= base) rlx__j_fail(rt, RLX_EINVAL, "invalid digit '%c' in an integer", c);
        uint64_t carry = (uint64_t)d;
        for (size_t k = 0; k < m.n; k++) {
            uint64_t t = (uint64_t)m.d[k] * (uint64_t)base + carry;
            m.d[k] = (uint32_t)t;
            carry = t >> 32;
        }
        if (carry) {
            m.d[m.n++] = (uint32_t)carry;
        }
    }
    return make(rt, m, neg);
}

rj_value rlx__j_int_neg(rj_rt *rt, rj_value a)
{
    bool neg;
    mag m = mag_of(rt, a, &neg);
    return make(rt, m, !neg && m.n);
}

static int mag_cmp_signed(bool na, mag a, bool nb, mag b)
{
    if (na != nb) return na ? -1 : 1;
    int c = mag_cmp(a, b);
    return na ? -c : c;
}

int rlx__j_int_cmp(rj_value a, rj_value b)
{
    if (a.type != RJ_BIGINT && b.type != RJ_BIGINT) {
        int64_t x = a.type == RJ_INT ? a.i : a.b, y = b.type == RJ_INT ? b.i : b.b;
        return (x > y) - (x < y);
    }
    /* a big int lies outside int64, so against a small one its sign decides */
    if (a.type != RJ_BIGINT) return b.big->neg ? 1 : -1;
    if (b.type != RJ_BIGINT) return a.big->neg ? -1 : 1;
    mag ma = {a.big->n, a.big->d}, mb = {b.big->n, b.big->d};
    return mag_cmp_signed(a.big->neg, ma, b.big->neg, mb);
}

/* floor division and modulo with Python's signs */
static rj_value divmod_(rj_rt *rt, rj_value a, rj_value b, bool want_mod)
{
    bool na, nb;
    mag ma = mag_of(rt, a, &na), mb = mag_of(rt, b, &nb);
    if (mb.n == 0) rlx__j_fail(rt, RLX_EINVAL, "integer division or modulo by zero");
    mag q, r;
    if (mag_cmp(ma, mb) < 0) { q = mag_new(rt, 1); r = ma; }
    else mag_divmod(rt, ma, mb, &q, &r);
    bool qneg = na != nb;
    if (qneg && r.n) { /* round the quotient toward minus infinity; the remainder takes the divisor's sign */
        q = mag_add(rt, q, mag_from_u64(rt, 1));
        r = mag_sub(rt, mb, r);
    }
    return want_mod ? make(rt, r, nb && r.n) : make(rt, q, qneg && q.n);
}

rj_value rlx__j_int_op(rj_rt *rt, int op, rj_value a, rj_value b)
{
    if (a.type != RJ_BIGINT && b.type != RJ_BIGINT) {
        int64_t x = a.type == RJ_INT ? a.i : a.b, y = b.type == RJ_INT ? b.i : b.b, r;
        switch (op) {
        case RJ_IADD: if (!__builtin_add_overflow(x, y, &r)) return rj_int(r); break;
        case RJ_ISUB: if (!__builtin_sub_overflow(x, y, &r)) return rj_int(r); break;
        case RJ_IMUL: if (!__builtin_mul_overflow(x, y, &r)) return rj_int(r); break;
        case RJ_IFLOORDIV: case RJ_IMOD:
            if (y == 0) rlx__j_fail(rt, RLX_EINVAL, "integer division or modulo by zero");
            if (!(x == INT64_MIN && y == -1)) {
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) { q--; m += y; }
                return rj_int(op == RJ_IMOD ? m : q);
            }
            break;
        default: break;
        }
    }
    bool na, nb;
    mag ma, mb;
    switch (op) {
    case RJ_IADD: case RJ_ISUB:
        ma = mag_of(rt, a, &na);
        mb = mag_of(rt, b, &nb);
        if (op == RJ_ISUB) nb = !nb;
        if (na == nb) return make(rt, mag_add(rt, ma, mb), na);
        if (mag_cmp(ma, mb) >= 0) return make(rt, mag_sub(rt, ma, mb), na);
        return make(rt, mag_sub(rt, mb, ma), nb);
    case RJ_IMUL:
        ma = mag_of(rt, a, &na);
        mb = mag_of(rt, b, &nb);
        if (ma.n + mb.n > MAX_LIMBS + 1)
            rlx__j_fail(rt, RLX_ERANGE, "integer result has more than %d digits (Python will not print it either)", RJ_INT_MAX_DIGITS);
        return make(rt, mag_mul(rt, ma, mb), na != nb);
    case RJ_IFLOORDIV: return divmod_(rt, a, b, false);
    case RJ_IMOD: return divmod_(rt, a, b, true);
    default: rlx__j_fail(rt, RLX_EINVAL, "unsupported integer operation");
    }
}

static size_t mag_bits(mag m) { return m.n ? (m.n - 1) * 32 + (size_t)(32 - nlz32(m.d[m.n - 1])) : 0; }

static mag mag_shl(rj_rt *rt, mag m, size_t bits)
{
    size_t limbs = bits / 32, b = bits % 32;
    mag r = mag_new(rt, m.n + limbs + 1);
    r.n = m.n + limbs + 1;
    for (size_t i = 0; i < m.n; i++) {
        uint64_t x = (uint64_t)m.d[i] << b;
        r.d[i + limbs] |= (uint32_t)x;
        r.d[i + limbs + 1] |= (uint32_t)(x >> 32);
    }
    mag_trim(&r);
    return r;
}

/* a / b correctly rounded, as Python's int true division: a quotient of at least 55 bits plus
 * a sticky bit for the remainder rounds once, in the conversion to double */
double rlx__j_int_truediv(rj_rt *rt, rj_value a, rj_value b)
{
    bool na, nb;
    mag ma = mag_of(rt, a, &na), mb = mag_of(rt, b, &nb);
    if (mb.n == 0) rlx__j_fail(rt, RLX_EINVAL, "division by zero");
    if (ma.n == 0) return na != nb ? -0.0 : 0.0;
    size_t ba = mag_bits(ma), bb = mag_bits(mb);
    if (ba <= 53 && bb <= 53) {
        double x = rlx__j_int_to_double(a), y = rlx__j_int_to_double(b);
        return x / y;
    }
    long k = (long)bb - (long)ba + 55;
    if (k > 0) ma = mag_shl(rt, ma, (size_t)k);
    else if (k < 0) mb = mag_shl(rt, mb, (size_t)-k);
    mag q, r;
    if (mag_cmp(ma, mb) < 0) { q = mag_new(rt, 1); r = ma; }
    else mag_divmod(rt, ma, mb, &q, &r);
    uint64_t u = q.n ? q.d[0] | (q.n > 1 ? (uint64_t)q.d[1] << 32 : 0) : 0; /* q < 2^57 */
    if (r.n) u |= 1;
    double d = ldexp((double)u, (int)-k);
    return na != nb ? -d : d;
}

rj_value rlx__j_int_pow(rj_rt *rt, rj_value base, int64_t e)
{
    rj_value r = rj_int(1);
    if (e < 0) rlx__j_fail(rt, RLX_EINVAL, "negative integer exponent");
    bool neg;
    mag mb = mag_of(rt, base, &neg);
    /* bits(base) * e bounds the result: refuse early instead of squaring past the limit */
    double bits = mb.n ? (double)(mb.n - 1) * 32 + (32 - nlz32(mb.d[mb.n - 1])) : 0;
    if (bits > 1 && (bits - 1) * (double)e > (double)MAX_LIMBS * 32)
        rlx__j_fail(rt, RLX_ERANGE, "integer result has more than %d digits (Python will not print it either)", RJ_INT_MAX_DIGITS);
    for (;;) {
        if (e & 1) r = rlx__j_int_op(rt, RJ_IMUL, r, base);
        e >>= 1;
        if (!e) break;
        base = rlx__j_int_op(rt, RJ_IMUL, base, base);
    }
    return r;
}

void rlx__j_int_str(rj_rt *rt, rj_buf *b, rj_value v)
{
    if (v.type != RJ_BIGINT) {
        rlx__j_buf_printf(rt, b, "%" PRId64, v.type == RJ_INT ? v.i : (int64_t)v.b);
        return;
    }
    mag m = {v.big->n, v.big->d};
    size_t cap = m.n * 12 + 12, k = cap; /* 9.64 digits per limb, written in groups of nine */
    char *out = rlx__j_alloc(rt, cap + 1);
    while (m.n) { /* nine decimal digits at a time */
        mag q;
        uint32_t r = mag_divsmall(rt, m, 1000000000u, &q);
        for (int i = 0; i < 9; i++) { out[--k] = (char)('0' + r % 10); r /= 10; }
        m = q;
    }
    while (k < cap - 1 && out[k] == '0') k++;
    if (v.big->neg) out[--k] = '-';
    rlx__j_buf_put(rt, b, out + k, cap - k);
}

void rlx__j_int_base(rj_rt *rt, rj_buf *b, rj_value v, int base, bool upper)
{
    const char *dig = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    bool neg;
    mag m = mag_of(rt, v, &neg);
    if (!m.n) { rlx__j_buf_puts(rt, b, "0"); return; }
    size_t cap = m.n * 32 + 1, k = cap;
    char *out = rlx__j_alloc(rt, cap);
    while (m.n) {
        mag q;
        uint32_t r = mag_divsmall(rt, m, (uint32_t)base, &q);
        out[--k] = dig[r];
        m = q;
    }
    rlx__j_buf_put(rt, b, out + k, cap - k);
}

double rlx__j_int_to_double(rj_value v)
{
    if (v.type != RJ_BIGINT) return v.type == RJ_INT ? (double)v.i : (double)v.b;
    const rj_big *g = v.big;
    int top = 32 - nlz32(g->d[g->n - 1]);
    size_t bits = (g->n - 1) * 32 + (size_t)top;
    /* the top 64 bits, with every lower bit folded into the last one (sticky), convert with a
     * single correct rounding; the scaling after it is exact */
    uint64_t u = 0;
    bool sticky = false;
    size_t shift = bits > 64 ? bits - 64 : 0;
    for (size_t i = 0; i < g->n; i++) {
        size_t lo = i * 32;
        for (int k = 0; k < 32; k++) {
            size_t pos = lo + (size_t)k;
            if (!((g->d[i] >> k) & 1)) continue;
            if (pos < shift) sticky = true;
            else u |= (uint64_t)1 << (pos - shift);
        }
    }
    if (sticky) u |= 1;
    double d = ldexp((double)u, (int)RLX_MIN(shift, (size_t)4096));
    return g->neg ? -d : d;
}

rj_value rlx__j_int_from_double(rj_rt *rt, double f)
{
    if (!isfinite(f)) rlx__j_fail(rt, RLX_EINVAL, "cannot convert float %s to integer", isnan(f) ? "NaN" : "infinity");
    if (fabs(f) < 9.2e18) return rj_int((int64_t)f);
    int e;
    double m = frexp(fabs(f), &e); /* f = m * 2^e, m in [0.5, 1); e > 53 here, so f is integral */
    uint64_t mant = (uint64_t)ldexp(m, 53);
    int shift = e - 53;
    mag r = mag_new(rt, (size_t)(shift / 32) + 3);
    r.n = (size_t)(shift / 32) + 3;
    int bit = shift % 32;
    size_t limb = (size_t)(shift / 32);
    unsigned __int128 x = (unsigned __int128)mant << bit;
    for (int i = 0; i < 3; i++) r.d[limb + (size_t)i] = (uint32_t)(x >> (32 * i));
    return make(rt, r, f < 0);
}

int rlx__j_int_cmp_float(rj_value a, double f)
{
    if (isnan(f)) return 2; /* unordered */
    double d = rlx__j_int_to_double(a);
    if (d != f) return (d > f) - (d < f); /* rounding is monotonic, so the order holds */
    if (isinf(f)) return f > 0 ? -1 : 1;  /* a rounded to infinity but is finite */
    /* f is integral here (it equals a rounded int): compare exactly */
    if (a.type != RJ_BIGINT) {
        int64_t x = a.type == RJ_INT ? a.i : a.b;
        if (fabs(f) >= 9.2233720368547758e18) return f > 0 ? -1 : 1;
        int64_t y = (int64_t)f;
        return (x > y) - (x < y);
    }
    uint32_t limbs[40] = {0}; /* |f| < 2^1024 */
    int e;
    double m = frexp(fabs(f), &e);
    uint64_t mant = (uint64_t)ldexp(m, 53);
    int shift = e - 53;
    if (shift < 0) return a.big->neg ? -1 : 1; /* |f| < 2^53 while a is big */
    unsigned __int128 x = (unsigned __int128)mant << (shift % 32);
    for (int i = 0; i < 3; i++) limbs[shift / 32 + i] = (uint32_t)(x >> (32 * i));
    mag mf = {40, limbs}, ma = {a.big->n, a.big->d};
    mag_trim(&mf);
    return mag_cmp_signed(a.big->neg, ma, f < 0, mf);
}
