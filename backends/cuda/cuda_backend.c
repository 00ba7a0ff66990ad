/* cuda_backend.c - the CUDA backend's host side (C, CUDA runtime + cuBLAS C APIs): device
 * selection, weights copied once at prepare(), the activation arena, matmul scratch, the batch
 * words, the paged KV pool (one K and one V allocation per layer: f32, f16 or Q8_0 rows), and
 * the entry points, each of which first makes the backend's device current (the engine calls
 * them from its worker thread, not the thread that created the backend). One forward step is
 * in cuda_run.c. */
#include "backends/cuda/cu_internal.h"
#include "backends/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEQ_MAX_BYTES ((size_t)256 << 20)


int rlx__cu_check(cudaError_t e, const char *what, rlx_error *err)
{
    if (e == cudaSuccess) return 0;
    return rlx_errorf(err, e == cudaErrorMemoryAllocation ? RLX_ENOMEM : RLX_EIO, "CUDA: %s failed: %s", what,
                      cudaGetErrorString(e));
}

static bool no_device_error(cudaError_t e)
{
    return e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || e == cudaErrorInitializationError;
}

int rlx_cuda_list_devices(rlx_cuda_device_info *out, int cap, int *n, rlx_error *err)
{
    *n = 0;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (no_device_error(e))
        return rlx_errorf(err, RLX_EUNSUPPORTED, "no CUDA device (%s)", cudaGetErrorString(e));
    if (e != cudaSuccess) return rlx__cu_check(e, "cudaGetDeviceCount", err);
    for (int i = 0; i < count && i < cap; i++) {
        struct cudaDeviceProp p;
        if ((e = cudaGetDeviceProperties(&p, i)) != cudaSuccess) return rlx__cu_check(e, "cudaGetDeviceProperties", err);
        memset(&out[i], 0, sizeof out[i]);
        snprintf(out[i].name, sizeof out[i].name, "%.255s", p.name);
        out[i].major = p.major;
        out[i].minor = p.minor;
        out[i].mem_bytes = p.totalGlobalMem;
    }
    *n = count;
    return 0;
}

/* cudaSetDevice on the calling thread: the device is per thread in the runtime API */
static int use_device(const cu_backend *be, rlx_error *err)
{
    return rlx__cu_check(cudaSetDevice(be->device), "cudaSetDevice", err);
}

/* Frees what prepare() made. Counts come from the backend, never from the plan: the caller may
 * already have freed the plan (and its graph) it prepared. */
static void free_plan_state(cu_backend *be)
{
    rlx__cu_graphs_drop(be);
    for (int t = 0; be->w_dev && be->w_owned && t < be->n_tensors; t++)
        if (be->w_owned[t]) cudaFree(be->w_dev[t]);
    free(be->w_dev);
    free(be->w_owned);
    free(be->ropes);
    cudaFree(be->arena);
    cudaFree(be->scratch);
    cudaFree(be->deq);
    cudaFree(be->d_batch);
    cudaFreeHost(be->h_batch);
    be->w_dev = NULL;
    be->w_owned = NULL;
    be->n_tensors = 0;
    be->ropes = NULL;
    be->arena = NULL;
    be->scratch = be->deq = NULL;
    be->d_batch = be->h_batch = NULL;
    be->batch_cap = be->batch_fixed = 0;
    be->n_ropes = 0;
    be->deq_bytes = 0;
    be->plan = NULL;
}

static size_t weight_bytes(const rlx_gtensor *x) { return rlx_row_bytes(x->wtype, x->ne[0]) * (size_t)x->ne[1]; }

