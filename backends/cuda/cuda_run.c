/* cuda_run.c - one forward step on the CUDA backend: batch validation and upload, then the
 * plan's steps as kernel launches on the backend's stream (see kernels.cu), the logits copied
 * back at the end. */
#include "backends/cuda/cu_internal.h"
#include "backends/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *tensor_ptr(cu_backend *be, int t)
{
    const rlx_gtensor *x = &be->plan->graph->tensors[t];
    return x->is_weight ? (float *)be->w_dev[t] : (float *)(be->arena + be->plan->offset[t]);
}

static int64_t rows_of(const cu_backend *be, const rlx_batch *b, int t)
{
    const rlx_gtensor *x = &be->plan->graph->tensors[t];
    if (x->is_weight || x->rows == RLX_ROWS_ONE) return 1;
    return x->rows == RLX_ROWS_TOKENS ? b->n_tokens : b->n_outputs;
}

/* chain entries e[0..n) as kernel arguments */
static rlx_cu_chain make_chain(cu_backend *be, const rlx_ew *e, int n)
{
    rlx_cu_chain ch;
    memset(&ch, 0, sizeof ch);
    ch.n = n;
    for (int k = 0; k < n; k++) {
        ch.op[k] = (int)e[k].op;
        ch.p[k] = e[k].p;
        if (e[k].op == RLX_EW_ADD || e[k].op == RLX_EW_MUL) {
            const rlx_gtensor *x = &be->plan->graph->tensors[e[k].operand];
            ch.operand[k] = tensor_ptr(be, e[k].operand);
            ch.stride[k] = (x->is_weight || x->rows == RLX_ROWS_ONE) ? 0 : x->cols;
        }
    }
    return ch;
}

static int validate(const cu_backend *be, const rlx_plan *plan, const rlx_batch *b, rlx_error *err)
{
    if (!be->kv_k) return rlx_errorf(err, RLX_EINVAL, "KV cache not initialised");
    if (plan != be->plan) return rlx_errorf(err, RLX_EINVAL, "plan was not prepared on this backend");
    return rlx_batch_validate(b, plan, &be->kv, be->min_vocab, err);
}

/* Words: tokens[T] pos[T] seq[T] out_index[O] table_start[S] tables... rope tables. */
static int upload_batch(cu_backend *be, const rlx_batch *b, rlx_cu_batch *cb, rlx_error *err)
{
    const rlx_graph *g = be->plan->graph;
    size_t T = (size_t)b->n_tokens, O = (size_t)b->n_outputs, S = (size_t)b->n_seqs, words = 3 * T + O + S;
    for (size_t s = 0; s < S; s++) words += (size_t)b->seqs[s].n_blocks;
    size_t rope0 = words;
    for (int r = 0; r < be->n_ropes; r++) words += T * (size_t)be->ropes[r].n_rot;
    if (words > be->batch_cap) {
        int rc = rlx__cu_check(cudaStreamSynchronize(be->stream), "cudaStreamSynchronize", err);
        if (rc) return rc;
        free(be->h_batch);
        cudaFree(be->d_batch);
        be->d_batch = NULL;
        be->batch_cap = words * 2;
        be->h_batch = malloc(be->batch_cap * 4);
        if (!be->h_batch) { be->batch_cap = 0; return rlx_errorf(err, RLX_ENOMEM, "out of memory"); }
        if ((rc = rlx__cu_check(cudaMalloc((void **)&be->d_batch, be->batch_cap * 4), "cudaMalloc (batch)", err))) {
            be->batch_cap = 0;
            return rc;
        }
    }
    int32_t *w = be->h_batch;
    *cb = (rlx_cu_batch){be->d_batch, b->n_tokens, b->n_outputs, 0, (int32_t)T, (int32_t)(2 * T), (int32_t)(3 * T),
                         (int32_t)(3 * T + O)};
    memcpy(w, b->tokens, T * 4);
    memcpy(w + T, b->pos, T * 4);
    memcpy(w + 2 * T, b->seq, T * 4);
    size_t o = 0, at = 3 * T + O + S;
    for (size_t i = 0; i < T; i++) if (b->output[i]) w[3 * T + o++] = (int32_t)i;
    for (size_t s = 0; s < S; s++) {
        w[3 * T + O + s] = (int32_t)at;
        memcpy(w + at, b->seqs[s].blocks, (size_t)b->seqs[s].n_blocks * 4);
        at += (size_t)b->seqs[s].n_blocks;
    }
    at = rope0;
    for (int r = 0; r < be->n_ropes; r++) { /* the CPU backend's expressions, so angles agree exactly */
        cu_rope *rt = &be->ropes[r];
        rt->off = (int32_t)at;
        const float *ff = rt->ff >= 0 ? (const float *)g->tensors[rt->ff].data : NULL;
        for (size_t t = 0; t < T; t++, at += (size_t)rt->n_rot) {
            float *cs = (float *)(w + at);
            rlx_rope_angles(rt->base, rt->scale, ff, rt->n_rot, b->pos[t], cs, cs + rt->n_rot / 2);
        }
    }
    return rlx__cu_check(cudaMemcpyAsync(be->d_batch, w, words * 4, cudaMemcpyHostToDevice, be->stream), "cudaMemcpyAsync", err);
}

