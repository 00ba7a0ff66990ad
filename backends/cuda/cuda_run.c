/* cuda_run.c - one forward step on the CUDA backend: batch validation and upload, then the
 * plan's steps as kernel launches on the backend's stream (see kernels.cu), the logits copied
 * back at the end. Decode-sized batches replay a CUDA graph captured for their shape (tokens,
 * outputs): the batch words sit at offsets fixed per plan, so only their contents change. */
#include "backends/cuda/cu_internal.h"
#include "backends/quant.h"

#include <math.h>
#include <stdio.h>
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
    int rc = rlx_batch_validate(b, plan, &be->kv, be->min_vocab, err);
    return rc ? rc : rlx_batch_whole_seqs(b, plan, &be->kv, err);
}

/* Writes the batch words (layout in cu_internal.h) and copies them to the device. Tables that
 * outgrow the buffer replace it, which drops the captured graphs (they read it). */
static int upload_batch(cu_backend *be, const rlx_batch *b, rlx_cu_batch *cb, rlx_error *err)
{
    const rlx_plan *plan = be->plan;
    const rlx_graph *g = plan->graph;
    size_t T = (size_t)b->n_tokens, S = (size_t)b->n_seqs, MT = (size_t)plan->max_tokens, words = be->batch_fixed + S;
    for (size_t s = 0; s < S; s++) words += (size_t)b->seqs[s].n_blocks;
    if (words > be->batch_cap) {
        int rc = rlx__cu_check(cudaStreamSynchronize(be->stream), "cudaStreamSynchronize", err);
        if (rc) return rc;
        rlx__cu_graphs_drop(be);
        cudaFreeHost(be->h_batch);
        cudaFree(be->d_batch);
        be->h_batch = be->d_batch = NULL;
        be->batch_cap = 0;
        if ((rc = rlx__cu_check(cudaMallocHost((void **)&be->h_batch, words * 8), "cudaMallocHost (batch)", err))) return rc;
        if ((rc = rlx__cu_check(cudaMalloc((void **)&be->d_batch, words * 8), "cudaMalloc (batch)", err))) return rc;
        be->batch_cap = words * 2;
    }
    int32_t *w = be->h_batch;
    *cb = (rlx_cu_batch){be->d_batch, b->n_tokens, b->n_outputs, 0, (int32_t)MT, (int32_t)(2 * MT), (int32_t)(3 * MT),
                         (int32_t)be->batch_fixed};
    memcpy(w, b->tokens, T * 4);
    memcpy(w + MT, b->pos, T * 4);
    memcpy(w + 2 * MT, b->seq, T * 4);
    size_t o = 0, at = be->batch_fixed + S;
    for (size_t i = 0; i < T; i++) if (b->output[i]) w[3 * MT + o++] = (int32_t)i;
    for (size_t s = 0; s < S; s++) {
        w[be->batch_fixed + s] = (int32_t)at;
        if (b->seqs[s].n_blocks) /* a sequence without a block table (NULL) */
            memcpy(w + at, b->seqs[s].blocks, (size_t)b->seqs[s].n_blocks * 4);
        at += (size_t)b->seqs[s].n_blocks;
    }
    for (int r = 0; r < be->n_ropes; r++) { /* the CPU backend's expressions, so angles agree exactly */
        const cu_rope *rt = &be->ropes[r];
        const float *ff = rt->ff >= 0 ? (const float *)g->tensors[rt->ff].data : NULL;
        for (size_t t = 0; t < T; t++) {
            float *cs = (float *)(w + rt->off + t * (size_t)rt->n_rot);
            rlx_rope_angles(rt->base, rt->scale, ff, rt->n_rot, b->pos[t], cs, cs + rt->n_rot / 2);
        }
    }
    /* this batch's rows of each region (pinned memory: the copies are asynchronous, and the run
     * ends with a stream synchronisation before the words are written again) */
    size_t reg[8][2] = {{0, T}, {MT, T}, {2 * MT, T}, {3 * MT, (size_t)b->n_outputs}};
    int n_reg = 4;
    if (be->n_ropes <= 3) {
        for (int r = 0; r < be->n_ropes; r++, n_reg++) {
            reg[n_reg][0] = (size_t)be->ropes[r].off;
            reg[n_reg][1] = T * (size_t)be->ropes[r].n_rot;
        }
        reg[n_reg][0] = be->batch_fixed;
        reg[n_reg++][1] = words - be->batch_fixed;
    } else { /* the rope tables lie in order before the block tables: one copy of all */
        reg[n_reg][0] = (size_t)be->ropes[0].off;
        reg[n_reg++][1] = words - (size_t)be->ropes[0].off;
    }
    for (int r = 0; r < n_reg; r++) {
        if (!reg[r][1]) continue;
        int rc = rlx__cu_check(cudaMemcpyAsync(be->d_batch + reg[r][0], w + reg[r][0], reg[r][1] * 4, cudaMemcpyHostToDevice,
                                               be->stream), "cudaMemcpyAsync (batch)", err);
        if (rc) return rc;
    }
    return 0;
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
    const bool invariant = CU_BATCH_INVARIANT(be->plan->graph);
    if ((T >= GEMM_MIN_TOKENS || invariant) && be->deq && (size_t)K * (size_t)N * 4 <= be->deq_bytes) {
        const float *wf = (const float *)be->w_dev[wt];
        if (w->wtype != RLX_F32) {
            if ((e = rlx_cu_dequant(be->stream, w->wtype, be->w_dev[wt], rb, K, N, be->deq))) return rlx__cu_check(e, "dequant kernel", err);
            wf = be->deq;
        }
        if (invariant)
            return rlx__cu_check(rlx_cu_sgemm(be->stream, x, wf, T, K, N, y, N, make_chain(be, s->chain, s->n_chain)),
                                 "sgemm kernel", err);
        const float one = 1.0f, zero = 0.0f;
        /* row-major Y[T][N] = X[T][K] * W[N][K]^T, i.e. column-major Y^T = W^T^T * X^T */
        if (cublasSgemm(be->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)T, (int)K, &one, wf, (int)K, x, (int)K, &zero, y,
                        (int)N) != CUBLAS_STATUS_SUCCESS)
            return rlx_errorf(err, RLX_EIO, "CUDA: cublasSgemm failed");
        if (s->n_chain && (e = rlx_cu_ew(be->stream, y, y, T, N, make_chain(be, s->chain, s->n_chain))))
            return rlx__cu_check(e, "epilogue kernel", err);
        return 0;
    }
    /* one token's rows (decode) through k_matmul, tiles of more through k_matmul_lanes; a
     * hidden-state graph keeps one kernel for every batch (batch invariance) */
    e = rlx_cu_matmul(be->stream, w->wtype, be->w_dev[wt], rb, K, N, x, T, y, N, make_chain(be, s->chain, s->n_chain),
                      invariant || T > 1);
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
    case RLX_OP_GET_ROWS: case RLX_OP_GET_ROWS_POS: {
        const rlx_gtensor *w = &g->tensors[n->in[0]];
        e = rlx_cu_get_rows(be->stream, w->wtype, be->w_dev[n->in[0]], rlx_row_bytes(w->wtype, w->ne[0]), w->ne[0], w->ne[1],
                            *cb, n->op == RLX_OP_GET_ROWS_POS, n->p.scalar.value, y, make_chain(be, s->chain, s->n_chain));
        break;
    }
    case RLX_OP_RMS_NORM: case RLX_OP_HEAD_NORM: case RLX_OP_NORM: {
        bool head = n->op == RLX_OP_HEAD_NORM;
        e = rlx_cu_rms_norm(be->stream, tensor_ptr(be, n->in[0]), y, rows_of(be, b, s->out), o->cols, head ? n->p.norm.head_dim : o->cols,
                            n->p.norm.eps, head ? tensor_ptr(be, n->in[1]) : NULL, n->op == RLX_OP_NORM,
                            make_chain(be, s->chain, s->n_chain));
        break;
    }
    case RLX_OP_MATMUL:
        return run_matmul(be, s, b, err);
    case RLX_OP_ROPE: {
        const rlx_rope_params *rp = &n->p.rope;
        int32_t tab = -1;
        for (int r = 0; r < be->n_ropes; r++)
            if (be->ropes[r].n_rot == rp->n_rot && be->ropes[r].base == rp->freq_base && be->ropes[r].scale == rp->freq_scale &&
                be->ropes[r].ff == n->in[1]) tab = be->ropes[r].off;
        if (tab < 0) return rlx_errorf(err, RLX_EINVAL, "CUDA: rope step was not prepared");
        e = rlx_cu_rope(be->stream, tensor_ptr(be, n->in[0]), y, *cb, rp->n_heads, rp->head_dim, rp->n_rot, rp->mode, tab);
        break;
    }
    case RLX_OP_ATTENTION: {
        const rlx_attn_params *ap = &n->p.attn;
        int layer = ap->layer, type = be->kv.type == RLX_F32 ? 0 : be->kv.type == RLX_F16 ? 1 : 2;
        if (rlx_graph_layer_mem(g, layer).kind == RLX_MEM_NONE) { /* encoders: the step's own K and V rows, F32 */
            int64_t rb = (int64_t)ap->n_head_kv * ap->head_dim * 4;
            e = rlx_cu_attention(be->stream, tensor_ptr(be, n->in[0]), y, tensor_ptr(be, n->in[1]), tensor_ptr(be, n->in[2]), *cb,
                                 ap->n_head, ap->n_head / ap->n_head_kv, ap->head_dim, rb, 0, ap->scale, ap->softcap, 0, 1, 1);
            break;
        }
        int64_t kvc = layer >= 0 && layer < g->n_layers ? rlx_graph_layer_mem(g, layer).kv_cols : 0;
        if (layer < 0 || layer >= be->kv.n_layers || !be->kv_row_bytes[layer] || rlx_mem_desc_layer(&be->kv, layer).kv_cols != kvc)
            return rlx_errorf(err, RLX_EINVAL, "CUDA: the KV pool (%d layers) does not fit the plan (layer %d, %lld values)",
                              be->kv.n_layers, layer, (long long)kvc);
        e = rlx_cu_kv_store(be->stream, tensor_ptr(be, n->in[1]), tensor_ptr(be, n->in[2]), be->kv_k[layer], be->kv_v[layer],
                            *cb, kvc, type, (int64_t)be->kv_row_bytes[layer], be->kv.block_size);
        if (!e)
            e = rlx_cu_attention(be->stream, tensor_ptr(be, n->in[0]), y, be->kv_k[layer], be->kv_v[layer], *cb, ap->n_head,
                                 ap->n_head / ap->n_head_kv, ap->head_dim, (int64_t)be->kv_row_bytes[layer], ap->window, ap->scale,
                                 ap->softcap, type, be->kv.block_size, 0);
        break;
    }
    case RLX_OP_GATHER:
        e = rlx_cu_gather(be->stream, tensor_ptr(be, n->in[0]), y, *cb, o->cols);
        break;
    default: { /* elementwise: the head op is the chain's first entry */
        const rlx_op_info *info = rlx_op_get(n->op);
        if (!info || !info->elementwise) return rlx_errorf(err, RLX_EUNSUPPORTED, "CUDA: no kernel for op '%s'", rlx_op_name(n->op));
        rlx_ew all[RLX_MAX_CHAIN + 1];
        all[0] = rlx_ew_of_node(n);
        memcpy(all + 1, s->chain, (size_t)s->n_chain * sizeof *all);
        e = rlx_cu_ew(be->stream, tensor_ptr(be, n->in[0]), y, rows_of(be, b, s->out), o->cols, make_chain(be, all, s->n_chain + 1));
        break;
    }
    }
    return rlx__cu_check((cudaError_t)e, "kernel launch", err);
}

