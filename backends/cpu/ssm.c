/* ssm.c - the CPU kernels of the recurrent ops of hybrid models (graph.h SSM_CONV, DELTA_NET):
 * a causal depthwise conv1d and the gated delta rule, each carrying its state between steps in
 * the sequence's slot of the layer (RLX_MEM_STATE; layout in graph.h, RLX_SSM_HEADER).
 *
 * A batch may hold several sequences, each with any number of consecutive positions: every
 * token is one step of the recurrence in position order, so N tokens in one batch give exactly
 * what N one-token steps give (the sums never depend on the batch). The slot's header holds the
 * position the sequence computes next; SSM_CONV refuses a batch that does not continue there
 * (RLX_ERANGE, no state written), and DELTA_NET, which follows it in the layer (the op table's
 * validation requires one), advances it.
 *
 * Work splits so that no two threads write the same state: SSM_CONV by channel, DELTA_NET by
 * (sequence, value head). Called by every thread of the pool (cpu_ops.c rlx_cpu_step). */
#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/kernels.h"
#include "backends/quant.h"

#include <stdatomic.h>
#include <string.h>

#define SSM_MAX_KERNEL 64
#define SSM_CONV_BLOCK 256 /* channels per block of transposed weights */
#define DELTA_MAX_HEAD 512

/* The state slot of sequence q for `layer`, NULL (error raised) when the batch names none. */
static float *slot_of(rlx_cpu_run *r, int32_t layer, int32_t q)
{
    const rlx_mem_desc *d = r->kv;
    const int32_t slot = r->batch->seqs[q].state_slot;
    if (!r->state_mem || layer < 0 || layer >= d->n_layers || slot < 0 || slot >= d->n_state_slots) {
        atomic_store(&r->error, RLX_ERANGE);
        return NULL;
    }
    const rlx_mem_layer m = rlx_mem_desc_layer(d, layer);
    if (m.kind != RLX_MEM_STATE) {
        atomic_store(&r->error, RLX_ERANGE);
        return NULL;
    }
    return (float *)(r->state_mem + r->state_off[layer] + (size_t)slot * (size_t)m.state_bytes);
}

static int32_t next_pos(const float *st)
{
    int32_t p;
    memcpy(&p, st, sizeof p);
    return p;
}

