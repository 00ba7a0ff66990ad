/* kern_x86_float.h - F32 / F16 / BF16 weights times f32 activation rows, included by kern_x86.h
 * once per path. Every path computes exactly the numbers of backends/quant_f.c, the scalar
 * specification of llama.cpp's float arithmetic on an AVX-512 (+BF16) CPU, where the golden
 * outputs were made; tests/unit/test_quant_simd.c checks all paths against it bit for bit.
 * For F16/BF16 weights the caller has rounded the activations to the weight's type, as ggml
 * converts them, so every product is exact in float.
 *
 * Two arithmetics, per activation row:
 *   batched rows - llamafile's tinyBLAS (llama.cpp's multi-row products): one 16-lane
 *     accumulator per output, a fused multiply-add per 16 values (a vdpbf16ps pair step per 32
 *     for BF16), then _mm512_reduce_add_ps's tree. tinyBLAS declines K % 16 (BF16: 32) != 0;
 *     then, as in llama.cpp, the one-row arithmetic.
 *   one-row rows - ggml_vec_dot_f32/f16 (four 16-lane accumulators per 64 values, (a0 + a2) +
 *     (a1 + a3), the reduction tree, then the tail as quant_f.c) and ggml_vec_dot_bf16 (two
 *     vdpbf16ps chains per 64 values, each reduced and added in double, the tail in double).
 * Every output's arithmetic depends only on its row's kind, never on T, the tile shape or the
 * row range: results are batch invariant.
 *
 * A logical vector is 16 lanes: one zmm, or a low and a high ymm on AVX2, whose sum hi + lo then
 * hsum_ps is exactly the 16-lane tree. vdpbf16ps is used where the CPU has it and otherwise
 * computed as it defines: per lane the odd pair's product, then the even one's, each added with
 * one rounding and denormal results flushed to zero.
 *
 * Register blocking: batched micro-tiles of PT_RM weight rows x PT_RN activation rows (each
 * loaded weight vector feeds PT_RN FMAs); one-row micro-tiles of DT_RM1 rows x 1, or DT_RM x
 * DT_RN, four accumulators each. From eight one-row rows on, AVX-512 runs each chain as a pass
 * (dtile_passes); on AVX2, where a 16-lane accumulator takes two registers, batched F32/F16
 * rows take 3 x 2 tiles of two-register accumulators (ptile_pairs) and eight one-row rows and
 * more run the 8-lane halves of their chains as passes (dtile_halves), 3 x 4 outputs with one
 * register each. */

#if KAVX512
typedef struct { __m512 v; } lvec;
/* 6 x 4 accumulators + 6 + 1 of 32 zmm. 4 x 6 (four fewer weight loads per 24 FMAs) ran a
 * MiniLM encoder step ~6% slower on a Zen 5: its six activation rows' pointers did not fit the
 * general registers beside the rest and were reloaded from the stack every step of k */
