/* cpu_attn.c - attention over the paged KV cache with llama.cpp's CPU arithmetic (no flash
 * attention): scores q.k, ggml_soft_max_ext, then p.v, each with ggml's float operations in its
 * order, so attention outputs are bit-identical to llama.cpp's.
 *
 * llama.cpp computes the two products with ggml_vec_dot_f16/f32 when the batch has one token
 * (decode) and with llamafile's tinyBLAS when it has more (prefill, where shapes allow), and the
 * two sum in different orders. We follow the same rule per sequence: tokens of a sequence with
 * two or more tokens in this step get the batched arithmetic, a lone token the decode
 * arithmetic. A sequence's results therefore never depend on the other sequences of a batch or
 * on the thread count, only on how its own tokens are split into steps, exactly as llama.cpp's
 * depend on its ubatch split. Cell c of llama.cpp's cache is position c of our sequence (a fresh
 * single-sequence cache fills cells in order); the sum orders below are keyed on it. */
#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "backends/quant_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#define ATTN_G RLX_CPU_ATTN_G

/* One (token, KV head, up to ATTN_G query heads of its group): scores of all G heads in one
 * pass over K, a softmax per head, then one pass over V. */
typedef struct attn_job {
    const rlx_cpu_run *r;
    const uint8_t *K, *V;
    bool f16, prefill;
    int64_t kvc;
    int hd, hk, G;
    int32_t seq, p, j0;
    const float *q;   /* G consecutive heads */
    float *y;
    float *sc;        /* G rows of `stride` scores, then probabilities */
    float *part;      /* head_dim x W K tile, then the p.v partial sums */
    size_t stride;
    float scale, cap;
} attn_job;

static inline size_t kv_slot(const rlx_cpu_run *r, int32_t seq, int32_t pos)
{
    const rlx_batch_seq *bs = &r->batch->seqs[seq];
    int32_t B = r->kv->block_size;
    return (size_t)bs->blocks[pos / B] * (size_t)B + (size_t)(pos % B);
}

static inline const uint8_t *attn_kv_row(const attn_job *j, const uint8_t *base, int32_t pos)
{
    const size_t esz = j->f16 ? 2 : 4;
    return base + (kv_slot(j->r, j->seq, pos) * (size_t)j->kvc + (size_t)j->hk * (size_t)j->hd) * esz;
}

static inline float attn_f16_round(float x) { return rlx_f16_to_f32(rlx_f32_to_f16(x)); }

/* The part of ggml_vec_dot past its last multiple of 64 (head): F16 sums in double; F32 as the
 * compiled loop does it, eight products at a time added in order, then fused multiply-adds. */
static float attn_dot_tail(const float *q, const float *kt, int stride, int np, int hd, bool f16, float head)
{
    if (f16) {
        double d = head;
        for (int i = np; i < hd; i++) d += (double)(q[i] * kt[(size_t)i * (size_t)stride]);
        return (float)d;
    }
    const int m8 = np + ((hd - np) & ~7);
    float s = head;
    for (int i = np; i < m8; i++) s = s + q[i] * kt[(size_t)i * (size_t)stride];
    for (int i = m8; i < hd; i++) s = fmaf(q[i], kt[(size_t)i * (size_t)stride], s);
    return s;
}

/* 1 / sum of exp(s - max) as ggml_vec_soft_max_f32 over llama.cpp's 256-cell padded row: sums
 * of sixteen cells (masked ones are 0) in the reduction order, accumulated in double. */
static float attn_softmax_inv(const attn_job *j, const float *e)
{
    double sum = 0;
    for (int32_t c = j->j0 & ~15; c <= j->p; c += 16) {
        float v[16];
        for (int l = 0; l < 16; l++) {
            const int32_t pos = c + l;
            v[l] = pos >= j->j0 && pos <= j->p ? e[pos - j->j0] : 0.0f;
        }
        sum += (double)rlx__red16(v);
    }
    return (float)(1.0 / sum);
}

/* The final reduction of p.v for one output element: a[l * hd] is lane l's partial sum. */
static float attn_reduce_lanes(const float *a, int hd, bool tile)
{
    float x[16];
    for (int l = 0; l < 16; l++)
        x[l] = tile ? a[(size_t)l * (size_t)hd]
                    : (a[(size_t)l * (size_t)hd] + a[(size_t)(32 + l) * (size_t)hd]) +
                          (a[(size_t)(16 + l) * (size_t)hd] + a[(size_t)(48 + l) * (size_t)hd]);
    return rlx__red16(x);
}

static void cvt16_scalar(float *dst, const uint16_t *src, int n)
{
    for (int i = 0; i < n; i++) dst[i] = rlx_f16_to_f32(src[i]);
}

/* ---- the scalar path ---- */
#define KA(name) name##_scalar
#define KA_ATTR
#define VF float
#define W 1
#define VLD(p) (*(p))
#define VST(p, v) (*(p) = (v))
#define VSET1(x) (x)
#define VZERO() 0.0f
#define VADD(a, b) ((a) + (b))
#define VSUB(a, b) ((a) - (b))
#define VFMA(a, b, c) fmaf((a), (b), (c))
#define VEXP(x) rlx__vexp(x)
#define KA_CVT16 cvt16_scalar
#include "backends/cpu/cpu_attn_kern.h"
#undef KA
#undef KA_ATTR
#undef VF
#undef W
#undef VLD
#undef VST
#undef VSET1
#undef VZERO
#undef VADD
#undef VSUB
#undef VFMA
#undef VEXP
#undef KA_CVT16

#if defined(__x86_64__)
__attribute__((target("avx2,fma,f16c"))) static void cvt16_256(float *dst, const uint16_t *src, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = rlx_f16_to_f32(src[i]);
}

