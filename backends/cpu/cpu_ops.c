/* cpu_ops.c - the CPU backend's kernels, one per step kind, plus the fused elementwise
 * epilogue. Arithmetic follows ggml's CPU path (float rows, double accumulation in norms and
 * softmax sums, K/Q and P/V products at the KV cache's precision) so logits agree with
 * llama.cpp's within its stated tolerances. */
#include "backends/cpu/cpu_ops.h"
#include "backends/quant.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static inline float *rowp(rlx_cpu_run *r, int t, int64_t row)
{
    const rlx_graph *g = r->plan->graph;
    return (float *)(r->arena + r->plan->offset[t]) + row * g->tensors[t].cols;
}

static int64_t n_rows(const rlx_cpu_run *r, int t)
{
    const rlx_gtensor *x = &r->plan->graph->tensors[t];
    return x->rows == RLX_ROWS_TOKENS ? r->batch->n_tokens : x->rows == RLX_ROWS_OUTPUTS ? r->batch->n_outputs : 1;
}

static inline void split(int64_t n, int ith, int nth, int64_t *a, int64_t *b)
{
    *a = n * ith / nth;
    *b = n * (ith + 1) / nth;
}

/* ---- elementwise ------------------------------------------------------------------------ */

static inline float silu(float x) { return x / (1.0f + expf(-x)); }

/* ggml's CPU GELU (and GEGLU) reads a table of f16(gelu(f16(x))) and passes |x| >= 10 through;
 * computing the same roundings directly gives llama.cpp's values bit for bit. */
static inline float gelu(float x)
{
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float c = 0.79788456080286535587989211986876f; /* sqrt(2/pi) */
    float h = rlx_f16_to_f32(rlx_f32_to_f16(x));
    return rlx_f16_to_f32(rlx_f32_to_f16(0.5f * h * (1.0f + tanhf(c * h * (1.0f + 0.044715f * h * h)))));
}

/* cap * tanh(x * (1/cap)): ggml scales by the reciprocal, so do the same */
static inline float softcap(float x, float cap) { return cap * tanhf(x * (1.0f / cap)); }

static const float *operand_row(rlx_cpu_run *r, int t, int64_t row)
{
    const rlx_gtensor *x = &r->plan->graph->tensors[t];
    if (x->is_weight) return (const float *)x->data;
    return rowp(r, t, x->rows == RLX_ROWS_ONE ? 0 : row);
}

static void apply_ew(rlx_cpu_run *r, const rlx_ew *e, float *y, int64_t row, int64_t c0, int64_t c1)
{
    const float *o = e->operand >= 0 ? operand_row(r, e->operand, row) : NULL;
    switch (e->op) {
    case RLX_EW_ADD: for (int64_t c = c0; c < c1; c++) y[c] += o[c]; break;
    case RLX_EW_MUL: for (int64_t c = c0; c < c1; c++) y[c] *= o[c]; break;
    case RLX_EW_SILU: for (int64_t c = c0; c < c1; c++) y[c] = silu(y[c]); break;
    case RLX_EW_GELU: for (int64_t c = c0; c < c1; c++) y[c] = gelu(y[c]); break;
    case RLX_EW_SCALE: for (int64_t c = c0; c < c1; c++) y[c] *= e->p; break;
    case RLX_EW_SOFTCAP: for (int64_t c = c0; c < c1; c++) y[c] = softcap(y[c], e->p); break;
    }
}

static void apply_chain(rlx_cpu_run *r, const rlx_step *s, float *y, int64_t row, int64_t c0, int64_t c1)
{
    for (int k = 0; k < s->n_chain; k++) apply_ew(r, &s->chain[k], y, row, c0, c1);
}


static void k_elementwise(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    int64_t T = n_rows(r, s->out), a, b;
    int64_t cols = r->plan->graph->tensors[s->out].cols;
    split(T, ith, nth, &a, &b);
    rlx_ew head = {rlx_ew_of_op(s->node.op), (s->node.op == RLX_OP_ADD || s->node.op == RLX_OP_MUL) ? s->node.in[1] : -1, s->node.fp[0]};
    for (int64_t t = a; t < b; t++) {
        const float *x = rowp(r, s->node.in[0], t);
        float *y = rowp(r, s->out, t);
        if (y != x) memcpy(y, x, (size_t)cols * 4);
        apply_ew(r, &head, y, t, 0, cols);
        apply_chain(r, s, y, t, 0, cols);
    }
}

