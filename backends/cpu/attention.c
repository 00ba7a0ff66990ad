/* attention.c - attention over the paged KV cache, in the arithmetic of llama.cpp's CPU backend
 * without flash attention (the setting of ../shared/golden), so logits agree bit for bit:
 *   scores = K . q      q rounded to the cache's type; rlx_cpu_float_gemm with K rows of the
 *                       cache as the weight rows (tinyBLAS's order for prompt rows, vec_dot's
 *                       for one-token decode rows, as llama.cpp's mul_mat picks them)
 *   p = softmax(scale * softcap(scores) + mask)   as ggml_soft_max_ext: max, ggml's vectorised
 *                       exp of x - max (vmath.h), sums of 16-value chunks accumulated in double,
 *                       then times (float)(1 / sum)
 *   out = V^T . p       p rounded to the cache's type; V transposed into scratch so the same
 *                       kernels run with the positions as the reduction dimension.
 * Items whose rows are all one-token (decode) rows take both products on the SIMD paths without
 * transposing, reading K and V by row pointers into the cache (attn_dec.c: the same sums,
 * checked against the routes above by tests/unit/test_cpu_attention.c). The cache keeps a
 * block's rows head by head (cpu_ops.h rlx__cpu_kv_at), so an item's slices are contiguous
 * within each block.
 * A Q8_0 cache (llama.cpp has no such path without flash attention) is read as f16(d) * qs and
 * computed as an F32 one: q and p unrounded (see the layout note in backends/backend.h).
 * llama.cpp reduces over a KV view padded to 256 positions from position 0; here positions are
 * laid out from a multiple of 64 and padded to one, which puts the same positions in the same
 * vector lanes and accumulators (masked positions contribute exact zeros in both).
 *
 * Causal rows see positions 0..pos (or the sliding window's); bidirectional rows
 * (RLX_ATTN_BIDIRECTIONAL) see 0..the sequence's last position in the batch, i.e. every
 * position the cache holds for it after this step's writes, with the same arithmetic.
 *
 * A layer without a cache (RLX_MEM_NONE, encoders; llama.cpp's no-cache attention, whose K and
 * V stay F32) reads K and V from this step's k and v rows: a sequence whose tokens are
 * contiguous in the batch in position order 0..n-1 (graph.h) is one "block" of F32 rows
 * starting at its first token's row, so the same kernels run over it unchanged; K.q is then
 * one-row (ggml_vec_dot) for every row, as llama.cpp's mul_mat picks for its permuted q.
 *
 * Work items are (sequence, KV head, tile of the sequence's tokens x query heads of the group),
 * claimed from the step's atomic counter: K and V rows are read once per item, and every
 * output depends only on its own token's row kind (rlx_batch.decode) and positions, never on
 * the batch or the thread split. */
#include "backends/cpu/attn_dec.h"
#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "backends/quant.h"
#include "backends/quant_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#define ATTN_ROWS 32 /* query rows (token x head) per work item */

size_t rlx_cpu_attn_scratch_floats(int64_t head_dim, int64_t max_positions, int64_t block_size)
{
    const size_t npad = ((size_t)max_positions + 63) / 64 * 64 + 64;
    /* rounded q rows, scores / probabilities, transposed V, output rows, one block of
     * dequantized K rows (Q8_0 caches), transposed K (layers without a cache, kq_lanes; the
     * scratch is committed lazily, so decoders never pay for it) */
    return (size_t)ATTN_ROWS * (size_t)head_dim + (size_t)ATTN_ROWS * npad + (size_t)head_dim * npad +
           (size_t)ATTN_ROWS * (size_t)head_dim + (size_t)block_size * (size_t)head_dim + (size_t)head_dim * npad + 64;
}

/* n values of a Q8_0 row from column c0 on (a head's slice may start inside a block), as
 * quant.c dequantizes them: qs * f16_to_f32(d) */
static void deq_q8_0_cols(const uint8_t *row, int64_t c0, int n, float *out)
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

static inline size_t kv_slot(const rlx_cpu_run *r, int32_t seq, int32_t pos)
{
    const rlx_batch_seq *bs = &r->batch->seqs[seq];
    const int32_t B = r->kv->block_size;
    return (size_t)bs->blocks[pos / B] * (size_t)B + (size_t)(pos % B);
}

/* ---- softmax of one row (ggml_soft_max_ext) ------------------------------------------------ */

typedef struct sm_row {
    float *x;          /* n scores in, probabilities out */
    int64_t n;         /* a multiple of 64 */
    int64_t lo, hi;    /* valid positions [lo, hi] as indices of x; others are masked */
    float scale, cap;
} sm_row;