#define KA(name) name##_avx2
#define KA_ATTR __attribute__((target("avx2,fma,f16c")))
#define VF __m256
#define W 8
#define VLD(p) _mm256_loadu_ps(p)
#define VST(p, v) _mm256_storeu_ps((p), (v))
#define VSET1(x) _mm256_set1_ps(x)
#define VZERO() _mm256_setzero_ps()
#define VADD(a, b) _mm256_add_ps((a), (b))
#define VSUB(a, b) _mm256_sub_ps((a), (b))
#define VFMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define VEXP(x) rlx__vexp256(x)
#define KA_CVT16 cvt16_256
#include "backends/cpu/cpu_attn_kern.h"
#undef KA
#undef KA_ATTR
#undef VF
#undef W
#undef VLD
#undef VST
#undef VSET1
#undef VZERO
#undef VADD
#undef VSUB
#undef VFMA
#undef VEXP
#undef KA_CVT16

__attribute__((target("avx512f,f16c"))) static void cvt16_512(float *dst, const uint16_t *src, int n)
{
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    for (; i < n; i++) dst[i] = rlx_f16_to_f32(src[i]);
}

#define KA(name) name##_avx512
#define KA_ATTR __attribute__((target("avx512f,avx2,fma,f16c")))
#define VF __m512
#define W 16
#define VLD(p) _mm512_loadu_ps(p)
#define VST(p, v) _mm512_storeu_ps((p), (v))
#define VSET1(x) _mm512_set1_ps(x)
#define VZERO() _mm512_setzero_ps()
#define VADD(a, b) _mm512_add_ps((a), (b))
#define VSUB(a, b) _mm512_sub_ps((a), (b))
#define VFMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define VEXP(x) rlx__vexp512(x)
#define KA_CVT16 cvt16_512
#include "backends/cpu/cpu_attn_kern.h"
#undef KA
#undef KA_ATTR
#undef VF
#undef W
#undef VLD
#undef VST
#undef VSET1
#undef VZERO
#undef VADD
#undef VSUB
#undef VFMA
#undef VEXP
#undef KA_CVT16
#endif

typedef void (*attn_fn)(const attn_job *j);

/* follows the matmul kernels' path, so RLX_CPU_PATH / rlx_cpu_force_path test every variant */
static attn_fn attn_kernel(void)
{
#if defined(__x86_64__)
    const char *path = rlx_cpu_path();
    if (!strncmp(path, "avx512", 6)) return attn_avx512;
    if (!strncmp(path, "avx2", 4)) return attn_avx2;
#endif
    return attn_scalar;
}

/* True when token t is the only one of its sequence in the batch (a decode step). */
static bool alone_in_batch(const rlx_batch *b, int64_t t)
{
    const int32_t s = b->seq[t];
    if ((t > 0 && b->seq[t - 1] == s) || (t + 1 < b->n_tokens && b->seq[t + 1] == s)) return false;
    for (int64_t u = 0; u < b->n_tokens; u++)
        if (u != t && b->seq[u] == s) return false;
    return true;
}

static inline void split(int64_t n, int ith, int nth, int64_t *a, int64_t *b)
{
    *a = n * ith / nth;
    *b = n * (ith + 1) / nth;
}

void rlx__cpu_attention(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_node *n = &s->node;
    const rlx_batch *bt = r->batch;
    const rlx_graph *gr = r->plan->graph;
    int layer = n->ip[0], n_head = n->ip[1], n_head_kv = n->ip[2], hd = n->ip[3], window = n->ip[4];
    float scale = n->fp[0], cap = n->fp[1];
    int64_t kvc = r->kv->kv_cols, T = bt->n_tokens, a, b;
    bool f16 = r->kv->type == RLX_F16;
    size_t esz = f16 ? 2 : 4;
    uint8_t *K = r->kv_k + (size_t)layer * r->kv_layer_bytes, *V = r->kv_v + (size_t)layer * r->kv_layer_bytes;
#define ROW(t, i) ((float *)(r->arena + r->plan->offset[t]) + (i) * gr->tensors[t].cols)

    /* phase 1: store this batch's K and V */
    split(T, ith, nth, &a, &b);
    for (int64_t t = a; t < b; t++) {
        const rlx_batch_seq *bs = &bt->seqs[bt->seq[t]];
        if (bt->pos[t] < 0 || bt->pos[t] / r->kv->block_size >= bs->n_blocks) { atomic_store(&r->error, RLX_ERANGE); continue; }
        size_t slot = kv_slot(r, bt->seq[t], bt->pos[t]);
        const float *k = ROW(n->in[1], t), *v = ROW(n->in[2], t);
        if (f16) {
            uint16_t *kd = (uint16_t *)(K + slot * kvc * esz), *vd = (uint16_t *)(V + slot * kvc * esz);
            for (int64_t c = 0; c < kvc; c++) { kd[c] = rlx_f32_to_f16(k[c]); vd[c] = rlx_f32_to_f16(v[c]); }
        } else {
            memcpy(K + slot * kvc * esz, k, (size_t)kvc * 4);
            memcpy(V + slot * kvc * esz, v, (size_t)kvc * 4);
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
            .r = r, .K = K, .V = V, .f16 = f16, .prefill = !alone_in_batch(bt, t), .kvc = kvc, .hd = hd, .hk = hk,
            .G = RLX_MIN(ATTN_G, hk * group + group - h0), .seq = bt->seq[t], .p = p,
            .j0 = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0,
            .q = ROW(n->in[0], t) + (int64_t)h0 * hd, .y = ROW(s->out, t) + (int64_t)h0 * hd,
            .sc = sc, .part = sc + r->attn_scratch_stride * ATTN_G, .stride = r->attn_scratch_stride, .scale = scale, .cap = cap,
        };
        fn(&j);
    }
#undef ROW
}
