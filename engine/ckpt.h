/* ckpt.h - the recurrent-state checkpoint cache: copies of a sequence's whole recurrent state
 * (every state layer's slot bytes, concatenated in layer order) taken at block-aligned
 * positions, keyed by the chained content hash of the token blocks before that position (the
 * key of the KV prefix cache, engine/kv.h rlx_kv_hash), so a hit means the same tokens. Every
 * entry has the same size (the model's whole state); the cache holds as many as its byte
 * budget allows and evicts the least recently used (found or stored) first. A budget below one
 * entry disables it. Counts entries, bytes, hits and evictions for /metrics.
 *
 * engine/memory.c owns one per model (beside the state slots) and is its only user: it fills
 * entries from a slot (rlx_memory_checkpoint) and restores a slot from one (prefix lookup).
 *
 * Ownership: the cache owns every entry's bytes; pointers returned stay valid until the next
 * put or drop. Not thread-safe: the worker thread calls everything. */
#ifndef RLX_CKPT_H
#define RLX_CKPT_H

#include "backends/rlx.h"

typedef struct rlx_ckpt_entry rlx_ckpt_entry;

typedef struct rlx_ckpt_cache {
    size_t entry_bytes;         /* bytes of one checkpoint */
    int32_t max_entries;        /* budget / entry_bytes; 0: disabled */
    int32_t n_entries;
    rlx_ckpt_entry **buckets;   /* hash -> entries (chained) */
    uint32_t bucket_mask;
    rlx_ckpt_entry *lru_head, *lru_tail; /* least recently used first */
    uint64_t hits, evictions, stored;
} rlx_ckpt_cache;

/* Sets up a cache of entries of entry_bytes under budget_bytes (0, or less than one entry:
 * disabled, never an error). RLX_ENOMEM. */
int rlx_ckpt_init(rlx_ckpt_cache *c, size_t entry_bytes, size_t budget_bytes, rlx_error *err);
void rlx_ckpt_free(rlx_ckpt_cache *c);

static inline bool rlx_ckpt_enabled(const rlx_ckpt_cache *c) { return c->max_entries > 0; }
static inline size_t rlx_ckpt_bytes(const rlx_ckpt_cache *c) { return (size_t)c->n_entries * c->entry_bytes; }

/* The bytes of the checkpoint of `hash` at position pos (made most recently used, counted as
 * a hit when `hit`), or NULL. */
const uint8_t *rlx_ckpt_find(rlx_ckpt_cache *c, uint64_t hash, int32_t pos, bool hit);
/* Whether the checkpoint is held, without touching the LRU order. */
bool rlx_ckpt_contains(const rlx_ckpt_cache *c, uint64_t hash, int32_t pos);
/* A buffer of entry_bytes for the checkpoint of (hash, pos) for the caller to fill at once:
 * the held one (made most recently used) or a new one, evicting the least recently used
 * entries beyond the budget; NULL when disabled or out of memory. A caller that cannot fill
 * it drops it. */
uint8_t *rlx_ckpt_put(rlx_ckpt_cache *c, uint64_t hash, int32_t pos);
/* Forgets the checkpoint (no-op if absent). */
void rlx_ckpt_drop(rlx_ckpt_cache *c, uint64_t hash, int32_t pos);

#endif