/* scale * softcap(s) on valid positions, -inf elsewhere; returns the maximum */
static float sm_prepare(const sm_row *s)
{
    float mx = -INFINITY;
    for (int64_t k = 0; k < s->n; k++) {
        if (k < s->lo || k > s->hi) { s->x[k] = -INFINITY; continue; }
        float d = s->x[k];
        if (s->cap > 0.0f) d = softcap(d, s->cap);
        d *= s->scale;
        s->x[k] = d;
        if (d > mx) mx = d;
    }
    return mx;
}

static void sm_scale(const sm_row *s, double sum)
{
    const float inv = (float)(1.0 / sum);
    for (int64_t k = 0; k < s->n; k++) s->x[k] *= inv;
}

/* A 16-value chunk with no valid position: its exps are exp(-inf) = +0 (vmath.h's too), so it
 * adds +0.0 to the sum, which changes nothing (the sum is never -0): it is only zeroed. Most of
 * a short row's padded chunks, and the causal mask's upper chunks. */
static inline bool sm_masked(const sm_row *s, int64_t k)
{
    if (k + 16 <= s->lo || k > s->hi) {
        memset(s->x + k, 0, 16 * sizeof *s->x);
        return true;
    }
    return false;
}

/* every path: AVX-512 llama.cpp's numbers (exp of vmath.h, chunk sums in its reduction tree) */
static void sm_scalar(const sm_row *s)
{
    const float mx = sm_prepare(s);
    double sum = 0.0;
    for (int64_t k = 0; k < s->n; k += 16) {
        if (sm_masked(s, k)) continue;
        for (int l = 0; l < 16; l++) s->x[k + l] = rlx__vexp(s->x[k + l] - mx);
        sum += (double)rlx__red16(s->x + k);
    }
    sm_scale(s, sum);
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void sm_avx512(const sm_row *s)
{
    const float mx = sm_prepare(s);
    double sum = 0.0;
    const __m512 m = _mm512_set1_ps(mx);
    for (int64_t k = 0; k < s->n; k += 16) {
        if (sm_masked(s, k)) continue;
        const __m512 v = rlx__vexp512(_mm512_sub_ps(_mm512_loadu_ps(s->x + k), m));
        _mm512_storeu_ps(s->x + k, v);
        sum += (double)_mm512_reduce_add_ps(v);
    }
    sm_scale(s, sum);
}

__attribute__((target("avx2,fma"))) static void sm_avx2(const sm_row *s)
{
    const float mx = sm_prepare(s);
    double sum = 0.0;
    const __m256 m = _mm256_set1_ps(mx);
    for (int64_t k = 0; k < s->n; k += 16) {
        if (sm_masked(s, k)) continue;
        const __m256 lo = rlx__vexp256(_mm256_sub_ps(_mm256_loadu_ps(s->x + k), m));
        const __m256 hi = rlx__vexp256(_mm256_sub_ps(_mm256_loadu_ps(s->x + k + 8), m));
        _mm256_storeu_ps(s->x + k, lo);
        _mm256_storeu_ps(s->x + k + 8, hi);
        /* the 16-lane tree: lanes i + 8 and i, then halves, pairs, and the last add */
        __m256 h8 = _mm256_add_ps(hi, lo);
        __m128 h = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        h = _mm_add_ss(h, _mm_movehdup_ps(h));
        sum += (double)_mm_cvtss_f32(h);
    }
    sm_scale(s, sum);
}
#endif

typedef void (*sm_fn)(const sm_row *);

/* follows the matmul kernels' path, so RLX_CPU_PATH / rlx_cpu_force_path test every variant */
static sm_fn softmax_kernel(void)
{
#if defined(__x86_64__)
    const int width = rlx__cpu_width();
    if (width == 512) return sm_avx512;
    if (width == 256) return sm_avx2;
#endif
    return sm_scalar;
}

/* ---- K . q without a cache, heads of under 64 values -----------------------------------------
 * An encoder's K.q is one-row (ggml_vec_dot_f32 per score, see scores()), and a head of under 64
 * values has no 64-value block in it: a score is the compiled tail alone, ((0 + q0 k0) + q1 k1)
 * + ..., product then add, unfused, for the first hd & ~7 values and fused multiply-adds for the
 * rest. One score after another that is a serial chain of hd dependent adds (MiniLM, head size
 * 32: ~7% of a step of short inputs). Here K is transposed (hd rows of positions, zero past the
 * last) and each vector lane runs that same chain for its own position, several query rows
 * interleaved: every score's operations and their order are the tail's, bit for bit. S gets
 * ktn columns per row (a multiple of 16; those past the positions are zeros that the softmax
 * masks). */
typedef void (*kq_fn)(const float *q, int R, int hd, const float *kt, int64_t ktn, float *S, size_t sstride);

static _Atomic bool kq_lanes_on = true;
void rlx__cpu_attn_kq_lanes(bool on) { atomic_store(&kq_lanes_on, on); }

#if defined(__x86_64__)
#define KQ_BODY(VEC, ZERO, LOAD, SET1, ADD, MUL, FMA, STORE, LANES)                                     \
    const int m8 = hd & ~7;                                                                               \
    for (int64_t c = 0; c < ktn; c += LANES) {                                                            \
        int r0 = 0;                                                                                       \
        for (; r0 + 8 <= R; r0 += 8) KQ_ROWS(VEC, ZERO, LOAD, SET1, ADD, MUL, FMA, STORE, 8)               \
        for (; r0 < R; r0++) KQ_ROWS(VEC, ZERO, LOAD, SET1, ADD, MUL, FMA, STORE, 1)                       \
    }
#define KQ_ROWS(VEC, ZERO, LOAD, SET1, ADD, MUL, FMA, STORE, NR)                                        \
    {                                                                                                     \
        VEC acc[NR];                                                                                      \
        _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++) acc[i] = ZERO;                               \
        for (int k = 0; k < hd; k++) {                                                                    \
            const VEC kv = LOAD(kt + (size_t)k * (size_t)ktn + c);                                        \
            _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++) {                                        \
                const VEC qv = SET1(q[(size_t)(r0 + i) * (size_t)hd + (size_t)k]);                       \
                acc[i] = k < m8 ? ADD(acc[i], MUL(qv, kv)) : FMA(qv, kv, acc[i]);                         \
            }                                                                                             \
        }                                                                                                 \
        _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++) STORE(S + (size_t)(r0 + i) * sstride + c, acc[i]); \
    }

