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

/* tanh within one float ulp of the true value on any device (the CPU's tanhf is within one
 * too; they agree on ~96% of inputs): an odd polynomial below 0.55, 1 - 2 / (e^2|x| + 1)
 * above, 1 beyond 9 (as tanhf). Drivers' own tanh, often (e^2x - 1) / (e^2x + 1), loses
 * several ulps near 0 and all relative precision of 1 + tanh(x) for x << 0. */
float tanh_safe(float x)
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
float silu(float x) { return x / (1.0 + exp(-x)); }
/* ggml's CPU GELU reads a table of f16(gelu(f16(x))) and passes |x| >= 10 through; the CPU
 * backend computes the same roundings (cpu_ops.c), and so does this. */
float gelu(float x)
{
    if (x <= -10.0) return 0.0;
    if (x >= 10.0) return x;
    const float c = 0.79788456080286535587989211986876;
    float h = f16_round(x);
    precise float u = c * h * (1.0 + 0.044715 * h * h);
    precise float g = 0.5 * h * (1.0 + tanh_safe(u));
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
float apply_chain(float y, uint row, uint col)
{
    uint n = P[CH];
    for (uint k = 0u; k < n; k++) {
        uint op = P[CH + 1 + k];
        float p = PF(CH + 9 + k);
        if (op == 0u) y += chain_operand(P[CH + 17 + k], row, col);
        else if (op == 1u) y *= chain_operand(P[CH + 17 + k], row, col);
        else if (op == 2u) y = silu(y);
        else if (op == 3u) y = gelu(y);
        else if (op == 4u) y *= p;
        else y = p * tanh_safe(y * (1.0 / p)); /* the CPU scales by the reciprocal */
    }
    return y;
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