#define PT_RM 6
#define PT_RN 4
#define DT_RM1 1     /* one weight row streams fastest; four chains hide the FMA latency */
#define DT_RM 2      /* 2 x 3 x 4 accumulators */
#define DT_RN 3
KINLINE lvec lv_zero(void) { return (lvec){_mm512_setzero_ps()}; }
KINLINE lvec lv_add(lvec a, lvec b) { return (lvec){_mm512_add_ps(a.v, b.v)}; }
KINLINE lvec lv_fma(lvec a, lvec b, lvec c) { return (lvec){_mm512_fmadd_ps(a.v, b.v, c.v)}; }
KINLINE float lv_red(lvec a) { return _mm512_reduce_add_ps(a.v); }
KINLINE lvec lv_loada(const float *a) { return (lvec){_mm512_loadu_ps(a)}; }
KINLINE lvec lv_from_u32(__m512i u) { return (lvec){_mm512_castsi512_ps(u)}; }
KINLINE lvec lv_loadw(int type, const void *w, int64_t k)
{
    switch (type) {
    case RLX_F32: return (lvec){_mm512_loadu_ps((const float *)w + k)};
    case RLX_F16: return (lvec){_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + k)))};
    default:
        return lv_from_u32(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + k))), 16));
    }
}
/* 32 bf16 weights at k as the even and odd elements of 16 pairs */
KINLINE void lv_loadw_pairs(const void *w, int64_t k, lvec *even, lvec *odd)
{
    const __m512i u = _mm512_loadu_si512((const uint16_t *)w + k);
    *even = lv_from_u32(_mm512_slli_epi32(u, 16));
    *odd = lv_from_u32(_mm512_and_si512(u, _mm512_set1_epi32((int)0xffff0000u)));
}
KINLINE void lv_loada_pairs(const float *a, int64_t k, lvec *even, lvec *odd)
{
    const __m512 x0 = _mm512_loadu_ps(a + k), x1 = _mm512_loadu_ps(a + k + 16);
    const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i io = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    *even = (lvec){_mm512_permutex2var_ps(x0, ie, x1)};
    *odd = (lvec){_mm512_permutex2var_ps(x0, io, x1)};
}
/* |x| < 2^-126 -> a zero of x's sign */
KINLINE lvec lv_ftz(lvec x)
{
    const __mmask16 tiny = _mm512_cmp_ps_mask(_mm512_abs_ps(x.v), _mm512_set1_ps(0x1p-126f), _CMP_LT_OQ);
    const __m512i u = _mm512_castps_si512(x.v);
    return (lvec){_mm512_castsi512_ps(_mm512_mask_and_epi32(u, tiny, u, _mm512_set1_epi32(INT32_MIN)))};
}
#else
typedef struct { __m256 lo, hi; } lvec;
#define PT_RM 1      /* 16 ymm: 1 x 4 logical accumulators (8) + weights and activations */
#define PT_RN 4
#define DT_RM1 1
#define DT_RM 1
#define DT_RN 1
KINLINE lvec lv_zero(void) { return (lvec){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
KINLINE lvec lv_add(lvec a, lvec b) { return (lvec){_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
KINLINE lvec lv_fma(lvec a, lvec b, lvec c) { return (lvec){_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
/* the 16-lane tree: lanes i + 8 and i, then hsum_ps's halves, pairs and final add */
KINLINE float lv_red(lvec a) { return hsum_ps(_mm256_add_ps(a.hi, a.lo)); }
KINLINE lvec lv_loada(const float *a) { return (lvec){_mm256_loadu_ps(a), _mm256_loadu_ps(a + 8)}; }
KINLINE __m256 ld8w(int type, const void *w, int64_t k)
{
    switch (type) {
    case RLX_F32: return _mm256_loadu_ps((const float *)w + k);
    case RLX_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + k)));
    default:
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + k))), 16));
    }
}
KINLINE lvec lv_loadw(int type, const void *w, int64_t k) { return (lvec){ld8w(type, w, k), ld8w(type, w, k + 8)}; }
KINLINE void lv_loadw_pairs(const void *w, int64_t k, lvec *even, lvec *odd)
{
    const __m256i u0 = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + k));
    const __m256i u1 = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + k + 16));
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    *even = (lvec){_mm256_castsi256_ps(_mm256_slli_epi32(u0, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(u1, 16))};
    *odd = (lvec){_mm256_castsi256_ps(_mm256_and_si256(u0, hi)), _mm256_castsi256_ps(_mm256_and_si256(u1, hi))};
}
/* 16 floats -> their 8 even and 8 odd elements, in order */
KINLINE void split8(const float *a, __m256 *even, __m256 *odd)
{
    const __m256 x0 = _mm256_loadu_ps(a), x1 = _mm256_loadu_ps(a + 8);
    const __m256 e = _mm256_shuffle_ps(x0, x1, 0x88), o = _mm256_shuffle_ps(x0, x1, 0xDD);
    /* shuffle_ps works per 128-bit half: lanes come out as 0 2 8 10 | 4 6 12 14 */
    *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8));
    *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8));
}
KINLINE void lv_loada_pairs(const float *a, int64_t k, lvec *even, lvec *odd)
{
    split8(a + k, &even->lo, &odd->lo);
    split8(a + k + 16, &even->hi, &odd->hi);
}
KINLINE __m256 ftz8(__m256 x)
{
    const __m256 tiny = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(0x1p-126f), _CMP_LT_OQ);
    return _mm256_blendv_ps(x, _mm256_and_ps(x, _mm256_set1_ps(-0.0f)), tiny);
}
KINLINE lvec lv_ftz(lvec x) { return (lvec){ftz8(x.lo), ftz8(x.hi)}; }
#endif

/* one vdpbf16ps step on 32 values at k: the odd pairs' products, then the even ones' */
KINLINE lvec lv_dp(lvec acc, const void *w, const float *a, int64_t k)
{
    lvec we, wo, ae, ao;
    lv_loadw_pairs(w, k, &we, &wo);
    lv_loada_pairs(a, k, &ae, &ao);
    acc = lv_ftz(lv_fma(wo, ao, acc));
    return lv_ftz(lv_fma(we, ae, acc));
}

KINLINE float fw_scalar(int type, const void *w, int64_t k)
{
    switch (type) {
    case RLX_F32: return ((const float *)w)[k];
    case RLX_F16: return f16(((const uint16_t *)w)[k]);
    default: return rlx_bf16_to_f32(((const uint16_t *)w)[k]);
    }
}

/* ---- batched rows: tinyBLAS (K % 16 == 0, BF16 K % 32 == 0) ---- */

/* F32/F16: acc[i][j] += w_i . a_j over 16 values at k = k0, k0 + kstep, ... < kend, one FMA per
 * step in order (tinyBLAS's chain with kstep 16, one of ggml's four with kstep 64). pf, when not
 * NULL, is rows laid out as w's whose same values are prefetched as the chain goes. */
KINLINE void tile_fma_chain(const int type, const uint8_t *w, size_t wrow, const float *a, size_t astr, int64_t k0,
                            int64_t kend, int64_t kstep, const uint8_t *pf, lvec acc[][PT_RN], const int rm, const int rn)
{
    const size_t esz = type == RLX_F32 ? 4 : 2;
    for (int64_t k = k0; k < kend; k += kstep) {
        if (pf)
            #pragma GCC unroll 8
            for (int i = 0; i < rm; i++)
                for (size_t o = 0; o < (size_t)kstep * esz; o += 64)
                    _mm_prefetch((const char *)pf + (size_t)i * wrow + (size_t)k * esz + o, _MM_HINT_T0);
        lvec wv[PT_RM];
        #pragma GCC unroll 8
        for (int i = 0; i < rm; i++) wv[i] = lv_loadw(type, w + (size_t)i * wrow, k);
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++) {
            const lvec av = lv_loada(a + (size_t)j * astr + k);
            #pragma GCC unroll 8
            for (int i = 0; i < rm; i++) acc[i][j] = lv_fma(wv[i], av, acc[i][j]);
        }
    }
}

#if KAVX512
/* r[k] = _mm512_reduce_add_ps(v[k]) for k < n (n <= 16), bit for bit: GCC's tree (lanes i + 8 and
 * i, then i + 4 and i of that, then 2 and 0 / 3 and 1, then those two), each level run on up
 * to sixteen accumulators at once instead of one horizontal reduction after another. */
