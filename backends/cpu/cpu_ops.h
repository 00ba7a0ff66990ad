/* cpu_ops.h - CPU kernels of the plan's step kinds. rlx_cpu_step is called by every thread of
 * the pool with its index; the step's work is split into units (row chunks, matmul tiles,
 * attention items) that threads claim from the step's counters as they come, so a thread the
 * OS deschedules holds the others only while it holds a unit. Results never depend on the
 * thread count, on which thread computes what or on the batch composition: every output
 * element is computed by the same arithmetic whoever claims it. Private to backends/cpu/. */
#ifndef RLX_CPU_OPS_H
#define RLX_CPU_OPS_H

#include "backends/backend.h"
#include "backends/cpu/threadpool.h"

#include <math.h>
#include <stdatomic.h>

/* Parts of a phase's units that rlx_cpu_claim_part hands out, one per thread up to this many */
#define RLX_CPU_PARTS 8

/* Per plan step: its work in up to two phases (phase 0 prepares what phase 1 reads: a batched
 * matmul's converted activations, attention's KV stores; 0 units when there is none). Phase p's
 * units are claimed from next[p], or by parts from part[p] (rlx_cpu_claim_part), and counted,
 * once completed, in done[p] up to units[p] (rlx_cpu_step_units, before the run). Two cache
 * lines each. */
typedef struct rlx_cpu_sync {
    _Alignas(64) _Atomic int64_t next[2];
    _Atomic unsigned done[2];
    unsigned units[2];
    _Alignas(64) _Atomic int32_t part[2][RLX_CPU_PARTS];
} rlx_cpu_sync;

typedef struct rlx_cpu_run {
    const rlx_plan *plan;
    const rlx_batch *batch;
    rlx_threadpool *tp;
    uint8_t *arena;
    uint8_t *scratch;            /* matmul activation conversion */
    uint8_t *row_scratch;        /* per thread: one converted activation row (T = 1) */
    size_t row_scratch_stride;
    rlx_cpu_sync *sync;          /* per step (zero but units at run start) */
    const uint8_t *no_barrier;   /* per step: the next step may overlap it (see cpu_backend.c) */
    float *attn_scratch;         /* per thread: attn_scratch_floats (rlx_cpu_attn_scratch_floats) */
    size_t attn_scratch_floats;
    size_t attn_scratch_stride;  /* positions a work item may span (padded), see attention.c */
    const int32_t *out_index;    /* batch token index of each output row */
    /* one-row (not batched) arithmetic per token and per output row (rlx_batch.decode): for
     * tinyBLAS-style products and attention (decode), for 4-row gemm products (onerow4) */
    const uint8_t *decode_tok, *onerow4_tok;
    const uint8_t *decode_out, *onerow4_out;
    const int32_t *seq_tok;      /* batch token indices grouped by sequence, in batch order ... */
    const int32_t *seq_off;      /* ... sequence s at [seq_off[s], seq_off[s + 1]) */
    /* KV pool: layer l's K at kv_mem + kv_off[2 l], its V at kv_mem + kv_off[2 l + 1], each
     * n_blocks blocks of block_size rows of that layer's kv_cols, laid out head by head inside a
     * block (rlx__cpu_kv_at): kv_hb[l] bytes per (slot, head) piece */
    const rlx_mem_desc *kv;
    uint8_t *kv_mem;
    const size_t *kv_off;
    const size_t *kv_hb;
    /* recurrent state: layer l's slots at state_mem + state_off[l], kv->n_state_slots slots of
     * that layer's state_bytes (RLX_MEM_STATE layers) */
    uint8_t *state_mem;
    const size_t *state_off;
    const struct rlx_packed_weight *packed; /* per graph tensor: packed copy (repack.h) or NULL */
    _Atomic int error;           /* RLX_E* raised by a kernel */
} rlx_cpu_run;

