/* memory.h - the engine's one interface to what a model keeps per sequence between steps (as
 * llama.cpp's llama_memory_i covers its KV, recurrent and hybrid caches). The model's memory
 * description (backends/backend.h rlx_mem_desc) says per layer: paged attention KV, a
 * recurrent state, or nothing. This module manages both kinds for one model:
 *
 *   - paged KV: block tables over the block manager (engine/kv.h), prefix sharing of full
 *     blocks by chained content hash, eviction of cached blocks. A block's key also says how
 *     its positions were computed when any was not a prompt token (a prompt's last n % 4
 *     tokens and generated tokens run through other kernels, so their K/V differ in the last
 *     bits; sched.c token_kind, fixed by the sequence's prompt length rlx_mem_seq.n_prompt):
 *     such a block serves only a sequence computing its positions the same way (its own
 *     recomputation after a preemption), never a later prompt that holds its tokens, which
 *     would then not get the numbers of a computation from position 0. Pins cover only the
 *     leading blocks of prompt tokens (n_clean), so a session's next turn recomputes its
 *     previous answer as prompt tokens, as a one-shot request of the whole history would;
 *   - recurrent state: a fixed pool of slots, one per running sequence; a slot is cleared
 *     (zeros written through the backend) when a sequence takes it at position 0, or filled
 *     from a checkpoint when it starts later;
 *   - state checkpoints (engine/ckpt.h): copies of a sequence's whole state (every state
 *     layer's slot) at block-aligned positions, keyed by the same chained block hash as the KV
 *     prefix cache, in an LRU under a byte budget (rlx_memory_state_cache; none by default).
 *
 * A hybrid model has both. A recurrent state holds every earlier token and cannot be cut back
 * to a block boundary, so a model with state layers shares a prefix only at a position where
 * a checkpoint was taken: the prefix lookup takes the longest block-aligned prefix whose KV
 * blocks are all cached AND whose checkpoint is held, restores the state slot from it and
 * starts there (else at 0). When the scheduler takes checkpoints is its policy (engine/sched.c:
 * prompt ends rounded down to a block and every N prefill tokens, prompt positions only).
 * Session pins and snapshots of such a model cover the blocks up to the sequence's latest
 * checkpoint (rlx_mem_seq.ckpt_pos), and a snapshot carries that checkpoint's bytes. Without a
 * checkpoint cache a model with state layers shares nothing, pins nothing and writes no
 * snapshots (its history is recomputed); rlx_memory_prefix_reusable() says so.
 * Even without KV layers the block tables still count positions (the pool bounds lengths).
 *
 * The scheduler (admission, growth, preemption = release + recompute), session pins and
 * snapshots (engine/sched.c, worker_session.c, session_snapshot.c) use only this interface.
 *
 * Ownership: the runner owns the rlx_memory, the block manager it points to and the backend;
 * each sequence owns its rlx_mem_seq (its block table and state slot). Not thread-safe: the
 * worker thread (or a CLI command) calls everything. */
#ifndef RLX_MEMORY_H
#define RLX_MEMORY_H

#include "backends/backend.h"
#include "engine/ckpt.h"
#include "engine/kv.h"

typedef struct rlx_memory {
    rlx_backend *be;            /* borrowed */
    rlx_mem_desc desc;          /* what the backend was given (layers borrowed from the graph) */
    rlx_kv_manager *kv;         /* block manager (borrowed) */
    bool has_kv, has_state;
    int32_t *free_slots;        /* state slots not held by a sequence */
    int32_t n_free_slots;
    uint8_t *zeros;             /* the largest state of a layer, zero: clears a slot */
    size_t state_bytes;         /* one sequence's whole state: every state layer's slot */
    rlx_ckpt_cache ckpt;        /* state checkpoints (disabled until rlx_memory_state_cache) */
} rlx_memory;

/* One sequence's memory: its block table and its state slot. Zero-initialise, then set slot
 * to -1 (rlx_mem_seq_init). */