KINLINE void reduce16_ps(const __m512 *v, float *r, const int n)
{
    __m512 s1[8], s2[4];
    #pragma GCC unroll 8
    for (int m = 0; m < (n + 1) / 2; m++) {
        const __m512 x = v[2 * m], y = 2 * m + 1 < n ? v[2 * m + 1] : _mm512_setzero_ps();
        /* [x lanes 8-15 | y lanes 8-15] + [x lanes 0-7 | y lanes 0-7] */
        s1[m] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0xEE), _mm512_shuffle_f32x4(x, y, 0x44));
    }
    #pragma GCC unroll 4
    for (int m = 0; m < (n + 3) / 4; m++) {
        const __m512 x = s1[2 * m], y = 2 * m + 1 < (n + 1) / 2 ? s1[2 * m + 1] : _mm512_setzero_ps();
        /* 128-bit lane k: the upper half of accumulator 4m + k's eight sums plus the lower */
        s2[m] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0xDD), _mm512_shuffle_f32x4(x, y, 0x88));
    }
    #pragma GCC unroll 4
    for (int m = 0; m < (n + 3) / 4; m++) {
        const __m512 t8 = _mm512_add_ps(s2[m], _mm512_permute_ps(s2[m], _MM_SHUFFLE(1, 0, 3, 2)));
        const __m512 t9 = _mm512_add_ps(t8, _mm512_permute_ps(t8, _MM_SHUFFLE(2, 3, 0, 1)));
        float l[16];
        _mm512_storeu_ps(l, t9);
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            if (4 * m + k < n) r[4 * m + k] = l[4 * k];
    }
}
#endif

KINLINE void ptile(const int type, const uint8_t *w, size_t wrow, const float *a, size_t astr, int64_t K,
                   float *out, int64_t ldo, const int rm, const int rn)
{
    lvec acc[PT_RM][PT_RN];
    #pragma GCC unroll 8
    for (int i = 0; i < rm; i++)
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++) acc[i][j] = lv_zero();
    if (type == RLX_BF16) {
        for (int64_t k = 0; k < K; k += 32)
            #pragma GCC unroll 8
            for (int j = 0; j < rn; j++)
                #pragma GCC unroll 8
                for (int i = 0; i < rm; i++) acc[i][j] = lv_dp(acc[i][j], w + (size_t)i * wrow, a + (size_t)j * astr, k);
    } else {
        tile_fma_chain(type, w, wrow, a, astr, 0, K, 16, NULL, acc, rm, rn);
    }
#if KAVX512
    if (rm * rn >= 8) {
        __m512 v[PT_RM * PT_RN];
        float r[PT_RM * PT_RN];
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++)
            #pragma GCC unroll 8
            for (int i = 0; i < rm; i++) v[j * rm + i] = acc[i][j].v;
        #pragma GCC unroll 4
        for (int b = 0; b < rm * rn; b += 16) reduce16_ps(v + b, r + b, rm * rn - b < 16 ? rm * rn - b : 16);
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++)
            #pragma GCC unroll 8
            for (int i = 0; i < rm; i++) out[(int64_t)j * ldo + i] = r[j * rm + i];
        return;
    }
#endif
    #pragma GCC unroll 8
    for (int j = 0; j < rn; j++)
        #pragma GCC unroll 8
        for (int i = 0; i < rm; i++) out[(int64_t)j * ldo + i] = lv_red(acc[i][j]);
}

#if !KAVX512
/* The 8-lane chains of AVX2's one-row pass tile (dtile_halves): up to HT_RM x HT_RN
 * outputs, one register each, over values k0, k0 + step, ... below k1 (8 at a time), from zero,
 * stored to part. The asm statement takes part's
 * address, so the compiler keeps finished chains in memory and the loop has the 16 registers
 * (without it GCC held a tile's other chains in registers and spilled accumulators inside the
 * loop: 2.6x slower). */
#define HT_RM 3
#define HT_RN 4
KINLINE void half_chains(const int type, const uint8_t *w, size_t wrow, const float *a, size_t astr, int64_t k0,
                         int64_t k1, int64_t step, float part[HT_RM][HT_RN][8], const int rm, const int rn)
{
    __m256 acc[HT_RM][HT_RN];
    #pragma GCC unroll 4
    for (int i = 0; i < rm; i++)
        #pragma GCC unroll 4
        for (int j = 0; j < rn; j++) acc[i][j] = _mm256_setzero_ps();
    for (int64_t k = k0; k < k1; k += step) {
        __m256 wv[HT_RM];
        #pragma GCC unroll 4
        for (int i = 0; i < rm; i++) wv[i] = ld8w(type, w + (size_t)i * wrow, k);
        #pragma GCC unroll 4
        for (int j = 0; j < rn; j++) {
            const __m256 av = _mm256_loadu_ps(a + (size_t)j * astr + k);
            #pragma GCC unroll 4
            for (int i = 0; i < rm; i++) acc[i][j] = _mm256_fmadd_ps(wv[i], av, acc[i][j]);
        }
    }
    #pragma GCC unroll 4
    for (int i = 0; i < rm; i++)
        #pragma GCC unroll 4
        for (int j = 0; j < rn; j++) _mm256_storeu_ps(part[i][j], acc[i][j]);
    __asm__ volatile("" : : "r"(part) : "memory");
}

