/* cpu_ops.c - the CPU backend's kernels, one per step kind (attention is in attention.c, the
 * recurrent ops in ssm.c), plus
 * the fused elementwise epilogue; ops registered at run time (graph.h rlx_op_register) run
 * their table entry's `cpu` kernel over this thread's rows (k_registered). Arithmetic follows ggml's CPU path operation for operation
 * (double accumulation in norms, ggml_v_silu for SwiGLU, its activation quantizers) so logits
 * are bit-identical to llama.cpp's. */
#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/vmath.h"
#include "backends/quant.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static int64_t n_rows(const rlx_cpu_run *r, int t)
{
    const rlx_gtensor *x = &r->plan->graph->tensors[t];
    return x->rows == RLX_ROWS_TOKENS ? r->batch->n_tokens : x->rows == RLX_ROWS_OUTPUTS ? r->batch->n_outputs : 1;
}

/* ---- elementwise ------------------------------------------------------------------------ */

/* SiLU of columns [c0, c1) of a row of `cols`: as ggml_vec_swiglu_f32 / ggml_vec_silu_f32,
 * ggml_v_silu for the columns below the row's last multiple of 16, libm for the rest. */
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static int64_t silu_512(float *y, int64_t c, int64_t cv)
{
    for (; c + 16 <= cv; c += 16) _mm512_storeu_ps(y + c, rlx__vsilu512(_mm512_loadu_ps(y + c)));
    return c;
}

__attribute__((target("avx2,fma"))) static int64_t silu_256(float *y, int64_t c, int64_t cv)
{
    for (; c + 8 <= cv; c += 8) _mm256_storeu_ps(y + c, rlx__vsilu256(_mm256_loadu_ps(y + c)));
    return c;
}
#endif

static void silu_cols(float *y, int64_t c0, int64_t c1, int64_t cols)
{
    const int64_t cv = RLX_MIN(c1, cols & ~(int64_t)15);
    int64_t c = c0;
#if defined(__x86_64__)
    const int width = rlx__cpu_width();
    if (width == 512) c = silu_512(y, c, cv);
    else if (width == 256) c = silu_256(y, c, cv);
#endif
    for (; c < cv; c++) y[c] = rlx__vsilu(y[c]);
    for (; c < c1; c++) y[c] = rlx__silu_libm(y[c]);
}

/* ggml's CPU GELU (and GEGLU) reads a table of f16(gelu(f16(x))) and passes |x| >= 10 through;
 * the same table (built once, from the same roundings) gives llama.cpp's values bit for bit.
 * Computing tanhf per value instead took ~40% of a MiniLM-shaped encoder's time. */
static uint16_t gelu_table[(1 << 16) + 2]; /* + 2: the vector gathers read 4 bytes at an index */
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void)
{
    const float c = 0.79788456080286535587989211986876f; /* sqrt(2/pi) */
    for (uint32_t i = 0; i < (1u << 16); i++) {
        const float h = rlx_f16_to_f32((uint16_t)i);
        gelu_table[i] = rlx_f32_to_f16(0.5f * h * (1.0f + tanhf(c * h * (1.0f + 0.044715f * h * h))));
    }
}

/* The same lookups 16 (8) at a time: F16C's conversion rounds to nearest even, as
 * rlx_f32_to_f16, and the table is gathered as 32-bit words whose low half is the entry. */
#if defined(__x86_64__)
__attribute__((target("avx512f,f16c"))) static int64_t gelu_512(float *y, int64_t c, int64_t c1)
{
    const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
    for (; c + 16 <= c1; c += 16) {
        const __m512 x = _mm512_loadu_ps(y + c);
        const __m512i h = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m512i g = _mm512_i32gather_epi32(h, (const void *)gelu_table, 2);
        __m512 v = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)); /* the low halves */
        v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), v, x);
        v = _mm512_maskz_mov_ps(~_mm512_cmp_ps_mask(x, lo, _CMP_LE_OQ), v);
        _mm512_storeu_ps(y + c, v);
    }
    return c;
}

__attribute__((target("avx2,f16c"))) static int64_t gelu_256(float *y, int64_t c, int64_t c1)
{
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    const __m256i low16 = _mm256_set1_epi32(0xffff);
    for (; c + 8 <= c1; c += 8) {
        const __m256 x = _mm256_loadu_ps(y + c);
        const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m256i g = _mm256_and_si256(_mm256_i32gather_epi32((const int *)(const void *)gelu_table, h, 2), low16);
        __m256 v = _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(g), _mm256_extracti128_si256(g, 1)));
        v = _mm256_blendv_ps(v, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
        v = _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LE_OQ), v);
        _mm256_storeu_ps(y + c, v);
    }
    return c;
}
#endif

static void gelu_cols(float *y, int64_t c0, int64_t c1)
{
    pthread_once(&gelu_once, gelu_table_init);
#if defined(__x86_64__)
    const int width = rlx__cpu_width();
    if (width == 512) c0 = gelu_512(y, c0, c1);
    else if (width == 256) c0 = gelu_256(y, c0, c1);
#endif
    for (int64_t c = c0; c < c1; c++) {
        const float x = y[c];
        y[c] = x <= -10.0f ? 0.0f : x >= 10.0f ? x : rlx_f16_to_f32(gelu_table[rlx_f32_to_f16(x)]);
    }
}