typedef struct rlx_mem_seq {
    int32_t *blocks;            /* block table (ids in position order) */
    int32_t n_blocks, cap_blocks;
    int32_t n_hashed;           /* leading full blocks registered in the prefix cache */
    uint64_t last_hash;         /* hash of block n_hashed - 1 (0 if none) */
    int32_t n_prompt;           /* the sequence's prompt length: positions before n_prompt -
                                   n_prompt % 4 are prompt tokens, the others a prompt's tail or
                                   generated (sched.c token_kind); <= 0: all are prompt tokens.
                                   Set by the owner; kept by rlx_memory_release */
    int32_t n_clean;            /* of the n_hashed, the leading ones holding prompt tokens only */
    uint64_t clean_hash;        /* hash of block n_clean - 1 (0 if none) */
    int32_t slot;               /* recurrent-state slot, -1 if none */
    int32_t ckpt_pos;           /* position of the latest checkpoint of this sequence's state
                                   (restored or taken; 0 if none); ckpt_hash is its key */
    uint64_t ckpt_hash;
} rlx_mem_seq;

/* Creates the backend's memory (mem_init) and the managers for `d`; kv is initialised here
 * and freed by rlx_memory_free. RLX_EUNSUPPORTED when the backend cannot hold a layer kind. */
int rlx_memory_init(rlx_memory *m, rlx_backend *be, const rlx_mem_desc *d, rlx_kv_manager *kv, rlx_error *err);
void rlx_memory_free(rlx_memory *m);
/* Gives a model with state layers a checkpoint cache of budget_bytes (0: none, as before;
 * less than one state: none). No-op without state layers or when the backend cannot read a
 * slot (state_read). RLX_ENOMEM. */
int rlx_memory_state_cache(rlx_memory *m, size_t budget_bytes, rlx_error *err);
static inline bool rlx_memory_has_ckpt(const rlx_memory *m) { return rlx_ckpt_enabled(&m->ckpt); }

static inline int32_t rlx_memory_block_size(const rlx_memory *m) { return m->desc.block_size; }
/* Positions the pool can hold for one sequence. */
static inline int64_t rlx_memory_capacity(const rlx_memory *m)
{
    return (int64_t)m->desc.n_blocks * m->desc.block_size;
}
/* Fraction of the pool in use (KV blocks, or state slots for a model without KV layers). */
double rlx_memory_usage(const rlx_memory *m);
/* Recurrent-state slots held by sequences, and in all (0 and 0 without state layers). */
static inline int32_t rlx_memory_slots_used(const rlx_memory *m) { return m->has_state ? m->desc.n_state_slots - m->n_free_slots : 0; }
static inline int32_t rlx_memory_slots_total(const rlx_memory *m) { return m->has_state ? m->desc.n_state_slots : 0; }

void rlx_mem_seq_init(rlx_mem_seq *ms);
/* Frees the block table; the memory must have been released first. */
void rlx_mem_seq_free(rlx_mem_seq *ms);
/* Makes room in the block table for n_pos positions up front, so that prefix lookups and growth
 * up to that length never allocate (an allocation failure there would silently skip the prefix
 * cache); RLX_ENOMEM. */
int rlx_mem_seq_reserve(const rlx_memory *m, rlx_mem_seq *ms, int64_t n_pos);

/* Makes ms cover positions [0, n_pos): blocks, and a cleared state slot when the model has
 * state layers. 0; RLX_EFULL when the pool has no block or slot left now (what was added
 * stays); RLX_ENOMEM; or the backend's error clearing a slot. */
int rlx_memory_grow(rlx_memory *m, rlx_mem_seq *ms, int32_t n_pos);
/* Drops all of ms's memory (blocks stay cached while registered; the slot is freed; the
 * checkpoints taken stay in the cache). Used for finishing and for preemption, after which the
 * sequence is recomputed from position 0, or from a checkpoint its next lookup finds. */
void rlx_memory_release(rlx_memory *m, rlx_mem_seq *ms);

/* Whether a sequence may start computing at position pos with memory computed by others
 * before it (prefix sharing): always at 0; past it, for a model with state layers only at a
 * block boundary and with a checkpoint cache (then only where a checkpoint is found). */
