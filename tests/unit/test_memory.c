/* test_memory.c - the per-layer memory description and the engine's memory interface
 * (engine/memory.h): KV and recurrent-state layers through the interface, backends that
 * refuse state layers, and a toy hybrid model (one recurrent-state layer, one KV layer) run by
 * the scheduler on a stub backend defined here: continuous batching and preemption must give
 * every sequence exactly its solo output.
 *
 * The stub's "recurrent" layer keeps state = state * 31 + token + 1 per slot and checks that a
 * slot starts cleared and sees every position once, in order; its KV layer stores each token
 * at the cell its block table names; the logits of a row are a hash of the state and of every
 * KV cell of positions 0..pos. A wrong slot, a state lost or reused across preemption, a
 * shared prefix the state never saw or a mixed-up block table changes the output or fails the
 * step. A state layer of 16 bytes also carries the slot's position in its bytes, so that a slot
 * restored from a state checkpoint continues where the checkpoint was taken (8 bytes: a write
 * always means position 0). */
#include "tests/rlx_test.h"
#include "tests/unit/test_synth_util.h"
#include "engine/engine.h"
#include "engine/memory.h"

#include <pthread.h>

/* ---- the stub backend ------------------------------------------------------------------ */

#define STUB_MAX_LAYERS 8

typedef struct stub {
    rlx_backend base;             /* must be first */
    rlx_mem_desc desc;
    rlx_mem_layer layers[STUB_MAX_LAYERS];
    int64_t n_vocab;
    int32_t *kv;                  /* per KV cell (block * block_size + offset): token + 1 */
    uint64_t *state;              /* per state slot */
    int32_t *next_pos;            /* per state slot: the position it expects next */
    int32_t clears, max_slot;
    /* a gate the test holds while it submits a set, so that every request is queued before
     * the second step whatever the host's speed (preemption must happen, not depend on timing) */
    pthread_mutex_t gate_mu;
    pthread_cond_t gate_cv;
    bool gate_held;
} stub;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31; x *= 0x7fb5d329728ea185ULL;
    x ^= x >> 27; x *= 0x81dadef4bc2dd44dULL;
    return x ^ (x >> 33);
}

static int stub_layer(const stub *s, rlx_mem_kind kind)
{
    for (int32_t l = 0; l < s->desc.n_layers; l++)
        if (s->layers[l].kind == kind) return l;
    return -1;
}

static int stub_prepare(rlx_backend *be, const rlx_plan *plan, rlx_error *err)
{
    (void)err;
    stub *s = (stub *)be;
    s->n_vocab = plan->graph->tensors[plan->graph->output].cols;
    return 0;
}

static int stub_mem_init(rlx_backend *be, const rlx_mem_desc *d, rlx_error *err)
{
    stub *s = (stub *)be;
    int rc = rlx_mem_desc_check(d, true, "stub", err);
    if (rc) return rc;
    if (d->n_layers > STUB_MAX_LAYERS) return rlx_errorf(err, RLX_EUNSUPPORTED, "stub: too many layers");
    s->desc = *d;
    for (int32_t l = 0; l < d->n_layers; l++) s->layers[l] = rlx_mem_desc_layer(d, l);
    s->desc.layers = s->layers;
    free(s->kv);
    free(s->state);
    free(s->next_pos);
    s->kv = calloc((size_t)d->n_blocks * (size_t)d->block_size, sizeof *s->kv);
    s->state = calloc((size_t)RLX_MAX(d->n_state_slots, 1), sizeof *s->state);
    s->next_pos = calloc((size_t)RLX_MAX(d->n_state_slots, 1), sizeof *s->next_pos);
    if (!s->kv || !s->state || !s->next_pos) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    return 0;
}

static int stub_state_write(rlx_backend *be, int32_t layer, int32_t slot, const void *buf, rlx_error *err)
{
    stub *s = (stub *)be;
    if (layer != stub_layer(s, RLX_MEM_STATE) || slot < 0 || slot >= s->desc.n_state_slots)
        return rlx_errorf(err, RLX_ERANGE, "stub: no state slot %d in layer %d", slot, layer);
    memcpy(&s->state[slot], buf, sizeof(uint64_t));
    uint64_t pos = 0;
    if (s->layers[layer].state_bytes >= 16) memcpy(&pos, (const uint8_t *)buf + 8, sizeof pos);
    s->next_pos[slot] = (int32_t)pos;
    s->clears++;
    return 0;
}

