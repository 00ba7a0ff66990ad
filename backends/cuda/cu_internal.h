/* cu_internal.h - private seams of backends/cuda/: the backend's state (cuda_backend.c: lifetime,
 * memory, KV; cuda_run.c: one forward step). */
#ifndef RLX_CU_INTERNAL_H
#define RLX_CU_INTERNAL_H

#include "backends/cuda/cuda.h"
#include "backends/cuda/cu_kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

/* batches of at least this many tokens multiply through cuBLAS */
#define GEMM_MIN_TOKENS 32

typedef struct cu_rope { int n_rot; float base, scale; int ff; int32_t off; } cu_rope;

typedef struct cu_backend {
    rlx_backend base;            /* must be first */
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    const rlx_plan *plan;        /* borrowed */
    void **w_dev;                /* per tensor id: device copy of a weight (NULL otherwise) */
    bool *w_owned;               /* w_dev[t] is an allocation of its own (not shared) */
    uint8_t *arena;
    float *scratch, *deq;        /* rounded activations; dequantized weight for cuBLAS */
    size_t deq_bytes;
    int32_t *d_batch, *h_batch;
    size_t batch_cap;            /* words */
    cu_rope *ropes;
    int n_ropes;
    int64_t min_vocab;
    rlx_kv_geometry kv;
    void **kv_k, **kv_v;
    size_t kv_layer_bytes;
} cu_backend;

int rlx__cu_check(cudaError_t e, const char *what, rlx_error *err);
int rlx__cu_run(cu_backend *be, const rlx_plan *plan, const rlx_batch *b, float *logits, rlx_error *err);

#endif