__attribute__((target("avx512f"))) static void kq_lanes512(const float *q, int R, int hd, const float *kt, int64_t ktn,
                                                           float *S, size_t sstride)
{
    KQ_BODY(__m512, _mm512_setzero_ps(), _mm512_loadu_ps, _mm512_set1_ps, _mm512_add_ps, _mm512_mul_ps, _mm512_fmadd_ps,
            _mm512_storeu_ps, 16)
}

__attribute__((target("avx2,fma"))) static void kq_lanes256(const float *q, int R, int hd, const float *kt, int64_t ktn,
                                                            float *S, size_t sstride)
{
    KQ_BODY(__m256, _mm256_setzero_ps(), _mm256_loadu_ps, _mm256_set1_ps, _mm256_add_ps, _mm256_mul_ps, _mm256_fmadd_ps,
            _mm256_storeu_ps, 8)
}
#undef KQ_BODY
#undef KQ_ROWS
#endif

/* the softmax's path (NULL: scalar, the products' route) */
static kq_fn kq_kernel(sm_fn sm)
{
#if defined(__x86_64__)
    if (sm == sm_avx512) return kq_lanes512;
    if (sm == sm_avx2) return kq_lanes256;
#endif
    (void)sm;
    return NULL;
}

/* decode rows: V^T.p and K.q over K and V row pointers, untransposed (attn_dec.c) */

/* ---- one work item: a sequence's tokens x one group of query heads ------------------------ */

typedef struct attn_item {
    rlx_cpu_run *r;
    const rlx_step *s;
    const uint8_t *K, *V;   /* this layer */
    int type;               /* arithmetic: RLX_F16 or RLX_F32 (also for a Q8_0 cache) */
    bool q8;                /* the cache holds Q8_0 rows */
    size_t esz;             /* bytes per value of `type` */
    size_t rb;              /* bytes per cache row (rlx_kv_row_bytes) */
    size_t hb;              /* bytes from a position's head slice to the next one's in a block
                               (cpu_ops.h rlx__cpu_kv_at; rb for whole rows and without a cache) */
    size_t hoff;            /* offset of head hk's slice from its block (or row), see item_at */
    int64_t kvc;
    int hd, hk, h0, gs;     /* KV head, first query head, query heads in this item */
    int window, qt;         /* qt: tokens per tile (qt x gs <= ATTN_ROWS) */
    bool bidir;             /* RLX_ATTN_BIDIRECTIONAL: every row sees positions 0..jmax */
    bool nocache;           /* RLX_MEM_NONE: K, V are the step's rows, position j at row base + j */
    int64_t base;
    const int32_t *toks;    /* batch token indices of this item (one sequence) */
    int nt;
    int32_t seq;            /* its sequence in the batch */
    int64_t jmin, jmax;     /* positions it reads (claim_item) */
    bool range_ok;          /* false: a position lies outside the sequence's blocks */
    float *scratch;
    size_t npad_max;
    sm_fn softmax;
    rlx_kqv_dec_fn kqv_dec; /* NULL on the scalar path */
    rlx_kq_dec_fn kq_dec;   /* K.q of decode rows over row pointers (NULL: the products) */
    kq_fn kq;               /* K.q of layers without a cache, heads under 64 (NULL: the products) */
} attn_item;

