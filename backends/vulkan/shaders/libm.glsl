/* libm.glsl - glibc 2.36's expf (x86-64, its FMA variant) and tanhf (fdlibm's, on fdlibm's
 * expm1f, plain float arithmetic) bit for bit, and the CPU backend's libm SiLU
 * x / (1.0f + expf(-x)) (backends/cpu/vmath.h rlx__silu_libm): each checked against glibc over
 * all 2^32 inputs, in C and on lavapipe. Needs shaderFloat64; uses no
 * fma() (Vulkan may evaluate it unfused) and no float division (2.5 ulp in Vulkan).
 * The algorithm is ARM optimized-routines' expf (32-entry 2^(i/32) table, degree-3
 * polynomial); glibc fuses the range reduction, reproduced exactly here by splitting 32/ln2
 * into two 26-bit halves so every product with x is exact. The RLX_NO_F64 build (common.glsl)
 * has float approximations instead. */
#ifndef RLX_NO_F64
const uvec2 EXPF_TAB[32] = uvec2[32](   // bits of 2^(i/32) minus (i << 47): (lo, hi)
    uvec2(0x00000000u, 0x3ff00000u), uvec2(0xd3158574u, 0x3fefd9b0u),
    uvec2(0x6cf9890fu, 0x3fefb558u), uvec2(0xd0125b51u, 0x3fef9301u),
    uvec2(0x3c7d517bu, 0x3fef72b8u), uvec2(0x3168b9aau, 0x3fef5487u),
    uvec2(0x6e756238u, 0x3fef387au), uvec2(0xf51fdee1u, 0x3fef1e9du),
    uvec2(0x0a31b715u, 0x3fef06feu), uvec2(0x373aa9cbu, 0x3feef1a7u),
    uvec2(0x4c123422u, 0x3feedea6u), uvec2(0x6061892du, 0x3feece08u),
    uvec2(0xd5362a27u, 0x3feebfdau), uvec2(0x569d4f82u, 0x3feeb42bu),
    uvec2(0xdd485429u, 0x3feeab07u), uvec2(0xb03a5585u, 0x3feea47eu),
    uvec2(0x667f3bcdu, 0x3feea09eu), uvec2(0xe8ec5f74u, 0x3fee9f75u),
    uvec2(0x73eb0187u, 0x3feea114u), uvec2(0x994cce13u, 0x3feea589u),
    uvec2(0x422aa0dbu, 0x3feeace5u), uvec2(0xb0cdc5e5u, 0x3feeb737u),
    uvec2(0x82a3f090u, 0x3feec491u), uvec2(0xb23e255du, 0x3feed503u),
    uvec2(0x995ad3adu, 0x3feee89fu), uvec2(0xf2fb5e47u, 0x3feeff76u),
    uvec2(0xdd85529cu, 0x3fef199bu), uvec2(0xdcef9069u, 0x3fef3720u),
    uvec2(0xdcfba487u, 0x3fef5818u), uvec2(0x337b9b5fu, 0x3fef7c97u),
    uvec2(0xa2a490dau, 0x3fefa4afu), uvec2(0x5b6e4540u, 0x3fefd076u));

// positive finite double -> float, round to nearest even, via integer ops
float expf_d2f_rn(double y)
{
    uvec2 w = unpackDouble2x32(y);              // .x = low word, .y = high word
    uint e = (w.y >> 20) & 0x7ffu;
    if (e >= 1151u) return uintBitsToFloat(0x7f800000u);     // >= 2^128
    if (e >= 897u) {                                         // >= 2^-126: normal
        uint b = ((e - 896u) << 23) | ((w.y & 0xfffffu) << 3) | (w.x >> 29);
        uint rem = w.x & 0x1fffffffu;
        if (rem > 0x10000000u || (rem == 0x10000000u && (b & 1u) != 0u)) b += 1u;
        return uintBitsToFloat(b);
    }
    precise double t = y * packDouble2x32(uvec2(0u, 0x49400000u));  // * 2^149, exact
    precise double u = t + packDouble2x32(uvec2(0u, 0x43380000u));  // round to integer
    return uintBitsToFloat(unpackDouble2x32(u).x);
}

