/* cpu_ops.c - the CPU backend's kernels, one per step kind, plus the fused elementwise
 * epilogue. Arithmetic follows ggml's CPU path (float rows, double accumulation in norms and
 * softmax sums, K/Q and P/V products at the KV cache's precision) so logits agree with
 * llama.cpp's within its stated tolerances. */
#include "backends/cpu/cpu_ops.h"
#include "backends/quant.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

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

static rlx_ew_op head_ew(rlx_op op)
{
    switch (op) {
    case RLX_OP_ADD: return RLX_EW_ADD;
    case RLX_OP_MUL: return RLX_EW_MUL;
    case RLX_OP_SILU: return RLX_EW_SILU;
    case RLX_OP_GELU: return RLX_EW_GELU;
    case RLX_OP_SCALE: return RLX_EW_SCALE;
    default: return RLX_EW_SOFTCAP;
    }
}

static void k_elementwise(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    int64_t T = n_rows(r, s->out), a, b;
    int64_t cols = r->plan->graph->tensors[s->out].cols;
    split(T, ith, nth, &a, &b);
    rlx_ew head = {head_ew(s->node.op), (s->node.op == RLX_OP_ADD || s->node.op == RLX_OP_MUL) ? s->node.in[1] : -1, s->node.fp[0]};
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

static void k_matmul(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_graph *g = r->plan->graph;
    const rlx_gtensor *w = &g->tensors[s->node.in[1]];
    int x = s->node.in[0];
    int64_t T = n_rows(r, x), K = w->ne[0], N = w->ne[1], a, b;
    int vt = rlx_vec_dot_type(w->wtype);
    size_t arb = rlx_row_bytes(vt, K);
    const void *act;
    if (vt == RLX_F32 && w->wtype == RLX_F32) {
        act = rowp(r, x, 0);
    } else if (vt == RLX_F32) {
        /* ggml multiplies F16/BF16 weights with activations rounded to the weight's type;
         * do the same (kept as f32 values) so logits agree with llama.cpp */
        split(T, ith, nth, &a, &b);
        for (int64_t t = a; t < b; t++) {
            const float *src = rowp(r, x, t);
            float *dst = (float *)(r->scratch + (size_t)t * arb);
            if (w->wtype == RLX_F16)
                for (int64_t k = 0; k < K; k++) dst[k] = rlx_f16_to_f32(rlx_f32_to_f16(src[k]));
            else
                for (int64_t k = 0; k < K; k++) dst[k] = rlx_bf16_to_f32(rlx_f32_to_bf16(src[k]));
        }
        rlx_threadpool_barrier(r->tp);
        act = r->scratch;
    } else {
        split(T, ith, nth, &a, &b);
        for (int64_t t = a; t < b; t++) rlx_quantize_row(vt, rowp(r, x, t), r->scratch + (size_t)t * arb, K);
        rlx_threadpool_barrier(r->tp);
        act = r->scratch;
    }
    /* split output rows in multiples of 16 so SIMD tiles stay whole */
    int64_t chunks = (N + 15) / 16;
    split(chunks, ith, nth, &a, &b);
    int64_t n0 = a * 16, n1 = RLX_MIN(b * 16, N);
    if (n0 >= n1) return;
    float *out = rowp(r, s->out, 0);
    rlx_matmul_rows(w->wtype, w->data, n0, n1, act, arb, T, K, out, N);
    if (s->n_chain)
        for (int64_t t = 0; t < T; t++) apply_chain(r, s, out + t * N, t, n0, n1);
}

/* ---- rope ------------------------------------------------------------------------------- */

static void k_rope(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_node *n = &s->node;
    int64_t T = r->batch->n_tokens, a, b;
    int n_heads = n->ip[0], hd = n->ip[1], n_rot = n->ip[2], mode = n->ip[3];
    float base = n->fp[0], freq_scale = n->fp[1] != 0.0f ? n->fp[1] : 1.0f;
    const float *ff = n->in[1] >= 0 ? operand_row(r, n->in[1], 0) : NULL;
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float cs[512], sn[512]; /* n_rot <= 1024 is checked by the builder */
    split(T, ith, nth, &a, &b);
    for (int64_t t = a; t < b; t++) {
        float theta = (float)r->batch->pos[t];
        for (int i = 0; i < n_rot / 2; i++) {
            float th = freq_scale * (ff ? theta / ff[i] : theta);
            cs[i] = cosf(th);
            sn[i] = sinf(th);
            theta *= theta_scale;
        }
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

static void k_attention(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_node *n = &s->node;
    const rlx_batch *bt = r->batch;
    int layer = n->ip[0], n_head = n->ip[1], n_head_kv = n->ip[2], hd = n->ip[3], window = n->ip[4];
    float scale = n->fp[0], cap = n->fp[1];
    int64_t kvc = r->kv->kv_cols, T = bt->n_tokens, a, b;
    bool f16 = r->kv->type == RLX_F16;
    size_t esz = f16 ? 2 : 4;
    uint8_t *K = r->kv_k + (size_t)layer * r->kv_layer_bytes, *V = r->kv_v + (size_t)layer * r->kv_layer_bytes;

    /* phase 1: store this batch's K and V */
    split(T, ith, nth, &a, &b);
    for (int64_t t = a; t < b; t++) {
        const rlx_batch_seq *bs = &bt->seqs[bt->seq[t]];
        if (bt->pos[t] < 0 || bt->pos[t] / r->kv->block_size >= bs->n_blocks) { atomic_store(&r->error, RLX_ERANGE); continue; }
        size_t slot = kv_slot(r, bt->seq[t], bt->pos[t]);
        const float *k = rowp(r, n->in[1], t), *v = rowp(r, n->in[2], t);
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

    /* phase 2: one (token, head) pair at a time */
    int group = n_head / n_head_kv;
    float *sc = r->attn_scratch + (size_t)ith * r->attn_scratch_stride;
    float qbuf[1024], acc[1024]; /* head_dim <= 1024 is checked by the builder */
    split(T * n_head, ith, nth, &a, &b);
    for (int64_t w = a; w < b; w++) {
        int64_t t = w / n_head;
        int h = (int)(w % n_head), hk = h / group;
        int32_t p = bt->pos[t], seq = bt->seq[t];
        int32_t j0 = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
        const float *q = rowp(r, n->in[0], t) + (int64_t)h * hd;
        for (int i = 0; i < hd; i++) qbuf[i] = f16 ? rlx_f16_to_f32(rlx_f32_to_f16(q[i])) : q[i];
        float mx = -INFINITY;
        for (int32_t j = j0; j <= p; j++) {
            size_t slot = kv_slot(r, seq, j);
            float d = 0.0f;
            if (f16) {
                const uint16_t *k = (const uint16_t *)(K + (slot * kvc + (size_t)hk * hd) * esz);
                for (int i = 0; i < hd; i++) d += qbuf[i] * rlx_f16_to_f32(k[i]);
            } else {
                const float *k = (const float *)(K + (slot * kvc + (size_t)hk * hd) * esz);
                for (int i = 0; i < hd; i++) d += qbuf[i] * k[i];
            }
            if (cap > 0.0f) d = softcap(d, cap);
            d *= scale;
            sc[j - j0] = d;
            if (d > mx) mx = d;
        }
        double sum = 0.0;
        for (int32_t j = j0; j <= p; j++) {
            float e = expf(sc[j - j0] - mx);
            sc[j - j0] = e;
            sum += (double)e;
        }
        const float inv = (float)(1.0 / sum);
        for (int i = 0; i < hd; i++) acc[i] = 0.0f;
        for (int32_t j = j0; j <= p; j++) {
            size_t slot = kv_slot(r, seq, j);
            float pj = sc[j - j0] * inv;
            if (f16) {
                pj = rlx_f16_to_f32(rlx_f32_to_f16(pj));
                const uint16_t *v = (const uint16_t *)(V + (slot * kvc + (size_t)hk * hd) * esz);
                for (int i = 0; i < hd; i++) acc[i] += pj * rlx_f16_to_f32(v[i]);
            } else {
                const float *v = (const float *)(V + (slot * kvc + (size_t)hk * hd) * esz);
                for (int i = 0; i < hd; i++) acc[i] += pj * v[i];
            }
        }
        float *y = rowp(r, s->out, t) + (int64_t)h * hd;
        memcpy(y, acc, (size_t)hd * 4);
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