static const float *operand_row(rlx_cpu_run *r, int t, int64_t row)
{
    const rlx_gtensor *x = &r->plan->graph->tensors[t];
    if (x->is_weight) return (const float *)x->data;
    return rowp(r, t, x->rows == RLX_ROWS_ONE ? 0 : row);
}

/* y += o and y *= o over columns [c0, c1), 16 (8) at a time: each element's one rounding, so
 * the same bits in any width (GCC's -O2 leaves these loops scalar). */
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static int64_t add_512(float *y, const float *o, int64_t c, int64_t c1, bool mul)
{
    if (mul)
        for (; c + 16 <= c1; c += 16) _mm512_storeu_ps(y + c, _mm512_mul_ps(_mm512_loadu_ps(y + c), _mm512_loadu_ps(o + c)));
    else
        for (; c + 16 <= c1; c += 16) _mm512_storeu_ps(y + c, _mm512_add_ps(_mm512_loadu_ps(y + c), _mm512_loadu_ps(o + c)));
    return c;
}

__attribute__((target("avx2"))) static int64_t add_256(float *y, const float *o, int64_t c, int64_t c1, bool mul)
{
    if (mul)
        for (; c + 8 <= c1; c += 8) _mm256_storeu_ps(y + c, _mm256_mul_ps(_mm256_loadu_ps(y + c), _mm256_loadu_ps(o + c)));
    else
        for (; c + 8 <= c1; c += 8) _mm256_storeu_ps(y + c, _mm256_add_ps(_mm256_loadu_ps(y + c), _mm256_loadu_ps(o + c)));
    return c;
}
#endif

static int64_t add_simd(float *y, const float *o, int64_t c, int64_t c1, bool mul)
{
#if defined(__x86_64__)
    const int width = rlx__cpu_width();
    if (width == 512) return add_512(y, o, c, c1, mul);
    if (width == 256) return add_256(y, o, c, c1, mul);
#endif
    (void)y, (void)o, (void)c1, (void)mul;
    return c;
}

static void add_cols(float *y, const float *o, int64_t c0, int64_t c1)
{
    for (int64_t c = add_simd(y, o, c0, c1, false); c < c1; c++) y[c] += o[c];
}

static void mul_cols(float *y, const float *o, int64_t c0, int64_t c1)
{
    for (int64_t c = add_simd(y, o, c0, c1, true); c < c1; c++) y[c] *= o[c];
}

static void apply_ew(rlx_cpu_run *r, const rlx_ew *e, float *y, int64_t row, int64_t c0, int64_t c1, int64_t cols)
{
    const float *o = e->operand >= 0 ? operand_row(r, e->operand, row) : NULL;
    switch (e->op) {
    case RLX_EW_ADD: add_cols(y, o, c0, c1); break;
    case RLX_EW_MUL: mul_cols(y, o, c0, c1); break;
    case RLX_EW_SILU: silu_cols(y, c0, c1, cols); break;
    case RLX_EW_GELU: gelu_cols(y, c0, c1); break;
    case RLX_EW_SCALE: for (int64_t c = c0; c < c1; c++) y[c] *= e->p; break;
    case RLX_EW_SOFTCAP: for (int64_t c = c0; c < c1; c++) y[c] = softcap(y[c], e->p); break;
    /* as ggml's sigmoid and softplus */
    case RLX_EW_SIGMOID: for (int64_t c = c0; c < c1; c++) y[c] = 1.0f / (1.0f + expf(-y[c])); break;
    case RLX_EW_SOFTPLUS: for (int64_t c = c0; c < c1; c++) y[c] = y[c] > 20.0f ? y[c] : logf(1.0f + expf(y[c])); break;
    }
}

static void apply_chain(rlx_cpu_run *r, const rlx_step *s, float *y, int64_t row, int64_t c0, int64_t c1, int64_t cols)
{
    for (int k = 0; k < s->n_chain; k++) apply_ew(r, &s->chain[k], y, row, c0, c1, cols);
}


void rlx_cpu_apply_chain(rlx_cpu_run *r, const rlx_step *s, float *y, int64_t row, int64_t c0, int64_t c1, int64_t cols)
{
    apply_chain(r, s, y, row, c0, c1, cols);
}

static void k_elementwise(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    int64_t T = n_rows(r, s->out), a, b;
    int64_t cols = r->plan->graph->tensors[s->out].cols;
    split(T, ith, nth, &a, &b);
    rlx_ew head = rlx_ew_of_node(&s->node);
    for (int64_t t = a; t < b; t++) {
        const float *x = rowp(r, s->node.in[0], t);
        float *y = rowp(r, s->out, t);
        if (y != x) memcpy(y, x, (size_t)cols * 4);
        apply_ew(r, &head, y, t, 0, cols, cols);
        apply_chain(r, s, y, t, 0, cols, cols);
    }
}

/* ---- norms ------------------------------------------------------------------------------ */