/* Where byte c of slot `slot`'s row (backend.h's row layout) lives in a CPU KV layer's K or V
 * array: a block of B slots holds its rows in pieces of hb bytes, piece h of every slot
 * together (block, piece, slot, byte), so one head's values for the block's positions are
 * B * hb contiguous bytes. hb is a head's slice (head_dim values) for F16 and F32 caches and the
 * whole row rb for Q8_0 ones (a head may start inside a 32-value block), which is the row
 * layout itself. Decode attention over 1024 positions read each position's head slice a row
 * (2 KiB) apart, and copied the slices side by side first to keep the prefetchers and the TLB
 * in step (bench/RESULTS.md 42, 43). kv_read_block / kv_write_block convert to and from the row layout. */
static inline size_t rlx__cpu_kv_at(size_t slot, size_t c, size_t B, size_t rb, size_t hb)
{
    return slot / B * B * rb + c / hb * B * hb + slot % B * hb + c % hb;
}

/* rlx_quantize_act (batched: rlx_quantize_act_batched), vectorised where the kernel path
 * allows; the bytes are identical (tests/unit/test_cpu_quant_act.c). */
void rlx_cpu_quantize_act(int type, bool batched, const float *x, void *dst, int64_t n);
/* y = x rounded to wtype (RLX_F16 or RLX_BF16) and back to f32, as the scalar conversions of
 * backends/dtype.h give (NaN stays NaN); vectorised where the kernel path allows. */
void rlx_cpu_round_act(int wtype, const float *x, float *y, int64_t n);

/* The units of each phase of step s on nth threads (into units[2]); the same for every
 * thread, called once per run before it starts. */
void rlx_cpu_step_units(const rlx_cpu_run *r, const rlx_step *s, int nth, unsigned units[2]);
/* Claims and computes units of step s until none is left (phase 1 after phase 0 is complete). */
void rlx_cpu_step(rlx_cpu_run *r, const rlx_step *s, int ith, int nth);
/* Returns once every unit of step s is complete (its writes visible to the caller). */
void rlx_cpu_step_wait(rlx_cpu_run *r, const rlx_step *s);
/* Row chunks of a phase over `rows` independent rows: chunk c is split(rows, c, chunks). One
 * thread runs a phase as one chunk (nothing to balance). */
static inline unsigned rlx_cpu_row_chunks(int64_t rows, int nth)
{
    const int64_t c = nth > 1 ? (int64_t)nth * 4 : 1;
    return (unsigned)(rows < c ? (rows > 0 ? rows : 0) : c);
}

/* Claims n units from *next (returns the first). On one thread the counters are the thread's
 * own: plain loads and stores, no locked instruction on the hot path (issue 18: -t 1). */
static inline int64_t rlx_cpu_claim(_Atomic int64_t *next, int64_t n, int nth)
{
    if (nth > 1) return atomic_fetch_add_explicit(next, n, memory_order_relaxed);
    const int64_t c = atomic_load_explicit(next, memory_order_relaxed);
    atomic_store_explicit(next, c + n, memory_order_relaxed);
    return c;
}

/* The parts rlx_cpu_claim_part splits a phase's units into on nth threads */
static inline int rlx_cpu_parts(int nth) { return nth < RLX_CPU_PARTS ? (nth > 1 ? nth : 1) : RLX_CPU_PARTS; }

/* Claims one of units [0, n) by parts: part q of P = rlx_cpu_parts(nth) holds units
 * [q n / P, (q + 1) n / P), counted in part[q]. Thread ith takes its own part's units first
 * (part ith % P, in order: rows near its previous ones), then the next parts' in turn, so a
 * slow thread's last units still go to whoever is free. *k is the caller's cursor over the
 * parts, 0 before its first claim. Returns the unit, or -1 once every part is exhausted. Unit
 * u of a phase of row chunks (rlx_cpu_row_chunks) covers the rows split(rows, u, n): the same
 * rows go to the same thread from step to step while the threads keep pace. */
