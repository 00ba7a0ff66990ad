/* ckpt.c - the recurrent-state checkpoint cache (see ckpt.h). */
#include "engine/ckpt.h"

#include <stdlib.h>
#include <string.h>

struct rlx_ckpt_entry {
    uint64_t hash;
    int32_t pos;
    rlx_ckpt_entry *chain;      /* next in its bucket */
    rlx_ckpt_entry *prev, *next; /* LRU list */
    uint8_t *bytes;
};

int rlx_ckpt_init(rlx_ckpt_cache *c, size_t entry_bytes, size_t budget_bytes, rlx_error *err)
{
    memset(c, 0, sizeof *c);
    c->entry_bytes = entry_bytes;
    if (entry_bytes == 0 || budget_bytes < entry_bytes) return 0;
    size_t n = budget_bytes / entry_bytes;
    c->max_entries = n > (size_t)INT32_MAX / 2 ? INT32_MAX / 2 : (int32_t)n;
    uint32_t nb = 64;
    while (nb < (uint32_t)c->max_entries && nb < (1u << 20)) nb <<= 1;
    if (!(c->buckets = calloc(nb, sizeof *c->buckets))) {
        c->max_entries = 0;
        return rlx_errorf(err, RLX_ENOMEM, "out of memory for the state checkpoint cache");
    }
    c->bucket_mask = nb - 1;
    return 0;
}

static void lru_unlink(rlx_ckpt_cache *c, rlx_ckpt_entry *e)
{
    if (e->prev) e->prev->next = e->next;
    else c->lru_head = e->next;
    if (e->next) e->next->prev = e->prev;
    else c->lru_tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_append(rlx_ckpt_cache *c, rlx_ckpt_entry *e)
{
    e->prev = c->lru_tail;
    e->next = NULL;
    if (c->lru_tail) c->lru_tail->next = e;
    else c->lru_head = e;
    c->lru_tail = e;
}

static rlx_ckpt_entry **slot_of(const rlx_ckpt_cache *c, uint64_t hash, int32_t pos)
{
    rlx_ckpt_entry **p = &c->buckets[(uint32_t)(hash ^ (hash >> 32)) & c->bucket_mask];
    while (*p && ((*p)->hash != hash || (*p)->pos != pos)) p = &(*p)->chain;
    return p;
}

static void remove_entry(rlx_ckpt_cache *c, rlx_ckpt_entry **p)
{
    rlx_ckpt_entry *e = *p;
    *p = e->chain;
    lru_unlink(c, e);
    free(e->bytes);
    free(e);
    c->n_entries--;
}

void rlx_ckpt_free(rlx_ckpt_cache *c)
{
    while (c->lru_head) remove_entry(c, slot_of(c, c->lru_head->hash, c->lru_head->pos));
    free(c->buckets);
    memset(c, 0, sizeof *c);
}

const uint8_t *rlx_ckpt_find(rlx_ckpt_cache *c, uint64_t hash, int32_t pos, bool hit)
{
    if (!rlx_ckpt_enabled(c)) return NULL;
    rlx_ckpt_entry *e = *slot_of(c, hash, pos);
    if (!e) return NULL;
    lru_unlink(c, e);
    lru_append(c, e);
    if (hit) c->hits++;
    return e->bytes;
}

bool rlx_ckpt_contains(const rlx_ckpt_cache *c, uint64_t hash, int32_t pos)
{
    return rlx_ckpt_enabled(c) && *slot_of(c, hash, pos) != NULL;
}

uint8_t *rlx_ckpt_put(rlx_ckpt_cache *c, uint64_t hash, int32_t pos)
{
    if (!rlx_ckpt_enabled(c)) return NULL;
    rlx_ckpt_entry *e = *slot_of(c, hash, pos);
    if (e) {
        lru_unlink(c, e);
        lru_append(c, e);
        return e->bytes;
    }
    while (c->n_entries >= c->max_entries && c->lru_head) {
        remove_entry(c, slot_of(c, c->lru_head->hash, c->lru_head->pos));
        c->evictions++;
    }
    if (!(e = calloc(1, sizeof *e)) || !(e->bytes = malloc(c->entry_bytes))) {
        free(e);
        return NULL;
    }
    e->hash = hash;
    e->pos = pos;
    rlx_ckpt_entry **p = slot_of(c, hash, pos); /* the bucket's end */
    *p = e;
    lru_append(c, e);
    c->n_entries++;
    c->stored++;
    return e->bytes;
}

void rlx_ckpt_drop(rlx_ckpt_cache *c, uint64_t hash, int32_t pos)
{
    if (!rlx_ckpt_enabled(c)) return;
    rlx_ckpt_entry **p = slot_of(c, hash, pos);
    if (*p) remove_entry(c, p);
}