static int cu_prepare(rlx_backend *be_, const rlx_plan *plan, rlx_error *err)
{
    cu_backend *be = (cu_backend *)be_;
    int rc = rlx_backend_check_plan(be_, plan, err);
    if (rc) return rc;
    if ((rc = use_device(be, err))) return rc;
    free_plan_state(be);
    const rlx_graph *g = plan->graph;
    int nt = g->n_tensors;
    if (plan->max_tokens > 65535)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "CUDA: batches of more than 65535 tokens are not supported");
    be->plan = plan;
    be->w_dev = calloc((size_t)nt + 1, sizeof *be->w_dev);
    be->w_owned = calloc((size_t)nt + 1, sizeof *be->w_owned);
    be->ropes = calloc((size_t)plan->n_steps + 1, sizeof *be->ropes);
    if (!be->w_dev || !be->w_owned || !be->ropes) { rc = rlx_errorf(err, RLX_ENOMEM, "out of memory"); goto fail; }
    be->n_tensors = nt;
    for (int t = 0; t < nt && !rc; t++) {
        const rlx_gtensor *x = &g->tensors[t];
        if (!x->is_weight || !x->data) continue;
        for (int u = 0; u < t && !be->w_dev[t]; u++) /* tied tensors share one copy */
            if (g->tensors[u].is_weight && g->tensors[u].data == x->data && weight_bytes(&g->tensors[u]) == weight_bytes(x))
                be->w_dev[t] = be->w_dev[u];
        if (be->w_dev[t]) continue;
        if ((rc = rlx__cu_check(cudaMalloc(&be->w_dev[t], weight_bytes(x)), "cudaMalloc (weights)", err))) break;
        be->w_owned[t] = true;
        rc = rlx__cu_check(cudaMemcpyAsync(be->w_dev[t], x->data, weight_bytes(x), cudaMemcpyHostToDevice, be->stream),
                           "cudaMemcpyAsync (weights)", err);
        if (!rc) rc = rlx__cu_check(cudaStreamSynchronize(be->stream), "cudaStreamSynchronize", err);
    }
    if (rc) goto fail;
    if ((rc = rlx__cu_check(cudaMalloc((void **)&be->arena, plan->arena_bytes ? plan->arena_bytes : 64), "cudaMalloc (arena)", err)))
        goto fail;
    size_t scratch = 64;
    be->min_vocab = INT64_MAX;
    for (int i = 0; i < plan->n_steps; i++) {
        const rlx_node *n = &plan->steps[i].node;
        if (n->op == RLX_OP_GET_ROWS && g->tensors[n->in[0]].ne[1] < be->min_vocab) be->min_vocab = g->tensors[n->in[0]].ne[1];
        if (n->op == RLX_OP_ATTENTION && (n->p.attn.head_dim > 512 || n->p.attn.head_dim <= 0 || n->p.attn.n_head > 65535)) {
            rc = rlx_errorf(err, RLX_EUNSUPPORTED, "CUDA: attention with %d heads of %d values is not supported (at most "
                            "65535 heads of 512)", n->p.attn.n_head, n->p.attn.head_dim);
            goto fail;
        }
        if (n->op == RLX_OP_MATMUL) {
            const rlx_gtensor *x = &g->tensors[n->in[0]], *w = &g->tensors[n->in[1]];
            size_t rows = x->rows == RLX_ROWS_OUTPUTS ? (size_t)plan->max_outputs : (size_t)plan->max_tokens;
            if (rows * (size_t)x->cols * 4 > scratch) scratch = rows * (size_t)x->cols * 4;
            size_t deq = (size_t)w->ne[0] * (size_t)w->ne[1] * 4;
            if ((rows >= GEMM_MIN_TOKENS || CU_BATCH_INVARIANT(g)) && deq <= DEQ_MAX_BYTES && deq > be->deq_bytes) be->deq_bytes = deq;
        }
        if (n->op == RLX_OP_ROPE) {
            const rlx_rope_params *rp = &n->p.rope;
            if (rp->n_rot % 2 || rp->head_dim % 2 || rp->n_rot > rp->head_dim ||
                (n->in[1] >= 0 && (!g->tensors[n->in[1]].is_weight || g->tensors[n->in[1]].wtype != RLX_F32))) {
                rc = rlx_errorf(err, RLX_EUNSUPPORTED, "CUDA: this rope configuration is not supported");
                goto fail;
            }
            bool seen = false;
            for (int r = 0; r < be->n_ropes; r++)
                seen |= be->ropes[r].n_rot == rp->n_rot && be->ropes[r].base == rp->freq_base && be->ropes[r].scale == rp->freq_scale &&
                        be->ropes[r].ff == n->in[1];
            if (!seen) be->ropes[be->n_ropes++] = (cu_rope){rp->n_rot, rp->freq_base, rp->freq_scale, n->in[1], 0};
        }
    }
    if ((rc = rlx__cu_check(cudaMalloc((void **)&be->scratch, scratch), "cudaMalloc (scratch)", err))) goto fail;
    if (be->deq_bytes && (rc = rlx__cu_check(cudaMalloc((void **)&be->deq, be->deq_bytes), "cudaMalloc (gemm scratch)", err)))
        goto fail;
    /* the batch words' fixed part: its offsets are kernel arguments captured into graphs */
    size_t at = 3 * (size_t)plan->max_tokens + (size_t)plan->max_outputs;
    for (int r = 0; r < be->n_ropes; r++) {
        be->ropes[r].off = (int32_t)at;
        at += (size_t)plan->max_tokens * (size_t)be->ropes[r].n_rot;
    }
    be->batch_fixed = at;
    if ((rc = rlx__cu_check(cudaMallocHost((void **)&be->h_batch, (at + 4096) * 4), "cudaMallocHost (batch)", err))) goto fail;
    if ((rc = rlx__cu_check(cudaMalloc((void **)&be->d_batch, (at + 4096) * 4), "cudaMalloc (batch)", err))) goto fail;
    be->batch_cap = at + 4096;
    return 0;
