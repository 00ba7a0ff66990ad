/* ew.comp - elementwise ops: y = chain(x). The step's head op (add, mul, silu, ...) arrives
 * as the first chain entry. P: 0 rows, 1 cols, 2 x offset, 3 y offset (elements). */
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 1) buffer Y_ { float Y[]; };
layout(std430, set = 0, binding = 2) readonly buffer X_ { float X[]; };

void main()
{
    uint i = flat_id(), cols = P[1];
    if (i >= P[0] * cols) return;
    uint r = i / cols, c = i % cols;
    Y[P[3] + i] = apply_chain(X[P[2] + i], r, c);
}