static int actq_mode(int wtype)
{
    switch (wtype) {
    case RLX_F16: return 1;
    case RLX_BF16: return 2;
    case RLX_Q8_0: case RLX_Q4_0: return 3;
    case RLX_Q4_K: case RLX_Q5_K: case RLX_Q6_K: return 4;
    default: return 0;
    }
}

static int run_matmul(cu_backend *be, const rlx_step *s, const rlx_batch *b, rlx_error *err)
{
    int xt = s->node.in[0], wt = s->node.in[1];
    const rlx_gtensor *w = &be->plan->graph->tensors[wt];
    int64_t K = w->ne[0], N = w->ne[1], T = rows_of(be, b, xt);
    int mode = actq_mode(w->wtype), e;
    const float *x = tensor_ptr(be, xt);
    float *y = tensor_ptr(be, s->out);
    if (mode) {
        if ((e = rlx_cu_actq(be->stream, mode, x, be->scratch, T, K))) return rlx__cu_check(e, "actq kernel", err);
        x = be->scratch;
    }
    size_t rb = rlx_row_bytes(w->wtype, K);
    if (T >= GEMM_MIN_TOKENS && be->deq && (size_t)K * (size_t)N * 4 <= be->deq_bytes) {
        const float *wf = (const float *)be->w_dev[wt];
        if (w->wtype != RLX_F32) {
            if ((e = rlx_cu_dequant(be->stream, w->wtype, be->w_dev[wt], rb, K, N, be->deq))) return rlx__cu_check(e, "dequant kernel", err);
            wf = be->deq;
        }
        const float one = 1.0f, zero = 0.0f;
        /* row-major Y[T][N] = X[T][K] * W[N][K]^T, i.e. column-major Y^T = W^T^T * X^T */
        if (cublasSgemm(be->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)T, (int)K, &one, wf, (int)K, x, (int)K, &zero, y,
                        (int)N) != CUBLAS_STATUS_SUCCESS)
            return rlx_errorf(err, RLX_EIO, "CUDA: cublasSgemm failed");
        if (s->n_chain && (e = rlx_cu_ew(be->stream, y, y, T, N, make_chain(be, s->chain, s->n_chain))))
            return rlx__cu_check(e, "epilogue kernel", err);
        return 0;
    }
    e = rlx_cu_matmul(be->stream, w->wtype, be->w_dev[wt], rb, K, N, x, T, y, N, make_chain(be, s->chain, s->n_chain));
    return rlx__cu_check(e, "matmul kernel", err);
}