/* head hk's values at position pos of the item's sequence in K or V (base): for a Q8_0 cache
 * the start of the row, whose readers take the head's columns themselves */
static inline const uint8_t *item_at(const attn_item *it, const uint8_t *base, int32_t pos)
{
    if (it->nocache) return base + (size_t)(it->base + pos) * it->rb + it->hoff;
    const int32_t B = it->r->kv->block_size;
    const size_t blk = (size_t)it->r->batch->seqs[it->seq].blocks[pos / B];
    return base + blk * (size_t)B * it->rb + (size_t)(pos % B) * it->hb + it->hoff;
}

/* How many of the n positions from j lie in j's block: their slices follow item_at(j) it->hb
 * bytes apart */
static inline int64_t item_run(const attn_item *it, int64_t j, int64_t n)
{
    const int32_t B = it->r->kv->block_size;
    return it->nocache ? n : RLX_MIN(n, B - j % B);
}

/* item_at for positions j0 .. j0 + n - 1 into at[], a block at a time */
static void item_rows(const attn_item *it, const uint8_t *base, int64_t j0, int64_t n, const uint8_t **at)
{
    for (int64_t k = 0; k < n;) {
        const uint8_t *p = item_at(it, base, (int32_t)(j0 + k));
        const int64_t run = item_run(it, j0 + k, n - k);
        for (int64_t i = 0; i < run; i++) at[k + i] = p + (size_t)i * it->hb;
        k += run;
    }
}

/* q rows of tokens [t0, t0 + n) of the item, scores over positions [j0, j0 + npad) (K rows of
 * the cache as weight rows, one product per block) and the rows' probabilities */