float expf_libm(float x)
{
    uint ux = floatBitsToUint(x);
    uint abstop = (ux >> 20) & 0x7ffu;
    if (abstop >= 0x42bu) {                                  // |x| >= 88, inf, nan
        if (ux == 0xff800000u) return 0.0;                   // -inf
        if (abstop >= 0x7f8u)                                // +inf, nan (quieted, as x+x)
            return uintBitsToFloat((ux & 0x7fffffu) != 0u ? (ux | 0x400000u) : ux);
        if (ux < 0x80000000u && ux > 0x42b17217u)            // x > 0x1.62e42ep6: overflow
            return uintBitsToFloat(0x7f800000u);
        if (ux > 0xc2cff1b4u) return 0.0;                    // x < -0x1.9fe368p6: underflow
        if (ux > 0xc2ce8ecfu) return uintBitsToFloat(1u);    // x < -0x1.9d1d9ep6: 0x1p-149
    }
    const double SHIFT = 6755399441055744.0LF;               // 0x1.8p52 (exact)
    double IHI = packDouble2x32(uvec2(0x60000000u, 0x40471547u)); // 32/ln2, top 26 bits
    double ILO = packDouble2x32(uvec2(0xf8000000u, 0x3ea4ae0bu)); // 32/ln2 - IHI (26 bits)
    double C0  = packDouble2x32(uvec2(0x4b912394u, 0x3ebc6af8u)); // 0x1.c6af84b912394p-20
    double C1  = packDouble2x32(uvec2(0x50fac4f3u, 0x3f2ebfceu)); // 0x1.ebfce50fac4f3p-13
    double C2  = packDouble2x32(uvec2(0xff0c52d6u, 0x3f962e42u)); // 0x1.62e42ff0c52d6p-6

    precise double xd = double(x);
    precise double p1 = IHI * xd;            // exact
    precise double p2 = ILO * xd;            // exact
    precise double zr = p1 + p2;             // round(InvLn2N * x)
    precise double ks = zr + SHIFT;          // == fma(InvLn2N, x, SHIFT) for every float x
    precise double kd = ks - SHIFT;
    uint k = unpackDouble2x32(ks).x;         // low 32 bits of round(z) (two's complement)
    precise double r = (p1 - kd) + p2;       // == fma(InvLn2N, x, -kd)
    uvec2 tw = EXPF_TAB[k & 31u];
    double s = packDouble2x32(uvec2(tw.x, tw.y + (k << 15)));  // tab + (k << 47)
    precise double r2 = r * r;
    precise double z  = C0 * r + C1;
    precise double y  = C2 * r + 1.0LF;
    precise double y2 = z * r2 + y;
    precise double y3 = y2 * s;
    return expf_d2f_rn(y3);
}

// correctly rounded a / b for positive a, b whose quotient is a normal float:
// double estimate, then exact midpoint tests (products of 25- and 24-bit values
// are exact in double), so this does not rely on OpFDiv being correctly rounded.
float expf_div_rn_pos(float a, float b)
{
    precise double ad = double(a);
    precise double bd = double(b);
    precise double qd = ad / bd;
    uint qb = floatBitsToUint(expf_d2f_rn(qd));
    precise double q  = double(uintBitsToFloat(qb));
    precise double mu = (q + double(uintBitsToFloat(qb + 1u))) * 0.5LF;
    precise double md = (q + double(uintBitsToFloat(qb - 1u))) * 0.5LF;
    precise double ru = ad - mu * bd;
    precise double rd = ad - md * bd;
    if (ru > 0.0LF || (ru == 0.0LF && (qb & 1u) != 0u)) qb += 1u;
    else if (rd < 0.0LF || (rd == 0.0LF && (qb & 1u) != 0u)) qb -= 1u;
    return uintBitsToFloat(qb);
}

