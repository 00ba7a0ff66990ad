/* kv_store.comp - writes the batch's K and V rows into the paged pool of one layer (kv.glsl).
 * One invocation per (token, unit): a word of f32 or of two f16, or a Q8_0 block of 32 values
 * quantized as the CPU does (scale amax / 127 kept as f16, round half away from zero). Q8_0
 * blocks are 34 bytes, so neighbours share words: those bytes are merged with atomics.
 * P: 0 kv_cols, 2 k off, 3 v off; 33..35 the pool (kv.glsl). */
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 2) readonly buffer K_ { float Ka[]; };
layout(std430, set = 0, binding = 3) readonly buffer V_ { float Va[]; };
#define KV_QUAL
#include "kv.glsl"

void put_word(bool v, uint c, uint w, uint val)
{
    if (KV_SPLIT == 0u) c = 0u;
    if (v) {
        if (c == 0u) VC0[w] = val; else if (c == 1u) VC1[w] = val; else if (c == 2u) VC2[w] = val; else VC3[w] = val;
    } else {
        if (c == 0u) KC0[w] = val; else if (c == 1u) KC1[w] = val; else if (c == 2u) KC2[w] = val; else KC3[w] = val;
    }
}

/* the bytes of `mask` in word w become those of val; other invocations own the other bytes */
void put_bytes(bool v, uint c, uint w, uint mask, uint val)
{
    if (mask == 0xffffffffu) { put_word(v, c, w, val); return; }
    if (KV_SPLIT == 0u) c = 0u;
    val &= mask;
    if (v) {
        if (c == 0u) { atomicAnd(VC0[w], ~mask); atomicOr(VC0[w], val); }
        else if (c == 1u) { atomicAnd(VC1[w], ~mask); atomicOr(VC1[w], val); }
        else if (c == 2u) { atomicAnd(VC2[w], ~mask); atomicOr(VC2[w], val); }
        else { atomicAnd(VC3[w], ~mask); atomicOr(VC3[w], val); }
    } else {
        if (c == 0u) { atomicAnd(KC0[w], ~mask); atomicOr(KC0[w], val); }
        else if (c == 1u) { atomicAnd(KC1[w], ~mask); atomicOr(KC1[w], val); }
        else if (c == 2u) { atomicAnd(KC2[w], ~mask); atomicOr(KC2[w], val); }
        else { atomicAnd(KC3[w], ~mask); atomicOr(KC3[w], val); }
    }
}

float src(bool v, uint i) { return v ? Va[P[3] + i] : Ka[P[2] + i]; }

/* Q8_0 block `blk` of row t of K or V to byte b of chunk c */
void store_q8(bool v, uint t, uint blk, uint c, uint b)
{
    uint x0 = t * P[0] + blk * 32u;
    float amax = 0.0;
    for (uint k = 0u; k < 32u; k++) amax = max(amax, abs(src(v, x0 + k)));
    float d = div_rn(amax, 127.0), id = d != 0.0 ? div_rn(1.0, d) : 0.0;
    uint bytes[34];
    uint dh = f16_bits(d);
    bytes[0] = dh & 0xffu;
    bytes[1] = dh >> 8;
    for (uint k = 0u; k < 32u; k++) {
        precise float q = src(v, x0 + k) * id;
        bytes[2u + k] = uint(int(round_away(q))) & 0xffu;
    }
    for (uint w = b >> 2; w <= (b + 33u) >> 2; w++) {
        uint mask = 0u, val = 0u;
        for (uint j = 0u; j < 4u; j++) {
            uint gb = w * 4u + j;
            if (gb < b || gb >= b + 34u) continue;
            mask |= 0xffu << (8u * j);
            val |= bytes[gb - b] << (8u * j);
        }
        put_bytes(v, c, w, mask, val);
    }
}

void main()
{
    uint kvc = P[0], type = KV_TYPE;
    uint units = type == KV_F32 ? kvc : type == KV_F16 ? kvc / 2u : kvc / 32u;
    uint i = flat_id();
    if (i >= N_TOKENS * units) return;
    uint t = i / units, u = i % units;
    kv_loc l = kv_locate(kv_slot(B[SEQ_OFF + t], B[POS_OFF + t], KV_BLOCK_SIZE));
    uint s = t * kvc, w = (l.byte_off >> 2) + u;
    if (type == KV_F32) {
        put_word(false, l.chunk, w, floatBitsToUint(Ka[P[2] + s + u]));
        put_word(true, l.chunk, w, floatBitsToUint(Va[P[3] + s + u]));
    } else if (type == KV_F16) {
        put_word(false, l.chunk, w, f16_bits(Ka[P[2] + s + 2u * u]) | (f16_bits(Ka[P[2] + s + 2u * u + 1u]) << 16));
        put_word(true, l.chunk, w, f16_bits(Va[P[3] + s + 2u * u]) | (f16_bits(Va[P[3] + s + 2u * u + 1u]) << 16));
    } else {
        store_q8(false, t, u, l.chunk, l.byte_off + u * 34u);
        store_q8(true, t, u, l.chunk, l.byte_off + u * 34u);
    }
}
