/* gather.comp - out[o] = x[token index of output o]. P: 0 cols, 1 x off, 2 y off. */
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 1) buffer Y_ { float Y[]; };
layout(std430, set = 0, binding = 2) readonly buffer X_ { float X[]; };

void main()
{
    uint i = flat_id(), cols = P[0];
    if (i >= N_OUTPUTS * cols) return;
    uint o = i / cols, c = i % cols;
    Y[P[2] + i] = X[P[1] + uint(B[OIDX_OFF + o]) * cols + c];
}
