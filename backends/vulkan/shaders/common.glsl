/* common.glsl - what every rlxd compute shader shares: the parameter block (binding 0, one
 * 96-word slot per dispatch), the batch buffer (binding 9: token ids, positions, sequence
 * ids, output indices, block tables, rope tables), the fused elementwise chain (operands in
 * bindings 5..8) and weight byte access (weights are bound as uint words because the block
 * formats are not 4-byte aligned).
 *
 * Parameter words: 0..39 kernel-specific (33..35: the KV pool, kv.glsl); 40..46 batch
 * layout; 48..80 chain. */
#extension GL_GOOGLE_include_directive : enable

layout(std430, set = 0, binding = 0) readonly buffer Params { uint P[]; };
layout(std430, set = 0, binding = 9) readonly buffer Batch { int B[]; };
layout(std430, set = 0, binding = 5) readonly buffer Op0 { float O0[]; };
layout(std430, set = 0, binding = 6) readonly buffer Op1 { float O1[]; };
layout(std430, set = 0, binding = 7) readonly buffer Op2 { float O2[]; };
layout(std430, set = 0, binding = 8) readonly buffer Op3 { float O3[]; };

#define PF(i) uintBitsToFloat(P[i])

/* WIDE: the type of the CPU's double sums. Shaders are built twice (CMakeLists.txt): as
 * written, needing shaderFloat64 and giving the CPU backend's bits, and with RLX_NO_F64 for
 * devices without 64-bit floats, where these sums, divisions and libm functions are float ones
 * and results are close to the CPU's rather than identical (vk_device.c picks the build). */
#ifdef RLX_NO_F64
#define WIDE float
#else
#define WIDE double
#endif

/* fused multiply-add with one rounding on every device (vk_internal.h, soft_fma): through
 * doubles when SOFT_FMA, where the product is exact and a sum that lands exactly halfway
 * between two floats is moved toward its true value (TwoSum error) so the single rounding to
 * float is the fused one. Float-subnormal results may round twice. */
layout(constant_id = 7) const uint SOFT_FMA = 0u;

float fmaf(float a, float b, float c)
{
#ifdef RLX_NO_F64
    return fma(a, b, c);
#else
    if (SOFT_FMA == 0u) return fma(a, b, c);
    precise double p = double(a) * double(b);
    precise double dc = double(c);
    precise double s = p + dc;
    precise double bb = s - p;
    precise double e = (p - (s - bb)) + (dc - bb);
    if (e != 0.0) {
        uvec2 u = unpackDouble2x32(s);
        if ((u.x & 0x1fffffffu) == 0x10000000u) {
            u.x = (e > 0.0) == (s > 0.0) ? u.x + 1u : u.x - 1u;
            s = packDouble2x32(u);
        }
    }
    return float(s);
#endif
}

/* correctly rounded float quotient and square root on any device (Vulkan allows 2.5 ulp for
 * float division; a double result rounded to float is the correctly rounded float one) */
float div_rn(float a, float b) { precise WIDE q = WIDE(a) / WIDE(b); return float(q); }
float sqrt_rn(float a) { precise WIDE r = sqrt(WIDE(a)); return float(r); }
#define N_TOKENS P[40]
#define N_OUTPUTS P[41]
#define TOK_OFF P[42]
#define POS_OFF P[43]
#define SEQ_OFF P[44]
#define OIDX_OFF P[45]
#define SBASE_OFF P[46]
#define CH 48

/* flat invocation index over a 2-D grid of 1-D workgroups (grids wider than 65535 groups) */
uint flat_id()
{
    return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}

/* f32 -> f16 bits, round to nearest even (as the CPU's conversion). packHalf2x16 leaves the
 * rounding to the driver (lavapipe truncates), which moved logits by ~1e-2. */
uint f16_bits(float f)
{
    uint x = floatBitsToUint(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
    if (ax >= 0x477ff000u) return sign | 0x7c00u;          /* rounds past 65504 */
    if (ax < 0x38800000u)                                  /* f16 subnormal or zero */
        return sign | uint(roundEven(uintBitsToFloat(ax) * 16777216.0));
    uint h = (((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu), rest = ax & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0u)) h += 1u;
    return sign | h;
}
float f16_round(float f) { return unpackHalf2x16(f16_bits(f)).x; }

#include "libm.glsl"

/* ggml_v_expf (AVX-512) for one value, as backends/cpu/vmath.h rlx__vexp: a degree-5
 * polynomial after a range reduction by ln 2, then the exact power-of-two scaling (through a
 * double so subnormal results round once). */
float vexp(float x)
{
    const float r = uintBitsToFloat(0x4b400000u);
    float z = fmaf(x, uintBitsToFloat(0x3fb8aa3bu), r);
    precise float n = z - r;
    float b = fmaf(-n, uintBitsToFloat(0x35bfbe8eu), fmaf(-n, uintBitsToFloat(0x3f317200u), x));
    precise float u = b * b;
    float j = fmaf(fmaf(fmaf(uintBitsToFloat(0x3c072010u), b, uintBitsToFloat(0x3d2b9f17u)), u,
                        fmaf(uintBitsToFloat(0x3e2aaf33u), b, uintBitsToFloat(0x3efffedbu))),
                   u, fmaf(uintBitsToFloat(0x3f7ffff6u), b, 1.0));
    if (abs(n) > 192.0) return n <= 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u);
#ifdef RLX_NO_F64
    return ldexp(j, int(n));
#else
    precise double e = double(j) * packDouble2x32(uvec2(0u, uint(1023 + int(n)) << 20));
    return float(e);
#endif
}