static int scores(const attn_item *it, int t0, int n, int64_t j0, float *q, float *S, uint8_t *role, int64_t *npad_out,
                  const uint8_t *const *krow)
{
    rlx_cpu_run *r = it->r;
    const rlx_batch *bt = r->batch;
    const int hd = it->hd, gs = it->gs, R = n * gs;
    const int32_t B = r->kv->block_size;
    int64_t lo[ATTN_ROWS], hi[ATTN_ROWS], jmax = -1;
    for (int ti = 0; ti < n; ti++) {
        /* a bidirectional row reads like a causal one at the sequence's last position */
        const int32_t t = it->toks[t0 + ti], p = it->bidir ? (int32_t)it->jmax : bt->pos[t];
        const int64_t l = it->window > 0 && p - it->window + 1 > 0 ? p - it->window + 1 : 0;
        jmax = p > jmax ? p : jmax;
        const float *src = rowp(r, it->s->node.in[0], t) + (int64_t)it->h0 * hd;
        for (int g = 0; g < gs; g++) {
            const int row = ti * gs + g;
            if (it->type == RLX_F16) rlx_cpu_round_act(RLX_F16, src + (size_t)g * hd, q + (size_t)row * hd, hd);
            else memcpy(q + (size_t)row * hd, src + (size_t)g * hd, (size_t)hd * sizeof *q);
            role[row] = r->decode_tok[t];
            lo[row] = l;
            hi[row] = p;
        }
    }
    const int64_t npad = (jmax - j0 + 1 + 63) / 64 * 64;
    if ((size_t)npad > it->npad_max) return RLX_ERANGE;
    uint8_t one_row[ATTN_ROWS];
    memset(one_row, 1, sizeof one_row);
    const size_t sstride = it->npad_max;
    float *kbuf = S + (size_t)ATTN_ROWS * sstride + (size_t)hd * sstride + (size_t)ATTN_ROWS * hd;
    if (it->nocache && it->kq && it->type == RLX_F32 && hd < 64) {
        float *kt = kbuf + (size_t)B * hd; /* hd rows of positions j0..jmax, then zeros */
        const int64_t nv = jmax - j0 + 1, ktn = (nv + 15) / 16 * 16;
        for (int64_t j = 0; j < nv; j++) {
            const float *kr = (const float *)item_at(it, it->K, (int32_t)(j0 + j));
            for (int d = 0; d < hd; d++) kt[(size_t)d * ktn + j] = kr[d];
        }
        for (int d = 0; d < hd; d++)
            for (int64_t j = nv; j < ktn; j++) kt[(size_t)d * ktn + j] = 0.0f;
        it->kq(q, R, hd, kt, ktn, S, sstride);
    } else if (krow) {
        /* decode rows, K rows of positions j0..jmax by pointer (run_item) */
        it->kq_dec(q, R, hd, krow, jmax - j0 + 1, it->type == RLX_F16, S, sstride);
    } else
    for (int64_t b = it->nocache ? 0 : j0 / B; it->nocache ? b == 0 : b * B <= jmax; b++) {
        const int64_t pa = it->nocache || b * B < j0 ? j0 : b * B;
        const int64_t pb = it->nocache || (b + 1) * B - 1 >= jmax ? jmax : (b + 1) * B - 1;
        const uint8_t *row0 = item_at(it, it->K, (int32_t)pa);
        if (it->q8) {
            for (int64_t j = 0; j <= pb - pa; j++) deq_q8_0_cols(row0 + (size_t)j * it->rb, (int64_t)it->hk * hd, hd, kbuf + (size_t)j * hd);
            rlx_cpu_float_gemm(RLX_F32, kbuf, (size_t)hd * 4, 0, pb - pa + 1, q, (size_t)hd, R, hd, S + (pa - j0), (int64_t)sstride, role);
        } else {
            /* without a cache llama.cpp's q is a permuted (non-contiguous) view, so its K.q takes
             * ggml_vec_dot per score for every row, not tinyBLAS: one-row arithmetic throughout */
            rlx_cpu_float_gemm(it->type, row0, it->hb, 0, pb - pa + 1, q, (size_t)hd, R, hd,
                               S + (pa - j0), (int64_t)sstride, it->nocache ? one_row : role);
        }
    }
    for (int row = 0; row < R; row++) {
        float *x = S + (size_t)row * sstride;
        sm_row sm = {x, npad, lo[row] - j0, hi[row] - j0, it->s->node.p.attn.scale, it->s->node.p.attn.softcap};
        it->softmax(&sm);
        if (it->type == RLX_F16) rlx_cpu_round_act(RLX_F16, x, x, npad);
    }
    *npad_out = npad;
    return 0;
}

/* An item's K and V head slices are rows (one per position; contiguous within a block, the
 * blocks apart) that this step reads for the first time: without a touch ahead their loads
 * stall on memory (the score and V^T . p kernels' loads were their hottest instructions). A thread claims its next
 * item before running the current one and touches the next one's rows toward L2 (ahead); the
 * current item's K rows then go to L1, its V rows to L2 until the softmax is done. Touching
 * the next item's rows toward L1 instead evicted the current one's. The decode route's K.q
 * (attn_dec.c) touches its K rows toward L1 a few positions ahead itself: only the first k_l1
 * rows go there at the start (all of a long context's did not fit; 1024 positions, avx2, -t 1:
 * 22.9 -> 24.4 t/s with both, with rows a cache row apart). In the head-by-head layout the
 * touches measured neutral at -t 1 and +7% at -t 2 (RESULTS 43). */
static void prefetch_kv(const attn_item *it, bool ahead, int64_t k_l1)
{
    const size_t len = (size_t)it->hd * it->esz;
    if (it->q8 || !it->range_ok) return; /* Q8_0: dequantized per block as read */
    for (int64_t j = it->jmin; j <= it->jmax;) { /* a block's run of slices at a time */
        const uint8_t *k0 = item_at(it, it->K, (int32_t)j);
        const int64_t run = item_run(it, j, it->jmax - j + 1);
        for (int64_t i = 0; i < run; i++, j++) {
            const uint8_t *k = k0 + (size_t)i * it->hb, *v = it->V + (k - it->K);
            for (size_t o = 0; o < len; o += 64) {
                if (ahead) __builtin_prefetch(k + o, 0, 2);
                else if (j - it->jmin < k_l1) __builtin_prefetch(k + o, 0, 3);
                __builtin_prefetch(v + o, 0, 2);
            }
        }
    }
}

