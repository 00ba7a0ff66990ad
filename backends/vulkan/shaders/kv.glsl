/* kv.glsl - the paged KV pool of one layer as the shaders see it: K in bindings 10..13 and V in
 * 14..17, each a chunk of whole blocks (vk_kv.c), read and written as uint words. Rows are
 * f32, pairs of f16, or Q8_0 blocks (an f16 scale then 32 int8, 34 bytes: rows need not start
 * on a word). The includer defines KV_QUAL as `readonly` or nothing.
 * Specialization constants (one pipeline per pool kind, so loops carry no branches on them):
 * 0 the type (0 f32, 1 f16, 2 q8_0), 1 split (the pool is in more than one chunk).
 * Parameter words: 33 row bytes, 34 blocks per chunk, 35 block size. */
layout(constant_id = 0) const uint KV_TYPE = 1u;
layout(constant_id = 1) const uint KV_SPLIT = 0u;
layout(std430, set = 0, binding = 10) KV_QUAL buffer KC0_ { uint KC0[]; };
layout(std430, set = 0, binding = 11) KV_QUAL buffer KC1_ { uint KC1[]; };
layout(std430, set = 0, binding = 12) KV_QUAL buffer KC2_ { uint KC2[]; };
layout(std430, set = 0, binding = 13) KV_QUAL buffer KC3_ { uint KC3[]; };
layout(std430, set = 0, binding = 14) KV_QUAL buffer VC0_ { uint VC0[]; };
layout(std430, set = 0, binding = 15) KV_QUAL buffer VC1_ { uint VC1[]; };
layout(std430, set = 0, binding = 16) KV_QUAL buffer VC2_ { uint VC2[]; };
layout(std430, set = 0, binding = 17) KV_QUAL buffer VC3_ { uint VC3[]; };

#define KV_F32 0u
#define KV_F16 1u
#define KV_Q8_0 2u
#define KV_ROW_BYTES P[33]
#define KV_CHUNK_BLOCKS P[34]
#define KV_BLOCK_SIZE P[35]

/* where a pool slot lives: its chunk and its byte offset there */
struct kv_loc { uint chunk; uint byte_off; };

kv_loc kv_locate(uint slot)
{
    uint per = KV_CHUNK_BLOCKS * KV_BLOCK_SIZE, c = slot / per;
    return kv_loc(c, (slot - c * per) * KV_ROW_BYTES);
}

/* BODY(buffer) for the chunk c of K (v false) or V: the chunk is chosen once per row, not per
 * value, and every loop below indexes one named buffer (no descriptor indexing needed) */
#define KV_SELECT(v, c, BODY)                                                                     \
    if (KV_SPLIT == 0u) {                                                                         \
        if (v) { BODY(VC0) } else { BODY(KC0) }                                                   \
    } else if (v) {                                                                               \
        if ((c) == 0u) { BODY(VC0) } else if ((c) == 1u) { BODY(VC1) } else if ((c) == 2u) { BODY(VC2) } else { BODY(VC3) } \
    } else {                                                                                      \
        if ((c) == 0u) { BODY(KC0) } else if ((c) == 1u) { BODY(KC1) } else if ((c) == 2u) { BODY(KC2) } else { BODY(KC3) } \
    }

/* value `col` of the row starting at byte `row` of BUF (f32 and f16 rows start on a word; a
 * Q8_0 value is its int8 times the block's f16 scale, read from the word holding it) */
#define KV_F32_AT(BUF, row, col) uintBitsToFloat(BUF[((row) >> 2) + (col)])
#define KV_F16_AT(BUF, row, col) unpackHalf2x16(BUF[((row) >> 2) + ((col) >> 1)])[(col) & 1u]
#define KV_Q8_SCALE(BUF, b) unpackHalf2x16((BUF[(b) >> 2] >> (((b) & 2u) * 8u)) & 0xffffu).x
#define KV_Q8_INT(BUF, qb) (int(BUF[(qb) >> 2] << (24u - ((qb) & 3u) * 8u)) >> 24)
#define KV_Q8_AT(BUF, row, col) \
    (float(KV_Q8_INT(BUF, (row) + ((col) / 32u) * 34u + 2u + (col) % 32u)) * KV_Q8_SCALE(BUF, (row) + ((col) / 32u) * 34u))