/* Every step of the plan; an error names its step. With sync_steps, waits after each so an
 * asynchronous kernel fault is reported at the step that caused it. */
static int run_steps(cu_backend *be, const rlx_plan *plan, const rlx_batch *b, const rlx_cu_batch *cb, bool sync, rlx_error *err)
{
    for (int i = 0; i < plan->n_steps; i++) {
        int rc = run_step(be, &plan->steps[i], b, cb, err);
        if (!rc && sync) rc = rlx__cu_check(cudaStreamSynchronize(be->stream), "cudaStreamSynchronize", err);
        if (rc && err) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return rlx_errorf(err, rc, "%s (step %d of %d, %s)", msg, i, plan->n_steps, rlx_op_name(plan->steps[i].node.op));
        }
        if (rc) return rc;
    }
    return 0;
}

void rlx__cu_graphs_drop(cu_backend *be)
{
    for (int i = 0; i < CU_MAX_GRAPHS; i++) {
        if (be->graphs[i].exec) cudaGraphExecDestroy(be->graphs[i].exec);
        memset(&be->graphs[i], 0, sizeof be->graphs[i]);
    }
}

/* The graph of this batch's shape, captured from one run of the steps when new (the least
 * recently used one makes room). */
static int shape_graph(cu_backend *be, const rlx_plan *plan, const rlx_batch *b, const rlx_cu_batch *cb, cudaGraphExec_t *out,
                       rlx_error *err)
{
    cu_graph *hit = NULL, *lru = &be->graphs[0];
    be->graph_clock++;
    for (int i = 0; i < CU_MAX_GRAPHS && !hit; i++) {
        cu_graph *gr = &be->graphs[i];
        if (gr->n_tokens == b->n_tokens && gr->n_outputs == b->n_outputs) hit = gr;
        else if (!gr->n_tokens || (lru->n_tokens && gr->last_used < lru->last_used)) lru = gr;
    }
    if (!hit) {
        if (lru->exec) cudaGraphExecDestroy(lru->exec);
        memset(lru, 0, sizeof *lru);
        cudaGraph_t g = NULL;
        int rc = rlx__cu_check(cudaStreamBeginCapture(be->stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture", err);
        if (rc) return rc;
        rc = run_steps(be, plan, b, cb, false, err);
        cudaError_t e = cudaStreamEndCapture(be->stream, &g); /* always: the stream leaves capture mode */
        if (!rc) rc = rlx__cu_check(e, "cudaStreamEndCapture", err);
        if (!rc) rc = rlx__cu_check(cudaGraphInstantiate(&lru->exec, g, 0), "cudaGraphInstantiate", err);
        if (g) cudaGraphDestroy(g);
        if (rc) {
            (void)cudaGetLastError(); /* a failed capture leaves an error that is not the next call's */
            lru->exec = NULL;
            return rc;
        }
        lru->n_tokens = b->n_tokens;
        lru->n_outputs = b->n_outputs;
        be->n_captures++;
        hit = lru;
    }
    hit->last_used = be->graph_clock;
    *out = hit->exec;
    return 0;
}

int rlx__cu_run(cu_backend *be, const rlx_plan *plan, const rlx_batch *b, float *logits, rlx_error *err)
{
    int rc = validate(be, plan, b, err);
    if (rc) return rc;
    rlx_cu_batch cb;
    rc = upload_batch(be, b, &cb, err);
    if (!rc && be->graphs_on && b->n_tokens <= CU_GRAPH_MAX_TOKENS) {
        cudaGraphExec_t exec;
        if (!(rc = shape_graph(be, plan, b, &cb, &exec, err)))
            rc = rlx__cu_check(cudaGraphLaunch(exec, be->stream), "cudaGraphLaunch", err);
    } else if (!rc) {
        rc = run_steps(be, plan, b, &cb, be->sync_steps, err);
    }
    if (rc) {
        cudaStreamSynchronize(be->stream); /* nothing in flight reads the batch words any more */
        return rc;
    }
    const rlx_graph *g = plan->graph;
    const int32_t rows = g->output_kind == RLX_OUTPUT_HIDDEN ? b->n_tokens : b->n_outputs; /* hidden states: every token's */
    if (logits && rows)
        rc = rlx__cu_check(cudaMemcpyAsync(logits, be->arena + plan->offset[g->output],
                                           (size_t)rows * (size_t)g->tensors[g->output].cols * 4,
                                           cudaMemcpyDeviceToHost, be->stream), "cudaMemcpyAsync (logits)", err);
    /* the batch words are reused next run, and the caller reads logits now; an asynchronous
     * kernel fault surfaces here (RLX_CUDA_SYNC=1 names its step) */
    int rc2 = rlx__cu_check(cudaStreamSynchronize(be->stream), "a kernel of this step (set RLX_CUDA_SYNC=1 to find which)", err);
    return rc ? rc : rc2;
}
