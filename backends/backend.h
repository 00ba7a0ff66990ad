/* backend.h - the one device interface. A backend runs compiled plans over batches; it owns
 * its device memory (activation arena, scratch, the paged KV pool and, for GPUs, weight
 * copies). Backends know nothing of models, serving or HTTP.
 *
 * A backend is an opaque handle: the interface table first, private state after. The CPU
 * backend is the reference every other backend is tested against. */
#ifndef RLX_BACKEND_H
#define RLX_BACKEND_H

#include "backends/graph.h"

/* The memory a model's layers keep between steps (graph.h rlx_mem_layer), as a backend
 * allocates it in mem_init().
 *
 * Paged KV (layers of kind RLX_MEM_KV): n_blocks blocks of block_size token slots shared by all
 * KV layers; per KV layer a K and a V array of n_blocks * block_size rows, one row per token
 * slot (slot = block * block_size + position in the block), rlx_kv_row_bytes(type, its
 * kv_cols) bytes apart: each layer has its own row width. Block b of a layer is rows
 * [b * block_size, (b + 1) * block_size), contiguous.
 *
 * Recurrent state (layers of kind RLX_MEM_STATE): n_state_slots slots per such layer of the
 * layer's state_bytes, zero after mem_init(); a batch sequence names its slot
 * (rlx_batch_seq.state_slot). The engine clears a slot (state_write of zeros) before a sequence
 * starts at position 0 in it. A backend that cannot hold a layer kind fails mem_init() with
 * RLX_EUNSUPPORTED naming the layer and the backend.
 *
 * KV row layout by `type` (what kv_read_block / kv_write_block exchange and the snapshot files
 * hold; a backend may keep its pool otherwise and convert there, as the CPU backend does,
 * backends/cpu/cpu_ops.h rlx__cpu_kv_at):
 *   RLX_F32   kv_cols floats.
 *   RLX_F16   kv_cols IEEE halves.
 *   RLX_Q8_0  kv_cols / 32 consecutive rlx_block_q8_0 (backends/quant.h: f16 scale d, then 32
 *             int8 qs; 34 bytes) covering columns [32 i, 32 i + 32); kv_cols must be a multiple
 *             of 32 (a head's slice may start inside a block). Stored with the reference Q8_0
 *             quantizer (rlx_quantize_row: d = amax / 127, qs = round-half-away(x / d)); read
 *             as x = f16_to_f32(d) * qs, and attention then computes q.k and p.v in f32 with
 *             q and p unrounded (as for an F32 cache). */
typedef struct rlx_mem_desc {
    int32_t n_layers;
    int64_t kv_cols;              /* row width of every layer when `layers` is NULL */
    int32_t n_blocks;
    int32_t block_size;
    int type;
    const rlx_mem_layer *layers;  /* n_layers entries (borrowed: valid until the next mem_init
                                     or destroy); NULL: every layer RLX_MEM_KV of kv_cols */
    int32_t n_state_slots;        /* slots of each RLX_MEM_STATE layer */
} rlx_mem_desc;

/* Layer l of a description. */
static inline rlx_mem_layer rlx_mem_desc_layer(const rlx_mem_desc *d, int32_t l)
{
    return d->layers ? d->layers[l] : (rlx_mem_layer){RLX_MEM_KV, d->kv_cols, 0};
}
/* Checks a description: sizes, every KV layer's row width against `type` (rlx_kv_type_check),
 * state sizes; with can_state false a RLX_MEM_STATE layer is RLX_EUNSUPPORTED, the message
 * naming `backend` and the layer. */
int rlx_mem_desc_check(const rlx_mem_desc *d, bool can_state, const char *backend, rlx_error *err);
/* Bytes of one KV block over every KV layer, K and V. */
size_t rlx_mem_block_bytes(const rlx_mem_desc *d);
/* Bytes of one state slot over every state layer. */
size_t rlx_mem_slot_bytes(const rlx_mem_desc *d);

/* Bytes of one token's K (or V) row of a layer; 0 when `type` is not a KV type (F32, F16,
 * Q8_0) or Q8_0 is asked for with kv_cols not a multiple of 32. */
size_t rlx_kv_row_bytes(int type, int64_t kv_cols);
/* Checks that the KV pool can use `type` for rows of kv_cols values; RLX_EUNSUPPORTED with a
 * sentence naming the fix otherwise. */
