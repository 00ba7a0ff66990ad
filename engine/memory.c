/* memory.c - paged KV block tables, prefix sharing and recurrent-state slots behind one
 * interface (see memory.h). */
#include "engine/memory.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int rlx_memory_init(rlx_memory *m, rlx_backend *be, const rlx_mem_desc *d, rlx_kv_manager *kv, rlx_error *err)
{
    memset(m, 0, sizeof *m);
    m->be = be;
    m->desc = *d;
    m->kv = kv;
    size_t zero = 0;
    for (int32_t l = 0; l < d->n_layers; l++) {
        rlx_mem_layer x = rlx_mem_desc_layer(d, l);
        if (x.kind == RLX_MEM_KV) m->has_kv = true;
        if (x.kind == RLX_MEM_STATE) {
            m->has_state = true;
            if ((size_t)x.state_bytes > zero) zero = (size_t)x.state_bytes;
            m->state_bytes += (size_t)x.state_bytes;
        }
    }
    if (m->has_state && (!be->ops->state_write || d->n_state_slots <= 0))
        return rlx_errorf(err, RLX_EUNSUPPORTED, "the %s backend cannot hold recurrent state", be->ops->name);
    int rc = be->ops->mem_init(be, d, err);
    if (rc) return rc;
    if ((rc = rlx_kv_init(kv, d->n_blocks, d->block_size, err))) return rc;
    if (m->has_state) {
        m->free_slots = malloc((size_t)d->n_state_slots * sizeof *m->free_slots);
        m->zeros = calloc(1, zero);
        if (!m->free_slots || !m->zeros) {
            rlx_memory_free(m);
            return rlx_errorf(err, RLX_ENOMEM, "out of memory for the state slots");
        }
        /* lowest ids handed out first */
        for (int32_t i = 0; i < d->n_state_slots; i++) m->free_slots[i] = d->n_state_slots - 1 - i;
        m->n_free_slots = d->n_state_slots;
    }
    return 0;
}

void rlx_memory_free(rlx_memory *m)
{
    if (m->kv) rlx_kv_free(m->kv);
    rlx_ckpt_free(&m->ckpt);
    free(m->free_slots);
    free(m->zeros);
    memset(m, 0, sizeof *m);
}

int rlx_memory_state_cache(rlx_memory *m, size_t budget_bytes, rlx_error *err)
{
    rlx_ckpt_free(&m->ckpt);
    if (!m->has_state || !m->be->ops->state_read) return 0;
    return rlx_ckpt_init(&m->ckpt, m->state_bytes, budget_bytes, err);
}

double rlx_memory_usage(const rlx_memory *m)
{
    if (!m->kv || m->kv->n_blocks <= 0) return 0;
    if (!m->has_kv && m->has_state)
        return (double)(m->desc.n_state_slots - m->n_free_slots) / m->desc.n_state_slots;
    return (double)rlx_kv_used(m->kv) / m->kv->n_blocks;
}

void rlx_mem_seq_init(rlx_mem_seq *ms)
{
    memset(ms, 0, sizeof *ms);
    ms->slot = -1;
}

void rlx_mem_seq_free(rlx_mem_seq *ms)
{
    free(ms->blocks);
    ms->blocks = NULL;
    ms->n_blocks = ms->cap_blocks = 0;
}

static bool ensure_table(rlx_mem_seq *ms, int32_t need)
{
    if (need <= ms->cap_blocks) return true;
    int32_t nc = RLX_MAX(need, ms->cap_blocks * 2);
    int32_t *t = realloc(ms->blocks, (size_t)nc * sizeof *t);
    if (!t) return false;
    ms->blocks = t;
    ms->cap_blocks = nc;
    return true;
}

int rlx_mem_seq_reserve(const rlx_memory *m, rlx_mem_seq *ms, int64_t n_pos)
{
    int64_t B = m->desc.block_size > 0 ? m->desc.block_size : 1, need = (n_pos + B - 1) / B;
    if (need > INT32_MAX) return RLX_ENOMEM;
    return ensure_table(ms, (int32_t)need) ? 0 : RLX_ENOMEM;
}

/* Takes a free slot and clears it in every state layer, or fills it from a checkpoint (src:
 * the state layers' bytes in layer order). */