/* ptile's numbers (F32/F16) on AVX2 for up to PP_RM x PP_RN outputs: a logical 16-lane
 * accumulator is two 8-lane registers (values k..k+7 and k+8..k+15 of every 16), so a 3 x 2
 * tile has its 12 accumulators in registers with one pass over K; per 16 values, 2 x 2
 * activation and 3 x 2 weight loads feed 12 FMAs. Each weight vector is loaded into a register
 * once and used for both activation rows (the asm statement stops GCC from folding it into both
 * FMAs as a memory operand, which made the loop load-bound: 16 loads per 12 FMAs). It replaced
 * two 8-lane passes of a 3 x 4 tile with the chains parked in memory between K blocks (Zen 3,
 * MiniLM-shaped products: 56 -> 69 GFLOP/s at K 384, 48 -> 60 at K 1536; bench/RESULTS.md
 * section 49). Every output is hsum_ps(hi + lo) as lv_red: ptile's results bit for bit. */
#define PP_RM 3
#define PP_RN 2
KINLINE void ptile_pairs(const int type, const uint8_t *w, size_t wrow, const float *a, size_t astr, int64_t K,
                         float *out, int64_t ldo, const int rm, const int rn)
{
    __m256 acc[PP_RM][PP_RN][2];
    #pragma GCC unroll 4
    for (int i = 0; i < rm; i++)
        #pragma GCC unroll 4
        for (int j = 0; j < rn; j++) acc[i][j][0] = acc[i][j][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k += 16)
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256 av[PP_RN];
            #pragma GCC unroll 4
            for (int j = 0; j < rn; j++) av[j] = _mm256_loadu_ps(a + (size_t)j * astr + k + 8 * h);
            #pragma GCC unroll 4
            for (int i = 0; i < rm; i++) {
                __m256 wv = ld8w(type, w + (size_t)i * wrow, k + 8 * h);
                __asm__("" : "+x"(wv));
                #pragma GCC unroll 4
                for (int j = 0; j < rn; j++) acc[i][j][h] = _mm256_fmadd_ps(wv, av[j], acc[i][j][h]);
            }
        }
    #pragma GCC unroll 4
    for (int j = 0; j < rn; j++)
        #pragma GCC unroll 4
        for (int i = 0; i < rm; i++) out[(int64_t)j * ldo + i] = hsum_ps(_mm256_add_ps(acc[i][j][1], acc[i][j][0]));
}
#endif

/* ---- one-row rows: ggml_vec_dot_f32 / _f16 / _bf16 ---- */

/* One output from its chains x (four; two for BF16): the reduction, then the tail past the last
 * multiple of 64 as quant_f.c. */
KINLINE void dtile_out(const int type, const uint8_t *wi, const float *aj, int64_t K, const lvec *x, float *o)
{
    const int64_t np = K & ~(int64_t)63;
    if (type == RLX_BF16) {
        double sum = (double)lv_red(x[0]);
        sum += (double)lv_red(x[1]);
        for (int64_t k = np; k < K; k++) sum += (double)(fw_scalar(type, wi, k) * aj[k]);
        *o = (float)sum;
    } else if (type == RLX_F32) {
        /* the compiled tail: eight products at a time added unfused, then FMAs */
        float sum = lv_red(lv_add(lv_add(x[0], x[2]), lv_add(x[1], x[3])));
        const float *wf = (const float *)wi;
        const int64_t m8 = np + ((K - np) & ~(int64_t)7);
        for (int64_t k = np; k < m8; k++) sum = sum + wf[k] * aj[k];
        for (int64_t k = m8; k < K; k++) sum = fmaf(wf[k], aj[k], sum);
        *o = sum;
    } else {
        double sum = (double)lv_red(lv_add(lv_add(x[0], x[2]), lv_add(x[1], x[3])));
        for (int64_t k = np; k < K; k++) sum += (double)(fw_scalar(type, wi, k) * aj[k]);
        *o = (float)sum;
    }
}

/* One-row tiles (decode) touch each weight row ROW_PF bytes ahead as they read it, into the rows
 * that follow in memory: the hardware prefetchers alone left F16 decode at 0.80x llama.cpp's on
 * an Intel Xeon (+23% avx512, +24-34% avx2 there; 1-2 KiB too short, 16 KiB too long;
 * bench/RESULTS.md 76; tiles of several rows and BF16 since, section 77). Touches only, so the
 * numbers are unchanged; they never fault, so reading past the weights is harmless. */
#define ROW_PF 4096

KINLINE void dtile(const int type, const uint8_t *w, size_t wrow, const float *a, size_t astr, int64_t K,
                   float *out, int64_t ldo, const int rm, const int rn)
{
    const int64_t np = K & ~(int64_t)63;
    lvec acc[DT_RM1 > DT_RM ? DT_RM1 : DT_RM][DT_RN][4];
    #pragma GCC unroll 8
    for (int i = 0; i < rm; i++)
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++)
            #pragma GCC unroll 4
            for (int s = 0; s < 4; s++) acc[i][j][s] = lv_zero();
    if (type == RLX_BF16) {
        /* two chains: values [k, k + 32) and [k + 32, k + 64) */
        for (int64_t k = 0; k < np; k += 64)
            #pragma GCC unroll 2
            for (int s = 0; s < 2; s++) {
                #pragma GCC unroll 8
                for (int i = 0; i < rm; i++) _mm_prefetch((const char *)w + (size_t)i * wrow + (size_t)k * 2 + ROW_PF + 64 * s, _MM_HINT_T0);
                #pragma GCC unroll 8
                for (int j = 0; j < rn; j++)
                    #pragma GCC unroll 8
                    for (int i = 0; i < rm; i++)
                        acc[i][j][s] = lv_dp(acc[i][j][s], w + (size_t)i * wrow, a + (size_t)j * astr, k + 32 * s);
            }
    } else {
        const size_t es = type == RLX_F32 ? 4 : 2;
        for (int64_t k = 0; k < np; k += 64) {
            #pragma GCC unroll 8
            for (int i = 0; i < rm; i++)
                #pragma GCC unroll 4
                for (size_t o = 0; o < 64 * es; o += 64)
                    _mm_prefetch((const char *)w + (size_t)i * wrow + (size_t)k * es + ROW_PF + o, _MM_HINT_T0);
            #pragma GCC unroll 4
            for (int s = 0; s < 4; s++) {
                lvec wv[DT_RM1 > DT_RM ? DT_RM1 : DT_RM];
                #pragma GCC unroll 8
                for (int i = 0; i < rm; i++) wv[i] = lv_loadw(type, w + (size_t)i * wrow, k + 16 * s);
                #pragma GCC unroll 8
                for (int j = 0; j < rn; j++) {
                    const lvec av = lv_loada(a + (size_t)j * astr + k + 16 * s);
                    #pragma GCC unroll 8
                    for (int i = 0; i < rm; i++) acc[i][j][s] = lv_fma(wv[i], av, acc[i][j][s]);
                }
            }
        }
    }
    #pragma GCC unroll 8
    for (int j = 0; j < rn; j++)
        #pragma GCC unroll 8
        for (int i = 0; i < rm; i++) dtile_out(type, w + (size_t)i * wrow, a + (size_t)j * astr, K, acc[i][j], out + (int64_t)j * ldo + i);
}