bool rlx_memory_prefix_reusable(const rlx_memory *m, int32_t pos);
/* Appends to an empty ms the cached full blocks of tokens[0..n_tokens) (never the block holding
 * the last token, whose logits must be computed); returns the positions reused (0 when the
 * model shares no prefix). With state layers: the longest such prefix whose checkpoint is
 * held; ms then holds a state slot filled from it (ckpt_pos set, a hit counted). No slot free
 * or nothing found: 0, ms stays empty. */
int32_t rlx_memory_prefix_lookup(rlx_memory *m, rlx_mem_seq *ms, const int32_t *tokens, int32_t n_tokens);
/* The content hashes of the full blocks ms completes once positions [0, n_pos) are computed,
 * beyond those registered, into out (at most cap); returns how many. Sharing models only. */
int32_t rlx_memory_pending_hashes(const rlx_memory *m, const rlx_mem_seq *ms, const int32_t *tokens, int32_t n_pos,
                                  uint64_t *out, int32_t cap);
/* The hash of the block a lookup of ms would try next (0 if none: no full block before the
 * last token, or no sharing). */
uint64_t rlx_memory_next_lookup(const rlx_memory *m, const rlx_mem_seq *ms, const int32_t *tokens, int32_t n_tokens);
/* Registers the full blocks of positions [0, n_computed) for sharing (no-op without it). */
void rlx_memory_commit(rlx_memory *m, rlx_mem_seq *ms, const int32_t *tokens, int32_t n_computed);

/* Takes a checkpoint of ms's state at position pos, which must be its registered length
 * (pos == n_hashed * block size, after rlx_memory_commit): 2 when stored now, 1 when already
 * held (made most recently used), 0 when not taken (no state layers, no cache, pos not at the
 * registered end, or the backend failed). Sets ms->ckpt_pos/ckpt_hash when 1 or 2. */
int rlx_memory_checkpoint(rlx_memory *m, rlx_mem_seq *ms, int32_t pos);
/* Copies the held checkpoint (hash, pos) to out (state_bytes); false if not held. */
bool rlx_memory_checkpoint_read(rlx_memory *m, uint64_t hash, int32_t pos, void *out);
/* Stores a checkpoint's bytes (a restored snapshot); false when the cache cannot hold it. */
bool rlx_memory_checkpoint_store(rlx_memory *m, uint64_t hash, int32_t pos, const void *bytes);

/* Pins: references to ms's registered blocks that outlive the sequence (a session between
 * turns). Writes up to ms->n_clean ids to out (the blocks of prompt tokens), each with a
 * reference; returns the count. With
 * state layers only the blocks up to ms's latest checkpoint still held (0 if none). *last_hash
 * gets the chained hash of the last pinned block (0 if none). */
int32_t rlx_memory_pin(rlx_memory *m, const rlx_mem_seq *ms, int32_t *out, uint64_t *last_hash);
void rlx_memory_unpin(rlx_memory *m, const int32_t *blocks, int32_t n);

/* Snapshots of shared blocks (session_snapshot.c). rlx_memory_snapshots: whether blocks can be
 * read and written (backend support; with state layers, a checkpoint cache too: a snapshot
 * then carries the checkpoint at its last block). Per KV layer the bytes of one block's K (and
 * as many of its V): 0 for a layer without KV. */
bool rlx_memory_snapshots(const rlx_memory *m);
size_t rlx_memory_layer_block_bytes(const rlx_memory *m, int32_t layer);
int rlx_memory_read_block(rlx_memory *m, int32_t layer, int32_t block, void *k, void *v, rlx_error *err);
int rlx_memory_write_block(rlx_memory *m, int32_t layer, int32_t block, const void *k, const void *v, rlx_error *err);
/* A restored block: the cached block holding `hash` (with a reference; *fresh false), or a new
 * block (*fresh true) to fill and then publish; -1 if the pool is full. */
int32_t rlx_memory_restore_block(rlx_memory *m, uint64_t hash, bool *fresh);
void rlx_memory_publish(rlx_memory *m, int32_t block, uint64_t hash);
/* Chained content hash of a full block of prompt tokens (engine/kv.h rlx_kv_hash): the key of
 * a pinned block. */
uint64_t rlx_memory_hash(uint64_t parent, const int32_t *tokens, int32_t n);

#endif