// == (float)x / (1.0f + expf(-x)) on x86-64 with IEEE float division, bit for bit
// (NaN payloads included).  Vulkan's OpFDiv is only 2.5 ulp, hence the explicit
// correctly rounded division.
float silu_libm(float x)
{
    uint ux = floatBitsToUint(x);
    if ((ux & 0x7fffffffu) > 0x7f800000u) return uintBitsToFloat(ux | 0x400000u);  // NaN
    precise float b = 1.0 + expf_libm(-x);
    uint ub = floatBitsToUint(b);
    uint sgn = ux & 0x80000000u;
    uint ax = ux & 0x7fffffffu;
    if (ub == 0x7f800000u)                               // b = inf: -0, or NaN for x = -inf
        return uintBitsToFloat(ax == 0x7f800000u ? 0xffc00000u : sgn);
    if (ub == 0x3f800000u) return x;                     // b == 1
    if (ub == 0x40000000u) {                             // b == 2: exact halving (zeros, subnormals)
        if (ax >= 0x01000000u) return uintBitsToFloat(ux - 0x00800000u);
        uint q = ax >> 1;
        if ((ax & 1u) != 0u && (q & 1u) != 0u) q += 1u;
        return uintBitsToFloat(sgn | q);
    }
    return uintBitsToFloat(sgn | floatBitsToUint(expf_div_rn_pos(uintBitsToFloat(ax), b)));
}

// correctly rounded a / b for nonzero finite a, b with a normal quotient
float tanhf_div_rn(float a, float b)
{
    uint ua = floatBitsToUint(a);
    uint ub = floatBitsToUint(b);
    float q = expf_div_rn_pos(uintBitsToFloat(ua & 0x7fffffffu), uintBitsToFloat(ub & 0x7fffffffu));
    return uintBitsToFloat(floatBitsToUint(q) | ((ua ^ ub) & 0x80000000u));
}

// fdlibm expm1f as compiled in glibc 2.36; valid for finite x, |x| <= 0x1.62e42ep6
float tanhf_expm1f(float x)
{
    const float LN2_HI = uintBitsToFloat(0x3f317180u);
    const float LN2_LO = uintBitsToFloat(0x3717f7d1u);
    const float INVLN2 = uintBitsToFloat(0x3fb8aa3bu);
    const float Q1 = uintBitsToFloat(0xbd088889u);
    const float Q2 = uintBitsToFloat(0x3ad00d01u);
    const float Q3 = uintBitsToFloat(0xb8a670cdu);
    const float Q4 = uintBitsToFloat(0x36867e54u);
    const float Q5 = uintBitsToFloat(0xb457edbbu);
    uint ux = floatBitsToUint(x);
    uint hx = ux & 0x7fffffffu;
    bool neg = (ux >> 31) != 0u;
    precise float xr = x;
    precise float c = 0.0;
    int k = 0;
    if (hx >= 0x4195b844u && neg) return -1.0;               // x <= -27 ln2: tiny - one
    if (hx > 0x3eb17218u) {                                  // |x| > 0.5 ln2
        precise float hi;
        precise float lo;
        if (hx < 0x3f851592u) {                              // |x| < 1.5 ln2
            if (!neg) { hi = x - LN2_HI; lo = LN2_LO; k = 1; }
            else      { hi = x + LN2_HI; lo = -LN2_LO; k = -1; }
        } else {
            precise float kp = INVLN2 * x;
            precise float kf = kp + (neg ? -0.5 : 0.5);
            k = int(kf);                                     // truncation (cvttss2si)
            precise float t = float(k);
            precise float th = t * LN2_HI;                   // exact
            hi = x - th;
            lo = t * LN2_LO;
        }
        xr = hi - lo;
        precise float d = hi - xr;
        c = d - lo;
    } else if (hx < 0x33000000u) {
        return x;                                            // |x| < 2^-25
    }
    precise float hfx = 0.5 * xr;
    precise float hxs = xr * hfx;
    precise float r1 = Q5 * hxs;
    r1 = (r1 + Q4) * hxs;
    r1 = (r1 + Q3) * hxs;
    r1 = (r1 + Q2) * hxs;
    r1 = (r1 + Q1) * hxs;
    r1 = r1 + 1.0;
    precise float rh = r1 * hfx;
    precise float t3 = 3.0 - rh;
    precise float num = r1 - t3;
    precise float xt = xr * t3;
    precise float den = 6.0 - xt;
    precise float e = tanhf_div_rn(num, den) * hxs;
    if (k == 0) {
        precise float xe = xr * e;
        precise float w = xe - hxs;
        precise float res0 = xr - w;
        return res0;
    }
    precise float ec = e - c;
    precise float xec = xr * ec;
    e = xec - c;
    e = e - hxs;
    if (k == -1) {
        precise float a = xr - e;
        precise float b = a * 0.5;
        precise float res1 = b - 0.5;
        return res1;
    }
    if (k == 1) {
        if (xr < -0.25) {
            precise float a = xr + 0.5;
            precise float b = e - a;
            precise float res2 = -2.0 * b;
            return res2;
        }
        precise float a = xr - e;
        precise float b = a + a;
        precise float res3 = 1.0 + b;
        return res3;
    }
    if (k <= -2 || k > 56) {
        precise float a = e - xr;
        precise float y = 1.0 - a;
        precise float y2 = uintBitsToFloat(floatBitsToUint(y) + (uint(k) << 23));
        precise float res4 = y2 - 1.0;
        return res4;
    }
    precise float y;
    if (k < 23) {
        precise float t = uintBitsToFloat(0x3f800000u - (0x1000000u >> uint(k)));   // 1 - 2^-k
        precise float a = e - xr;
        y = t - a;
    } else {
        precise float t = uintBitsToFloat(uint(0x7f - k) << 23);                   // 2^-k
        precise float a = e + t;
        precise float b = xr - a;
        y = b + 1.0;
    }
    return uintBitsToFloat(floatBitsToUint(y) + (uint(k) << 23));
}

