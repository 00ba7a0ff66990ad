/* cpu_backend.c - the reference backend: host memory, a thread pool, kernels of cpu_ops.c.
 * One run() executes every step of the plan inside a single pool dispatch, with a barrier
 * between steps. Its memory (mem_init) follows the model's description: per KV layer a K and
 * a V array at that layer's row width, per recurrent-state layer n_state_slots slots (the
 * recurrent ops of ssm.c update them in place; state_read/state_write give host access),
 * nothing for other layers. */
#include "backends/backend.h"
#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/nth_ctl.h"
#include "backends/cpu/repack.h"
#include "backends/quant.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef struct cpu_backend {
    rlx_backend base;            /* must be first */
    rlx_threadpool *tp;
    rlx_nth_ctl nth;             /* one thread or all, per pass (nth_ctl.h) */
    _Atomic uint64_t passes[2];  /* forward passes run on one thread, on more (read by other threads) */
    uint8_t *arena;
    size_t arena_bytes;
    uint8_t *scratch;
    size_t scratch_bytes;
    int32_t *out_index;
    int32_t max_outputs;
    uint8_t *decode_tok, *onerow4_tok; /* per token / output row: arithmetic (see cpu_ops.h) */
    uint8_t *decode_out, *onerow4_out;
    int32_t *seq_count;          /* 5 x seq_cap + 1: tokens, output rows, their running counts,
                                    token offsets per sequence */
    int32_t *seq_tok;            /* max_tokens: token indices grouped by sequence */
    int32_t seq_cap;
    rlx_mem_desc kv;
    uint8_t *kv_mem;             /* per KV layer its K then its V (mmap'ed) */
    size_t kv_mem_bytes;
    size_t *kv_off;              /* 2 x n_layers: byte offsets of each layer's K and V (KV layers) */
    size_t *kv_hb;               /* n_layers: bytes of a (slot, head) piece (rlx__cpu_kv_at) */
    int64_t *layer_hd;           /* plan graph's n_layers: its attention's head_dim, 0 without one
                                    or with two that differ (the KV layout's heads, cpu_mem_init) */
    int32_t n_layer_hd;
    uint8_t *state_mem;          /* per state layer n_state_slots slots (mmap'ed) */
    size_t state_mem_bytes;
    size_t *state_off;           /* n_layers: byte offset of each state layer's slots */
    float *attn_scratch;
    size_t attn_floats;          /* per thread */
    size_t attn_scratch_bytes;   /* mmap'ed, all threads */
    size_t attn_stride;
    int64_t attn_hd;             /* the plan's largest head_dim */
    int32_t max_tokens;          /* the plan's batch size (attention without a cache spans it) */
    size_t matmul_weight_bytes;  /* weight bytes one token streams through (plan's matmuls) */
    uint8_t *row_scratch;        /* per thread: one converted activation row */
    size_t row_stride;
    rlx_cpu_sync *sync;          /* per plan step: work counters */
    uint8_t *no_barrier;         /* per step i: step i+1 may start before step i ends */
    rlx_packed_weight *packed;   /* per graph tensor: its packed copy (repack.h), or NULL */
    int n_packed;                /* entries of packed (the plan graph's tensors) */
    size_t packed_bytes;
} cpu_backend;

/* Below this many weight bytes x tokens a step runs on one thread: the barriers between
 * ~10 steps per layer cost more than the arithmetic (measured on stories260K: 816 tok/s on
 * one thread vs 150-300 on two). */
#define CPU_SINGLE_THREAD_WORK (4u << 20)