/* ---- norms ------------------------------------------------------------------------------ */

static void rms_row(const float *x, float *y, int64_t n, float eps)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
}

static void k_rms_norm(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    int64_t T = n_rows(r, s->out), a, b;
    int64_t cols = r->plan->graph->tensors[s->out].cols;
    split(T, ith, nth, &a, &b);
    for (int64_t t = a; t < b; t++) {
        float *y = rowp(r, s->out, t);
        rms_row(rowp(r, s->node.in[0], t), y, cols, s->node.fp[0]);
        apply_chain(r, s, y, t, 0, cols);
    }
}

static void k_head_norm(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    int64_t T = n_rows(r, s->out), a, b;
    int64_t cols = r->plan->graph->tensors[s->out].cols, hd = s->node.ip[0];
    const float *w = operand_row(r, s->node.in[1], 0);
    split(T, ith, nth, &a, &b);
    for (int64_t t = a; t < b; t++) {
        const float *x = rowp(r, s->node.in[0], t);
        float *y = rowp(r, s->out, t);
        for (int64_t h = 0; h < cols / hd; h++) {
            rms_row(x + h * hd, y + h * hd, hd, s->node.fp[0]);
            for (int64_t i = 0; i < hd; i++) y[h * hd + i] *= w[i];
        }
        apply_chain(r, s, y, t, 0, cols);
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
        int32_t id = r->batch->tokens[t];
        float *y = rowp(r, s->out, t);
        if (id < 0 || id >= w->ne[1]) { atomic_store(&r->error, RLX_ERANGE); continue; }
        rlx_dequantize_row(w->wtype, (const uint8_t *)w->data + (size_t)id * rb, y, cols);
        if (s->node.fp[0] != 0.0f && s->node.fp[0] != 1.0f)
            for (int64_t c = 0; c < cols; c++) y[c] *= s->node.fp[0];
        apply_chain(r, s, y, t, 0, cols);
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

/* roundf (half away from zero) of integral-range values: truncate, then step away from zero
 * where the dropped fraction is at least one half (v - trunc(v) is exact) */
T512Q static inline __m512i round_away_512(__m512 v)
{
    const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __m512 one = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)),
                                                           _mm512_castps_si512(_mm512_set1_ps(1.0f))));
    return _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, one));
}

T512Q static void q8_0_row_512(const float *x, rlx_block_q8_0 *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += RLX_QK) {
        const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float d = amax / 127, id = d ? 1.0f / d : 0.0f;
        y[i].d = rlx_f32_to_f16(d);
        const __m512 s = _mm512_set1_ps(id);
        _mm_storeu_si128((__m128i *)y[i].qs, _mm512_cvtsepi32_epi8(round_away_512(_mm512_mul_ps(v0, s))));
        _mm_storeu_si128((__m128i *)(y[i].qs + 16), _mm512_cvtsepi32_epi8(round_away_512(_mm512_mul_ps(v1, s))));
    }
}

T512Q static void q8_k_row_512(const float *x, rlx_block_q8_k *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += RLX_QK_K) {
        __m512 a = _mm512_setzero_ps();
        for (int k = 0; k < RLX_QK_K; k += 16) a = _mm512_max_ps(a, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
        const float amax = _mm512_reduce_max_ps(a);
        if (!amax) { memset(&y[i], 0, sizeof y[i]); continue; }
        float max = 0.0f; /* the first element of largest magnitude, sign included */
        for (int k = 0; k < RLX_QK_K; k++)
            if (fabsf(x[k]) == amax) { max = x[k]; break; }
        const float iscale = -127.f / max;
        const __m512 s = _mm512_set1_ps(iscale);
        for (int k = 0; k < RLX_QK_K; k += 16) {
            /* cvtps rounds to nearest even, as rlx__nearest_int's magic-number addition */
            __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + k), s)), _mm512_set1_epi32(127));
            _mm_storeu_si128((__m128i *)(y[i].qs + k), _mm512_cvtepi32_epi8(q));
            y[i].bsums[k / 16] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        y[i].d = 1 / iscale;
    }
}
#endif