/* ggml_rms_norm / ggml_norm over nr rows (nr <= NORM_ROWS; inlined for nr = 1 and NORM_ROWS):
 * the sums in double, row by row in ggml's order (the same bits), and the chains of dependent
 * adds of several rows interleaved: one row's runs at the add's latency, eight at the adds'
 * throughput (a MiniLM step's LayerNorms took 4.9% of it; bench/RESULTS.md section 65). */
#define NORM_ROWS 8
static inline __attribute__((always_inline)) void rms_rows(const float *const *x, float *const *y, const int nr,
                                                           int64_t n, float eps)
{
    double sum[NORM_ROWS] = {0};
    for (int64_t i = 0; i < n; i++)
        #pragma GCC unroll 8
        for (int k = 0; k < nr; k++) sum[k] += (double)(x[k][i] * x[k][i]);
    for (int k = 0; k < nr; k++) {
        const float scale = 1.0f / sqrtf((float)(sum[k] / (double)n) + eps);
        for (int64_t i = 0; i < n; i++) y[k][i] = x[k][i] * scale;
    }
}

/* ggml_norm: the mean in double, then the centred values and their squares' sum in double,
 * scaled by 1 / sqrtf(variance + eps) */
static inline __attribute__((always_inline)) void norm_rows(const float *const *x, float *const *y, const int nr,
                                                            int64_t n, float eps)
{
    double sum[NORM_ROWS] = {0}, sum2[NORM_ROWS] = {0};
    float mean[NORM_ROWS];
    for (int64_t i = 0; i < n; i++)
        #pragma GCC unroll 8
        for (int k = 0; k < nr; k++) sum[k] += (double)x[k][i];
    for (int k = 0; k < nr; k++) mean[k] = (float)(sum[k] / (double)n);
    for (int64_t i = 0; i < n; i++)
        #pragma GCC unroll 8
        for (int k = 0; k < nr; k++) {
            const float v = x[k][i] - mean[k];
            y[k][i] = v;
            sum2[k] += (double)(v * v);
        }
    for (int k = 0; k < nr; k++) {
        const float scale = 1.0f / sqrtf((float)(sum2[k] / (double)n) + eps);
        for (int64_t i = 0; i < n; i++) y[k][i] *= scale;
    }
}

static void rms_row(const float *x, float *y, int64_t n, float eps) { rms_rows(&x, &y, 1, n, eps); }

/* k_rms_norm / k_norm: this thread's rows, NORM_ROWS at a time while they last */
static void norm_kernel(rlx_cpu_run *r, const rlx_step *s, int ith, int nth, bool centred)
{
    int64_t T = n_rows(r, s->out), a, b;
    int64_t cols = r->plan->graph->tensors[s->out].cols;
    const float eps = s->node.p.norm.eps;
    split(T, ith, nth, &a, &b);
    for (int64_t t = a; t < b;) {
        const int nr = b - t >= NORM_ROWS ? NORM_ROWS : 1;
        const float *x[NORM_ROWS];
        float *y[NORM_ROWS];
        for (int k = 0; k < nr; k++) x[k] = rowp(r, s->node.in[0], t + k), y[k] = rowp(r, s->out, t + k);
        if (nr == NORM_ROWS) {
            if (centred) norm_rows(x, y, NORM_ROWS, cols, eps);
            else rms_rows(x, y, NORM_ROWS, cols, eps);
        } else {
            if (centred) norm_rows(x, y, 1, cols, eps);
            else rms_rows(x, y, 1, cols, eps);
        }
        for (int k = 0; k < nr; k++) apply_chain(r, s, y[k], t + k, 0, cols, cols);
        t += nr;
    }
}

static void k_rms_norm(rlx_cpu_run *r, const rlx_step *s, int ith, int nth) { norm_kernel(r, s, ith, nth, false); }

static void k_norm(rlx_cpu_run *r, const rlx_step *s, int ith, int nth) { norm_kernel(r, s, ith, nth, true); }

static void k_head_norm(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    int64_t T = n_rows(r, s->out), a, b;
    int64_t cols = r->plan->graph->tensors[s->out].cols, hd = s->node.p.norm.head_dim;
    const float *w = operand_row(r, s->node.in[1], 0);
    split(T, ith, nth, &a, &b);
    for (int64_t t = a; t < b; t++) {
        const float *x = rowp(r, s->node.in[0], t);
        float *y = rowp(r, s->out, t);
        for (int64_t h = 0; h < cols / hd; h++) {
            rms_row(x + h * hd, y + h * hd, hd, s->node.p.norm.eps);
            for (int64_t i = 0; i < hd; i++) y[h * hd + i] *= w[i];
        }
        apply_chain(r, s, y, t, 0, cols, cols);
    }
}

/* ---- get_rows / gather -------------------------------------------------------------------- */

static void k_get_rows(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_gtensor *w = &r->plan->graph->tensors[s->node.in[0]];
    int64_t T = r->batch->n_tokens, a, b, cols = w->ne[0];
    size_t rb = rlx_row_bytes(w->wtype, cols);
    split(T, ith, nth, &a, &b);
    for (int64_t t = a; t < b; t++) {
        int32_t id = s->node.op == RLX_OP_GET_ROWS_POS ? r->batch->pos[t] : r->batch->tokens[t];
        float *y = rowp(r, s->out, t);
        if (id < 0 || id >= w->ne[1]) { atomic_store(&r->error, RLX_ERANGE); continue; }
        rlx_dequantize_row(w->wtype, (const uint8_t *)w->data + (size_t)id * rb, y, cols);
        const float scale = s->node.p.scalar.value;
        if (scale != 0.0f && scale != 1.0f)
            for (int64_t c = 0; c < cols; c++) y[c] *= scale;
        apply_chain(r, s, y, t, 0, cols, cols);
    }
}