#if KAVX512
/* dtile's numbers for rm x rn outputs (F32/F16 only) with more outputs per register file:
 * ggml's four chains per output (values [k + 16s, k + 16s + 16) of every 64) are not live at
 * once but run in four passes over the tile, which stays in L1/L2. Each chain still sees the
 * same fused multiply-adds in the same order, so the sums are dtile's bit for bit; the loads
 * per FMA fall from 5 / 6 (2 x 3 tile) to 10 / 24. */
KINLINE void dtile_passes(const int type, const uint8_t *w, size_t wrow, const float *a, size_t astr, int64_t K,
                          float *out, int64_t ldo, const int rm, const int rn)
{
    const int64_t np = K & ~(int64_t)63;
    lvec part[PT_RM][PT_RN][4];
    #pragma GCC unroll 1
    for (int s = 0; s < 4; s++) {
        lvec acc[PT_RM][PT_RN];
        #pragma GCC unroll 8
        for (int i = 0; i < rm; i++)
            #pragma GCC unroll 8
            for (int j = 0; j < rn; j++) acc[i][j] = lv_zero();
        /* pass 0 touches the next tile's rows (contiguous) ahead: the passes' scattered first
         * touches defeat the hardware prefetchers */
        tile_fma_chain(type, w, wrow, a, astr, 16 * s, np, 64, s == 0 ? w + (size_t)rm * wrow : NULL, acc, rm, rn);
        #pragma GCC unroll 8
        for (int i = 0; i < rm; i++)
            #pragma GCC unroll 8
            for (int j = 0; j < rn; j++) part[i][j][s] = acc[i][j];
    }
    #pragma GCC unroll 8
    for (int j = 0; j < rn; j++)
        #pragma GCC unroll 8
        for (int i = 0; i < rm; i++) dtile_out(type, w + (size_t)i * wrow, a + (size_t)j * astr, K, part[i][j], out + (int64_t)j * ldo + i);
}
#endif

#if !KAVX512
/* dtile's numbers (F32/F16) for up to HT_RM x HT_RN outputs on AVX2, as dtile_passes does on
 * AVX-512: each output's four 16-lane chains are eight 8-lane ones (chain s, half h: values
 * k + 16s + 8h .. + 7 of every 64), run one after the other over the tile, which stays in L1 /
 * L2, with one register per output; then dtile_out on the reassembled chains. The same FMAs in
 * the same order per lane: dtile's results bit for bit. */
KINLINE void dtile_halves(const int type, const uint8_t *w, size_t wrow, const float *a, size_t astr, int64_t K,
                          float *out, int64_t ldo, const int rm, const int rn)
{
    float part[8][HT_RM][HT_RN][8]; /* [2s + h] */
    #pragma GCC unroll 1
    for (int c = 0; c < 8; c++) half_chains(type, w, wrow, a, astr, 8 * c, K & ~(int64_t)63, 64, part[c], rm, rn);
    #pragma GCC unroll 4
    for (int j = 0; j < rn; j++)
        #pragma GCC unroll 4
        for (int i = 0; i < rm; i++) {
            lvec x[4];
            #pragma GCC unroll 4
            for (int s = 0; s < 4; s++) x[s] = (lvec){_mm256_loadu_ps(part[2 * s][i][j]), _mm256_loadu_ps(part[2 * s + 1][i][j])};
            dtile_out(type, w + (size_t)i * wrow, a + (size_t)j * astr, K, x, out + (int64_t)j * ldo + i);
        }
}
#endif

/* TILE(args..., rm, rn) with rn (a variable in scope, 1..6) made a constant no larger than max */
#define TILE_BY_RN(TILE, rm, max, ...)                          \
    switch (rn) {                                               \
    case 1: TILE(__VA_ARGS__, rm, 1); break;                    \
    case 2: TILE(__VA_ARGS__, rm, 2 <= max ? 2 : 1); break;     \
    case 3: TILE(__VA_ARGS__, rm, 3 <= max ? 3 : 1); break;     \
    case 4: TILE(__VA_ARGS__, rm, 4 <= max ? 4 : 1); break;     \
    case 5: TILE(__VA_ARGS__, rm, 5 <= max ? 5 : 1); break;     \
    default: TILE(__VA_ARGS__, rm, 6 <= max ? 6 : 1); break;    \
    }

