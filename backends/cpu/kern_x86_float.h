/* kern_x86_float.h - F32 / F16 / BF16 weights times f32 activation rows, included by kern_x86.h
 * once per path (FW = 16 lanes with AVX-512, 8 with AVX2). For F16/BF16 weights the caller has
 * rounded the activations to the weight's type, as ggml converts them.
 *
 * Two arithmetics, chosen per activation row, each the order of llama.cpp's CPU backend so that
 * logits match it bit for bit (activations are rounded to f16/bf16 or 8 bits before every
 * product, so a last-bit difference upstream can flip a rounding and show in the logits):
 *   prompt rows (decode[t] == 0) - llamafile's tinyBLAS, which llama.cpp uses for batches of 2+
 *     tokens: one accumulator per output over lanes k mod KN, one horizontal sum. tinyBLAS
 *     declines K % KN != 0; then llama.cpp, and we, use the decode arithmetic.
 *   decode rows (decode[t] != 0) - ggml_vec_dot_f32/f16/bf16, used for one-token steps: four
 *     accumulators over 4 x FW (two dpbf16 ones over 64 for BF16 with AVX512-BF16), ggml's
 *     pairwise reduction, then the leftover products in float (F32) or double (F16, BF16).
 * Which rows are which depends only on the request (see rlx_batch.decode), and every output's
 * arithmetic depends only on its row's kind, never on T, the tile shape or the row range: results
 * stay batch invariant.
 *
 * Register blocking: a prompt micro-tile multiplies PT_RM weight rows with PT_RN activation rows
 * (each loaded weight vector feeds PT_RN FMAs); a decode micro-tile has DT_RM1 rows x 1 or
 * DT_RM x DT_RN, four accumulators each. */

#if KAVX512
typedef __m512 fvec;
#define FW 16
#define PT_RM 4      /* 4 x 6 accumulators + 4 + 1 of 32 zmm */
#define PT_RN 6
#define DT_RM1 1     /* one weight row streams fastest; its four accumulators hide the FMA latency */
#define DT_RM 2      /* 2 x 3 x 4 accumulators */
#define DT_RN 3
KINLINE fvec fv_zero(void) { return _mm512_setzero_ps(); }
KINLINE fvec fv_add(fvec a, fvec b) { return _mm512_add_ps(a, b); }
KINLINE fvec fv_fma(fvec a, fvec b, fvec c) { return _mm512_fmadd_ps(a, b, c); }
/* tinyBLAS's hsum and the last step of GGML_F32x16_REDUCE: _mm512_reduce_add_ps */
KINLINE float fv_hsum(fvec v) { return _mm512_reduce_add_ps(v); }
KINLINE float fv_hsum_vecdot(fvec v) { return _mm512_reduce_add_ps(v); }
KINLINE fvec fv_loada(const float *a, int64_t k) { return _mm512_loadu_ps(a + k); }
KINLINE fvec fv_loadw(int type, const void *w, int64_t k)
{
    switch (type) {
    case RLX_F32: return _mm512_loadu_ps((const float *)w + k);
    case RLX_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + k)));
    default: {
        const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + k)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    }
    }
}
#else
typedef __m256 fvec;
#define FW 8
#define PT_RM 2      /* 2 x 4 accumulators + 2 + 1 of 16 ymm */
#define PT_RN 4
#define DT_RM1 2
#define DT_RM 1
#define DT_RN 2
KINLINE fvec fv_zero(void) { return _mm256_setzero_ps(); }
KINLINE fvec fv_add(fvec a, fvec b) { return _mm256_add_ps(a, b); }
KINLINE fvec fv_fma(fvec a, fvec b, fvec c) { return _mm256_fmadd_ps(a, b, c); }
KINLINE float fv_hsum(fvec v) { return hsum_ps(v); }
/* the last step of GGML_F32x8_REDUCE: low + high half, then two hadds */
KINLINE float fv_hsum_vecdot(fvec v)
{
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}
KINLINE fvec fv_loada(const float *a, int64_t k) { return _mm256_loadu_ps(a + k); }
KINLINE fvec fv_loadw(int type, const void *w, int64_t k)
{
    switch (type) {
    case RLX_F32: return _mm256_loadu_ps((const float *)w + k);
    case RLX_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + k)));
    default: {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + k)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
    }
}
#endif