/* The calling thread's CPU time in seconds (-1: unknown), for nth_ctl.h. */
static double thread_cpu(void)
{
    struct timespec ts;
    return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) ? -1 : (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Bytes of the arena tensor t may occupy (over-approximated with the larger row count). */
static bool touches(const rlx_plan *p, int t, int64_t lo, int64_t hi)
{
    if (t < 0 || p->graph->tensors[t].is_weight || p->offset[t] < 0) return false;
    int64_t rows = RLX_MAX(p->max_tokens, p->max_outputs);
    int64_t a = p->offset[t], b = a + p->graph->tensors[t].cols * 4 * rows;
    return a < hi && lo < b;
}

static bool reads_range(const rlx_plan *p, const rlx_step *s, int64_t lo, int64_t hi)
{
    for (int k = 0; k < RLX_NODE_MAX_IN; k++)
        if (touches(p, s->node.in[k], lo, hi)) return true;
    for (int k = 0; k < s->n_chain; k++)
        if (touches(p, s->chain[k].operand, lo, hi)) return true;
    return false;
}

/* Step b can overlap step a (no barrier between them) when b reads nothing a writes and writes
 * nothing a reads or writes, e.g. the q/k/v or gate/up projections of one input. Attention keeps
 * its barriers (it stores and reads the KV cache). */
static bool independent(const rlx_plan *p, const rlx_step *a, const rlx_step *b)
{
    if (a->node.op == RLX_OP_ATTENTION || b->node.op == RLX_OP_ATTENTION) return false;
    /* nor do the recurrent ops (they read and write state slots) */
    if (a->node.op == RLX_OP_SSM_CONV || b->node.op == RLX_OP_SSM_CONV || a->node.op == RLX_OP_DELTA_NET ||
        b->node.op == RLX_OP_DELTA_NET)
        return false;
    const rlx_gtensor *ta = &p->graph->tensors[a->out], *tb = &p->graph->tensors[b->out];
    int64_t rows = RLX_MAX(p->max_tokens, p->max_outputs);
    int64_t alo = p->offset[a->out], ahi = alo + ta->cols * 4 * rows;
    int64_t blo = p->offset[b->out], bhi = blo + tb->cols * 4 * rows;
    if (alo < 0 || blo < 0) return false;
    return !reads_range(p, b, alo, ahi) && !(alo < bhi && blo < ahi) && !reads_range(p, a, blo, bhi);
}

static void *alloc64(size_t n) { return n ? aligned_alloc(64, (n + 63) & ~(size_t)63) : NULL; }

/* Every built-in op; a registered one when it brought a CPU kernel. */
static const char *cpu_unsupported(const rlx_backend *be, const rlx_graph *g, const rlx_node *n)
{
    (void)be;
    (void)g;
    const rlx_op_info *info = rlx_op_get(n->op);
    if (n->op < RLX_OP_COUNT) return NULL;
    return !info ? "unknown op" : info->cpu ? NULL : "no CPU kernel was registered for it";
}

static int cpu_prepare(rlx_backend *be_, const rlx_plan *plan, rlx_error *err)
{
    cpu_backend *be = (cpu_backend *)be_;
    int rc = rlx_backend_check_plan(be_, plan, err);
    if (rc) return rc;
    free(be->arena);
    free(be->scratch);
    free(be->out_index);
    free(be->row_scratch);
    free(be->sync);
    free(be->no_barrier);
    free(be->decode_tok);
    free(be->decode_out);
    free(be->onerow4_tok);
    free(be->onerow4_out);
    be->decode_tok = malloc((size_t)RLX_MAX(plan->max_tokens, 1));
    be->onerow4_tok = malloc((size_t)RLX_MAX(plan->max_tokens, 1));
    be->decode_out = malloc((size_t)RLX_MAX(plan->max_outputs, 1));
    be->onerow4_out = malloc((size_t)RLX_MAX(plan->max_outputs, 1));
    free(be->seq_tok);
    be->seq_tok = malloc((size_t)RLX_MAX(plan->max_tokens, 1) * sizeof *be->seq_tok);
    be->attn_hd = 1;
    be->max_tokens = plan->max_tokens;
    free(be->layer_hd);
    be->n_layer_hd = plan->graph->n_layers;
    be->layer_hd = calloc((size_t)RLX_MAX(be->n_layer_hd, 1), sizeof *be->layer_hd); /* checked below */
    for (int i = 0; i < plan->n_steps; i++)
        if (plan->steps[i].node.op == RLX_OP_ATTENTION) {
            const rlx_attn_params *ap = &plan->steps[i].node.p.attn;
            be->attn_hd = RLX_MAX(be->attn_hd, ap->head_dim);
            if (!be->layer_hd || ap->layer < 0 || ap->layer >= be->n_layer_hd) continue;
            int64_t *h = &be->layer_hd[ap->layer];
            *h = *h == 0 ? ap->head_dim : *h == ap->head_dim ? *h : -1;
        }
    be->no_barrier = calloc((size_t)RLX_MAX(plan->n_steps, 1), 1);
    /* a barrier-free run of steps must be pairwise independent, not just neighbours */
    for (int i = 0, start = 0; be->no_barrier && i + 1 < plan->n_steps; i++) {
        bool ok = true;
        for (int k = start; k <= i && ok; k++) ok = independent(plan, &plan->steps[k], &plan->steps[i + 1]);
        be->no_barrier[i] = ok;
        if (!ok) start = i + 1;
    }
    size_t row = 64;
    for (int i = 0; i < plan->n_steps; i++)
        if (plan->steps[i].node.op == RLX_OP_MATMUL) {
            const rlx_gtensor *w = &plan->graph->tensors[plan->steps[i].node.in[1]];
            row = RLX_MAX(row, rlx_row_bytes(rlx_vec_dot_type(w->wtype), w->ne[0]));
        }
    be->row_stride = (row + 63) & ~(size_t)63;
    be->row_scratch = alloc64(be->row_stride * (size_t)rlx_threadpool_size(be->tp));
    be->sync = alloc64((size_t)RLX_MAX(plan->n_steps, 1) * sizeof *be->sync);
    be->arena = alloc64(plan->arena_bytes);
    be->scratch = alloc64(plan->scratch_bytes ? plan->scratch_bytes : 64);
    be->out_index = malloc((size_t)plan->max_outputs * sizeof *be->out_index);
    if ((plan->arena_bytes && !be->arena) || !be->scratch || !be->out_index || !be->row_scratch || !be->sync || !be->no_barrier ||
        !be->decode_tok || !be->decode_out || !be->onerow4_tok || !be->onerow4_out || !be->seq_tok || !be->layer_hd)
        return rlx_errorf(err, RLX_ENOMEM, "cannot allocate %zu MiB of activations",
                          (plan->arena_bytes + plan->scratch_bytes) >> 20);
    be->arena_bytes = plan->arena_bytes;
    be->scratch_bytes = plan->scratch_bytes;
    be->max_outputs = plan->max_outputs;
    rlx__repack_free(be->packed, be->n_packed);
    be->packed = NULL;
    if ((rc = rlx__repack_plan(plan, &be->packed, &be->packed_bytes, err))) return rc;
    be->n_packed = plan->graph->n_tensors;
    be->matmul_weight_bytes = 0;
    for (int i = 0; i < plan->n_steps; i++)
        if (plan->steps[i].node.op == RLX_OP_MATMUL) {
            const rlx_gtensor *w = &plan->graph->tensors[plan->steps[i].node.in[1]];
            be->matmul_weight_bytes += rlx_row_bytes(w->wtype, w->ne[0]) * (size_t)w->ne[1];
        }
    return 0;
}

static void cpu_mem_free(cpu_backend *be)
{
    if (be->kv_mem) munmap(be->kv_mem, be->kv_mem_bytes);
    if (be->state_mem) munmap(be->state_mem, be->state_mem_bytes);
    if (be->attn_scratch) munmap(be->attn_scratch, be->attn_scratch_bytes);
    free(be->kv_off);
    free(be->kv_hb);
    free(be->state_off);
    be->kv_mem = be->state_mem = NULL;
    be->attn_scratch = NULL;
    be->kv_off = be->state_off = NULL;
    be->kv_hb = NULL;
    memset(&be->kv, 0, sizeof be->kv);
}

/* anonymous pages: zero, and committed only when first written, so a large default pool costs
 * nothing until sequences fill it */
static uint8_t *lazy_pages(size_t bytes)
{
    void *m = bytes ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    return m == MAP_FAILED ? NULL : m;
}

static int cpu_mem_init(rlx_backend *be_, const rlx_mem_desc *geo, rlx_error *err)
{
    cpu_backend *be = (cpu_backend *)be_;
    cpu_mem_free(be);
    int rc = rlx_mem_desc_check(geo, true, "CPU", err);
    if (rc) return rc;
    size_t slots = (size_t)geo->n_blocks * (size_t)geo->block_size, total = 0, stotal = 0;
    be->kv_off = calloc(2 * (size_t)geo->n_layers, sizeof *be->kv_off);
    be->kv_hb = calloc((size_t)geo->n_layers, sizeof *be->kv_hb);
    be->state_off = calloc((size_t)geo->n_layers, sizeof *be->state_off);
    if (!be->kv_off || !be->kv_hb || !be->state_off) { cpu_mem_free(be); return rlx_errorf(err, RLX_ENOMEM, "out of memory"); }
    for (int32_t l = 0; l < geo->n_layers; l++) {
        rlx_mem_layer m = rlx_mem_desc_layer(geo, l);
        if (m.kind == RLX_MEM_KV) {
            const size_t rb = rlx_kv_row_bytes(geo->type, m.kv_cols), lb = slots * rb;
            /* head-sized pieces for F16 / F32 rows of whole heads (the plan's attention of the
             * layer tells the head size); whole rows otherwise (rlx__cpu_kv_at) */
            const int64_t hd = l < be->n_layer_hd && be->layer_hd ? be->layer_hd[l] : 0;
            const bool heads = geo->type != RLX_Q8_0 && hd > 0 && m.kv_cols % hd == 0;
            be->kv_hb[l] = heads ? rb / (size_t)(m.kv_cols / hd) : rb;
            be->kv_off[2 * l] = total;
            be->kv_off[2 * l + 1] = total + lb;
            total += 2 * lb;
        } else if (m.kind == RLX_MEM_STATE) {
            be->state_off[l] = stotal;
            stotal += (size_t)geo->n_state_slots * (size_t)m.state_bytes;
        }
    }
    be->kv_mem = lazy_pages(total);
    be->kv_mem_bytes = total;
    be->state_mem = lazy_pages(stotal);
    be->state_mem_bytes = stotal;
    /* attention scratch: lazily committed like the pool, so only what sequences use costs */
    /* positions one item reads: a sequence's cache, or a whole batch for layers without one */
    const size_t span = RLX_MAX(slots, (size_t)RLX_MAX(be->max_tokens, 1));
    be->attn_stride = (span + 63) / 64 * 64 + 64;
    be->attn_floats = rlx_cpu_attn_scratch_floats(be->attn_hd, (int64_t)span, geo->block_size);
    size_t ab = (size_t)rlx_threadpool_size(be->tp) * be->attn_floats * sizeof(float);
    be->attn_scratch = (float *)lazy_pages(ab);
    be->attn_scratch_bytes = ab;
    if ((total && !be->kv_mem) || (stotal && !be->state_mem) || !be->attn_scratch) {
        cpu_mem_free(be);
        return rlx_errorf(err, RLX_ENOMEM, "cannot allocate %zu MiB for the KV cache and %zu MiB of recurrent state",
                          total >> 20, stotal >> 20);
    }
    be->kv = *geo;
    return 0;
}

/* One block of a layer between backend.h's row layout (rows, host buffers) and the pool's
 * (rlx__cpu_kv_at): out = true copies pool -> rows. */
static int kv_block_io(cpu_backend *be, int32_t layer, int32_t block, uint8_t *k, uint8_t *v, bool out, rlx_error *err)
{
    if (layer < 0 || layer >= be->kv.n_layers || block < 0 || block >= be->kv.n_blocks ||
        rlx_mem_desc_layer(&be->kv, layer).kind != RLX_MEM_KV)
        return rlx_errorf(err, RLX_ERANGE, "KV block or layer out of range");
    const size_t B = (size_t)be->kv.block_size, rb = rlx_kv_row_bytes(be->kv.type, rlx_mem_desc_layer(&be->kv, layer).kv_cols);
    const size_t hb = be->kv_hb[layer], s0 = (size_t)block * B;
    for (int w = 0; w < 2; w++) {
        uint8_t *pool = be->kv_mem + be->kv_off[2 * layer + w], *rows = w ? v : k;
        for (size_t s = 0; s < B; s++)
            for (size_t c = 0; c < rb; c += hb) {
                uint8_t *p = pool + rlx__cpu_kv_at(s0 + s, c, B, rb, hb), *q = rows + s * rb + c;
                memcpy(out ? q : p, out ? p : q, hb);
            }
    }
    return 0;
}

static int cpu_kv_read_block(rlx_backend *be_, int32_t layer, int32_t block, void *k, void *v, rlx_error *err)
{
    return kv_block_io((cpu_backend *)be_, layer, block, k, v, true, err);
}

static int cpu_kv_write_block(rlx_backend *be_, int32_t layer, int32_t block, const void *k, const void *v, rlx_error *err)
{
    return kv_block_io((cpu_backend *)be_, layer, block, (uint8_t *)k, (uint8_t *)v, false, err);
}

/* The bytes of one state slot of a RLX_MEM_STATE layer; NULL (with err) when out of range. */
static uint8_t *state_slot(cpu_backend *be, int32_t layer, int32_t slot, size_t *bytes, rlx_error *err)
{
    if (layer < 0 || layer >= be->kv.n_layers || slot < 0 || slot >= be->kv.n_state_slots ||
        rlx_mem_desc_layer(&be->kv, layer).kind != RLX_MEM_STATE) {
        rlx_errorf(err, RLX_ERANGE, "state slot %d of layer %d out of range", slot, layer);
        return NULL;
    }
    *bytes = (size_t)rlx_mem_desc_layer(&be->kv, layer).state_bytes;
    return be->state_mem + be->state_off[layer] + (size_t)slot * *bytes;
}

static int cpu_state_read(rlx_backend *be_, int32_t layer, int32_t slot, void *buf, rlx_error *err)
{
    size_t n = 0;
    uint8_t *p = state_slot((cpu_backend *)be_, layer, slot, &n, err);
    if (!p) return RLX_ERANGE;
    memcpy(buf, p, n);
    return 0;
}

static int cpu_state_write(rlx_backend *be_, int32_t layer, int32_t slot, const void *buf, rlx_error *err)
{
    size_t n = 0;
    uint8_t *p = state_slot((cpu_backend *)be_, layer, slot, &n, err);
    if (!p) return RLX_ERANGE;
    memcpy(p, buf, n);
    return 0;
}

/* rows a matmul step converts into the shared scratch (0: none, or a private row per thread) */
static int64_t shared_scratch_rows(const rlx_cpu_run *r, const rlx_step *s)
{
    if (s->node.op != RLX_OP_MATMUL) return 0;
    const rlx_gtensor *x = &r->plan->graph->tensors[s->node.in[0]];
    int64_t T = x->rows == RLX_ROWS_TOKENS ? r->batch->n_tokens : x->rows == RLX_ROWS_OUTPUTS ? r->batch->n_outputs : 1;
    return T > 1 ? T : 0;
}

/* Every thread walks the steps, claiming what is left of each. Where the old scheme put a
 * barrier, a thread instead waits until every unit of the steps since the previous wait is
 * complete: a thread that is descheduled while holding no unit does not hold the others, and
 * catches up through steps whose units are all claimed. Thread 0 returns after the last step's
 * units are claimed; the pool's run returns when the workers have too, so all are complete. */
static void run_all_steps(void *ctx, int ith, int nth)
{
    rlx_cpu_run *r = ctx;
    const rlx_plan *p = r->plan;
    if (nth == 1) { /* every unit is this thread's, in order: nothing to wait for */
        for (int i = 0; i < p->n_steps; i++) rlx_cpu_step(r, &p->steps[i], ith, 1);
        return;
    }
    bool scratch_busy = false; /* a step since the last wait converted into the shared scratch */
    for (int i = 0, g = 0; i < p->n_steps; i++) {
        rlx_cpu_step(r, &p->steps[i], ith, nth);
        scratch_busy |= shared_scratch_rows(r, &p->steps[i]) > 0;
        if (i + 1 == p->n_steps) break;
        /* the decision depends only on the plan and the batch, so every thread makes it */
        if (r->no_barrier[i] && !(scratch_busy && shared_scratch_rows(r, &p->steps[i + 1]))) continue;
        for (; g <= i; g++) rlx_cpu_step_wait(r, &p->steps[g]);
        scratch_busy = false;
    }
}

/* Arithmetic of every token and output row (see rlx_batch.decode), and the batch's tokens
 * grouped by sequence for attention. The per-sequence counts live on the backend and only grow
 * when a batch names more sequences than before. */
static int set_roles(cpu_backend *be, const rlx_batch *b)
{
    const size_t ns = (size_t)b->n_seqs;
    if (b->n_seqs > be->seq_cap) {
        int32_t *n = realloc(be->seq_count, (5 * ns + 1) * sizeof *n);
        if (!n) return RLX_ENOMEM;
        be->seq_count = n;
        be->seq_cap = b->n_seqs;
    }
    /* kinds first (into the per-token flags as scratch), then the flags they imply */
    rlx_batch_kinds(b, be->seq_count, be->decode_tok, be->decode_out);
    for (int32_t i = 0; i < b->n_tokens; i++) {
        be->onerow4_tok[i] = be->decode_tok[i] != RLX_TOKEN_PROMPT;
        be->decode_tok[i] = be->decode_tok[i] == RLX_TOKEN_DECODE;
    }
    for (int32_t o = 0; o < b->n_outputs; o++) {
        be->onerow4_out[o] = be->decode_out[o] != RLX_TOKEN_PROMPT;
        be->decode_out[o] = be->decode_out[o] == RLX_TOKEN_DECODE;
    }
    int32_t *tok = be->seq_count, *off = tok + 4 * ns;
    memset(tok, 0, (ns + 1) * sizeof *tok);
    memset(off, 0, (ns + 1) * sizeof *off);
    for (int32_t i = 0; i < b->n_tokens; i++) tok[b->seq[i]]++;
    for (int32_t q = 0; q < b->n_seqs; q++) off[q + 1] = off[q] + tok[q];
    /* off[] now becomes a fill cursor, then is restored */
    for (int32_t i = 0; i < b->n_tokens; i++) be->seq_tok[off[b->seq[i]]++] = i;
    for (int32_t q = b->n_seqs; q > 0; q--) off[q] = off[q - 1];
    off[0] = 0;
    return 0;
}

static int cpu_run(rlx_backend *be_, const rlx_plan *plan, const rlx_batch *b, float *out, rlx_error *err)
{
    cpu_backend *be = (cpu_backend *)be_;
    if (b->n_tokens <= 0 || b->n_tokens > plan->max_tokens || b->n_outputs > plan->max_outputs || b->n_outputs < 0)
        return rlx_errorf(err, RLX_EINVAL, "batch of %d tokens / %d outputs exceeds the plan (%d / %d)",
                          b->n_tokens, b->n_outputs, plan->max_tokens, plan->max_outputs);
    if (be->kv.n_layers <= 0) return rlx_errorf(err, RLX_EINVAL, "KV cache not initialised");
    if (plan->arena_bytes > be->arena_bytes || plan->scratch_bytes > be->scratch_bytes)
        return rlx_errorf(err, RLX_EINVAL, "plan was not prepared on this backend");
    int32_t o = 0;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        if (b->seq[i] < 0 || b->seq[i] >= b->n_seqs)
            return rlx_errorf(err, RLX_EINVAL, "batch token %d names sequence %d of %d", i, b->seq[i], b->n_seqs);
        if (b->output[i]) {
            if (o == b->n_outputs) return rlx_errorf(err, RLX_EINVAL, "batch marks more outputs than n_outputs");
            be->out_index[o++] = i;
        }
    }
    if (o != b->n_outputs) return rlx_errorf(err, RLX_EINVAL, "batch marks %d outputs, n_outputs is %d", o, b->n_outputs);
    if (set_roles(be, b)) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    rlx_cpu_run r = {
        .plan = plan, .batch = b, .tp = be->tp, .arena = be->arena, .scratch = be->scratch,
        .attn_scratch = be->attn_scratch, .attn_scratch_floats = be->attn_floats, .attn_scratch_stride = be->attn_stride,
        .row_scratch = be->row_scratch, .row_scratch_stride = be->row_stride, .sync = be->sync,
        .no_barrier = be->no_barrier,
        .out_index = be->out_index, .decode_tok = be->decode_tok, .onerow4_tok = be->onerow4_tok, .decode_out = be->decode_out,
        .onerow4_out = be->onerow4_out, .seq_tok = be->seq_tok, .seq_off = be->seq_count + 4 * (size_t)b->n_seqs, .kv = &be->kv, .kv_mem = be->kv_mem,
        .kv_off = be->kv_off, .kv_hb = be->kv_hb, .state_mem = be->state_mem, .state_off = be->state_off, .packed = be->packed,
    };
    atomic_init(&r.error, 0);
    size_t work = be->matmul_weight_bytes * (size_t)b->n_tokens;
    const bool small = work < CPU_SINGLE_THREAD_WORK;
    const int nth = small ? 1 : rlx_nth_choose(&be->nth, b->n_tokens);
    for (int i = 0; i < plan->n_steps; i++) {
        rlx_cpu_sync *y = &be->sync[i];
        unsigned u[2];
        rlx_cpu_step_units(&r, &plan->steps[i], nth, u);
        for (int k = 0; k < 2; k++) {
            atomic_store_explicit(&y->next[k], 0, memory_order_relaxed);
            atomic_store_explicit(&y->done[k], 0, memory_order_relaxed);
            for (int q = 0; q < RLX_CPU_PARTS; q++) atomic_store_explicit(&y->part[k][q], 0, memory_order_relaxed);
            y->units[k] = u[k];
        }
    }
    double t0 = small ? 0 : rlx_now(), c0 = small ? 0 : thread_cpu();
    rlx_threadpool_run_n(be->tp, nth, run_all_steps, &r);
    atomic_fetch_add_explicit(&be->passes[nth > 1], 1, memory_order_relaxed);
    if (!small) rlx_nth_record(&be->nth, b->n_tokens, nth, rlx_now() - t0, c0 >= 0 ? thread_cpu() - c0 : -1);
    int e = atomic_load(&r.error);
    if (e) return rlx_errorf(err, e, "batch holds a token id or position outside the model, its KV blocks or its recurrent state");
    const rlx_graph *g = plan->graph;
    const int32_t rows = g->output_kind == RLX_OUTPUT_HIDDEN ? b->n_tokens : b->n_outputs;
    if (out && rows)
        memcpy(out, be->arena + plan->offset[g->output], (size_t)rows * (size_t)g->tensors[g->output].cols * 4);
    return 0;
}