/* SiLU as the CPU backend: ggml_v_silu below the row's last multiple of 16 columns, libm's
 * expf (expf_libm) for the rest */
float silu_at(float x, uint col, uint cols)
{
    if (col >= (cols & ~15u)) return silu_libm(x);
    precise float den = 1.0 + vexp(0.0 - x);
    return div_rn(x, den);
}
/* ggml's CPU GELU reads a table of f16(gelu(f16(x))) and passes |x| >= 10 through; the CPU
 * backend computes the same roundings (cpu_ops.c), and so does this. */
float gelu(float x)
{
    if (x <= -10.0) return 0.0;
    if (x >= 10.0) return x;
    const float c = 0.79788456080286535587989211986876;
    float h = f16_round(x);
    precise float u = c * h * (1.0 + 0.044715 * h * h);
    precise float g = 0.5 * h * (1.0 + tanhf_libm(u));
    return f16_round(g);
}

float chain_operand(uint slot, uint row, uint col)
{
    uint idx = P[CH + 25 + slot] + row * P[CH + 29 + slot] + col;
    if (slot == 0u) return O0[idx];
    if (slot == 1u) return O1[idx];
    if (slot == 2u) return O2[idx];
    return O3[idx];
}

/* ops: 0 add, 1 mul, 2 silu, 3 gelu, 4 scale, 5 softcap (rlx_ew_op order) */
float apply_chain(float y0, uint row, uint col)
{
    precise float y = y0; /* no multiply-add fused across chain entries: the CPU has none */
    uint n = P[CH];
    for (uint k = 0u; k < n; k++) {
        uint op = P[CH + 1 + k];
        float p = PF(CH + 9 + k);
        if (op == 0u) y = y + chain_operand(P[CH + 17 + k], row, col);
        else if (op == 1u) y = y * chain_operand(P[CH + 17 + k], row, col);
        else if (op == 2u) y = silu_at(y, col, P[CH + 33]);
        else if (op == 3u) y = gelu(y);
        else if (op == 4u) y = y * p;
        else y = p * tanhf_libm(y * div_rn(1.0, p)); /* the CPU scales by the reciprocal */
    }
    return y;
}

/* ggml's hsum_float_8 and GCC's _mm512_reduce_add_ps order (quant_internal.h) */
float hsum8(float a[8])
{
    precise float r = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
    return r;
}
float red16(float a[16])
{
    precise float t3[8], t6[4];
    for (uint k = 0u; k < 8u; k++) t3[k] = a[k + 8u] + a[k];
    for (uint k = 0u; k < 4u; k++) t6[k] = t3[k + 4u] + t3[k];
    precise float r = (t6[0] + t6[2]) + (t6[1] + t6[3]);
    return r;
}

/* Whether row t of a product takes llama.cpp's batched arithmetic, as the CPU backend's
 * row_roles: kinds (RLX_TOKEN_*: 0 prompt, 1 decode, 2 prompt tail) at word koff of B (~0: every
 * row one-row); rule 1 (tinyBLAS) batches all but decode rows, rule 4 (the Q4_K gemm) prompt
 * rows only. */
bool row_batched(uint koff, uint rule, uint t)
{
    if (koff == 0xffffffffu || rule == 0u) return false;
    int k = B[koff + t];
    return rule == 4u ? k == 0 : k != 1;
}

/* round half away from zero exactly as the CPU's quantizers (quant.c): truncate, then step
 * away from zero when the dropped fraction is at least one half (floor(|v| + 0.5) rounds the
 * sum first and gets 0.5 - 2^-25 wrong) */
float round_away(float v)
{
    precise float t = trunc(v), f = v - t;
    return abs(f) >= 0.5 ? t + sign(v) : t;
}

/* KV slot of position `pos` of sequence `seq` through its block table */
uint kv_slot(int seq, int pos, uint block_size)
{
    int base = B[SBASE_OFF + uint(seq)];
    int blk = B[uint(base) + uint(pos) / block_size];
    return uint(blk) * block_size + uint(pos) % block_size;
}