static int run_item(const attn_item *it)
{
    rlx_cpu_run *r = it->r;
    const int hd = it->hd, gs = it->gs;
    const size_t sstride = it->npad_max;
    float *q = it->scratch, *S = q + (size_t)ATTN_ROWS * hd;
    float *vt = S + (size_t)ATTN_ROWS * sstride, *o = vt + (size_t)hd * sstride;
    uint8_t role[ATTN_ROWS];

    if (!it->range_ok) return RLX_ERANGE;
    const int64_t jmax = it->jmax;
    bool all_decode = true;
    for (int ti = 0; ti < it->nt; ti++) all_decode &= r->decode_tok[it->toks[ti]] != 0;
    const int64_t j0 = it->jmin / 64 * 64, nall = (jmax - j0 + 1 + 63) / 64 * 64;
    if ((size_t)nall > sstride) return RLX_ERANGE;
    const bool dec_kq = all_decode && it->kq_dec && it->kqv_dec && !it->q8 && hd % 64 == 0;
    prefetch_kv(it, false, dec_kq ? RLX_KQ_PREFETCH : INT64_MAX);

    if (all_decode && it->kqv_dec && !it->q8 && hd % 16 == 0) {
        /* one-token rows: V read by row pointers (in the transposed-V scratch). V^T.p visits
         * each row once per eight (avx512: sixteen) channels: a block's rows of one head are
         * contiguous in the cache (rlx__cpu_kv_at), so the visits stream through them */
        const uint8_t **vrow = (const uint8_t **)vt;
        const int64_t nvalid = jmax - j0 + 1;
        item_rows(it, it->V, j0, nvalid, vrow);
        /* K rows likewise, after them (the scratch holds hd x npad_max floats) */
        const uint8_t **krow = it->kq_dec && hd % 64 == 0 ? vrow + nvalid : NULL;
        if (krow) item_rows(it, it->K, j0, nvalid, krow);
        for (int ti = 0; ti < it->nt; ti++) {
            int64_t npad;
            int e = scores(it, ti, 1, j0, q, S, role, &npad, krow);
            if (e) return e;
            float *y = rowp(r, it->s->out, it->toks[ti]) + (int64_t)it->h0 * hd;
            const float *prow[ATTN_ROWS];
            float *yrow[ATTN_ROWS];
            for (int g = 0; g < gs; g++) { prow[g] = S + (size_t)g * sstride; yrow[g] = y + (size_t)g * hd; }
            /* this token's own positions: a sequence's several decode rows (speculative drafts)
             * share the item, but a row's probabilities end at its position (scores() wrote no
             * more), and a one-token step's sums have no terms past it */
            const int64_t own = it->bidir ? nvalid : (int64_t)r->batch->pos[it->toks[ti]] - j0 + 1;
            it->kqv_dec(prow, gs, own < nvalid ? own : nvalid, vrow, it->type == RLX_F16, hd, yrow);
        }
        return 0;
    }

    /* V transposed once for every tile: row d holds channel d for positions j0.. (zero past jmax,
     * one run per row) */
    const int64_t nvalid = jmax - j0 + 1;
    if (nvalid < nall)
        for (int d = 0; d < hd; d++)
            memset((uint8_t *)vt + ((size_t)d * nall + (size_t)nvalid) * it->esz, 0, (size_t)(nall - nvalid) * it->esz);
    for (int64_t k = 0; k < nvalid; k++) {
        const int64_t j = j0 + k;
        const uint8_t *v = item_at(it, it->V, (int32_t)j);
        if (it->q8) {
            float *tmp = o; /* free until the first tile's output */
            deq_q8_0_cols(v, (int64_t)it->hk * hd, hd, tmp);
            for (int d = 0; d < hd; d++) vt[(size_t)d * nall + (size_t)k] = tmp[d];
            continue;
        }
        if (it->type == RLX_F16)
            for (int d = 0; d < hd; d++) ((uint16_t *)vt)[(size_t)d * nall + (size_t)k] = ((const uint16_t *)v)[d];
        else
            for (int d = 0; d < hd; d++) vt[(size_t)d * nall + (size_t)k] = ((const float *)v)[d];
    }
    for (int t0 = 0; t0 < it->nt; t0 += it->qt) {
        const int n = it->nt - t0 < it->qt ? it->nt - t0 : it->qt, R = n * gs;
        int64_t npad;
        int e = scores(it, t0, n, j0, q, S, role, &npad, NULL);
        if (e) return e;
        /* tinyBLAS also declines a row count (here head_dim) not a multiple of 4 */
        if (hd % 4) memset(role, 1, (size_t)R);
        rlx_cpu_float_gemm(it->type, vt, (size_t)nall * it->esz, 0, hd, S, sstride, R, npad, o, hd, role);
        for (int ti = 0; ti < n; ti++) {
            float *y = rowp(r, it->s->out, it->toks[t0 + ti]) + (int64_t)it->h0 * hd;
            memcpy(y, o + (size_t)ti * gs * hd, (size_t)gs * hd * sizeof *y);
        }
    }
    return 0;
}