static void k_gather(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    int64_t O = r->batch->n_outputs, a, b;
    int64_t cols = r->plan->graph->tensors[s->out].cols;
    split(O, ith, nth, &a, &b);
    for (int64_t o = a; o < b; o++)
        memcpy(rowp(r, s->out, o), rowp(r, s->node.in[0], r->out_index[o]), (size_t)cols * 4);
}

/* ---- matmul ----------------------------------------------------------------------------- */

/* ---- activation quantization ------------------------------------------------------------ */

#if defined(__x86_64__)
#define T512Q __attribute__((target("avx512f,avx512bw")))

/* rlx_quantize_act's Q8_0 (llama.cpp's x86 activation quantizer): values times 127/amax,
 * rounded to nearest even by the conversion's default rounding mode */
T512Q static void q8_0_row_512(const float *x, rlx_block_q8_0 *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += RLX_QK) {
        const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = rlx_f32_to_f16(amax / 127.f);
        const __m512 s = _mm512_set1_ps(id);
        _mm_storeu_si128((__m128i *)y[i].qs, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, s))));
        _mm_storeu_si128((__m128i *)(y[i].qs + 16), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, s))));
    }
}

T512Q static void q8_k_row_512(const float *x, rlx_block_q8_k *y, int64_t nb, bool batched)
{
    for (int64_t i = 0; i < nb; i++, x += RLX_QK_K) {
        __m512 a = _mm512_setzero_ps();
        for (int k = 0; k < RLX_QK_K; k += 16) a = _mm512_max_ps(a, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
        const float amax = _mm512_reduce_max_ps(a);
        if (!amax) { memset(&y[i], 0, sizeof y[i]); continue; }
        /* the first element of largest magnitude, sign included (batched: +amax if it occurs) */
        float max = batched ? -amax : 0.0f;
        for (int k = 0; k < RLX_QK_K; k++)
            if (batched ? x[k] == amax : fabsf(x[k]) == amax) { max = x[k]; break; }
        const float iscale = -127.f / max;
        const __m512 s = _mm512_set1_ps(iscale);
        for (int k = 0; k < RLX_QK_K; k += 16) {
            /* cvtps rounds to nearest even, as rlx__nearest_int's magic-number addition; the
               lower bound changes no finite row (|q| <= 127 there) but keeps the sum below
               defined for inf/NaN activations (cvtps gives INT_MIN, and 16 of them overflowed) */
            __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + k), s)), _mm512_set1_epi32(127));
            q = _mm512_max_epi32(q, _mm512_set1_epi32(-128));
            _mm_storeu_si128((__m128i *)(y[i].qs + k), _mm512_cvtepi32_epi8(q));
            y[i].bsums[k / 16] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        y[i].d = 1 / iscale;
    }
}
#endif

#if defined(__x86_64__)
/* f32 -> f16 -> f32 with F16C (round to nearest even, as rlx_f32_to_f16) */
__attribute__((target("avx512f,f16c"))) static void round_f16_512(const float *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    for (; i < n; i++) y[i] = rlx_f16_to_f32(rlx_f32_to_f16(x[i]));
}

/* f32 -> bf16 -> f32: round to nearest even on the bits; NaN stays a quiet NaN */
__attribute__((target("avx512f"))) static void round_bf16_512(const float *x, float *y, int64_t n)
{
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u), quiet = _mm512_set1_epi32(0x00400000);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i u = _mm512_loadu_si512(x + i);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
        const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
        r = _mm512_mask_or_epi32(r, nan, u, quiet);
        _mm512_storeu_si512(y + i, _mm512_and_si512(r, hi));
    }
    for (; i < n; i++) y[i] = rlx_bf16_to_f32(rlx_f32_to_bf16(x[i]));
}

/* round_f16_512 / round_bf16_512 in 8 lanes, for the avx2 paths (the scalar loop was 14% of an
 * F16 encoder's step there) */
__attribute__((target("avx2,f16c"))) static void round_f16_256(const float *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    for (; i < n; i++) y[i] = rlx_f16_to_f32(rlx_f32_to_f16(x[i]));
}

__attribute__((target("avx2"))) static void round_bf16_256(const float *x, float *y, int64_t n)
{
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u), quiet = _mm256_set1_epi32(0x00400000);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
        /* |u| > inf as signed integers: both are below 2^31 */
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
        const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
        __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
        r = _mm256_blendv_epi8(r, _mm256_or_si256(u, quiet), nan);
        _mm256_storeu_si256((__m256i *)(y + i), _mm256_and_si256(r, hi));
    }
    for (; i < n; i++) y[i] = rlx_bf16_to_f32(rlx_f32_to_bf16(x[i]));
}
#endif