static void cpu_destroy(rlx_backend *be_)
{
    cpu_backend *be = (cpu_backend *)be_;
    rlx_threadpool_free(be->tp);
    free(be->arena);
    free(be->scratch);
    free(be->out_index);
    free(be->decode_tok);
    free(be->decode_out);
    free(be->onerow4_tok);
    free(be->onerow4_out);
    free(be->seq_count);
    free(be->seq_tok);
    free(be->layer_hd);
    cpu_mem_free(be);
    free(be->row_scratch);
    free(be->sync);
    free(be->no_barrier);
    rlx__repack_free(be->packed, be->n_packed);
    free(be);
}

static const rlx_backend_ops cpu_ops = {
    .name = "cpu",
    .unsupported = cpu_unsupported,
    .hidden_output = true,
    .prepare = cpu_prepare,
    .mem_init = cpu_mem_init,
    .run = cpu_run,
    .kv_read_block = cpu_kv_read_block,
    .kv_write_block = cpu_kv_write_block,
    .state_read = cpu_state_read,
    .state_write = cpu_state_write,
    .destroy = cpu_destroy,
};

void rlx_backend_cpu_passes(const rlx_backend *be_, uint64_t *one, uint64_t *more)
{
    const cpu_backend *be = be_ && be_->ops == &cpu_ops ? (const cpu_backend *)be_ : NULL;
    *one = be ? atomic_load_explicit(&be->passes[0], memory_order_relaxed) : 0;
    *more = be ? atomic_load_explicit(&be->passes[1], memory_order_relaxed) : 0;
}

size_t rlx_backend_cpu_packed_bytes(const rlx_backend *be_)
{
    return be_ && be_->ops == &cpu_ops ? ((const cpu_backend *)be_)->packed_bytes : 0;
}

int rlx_backend_cpu_create(rlx_backend **out, int n_threads, rlx_error *err)
{
    cpu_backend *be = calloc(1, sizeof *be);
    if (!be) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    be->base.ops = &cpu_ops;
    int rc = rlx_threadpool_create(&be->tp, n_threads, err);
    if (rc) { free(be); return rc; }
    rlx_nth_init(&be->nth, rlx_threadpool_size(be->tp), false);
    atomic_init(&be->passes[0], 0);
    atomic_init(&be->passes[1], 0);
    *out = &be->base;
    return 0;
}