void rlx_cpu_quantize_act(int type, const float *x, void *dst, int64_t n)
{
#if defined(__x86_64__)
    if (!strncmp(rlx_cpu_path(), "avx512", 6)) {
        if (type == RLX_Q8_0 && n % RLX_QK == 0) { q8_0_row_512(x, dst, n / RLX_QK); return; }
        if (type == RLX_Q8_K && n % RLX_QK_K == 0) { q8_k_row_512(x, dst, n / RLX_QK_K); return; }
    }
#endif
    rlx_quantize_row(type, x, dst, n);
}

#define ACT_BLOCK_BYTES (256u << 10)
#define WEIGHT_CHUNK_BYTES (256u << 10)

/* Output rows go in chunks claimed from a per-step atomic counter, so a thread the OS
 * preempts (the machine is often oversubscribed) does not hold the others at the next barrier.
 * rlx_matmul_rows' sums never depend on [n0, n1), so results are the same whoever claims what.
 * A single activation row is converted by every thread into its own scratch row: cheaper than
 * a barrier. */
static void k_matmul(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_graph *g = r->plan->graph;
    const rlx_gtensor *w = &g->tensors[s->node.in[1]];
    int x = s->node.in[0];
    int64_t T = n_rows(r, x), K = w->ne[0], N = w->ne[1], a, b;
    int vt = rlx_vec_dot_type(w->wtype);
    size_t arb = rlx_row_bytes(vt, K);
    const void *act;
    bool own = T == 1 && nth > 1;
    uint8_t *dst0 = own ? r->row_scratch + (size_t)ith * r->row_scratch_stride : r->scratch;
    if (own) { a = 0; b = 1; } else split(T, ith, nth, &a, &b);
    if (vt == RLX_F32 && w->wtype == RLX_F32) {
        act = rowp(r, x, 0);
    } else {
        for (int64_t t = a; t < b; t++) {
            const float *src = rowp(r, x, t);
            uint8_t *dst = dst0 + (size_t)t * arb;
            if (vt != RLX_F32) {
                rlx_cpu_quantize_act(vt, src, dst, K);
            } else if (w->wtype == RLX_F16) {
                /* ggml multiplies F16/BF16 weights with activations rounded to the weight's
                 * type; do the same (kept as f32 values) so logits agree with llama.cpp */
                for (int64_t k = 0; k < K; k++) ((float *)dst)[k] = rlx_f16_to_f32(rlx_f32_to_f16(src[k]));
            } else {
                for (int64_t k = 0; k < K; k++) ((float *)dst)[k] = rlx_bf16_to_f32(rlx_f32_to_bf16(src[k]));
            }
        }
        if (!own) rlx_threadpool_barrier(r->tp);
        act = dst0;
    }
    float *out = rowp(r, s->out, 0);
    /* Chunks of 16-row tiles: about 8 per thread. For many activation rows, a chunk's weights
     * (at most ~256 KiB) and a block of activations (~256 KiB) are kept in L2 and the block
     * loop runs inside the chunk; otherwise every weight tile would stream all T rows from
     * memory (pp512 ran at half pp128's speed). Results are unchanged: rlx_matmul_rows' sums
     * depend on neither T nor [n0, n1). */
    int64_t tiles = (N + 15) / 16, per = tiles / ((int64_t)nth * 8);
    int64_t tb = RLX_MAX((int64_t)16, (int64_t)(ACT_BLOCK_BYTES / arb) / 16 * 16);
    if (T > tb) per = RLX_MIN(per, (int64_t)(WEIGHT_CHUNK_BYTES / (16 * rlx_row_bytes(w->wtype, K))));
    if (per < 1) per = 1;
    if (nth == 1 && T <= tb) per = tiles;
    _Atomic int64_t *next = &r->counters[s - r->plan->steps];
    for (;;) {
        int64_t c = atomic_fetch_add_explicit(next, per, memory_order_relaxed);
        if (c >= tiles) break;
        int64_t n0 = c * 16, n1 = RLX_MIN((c + per) * 16, N);
        for (int64_t t0 = 0; t0 < T; t0 += tb)
            rlx_matmul_rows(w->wtype, w->data, n0, n1, (const uint8_t *)act + (size_t)t0 * arb, arb, RLX_MIN(tb, T - t0), K,
                            out + t0 * N, N);
        if (s->n_chain)
            for (int64_t t = 0; t < T; t++) apply_chain(r, s, out + t * N, t, n0, n1);
    }
}

/* ---- rope ------------------------------------------------------------------------------- */