void rlx_cpu_round_act(int wtype, const float *x, float *y, int64_t n)
{
#if defined(__x86_64__)
    const int width = rlx__cpu_width();
    if (width == 512) {
        if (wtype == RLX_F16) { round_f16_512(x, y, n); return; }
        if (wtype == RLX_BF16) { round_bf16_512(x, y, n); return; }
    } else if (width == 256) {
        if (wtype == RLX_F16) { round_f16_256(x, y, n); return; }
        if (wtype == RLX_BF16) { round_bf16_256(x, y, n); return; }
    }
#endif
    for (int64_t i = 0; i < n; i++)
        y[i] = wtype == RLX_F16 ? rlx_f16_to_f32(rlx_f32_to_f16(x[i])) : rlx_bf16_to_f32(rlx_f32_to_bf16(x[i]));
}

void rlx_cpu_quantize_act(int type, bool batched, const float *x, void *dst, int64_t n)
{
#if defined(__x86_64__)
    if (rlx__cpu_width() == 512) {
        if (type == RLX_Q8_0 && n % RLX_QK == 0) { q8_0_row_512(x, dst, n / RLX_QK); return; }
        if (type == RLX_Q8_K && n % RLX_QK_K == 0) { q8_k_row_512(x, dst, n / RLX_QK_K, batched); return; }
    }
#endif
    if (batched) rlx_quantize_act_batched(type, x, dst, n);
    else rlx_quantize_act(type, x, dst, n);
}

#define ACT_BLOCK_BYTES (256u << 10)
#define WEIGHT_CHUNK_BYTES (256u << 10)
#define MAX_CLAIM_BYTES (1u << 20)

/* Which rows of a product take llama.cpp's one-row arithmetic and which its batched one
 * (rlx_batched_rows, rlx_matmul_rows_batched): tinyBLAS-style products (rule 1) batch every
 * prompt row, the repacked Q4_K gemm (rule 4) those of a prompt's full groups of four. Each
 * row's kind comes from its token (rlx_batch.decode), so a sequence's results never depend on
 * the other sequences of the batch or on how its prompt is chunked. NULL: every row one-row. */
static const uint8_t *row_roles(const rlx_cpu_run *r, int x, int rule)
{
    if (!rule) return NULL;
    const int rows = r->plan->graph->tensors[x].rows;
    if (rows == RLX_ROWS_TOKENS) return rule == 4 ? r->onerow4_tok : r->decode_tok;
    if (rows == RLX_ROWS_OUTPUTS) return rule == 4 ? r->onerow4_out : r->decode_out;
    return NULL;
}

static inline bool onerow(const uint8_t *role, int64_t t) { return !role || role[t]; }

/* Converts activation rows [a, b) of a product into dst0 (rows arb bytes apart). */
static void convert_rows(rlx_cpu_run *r, int x, const rlx_gtensor *w, int vt, const uint8_t *role, int64_t a, int64_t b,
                         uint8_t *dst0, size_t arb)
{
    const int64_t K = w->ne[0];
    for (int64_t t = a; t < b; t++) {
        const bool batched = !onerow(role, t);
        const float *src = rowp(r, x, t);
        uint8_t *dst = dst0 + (size_t)t * arb;
        if (vt != RLX_F32) {
            rlx_cpu_quantize_act(vt, batched, src, dst, K);
        } else {
            /* ggml multiplies F16/BF16 weights with activations rounded to the weight's
             * type; do the same (kept as f32 values) so logits agree with llama.cpp */
            rlx_cpu_round_act(w->wtype, src, (float *)dst, K);
        }
    }
}

static bool matmul_converts(const rlx_gtensor *w) { return !(rlx_vec_dot_type(w->wtype) == RLX_F32 && w->wtype == RLX_F32); }

/* Parts of the activation rows a product's work is claimed by (rlx_cpu_claim_part; 1: claims of
 * weight rows over every activation row). F32/F16 weights times at least 16 rows a thread split
 * the rows, one part per thread: a thread multiplies the rows it wrote in the step before (its
 * part of the norm's or the residual's row chunks) by every weight row, instead of half the
 * weight rows by every activation row, half of them written in the other core's cache (a
 * MiniLM-shaped F32 encoder step on the Intel Xeon of bench/RESULTS.md 78: +7% on 16-token texts,
 * +14% on 200-token ones). */
static int matmul_parts(const rlx_cpu_run *r, const rlx_step *s, int nth)
{
    const rlx_gtensor *w = &r->plan->graph->tensors[s->node.in[1]];
    const int P = rlx_cpu_parts(nth);
    if (P < 2 || (w->wtype != RLX_F32 && w->wtype != RLX_F16)) return 1;
    if (r->packed && r->packed[s->node.in[1]].data) return 1;
    return n_rows(r, s->node.in[0]) >= 16 * (int64_t)P ? P : 1;
}

/* Output rows go in chunks of 16-row tiles claimed from the step's counter (or, by parts of the
 * activation rows, from its part counters: matmul_parts), so a thread the OS
 * preempts (the machine is often oversubscribed) does not hold the others: they take the
 * tiles it has not claimed. rlx_matmul_rows' sums never depend on [n0, n1), so results are
 * the same whoever claims what. Several activation rows are converted into the shared scratch
 * first (phase 0, row chunks); a single one by each thread into its own scratch row when it
 * claims its first tile: cheaper than waiting for one thread to convert it. */