/* The next item (sequence, KV head, head sub-group) with tokens in this batch, claimed from
 * the step's counter into it with the positions it reads; false when none is left. Items of
 * sequences without tokens here are counted complete as they are skipped. */
static bool claim_item(rlx_cpu_run *r, rlx_cpu_sync *y, int nth, int64_t items, int64_t per_seq, int n_sub, int group, int gs,
                       attn_item *it)
{
    for (;;) {
        const int64_t w = rlx_cpu_claim(&y->next[1], 1, nth);
        if (w >= items) return false;
        const int32_t q = (int32_t)(w / per_seq), rest = (int32_t)(w % per_seq);
        if (r->seq_off[q + 1] == r->seq_off[q]) { /* a sequence without tokens here */
            rlx_cpu_done(r, &y->done[1], 1, y->units[1], nth);
            continue;
        }
        it->hk = rest / n_sub;
        const size_t c = (size_t)it->hk * (size_t)it->hd * it->esz;
        it->hoff = it->nocache ? c : it->q8 ? 0 : rlx__cpu_kv_at(0, c, (size_t)r->kv->block_size, it->rb, it->hb);
        it->h0 = it->hk * group + (rest % n_sub) * gs;
        it->gs = RLX_MIN(gs, it->hk * group + group - it->h0);
        it->toks = r->seq_tok + r->seq_off[q];
        it->nt = r->seq_off[q + 1] - r->seq_off[q];
        it->seq = q;
        const rlx_batch *bt = r->batch;
        const rlx_batch_seq *bs = &bt->seqs[q];
        const int32_t B = r->kv->block_size;
        it->jmin = INT64_MAX;
        it->jmax = -1;
        it->range_ok = true;
        it->base = it->toks[0];
        for (int ti = 0; ti < it->nt && it->range_ok; ti++) {
            const int32_t p = bt->pos[it->toks[ti]];
            const int64_t l = it->window > 0 && p - it->window + 1 > 0 ? p - it->window + 1 : 0;
            /* without a cache the sequence must be whole, contiguous and in position order */
            it->range_ok = it->nocache ? p == ti && it->toks[ti] == it->base + ti : p >= 0 && p / B < bs->n_blocks;
            it->jmin = l < it->jmin ? l : it->jmin;
            it->jmax = p > it->jmax ? p : it->jmax;
        }
        return true;
    }
}