void rlx_cpu_ssm_conv(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_ssm_conv_params *p = &s->node.p.conv;
    const rlx_graph *g = r->plan->graph;
    const int32_t K = p->kernel, C = p->channels;
    const float *w = (const float *)g->tensors[s->node.in[1]].data;
    const int32_t *pos = r->batch->pos;
    int64_t c0, c1;
    split(C, ith, nth, &c0, &c1);
    if (K > SSM_MAX_KERNEL) { atomic_store(&r->error, RLX_EUNSUPPORTED); return; }
    /* Nothing is written when the step already failed or the batch does not continue every
     * sequence where its state stands, one position per token: every thread reaches the same
     * verdict from the same data, and DELTA_NET then skips too, so a refused batch leaves every
     * state as it was. */
    if (atomic_load(&r->error)) return;
    for (int32_t q = 0; q < r->batch->n_seqs; q++) {
        const int32_t lo = r->seq_off[q], hi = r->seq_off[q + 1];
        if (lo == hi) continue;
        const float *st = slot_of(r, p->layer, q);
        bool ok = st && pos[r->seq_tok[lo]] == next_pos(st);
        for (int32_t i = lo + 1; i < hi && ok; i++) ok = pos[r->seq_tok[i]] == pos[r->seq_tok[i - 1]] + 1;
        if (!ok) { atomic_store(&r->error, RLX_ERANGE); return; }
    }
    /* Per output: sum = 0, then sum += x[j] w[j] for j = 0..K-1 (oldest input first), each
     * product and sum rounded on its own (this file is ISO C, so nothing contracts to an FMA).
     * Every token runs along the channels (vectorisable loops against the weights transposed per
     * block of channels); the first K - 1 tokens of a sequence read part of their inputs from the
     * carried state (channel-major, K - 1 values per channel). */
    float wt[SSM_MAX_KERNEL][SSM_CONV_BLOCK];
    for (int64_t b0 = c0; b0 < c1; b0 += SSM_CONV_BLOCK) {
        const int64_t nb = RLX_MIN((int64_t)SSM_CONV_BLOCK, c1 - b0);
        for (int32_t j = 0; j < K; j++)
            for (int64_t cc = 0; cc < nb; cc++) wt[j][cc] = w[(b0 + cc) * K + j];
        for (int32_t q = 0; q < r->batch->n_seqs; q++) {
            const int32_t lo = r->seq_off[q], hi = r->seq_off[q + 1];
            if (lo == hi) continue;
            float *st = slot_of(r, p->layer, q);
            const int32_t n = hi - lo;
            float *cs = st + p->conv_off + b0 * (K - 1); /* channel c's K - 1 values at (c - b0) * (K - 1) */
            /* every token: inputs at (carried state, this batch's inputs)[i .. i + K - 1] */
            for (int32_t i = 0; i < n; i++) {
                float acc[SSM_CONV_BLOCK];
                for (int64_t cc = 0; cc < nb; cc++) acc[cc] = 0.0f;
                for (int32_t j = 0; j < K; j++) {
                    const int32_t at = i + j;
                    if (at < K - 1) {
                        for (int64_t cc = 0; cc < nb; cc++) acc[cc] += cs[cc * (K - 1) + at] * wt[j][cc];
                    } else {
                        const float *x = rowp(r, s->node.in[0], r->seq_tok[lo + at - (K - 1)]) + b0;
                        for (int64_t cc = 0; cc < nb; cc++) acc[cc] += x[cc] * wt[j][cc];
                    }
                }
                memcpy(rowp(r, s->out, r->seq_tok[lo + i]) + b0, acc, (size_t)nb * sizeof(float));
            }
            /* then the new state: the last K - 1 of those inputs; slot m reads slot n + m > m of
             * the old state, not yet overwritten (out never aliases in[0]: the op is not in place) */
            for (int32_t m = 0; m < K - 1; m++) {
                const int32_t at = n + m;
                if (at < K - 1) {
                    for (int64_t cc = 0; cc < nb; cc++) cs[cc * (K - 1) + m] = cs[cc * (K - 1) + at];
                } else {
                    const float *x = rowp(r, s->node.in[0], r->seq_tok[lo + at - (K - 1)]) + b0;
                    for (int64_t cc = 0; cc < nb; cc++) cs[cc * (K - 1) + m] = x[cc];
                }
            }
        }
    }
    if (s->n_chain && c0 < c1)
        for (int32_t q = 0; q < r->batch->n_seqs; q++)
            for (int32_t i = r->seq_off[q]; i < r->seq_off[q + 1]; i++) {
                const int32_t t = r->seq_tok[i];
                rlx_cpu_apply_chain(r, s, rowp(r, s->out, t), t, c0, c1, C);
            }
}

/* x * 1 / max(||x||, eps), the sum of squares in double as ggml_l2_norm */
static void l2_norm(const float *x, float *y, int32_t n, float eps, float scale)
{
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float k = 1.0f / fmaxf(sqrtf((float)sum), eps);
    for (int32_t i = 0; i < n; i++) y[i] = x[i] * k * scale;
}

/* One token of one value head: S = decay S, d = beta (v - S^T k), S += k d^T, o = S^T q. The
 * loops run along the value dim (contiguous rows of S), written for the vectorizer; the body is
 * compiled for each kernel family (the same family for the whole process, so results never
 * depend on the batch). */
