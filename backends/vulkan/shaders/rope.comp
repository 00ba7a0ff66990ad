/* rope.comp - rotary embedding; cos/sin come precomputed per (token, pair) in the batch
 * buffer (computed on the host exactly as the CPU backend does). One invocation per
 * (token, head, pair); pairs past n_rot/2 copy the unrotated tail.
 * P: 0 n_heads, 1 head_dim, 2 n_rot, 3 mode (0 norm, 2 neox), 4 x off, 5 y off, 6 table off
 * (ints into B: [t][i] cos then sin at + n_rot/2). */
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 1) buffer Y_ { float Y[]; };
layout(std430, set = 0, binding = 2) readonly buffer X_ { float X[]; };

void main()
{
    uint nh = P[0], hd = P[1], nrot = P[2], half_hd = hd / 2u;
    uint i = flat_id();
    if (i >= N_TOKENS * nh * half_hd) return;
    uint t = i / (nh * half_hd), h = (i / half_hd) % nh, p = i % half_hd;
    uint base = t * nh * hd + h * hd, hr = nrot / 2u;
    if (p < hr) {
        uint tb = P[6] + t * nrot;
        float cs = intBitsToFloat(B[tb + p]), sn = intBitsToFloat(B[tb + hr + p]);
        uint i0 = P[3] == 2u ? p : 2u * p, i1 = P[3] == 2u ? p + hr : 2u * p + 1u;
        float x0 = X[P[4] + base + i0], x1 = X[P[4] + base + i1];
        /* the CPU's rotate_pairs: the first product of each output fused */
        precise float a = x1 * sn, b = x1 * cs;
        Y[P[5] + base + i0] = fmaf(x0, cs, -a);
        Y[P[5] + base + i1] = fmaf(x0, sn, b);
    } else {
        uint k = nrot + 2u * (p - hr);
        Y[P[5] + base + k] = X[P[4] + base + k];
        Y[P[5] + base + k + 1u] = X[P[4] + base + k + 1u];
    }
}
