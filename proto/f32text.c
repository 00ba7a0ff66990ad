/* f32text.c - a float32 value as the text printf's "%.17g" gives for it (as a double), without
 * printf. Seventeen significant digits read back as exactly that double, which is what the
 * embeddings responses promise (proto/embed.c); glibc's printf takes ~150 ns a value with its
 * multi-precision arithmetic, and the loop thread prints every vector of every response (16
 * MiniLM vectors a step: ~0.9 ms while the clients wait; bench/RESULTS.md section 67).
 *
 * A finite float is M * 2^q with M < 2^24 and q >= -149. For values below 2^24 (q <= 0) and
 * from 1e-15 up, the 17 digits are floor(M * 10^k / 2^-q) with k = 16 - floor(log10 v): the
 * product fits 128 bits (M < 2^24, 10^k <= 10^31 < 2^104), and the remainder of the shift
 * rounds it half to even exactly as printf rounds the exact value in the default rounding
 * mode. The layout follows %g: fixed notation for exponents -4..16, else d.ddde-XX, trailing
 * zeros dropped. Other values (zero aside) go to snprintf. Any thread. */
#include "proto/proto.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef unsigned __int128 u128;

static const uint64_t p10[20] = {1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
                                 100000000ull, 1000000000ull, 10000000000ull, 100000000000ull,
                                 1000000000000ull, 10000000000000ull, 100000000000000ull,
                                 1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
                                 1000000000000000000ull, 10000000000000000000ull};

/* 10^k, 0 <= k <= 31 */
static u128 pow10_128(int k) { return k <= 19 ? (u128)p10[k] : (u128)p10[19] * p10[k - 19]; }

size_t rlx_api_f32_text(float f, char *out)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    const uint32_t ex = (bits >> 23) & 0xff, fr = bits & 0x7fffff;
    char *o = out;
    if (ex == 0 && fr == 0) {
        if (bits >> 31) *o++ = '-';
        *o++ = '0';
        *o = 0;
        return (size_t)(o - out);
    }
    const uint32_t M = ex ? fr | 0x800000u : fr;
    const int q = ex ? (int)ex - 150 : -149;
    if (ex == 0xff || q > 0) return (size_t)snprintf(out, 32, "%.17g", (double)f);
    const int n = -q; /* 0 .. 149 */
    if (n >= 128) return (size_t)snprintf(out, 32, "%.17g", (double)f);
    /* floor(log10 v) is floor(b log10 2) or one more, b = floor(log2 v); GCC's >> of a negative
     * int is arithmetic, so this is the floor for |b| < 1650 */
    const int b = 31 - __builtin_clz(M) + q;
    int e = (b * 78913) >> 18;
    if (16 - e > 31) return (size_t)snprintf(out, 32, "%.17g", (double)f); /* below ~1e-15 */
    const uint64_t lo = p10[16], hi = p10[17];
    u128 prod = (u128)M * pow10_128(16 - e);
    if (prod >> n >= hi) prod = (u128)M * pow10_128(16 - ++e); /* 18 digits: e was one short */
    /* the 17 digits, rounded half to even on the remainder of the shift */
    uint64_t d = (uint64_t)(prod >> n);
    if (n) {
        const u128 r = prod & (((u128)1 << n) - 1), half = (u128)1 << (n - 1);
        if (r > half || (r == half && (d & 1))) d++;
    }
    if (d == hi) { /* rounded up to 10^17: one more digit before the point */
        d = lo;
        e++;
    }
    char dig[17];
    for (int i = 16; i >= 0; i--) {
        dig[i] = (char)('0' + d % 10);
        d /= 10;
    }
    int nd = 17;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    if (bits >> 31) *o++ = '-';
    if (e >= -4 && e < 17) {
        if (e >= 0) {
            for (int i = 0; i <= e; i++) *o++ = i < nd ? dig[i] : '0';
            if (nd > e + 1) {
                *o++ = '.';
                memcpy(o, dig + e + 1, (size_t)(nd - e - 1));
                o += nd - e - 1;
            }
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -e - 1; i++) *o++ = '0';
            memcpy(o, dig, (size_t)nd);
            o += nd;
        }
    } else {
        *o++ = dig[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, dig + 1, (size_t)(nd - 1));
            o += nd - 1;
        }
        *o++ = 'e';
        *o++ = e < 0 ? '-' : '+';
        const int a = e < 0 ? -e : e;
        if (a >= 100) *o++ = (char)('0' + a / 100);
        *o++ = (char)('0' + a / 10 % 10);
        *o++ = (char)('0' + a % 10);
    }
    *o = 0;
    return (size_t)(o - out);
}