static int stub_state_read(rlx_backend *be, int32_t layer, int32_t slot, void *buf, rlx_error *err)
{
    stub *s = (stub *)be;
    if (layer != stub_layer(s, RLX_MEM_STATE) || slot < 0 || slot >= s->desc.n_state_slots)
        return rlx_errorf(err, RLX_ERANGE, "stub: no state slot %d in layer %d", slot, layer);
    memset(buf, 0, (size_t)s->layers[layer].state_bytes);
    memcpy(buf, &s->state[slot], sizeof(uint64_t));
    if (s->layers[layer].state_bytes >= 16) {
        uint64_t pos = (uint64_t)s->next_pos[slot];
        memcpy((uint8_t *)buf + 8, &pos, sizeof pos);
    }
    return 0;
}

static int stub_run(rlx_backend *be, const rlx_plan *plan, const rlx_batch *b, float *logits, rlx_error *err)
{
    stub *s = (stub *)be;
    pthread_mutex_lock(&s->gate_mu);
    while (s->gate_held) pthread_cond_wait(&s->gate_cv, &s->gate_mu);
    pthread_mutex_unlock(&s->gate_mu);
    int rc = rlx_batch_validate(b, plan, &s->desc, s->n_vocab, err);
    if (rc) return rc;
    const int32_t B = s->desc.block_size;
    const bool has_state = stub_layer(s, RLX_MEM_STATE) >= 0, has_kv = stub_layer(s, RLX_MEM_KV) >= 0;
    int32_t o = 0;
    for (int32_t t = 0; t < b->n_tokens; t++) {
        const rlx_batch_seq *bs = &b->seqs[b->seq[t]];
        const int32_t pos = b->pos[t], slot = bs->state_slot;
        uint64_t h = 0;
        if (has_state) {
            if (pos == 0 && s->state[slot] != 0) return rlx_errorf(err, RLX_EINVAL, "stub: slot %d was not cleared", slot);
            if (pos != s->next_pos[slot])
                return rlx_errorf(err, RLX_EINVAL, "stub: slot %d is at position %d, the batch gives %d", slot,
                                  s->next_pos[slot], pos);
            s->state[slot] = s->state[slot] * 31 + (uint64_t)b->tokens[t] + 1;
            s->next_pos[slot] = pos + 1;
            s->max_slot = RLX_MAX(s->max_slot, slot);
            h = s->state[slot];
        }
        if (has_kv) {
            s->kv[bs->blocks[pos / B] * B + pos % B] = b->tokens[t] + 1;
            for (int32_t p = 0; p <= pos; p++) h = mix(h ^ (uint64_t)s->kv[bs->blocks[p / B] * B + p % B]) + (uint64_t)p;
        }
        if (!b->output[t]) continue;
        float *row = logits + (size_t)o++ * (size_t)s->n_vocab;
        for (int64_t v = 0; v < s->n_vocab; v++) row[v] = (float)(mix(h ^ (uint64_t)v * 0x9e3779b97f4a7c15ULL) >> 40);
    }
    return 0;
}

static void stub_destroy(rlx_backend *be)
{
    stub *s = (stub *)be;
    free(s->kv);
    free(s->state);
    free(s->next_pos);
    pthread_mutex_destroy(&s->gate_mu);
    pthread_cond_destroy(&s->gate_cv);
    free(s);
}

static void stub_gate(stub *s, bool hold)
{
    pthread_mutex_lock(&s->gate_mu);
    s->gate_held = hold;
    pthread_cond_broadcast(&s->gate_cv);
    pthread_mutex_unlock(&s->gate_mu);
}

static const rlx_backend_ops stub_ops = {
    .name = "stub", .prepare = stub_prepare, .mem_init = stub_mem_init, .run = stub_run,
    .state_read = stub_state_read, .state_write = stub_state_write, .destroy = stub_destroy,
};

static stub *stub_new(void)
{
    stub *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->base.ops = &stub_ops;
    pthread_mutex_init(&s->gate_mu, NULL);
    pthread_cond_init(&s->gate_cv, NULL);
    return s;
}

/* ---- the interface itself -------------------------------------------------------------- */

static const rlx_mem_layer hybrid[2] = {{RLX_MEM_STATE, 0, 8}, {RLX_MEM_KV, 2, 0}};
static const rlx_mem_layer kv_only[2] = {{RLX_MEM_NONE, 0, 0}, {RLX_MEM_KV, 2, 0}};
static const rlx_mem_layer hybrid_pos[2] = {{RLX_MEM_STATE, 0, 16}, {RLX_MEM_KV, 2, 0}}; /* state + position */
/* the same with 400 KiB of state: a budget of 1 MiB holds two checkpoints */
static const rlx_mem_layer hybrid_big[2] = {{RLX_MEM_STATE, 0, 400 << 10}, {RLX_MEM_KV, 2, 0}};

