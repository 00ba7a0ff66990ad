/* cpu_attn_kern.h - the body of one attention job (see cpu_attn.c), compiled once per kernel
 * path by cpu_attn.c, which defines before including it:
 *   KA(name)  the name of this path's functions; KA_ATTR their target attribute
 *   VF, W     vector type and its float lanes (float and 1 for the scalar path)
 *   VLD VST VSET1 VZERO VADD VSUB VFMA   per-lane IEEE operations
 *   VEXP      rlx__vexp of every lane;  KA_CVT16(dst, src, n)  n halves to floats
 * Every operation is per lane and exact IEEE, so each instantiation gives the scalar bits; the
 * vectors only run independent outputs side by side (cells for q.k, head_dim for p.v). */

/* ggml's _mm512_reduce_add_ps order over sixteen values (or sixteen vectors of them). */
KA_ATTR static inline VF KA(tree16)(const VF x[16])
{
    VF t3[8], t6[4];
    for (int k = 0; k < 8; k++) t3[k] = VADD(x[k + 8], x[k]);
    for (int k = 0; k < 4; k++) t6[k] = VADD(t3[k + 4], t3[k]);
    return VADD(VADD(t6[0], t6[2]), VADD(t6[1], t6[3]));
}

/* q.k of cells k0 .. k0+nw-1 for every head of the job, into the score rows. */
KA_ATTR static void KA(scores)(const attn_job *j, const float *qb, int32_t k0, int nw, bool tile)
{
    const int hd = j->hd, np = hd & ~63;
    _Alignas(64) float row[1024];
    float *kt = j->part; /* hd x W, transposed: kt[i * W + l] is element i of cell l */
    for (int l = 0; l < W; l++) {
        if (l >= nw) {
            for (int i = 0; i < hd; i++) kt[i * W + l] = 0.0f;
            continue;
        }
        const uint8_t *kr = attn_kv_row(j, j->K, j->j0 + k0 + l);
        const float *src = (const float *)kr;
        if (j->f16) {
            KA_CVT16(row, (const uint16_t *)kr, hd);
            src = row;
        }
        for (int i = 0; i < hd; i++) kt[i * W + l] = src[i];
    }
    for (int g = 0; g < j->G; g++) {
        const float *qg = qb + g * hd;
        VF x[16];
        if (tile) { /* tinyBLAS: sixteen lanes, one fused multiply-add per 16 values */
            for (int l = 0; l < 16; l++) {
                VF a = VZERO();
                for (int m = 0; m < hd; m += 16) a = VFMA(VSET1(qg[m + l]), VLD(kt + (m + l) * W), a);
                x[l] = a;
            }
        } else { /* ggml_vec_dot: four accumulators of sixteen lanes per 64 values */
            for (int l = 0; l < 16; l++) {
                VF s0 = VZERO(), s1 = VZERO(), s2 = VZERO(), s3 = VZERO();
                for (int m = 0; m < np; m += 64) {
                    s0 = VFMA(VSET1(qg[m + l]), VLD(kt + (m + l) * W), s0);
                    s1 = VFMA(VSET1(qg[m + 16 + l]), VLD(kt + (m + 16 + l) * W), s1);
                    s2 = VFMA(VSET1(qg[m + 32 + l]), VLD(kt + (m + 32 + l) * W), s2);
                    s3 = VFMA(VSET1(qg[m + 48 + l]), VLD(kt + (m + 48 + l) * W), s3);
                }
                x[l] = VADD(VADD(s0, s2), VADD(s1, s3));
            }
        }
        _Alignas(64) float dv[W];
        VST(dv, KA(tree16)(x));
        if (!tile && np < hd)
            for (int l = 0; l < nw; l++) dv[l] = attn_dot_tail(qg, kt + l, W, np, hd, j->f16, dv[l]);
        memcpy(j->sc + (size_t)g * j->stride + (size_t)k0, dv, (size_t)nw * sizeof(float));
    }
}