static void k_matmul(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_graph *g = r->plan->graph;
    const rlx_gtensor *w = &g->tensors[s->node.in[1]];
    rlx_cpu_sync *y = &r->sync[s - r->plan->steps];
    int x = s->node.in[0];
    int64_t T = n_rows(r, x), K = w->ne[0], N = w->ne[1];
    int vt = rlx_vec_dot_type(w->wtype);
    size_t arb = rlx_row_bytes(vt, K);
    const bool conv = matmul_converts(w), own = conv && T == 1;
    const uint8_t *role = row_roles(r, x, rlx_batched_rows(w->wtype, N, K));
    const void *act = !conv ? (const void *)rowp(r, x, 0)
                      : own ? (const void *)(r->row_scratch + (size_t)ith * r->row_scratch_stride) : (const void *)r->scratch;
    const int parts = matmul_parts(r, s, nth);
    if (y->units[0]) { /* row chunks, by parts where the products go by parts: a thread converts the rows it multiplies */
        const unsigned n = y->units[0];
        int k = 0;
        for (int64_t c; (c = rlx_cpu_claim_unit(y, 0, n, parts > 1, ith, nth, &k)) >= 0;) {
            int64_t a, b;
            split(T, (int)c, (int)n, &a, &b);
            convert_rows(r, x, w, vt, role, a, b, r->scratch, arb);
            rlx_cpu_done(r, &y->done[0], 1, n, nth);
        }
        rlx_threadpool_wait(r->tp, &y->done[0], n);
    }
    bool converted = !own;
    float *out = rowp(r, s->out, 0);
    /* a packed copy (repack.h): rows in groups of 8, which the 16-row tiles keep whole */
    const rlx_packed_weight *pw = r->packed && r->packed[s->node.in[1]].data ? &r->packed[s->node.in[1]] : NULL;
    /* Chunks of 16-row tiles: about 8 per thread. For many activation rows, a chunk's weights
     * (at most ~256 KiB) and a block of activations (~256 KiB) are kept in L2 and the block
     * loop runs inside the chunk; otherwise every weight tile would stream all T rows from
     * memory (pp512 ran at half pp128's speed). Results are unchanged: rlx_matmul_rows' sums
     * depend on neither T nor [n0, n1). */
    const int64_t Tp = (T + parts - 1) / parts; /* activation rows of a claim */
    /* about 8 claims per thread: of the weight rows, or of each part's weight rows */
    int64_t tiles = (N + 15) / 16, per = parts > 1 ? tiles / 8 : tiles / ((int64_t)nth * 8);
    /* the step's epilogue (s->chain: bias, residual, activation) runs over a claim's columns row
     * by row, and at 16 columns a row its calls cost more than its arithmetic (a MiniLM step's
     * 272 rows: add_512 4.2% of the server's time, bench/RESULTS.md section 65): at least 64,
     * within the L2 bounds below */
    if (s->n_chain && T >= 16) per = RLX_MAX(per, RLX_MIN((int64_t)4, parts > 1 ? tiles : tiles / nth));
    int64_t tb = RLX_MAX((int64_t)16, (int64_t)(ACT_BLOCK_BYTES / arb) / 16 * 16);
    if (Tp > tb) per = RLX_MIN(per, (int64_t)(WEIGHT_CHUNK_BYTES / (16 * rlx_row_bytes(w->wtype, K))));
    /* at most ~1 MiB of weights per claim (the output projection's 8 per thread were ~10 MiB):
     * a thread descheduled while holding a claim holds the others until it runs again */
    else if (nth > 1) per = RLX_MIN(per, (int64_t)(MAX_CLAIM_BYTES / (16 * rlx_row_bytes(w->wtype, K))));
    if (per < 1) per = 1;
    /* float weights times several rows: claims of whole product tiles (AVX2's are 3 rows high:
     * a claim of 16 rows left one row to a 1-row tile at half the speed; AVX-512's are 6: claims of 48) */
    if (T > 1 && (w->wtype == RLX_F32 || w->wtype == RLX_F16)) {
        const int64_t rows = rlx__cpu_float_tile_rows();
        int64_t unit = 1; /* the fewest 16-row tiles that hold whole product tiles */
        while ((16 * unit) % rows) unit++;
        if (per % unit) per += unit - per % unit;
    }
    if (nth == 1 && T <= tb) per = tiles;
    _Atomic int64_t *next = &y->next[1];
    const int64_t chunks = (tiles + per - 1) / per; /* claims per part */
    for (int k = 0;;) {
        int64_t c, ta = 0, te = T;
        if (parts > 1) { /* unit u: part u / chunks, its weight rows' chunk u % chunks */
            const int64_t u = rlx_cpu_claim_part(y->part[1], parts * chunks, ith, nth, &k);
            if (u < 0) break;
            c = u % chunks * per;
            split(T, (int)(u / chunks), parts, &ta, &te);
        } else if ((c = rlx_cpu_claim(next, per, nth)) >= tiles) {
            break;
        }
        if (!converted) {
            convert_rows(r, x, w, vt, role, 0, 1, (uint8_t *)act, arb);
            converted = true;
        }
        int64_t n0 = c * 16, n1 = RLX_MIN((c + per) * 16, N);
        for (int64_t t0 = ta; t0 < te; t0 += tb) {
            const int64_t t1 = RLX_MIN(t0 + tb, te);
            for (int64_t u = t0, end; u < t1; u = end) {
                const bool one = onerow(role, u);
                for (end = u + 1; end < t1 && onerow(role, end) == one;) end++;
                if (pw)
                    pw->fn(pw->data, n0, n1, (const uint8_t *)act + (size_t)u * arb, arb, end - u, K, out + u * N, N, !one);
                else
                    (one ? rlx_matmul_rows : rlx_matmul_rows_batched)(w->wtype, w->data, n0, n1,
                                                                     (const uint8_t *)act + (size_t)u * arb, arb, end - u, K,
                                                                     out + u * N, N);
            }
        }
        if (s->n_chain)
            for (int64_t t = ta; t < te; t++) apply_chain(r, s, out + t * N, t, n0, n1, N);
        rlx_cpu_done(r, &y->done[1], (unsigned)(RLX_MIN(c + per, tiles) - c), y->units[1], nth);
    }
}