fail:
    free_plan_state(be);
    return rc;
}

static void free_kv(cu_backend *be)
{
    rlx__cu_graphs_drop(be);
    for (int32_t l = 0; be->kv_k && l < be->kv.n_layers; l++) {
        cudaFree(be->kv_k[l]);
        cudaFree(be->kv_v[l]);
    }
    free(be->kv_k);
    free(be->kv_v);
    free(be->kv_row_bytes);
    be->kv_k = be->kv_v = NULL;
    be->kv_row_bytes = NULL;
    memset(&be->kv, 0, sizeof be->kv);
}

static int cu_kv_init(rlx_backend *be_, const rlx_mem_desc *geo, rlx_error *err)
{
    cu_backend *be = (cu_backend *)be_;
    int rc = use_device(be, err);
    if (rc) return rc;
    free_kv(be);
    if ((rc = rlx_mem_desc_check(geo, false, "CUDA", err))) return rc;
    be->kv_k = calloc((size_t)geo->n_layers, sizeof *be->kv_k);
    be->kv_v = calloc((size_t)geo->n_layers, sizeof *be->kv_v);
    be->kv_row_bytes = calloc((size_t)geo->n_layers, sizeof *be->kv_row_bytes);
    if (!be->kv_k || !be->kv_v || !be->kv_row_bytes) { free_kv(be); return rlx_errorf(err, RLX_ENOMEM, "out of memory"); }
    be->kv = *geo;
    for (int32_t l = 0; l < geo->n_layers && !rc; l++) {
        rlx_mem_layer m = rlx_mem_desc_layer(geo, l);
        if (m.kind != RLX_MEM_KV) continue;
        be->kv_row_bytes[l] = rlx_kv_row_bytes(geo->type, m.kv_cols);
        size_t lb = (size_t)geo->n_blocks * (size_t)geo->block_size * be->kv_row_bytes[l];
        rc = rlx__cu_check(cudaMalloc(&be->kv_k[l], lb), "cudaMalloc (KV cache)", err);
        if (!rc) rc = rlx__cu_check(cudaMalloc(&be->kv_v[l], lb), "cudaMalloc (KV cache)", err);
        /* on the backend's stream: a non-blocking stream does not wait for the legacy one */
        if (!rc) rc = rlx__cu_check(cudaMemsetAsync(be->kv_k[l], 0, lb, be->stream), "cudaMemsetAsync", err);
        if (!rc) rc = rlx__cu_check(cudaMemsetAsync(be->kv_v[l], 0, lb, be->stream), "cudaMemsetAsync", err);
    }
    if (!rc) rc = rlx__cu_check(cudaStreamSynchronize(be->stream), "cudaStreamSynchronize", err);
    if (rc) free_kv(be);
    return rc;
}

static size_t block_bytes(const cu_backend *be, int32_t layer) { return be->kv_row_bytes[layer] * (size_t)be->kv.block_size; }

static int kv_io(cu_backend *be, int32_t layer, int32_t block, void *k, void *v, bool write, rlx_error *err)
{
    int rc = use_device(be, err);
    if (rc) return rc;
    if (!be->kv_k) return rlx_errorf(err, RLX_EINVAL, "KV cache not initialised");
    if (layer < 0 || layer >= be->kv.n_layers || block < 0 || block >= be->kv.n_blocks || !be->kv_row_bytes[layer])
        return rlx_errorf(err, RLX_ERANGE, "KV block or layer out of range");
    size_t bb = block_bytes(be, layer);
    uint8_t *dk = (uint8_t *)be->kv_k[layer] + block * bb, *dv = (uint8_t *)be->kv_v[layer] + block * bb;
    rc = rlx__cu_check(cudaStreamSynchronize(be->stream), "cudaStreamSynchronize", err);
    /* on the backend's stream, which does not synchronise with the legacy default stream */
    enum cudaMemcpyKind kind = write ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    if (!rc) rc = rlx__cu_check(cudaMemcpyAsync(write ? dk : k, write ? k : dk, bb, kind, be->stream), "cudaMemcpyAsync (KV)", err);
    if (!rc) rc = rlx__cu_check(cudaMemcpyAsync(write ? dv : v, write ? v : dv, bb, kind, be->stream), "cudaMemcpyAsync (KV)", err);
    if (!rc) rc = rlx__cu_check(cudaStreamSynchronize(be->stream), "cudaStreamSynchronize", err);
    return rc;
}