#if KAVX512
/* measured on the Qwen3-0.6B shape, F16: 16 rows 119 -> 184 tok/s with passes, 4 rows 94 -> 85 */
#define PASSES(type, T, K) ((type) != RLX_BF16 && (T) >= 8)
#define ONEROW_PASS_TILE dtile_passes
#define HALVES(type) 0 /* AVX-512: 16-lane accumulators are one register; ptile_pairs is AVX2's */
#define PP_RM PT_RM
#define PP_RN PT_RN
#define ptile_pairs ptile
#define ONEROW_PASS_RM PT_RM /* the batched tile's shape, per pass */
#define ONEROW_PASS_RN PT_RN
#else
/* eight or more one-row rows: dtile_halves (as PASSES on AVX-512); from two rows when K is a
 * head's size (attention's K.q of a query-head group: dtile takes one output at a time there,
 * reading and converting each K row once per head; Q4_K_M decode at 1024 positions of context
 * 18.2 -> 19.9 t/s, -t 1). Weight products (K >= 512) keep dtile below eight rows. */
#define PASSES(type, T, K) ((type) != RLX_BF16 && ((T) >= 8 || ((T) >= 2 && (K) <= 256)))
#define HALVES(type) ((type) != RLX_BF16) /* batched F32/F16 rows take ptile_pairs */
#define ONEROW_PASS_RM HT_RM
#define ONEROW_PASS_RN HT_RN
#define ONEROW_PASS_TILE dtile_halves
#endif
#define ONEROW_TILE(type, full, ...)                                                                          \
    {                                                                                                         \
        if (passes) TILE_BY_RN(ONEROW_PASS_TILE, (full) ? ONEROW_PASS_RM : 1, ONEROW_PASS_RN, type, __VA_ARGS__) \
        else TILE_BY_RN(dtile, (full) ? DT_RM : 1, DT_RN, type, __VA_ARGS__)                                   \
    }

/* Rows [n0, n1) times activation rows [t0, t1), all of one kind. On AVX-512 a full tile (the
 * kind's rows and activation rows) runs as a function of its own, NAME##_full (kind 0 batched,
 * 1 one-row passes, 2 one-row dtile): inlined into the loops below, GCC kept their variables in
 * registers and reloaded the tile's row offsets from the stack every step of k (the 6 x 4 F32
 * tile: eight reloads beside its ten loads per 24 FMAs; alone, none). AVX2's smaller tiles kept
 * their offsets in registers inlined, and a call per 3 x 2 tile cost more than it saved. Same
 * instructions per output: the numbers do not change. */