static int take_slot(rlx_memory *m, rlx_mem_seq *ms, const uint8_t *src)
{
    if (m->n_free_slots == 0) return RLX_EFULL;
    int32_t slot = m->free_slots[m->n_free_slots - 1];
    for (int32_t l = 0; l < m->desc.n_layers; l++) {
        rlx_mem_layer x = rlx_mem_desc_layer(&m->desc, l);
        if (x.kind != RLX_MEM_STATE) continue;
        int rc = m->be->ops->state_write(m->be, l, slot, src ? src : m->zeros, NULL);
        if (rc) return rc;
        if (src) src += x.state_bytes;
    }
    m->n_free_slots--;
    ms->slot = slot;
    return 0;
}

int rlx_memory_grow(rlx_memory *m, rlx_mem_seq *ms, int32_t n_pos)
{
    int32_t B = m->desc.block_size, need = (n_pos + B - 1) / B;
    if (!ensure_table(ms, need)) return RLX_ENOMEM;
    if (m->has_state && ms->slot < 0) {
        int rc = take_slot(m, ms, NULL);
        if (rc) return rc;
    }
    while (ms->n_blocks < need) {
        int32_t b = rlx_kv_alloc(m->kv);
        if (b < 0) return RLX_EFULL;
        ms->blocks[ms->n_blocks++] = b;
    }
    return 0;
}

void rlx_memory_release(rlx_memory *m, rlx_mem_seq *ms)
{
    for (int32_t i = 0; i < ms->n_blocks; i++) rlx_kv_release(m->kv, ms->blocks[i]);
    ms->n_blocks = 0;
    ms->n_hashed = ms->n_clean = 0;
    ms->last_hash = ms->clean_hash = 0;
    if (ms->slot >= 0) m->free_slots[m->n_free_slots++] = ms->slot;
    ms->slot = -1;
    ms->ckpt_pos = 0;
    ms->ckpt_hash = 0;
}

bool rlx_memory_prefix_reusable(const rlx_memory *m, int32_t pos)
{
    return pos == 0 || !m->has_state || (rlx_ckpt_enabled(&m->ckpt) && pos % m->desc.block_size == 0);
}

uint64_t rlx_memory_hash(uint64_t parent, const int32_t *tokens, int32_t n)
{
    return rlx_kv_hash(parent, tokens, n);
}

/* Positions of ms computed as prompt tokens (sched.c token_kind): [0, span); all when no prompt
 * length is set. */
static int32_t prompt_span(const rlx_mem_seq *ms)
{
    const int32_t p = ms->n_prompt;
    return p <= 0 ? INT32_MAX : p == 1 ? 0 : p - p % 4;
}

/* Whether block b of ms holds prompt tokens only. */
static bool block_clean(const rlx_mem_seq *ms, int32_t b, int32_t B) { return (int64_t)(b + 1) * B <= prompt_span(ms); }

/* The key of ms's block b: its tokens chained on the parent's key, and when any of its
 * positions is not a prompt token, how many of them are prompt tokens and how many a prompt's
 * tail (the rest generated: the kinds come in that order), so that only a sequence computing
 * them the same way finds it (memory.h). */
static uint64_t block_key(const rlx_mem_seq *ms, uint64_t parent, const int32_t *tokens, int32_t b, int32_t B)
{
    uint64_t h = rlx_kv_hash(parent, tokens + (size_t)b * B, B);
    if (block_clean(ms, b, B)) return h;
    const int32_t p = ms->n_prompt, a = b * B, span = prompt_span(ms), tail_end = p == 1 ? 0 : p;
    const int32_t kinds[2] = {RLX_MAX(0, RLX_MIN(B, span - a)),
                              RLX_MAX(0, RLX_MIN(a + B, tail_end) - RLX_MAX(a, span))};
    return rlx_kv_hash(h ^ 0xd6e8feb86659fd93ULL, kinds, 2);
}

/* ms holds its block b (key h) as registered: counts it among the clean ones if it is. */
static void note_hashed(rlx_mem_seq *ms, int32_t b, int32_t B, uint64_t h)
{
    ms->n_hashed = b + 1;
    ms->last_hash = h;
    if (ms->n_clean == b && block_clean(ms, b, B)) {
        ms->n_clean = b + 1;
        ms->clean_hash = h;
    }
}

/* A model with state layers: the longest prefix of cached KV blocks (for its attention layers;
 * none needed without) that ends where a checkpoint is held; the blocks past it go back, the
 * state slot is filled from the checkpoint. */