static int cu_kv_read_block(rlx_backend *be, int32_t layer, int32_t block, void *k, void *v, rlx_error *err)
{
    return kv_io((cu_backend *)be, layer, block, k, v, false, err);
}

static int cu_kv_write_block(rlx_backend *be, int32_t layer, int32_t block, const void *k, const void *v, rlx_error *err)
{
    return kv_io((cu_backend *)be, layer, block, (void *)(uintptr_t)k, (void *)(uintptr_t)v, true, err);
}

/* Free device memory now (the KV pool's default size is capped by it). */
static int cu_mem_available(rlx_backend *be_, uint64_t *bytes, rlx_error *err)
{
    cu_backend *be = (cu_backend *)be_;
    size_t free_b = 0, total = 0;
    int rc = use_device(be, err);
    if (!rc) rc = rlx__cu_check(cudaMemGetInfo(&free_b, &total), "cudaMemGetInfo", err);
    *bytes = rc ? 0 : (uint64_t)free_b;
    return rc;
}

int rlx_cuda_get_stats(const rlx_backend *be_, rlx_cuda_stats *out)
{
    if (!be_ || strcmp(be_->ops->name, "cuda")) return RLX_EINVAL;
    const cu_backend *be = (const cu_backend *)be_;
    *out = (rlx_cuda_stats){be->n_captures, be->graphs_on};
    return 0;
}

static int cu_run(rlx_backend *be_, const rlx_plan *plan, const rlx_batch *b, float *logits, rlx_error *err)
{
    cu_backend *be = (cu_backend *)be_;
    int rc = use_device(be, err);
    return rc ? rc : rlx__cu_run(be, plan, b, logits, err);
}

static void cu_destroy(rlx_backend *be_)
{
    cu_backend *be = (cu_backend *)be_;
    cudaSetDevice(be->device);
    if (be->stream) cudaStreamSynchronize(be->stream);
    free_plan_state(be);
    free_kv(be);
    if (be->blas) cublasDestroy(be->blas);
    if (be->stream) cudaStreamDestroy(be->stream);
    free(be);
}

static const rlx_backend_ops cu_ops = {
    .name = "cuda",
    .unsupported = rlx_backend_builtin_encoders, /* k_attention reads an encoder's K and V rows */
    .hidden_output = true,
    .prepare = cu_prepare,
    .mem_init = cu_kv_init,
    .run = cu_run,
    .kv_read_block = cu_kv_read_block,
    .kv_write_block = cu_kv_write_block,
    .mem_available = cu_mem_available,
    .destroy = cu_destroy,
};

int rlx_backend_cuda_create(rlx_backend **out, int device, rlx_error *err)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (no_device_error(e) || (e == cudaSuccess && count == 0))
        return rlx_errorf(err, RLX_EUNSUPPORTED, "no CUDA device (%s); use --backend cpu or vulkan",
                          e == cudaSuccess ? "the driver reports none" : cudaGetErrorString(e));
    if (e != cudaSuccess) return rlx__cu_check(e, "cudaGetDeviceCount", err);
    if (device < 0) device = 0;
    if (device >= count) return rlx_errorf(err, RLX_EUNSUPPORTED, "CUDA device %d does not exist (%d found; see `rlxd devices`)", device, count);
    cu_backend *be = calloc(1, sizeof *be);
    if (!be) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    be->base.ops = &cu_ops;
    be->device = device;
    const char *gr = getenv("RLX_CUDA_GRAPHS"), *sy = getenv("RLX_CUDA_SYNC");
    be->sync_steps = sy && !strcmp(sy, "1");
    be->graphs_on = !(gr && !strcmp(gr, "0")) && !be->sync_steps; /* a per-step wait cannot be captured */
    int rc = rlx__cu_check(cudaSetDevice(device), "cudaSetDevice", err);
    if (!rc) rc = rlx__cu_check(cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking), "cudaStreamCreate", err);
    if (!rc && cublasCreate(&be->blas) != CUBLAS_STATUS_SUCCESS) rc = rlx_errorf(err, RLX_EIO, "CUDA: cublasCreate failed");
    if (!rc && cublasSetStream(be->blas, be->stream) != CUBLAS_STATUS_SUCCESS) rc = rlx_errorf(err, RLX_EIO, "CUDA: cublasSetStream failed");
    if (rc) { cu_destroy(&be->base); return rc; }
    *out = &be->base;
    return 0;
}