static void k_rope(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_node *n = &s->node;
    int64_t T = r->batch->n_tokens, a, b;
    int n_heads = n->ip[0], hd = n->ip[1], n_rot = n->ip[2], mode = n->ip[3];
    const float *ff = n->in[1] >= 0 ? operand_row(r, n->in[1], 0) : NULL;
    float cs[512], sn[512]; /* n_rot <= 1024 is checked by the builder */
    split(T, ith, nth, &a, &b);
    for (int64_t t = a; t < b; t++) {
        rlx_rope_angles(n->fp[0], n->fp[1], ff, n_rot, r->batch->pos[t], cs, sn);
        const float *x = rowp(r, n->in[0], t);
        float *y = rowp(r, s->out, t);
        for (int h = 0; h < n_heads; h++) {
            const float *xh = x + (int64_t)h * hd;
            float *yh = y + (int64_t)h * hd;
            if (mode == RLX_ROPE_NEOX) {
                for (int i = 0; i < n_rot / 2; i++) {
                    float x0 = xh[i], x1 = xh[i + n_rot / 2];
                    yh[i] = x0 * cs[i] - x1 * sn[i];
                    yh[i + n_rot / 2] = x0 * sn[i] + x1 * cs[i];
                }
            } else {
                for (int i = 0; i < n_rot / 2; i++) {
                    float x0 = xh[2 * i], x1 = xh[2 * i + 1];
                    yh[2 * i] = x0 * cs[i] - x1 * sn[i];
                    yh[2 * i + 1] = x0 * sn[i] + x1 * cs[i];
                }
            }
            if (yh != xh)
                for (int i = n_rot; i < hd; i++) yh[i] = xh[i];
        }
    }
}

/* ---- attention over the paged KV cache ------------------------------------------------------ */

static inline size_t kv_slot(const rlx_cpu_run *r, int32_t seq, int32_t pos)
{
    const rlx_batch_seq *bs = &r->batch->seqs[seq];
    int32_t B = r->kv->block_size;
    return (size_t)bs->blocks[pos / B] * (size_t)B + (size_t)(pos % B);
}

/* Phase 2 works on one (token, KV head, up to ATTN_G query heads of its group): scores of all
 * G heads in one pass over K, a softmax per head, then one pass over V. This keeps ggml's
 * rounding (q and the normalised probabilities rounded to f16 for an f16 cache), which parity
 * needs; an online softmax would round unnormalised weights instead. Vector paths only change
 * the summation order of the q.k and p.v products, fixed per path, so results never depend on
 * the batch or the thread split. */
#define ATTN_G RLX_CPU_ATTN_G

typedef struct attn_job {
    const rlx_cpu_run *r;
    const uint8_t *K, *V;
    bool f16, q8;     /* cache type F16 / Q8_0 (neither: F32) */
    int64_t kvc;
    size_t rb;        /* bytes per K/V row (rlx_kv_row_bytes) */
    int hd, hk, G;
    int32_t seq, p, j0;
    const float *q;   /* G consecutive heads */
    float *y;
    float *sc;        /* G rows of `stride` scores */
    float *part;      /* head_dim x 16 K tile, then G x head_dim accumulators */
    size_t stride;
    float scale, cap;
} attn_job;

typedef void (*attn_fn)(const attn_job *j);

/* n values of a Q8_0 row from column c0 on (a head's slice may start inside a block), with
 * quant.c's dequantization arithmetic: qs * f16_to_f32(d). */
static inline void deq_q8_0_cols(const uint8_t *row, int64_t c0, int n, float *out)
{
    const rlx_block_q8_0 *b = (const rlx_block_q8_0 *)row;
    for (int i = 0; i < n;) {
        const int64_t c = c0 + i;
        const rlx_block_q8_0 *blk = b + c / RLX_QK;
        const float d = rlx_f16_to_f32(blk->d);
        const int e = (int)(c % RLX_QK), m = RLX_QK - e < n - i ? RLX_QK - e : n - i;
        for (int t = 0; t < m; t++) out[i + t] = blk->qs[e + t] * d;
        i += m;
    }
}

/* K or V of position j0 + k for the job's KV head: its hd elements in the cache (F16, F32), or,
 * for a Q8_0 cache, those values dequantized into buf (which is returned). */