#define FULL_TILE_CALLS KAVX512
#define FLOAT_RUN(NAME, TYPE)                                                                    \
    static __attribute__((noinline)) void NAME##_full(const uint8_t *w, size_t wrow, const float *a, size_t astr, \
                                                      int64_t K, float *out, int64_t ldo, const int kind) \
    {                                                                                            \
        if (kind == 0 && HALVES(TYPE)) ptile_pairs(TYPE, w, wrow, a, astr, K, out, ldo, PP_RM, PP_RN); \
        else if (kind == 0) ptile(TYPE, w, wrow, a, astr, K, out, ldo, PT_RM, PT_RN);            \
        else if (kind == 1) ONEROW_PASS_TILE(TYPE, w, wrow, a, astr, K, out, ldo, ONEROW_PASS_RM, ONEROW_PASS_RN); \
        else dtile(TYPE, w, wrow, a, astr, K, out, ldo, DT_RM, DT_RN);                           \
    }                                                                                            \
    static void NAME(const uint8_t *w, size_t wrow, int64_t n0, int64_t n1, const float *act,   \
                     size_t astr, int64_t t0, int64_t t1, int64_t K, float *out, int64_t ldo,    \
                     bool onerow)                                                                \
    {                                                                                            \
        if (onerow && t1 - t0 == 1) {                                                            \
            const float *a = act + (size_t)t0 * astr;                                            \
            float *o = out + t0 * ldo;                                                           \
            int64_t n = n0;                                                                      \
            for (; n + DT_RM1 <= n1; n += DT_RM1)                                                \
                dtile(TYPE, w + (size_t)n * wrow, wrow, a, astr, K, o + n, ldo, DT_RM1, 1);      \
            for (; n < n1; n++) dtile(TYPE, w + (size_t)n * wrow, wrow, a, astr, K, o + n, ldo, 1, 1); \
            return;                                                                              \
        }                                                                                        \
        const bool passes = PASSES(TYPE, t1 - t0, K);                                               \
        const int rmax = onerow ? (passes ? ONEROW_PASS_RM : DT_RM) : HALVES(TYPE) ? PP_RM : PT_RM; \
        const int tmax = onerow ? (passes ? ONEROW_PASS_RN : DT_RN) : HALVES(TYPE) ? PP_RN : PT_RN; \
        const int64_t ntile = (t1 - t0 + tmax - 1) / tmax;                                      \
        for (int64_t n = n0; n < n1; n += rmax) {                                                \
            const bool full = n + rmax <= n1;                                                    \
            /* batched rows: the next group of rows (contiguous) is touched a share per tile \
             * of this one, so its first tile does not wait on L3 or memory (cold MiniLM-shaped \
             * products +3% on one thread, +5% on two, avx2 +4%: bench/RESULTS.md 77; one-row  \
             * passes touch ahead in dtile_passes). Touches only: the numbers are unchanged. */ \
            const char *nx = (const char *)(w + (size_t)(n + rmax) * wrow);                       \
            const size_t nxl = !onerow && n + rmax < n1 ? ((size_t)(n1 - n - rmax < rmax ? n1 - n - rmax : rmax) * wrow + 63) / 64 : 0; \
            const size_t per = (nxl + (size_t)ntile - 1) / (size_t)ntile;                      \
            size_t nxi = 0;                                                                      \
            for (int64_t t = t0; t < t1; t += tmax) {                                            \
                for (size_t e = nxi + per < nxl ? nxi + per : nxl; nxi < e; nxi++)               \
                    _mm_prefetch(nx + 64 * nxi, _MM_HINT_T0);                                    \
                const int rn = (int)(t1 - t < tmax ? t1 - t : tmax);                             \
                const float *a = act + (size_t)t * astr;                                         \
                float *o = out + t * ldo;                                                        \
                for (int64_t r = n; r < (full ? n + 1 : n1); r++) {                              \
                    const uint8_t *wr = w + (size_t)r * wrow;                                    \
                    if (FULL_TILE_CALLS && full && rn == tmax) NAME##_full(wr, wrow, a, astr, K, o + r, ldo, !onerow ? 0 : passes ? 1 : 2); \
                    else if (onerow && full) ONEROW_TILE(TYPE, true, wr, wrow, a, astr, K, o + r, ldo)        \
                    else if (onerow) ONEROW_TILE(TYPE, false, wr, wrow, a, astr, K, o + r, ldo)         \
                    else if (HALVES(TYPE) && full) TILE_BY_RN(ptile_pairs, PP_RM, PP_RN, TYPE, wr, wrow, a, astr, K, o + r, ldo) \
                    else if (HALVES(TYPE)) TILE_BY_RN(ptile_pairs, 1, PP_RN, TYPE, wr, wrow, a, astr, K, o + r, ldo) \
                    else if (full) TILE_BY_RN(ptile, PT_RM, PT_RN, TYPE, wr, wrow, a, astr, K, o + r, ldo) \
                    else TILE_BY_RN(ptile, 1, PT_RN, TYPE, wr, wrow, a, astr, K, o + r, ldo)     \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }
FLOAT_RUN(float_run_f32, RLX_F32)
FLOAT_RUN(float_run_f16, RLX_F16)
FLOAT_RUN(float_run_bf16, RLX_BF16)

#if KAVX512
/* BF16 on CPUs with AVX512-BF16: the instruction itself (one output at a time: it halves the
 * loads per product already). The activations, bf16 values, are narrowed exactly. */
#define TBF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
TBF16 static inline __m512bh bf_loadw(const uint8_t *w, int64_t k)
{
    return (__m512bh)_mm512_loadu_si512((const uint16_t *)w + k);
}
TBF16 static inline __m512bh bf_loada(const float *a, int64_t k)
{
    return _mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(a + k));
}

/* Batched rows: tinyBLAS's arithmetic (one accumulator per output, a vdpbf16ps per 32 values in
 * order, then _mm512_reduce_add_ps) for rm x rn outputs at once: each weight vector feeds rn
 * products and each activation vector, narrowed once per step, rm (the one-output loop ran BF16
 * prefill at 0.41x llama.cpp's, bench/RESULTS.md 77). The same instructions per output in the same
 * order: its results bit for bit. */
#define BF_RM 6
#define BF_RN 4
KINLINE TBF16 void bf16_ptile(const uint8_t *w, size_t wrow, const float *a, size_t astr, int64_t K, float *out,
                              int64_t ldo, const uint16_t *ab, const int rm, const int rn)
{
    __m512 acc[BF_RM][BF_RN];
    #pragma GCC unroll 8
    for (int i = 0; i < rm; i++)
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++) acc[i][j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 32) {
        __m512bh av[BF_RN];
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++)
            av[j] = ab ? (__m512bh)_mm512_loadu_si512(ab + (size_t)j * (size_t)K + k) : bf_loada(a + (size_t)j * astr, k);
        #pragma GCC unroll 8
        for (int i = 0; i < rm; i++) {
            const __m512bh wv = bf_loadw(w + (size_t)i * wrow, k);
            #pragma GCC unroll 8
            for (int j = 0; j < rn; j++) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], wv, av[j]);
        }
    }
    #pragma GCC unroll 8
    for (int j = 0; j < rn; j++)
        #pragma GCC unroll 8
        for (int i = 0; i < rm; i++) out[(int64_t)j * ldo + i] = _mm512_reduce_add_ps(acc[i][j]);
}

/* One-row rows (ggml_vec_dot_bf16: two chains per 64 values, each reduced and added in double,
 * the tail in double) for rm x rn outputs, sharing weight and activation loads the same way. */
#define BO_RM 2
#define BO_RN 4
KINLINE TBF16 void bf16_dtile(const uint8_t *w, size_t wrow, const float *a, size_t astr, int64_t K, float *out,
                              int64_t ldo, const int rm, const int rn)
{
    __m512 c[BO_RM][BO_RN][2];
    #pragma GCC unroll 4
    for (int i = 0; i < rm; i++)
        #pragma GCC unroll 4
        for (int j = 0; j < rn; j++) c[i][j][0] = c[i][j][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k + 64 <= K; k += 64) {
        /* decode streams the weights: touch each row's ROW_PF ahead as dtile does (BF16 batch-1
         * decode +27%, x4 +45% on an Intel Xeon, bench/RESULTS.md 77) */
        #pragma GCC unroll 4
        for (int i = 0; i < rm; i++) {
            _mm_prefetch((const char *)w + (size_t)i * wrow + (size_t)k * 2 + ROW_PF, _MM_HINT_T0);
            _mm_prefetch((const char *)w + (size_t)i * wrow + (size_t)k * 2 + ROW_PF + 64, _MM_HINT_T0);
        }
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512bh av[BO_RN];
            #pragma GCC unroll 4
            for (int j = 0; j < rn; j++) av[j] = bf_loada(a + (size_t)j * astr, k + 32 * h);
            #pragma GCC unroll 4
            for (int i = 0; i < rm; i++) {
                const __m512bh wv = bf_loadw(w + (size_t)i * wrow, k + 32 * h);
                #pragma GCC unroll 4
                for (int j = 0; j < rn; j++) c[i][j][h] = _mm512_dpbf16_ps(c[i][j][h], wv, av[j]);
            }
        }
    }
    #pragma GCC unroll 4
    for (int j = 0; j < rn; j++)
        #pragma GCC unroll 4
        for (int i = 0; i < rm; i++) {
            const lvec x[2] = {{c[i][j][0]}, {c[i][j][1]}};
            dtile_out(RLX_BF16, w + (size_t)i * wrow, a + (size_t)j * astr, K, x, out + (int64_t)j * ldo + i);
        }
}