#define DELTA_STEP_BODY                                                                                 \
    for (int32_t v = 0; v < dv; v++) d[v] = 0.0f;                                                      \
    for (int32_t k = 0; k < dk; k++) {                                                                 \
        float *restrict row = S + (int64_t)k * dv;                                                     \
        const float kk = kn[k];                                                                        \
        for (int32_t v = 0; v < dv; v++) {                                                             \
            row[v] *= decay;                                                                           \
            d[v] += row[v] * kk;                                                                       \
        }                                                                                              \
    }                                                                                                  \
    for (int32_t v = 0; v < dv; v++) d[v] = beta * (vv[v] - d[v]);                                     \
    for (int32_t v = 0; v < dv; v++) o[v] = 0.0f;                                                      \
    for (int32_t k = 0; k < dk; k++) {                                                                 \
        float *restrict row = S + (int64_t)k * dv;                                                     \
        const float kk = kn[k], qq = qn[k];                                                            \
        for (int32_t v = 0; v < dv; v++) {                                                             \
            row[v] += kk * d[v];                                                                       \
            o[v] += row[v] * qq;                                                                       \
        }                                                                                              \
    }

#define DELTA_STEP_ARGS                                                                                 \
    float *restrict S, const float *restrict kn, const float *restrict qn, const float *restrict vv, float decay, \
        float beta, float *restrict d, float *restrict o, int32_t dk, int32_t dv

static void delta_step(DELTA_STEP_ARGS) { DELTA_STEP_BODY }
#if defined(__x86_64__)
__attribute__((target("avx2"))) static void delta_step_avx2(DELTA_STEP_ARGS) { DELTA_STEP_BODY }
__attribute__((target("avx512f"))) static void delta_step_avx512(DELTA_STEP_ARGS) { DELTA_STEP_BODY }
#endif

void rlx_cpu_delta_net(rlx_cpu_run *r, const rlx_step *s, int ith, int nth)
{
    const rlx_delta_params *p = &s->node.p.delta;
    const int32_t nk = p->n_k_heads, nv = p->n_v_heads, dk = p->head_k, dv = p->head_v;
    if (dk > DELTA_MAX_HEAD || dv > DELTA_MAX_HEAD) { atomic_store(&r->error, RLX_EUNSUPPORTED); return; }
    /* the layer's SSM_CONV refused the batch (or an earlier step failed): leave the states */
    if (atomic_load(&r->error)) return;
    void (*step)(DELTA_STEP_ARGS) = delta_step;
#if defined(__x86_64__)
    const int width = rlx__cpu_width();
    if (width == 512) step = delta_step_avx512;
    else if (width == 256) step = delta_step_avx2;
#endif
    int64_t a, b;
    split((int64_t)r->batch->n_seqs * nv, ith, nth, &a, &b);
    for (int64_t item = a; item < b; item++) {
        const int32_t q = (int32_t)(item / nv), j = (int32_t)(item % nv), kh = j % nk;
        const int32_t lo = r->seq_off[q], hi = r->seq_off[q + 1];
        if (lo == hi) continue;
        float *st = slot_of(r, p->layer, q);
        if (!st) continue;
        float *S = st + p->state_off + (int64_t)j * dk * dv; /* S[i * dv + v], i over the key dim */
        float qn[DELTA_MAX_HEAD], kn[DELTA_MAX_HEAD], d[DELTA_MAX_HEAD];
        for (int32_t i = lo; i < hi; i++) {
            const int32_t t = r->seq_tok[i];
            const float *x = rowp(r, s->node.in[0], t);
            const float *vv = x + 2 * (int64_t)nk * dk + (int64_t)j * dv;
            const float decay = expf(rowp(r, s->node.in[1], t)[j]), beta = rowp(r, s->node.in[2], t)[j];
            float *o = rowp(r, s->out, t) + (int64_t)j * dv;
            l2_norm(x + (int64_t)kh * dk, qn, dk, p->eps, p->scale);
            l2_norm(x + (int64_t)(nk + kh) * dk, kn, dk, p->eps, 1.0f);
            step(S, kn, qn, vv, decay, beta, d, o, dk, dv);
        }
        if (j == 0) {
            const int32_t next = r->batch->pos[r->seq_tok[hi - 1]] + 1;
            memcpy(st, &next, sizeof next);
        }
    }
}