TEST(memory_hybrid_slots)
{
    stub *s = stub_new();
    ASSERT(s != NULL);
    rlx_kv_manager kv;
    rlx_memory m;
    rlx_error err = {0};
    rlx_mem_desc d = {2, 0, 8, 4, RLX_F32, hybrid, 2};
    ASSERT_EQ(rlx_memory_init(&m, &s->base, &d, &kv, &err), 0);
    ASSERT(m.has_kv && m.has_state);
    ASSERT(rlx_memory_prefix_reusable(&m, 0));
    ASSERT(!rlx_memory_prefix_reusable(&m, 4)); /* a state cannot be cut back to a block */
    ASSERT(!rlx_memory_snapshots(&m));
    rlx_mem_seq a, b, c;
    rlx_mem_seq_init(&a);
    rlx_mem_seq_init(&b);
    rlx_mem_seq_init(&c);
    s->state[0] = s->state[1] = 77; /* dirty: taking a slot clears it */
    ASSERT_EQ(rlx_memory_grow(&m, &a, 9), 0);
    ASSERT_EQ(a.n_blocks, 3);
    ASSERT_EQ(a.slot, 0);
    ASSERT_EQ(s->state[0], 0);
    ASSERT_EQ(rlx_memory_grow(&m, &a, 12), 0); /* same slot, no new block */
    ASSERT_EQ(a.slot, 0);
    ASSERT_EQ(a.n_blocks, 3);
    ASSERT_EQ(rlx_memory_grow(&m, &b, 4), 0);
    ASSERT_EQ(b.slot, 1);
    ASSERT_EQ(s->state[1], 0);
    ASSERT_EQ(rlx_memory_grow(&m, &c, 1), RLX_EFULL); /* two slots */
    ASSERT_EQ(c.slot, -1);
    ASSERT(rlx_memory_usage(&m) > 0.49 && rlx_memory_usage(&m) < 0.51);
    /* full blocks are not registered, found or pinned: the state would miss their tokens */
    int32_t toks[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, pins[4];
    uint64_t ph = 0;
    rlx_memory_commit(&m, &a, toks, 12);
    ASSERT_EQ(a.n_hashed, 0);
    ASSERT_EQ(rlx_memory_pin(&m, &a, pins, &ph), 0);
    ASSERT_EQ(rlx_memory_prefix_lookup(&m, &c, toks, 12), 0);
    uint64_t hs[4];
    ASSERT_EQ(rlx_memory_pending_hashes(&m, &a, toks, 12, hs, 4), 0);
    ASSERT_EQ(rlx_memory_next_lookup(&m, &c, toks, 12), 0);
    /* release frees the slot (and the blocks); the next taker gets it cleared */
    s->state[0] = 5;
    rlx_memory_release(&m, &a);
    ASSERT_EQ(a.slot, -1);
    ASSERT_EQ(a.n_blocks, 0);
    ASSERT_EQ(rlx_memory_grow(&m, &c, 1), 0);
    ASSERT_EQ(c.slot, 0);
    ASSERT_EQ(s->state[0], 0);
    rlx_memory_release(&m, &b);
    rlx_memory_release(&m, &c);
    ASSERT_EQ(rlx_kv_used(&kv), 0);
    rlx_mem_seq_free(&a);
    rlx_mem_seq_free(&b);
    rlx_mem_seq_free(&c);
    rlx_memory_free(&m);
    stub_destroy(&s->base);
}

TEST(memory_kv_prefix_sharing)
{
    stub *s = stub_new();
    ASSERT(s != NULL);
    rlx_kv_manager kv;
    rlx_memory m;
    rlx_error err = {0};
    rlx_mem_desc d = {2, 0, 8, 4, RLX_F32, kv_only, 0};
    ASSERT_EQ(rlx_memory_init(&m, &s->base, &d, &kv, &err), 0);
    ASSERT(m.has_kv && !m.has_state);
    ASSERT(rlx_memory_prefix_reusable(&m, 8));
    ASSERT_EQ(rlx_memory_layer_block_bytes(&m, 0), 0);    /* no KV in layer 0 */
    ASSERT_EQ(rlx_memory_layer_block_bytes(&m, 1), 4 * 2 * 4);
    int32_t toks[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, pins[4];
    uint64_t ph = 0;
    rlx_mem_seq a, b;
    rlx_mem_seq_init(&a);
    rlx_mem_seq_init(&b);
    ASSERT_EQ(rlx_memory_grow(&m, &a, 10), 0);
    ASSERT_EQ(a.slot, -1);
    uint64_t hs[4];
    ASSERT_EQ(rlx_memory_pending_hashes(&m, &a, toks, 10, hs, 4), 2);
    rlx_memory_commit(&m, &a, toks, 10);
    ASSERT_EQ(a.n_hashed, 2);
    ASSERT_EQ(a.last_hash, hs[1]);
    ASSERT_EQ(rlx_memory_next_lookup(&m, &b, toks, 10), hs[0]);
    ASSERT_EQ(rlx_memory_prefix_lookup(&m, &b, toks, 10), 8);
    ASSERT(b.blocks[0] == a.blocks[0] && b.blocks[1] == a.blocks[1]);
    ASSERT_EQ(rlx_memory_pin(&m, &a, pins, &ph), 2);
    rlx_memory_release(&m, &a);
    rlx_memory_release(&m, &b);
    ASSERT_EQ(rlx_kv_used(&kv), 2); /* pinned */
    rlx_memory_unpin(&m, pins, 2);
    ASSERT_EQ(rlx_kv_used(&kv), 0);
    rlx_mem_seq_free(&a);
    rlx_mem_seq_free(&b);
    rlx_memory_free(&m);
    stub_destroy(&s->base);
}

/* A block holding positions that were not prompt tokens (a prompt's tail, generated tokens) is
 * keyed with how they were computed: a sequence of another prompt length holding the same
 * tokens does not find it (its arithmetic differs), the same sequence recomputed does; pins
 * stop at the blocks of prompt tokens. */
TEST(memory_keys_carry_token_kinds)
{
    stub *s = stub_new();
    ASSERT(s != NULL);
    rlx_kv_manager kv;
    rlx_memory m;
    rlx_error err = {0};
    rlx_mem_desc d = {2, 0, 16, 4, RLX_F32, kv_only, 0};
    ASSERT_EQ(rlx_memory_init(&m, &s->base, &d, &kv, &err), 0);
    int32_t toks[17], pins[8];
    for (int i = 0; i < 17; i++) toks[i] = 100 + i;
    uint64_t ph = 0;
    rlx_mem_seq a, b, c, e;
    rlx_mem_seq_init(&a);
    rlx_mem_seq_init(&b);
    rlx_mem_seq_init(&c);
    rlx_mem_seq_init(&e);
    a.n_prompt = 10; /* prompt tokens [0, 8), its tail 8 and 9, then generated */
    ASSERT_EQ(rlx_memory_grow(&m, &a, 16), 0);
    rlx_memory_commit(&m, &a, toks, 16);
    ASSERT_EQ(a.n_hashed, 4);
    ASSERT_EQ(a.n_clean, 2);
    uint64_t h = rlx_memory_hash(rlx_memory_hash(0, toks, 4), toks + 4, 4);
    ASSERT_EQ(a.clean_hash, h);
    b.n_prompt = 17; /* a later prompt holding the 16 tokens: prompt tokens up to 16 */
    ASSERT_EQ(rlx_memory_prefix_lookup(&m, &b, toks, 17), 8);
    c.n_prompt = 10; /* a recomputation of a (preempted, its 16 tokens back): all of it */
    ASSERT_EQ(rlx_memory_prefix_lookup(&m, &c, toks, 17), 16);
    ASSERT_EQ(c.n_clean, 2);
    e.n_prompt = 12; /* prompt tokens up to 12: the block [8, 12) is computed otherwise than a's */
    ASSERT_EQ(rlx_memory_prefix_lookup(&m, &e, toks, 17), 8);
    ASSERT_EQ(rlx_memory_pin(&m, &a, pins, &ph), 2); /* the blocks of prompt tokens */
    ASSERT_EQ(ph, h);
    rlx_memory_unpin(&m, pins, 2);
    rlx_memory_release(&m, &a);
    rlx_memory_release(&m, &b);
    rlx_memory_release(&m, &c);
    rlx_memory_release(&m, &e);
    ASSERT_EQ(a.n_prompt, 10); /* kept for the recomputation */
    rlx_mem_seq_free(&a);
    rlx_mem_seq_free(&b);
    rlx_mem_seq_free(&c);
    rlx_mem_seq_free(&e);
    rlx_memory_free(&m);
    stub_destroy(&s->base);
}

/* State checkpoints: taken at the registered end, found only where every KV block of the
 * prefix is cached too, restored into a fresh slot (state and position), evicted least
 * recently used first under a budget of two, pinned up to the latest one. */
TEST(memory_state_checkpoints)
{
    stub *s = stub_new();
    ASSERT(s != NULL);
    rlx_kv_manager kv;
    rlx_memory m;
    rlx_error err = {0};
    rlx_mem_desc d = {2, 0, 16, 4, RLX_F32, hybrid_pos, 3};
    ASSERT_EQ(rlx_memory_init(&m, &s->base, &d, &kv, &err), 0);
    ASSERT(!rlx_memory_has_ckpt(&m));
    ASSERT_EQ(rlx_memory_state_cache(&m, 2 * 16 + 15, &err), 0); /* room for two */
    ASSERT(rlx_memory_has_ckpt(&m));
    ASSERT(rlx_memory_prefix_reusable(&m, 4) && !rlx_memory_prefix_reusable(&m, 5));
    ASSERT(rlx_memory_snapshots(&m) == false); /* the stub cannot read KV blocks */
    int32_t t1[13] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
    int32_t t2[13] = {1, 2, 3, 4, 9, 9, 9, 9, 9, 9, 9, 9, 9};
    rlx_mem_seq a, b, c;
    rlx_mem_seq_init(&a);
    rlx_mem_seq_init(&b);
    rlx_mem_seq_init(&c);
    ASSERT_EQ(rlx_memory_grow(&m, &a, 12), 0);
    s->state[a.slot] = 111; s->next_pos[a.slot] = 4;
    rlx_memory_commit(&m, &a, t1, 4);
    ASSERT_EQ(rlx_memory_checkpoint(&m, &a, 5), 0);  /* not at the registered end */
    ASSERT_EQ(rlx_memory_checkpoint(&m, &a, 4), 2);  /* stored */
    ASSERT_EQ(rlx_memory_checkpoint(&m, &a, 4), 1);  /* already held */
    ASSERT_EQ(a.ckpt_pos, 4);
    s->state[a.slot] = 222; s->next_pos[a.slot] = 8;
    rlx_memory_commit(&m, &a, t1, 8);
    ASSERT_EQ(rlx_memory_checkpoint(&m, &a, 8), 2);
    ASSERT_EQ(m.ckpt.n_entries, 2);
    /* the longest prefix with a checkpoint: 8 (the block holding the last token is never used) */
    ASSERT_EQ(rlx_memory_prefix_lookup(&m, &b, t1, 13), 8);
    ASSERT(b.slot >= 0 && b.slot != a.slot);
    ASSERT_EQ(s->state[b.slot], 222);
    ASSERT_EQ(s->next_pos[b.slot], 8);
    ASSERT(b.n_blocks == 2 && b.blocks[0] == a.blocks[0] && b.blocks[1] == a.blocks[1]);
    ASSERT_EQ(m.ckpt.hits, 1);
    rlx_memory_release(&m, &b);
    /* another prompt shares the first block only */
    ASSERT_EQ(rlx_memory_prefix_lookup(&m, &b, t2, 13), 4);
    ASSERT_EQ(s->state[b.slot], 111);
    ASSERT_EQ(s->next_pos[b.slot], 4);
    ASSERT_EQ(b.n_blocks, 1);
    /* b goes on to 8 with other tokens: a third checkpoint evicts the least recently used
     * one (a's at 8: the one at 4 was just found) */
    ASSERT_EQ(rlx_memory_grow(&m, &b, 8), 0);
    s->state[b.slot] = 333; s->next_pos[b.slot] = 8;
    rlx_memory_commit(&m, &b, t2, 8);
    ASSERT_EQ(rlx_memory_checkpoint(&m, &b, 8), 2);
    ASSERT_EQ(m.ckpt.n_entries, 2);
    ASSERT_EQ(m.ckpt.evictions, 1);
    ASSERT_EQ(rlx_memory_prefix_lookup(&m, &c, t1, 13), 4); /* 8 is gone: back to 4 */
    ASSERT_EQ(s->state[c.slot], 111);
    rlx_memory_release(&m, &c);
    /* pins end at the sequence's latest checkpoint still held (a's at 8 was evicted) */
    int32_t pins[4];
    uint64_t ph = 0;
    ASSERT_EQ(rlx_memory_pin(&m, &a, pins, &ph), 0);
    ASSERT_EQ(rlx_memory_pin(&m, &b, pins, &ph), 2);
    ASSERT_EQ(ph, b.ckpt_hash);
    uint64_t img[2] = {0};
    ASSERT(rlx_memory_checkpoint_read(&m, ph, 8, img));
    ASSERT(img[0] == 333 && img[1] == 8);
    rlx_memory_unpin(&m, pins, 2);
    /* a prefix whose KV blocks are gone is not reused even with its checkpoint held */
    rlx_memory_release(&m, &a);
    rlx_memory_release(&m, &b);
    ASSERT_EQ(rlx_kv_used(&kv), 0);
    for (int i = 0; i < 16; i++) { int32_t x = rlx_kv_alloc(&kv); (void)x; } /* evicts every cached block */
    ASSERT_EQ(rlx_memory_prefix_lookup(&m, &c, t2, 13), 0);
    ASSERT_EQ(c.slot, -1);
    ASSERT_EQ(c.n_blocks, 0);
    rlx_mem_seq_free(&a);
    rlx_mem_seq_free(&b);
    rlx_mem_seq_free(&c);
    rlx_memory_free(&m);
    stub_destroy(&s->base);
}

/* A backend that cannot hold a layer kind says so; the CPU backend holds state slots. */
TEST(backends_and_state_layers)
{
    rlx_error err = {0};
    rlx_mem_desc d = {2, 0, 8, 4, RLX_F32, hybrid, 2};
    ASSERT_EQ(rlx_mem_desc_check(&d, false, "Vulkan", &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "Vulkan") && strstr(err.msg, "layer 0") && strstr(err.msg, "recurrent state"), "%s", err.msg);
    rlx_mem_desc none = {2, 0, 8, 4, RLX_F32, hybrid, 0};
    ASSERT_EQ(rlx_mem_desc_check(&none, true, "CPU", &err), RLX_EINVAL); /* state layers need slots */
    ASSERT_EQ(rlx_mem_block_bytes(&d), 2 * 4 * 2 * 4);
    ASSERT_EQ(rlx_mem_slot_bytes(&d), 8);

    rlx_backend *cpu = NULL;
    ASSERT_EQ(rlx_backend_cpu_create(&cpu, 1, &err), 0);
    ASSERT_EQ(cpu->ops->mem_init(cpu, &d, &err), 0);
    uint64_t x = 0x1234567890abcdefULL, y = 0;
    ASSERT_EQ(cpu->ops->state_read(cpu, 0, 1, &y, &err), 0);
    ASSERT_EQ(y, 0); /* zero after mem_init */
    ASSERT_EQ(cpu->ops->state_write(cpu, 0, 1, &x, &err), 0);
    ASSERT_EQ(cpu->ops->state_read(cpu, 0, 1, &y, &err), 0);
    ASSERT_EQ(y, x);
    ASSERT_EQ(cpu->ops->state_read(cpu, 0, 0, &y, &err), 0);
    ASSERT_EQ(y, 0);
    ASSERT_EQ(cpu->ops->state_write(cpu, 1, 0, &x, &err), RLX_ERANGE); /* layer 1 is KV */
    ASSERT_EQ(cpu->ops->state_write(cpu, 0, 2, &x, &err), RLX_ERANGE);
    float k[8], v[8];
    ASSERT_EQ(cpu->ops->kv_read_block(cpu, 0, 0, k, v, &err), RLX_ERANGE); /* layer 0 holds no KV */
    ASSERT_EQ(cpu->ops->kv_read_block(cpu, 1, 7, k, v, &err), 0);
    rlx_backend_destroy(cpu);
}

/* ---- the scheduler on a toy hybrid model ----------------------------------------------- */

#define N_SEQ 8
#define MAX_GEN 32

typedef struct result {
    int32_t tokens[MAX_GEN];
    int n, error;
    int32_t cached;
    char msg[256];
} result;

typedef struct collector {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
    result *res;
} collector;

typedef struct slot { collector *c; int idx; } slot;

static void on_event(void *user, const rlx_event *ev)
{
    slot *sl = user;
    collector *c = sl->c;
    pthread_mutex_lock(&c->mu);
    result *r = &c->res[sl->idx];
    if (ev->type == RLX_EV_TOKEN && r->n < MAX_GEN) r->tokens[r->n++] = ev->token;
    if (ev->type == RLX_EV_DONE || ev->type == RLX_EV_ERROR) {
        r->error = ev->type == RLX_EV_ERROR ? ev->error_code : 0;
        if (ev->error_msg) snprintf(r->msg, sizeof r->msg, "%s", ev->error_msg);
        r->cached = ev->usage.cached_tokens;
        c->pending--;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
}

static rlx_worker *start_cache(const rlx_mem_layer *layers, int32_t max_seqs, int32_t kv_blocks, int64_t cache_mib,
                               stub **out);

static const char *toy_model(void)
{
    static char path[512];
    static bool made;
    if (!made && !synth("--arch llama --preset tiny --type f32 --seed 3", "toy.gguf", path, sizeof path)) return NULL;
    made = true;
    return path;
}

static rlx_worker *start_cache(const rlx_mem_layer *layers, int32_t max_seqs, int32_t kv_blocks, int64_t cache_mib,
                               stub **out)
{
    const char *m = toy_model();
    if (!m) return NULL;
    stub *s = stub_new();
    if (!s) return NULL;
    rlx_worker_config cfg = {.model_path = m, .max_seqs = max_seqs, .max_batch_tokens = 64, .max_queue = 64,
                             .kv_block = 4, .kv_blocks = kv_blocks, .backend_impl = &s->base, .mem_layers = layers,
                             .state_cache_mib = cache_mib, .state_ckpt_every = 8};
    rlx_worker *w = NULL;
    rlx_error err = {0};
    if (rlx_worker_start(&w, &cfg, &err)) { fprintf(stderr, "start: %s\n", err.msg); return NULL; }
    *out = s;
    return w;
}

static rlx_worker *start(const rlx_mem_layer *layers, int32_t max_seqs, int32_t kv_blocks, stub **out)
{
    return start_cache(layers, max_seqs, kv_blocks, -1, out);
}

/* The same prefix of 9 tokens for every prompt (shareable in two blocks of 4), then its own. */
static size_t prompt(int i, int32_t *ids)
{
    size_t n = 10 + (size_t)(i * 5 % 13);
    for (size_t k = 0; k < n; k++) ids[k] = k < 9 ? 3 + (int32_t)k : 20 + (int32_t)((uint32_t)(i * 37 + (int)k * 11) % 200);
    return n;
}

static void run_set(rlx_worker *w, stub *s, bool together, result *res)
{
    if (together) stub_gate(s, true);
    collector c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, res};
    slot slots[N_SEQ];
    memset(res, 0, sizeof(result) * N_SEQ);
    for (int i = 0; i < N_SEQ; i++) {
        int32_t ids[32];
        size_t n = prompt(i, ids);
        slots[i] = (slot){&c, i};
        rlx_request *r = rlx_request_new();
        r->id = (uint64_t)i + 1;
        r->prompt_ids = malloc(n * sizeof *ids);
        memcpy(r->prompt_ids, ids, n * sizeof *ids);
        r->n_prompt = n;
        r->max_tokens = 16 + i % 5;
        r->ignore_eos = true;
        r->sampling.temperature = 0;
        r->on_event = on_event;
        r->user = &slots[i];
        pthread_mutex_lock(&c.mu);
        c.pending++;
        pthread_mutex_unlock(&c.mu);
        rlx_error err = {0};
        if (rlx_worker_submit(w, r, &err)) {
            res[i].error = err.code;
            pthread_mutex_lock(&c.mu);
            c.pending--;
            pthread_mutex_unlock(&c.mu);
        }
        if (!together) {
            pthread_mutex_lock(&c.mu);
            while (c.pending > 0) pthread_cond_wait(&c.cv, &c.mu);
            pthread_mutex_unlock(&c.mu);
        }
    }
    if (together) stub_gate(s, false);
    pthread_mutex_lock(&c.mu);
    while (c.pending > 0) pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
}

/* Solo runs (one sequence at a time, a large pool) against all sequences at once with a pool
 * that forces preemptions; returns the batched worker's stats. */
static void solo_vs_batched(const rlx_mem_layer *layers, int64_t cache_mib, result *solo, result *batch,
                            rlx_worker_stats *st, int32_t *max_slot)
{
    stub *s = NULL;
    rlx_worker *w = start(layers, 1, 0, &s); /* no checkpoints: every prompt computed whole */
    if (!w) SKIP("rlxd-synth is not built");
    run_set(w, s, false, solo);
    rlx_worker_stop(w, true);
    w = start_cache(layers, 4, 22, cache_mib, &s);
    ASSERT(w != NULL);
    run_set(w, s, true, batch);
    rlx_worker_get_stats(w, st);
    *max_slot = s->max_slot;
    rlx_worker_stop(w, true);
    fprintf(stderr, "  preemptions %llu, prefix hits %llu\n", (unsigned long long)st->preemptions,
            (unsigned long long)st->prefix_hits);
    for (int i = 0; i < N_SEQ; i++) {
        ASSERT_MSG(solo[i].error == 0, "solo %d: %s", i, solo[i].msg);
        ASSERT_MSG(batch[i].error == 0, "batched %d: %s", i, batch[i].msg);
        ASSERT_EQ(solo[i].n, 16 + i % 5);
        ASSERT_EQ(batch[i].n, solo[i].n);
        for (int k = 0; k < solo[i].n; k++) ASSERT_EQ(batch[i].tokens[k], solo[i].tokens[k]);
    }
}

TEST(hybrid_model_batching_and_preemption)
{
    static result solo[N_SEQ], batch[N_SEQ];
    rlx_worker_stats st;
    int32_t max_slot = 0;
    solo_vs_batched(hybrid, -1, solo, batch, &st, &max_slot);
    if (rlx_test_failed_ || rlx_test_skipped_) return;
    ASSERT(st.preemptions > 0);
    ASSERT(max_slot > 0);            /* several slots were in use at once */
    ASSERT_EQ(st.prefix_hits, 0);    /* no checkpoint cache: the state cannot take a shared prefix */
    for (int i = 0; i < N_SEQ; i++) ASSERT_EQ(batch[i].cached, 0);
    /* the outputs depend on the sequence: not one constant stream */
    bool differ = false;
    for (int i = 1; i < N_SEQ; i++) differ |= memcmp(solo[i].tokens, solo[0].tokens, sizeof solo[0].tokens) != 0;
    ASSERT(differ);
}

/* The same stub with its state layer removed: the KV layer's prefixes are shared again. */
TEST(kv_only_model_shares_prefixes)
{
    static result solo[N_SEQ], batch[N_SEQ];
    rlx_worker_stats st;
    int32_t max_slot = 0;
    solo_vs_batched(kv_only, 1, solo, batch, &st, &max_slot);
    if (rlx_test_failed_ || rlx_test_skipped_) return;
    ASSERT(st.preemptions > 0);
    ASSERT(st.prefix_hits > 0);
}

/* With state checkpoints the hybrid shares the prompts' common prefix (two blocks of 4: the
 * checkpoint at 8, every prompt's end rounded down to a block) through preemptions, and every
 * output is still its solo one (the solo worker has no checkpoints). */
TEST(hybrid_model_checkpoints_share_prefixes)
{
    static result solo[N_SEQ], batch[N_SEQ];
    rlx_worker_stats st;
    int32_t max_slot = 0;
    solo_vs_batched(hybrid_pos, 1, solo, batch, &st, &max_slot);
    if (rlx_test_failed_ || rlx_test_skipped_) return;
    fprintf(stderr, "  checkpoints %d, restores %llu\n", st.state_ckpt_entries, (unsigned long long)st.state_ckpt_hits);
    ASSERT(st.preemptions > 0);
    ASSERT(st.prefix_hits > 0);
    ASSERT(st.state_ckpt_hits > 0);
    ASSERT(st.state_ckpt_entries > 0 && st.state_ckpt_bytes == (uint64_t)st.state_ckpt_entries * 16);
    int hits = 0;
    for (int i = 0; i < N_SEQ; i++) hits += batch[i].cached > 0;
    ASSERT(hits >= N_SEQ - 1); /* the first computes the prefix, the others start at 8 */
}

/* A budget of two checkpoints for eight prompts: checkpoints are evicted (least recently used
 * first), prompts whose checkpoint is gone are recomputed, and every output is its solo one. */
TEST(hybrid_model_checkpoints_evicted_under_a_tiny_budget)
{
    static result solo[N_SEQ], batch[N_SEQ];
    rlx_worker_stats st;
    int32_t max_slot = 0;
    solo_vs_batched(hybrid_big, 1, solo, batch, &st, &max_slot);
    if (rlx_test_failed_ || rlx_test_skipped_) return;
    fprintf(stderr, "  checkpoints %d, evictions %llu, restores %llu\n", st.state_ckpt_entries,
            (unsigned long long)st.state_ckpt_evictions, (unsigned long long)st.state_ckpt_hits);
    ASSERT(st.state_ckpt_entries >= 1 && st.state_ckpt_entries <= 2);
    ASSERT_EQ(st.state_ckpt_bytes, (uint64_t)st.state_ckpt_entries * (400 << 10));
    ASSERT(st.state_ckpt_evictions > 0);
}

TEST_MAIN(TEST_ENTRY(memory_hybrid_slots), TEST_ENTRY(memory_kv_prefix_sharing), TEST_ENTRY(memory_keys_carry_token_kinds),
          TEST_ENTRY(memory_state_checkpoints),
          TEST_ENTRY(backends_and_state_layers), TEST_ENTRY(hybrid_model_batching_and_preemption),
          TEST_ENTRY(kv_only_model_shares_prefixes), TEST_ENTRY(hybrid_model_checkpoints_share_prefixes),
          TEST_ENTRY(hybrid_model_checkpoints_evicted_under_a_tiny_budget))