int rlx_kv_type_check(int type, int64_t kv_cols, rlx_error *err);

/* One sequence of a batch: its block table (block ids in position order; borrowed) and its
 * recurrent-state slot (required when the model has RLX_MEM_STATE layers, ignored otherwise;
 * the engine sets -1 then). */
typedef struct rlx_batch_seq {
    const int32_t *blocks;
    int32_t n_blocks;
    int32_t state_slot;
} rlx_batch_seq;

/* One forward step. All arrays are borrowed for the duration of run(). Token i of the batch
 * is `tokens[i]` at position `pos[i]` of sequence `seq[i]`; its K/V go to slot pos[i] of that
 * sequence's block table, whose blocks must cover it. Attention of token i sees positions
 * 0..pos[i] of its sequence (those of earlier steps and of this batch). Logits are produced
 * for the tokens with output[i] != 0, in batch order.
 *
 * decode[i] is the token's kind, which selects llama.cpp's arithmetic for it on the CPU backend
 * (one-row vs batched kernels) so logits match llama.cpp's bit for bit: RLX_TOKEN_DECODE a
 * generated token (a one-token step there), RLX_TOKEN_PROMPT a prompt token, RLX_TOKEN_PROMPT_TAIL
 * one of a prompt's last n % 4 tokens (left to one-row kernels by llama.cpp's 4-row gemm). The
 * kind comes from the request, not from the batch, so results stay batch invariant. NULL: derived
 * from the batch as llama.cpp would see it (a sequence's only token is a decode token, the last
 * c % 4 of its c tokens a tail); logit rows are derived that way from the sequence's output
 * rows, except that a decode token's logit row is always a decode row (a sequence's several
 * generated tokens in one step are speculative drafts, each a one-token step in llama.cpp). */
enum { RLX_TOKEN_PROMPT = 0, RLX_TOKEN_DECODE = 1, RLX_TOKEN_PROMPT_TAIL = 2 };
typedef struct rlx_batch {
    int32_t n_tokens;
    const int32_t *tokens;
    const int32_t *pos;
    const int32_t *seq;
    const uint8_t *output;
    int32_t n_outputs;
    int32_t n_seqs;
    const rlx_batch_seq *seqs;
    const uint8_t *decode;       /* optional, n_tokens RLX_TOKEN_* kinds */
} rlx_batch;

typedef struct rlx_backend rlx_backend;

typedef struct rlx_backend_ops {
    const char *name;
    /* Which ops this backend runs: NULL when it runs node n of g, else a short phrase saying
     * what it lacks (for the error rlx_backend_check_plan() composes). */
    const char *(*unsupported)(const rlx_backend *be, const rlx_graph *g, const rlx_node *n);
    /* Whether run() can return a RLX_OUTPUT_HIDDEN graph's states (every backend returns logits). */
    bool hidden_output;
    /* Allocates what running `plan` needs (arena, scratch); the plan must outlive the backend's
     * use of it. Refuses (rlx_backend_check_plan) a plan with an op or output it cannot run. */
    int (*prepare)(rlx_backend *be, const rlx_plan *plan, rlx_error *err);
    /* (Re)creates the model's memory (KV pool, state slots). Existing contents are lost. */
    int (*mem_init)(rlx_backend *be, const rlx_mem_desc *geo, rlx_error *err);
    /* Runs one step; the graph's output (f32, host memory) is written to `out`: for
     * RLX_OUTPUT_LOGITS n_outputs rows of logits, for RLX_OUTPUT_HIDDEN n_tokens rows of hidden
     * states, in batch order. */
    int (*run)(rlx_backend *be, const rlx_plan *plan, const rlx_batch *batch, float *out, rlx_error *err);
    /* Host access to a block's K and V of one KV layer, for snapshots (optional). */
    int (*kv_read_block)(rlx_backend *be, int32_t layer, int32_t block, void *k, void *v, rlx_error *err);
    int (*kv_write_block)(rlx_backend *be, int32_t layer, int32_t block, const void *k, const void *v, rlx_error *err);
    /* Host access to one recurrent-state slot of a RLX_MEM_STATE layer (state_bytes); required
     * of a backend that accepts state layers. */
    int (*state_read)(rlx_backend *be, int32_t layer, int32_t slot, void *buf, rlx_error *err);
    int (*state_write)(rlx_backend *be, int32_t layer, int32_t slot, const void *buf, rlx_error *err);
    /* Device memory still free after prepare(), in bytes, for sizing the KV pool (optional:
     * NULL where the pool lives in host memory, as on the CPU backend). */
    int (*mem_available)(rlx_backend *be, uint64_t *bytes, rlx_error *err);
    void (*destroy)(rlx_backend *be);
} rlx_backend_ops;

