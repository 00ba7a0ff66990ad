/* cpu_ops.h - CPU kernels of the plan's step kinds. Each kernel is called by every thread of
 * the pool with its index; it splits the work so that results never depend on the thread count,
 * on which thread computes what (matmuls claim tiles dynamically) or on the batch composition. Private to backends/cpu/. */
#ifndef RLX_CPU_OPS_H
#define RLX_CPU_OPS_H

#include "backends/backend.h"
#include "backends/cpu/threadpool.h"

/* Query heads attention handles per pass over a K/V row; the backend gives each thread
 * attn_scratch_stride * RLX_CPU_ATTN_G floats of scores plus RLX_CPU_ATTN_PART floats of
 * per-lane partial sums (16 lanes of head_dim <= 1024 per head). */
#define RLX_CPU_ATTN_G 4
#define RLX_CPU_ATTN_PART ((size_t)RLX_CPU_ATTN_G * 16 * 1024)

typedef struct rlx_cpu_run {
    const rlx_plan *plan;
    const rlx_batch *batch;
    rlx_threadpool *tp;
    uint8_t *arena;
    uint8_t *scratch;            /* matmul activation conversion */
    uint8_t *row_scratch;        /* per thread: one converted activation row (T = 1) */
    size_t row_scratch_stride;
    _Atomic int64_t *counters;   /* per step: next matmul tile to claim (zero at run start) */
    const uint8_t *no_barrier;   /* per step: the next step may overlap it (see cpu_backend.c) */
    float *attn_scratch;         /* per thread: attn_scratch_stride * RLX_CPU_ATTN_G + RLX_CPU_ATTN_PART floats */
    size_t attn_scratch_stride;
    const int32_t *out_index;    /* batch token index of each output row */
    /* KV pool */
    const rlx_kv_geometry *kv;
    uint8_t *kv_k, *kv_v;        /* [layer][n_blocks*block_size][kv_cols] */
    size_t kv_layer_bytes;
    _Atomic int error;           /* RLX_E* raised by a kernel */
} rlx_cpu_run;

/* rlx_quantize_act (batched: rlx_quantize_act_batched), vectorised where the kernel path
 * allows; the bytes are identical (tests/unit/test_cpu_quant_act.c). */
void rlx_cpu_quantize_act(int type, bool batched, const float *x, void *dst, int64_t n);

void rlx_cpu_step(rlx_cpu_run *r, const rlx_step *s, int ith, int nth);

/* The attention step (cpu_attn.c). */
void rlx__cpu_attention(rlx_cpu_run *r, const rlx_step *s, int ith, int nth);

#endif