/* Scores to probabilities for every head: ggml_soft_max_ext's arithmetic. */
KA_ATTR static void KA(softmax)(const attn_job *j, int32_t n)
{
    for (int g = 0; g < j->G; g++) {
        float *sg = j->sc + (size_t)g * j->stride, mx = -INFINITY;
        for (int32_t k = 0; k < n; k++) {
            float d = sg[k];
            if (j->cap > 0.0f) d = j->cap * tanhf(d * (1.0f / j->cap)); /* ggml scales by the reciprocal */
            d *= j->scale;
            sg[k] = d;
            if (d > mx) mx = d;
        }
        int32_t k = 0;
        for (; k + W <= n; k += W) VST(sg + k, VEXP(VSUB(VLD(sg + k), VSET1(mx))));
        for (; k < n; k++) sg[k] = rlx__vexp(sg[k] - mx);
        const float inv = attn_softmax_inv(j, sg);
        for (k = 0; k < n; k++) sg[k] = j->f16 ? attn_f16_round(sg[k] * inv) : sg[k] * inv;
    }
}

/* p.v for every head: partial sums per lane class of the cell (pos % 64 as ggml_vec_dot_f16's
 * four accumulators, pos % 16 as tinyBLAS's one), each a vector over head_dim, then ggml's
 * reductions. */
KA_ATTR static void KA(values)(const attn_job *j, int32_t n, bool tile)
{
    const int hd = j->hd, L = tile ? 16 : 64;
    const int gs = RLX_MAX(1, RLX_MIN(j->G, (int)(RLX_CPU_ATTN_PART / ((size_t)L * (size_t)hd))));
    _Alignas(64) float row[1024];
    for (int g0 = 0; g0 < j->G; g0 += gs) {
        const int gn = RLX_MIN(gs, j->G - g0);
        float *acc = j->part; /* [gn][L][hd] */
        memset(acc, 0, (size_t)gn * (size_t)L * (size_t)hd * sizeof(float));
        for (int32_t k = 0; k < n; k++) {
            const int32_t pos = j->j0 + k;
            const uint8_t *vr = attn_kv_row(j, j->V, pos);
            const float *vf = (const float *)vr;
            if (j->f16) {
                KA_CVT16(row, (const uint16_t *)vr, hd);
                vf = row;
            }
            for (int g = 0; g < gn; g++) {
                const float pk = j->sc[(size_t)(g0 + g) * j->stride + (size_t)k];
                float *ag = acc + ((size_t)g * (size_t)L + (size_t)(pos % L)) * (size_t)hd;
                int i = 0;
                for (; i + W <= hd; i += W) VST(ag + i, VFMA(VSET1(pk), VLD(vf + i), VLD(ag + i)));
                for (; i < hd; i++) ag[i] = fmaf(pk, vf[i], ag[i]);
            }
        }
        for (int g = 0; g < gn; g++) {
            const float *ag = acc + (size_t)g * (size_t)L * (size_t)hd;
            float *yg = j->y + (size_t)(g0 + g) * (size_t)hd;
            int i = 0;
            for (; i + W <= hd; i += W) {
                VF x[16];
                for (int l = 0; l < 16; l++)
                    x[l] = tile ? VLD(ag + l * hd + i)
                                : VADD(VADD(VLD(ag + l * hd + i), VLD(ag + (32 + l) * hd + i)),
                                       VADD(VLD(ag + (16 + l) * hd + i), VLD(ag + (48 + l) * hd + i)));
                VST(yg + i, KA(tree16)(x));
            }
            for (; i < hd; i++) yg[i] = attn_reduce_lanes(ag + i, hd, tile);
        }
    }
}

KA_ATTR static void KA(attn)(const attn_job *j)
{
    const int hd = j->hd;
    const int32_t n = j->p - j->j0 + 1;
    float qb[ATTN_G * 1024];
    for (int i = 0; i < j->G * hd; i++) qb[i] = j->f16 ? attn_f16_round(j->q[i]) : j->q[i];
    /* llama.cpp's batched (tinyBLAS) products need 16 | head_dim (q.k) and 4 | head_dim (p.v) */
    const bool kq_tile = j->prefill && j->f16 && hd % 16 == 0, v_tile = j->prefill && hd % 4 == 0;
    for (int32_t k0 = 0; k0 < n; k0 += W) KA(scores)(j, qb, k0, RLX_MIN(W, n - k0), kq_tile);
    KA(softmax)(j, n);
    KA(values)(j, n, v_tile);
}