static int32_t state_prefix_lookup(rlx_memory *m, rlx_mem_seq *ms, const int32_t *tokens, int32_t n_tokens)
{
    int32_t B = m->desc.block_size, best = 0;
    uint64_t h = 0, best_hash = 0;
    if (ms->n_blocks || ms->slot >= 0 || m->n_free_slots == 0) return 0;
    for (int32_t i = 0; (i + 1) * B <= n_tokens - 1; i++) {
        if (!ensure_table(ms, i + 1)) break;
        h = block_key(ms, h, tokens, i, B);
        if (m->has_kv) {
            int32_t b = rlx_kv_lookup(m->kv, h);
            if (b < 0) break;
            ms->blocks[ms->n_blocks++] = b;
        }
        if (rlx_ckpt_contains(&m->ckpt, h, (i + 1) * B)) { best = i + 1; best_hash = h; }
    }
    /* blocks past the checkpoint go back (still cached); without KV layers the table is
     * filled with fresh blocks, which only count positions */
    while (ms->n_blocks > best) rlx_kv_release(m->kv, ms->blocks[--ms->n_blocks]);
    const uint8_t *src = best ? rlx_ckpt_find(&m->ckpt, best_hash, best * B, true) : NULL;
    bool ok = src != NULL;
    while (ok && ms->n_blocks < best) {
        int32_t b = rlx_kv_alloc(m->kv);
        if (b < 0) ok = false;
        else ms->blocks[ms->n_blocks++] = b;
    }
    if (ok && take_slot(m, ms, src) == 0) {
        uint64_t h2 = 0; /* the chain again, for the clean count (checkpoints lie in the prompt) */
        for (int32_t i = 0; i < best; i++) note_hashed(ms, i, B, h2 = block_key(ms, h2, tokens, i, B));
        ms->ckpt_pos = best * B;
        ms->ckpt_hash = best_hash;
        return best * B;
    }
    if (src) m->ckpt.hits--; /* not used after all */
    rlx_memory_release(m, ms);
    return 0;
}

int32_t rlx_memory_prefix_lookup(rlx_memory *m, rlx_mem_seq *ms, const int32_t *tokens, int32_t n_tokens)
{
    int32_t B = m->desc.block_size, got = 0;
    if (!rlx_memory_prefix_reusable(m, B)) return 0;
    if (m->has_state) return state_prefix_lookup(m, ms, tokens, n_tokens);
    while ((ms->n_hashed + 1) * B <= n_tokens - 1 && ensure_table(ms, ms->n_blocks + 1)) {
        uint64_t h = block_key(ms, ms->last_hash, tokens, ms->n_hashed, B);
        int32_t b = rlx_kv_lookup(m->kv, h);
        if (b < 0) break;
        ms->blocks[ms->n_blocks++] = b;
        note_hashed(ms, ms->n_hashed, B, h);
        got += B;
    }
    return got;
}

int32_t rlx_memory_pending_hashes(const rlx_memory *m, const rlx_mem_seq *ms, const int32_t *tokens, int32_t n_pos,
                                  uint64_t *out, int32_t cap)
{
    int32_t B = m->desc.block_size, n = 0;
    if (!rlx_memory_prefix_reusable(m, B)) return 0;
    uint64_t h = ms->last_hash;
    for (int32_t b = ms->n_hashed; (b + 1) * B <= n_pos && n < cap; b++) {
        h = block_key(ms, h, tokens, b, B);
        out[n++] = h;
    }
    return n;
}

uint64_t rlx_memory_next_lookup(const rlx_memory *m, const rlx_mem_seq *ms, const int32_t *tokens, int32_t n_tokens)
{
    int32_t B = m->desc.block_size;
    if (!rlx_memory_prefix_reusable(m, B) || (ms->n_hashed + 1) * B > n_tokens - 1) return 0;
    return block_key(ms, ms->last_hash, tokens, ms->n_hashed, B);
}

void rlx_memory_commit(rlx_memory *m, rlx_mem_seq *ms, const int32_t *tokens, int32_t n_computed)
{
    int32_t B = m->desc.block_size;
    if (!rlx_memory_prefix_reusable(m, B)) return;
    while ((ms->n_hashed + 1) * B <= n_computed) {
        uint64_t h = block_key(ms, ms->last_hash, tokens, ms->n_hashed, B);
        rlx_kv_register(m->kv, ms->blocks[ms->n_hashed], h);
        note_hashed(ms, ms->n_hashed, B, h);
    }
}