static inline int64_t rlx_cpu_claim_part(_Atomic int32_t *part, int64_t n, int ith, int nth, int *k)
{
    const int P = rlx_cpu_parts(nth);
    for (; *k < P; ++*k) {
        const int q = (ith + *k) % P;
        const int64_t lo = n * q / P, hi = n * (q + 1) / P;
        if (lo >= hi) continue;
        int64_t c;
        if (nth > 1) {
            if (atomic_load_explicit(&part[q], memory_order_relaxed) >= hi - lo) continue;
            c = atomic_fetch_add_explicit(&part[q], 1, memory_order_relaxed);
        } else {
            c = atomic_load_explicit(&part[q], memory_order_relaxed);
            atomic_store_explicit(&part[q], (int32_t)(c + 1), memory_order_relaxed);
        }
        if (lo + c < hi) return lo + c;
    }
    return -1;
}

/* One of phase p's n units: by parts (rlx_cpu_claim_part, *k its cursor) or as they come
 * from next[p]; -1 once none is left. */
static inline int64_t rlx_cpu_claim_unit(rlx_cpu_sync *y, int p, int64_t n, bool by_parts, int ith, int nth, int *k)
{
    if (by_parts) return rlx_cpu_claim_part(y->part[p], n, ith, nth, k);
    const int64_t c = rlx_cpu_claim(&y->next[p], 1, nth);
    return c < n ? c : -1;
}

/* Counts n completed units of a phase of `target` (rlx_threadpool_done; on one thread a plain
 * store that the same thread's waits read). */
static inline void rlx_cpu_done(rlx_cpu_run *r, _Atomic unsigned *word, unsigned n, unsigned target, int nth)
{
    if (nth > 1) { rlx_threadpool_done(r->tp, word, n, target); return; }
    atomic_store_explicit(word, atomic_load_explicit(word, memory_order_relaxed) + n, memory_order_relaxed);
}

/* attention.c: the attention step, and the scratch floats one thread needs for heads of
 * head_dim, sequences of up to max_positions and KV blocks of block_size */
void rlx_cpu_attention(rlx_cpu_run *r, const rlx_step *s, int ith, int nth);
void rlx_cpu_attention_units(const rlx_cpu_run *r, const rlx_step *s, int nth, unsigned units[2]);
size_t rlx_cpu_attn_scratch_floats(int64_t head_dim, int64_t max_positions, int64_t block_size);
/* Tests: whether K.q of layers without a cache, heads under 64 values, runs with positions in
 * vector lanes (default) or through the float products; the numbers are the same. Set between
 * runs, not during one. */
void rlx__cpu_attn_kq_lanes(bool on);

/* ssm.c: the recurrent ops (SSM_CONV, DELTA_NET) over the batch's sequences and their state
 * slots */
void rlx_cpu_ssm_conv(rlx_cpu_run *r, const rlx_step *s, int ith, int nth);
void rlx_cpu_delta_net(rlx_cpu_run *r, const rlx_step *s, int ith, int nth);
/* the fused elementwise ops of s over columns [c0, c1) of output row `row` (y, cols wide) */
void rlx_cpu_apply_chain(rlx_cpu_run *r, const rlx_step *s, float *y, int64_t row, int64_t c0, int64_t c1, int64_t cols);

static inline float *rowp(rlx_cpu_run *r, int t, int64_t row)
{
    const rlx_graph *g = r->plan->graph;
    return (float *)(r->arena + r->plan->offset[t]) + row * g->tensors[t].cols;
}

static inline void split(int64_t n, int ith, int nth, int64_t *a, int64_t *b)
{
    *a = n * ith / nth;
    *b = n * (ith + 1) / nth;
}

/* cap * tanh(x * (1/cap)): ggml scales by the reciprocal, so do the same */
static inline float softcap(float x, float cap) { return cap * tanhf(x * (1.0f / cap)); }

#endif