static inline const uint8_t *kv_head(const attn_job *j, const uint8_t *base, int32_t k, float *buf)
{
    const size_t slot = kv_slot(j->r, j->seq, j->j0 + k);
    if (!j->q8) return base + (slot * (size_t)j->kvc + (size_t)j->hk * (size_t)j->hd) * (j->f16 ? 2 : 4);
    deq_q8_0_cols(base + slot * j->rb, (int64_t)j->hk * j->hd, j->hd, buf);
    return (const uint8_t *)buf;
}

static inline float f16_round(float x) { return rlx_f16_to_f32(rlx_f32_to_f16(x)); }

/* scores in place: softcap, scale, then exp(s - max) summed in double, as ggml's softmax */
static void attn_softmax(const attn_job *j, int32_t n, float *mx, float *inv)
{
    for (int g = 0; g < j->G; g++) {
        float *sg = j->sc + (size_t)g * j->stride;
        mx[g] = -INFINITY;
        for (int32_t k = 0; k < n; k++) {
            float d = sg[k];
            if (j->cap > 0.0f) d = softcap(d, j->cap);
            d *= j->scale;
            sg[k] = d;
            if (d > mx[g]) mx[g] = d;
        }
        double sum = 0.0;
        for (int32_t k = 0; k < n; k++) {
            float e = expf(sg[k] - mx[g]);
            sg[k] = e;
            sum += (double)e;
        }
        inv[g] = (float)(1.0 / sum);
    }
}

/* Scalar reference: q.k and p.v summed sequentially in float without fused multiply-adds.
 * The vector paths below compute exactly these numbers (bit for bit): q.k runs across W
 * positions at once over a transposed tile of K, p.v across head_dim; contraction into FMAs
 * is turned off for them. Summing in any other order moved the BF16 parity file's margin
 * past its tolerance (measured: 0.91 -> 1.04-1.14 of tol with ggml-like orders). */
static void attn_scalar(const attn_job *j)
{
    const int G = j->G, hd = j->hd;
    const int32_t n = j->p - j->j0 + 1;
    const size_t st = j->stride;
    float qb[ATTN_G * 1024], mx[ATTN_G], inv[ATTN_G], row[1024];
    float *acc = j->part;
    for (int i = 0; i < G * hd; i++) qb[i] = j->f16 ? f16_round(j->q[i]) : j->q[i];
    for (int g = 0; g < G; g++) mx[g] = -INFINITY;
    for (int32_t k = 0; k < n; k++) {
        const uint8_t *kr = kv_head(j, j->K, k, row);
        for (int g = 0; g < G; g++) {
            float d = 0.0f;
            for (int i = 0; i < hd; i++) d += qb[g * hd + i] * (j->f16 ? rlx_f16_to_f32(((const uint16_t *)kr)[i]) : ((const float *)kr)[i]);
            j->sc[g * st + (size_t)k] = d;
        }
    }
    attn_softmax(j, n, mx, inv);
    memset(acc, 0, (size_t)(G * hd) * sizeof *acc);
    for (int32_t k = 0; k < n; k++) {
        const uint8_t *vr = kv_head(j, j->V, k, row);
        for (int g = 0; g < G; g++) {
            float pj = j->sc[g * st + (size_t)k] * inv[g];
            if (j->f16) pj = f16_round(pj);
            for (int i = 0; i < hd; i++) acc[g * hd + i] += pj * (j->f16 ? rlx_f16_to_f32(((const uint16_t *)vr)[i]) : ((const float *)vr)[i]);
        }
    }
    memcpy(j->y, acc, (size_t)(G * hd) * sizeof *acc);
}

#if defined(__x86_64__)
/* One vector path per ISA from the same body: VF vector type, W lanes, LD/ST f32 load/store,
 * CVT16 f16 load, SET1, ADD, MUL, ZERO. */
