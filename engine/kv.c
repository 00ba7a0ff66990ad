/* kv.c - block allocation, refcounts, content-hash registry and LRU eviction. */
#include "engine/kv.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27; x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

uint64_t rlx_kv_hash(uint64_t parent, const int32_t *tokens, int32_t n)
{
    uint64_t h = mix64(parent ^ 0x9e3779b97f4a7c15ULL) ^ (uint64_t)n;
    for (int32_t i = 0; i < n; i++) h = mix64(h ^ (uint32_t)tokens[i]) + 0x632be59bd9b4e019ULL;
    return h ? h : 1;
}

int rlx_kv_init(rlx_kv_manager *kv, int32_t n_blocks, int32_t block_size, rlx_error *err)
{
    memset(kv, 0, sizeof *kv);
    if (n_blocks <= 0 || block_size <= 0) return rlx_errorf(err, RLX_EINVAL, "KV pool needs at least one block");
    uint32_t tab = 16;
    while (tab < (uint32_t)n_blocks * 2) tab <<= 1;
    kv->n_blocks = n_blocks;
    kv->block_size = block_size;
    kv->refcount = calloc((size_t)n_blocks, sizeof *kv->refcount);
    kv->hash = calloc((size_t)n_blocks, sizeof *kv->hash);
    kv->lru_prev = malloc((size_t)n_blocks * sizeof *kv->lru_prev);
    kv->lru_next = malloc((size_t)n_blocks * sizeof *kv->lru_next);
    kv->free_stack = malloc((size_t)n_blocks * sizeof *kv->free_stack);
    kv->tab_key = calloc(tab, sizeof *kv->tab_key);
    kv->tab_val = malloc(tab * sizeof *kv->tab_val);
    kv->tab_mask = tab - 1;
    if (!kv->refcount || !kv->hash || !kv->lru_prev || !kv->lru_next || !kv->free_stack || !kv->tab_key || !kv->tab_val) {
        rlx_kv_free(kv);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory for the KV block table");
    }
    /* lowest ids handed out first */
    for (int32_t i = 0; i < n_blocks; i++) kv->free_stack[i] = n_blocks - 1 - i;
    kv->n_free = n_blocks;
    kv->lru_head = kv->lru_tail = -1;
    return 0;
}

void rlx_kv_free(rlx_kv_manager *kv)
{
    free(kv->refcount);
    free(kv->hash);
    free(kv->lru_prev);
    free(kv->lru_next);
    free(kv->free_stack);
    free(kv->tab_key);
    free(kv->tab_val);
    memset(kv, 0, sizeof *kv);
}

/* ---- hash table (linear probing with backward-shift deletion) ---- */

static int32_t tab_find(const rlx_kv_manager *kv, uint64_t h)
{
    for (uint32_t i = (uint32_t)h & kv->tab_mask;; i = (i + 1) & kv->tab_mask) {
        if (kv->tab_key[i] == 0) return -1;
        if (kv->tab_key[i] == h) return kv->tab_val[i];
    }
}

static void tab_put(rlx_kv_manager *kv, uint64_t h, int32_t block)
{
    uint32_t i = (uint32_t)h & kv->tab_mask;
    while (kv->tab_key[i] != 0) i = (i + 1) & kv->tab_mask;
    kv->tab_key[i] = h;
    kv->tab_val[i] = block;
}

static void tab_del(rlx_kv_manager *kv, uint64_t h)
{
    uint32_t i = (uint32_t)h & kv->tab_mask;
    while (kv->tab_key[i] != h) {
        if (kv->tab_key[i] == 0) return;
        i = (i + 1) & kv->tab_mask;
    }
    kv->tab_key[i] = 0;
    for (uint32_t j = (i + 1) & kv->tab_mask; kv->tab_key[j] != 0; j = (j + 1) & kv->tab_mask) {
        uint32_t home = (uint32_t)kv->tab_key[j] & kv->tab_mask;
        /* move j back into the hole if its home is not in (i, j] */
        if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
            kv->tab_key[i] = kv->tab_key[j];
            kv->tab_val[i] = kv->tab_val[j];
            kv->tab_key[j] = 0;
            i = j;
        }
    }
}

/* ---- LRU of cached blocks ---- */

static void lru_remove(rlx_kv_manager *kv, int32_t b)
{
    int32_t p = kv->lru_prev[b], n = kv->lru_next[b];
    if (p >= 0) kv->lru_next[p] = n; else kv->lru_head = n;
    if (n >= 0) kv->lru_prev[n] = p; else kv->lru_tail = p;
    kv->n_cached--;
}

static void lru_push(rlx_kv_manager *kv, int32_t b)
{
    kv->lru_prev[b] = kv->lru_tail;
    kv->lru_next[b] = -1;
    if (kv->lru_tail >= 0) kv->lru_next[kv->lru_tail] = b; else kv->lru_head = b;
    kv->lru_tail = b;
    kv->n_cached++;
}

int32_t rlx_kv_alloc(rlx_kv_manager *kv)
{
    int32_t b;
    if (kv->n_free > 0) {
        b = kv->free_stack[--kv->n_free];
    } else if (kv->lru_head >= 0) {
        b = kv->lru_head;
        lru_remove(kv, b);
        tab_del(kv, kv->hash[b]);
        kv->hash[b] = 0;
        kv->evictions++;
    } else {
        return -1;
    }
    kv->refcount[b] = 1;
    return b;
}

void rlx_kv_retain(rlx_kv_manager *kv, int32_t block)
{
    kv->refcount[block]++;
}

void rlx_kv_release(rlx_kv_manager *kv, int32_t block)
{
    if (block < 0 || block >= kv->n_blocks || kv->refcount[block] <= 0) return;
    if (--kv->refcount[block] > 0) return;
    if (kv->hash[block]) lru_push(kv, block);
    else kv->free_stack[kv->n_free++] = block;
}

int32_t rlx_kv_lookup(rlx_kv_manager *kv, uint64_t hash)
{
    int32_t b = tab_find(kv, hash);
    if (b < 0) return -1;
    if (kv->refcount[b] == 0) lru_remove(kv, b);
    kv->refcount[b]++;
    return b;
}

void rlx_kv_register(rlx_kv_manager *kv, int32_t block, uint64_t hash)
{
    if (kv->hash[block] || tab_find(kv, hash) >= 0) return;
    kv->hash[block] = hash;
    tab_put(kv, hash, block);
}
