/* kv_store.comp - writes the batch's K and V rows into the paged pool of one layer (bindings
 * 10, 11 as words: f32 values, or two f16 per word). One invocation per (token, word).
 * P: 0 kv_cols, 1 f16, 2 k off, 3 v off, 4 block size. */
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 2) readonly buffer K_ { float Ka[]; };
layout(std430, set = 0, binding = 3) readonly buffer V_ { float Va[]; };
layout(std430, set = 0, binding = 10) buffer KC_ { uint KC[]; };
layout(std430, set = 0, binding = 11) buffer VC_ { uint VC[]; };

void main()
{
    uint kvc = P[0], f16 = P[1], words = f16 != 0u ? kvc / 2u : kvc;
    uint i = flat_id();
    if (i >= N_TOKENS * words) return;
    uint t = i / words, w = i % words;
    uint slot = kv_slot(B[SEQ_OFF + t], B[POS_OFF + t], P[4]);
    uint src = t * kvc, dst = slot * words + w;
    if (f16 != 0u) {
        KC[dst] = f16_bits(Ka[P[2] + src + 2u * w]) | (f16_bits(Ka[P[2] + src + 2u * w + 1u]) << 16);
        VC[dst] = f16_bits(Va[P[3] + src + 2u * w]) | (f16_bits(Va[P[3] + src + 2u * w + 1u]) << 16);
    } else {
        KC[dst] = floatBitsToUint(Ka[P[2] + src + w]);
        VC[dst] = floatBitsToUint(Va[P[3] + src + w]);
    }
}