struct rlx_backend {
    const rlx_backend_ops *ops;
};

typedef struct rlx_backend_config {
    const char *name;   /* "cpu" (default), "vulkan", "cuda" */
    int n_threads;      /* CPU: <= 0 means rlx_cpu_count() (affinity and cgroup quota heeded) */
    int device;         /* GPU index */
    /* a folder where a GPU backend keeps what its driver compiled, reused at the next load
     * (Vulkan: its pipeline cache, vulkan.h); NULL or "": none */
    const char *cache_dir;
} rlx_backend_config;

/* Checks a batch against a plan and memory description before a backend runs it: sizes,
 * sequence indices, output count, positions inside each block table, block ids inside the pool,
 * state slots inside theirs, token ids below n_vocab, positions inside a learned-position table. GPU backends call it because their kernels cannot raise errors and an
 * out-of-range index there would touch foreign memory. */
int rlx_batch_validate(const rlx_batch *b, const rlx_plan *plan, const rlx_mem_desc *kv, int64_t n_vocab,
                       rlx_error *err);
/* For a backend that runs attention without a cache (encoders, graph.h): when the plan has
 * attention on a layer whose memory in kv is RLX_MEM_NONE, every sequence must be whole in the
 * batch, its tokens contiguous and at positions 0..n-1; RLX_EINVAL naming the token otherwise.
 * GPU backends call it after rlx_batch_validate (their kernels cannot raise it). */
int rlx_batch_whole_seqs(const rlx_batch *b, const rlx_plan *plan, const rlx_mem_desc *kv, rlx_error *err);

/* The RLX_TOKEN_* kind of every token (tok[n_tokens]: b->decode, or derived when NULL) and of
 * every output row (out[n_outputs]: always derived from the sequence's output rows), as
 * rlx_batch.decode describes. counts: caller scratch of 4 * n_seqs int32. */
void rlx_batch_kinds(const rlx_batch *b, int32_t *counts, uint8_t *tok, uint8_t *out);

/* An rlx_backend_ops.unsupported for backends with kernels for the built-in ops only and
 * causal attention over a KV cache only, and without the encoder ops (norm, get_rows_pos). */
const char *rlx_backend_builtin_causal(const rlx_backend *be, const rlx_graph *g, const rlx_node *n);
/* rlx_backend_builtin_causal plus the encoder ops: layer norm, position rows, and bidirectional
 * attention on a layer without a cache (not bidirectional attention over a KV pool): Vulkan and
 * CUDA. */
const char *rlx_backend_builtin_encoders(const rlx_backend *be, const rlx_graph *g, const rlx_node *n);

/* RLX_EUNSUPPORTED naming the op (or output) and the backend when the backend cannot run
 * every node of the plan's graph (ops->unsupported) or return its output kind; 0 otherwise.
 * Every backend's prepare() calls it, so loading a model that needs more is refused. */
int rlx_backend_check_plan(const rlx_backend *be, const rlx_plan *plan, rlx_error *err);

/* Creates the named backend; RLX_EUNSUPPORTED when it is not compiled in or no device exists. */
int rlx_backend_create(rlx_backend **out, const rlx_backend_config *cfg, rlx_error *err);
static inline void rlx_backend_destroy(rlx_backend *be) { if (be) be->ops->destroy(be); }

int rlx_backend_cpu_create(rlx_backend **out, int n_threads, rlx_error *err);
/* The CPU backend's forward passes so far: on one thread (small work, a one-thread pool, or the
 * faster choice lately: backends/cpu/nth_ctl.h) and on more. Any thread may ask; 0 and 0 for
 * another backend. */
void rlx_backend_cpu_passes(const rlx_backend *be, uint64_t *one, uint64_t *more);
/* Bytes of the CPU backend's packed weight copies (backends/cpu/repack.h: made by prepare()
 * for the kernel path in use; 0 for another backend). */
size_t rlx_backend_cpu_packed_bytes(const rlx_backend *be);

#endif