#define DEFINE_ATTN_VEC(NAME, ATTR, VF, W, LD, ST, CVT16, SET1, ADD, MUL, ZERO)                      \
    ATTR static void NAME(const attn_job *j)                                                        \
    {                                                                                               \
        const int G = j->G, hd = j->hd;                                                             \
        const int32_t n = j->p - j->j0 + 1;                                                         \
        const size_t st = j->stride;                                                                \
        _Alignas(64) float qb[ATTN_G * 1024], row[1024 + W];                                        \
        float mx[ATTN_G], inv[ATTN_G];                                                              \
        float *kt = j->part; /* hd x W transposed K tile, then the p.v accumulators */              \
        const int hv = hd / W * W;                                                                  \
        for (int i = 0; i < G * hd; i++) qb[i] = j->f16 ? f16_round(j->q[i]) : j->q[i];             \
        for (int g = 0; g < G; g++) mx[g] = -INFINITY;                                              \
        for (int32_t k0 = 0; k0 < n; k0 += W) {                                                     \
            const int nw = n - k0 < W ? (int)(n - k0) : W;                                          \
            for (int l = 0; l < W; l++) {                                                           \
                if (l >= nw) { for (int i = 0; i < hd; i++) kt[i * W + l] = 0.0f; continue; }      \
                const uint8_t *kr = kv_head(j, j->K, k0 + l, row);                                  \
                const float *src = (const float *)kr;                                               \
                if (j->f16) {                                                                       \
                    int i = 0;                                                                      \
                    for (; i < hv; i += W) ST(row + i, CVT16((const uint16_t *)kr + i));            \
                    for (; i < hd; i++) row[i] = rlx_f16_to_f32(((const uint16_t *)kr)[i]);         \
                    src = row;                                                                      \
                }                                                                                   \
                for (int i = 0; i < hd; i++) kt[i * W + l] = src[i];                                \
            }                                                                                       \
            for (int g = 0; g < G; g++) {                                                           \
                const float *qg = qb + g * hd;                                                      \
                VF d = ZERO();                                                                      \
                for (int i = 0; i < hd; i++) d = ADD(d, MUL(SET1(qg[i]), LD(kt + i * W)));          \
                _Alignas(64) float dv[W];                                                           \
                ST(dv, d);                                                                          \
                memcpy(j->sc + g * st + (size_t)k0, dv, (size_t)nw * sizeof(float));                \
            }                                                                                       \
        }                                                                                           \
        attn_softmax(j, n, mx, inv);                                                                \
        float *acc = j->part;                                                                       \
        memset(acc, 0, (size_t)(G * hd) * sizeof *acc);                                             \
        for (int32_t k = 0; k < n; k++) {                                                           \
            const uint8_t *vr = kv_head(j, j->V, k, row);                                           \
            const float *vf = (const float *)vr;                                                    \
            if (j->f16) {                                                                           \
                int i = 0;                                                                          \
                for (; i < hv; i += W) ST(row + i, CVT16((const uint16_t *)vr + i));                \
                for (; i < hd; i++) row[i] = rlx_f16_to_f32(((const uint16_t *)vr)[i]);             \
                vf = row;                                                                           \
            }                                                                                       \
            for (int g = 0; g < G; g++) {                                                           \
                float pj = j->sc[g * st + (size_t)k] * inv[g];                                      \
                if (j->f16) pj = f16_round(pj);                                                     \
                float *ag = acc + g * hd;                                                           \
                const VF pv = SET1(pj);                                                             \
                int i = 0;                                                                          \
                for (; i < hv; i += W) ST(ag + i, ADD(LD(ag + i), MUL(pv, LD(vf + i))));            \
                for (; i < hd; i++) ag[i] += pj * vf[i];                                            \
            }                                                                                       \
        }                                                                                           \
        memcpy(j->y, acc, (size_t)(G * hd) * sizeof *acc);                                          \
    }

#define T512 __attribute__((target("avx512f,f16c"), optimize("fp-contract=off")))
#define T256 __attribute__((target("avx2,f16c"), optimize("fp-contract=off")))
#define CVT512(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define CVT256(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
DEFINE_ATTN_VEC(attn_avx512, T512, __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, CVT512, _mm512_set1_ps,
                _mm512_add_ps, _mm512_mul_ps, _mm512_setzero_ps)
DEFINE_ATTN_VEC(attn_avx2, T256, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, CVT256, _mm256_set1_ps,
                _mm256_add_ps, _mm256_mul_ps, _mm256_setzero_ps)
#endif

/* follows the matmul kernels' path, so RLX_CPU_PATH / rlx_cpu_force_path test every variant */
static attn_fn attn_kernel(void)
{
#if defined(__x86_64__)
    const char *path = rlx_cpu_path();
    if (!strncmp(path, "avx512", 6)) return attn_avx512;
    if (!strcmp(path, "avx2")) return attn_avx2;
#endif
    return attn_scalar;
}