/* ---- rope ------------------------------------------------------------------------------- */

/* One head: ggml's rotate_pairs as its compiled code evaluates it, the first product of each
 * output fused (x0*cos - x1*sin -> fma(x0, cos, -(x1*sin))). The same body is compiled with FMA
 * enabled (fmaf inlined) for the SIMD paths; the results are the same. */
#define ROPE_HEAD_BODY                                                                                  \
    if (neox) {                                                                                        \
        for (int i = 0; i < n_rot / 2; i++) {                                                          \
            const float x0 = xh[i], x1 = xh[i + n_rot / 2];                                            \
            yh[i] = fmaf(x0, cs[i], -(x1 * sn[i]));                                                    \
            yh[i + n_rot / 2] = fmaf(x0, sn[i], x1 * cs[i]);                                           \
        }                                                                                              \
    } else {                                                                                           \
        for (int i = 0; i < n_rot / 2; i++) {                                                          \
            const float x0 = xh[2 * i], x1 = xh[2 * i + 1];                                            \
            yh[2 * i] = fmaf(x0, cs[i], -(x1 * sn[i]));                                                \
            yh[2 * i + 1] = fmaf(x0, sn[i], x1 * cs[i]);                                               \
        }                                                                                              \
    }

static void rope_head(const float *xh, float *yh, const float *cs, const float *sn, int n_rot, bool neox)
{
    ROPE_HEAD_BODY
}

#if defined(__x86_64__)
__attribute__((target("fma"))) static void rope_head_fma(const float *xh, float *yh, const float *cs, const float *sn,
                                                         int n_rot, bool neox)
{
    ROPE_HEAD_BODY
}
#endif

static void k_rope(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_node *n = &s->node;
    int64_t T = r->batch->n_tokens, a, b;
    const rlx_rope_params *p = &n->p.rope;
    const int n_heads = p->n_heads, hd = p->head_dim, n_rot = p->n_rot;
    const float *ff = n->in[1] >= 0 ? operand_row(r, n->in[1], 0) : NULL;
    float cs[512], sn[512]; /* n_rot <= 1024 is checked by the builder */
    void (*head)(const float *, float *, const float *, const float *, int, bool) = rope_head;
#if defined(__x86_64__)
    if (rlx__cpu_simd()) head = rope_head_fma; /* every SIMD path implies FMA */
#endif
    split(T, ith, nth, &a, &b);
    for (int64_t t = a; t < b; t++) {
        rlx_rope_angles(p->freq_base, p->freq_scale, ff, n_rot, r->batch->pos[t], cs, sn);
        const float *x = rowp(r, n->in[0], t);
        float *y = rowp(r, s->out, t);
        for (int h = 0; h < n_heads; h++) {
            const float *xh = x + (int64_t)h * hd;
            float *yh = y + (int64_t)h * hd;
            head(xh, yh, cs, sn, n_rot, p->mode == RLX_ROPE_NEOX);
            if (yh != xh)
                for (int i = n_rot; i < hd; i++) yh[i] = xh[i];
        }
    }
}

/* ---- column slices ------------------------------------------------------------------------ */

static void k_cols(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_cols_params *p = &s->node.p.cols;
    int64_t T = n_rows(r, s->out), a, b;
    int64_t cols = r->plan->graph->tensors[s->out].cols;
    split(T, ith, nth, &a, &b);
    for (int64_t t = a; t < b; t++) {
        const float *x = rowp(r, s->node.in[0], t);
        float *y = rowp(r, s->out, t);
        for (int32_t g = 0; g < p->groups; g++)
            memcpy(y + (int64_t)g * p->width, x + (int64_t)g * p->stride + p->offset, (size_t)p->width * 4);
        apply_chain(r, s, y, t, 0, cols, cols);
    }
}

/* ---- registered ops (rlx_op_register): the table's CPU kernel over this thread's rows ---- */

