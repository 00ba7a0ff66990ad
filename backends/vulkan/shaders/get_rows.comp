/* get_rows.comp - out[t] = dequant(W[token[t]]) (* scale), then the chain; one invocation per
 * (token, 32-column chunk). The weight may be bound in row ranges [row0, row1) when it is
 * larger than the device's storage-buffer range; tokens outside the range are left to the
 * dispatch that binds theirs. P: 0 type, 1 cols, 2 row bytes, 3 byte base, 4 row0, 5 row1,
 * 6 y off, 7 scale, 8 chunks per row, 9 rows by position (GET_ROWS_POS) instead of token id. */
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 1) buffer Y_ { float Y[]; };
layout(std430, set = 0, binding = 3) readonly buffer W_ { uint W[]; };
#include "dequant.glsl"

void main()
{
    uint i = flat_id(), nch = P[8], cols = P[1];
    if (i >= N_TOKENS * nch) return;
    uint t = i / nch, c = i % nch;
    int id = P[9] != 0u ? B[POS_OFF + t] : B[TOK_OFF + t]; /* GET_ROWS_POS: learned positions */
    if (id < int(P[4]) || id >= int(P[5])) return;
    float v[32];
    dequant32(P[0], P[3] + uint(id - int(P[4])) * P[2], c, cols, v);
    float sc = PF(7);
    for (uint k = 0u; k < 32u; k++) {
        uint col = c * 32u + k;
        if (col >= cols) break;
        float y = v[k];
        if (sc != 0.0 && sc != 1.0) y *= sc;
        Y[P[6] + t * cols + col] = apply_chain(y, t, col);
    }
}