KINLINE float fw_scalar(int type, const void *w, int64_t k)
{
    switch (type) {
    case RLX_F32: return ((const float *)w)[k];
    case RLX_F16: return f16(((const uint16_t *)w)[k]);
    default: return rlx_bf16_to_f32(((const uint16_t *)w)[k]);
    }
}

/* ---- prompt rows: tinyBLAS (K % FW == 0) ---- */

KINLINE void ptile(const int type, const uint8_t *w, size_t wrow, const float *a, size_t astr, int64_t K,
                   float *out, int64_t ldo, const int rm, const int rn)
{
    fvec acc[PT_RM][PT_RN];
    #pragma GCC unroll 8
    for (int i = 0; i < rm; i++)
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++) acc[i][j] = fv_zero();
    for (int64_t k = 0; k < K; k += FW) {
        fvec wv[PT_RM];
        #pragma GCC unroll 8
        for (int i = 0; i < rm; i++) wv[i] = fv_loadw(type, w + (size_t)i * wrow, k);
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++) {
            const fvec av = fv_loada(a + (size_t)j * astr, k);
            #pragma GCC unroll 8
            for (int i = 0; i < rm; i++) acc[i][j] = fv_fma(wv[i], av, acc[i][j]);
        }
    }
    #pragma GCC unroll 8
    for (int j = 0; j < rn; j++)
        #pragma GCC unroll 8
        for (int i = 0; i < rm; i++) out[(int64_t)j * ldo + i] = fv_hsum(acc[i][j]);
}

/* ---- decode rows: ggml_vec_dot_f32 / _f16 (four accumulators over 4 x FW), and the BF16
 * variant of plain AVX-512 / AVX2 (two or four accumulators over 2 x 16 or 4 x 8) ---- */

KINLINE void dtile(const int type, const uint8_t *w, size_t wrow, const float *a, size_t astr, int64_t K,
                   float *out, int64_t ldo, const int rm, const int rn)
{
#if KAVX512
    const int na = type == RLX_BF16 ? 2 : 4; /* accumulators of FW lanes per output */
#else
    const int na = 4;
#endif
    const int64_t step = (int64_t)na * FW;
    const int64_t np = K - K % step;
    fvec acc[DT_RM1 > DT_RM ? DT_RM1 : DT_RM][DT_RN][4];
    #pragma GCC unroll 8
    for (int i = 0; i < rm; i++)
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++)
            #pragma GCC unroll 4
            for (int s = 0; s < na; s++) acc[i][j][s] = fv_zero();
    for (int64_t k = 0; k < np; k += step)
        #pragma GCC unroll 4
        for (int s = 0; s < na; s++) {
            fvec wv[DT_RM1 > DT_RM ? DT_RM1 : DT_RM];
            #pragma GCC unroll 8
            for (int i = 0; i < rm; i++) wv[i] = fv_loadw(type, w + (size_t)i * wrow, k + s * FW);
            #pragma GCC unroll 8
            for (int j = 0; j < rn; j++) {
                const fvec av = fv_loada(a + (size_t)j * astr, k + s * FW);
                #pragma GCC unroll 8
                for (int i = 0; i < rm; i++) acc[i][j][s] = fv_fma(wv[i], av, acc[i][j][s]);
            }
        }
    #pragma GCC unroll 8
    for (int j = 0; j < rn; j++)
        #pragma GCC unroll 8
        for (int i = 0; i < rm; i++) {
            const uint8_t *wi = w + (size_t)i * wrow;
            const float *aj = a + (size_t)j * astr;
            fvec *x = acc[i][j];
            if (type == RLX_BF16) {
#if KAVX512
                /* sumf += reduce(c1); sumf += reduce(c2) */
                double sum = (double)fv_hsum(x[0]);
                sum += (double)fv_hsum(x[1]);
#else
                /* (c1 + c3) + (c2 + c4), then hsum */
                double sum = (double)fv_hsum(fv_add(fv_add(x[0], x[2]), fv_add(x[1], x[3])));
#endif
                for (int64_t k = np; k < K; k++) sum += (double)(fw_scalar(type, wi, k) * aj[k]);
                out[(int64_t)j * ldo + i] = (float)sum;
                continue;
            }
            /* GGML_F32_VEC_REDUCE: x0 += x2, x1 += x3; x0 += x1; then the final reduction */
            const float r = fv_hsum_vecdot(fv_add(fv_add(x[0], x[2]), fv_add(x[1], x[3])));
            if (type == RLX_F32) {
                float sum = r; /* ggml keeps this one in float; the compiler contracts to FMA */
                for (int64_t k = np; k < K; k++) sum = fmaf(((const float *)wi)[k], aj[k], sum);
                out[(int64_t)j * ldo + i] = sum;
            } else {
                double sum = (double)r;
                for (int64_t k = np; k < K; k++) sum += (double)(fw_scalar(type, wi, k) * aj[k]);
                out[(int64_t)j * ldo + i] = (float)sum;
            }
        }
}