int rlx_memory_checkpoint(rlx_memory *m, rlx_mem_seq *ms, int32_t pos)
{
    int32_t B = m->desc.block_size;
    if (!m->has_state || !rlx_ckpt_enabled(&m->ckpt) || ms->slot < 0 || pos <= 0 || pos != ms->n_hashed * B)
        return 0;
    uint64_t h = ms->last_hash;
    int held = rlx_ckpt_contains(&m->ckpt, h, pos) ? 1 : 2;
    uint8_t *dst = rlx_ckpt_put(&m->ckpt, h, pos);
    if (!dst) return 0;
    if (held == 2) {
        uint8_t *p = dst;
        for (int32_t l = 0; l < m->desc.n_layers; l++) {
            rlx_mem_layer x = rlx_mem_desc_layer(&m->desc, l);
            if (x.kind != RLX_MEM_STATE) continue;
            if (m->be->ops->state_read(m->be, l, ms->slot, p, NULL)) {
                rlx_ckpt_drop(&m->ckpt, h, pos);
                return 0;
            }
            p += x.state_bytes;
        }
    }
    ms->ckpt_pos = pos;
    ms->ckpt_hash = h;
    return held;
}

bool rlx_memory_checkpoint_read(rlx_memory *m, uint64_t hash, int32_t pos, void *out)
{
    const uint8_t *src = rlx_ckpt_find(&m->ckpt, hash, pos, false);
    if (src) memcpy(out, src, m->state_bytes);
    return src != NULL;
}

bool rlx_memory_checkpoint_store(rlx_memory *m, uint64_t hash, int32_t pos, const void *bytes)
{
    uint8_t *dst = m->has_state ? rlx_ckpt_put(&m->ckpt, hash, pos) : NULL;
    if (dst) memcpy(dst, bytes, m->state_bytes);
    return dst != NULL;
}

int32_t rlx_memory_pin(rlx_memory *m, const rlx_mem_seq *ms, int32_t *out, uint64_t *last_hash)
{
    *last_hash = 0;
    if (!rlx_memory_prefix_reusable(m, m->desc.block_size)) return 0;
    int32_t n = ms->n_clean; /* blocks of prompt tokens: what a later prompt can reuse */
    uint64_t h = ms->clean_hash;
    if (m->has_state) { /* up to the latest checkpoint: a state cannot be cut back further */
        n = ms->ckpt_pos / m->desc.block_size;
        h = ms->ckpt_hash;
        if (n > ms->n_clean || !rlx_ckpt_contains(&m->ckpt, h, ms->ckpt_pos)) n = 0;
    }
    for (int32_t i = 0; i < n; i++) {
        out[i] = ms->blocks[i];
        rlx_kv_retain(m->kv, out[i]);
    }
    if (n) *last_hash = h;
    return n;
}

void rlx_memory_unpin(rlx_memory *m, const int32_t *blocks, int32_t n)
{
    for (int32_t i = 0; i < n; i++) rlx_kv_release(m->kv, blocks[i]);
}

bool rlx_memory_snapshots(const rlx_memory *m)
{
    if (m->has_state) return rlx_ckpt_enabled(&m->ckpt) && (!m->has_kv || (m->be->ops->kv_read_block && m->be->ops->kv_write_block));
    return m->has_kv && m->be->ops->kv_read_block && m->be->ops->kv_write_block;
}

size_t rlx_memory_layer_block_bytes(const rlx_memory *m, int32_t layer)
{
    rlx_mem_layer x = rlx_mem_desc_layer(&m->desc, layer);
    return x.kind == RLX_MEM_KV ? (size_t)m->desc.block_size * rlx_kv_row_bytes(m->desc.type, x.kv_cols) : 0;
}

int rlx_memory_read_block(rlx_memory *m, int32_t layer, int32_t block, void *k, void *v, rlx_error *err)
{
    if (!m->be->ops->kv_read_block) return rlx_errorf(err, RLX_EUNSUPPORTED, "the backend cannot read KV blocks");
    return m->be->ops->kv_read_block(m->be, layer, block, k, v, err);
}

int rlx_memory_write_block(rlx_memory *m, int32_t layer, int32_t block, const void *k, const void *v, rlx_error *err)
{
    if (!m->be->ops->kv_write_block) return rlx_errorf(err, RLX_EUNSUPPORTED, "the backend cannot write KV blocks");
    return m->be->ops->kv_write_block(m->be, layer, block, k, v, err);
}

int32_t rlx_memory_restore_block(rlx_memory *m, uint64_t hash, bool *fresh)
{
    int32_t b = rlx_kv_lookup(m->kv, hash);
    *fresh = b < 0;
    return b >= 0 ? b : rlx_kv_alloc(m->kv);
}

void rlx_memory_publish(rlx_memory *m, int32_t block, uint64_t hash)
{
    rlx_kv_register(m->kv, block, hash);
}
