/* matmul.comp - out[t, n] = dot(W[n], x[t]) with the weight dequantized on the fly, then the
 * chain. One workgroup per weight row and tile of 8 tokens: each invocation takes 32-element
 * chunks of the row (read once for the 8 tokens), then the workgroup reduces.
 * P: 0 type, 1 K, 2 rows in this dispatch, 3 row bytes, 4 byte base, 5 first row (output
 * column), 6 T, 7 x off, 8 y off, 9 ldo, 10 grid width in rows. */
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 1) buffer Y_ { float Y[]; };
layout(std430, set = 0, binding = 2) readonly buffer X_ { float X[]; };
layout(std430, set = 0, binding = 3) readonly buffer W_ { uint W[]; };
#include "dequant.glsl"
#define TT 8u
shared float red[TT][64];

void main()
{
    uint n = gl_WorkGroupID.x + gl_WorkGroupID.y * P[10], tid = gl_LocalInvocationID.x;
    uint K = P[1], T = P[6], t0 = gl_WorkGroupID.z * TT;
    if (n >= P[2]) return; /* uniform per workgroup */
    uint nt = min(TT, T - t0), nch = (K + 31u) / 32u, row = P[4] + n * P[3];
    float acc[TT];
    for (uint t = 0u; t < TT; t++) acc[t] = 0.0;
    float v[32];
    for (uint c = tid; c < nch; c += 64u) {
        dequant32(P[0], row, c, K, v);
        uint kn = min(32u, K - c * 32u);
        for (uint t = 0u; t < nt; t++) {
            uint xb = P[7] + (t0 + t) * K + c * 32u;
            float s = 0.0;
            for (uint k = 0u; k < kn; k++) s += v[k] * X[xb + k];
            acc[t] += s;
        }
    }
    for (uint t = 0u; t < TT; t++) red[t][tid] = acc[t];
    barrier();
    for (uint w = 32u; w > 0u; w >>= 1) {
        if (tid < w)
            for (uint t = 0u; t < TT; t++) red[t][tid] += red[t][tid + w];
        barrier();
    }
    if (tid < nt) {
        uint col = P[5] + n, t = t0 + tid;
        Y[P[8] + t * P[9] + col] = apply_chain(red[tid][0], t, col);
    }
}