TBF16 static void bf16dp_run(const uint8_t *w, size_t wrow, int64_t n0, int64_t n1, const float *act, size_t astr,
                             int64_t t0, int64_t t1, int64_t K, float *out, int64_t ldo, bool onerow)
{
    if (!onerow) {
        /* each block of BF_RN activation rows is narrowed once (exactly: the backend rounded them
         * to bf16 values) and every row group reads it from L1; the weights come from L2 once per
         * block, which vdpbf16ps's pace (one per two cycles on the Intel Xeon of
         * bench/RESULTS.md 77) leaves far from L2's limit. Without the buffer (one row group, one
         * activation row, or no memory) each tile narrows its own. */
        uint16_t *ab = t1 - t0 > 1 && n1 - n0 > BF_RM ? malloc((size_t)BF_RN * (size_t)K * 2) : NULL;
        for (int64_t t = t0; t < t1; t += BF_RN) {
            const int rn = (int)(t1 - t < BF_RN ? t1 - t : BF_RN);
            const float *a = act + (size_t)t * astr;
            if (ab)
                for (int j = 0; j < rn; j++)
                    for (int64_t k = 0; k < K; k += 32)
                        _mm512_storeu_si512(ab + (size_t)j * (size_t)K + k, (__m512i)bf_loada(a + (size_t)j * astr, k));
            float *o = out + t * ldo;
            int64_t n = n0;
            for (; n + BF_RM <= n1; n += BF_RM) TILE_BY_RN(bf16_ptile, BF_RM, BF_RN, w + (size_t)n * wrow, wrow, a, astr, K, o + n, ldo, ab)
            for (; n < n1; n++) TILE_BY_RN(bf16_ptile, 1, BF_RN, w + (size_t)n * wrow, wrow, a, astr, K, o + n, ldo, ab)
        }
        free(ab);
        return;
    }
    for (int64_t n = n0; n < n1; n += BO_RM) {
        const bool full = n + BO_RM <= n1;
        for (int64_t t = t0; t < t1; t += BO_RN) {
            const int rn = (int)(t1 - t < BO_RN ? t1 - t : BO_RN);
            const float *a = act + (size_t)t * astr;
            float *o = out + t * ldo;
            for (int64_t r = n; r < (full ? n + 1 : n1); r++) {
                const uint8_t *wr = w + (size_t)r * wrow;
                if (full) TILE_BY_RN(bf16_dtile, BO_RM, BO_RN, wr, wrow, a, astr, K, o + r, ldo)
                else TILE_BY_RN(bf16_dtile, 1, BO_RN, wr, wrow, a, astr, K, o + r, ldo)
            }
        }
    }
}
#endif

/* Activation rows [t0, t1) of one kind (onerow: llama.cpp's one-row arithmetic, else its
 * batched one, which needs K % 16 (BF16: 32) == 0 and otherwise is the one-row one too). */
static void float_rows(int type, const uint8_t *w, size_t wrow, int64_t n0, int64_t n1, const float *act, size_t astr,
                       int64_t t0, int64_t t1, int64_t K, float *out, int64_t ldo, bool onerow)
{
    if (K % (type == RLX_BF16 ? 32 : 16)) onerow = true;
#if KAVX512
    if (type == RLX_BF16 && rlx__cpu_bf16dp()) { bf16dp_run(w, wrow, n0, n1, act, astr, t0, t1, K, out, ldo, onerow); return; }
#endif
    switch (type) {
    case RLX_F32: float_run_f32(w, wrow, n0, n1, act, astr, t0, t1, K, out, ldo, onerow); break;
    case RLX_F16: float_run_f16(w, wrow, n0, n1, act, astr, t0, t1, K, out, ldo, onerow); break;
    default: float_run_bf16(w, wrow, n0, n1, act, astr, t0, t1, K, out, ldo, onerow); break;
    }
}

/* Rows [n0, n1) of float weights (wrow bytes apart) times T activation rows; decode[t] != 0
 * marks the rows that take the one-row arithmetic (NULL: none). Runs of rows of one kind go
 * together. The entry of attention's products (K rows of the cache, transposed V). */
void KPFX(float_gemm)(int type, const void *w, size_t wrow, int64_t n0, int64_t n1, const float *act, size_t astr,
                      int64_t T, int64_t K, float *out, int64_t ldo, const uint8_t *decode)
{
    for (int64_t t0 = 0; t0 < T;) {
        const bool d = decode && decode[t0];
        int64_t t1 = t0 + 1;
        while (t1 < T && (decode && decode[t1]) == d) t1++;
        float_rows(type, w, wrow, n0, n1, act, astr, t0, t1, K, out, ldo, d);
        t0 = t1;
    }
}