static void k_registered(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_graph *g = r->plan->graph;
    const rlx_op_info *info = rlx_op_get(s->node.op);
    int64_t a, b;
    split(n_rows(r, s->out), ith, nth, &a, &b);
    if (!info || !info->cpu) { atomic_store(&r->error, RLX_EUNSUPPORTED); return; } /* refused at prepare */
    if (a == b) return;
    rlx_op_call c = {.node = &s->node, .out = rowp(r, s->out, 0), .out_cols = g->tensors[s->out].cols, .row0 = a, .n_rows = b - a};
    for (int k = 0; k < info->n_in; k++) {
        const int t = s->node.in[k];
        if (t < 0) continue;
        const rlx_gtensor *x = &g->tensors[t];
        c.in[k] = operand_row(r, t, 0);
        c.in_cols[k] = x->cols;
        c.in_stride[k] = x->is_weight || x->rows == RLX_ROWS_ONE ? 0 : x->cols;
    }
    info->cpu(&c);
}

typedef void (*row_kernel)(rlx_cpu_run *r, const rlx_step *s, int chunk, int chunks);

static row_kernel row_kernel_of(rlx_op op)
{
    switch (op) {
    case RLX_OP_GET_ROWS: case RLX_OP_GET_ROWS_POS: return k_get_rows;
    case RLX_OP_RMS_NORM: return k_rms_norm;
    case RLX_OP_NORM: return k_norm;
    case RLX_OP_HEAD_NORM: return k_head_norm;
    case RLX_OP_ROPE: return k_rope;
    case RLX_OP_GATHER: return k_gather;
    case RLX_OP_COLS: return k_cols;
    case RLX_OP_SSM_CONV: return rlx_cpu_ssm_conv;
    case RLX_OP_DELTA_NET: return rlx_cpu_delta_net;
    case RLX_OP_ADD: case RLX_OP_MUL: case RLX_OP_SILU: case RLX_OP_GELU: case RLX_OP_SCALE: case RLX_OP_SOFTCAP:
    case RLX_OP_SIGMOID: case RLX_OP_SOFTPLUS:
        return k_elementwise;
    case RLX_OP_MATMUL: case RLX_OP_ATTENTION: return NULL;
    default: return k_registered;
    }
}

/* The rows a row kernel splits (the kernels' own split(rows, ith, nth) with chunk, chunks) */
static int64_t kernel_rows(const rlx_cpu_run *r, const rlx_step *s)
{
    switch (s->node.op) {
    case RLX_OP_GET_ROWS: case RLX_OP_GET_ROWS_POS: case RLX_OP_ROPE: return r->batch->n_tokens;
    case RLX_OP_GATHER: return r->batch->n_outputs;
    case RLX_OP_SSM_CONV: return s->node.p.conv.channels;
    case RLX_OP_DELTA_NET: return (int64_t)r->batch->n_seqs * s->node.p.delta.n_v_heads;
    default: return n_rows(r, s->out);
    }
}

void rlx_cpu_step_units(const rlx_cpu_run *r, const rlx_step *s, int nth, unsigned units[2])
{
    units[0] = units[1] = 0;
    if (s->node.op == RLX_OP_ATTENTION) {
        rlx_cpu_attention_units(r, s, nth, units);
    } else if (s->node.op == RLX_OP_MATMUL) {
        const rlx_gtensor *w = &r->plan->graph->tensors[s->node.in[1]];
        const int64_t T = n_rows(r, s->node.in[0]);
        units[0] = matmul_converts(w) && T > 1 ? rlx_cpu_row_chunks(T, nth) : 0;
        units[1] = (unsigned)((w->ne[1] + 15) / 16 * matmul_parts(r, s, nth)); /* 16-row tiles per part */
    } else {
        units[1] = rlx_cpu_row_chunks(kernel_rows(r, s), nth);
    }
}

void rlx_cpu_step(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const row_kernel k = row_kernel_of(s->node.op);
    if (!k) {
        if (s->node.op == RLX_OP_MATMUL) k_matmul(r, s, ith, nth);
        else rlx_cpu_attention(r, s, ith, nth);
        return;
    }
    rlx_cpu_sync *y = &r->sync[s - r->plan->steps];
    const unsigned n = y->units[1];
    if (nth == 1) { /* one unit (rlx_cpu_row_chunks), this thread's own: no counters */
        if (n) k(r, s, 0, 1);
        atomic_store_explicit(&y->done[1], n, memory_order_relaxed);
        return;
    }
    /* rows by parts where products of float weights go by parts (as many rows): a thread keeps
     * to the rows it had in the step before; otherwise as they come */
    const bool by_parts = kernel_rows(r, s) >= 16 * (int64_t)rlx_cpu_parts(nth);
    int q = 0;
    for (int64_t c; (c = rlx_cpu_claim_unit(y, 1, n, by_parts, ith, nth, &q)) >= 0;) {
        k(r, s, (int)c, (int)n);
        rlx_threadpool_done(r->tp, &y->done[1], 1, n);
    }
}

void rlx_cpu_step_wait(rlx_cpu_run *r, const rlx_step *s)
{
    rlx_cpu_sync *y = &r->sync[s - r->plan->steps];
    rlx_threadpool_wait(r->tp, &y->done[1], y->units[1]);
}