void rlx_cpu_attention(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_node *n = &s->node;
    const rlx_batch *bt = r->batch;
    const rlx_attn_params *ap = &n->p.attn;
    const int layer = ap->layer, n_head = ap->n_head, n_head_kv = ap->n_head_kv, hd = ap->head_dim;
    const bool nocache = rlx_mem_desc_layer(r->kv, layer).kind == RLX_MEM_NONE;
    const int64_t kvc = nocache ? (int64_t)n_head_kv * hd : rlx_mem_desc_layer(r->kv, layer).kv_cols, T = bt->n_tokens;
    const bool f16 = !nocache && r->kv->type == RLX_F16, q8 = !nocache && r->kv->type == RLX_Q8_0;
    const size_t esz = f16 ? 2 : 4, rb = nocache ? (size_t)kvc * 4 : rlx_kv_row_bytes(r->kv->type, kvc);
    const size_t hb = nocache ? rb : r->kv_hb[layer], B = (size_t)r->kv->block_size;
    /* a head's slice must lie inside one piece of the layout (cpu_mem_init sized the pieces
     * from the plan's head_dim) */
    if (!nocache && !q8 && hb != rb && hb % ((size_t)hd * esz)) atomic_store(&r->error, RLX_EINVAL);
    uint8_t *K = nocache ? (uint8_t *)rowp(r, n->in[1], 0) : r->kv_mem + r->kv_off[2 * layer];
    uint8_t *V = nocache ? (uint8_t *)rowp(r, n->in[2], 0) : r->kv_mem + r->kv_off[2 * layer + 1];
    int64_t a, b;

    /* phase 0: store this batch's K and V, chunks of tokens (a layer without a cache reads them
     * in place: no units) */
    rlx_cpu_sync *y = &r->sync[s - r->plan->steps];
    const unsigned n0 = y->units[0];
    for (int64_t ch; (ch = rlx_cpu_claim(&y->next[0], 1, nth)) < n0;) {
        split(T, (int)ch, (int)n0, &a, &b);
        for (int64_t t = a; t < b; t++) {
            const rlx_batch_seq *bs = &bt->seqs[bt->seq[t]];
            if (bt->pos[t] < 0 || bt->pos[t] / r->kv->block_size >= bs->n_blocks) { atomic_store(&r->error, RLX_ERANGE); continue; }
            const size_t slot = kv_slot(r, bt->seq[t], bt->pos[t]);
            const float *k = rowp(r, n->in[1], t), *v = rowp(r, n->in[2], t);
            if (q8) {
                /* the layout's reference quantizer (backends/backend.h); whole rows (hb = rb) */
                rlx_quantize_row(RLX_Q8_0, k, K + rlx__cpu_kv_at(slot, 0, B, rb, hb), kvc);
                rlx_quantize_row(RLX_Q8_0, v, V + rlx__cpu_kv_at(slot, 0, B, rb, hb), kvc);
                continue;
            }
            for (size_t c = 0; c < rb; c += hb) { /* a head at a time */
                const size_t at = rlx__cpu_kv_at(slot, c, B, rb, hb), n0 = c / esz, nv = hb / esz;
                if (f16) {
                    uint16_t *kd = (uint16_t *)(K + at), *vd = (uint16_t *)(V + at);
                    for (size_t i = 0; i < nv; i++) { kd[i] = rlx_f32_to_f16(k[n0 + i]); vd[i] = rlx_f32_to_f16(v[n0 + i]); }
                } else {
                    memcpy(K + at, k + n0, hb);
                    memcpy(V + at, v + n0, hb);
                }
            }
        }
        rlx_cpu_done(r, &y->done[0], 1, n0, nth);
    }
    rlx_threadpool_wait(r->tp, &y->done[0], n0);
    if (atomic_load(&r->error)) { /* nothing to compute; the units still complete */
        while (rlx_cpu_claim(&y->next[1], 1, nth) < (int64_t)y->units[1])
            rlx_cpu_done(r, &y->done[1], 1, y->units[1], nth);
        return;
    }

    /* phase 1: items (sequence, KV head, head sub-group) claimed in turn */
    const int group = n_head / n_head_kv, gs = group < ATTN_ROWS ? group : ATTN_ROWS;
    const int n_sub = (group + gs - 1) / gs;
    const int64_t per_seq = (int64_t)n_head_kv * n_sub, items = (int64_t)bt->n_seqs * per_seq;
    attn_item it = {.r = r, .s = s, .K = K, .V = V, .type = f16 ? RLX_F16 : RLX_F32, .q8 = q8, .esz = esz, .rb = rb, .hb = hb, .kvc = kvc, .hd = hd,
                    .window = ap->window, .bidir = ap->mask == RLX_ATTN_BIDIRECTIONAL, .nocache = nocache, .qt = ATTN_ROWS / gs, .scratch = r->attn_scratch + (size_t)ith * r->attn_scratch_floats,
                    .npad_max = r->attn_scratch_stride, .softmax = softmax_kernel()};
#if defined(__x86_64__)
    if (it.softmax == sm_avx512) {
        it.kqv_dec = rlx__kqv_dec512;
        it.kq_dec = rlx__kq_dec512;
    }
    if (it.softmax == sm_avx2) {
        it.kqv_dec = rlx__kqv_dec256;
        it.kq_dec = rlx__kq_dec256;
    }
#endif
    if (kq_lanes_on) it.kq = kq_kernel(it.softmax);
    attn_item cur = it, ahead = it;
    bool have = claim_item(r, y, nth, items, per_seq, n_sub, group, gs, &cur);
    while (have) {
        const bool more = claim_item(r, y, nth, items, per_seq, n_sub, group, gs, &ahead);
        if (more) prefetch_kv(&ahead, true, 0);
        int e = run_item(&cur);
        if (e) atomic_store(&r->error, e);
        rlx_cpu_done(r, &y->done[1], 1, y->units[1], nth);
        cur = ahead;
        have = more;
    }
}

void rlx_cpu_attention_units(const rlx_cpu_run *r, const rlx_step *s, int nth, unsigned units[2])
{
    const rlx_attn_params *ap = &s->node.p.attn;
    const int group = ap->n_head / ap->n_head_kv, gs = group < ATTN_ROWS ? group : ATTN_ROWS;
    const int n_sub = (group + gs - 1) / gs;
    const bool nocache = rlx_mem_desc_layer(r->kv, ap->layer).kind == RLX_MEM_NONE;
    units[0] = nocache ? 0 : rlx_cpu_row_chunks(r->batch->n_tokens, nth);
    units[1] = (unsigned)((int64_t)r->batch->n_seqs * ap->n_head_kv * n_sub);
}
