/* actq.comp - converts matmul activations the way the CPU backend (and ggml) do before the
 * dot product, so GPU and CPU agree: mode 1 rounds to f16, 2 to bf16 (values written in
 * place of x); mode 3 quantizes to Q8_0 as llama.cpp's x86 quantize_row_q8_0 (blocks of 32,
 * values times 127/amax rounded half to even, scale amax/127 kept as f16), 4 to Q8_K (blocks of
 * 256, scale from the first largest-magnitude value, sign included; for rows of the batched
 * Q4_K gemm positive when that magnitude occurs with a + anywhere, as quant_k.c; round half to
 * even): the integer q go to y (as floats) and each block's scale to y[P[5] + ...].
 * Q8_K also writes each block's sums of 16 values (the CPU's bsums) at y[P[8] + ...].
 * One invocation per block. P: 0 mode, 1 K, 2 rows, 3 x off, 4 y off, 5 scale off, 6 row kinds
 * and 7 rule (row_batched), 8 block-sum off. */
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 1) buffer Y_ { float Y[]; };
layout(std430, set = 0, binding = 2) readonly buffer X_ { float X[]; };

float bf16_round(float x)
{
    uint u = floatBitsToUint(x);
    u += 0x7fffu + ((u >> 16) & 1u);
    return uintBitsToFloat(u & 0xffff0000u);
}

void main()
{
    uint mode = P[0], K = P[1], bs = mode == 4u ? 256u : 32u, nb = (K + bs - 1u) / bs;
    uint i = flat_id();
    if (i >= P[2] * nb) return;
    uint r = i / nb, b = i % nb, x0 = P[3] + r * K + b * bs, y0 = P[4] + r * K + b * bs;
    uint n = min(bs, K - b * bs), so = P[5] + r * nb + b;
    if (mode == 1u) {
        for (uint k = 0u; k < n; k++) Y[y0 + k] = f16_round(X[x0 + k]);
    } else if (mode == 2u) {
        for (uint k = 0u; k < n; k++) Y[y0 + k] = bf16_round(X[x0 + k]);
    } else if (mode == 3u) {
        float amax = 0.0;
        for (uint k = 0u; k < n; k++) amax = max(amax, abs(X[x0 + k]));
        float d = div_rn(amax, 127.0), id = amax != 0.0 ? div_rn(127.0, amax) : 0.0;
        Y[so] = f16_round(d);
        for (uint k = 0u; k < n; k++) {
            precise float q = X[x0 + k] * id;
            Y[y0 + k] = roundEven(q);
        }
    } else {
        float amax = 0.0, mx = 0.0;
        for (uint k = 0u; k < n; k++) {
            float ax = abs(X[x0 + k]);
            if (ax > amax) { amax = ax; mx = X[x0 + k]; }
        }
        if (row_batched(P[6], P[7], r))
            for (uint k = 0u; k < n; k++)
                if (X[x0 + k] == amax) mx = amax;
        if (amax == 0.0) {
            Y[so] = 0.0;
            for (uint k = 0u; k < n; k++) Y[y0 + k] = 0.0;
            for (uint j = 0u; j < 16u; j++) Y[P[8] + i * 16u + j] = 0.0;
            return;
        }
        float iscale = div_rn(-127.0, mx);
        float dq = div_rn(1.0, iscale);
        Y[so] = dq;
        for (uint j = 0u; j < n / 16u; j++) {
            int sum = 0;
            for (uint k = 16u * j; k < 16u * j + 16u; k++) {
                precise float q = iscale * X[x0 + k];
                float v = min(127.0, roundEven(q));
                Y[y0 + k] = v;
                sum += int(v);
            }
            Y[P[8] + i * 16u + j] = float(sum);
        }
    }
}