static void k_attention(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_node *n = &s->node;
    const rlx_batch *bt = r->batch;
    int layer = n->ip[0], n_head = n->ip[1], n_head_kv = n->ip[2], hd = n->ip[3], window = n->ip[4];
    float scale = n->fp[0], cap = n->fp[1];
    int64_t kvc = r->kv->kv_cols, T = bt->n_tokens, a, b;
    bool f16 = r->kv->type == RLX_F16, q8 = r->kv->type == RLX_Q8_0;
    size_t rb = rlx_kv_row_bytes(r->kv->type, kvc);
    uint8_t *K = r->kv_k + (size_t)layer * r->kv_layer_bytes, *V = r->kv_v + (size_t)layer * r->kv_layer_bytes;

    /* phase 1: store this batch's K and V */
    split(T, ith, nth, &a, &b);
    for (int64_t t = a; t < b; t++) {
        const rlx_batch_seq *bs = &bt->seqs[bt->seq[t]];
        if (bt->pos[t] < 0 || bt->pos[t] / r->kv->block_size >= bs->n_blocks) { atomic_store(&r->error, RLX_ERANGE); continue; }
        size_t slot = kv_slot(r, bt->seq[t], bt->pos[t]);
        const float *k = rowp(r, n->in[1], t), *v = rowp(r, n->in[2], t);
        if (f16) {
            uint16_t *kd = (uint16_t *)(K + slot * rb), *vd = (uint16_t *)(V + slot * rb);
            for (int64_t c = 0; c < kvc; c++) { kd[c] = rlx_f32_to_f16(k[c]); vd[c] = rlx_f32_to_f16(v[c]); }
        } else if (q8) {
            /* the reference quantizer (the activation quantizer's bytes): see backend.h */
            rlx_quantize_row(RLX_Q8_0, k, K + slot * rb, kvc);
            rlx_quantize_row(RLX_Q8_0, v, V + slot * rb, kvc);
        } else {
            memcpy(K + slot * rb, k, (size_t)kvc * 4);
            memcpy(V + slot * rb, v, (size_t)kvc * 4);
        }
    }
    rlx_threadpool_barrier(r->tp);
    if (atomic_load(&r->error)) return;

    /* phase 2: one (token, KV head, group of up to ATTN_G query heads) at a time, so each K/V
     * row is read once per group; the kernel is chosen by the matmul path (RLX_CPU_PATH) */
    attn_fn fn = attn_kernel();
    int group = n_head / n_head_kv;
    int n_sub = (group + ATTN_G - 1) / ATTN_G;
    float *sc = r->attn_scratch + (size_t)ith * (r->attn_scratch_stride * ATTN_G + RLX_CPU_ATTN_PART);
    split(T * n_head_kv * n_sub, ith, nth, &a, &b);
    for (int64_t w = a; w < b; w++) {
        int64_t t = w / (n_head_kv * n_sub);
        int rest = (int)(w % (n_head_kv * n_sub)), hk = rest / n_sub, h0 = hk * group + (rest % n_sub) * ATTN_G;
        int32_t p = bt->pos[t];
        attn_job j = {
            .r = r, .K = K, .V = V, .f16 = f16, .q8 = q8, .kvc = kvc, .rb = rb, .hd = hd, .hk = hk,
            .G = RLX_MIN(ATTN_G, hk * group + group - h0), .seq = bt->seq[t], .p = p,
            .j0 = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0,
            .q = rowp(r, n->in[0], t) + (int64_t)h0 * hd, .y = rowp(r, s->out, t) + (int64_t)h0 * hd,
            .sc = sc, .part = sc + r->attn_scratch_stride * ATTN_G, .stride = r->attn_scratch_stride, .scale = scale, .cap = cap,
        };
        fn(&j);
    }
}

void rlx_cpu_step(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    switch (s->node.op) {
    case RLX_OP_GET_ROWS: k_get_rows(r, s, ith, nth); break;
    case RLX_OP_RMS_NORM: k_rms_norm(r, s, ith, nth); break;
    case RLX_OP_HEAD_NORM: k_head_norm(r, s, ith, nth); break;
    case RLX_OP_MATMUL: k_matmul(r, s, ith, nth); break;
    case RLX_OP_ROPE: k_rope(r, s, ith, nth); break;
    case RLX_OP_ATTENTION: k_attention(r, s, ith, nth); break;
    case RLX_OP_GATHER: k_gather(r, s, ith, nth); break;
    default: k_elementwise(r, s, ith, nth); break;
    }
}
