/* rms_norm.comp - one workgroup per (row, segment): y = x / sqrt(mean(x^2) + eps) [* w], then
 * the chain. RMS_NORM uses one segment of all columns; HEAD_NORM one per head with w. The sum of
 * squares is the CPU backend's (ggml's): float squares added in double, in column order, by
 * one invocation.
 * NORM (P[7], layer norm): the mean in double, then the centred values' float squares added
 * in double, y = (x - mean) * 1 / sqrt(var + eps), as the CPU backend (ggml_norm).
 * P: 0 cols, 1 x off, 2 y off, 3 eps, 4 segment length, 5 has w, 6 w off, 7 layer norm. */
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 1) buffer Y_ { float Y[]; };
layout(std430, set = 0, binding = 2) readonly buffer X_ { float X[]; };
layout(std430, set = 0, binding = 3) readonly buffer Wt_ { float Wt[]; };
shared float scale_sh, mean_sh;

void main()
{
    uint row = gl_WorkGroupID.x, seg = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint cols = P[0], hd = P[4], base = row * cols + seg * hd;
    if (tid == 0u && P[7] != 0u) {
        precise WIDE s = 0.0;
        for (uint i = 0u; i < hd; i++) s = s + WIDE(X[P[1] + base + i]);
        precise WIDE m = s / WIDE(hd);
        float mean = float(m);
        precise WIDE s2 = 0.0;
        for (uint i = 0u; i < hd; i++) {
            precise float v = X[P[1] + base + i] - mean;
            precise float sq = v * v;
            s2 = s2 + WIDE(sq);
        }
        precise WIDE var = s2 / WIDE(hd);
        precise float vs = float(var) + PF(3);
        scale_sh = div_rn(1.0, sqrt_rn(vs));
        mean_sh = mean;
    } else if (tid == 0u) {
        mean_sh = 0.0;
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
    float scale = scale_sh, mean = mean_sh;
    for (uint i = tid; i < hd; i += 64u) {
        precise float xv = X[P[1] + base + i];
        if (P[7] != 0u) xv = xv - mean;
        precise float y = xv * scale;
        if (P[5] != 0u) y = y * Wt[P[6] + i];
        Y[P[2] + base + i] = apply_chain(y, row, seg * hd + i);
    }
}
