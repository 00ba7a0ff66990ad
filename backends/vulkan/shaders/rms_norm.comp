/* rms_norm.comp - one workgroup per (row, segment): y = x / sqrt(mean(x^2) + eps) [* w], then
 * the chain. RMS_NORM uses one segment of all columns; HEAD_NORM one per head with w. The sum of
 * squares is the CPU backend's (ggml's): float squares added in double, in column order, by
 * one invocation.
 * P: 0 cols, 1 x off, 2 y off, 3 eps, 4 segment length, 5 has w, 6 w off. */
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 1) buffer Y_ { float Y[]; };
layout(std430, set = 0, binding = 2) readonly buffer X_ { float X[]; };
layout(std430, set = 0, binding = 3) readonly buffer Wt_ { float Wt[]; };
shared float scale_sh;

void main()
{
    uint row = gl_WorkGroupID.x, seg = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint cols = P[0], hd = P[4], base = row * cols + seg * hd;
    if (tid == 0u) {
        precise WIDE s = 0.0;
        for (uint i = 0u; i < hd; i++) {
            float x = X[P[1] + base + i];
            precise float sq = x * x;
            s = s + WIDE(sq);
        }
        precise WIDE mean = s / WIDE(hd);
        precise float ms = float(mean) + PF(3);
        float sc = div_rn(1.0, sqrt_rn(ms));
        scale_sh = sc;
    }
    barrier();
    float scale = scale_sh;
    for (uint i = tid; i < hd; i += 64u) {
        precise float y = X[P[1] + base + i] * scale;
        if (P[5] != 0u) y = y * Wt[P[6] + i];
        Y[P[2] + base + i] = apply_chain(y, row, seg * hd + i);
    }
}
