/* kv.h - the paged KV cache's block manager (the memory itself belongs to the backend). The
 * engine reaches it only through engine/memory.h, which adds block tables, state slots and the
 * rules for sharing; CLI commands that drive a runner directly use rlx_runner_reserve.
 *
 * Blocks hold block_size token slots. A sequence owns a block table (ids in position order).
 * Full blocks can be registered under a chained hash of (parent hash, their tokens) so that a
 * later prompt with the same prefix reuses them instead of recomputing (refcounted sharing).
 * A block whose refcount drops to zero stays cached (evictable, LRU) while it is registered,
 * and goes back to the free list otherwise. Not thread-safe: owned by one worker thread. */
#ifndef RLX_KV_H
#define RLX_KV_H

#include "backends/rlx.h"

typedef struct rlx_kv_manager {
    int32_t n_blocks, block_size;
    int32_t *refcount;      /* per block */
    uint64_t *hash;         /* per block: registered content hash, 0 = none */
    int32_t *lru_prev, *lru_next; /* cached (refcount 0, hashed) blocks, oldest first */
    int32_t lru_head, lru_tail;
    int32_t *free_stack;    /* unhashed free blocks */
    int32_t n_free;
    int32_t n_cached;
    /* open-addressing table hash -> block */
    uint64_t *tab_key;
    int32_t *tab_val;
    uint32_t tab_mask;
    uint64_t evictions;
} rlx_kv_manager;

int rlx_kv_init(rlx_kv_manager *kv, int32_t n_blocks, int32_t block_size, rlx_error *err);
void rlx_kv_free(rlx_kv_manager *kv);

/* Blocks that can be handed out now (free + evictable cached). */
static inline int32_t rlx_kv_available(const rlx_kv_manager *kv) { return kv->n_free + kv->n_cached; }
static inline int32_t rlx_kv_used(const rlx_kv_manager *kv) { return kv->n_blocks - kv->n_free - kv->n_cached; }

/* A fresh block with refcount 1 (evicting the least recently used cached block if needed);
 * -1 if none is left. */
int32_t rlx_kv_alloc(rlx_kv_manager *kv);
/* Drops one reference. */
void rlx_kv_release(rlx_kv_manager *kv, int32_t block);
/* Adds one reference to a block already referenced. */
void rlx_kv_retain(rlx_kv_manager *kv, int32_t block);

/* Chained content hash of a full block; parent is 0 for the first block of a sequence. The
 * salt distinguishes models/KV types sharing one manager (usually 0). Never returns 0. */
uint64_t rlx_kv_hash(uint64_t parent, const int32_t *tokens, int32_t n);
/* The cached block holding content `hash`, with a reference added; -1 if none. */
int32_t rlx_kv_lookup(rlx_kv_manager *kv, uint64_t hash);
/* Marks a full, computed block as holding content `hash` (ignored if already known). */
void rlx_kv_register(rlx_kv_manager *kv, int32_t block, uint64_t hash);

#endif