#define TILE_BY_RN(TILE, type, rm, max, ...)                    \
    switch (rn) {                                               \
    case 1: TILE(type, __VA_ARGS__, rm, 1); break;              \
    case 2: TILE(type, __VA_ARGS__, rm, 2 <= max ? 2 : 1); break; \
    case 3: TILE(type, __VA_ARGS__, rm, 3 <= max ? 3 : 1); break; \
    case 4: TILE(type, __VA_ARGS__, rm, 4 <= max ? 4 : 1); break; \
    case 5: TILE(type, __VA_ARGS__, rm, 5 <= max ? 5 : 1); break; \
    default: TILE(type, __VA_ARGS__, rm, 6 <= max ? 6 : 1); break; \
    }

/* Rows [n0, n1) times activation rows [t0, t1), all of one kind. */
#define FLOAT_RUN(NAME, TYPE)                                                                    \
    static void NAME(const uint8_t *w, size_t wrow, int64_t n0, int64_t n1, const float *act,   \
                     size_t astr, int64_t t0, int64_t t1, int64_t K, float *out, int64_t ldo,    \
                     bool decode)                                                                \
    {                                                                                            \
        if (decode && t1 - t0 == 1) {                                                            \
            const float *a = act + (size_t)t0 * astr;                                            \
            float *o = out + t0 * ldo;                                                           \
            int64_t n = n0;                                                                      \
            for (; n + DT_RM1 <= n1; n += DT_RM1)                                                \
                dtile(TYPE, w + (size_t)n * wrow, wrow, a, astr, K, o + n, ldo, DT_RM1, 1);      \
            for (; n < n1; n++) dtile(TYPE, w + (size_t)n * wrow, wrow, a, astr, K, o + n, ldo, 1, 1); \
            return;                                                                              \
        }                                                                                        \
        const int rmax = decode ? DT_RM : PT_RM, tmax = decode ? DT_RN : PT_RN;                  \
        for (int64_t n = n0; n < n1; n += rmax) {                                                \
            const bool full = n + rmax <= n1;                                                    \
            for (int64_t t = t0; t < t1; t += tmax) {                                            \
                const int rn = (int)(t1 - t < tmax ? t1 - t : tmax);                             \
                const float *a = act + (size_t)t * astr;                                         \
                float *o = out + t * ldo;                                                        \
                for (int64_t r = n; r < (full ? n + 1 : n1); r++) {                              \
                    const uint8_t *wr = w + (size_t)r * wrow;                                    \
                    if (decode && full) TILE_BY_RN(dtile, TYPE, DT_RM, DT_RN, wr, wrow, a, astr, K, o + r, ldo) \
                    else if (decode) TILE_BY_RN(dtile, TYPE, 1, DT_RN, wr, wrow, a, astr, K, o + r, ldo) \
                    else if (full) TILE_BY_RN(ptile, TYPE, PT_RM, PT_RN, wr, wrow, a, astr, K, o + r, ldo) \
                    else TILE_BY_RN(ptile, TYPE, 1, PT_RN, wr, wrow, a, astr, K, o + r, ldo)     \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }
FLOAT_RUN(float_run_f32, RLX_F32)
FLOAT_RUN(float_run_f16, RLX_F16)
FLOAT_RUN(float_run_bf16, RLX_BF16)

#if KAVX512
/* BF16 with AVX512-BF16, as ggml on such CPUs: vdpbf16ps sums pairs of products into f32 lanes
 * (tinyBLAS with KN = 32; vec_dot with two accumulators over 64). The activations, already
 * bf16 values, are narrowed exactly. */
#define TBF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
TBF16 static inline __m512bh bf_loadw(const uint8_t *w, int64_t k)
{
    return (__m512bh)_mm512_loadu_si512((const uint16_t *)w + k);
}
TBF16 static inline __m512bh bf_loada(const float *a, int64_t k)
{
    return _mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(a + k));
}

TBF16 static void bf16dp_run(const uint8_t *w, size_t wrow, int64_t n0, int64_t n1, const float *act, size_t astr,
                             int64_t t0, int64_t t1, int64_t K, float *out, int64_t ldo, bool decode)
{
    /* one output at a time: vdpbf16ps halves the loads per product already */
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *wr = w + (size_t)n * wrow;
        for (int64_t t = t0; t < t1; t++) {
            const float *a = act + (size_t)t * astr;
            if (!decode) {
                __m512 c = _mm512_setzero_ps();
                for (int64_t k = 0; k < K; k += 32) c = _mm512_dpbf16_ps(c, bf_loadw(wr, k), bf_loada(a, k));
                out[t * ldo + n] = _mm512_reduce_add_ps(c);
                continue;
            }
            __m512 c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
            int64_t k = 0;
            for (; k + 64 <= K; k += 64) {
                c1 = _mm512_dpbf16_ps(c1, bf_loadw(wr, k), bf_loada(a, k));
                c2 = _mm512_dpbf16_ps(c2, bf_loadw(wr, k + 32), bf_loada(a, k + 32));
            }
            double sum = (double)_mm512_reduce_add_ps(c1);
            sum += (double)_mm512_reduce_add_ps(c2);
            for (; k < K; k++) sum += (double)(rlx_bf16_to_f32(((const uint16_t *)wr)[k]) * a[k]);
            out[t * ldo + n] = (float)sum;
        }
    }
}
#endif

/* Rows [n0, n1) of float weights (wrow bytes apart) times T activation rows; decode (NULL:
 * none) marks the rows that take the one-token arithmetic. Runs of rows of one kind go together.
 * Also the entry of attention's products (K rows of the cache, transposed V). */
void KPFX(float_gemm)(int type, const void *w_, size_t wrow, int64_t n0, int64_t n1, const float *act, size_t astr,
                      int64_t T, int64_t K, float *out, int64_t ldo, const uint8_t *decode)
{
    const uint8_t *w = w_;
#if KAVX512
    const bool dp = type == RLX_BF16 && rlx__cpu_bf16dp();
    const int64_t kn = dp ? 32 : FW;
#else
    const int64_t kn = FW;
#endif
    const bool tinyblas = K % kn == 0; /* else every row takes the vec_dot arithmetic */
    for (int64_t t0 = 0; t0 < T;) {
        const bool d = !tinyblas || (decode && decode[t0]);
        int64_t t1 = t0 + 1;
        while (t1 < T && (!tinyblas || (decode && decode[t1])) == d) t1++;
#if KAVX512
        if (dp) { bf16dp_run(w, wrow, n0, n1, act, astr, t0, t1, K, out, ldo, d); t0 = t1; continue; }
#endif
        switch (type) {
        case RLX_F32: float_run_f32(w, wrow, n0, n1, act, astr, t0, t1, K, out, ldo, d); break;
        case RLX_F16: float_run_f16(w, wrow, n0, n1, act, astr, t0, t1, K, out, ldo, d); break;
        default: float_run_bf16(w, wrow, n0, n1, act, astr, t0, t1, K, out, ldo, d); break;
        }
        t0 = t1;
    }
}
