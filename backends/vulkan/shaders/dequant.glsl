/* dequant.glsl - 32 consecutive weights of one row, for every supported type. The weight
 * buffer W (binding 3 or 2, declared by the includer as `uint W[]`) is read bytewise; 16-bit
 * fields always sit at even offsets in these layouts, so they never straddle a word. Values
 * and the order of float operations follow quant.c / quant_k.c. */

uint wb(uint off) { return (W[off >> 2] >> ((off & 3u) * 8u)) & 0xffu; }
uint wh(uint off) { return (W[off >> 2] >> ((off & 2u) * 8u)) & 0xffffu; }
float wf16(uint off) { return unpackHalf2x16(wh(off)).x; }
int ws8(uint off) { return int(wb(off) << 24) >> 24; }

/* K-quant 6-bit scale and min of sub-block j (rlx__scale_min_k4) */
void scale_min_k4(uint j, uint sb, out float sc, out float m)
{
    if (j < 4u) {
        sc = float(wb(sb + j) & 63u);
        m = float(wb(sb + j + 4u) & 63u);
    } else {
        sc = float((wb(sb + j + 4u) & 0xFu) | ((wb(sb + j - 4u) >> 6) << 4));
        m = float((wb(sb + j + 4u) >> 4) | ((wb(sb + j) >> 6) << 4));
    }
}

/* Types: 0 F32, 1 F16, 2 Q4_0, 8 Q8_0, 12 Q4_K, 13 Q5_K, 14 Q6_K, 30 BF16 (ggml ids).
 * row: byte offset of the row; c: index of the 32-element chunk; K: row length (the plain
 * types may end in a partial chunk, whose missing values read as 0). */
void dequant32(uint type, uint row, uint c, uint K, out float v[32])
{
    if (type == 0u || type == 1u || type == 30u) {
        for (uint i = 0u; i < 32u; i++) {
            uint k = c * 32u + i;
            if (k >= K) { v[i] = 0.0; continue; }
            if (type == 0u) v[i] = uintBitsToFloat(W[(row >> 2) + k]);
            else if (type == 1u) v[i] = wf16(row + 2u * k);
            else v[i] = uintBitsToFloat(wh(row + 2u * k) << 16);
        }
    } else if (type == 8u) {
        uint b = row + 34u * c;
        float d = wf16(b);
        for (uint i = 0u; i < 32u; i++) v[i] = float(ws8(b + 2u + i)) * d;
    } else if (type == 2u) {
        uint b = row + 18u * c;
        float d = wf16(b);
        for (uint i = 0u; i < 16u; i++) {
            uint q = wb(b + 2u + i);
            v[i] = float(int(q & 0xFu) - 8) * d;
            v[i + 16u] = float(int(q >> 4) - 8) * d;
        }
    } else if (type == 12u || type == 13u) {
        bool q5 = type == 13u;
        uint b = row + (q5 ? 176u : 144u) * (c / 8u), j = c % 8u, il = j / 2u, hi = j & 1u;
        float d = wf16(b), dmin = wf16(b + 2u), sc, m;
        scale_min_k4(j, b + 4u, sc, m);
        float d1 = d * sc, m1 = dmin * m;
        uint qs = b + (q5 ? 48u : 16u) + 32u * il;
        for (uint l = 0u; l < 32u; l++) {
            uint q = wb(qs + l);
            q = hi == 1u ? q >> 4 : q & 0xFu;
            if (q5 && ((wb(b + 16u + l) >> (2u * il + hi)) & 1u) != 0u) q += 16u;
            v[l] = d1 * float(q) - m1;
        }
    } else { /* Q6_K */
        uint b = row + 210u * (c / 8u), j = c % 8u, h = j / 4u, qq = j % 4u;
        float d = wf16(b + 208u);
        uint ql = b + 64u * h + ((qq & 1u) == 1u ? 32u : 0u), qh = b + 128u + 32u * h;
        for (uint l = 0u; l < 32u; l++) {
            uint lo = wb(ql + l);
            lo = qq < 2u ? lo & 0xFu : lo >> 4;
            int q = int(lo | (((wb(qh + l) >> (2u * qq)) & 3u) << 4)) - 32;
            float sc = float(ws8(b + 192u + 8u * h + 2u * qq + l / 16u));
            v[l] = d * sc * float(q);
        }
    }
}