// == glibc 2.36 tanhf(x), bit for bit for all 2^32 inputs (NaN payloads included)
float tanhf_libm(float x)
{
    uint ux = floatBitsToUint(x);
    uint ix = ux & 0x7fffffffu;
    uint sg = ux & 0x80000000u;
    if (ix > 0x7f800000u) return uintBitsToFloat(ux | 0x400000u);  // NaN: quieted x
    if (ix > 0x41afffffu) return uintBitsToFloat(sg | 0x3f800000u); // |x| >= 22, inf: +-1
    if (ix < 0x24000000u) return x;                                 // |x| < 2^-55: x*(1+x) == x
    precise float ax = uintBitsToFloat(ix);
    precise float z;
    if (ix >= 0x3f800000u) {                                        // |x| >= 1
        precise float a2 = ax + ax;
        precise float t = tanhf_expm1f(a2);
        precise float d = t + 2.0;
        precise float q = tanhf_div_rn(2.0, d);
        z = 1.0 - q;
    } else {
        precise float a2 = -2.0 * ax;
        precise float t = tanhf_expm1f(a2);
        precise float d = t + 2.0;
        z = tanhf_div_rn(-t, d);
    }
    return uintBitsToFloat(floatBitsToUint(z) ^ sg);
}
#else
/* without 64-bit floats: the driver's exp, and tanh within about an ulp (an odd polynomial
 * below 0.55, 1 - 2 / (e^2|x| + 1) above, 1 beyond 9): drivers' own tanh, often
 * (e^2x - 1) / (e^2x + 1), loses all relative precision of 1 + tanh(x) for x << 0 */
float expf_libm(float x) { return exp(x); }
float silu_libm(float x) { return x / (1.0 + exp(-x)); }
float tanhf_libm(float x)
{
    float ax = abs(x);
    precise float z;
    if (ax >= 9.0) z = 1.0;
    else if (ax >= 0.55) z = 1.0 - 2.0 / (exp(2.0 * ax) + 1.0);
    else {
        precise float s = ax * ax, p = 0.0025662498;
        p = p * s - 0.0085542398;
        p = p * s + 0.021825222;
        p = p * s - 0.053965364;
        p = p * s + 0.13333327;
        p = p * s - 0.33333334;
        z = ax + (ax * s) * p;
    }
    return x < 0.0 ? -z : z;
}
#endif