static int run_step(cu_backend *be, const rlx_step *s, const rlx_batch *b, const rlx_cu_batch *cb, rlx_error *err)
{
    const rlx_graph *g = be->plan->graph;
    const rlx_node *n = &s->node;
    const rlx_gtensor *o = &g->tensors[s->out];
    float *y = tensor_ptr(be, s->out);
    int e = 0;
    switch (n->op) {
    case RLX_OP_GET_ROWS: {
        const rlx_gtensor *w = &g->tensors[n->in[0]];
        e = rlx_cu_get_rows(be->stream, w->wtype, be->w_dev[n->in[0]], rlx_row_bytes(w->wtype, w->ne[0]), w->ne[0], w->ne[1],
                            *cb, n->fp[0], y, make_chain(be, s->chain, s->n_chain));
        break;
    }
    case RLX_OP_RMS_NORM: case RLX_OP_HEAD_NORM: {
        bool head = n->op == RLX_OP_HEAD_NORM;
        e = rlx_cu_rms_norm(be->stream, tensor_ptr(be, n->in[0]), y, rows_of(be, b, s->out), o->cols, head ? n->ip[0] : o->cols,
                            n->fp[0], head ? tensor_ptr(be, n->in[1]) : NULL, make_chain(be, s->chain, s->n_chain));
        break;
    }
    case RLX_OP_MATMUL:
        return run_matmul(be, s, b, err);
    case RLX_OP_ROPE: {
        int32_t tab = -1;
        for (int r = 0; r < be->n_ropes; r++)
            if (be->ropes[r].n_rot == n->ip[2] && be->ropes[r].base == n->fp[0] && be->ropes[r].scale == n->fp[1] &&
                be->ropes[r].ff == n->in[1]) tab = be->ropes[r].off;
        if (tab < 0) return rlx_errorf(err, RLX_EINVAL, "CUDA: rope step was not prepared");
        e = rlx_cu_rope(be->stream, tensor_ptr(be, n->in[0]), y, *cb, n->ip[0], n->ip[1], n->ip[2], n->ip[3], tab);
        break;
    }
    case RLX_OP_ATTENTION: {
        int layer = n->ip[0], f16 = be->kv.type == RLX_F16;
        e = rlx_cu_kv_store(be->stream, tensor_ptr(be, n->in[1]), tensor_ptr(be, n->in[2]), be->kv_k[layer], be->kv_v[layer],
                            *cb, be->kv.kv_cols, f16, be->kv.block_size);
        if (!e)
            e = rlx_cu_attention(be->stream, tensor_ptr(be, n->in[0]), y, be->kv_k[layer], be->kv_v[layer], *cb, n->ip[1],
                                 n->ip[1] / n->ip[2], n->ip[3], be->kv.kv_cols, n->ip[4], n->fp[0], n->fp[1], f16, be->kv.block_size);
        break;
    }
    case RLX_OP_GATHER:
        e = rlx_cu_gather(be->stream, tensor_ptr(be, n->in[0]), y, *cb, o->cols);
        break;
    default: { /* elementwise: the head op is the chain's first entry */
        static const rlx_ew_op head[RLX_OP_COUNT] = {[RLX_OP_ADD] = RLX_EW_ADD, [RLX_OP_MUL] = RLX_EW_MUL,
            [RLX_OP_SILU] = RLX_EW_SILU, [RLX_OP_GELU] = RLX_EW_GELU, [RLX_OP_SCALE] = RLX_EW_SCALE, [RLX_OP_SOFTCAP] = RLX_EW_SOFTCAP};
        if (n->op < RLX_OP_ADD || n->op > RLX_OP_SOFTCAP) return rlx_errorf(err, RLX_EUNSUPPORTED, "CUDA: no kernel for step op %d", (int)n->op);
        rlx_ew all[RLX_MAX_CHAIN + 1];
        bool binary = n->op == RLX_OP_ADD || n->op == RLX_OP_MUL;
        all[0] = (rlx_ew){head[n->op], binary ? n->in[1] : -1, n->fp[0]};
        memcpy(all + 1, s->chain, (size_t)s->n_chain * sizeof *all);
        e = rlx_cu_ew(be->stream, tensor_ptr(be, n->in[0]), y, rows_of(be, b, s->out), o->cols, make_chain(be, all, s->n_chain + 1));
        break;
    }
    }
    return rlx__cu_check(e, "kernel launch", err);
}

int rlx__cu_run(cu_backend *be, const rlx_plan *plan, const rlx_batch *b, float *logits, rlx_error *err)
{
    int rc = validate(be, plan, b, err);
    if (rc) return rc;
    rlx_cu_batch cb;
    if ((rc = upload_batch(be, b, &cb, err))) return rc;
    for (int i = 0; i < plan->n_steps && !rc; i++) rc = run_step(be, &plan->steps[i], b, &cb, err);
    if (rc) return rc;
    const rlx_graph *g = plan->graph;
    if (logits && b->n_outputs)
        rc = rlx__cu_check(cudaMemcpyAsync(logits, be->arena + plan->offset[g->output],
                                           (size_t)b->n_outputs * (size_t)g->tensors[g->output].cols * 4,
                                           cudaMemcpyDeviceToHost, be->stream), "cudaMemcpyAsync (logits)", err);
    /* the batch words are reused next run, and the caller reads logits now */
    int rc2 = rlx__cu_check(cudaStreamSynchronize(be->stream), "cudaStreamSynchronize", err);
    return rc ? rc : rc2;
}
