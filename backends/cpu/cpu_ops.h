/* cpu_ops.h - CPU kernels of the plan's step kinds. Each kernel is called by every thread of
 * the pool with its index; it splits the work deterministically (static ranges), so results
 * never depend on the thread count or on the batch composition. Private to backends/cpu/. */
#ifndef RLX_CPU_OPS_H
#define RLX_CPU_OPS_H

#include "backends/backend.h"
#include "backends/cpu/threadpool.h"

typedef struct rlx_cpu_run {
    const rlx_plan *plan;
    const rlx_batch *batch;
    rlx_threadpool *tp;
    uint8_t *arena;
    uint8_t *scratch;            /* matmul activation conversion */
    float *attn_scratch;         /* per thread: attn_scratch_stride floats */
    size_t attn_scratch_stride;
    const int32_t *out_index;    /* batch token index of each output row */
    /* KV pool */
    const rlx_kv_geometry *kv;
    uint8_t *kv_k, *kv_v;        /* [layer][n_blocks*block_size][kv_cols] */
    size_t kv_layer_bytes;
    _Atomic int error;           /* RLX_E* raised by a kernel */
} rlx_cpu_run;

void rlx_cpu_step(rlx_cpu_run *r, const rlx_step *s, int ith, int nth);

#endif
