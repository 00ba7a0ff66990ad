/* cu_internal.h - private seams of backends/cuda/: the backend's state (cuda_backend.c: lifetime,
 * memory, KV; cuda_run.c: one forward step). */
#ifndef RLX_CU_INTERNAL_H
#define RLX_CU_INTERNAL_H

#include "backends/cuda/cuda.h"
#include "backends/cuda/cu_kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

/* batches of at least this many tokens multiply through cuBLAS, except in a graph whose output
 * is every token's hidden state (an embedding model): cuBLAS picks its algorithm (and so each
 * row's summation order) by the batch's shape, and an input's vector must not depend on what
 * shares its step (engine/embed.h's batch invariance), so such graphs multiply every batch,
 * one token or thousands, through rlx_cu_sgemm (the weight dequantized as for cuBLAS), or
 * through k_matmul_lanes where the weight is too large to dequantize: the choice never depends
 * on T */
#define GEMM_MIN_TOKENS 32
#define CU_BATCH_INVARIANT(graph) ((graph)->output_kind == RLX_OUTPUT_HIDDEN)
/* decode-sized batches (at most this many tokens) run as a CUDA graph captured per shape */
#define CU_GRAPH_MAX_TOKENS 16
#define CU_MAX_GRAPHS 16

typedef struct cu_rope { int n_rot; float base, scale; int ff; int32_t off; } cu_rope;

/* The launches of one batch shape, captured once and replayed: every kernel argument depends
 * only on the shape (the batch words sit at offsets fixed per plan). */
typedef struct cu_graph {
    int32_t n_tokens, n_outputs;     /* the key; n_tokens 0 = empty entry */
    cudaGraphExec_t exec;
    uint64_t last_used;
} cu_graph;

typedef struct cu_backend {
    rlx_backend base;            /* must be first */
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    const rlx_plan *plan;        /* borrowed */
    int n_tensors;               /* of the prepared plan's graph: the length of w_dev/w_owned */
    void **w_dev;                /* per tensor id: device copy of a weight (NULL otherwise) */
    bool *w_owned;               /* w_dev[t] is an allocation of its own (not shared) */
    uint8_t *arena;
    float *scratch, *deq;        /* rounded activations; dequantized weight for cuBLAS */
    size_t deq_bytes;
    /* batch words: tokens[max_tokens] pos[max_tokens] seq[max_tokens] out_index[max_outputs],
     * the rope tables, table_start[n_seqs], then the block tables of the run */
    int32_t *d_batch, *h_batch;
    size_t batch_cap;            /* words */
    size_t batch_fixed;          /* words before table_start */
    cu_rope *ropes;
    int n_ropes;
    int64_t min_vocab;
    rlx_mem_desc kv;
    void **kv_k, **kv_v;         /* per layer (NULL: not a KV layer) */
    size_t *kv_row_bytes;        /* per layer: its K/V row (its own kv_cols); 0 if not KV */
    /* CUDA graphs of decode steps (RLX_CUDA_GRAPHS=0 turns them off) */
    bool graphs_on;
    cu_graph graphs[CU_MAX_GRAPHS];
    uint64_t graph_clock, n_captures;
    /* RLX_CUDA_SYNC=1: wait after every step, so a failing kernel names its step */
    bool sync_steps;
} cu_backend;

int rlx__cu_check(cudaError_t e, const char *what, rlx_error *err);
int rlx__cu_run(cu_backend *be, const rlx_plan *plan, const rlx_batch *b, float *logits, rlx_error *err);
/* Forgets every captured graph (a buffer they use was replaced). */
void rlx__cu_graphs_drop(cu_backend *be);

#endif
