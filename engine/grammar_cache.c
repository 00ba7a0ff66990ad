/* grammar_cache.c - masks remembered per grammar position (grammar.h, rlx_grammar_cache).
 *
 * A grammar position is a state's exact content: its set of parse stacks (element indexes of
 * the compiled grammar) and its half-read UTF-8 sequence. Two states with the same content in
 * the same grammar accept exactly the same continuations, so the mask of one is the mask of the
 * other. The cache keys a mask by (grammar, position): grammars are identified by their
 * compiled content (elements, rule starts, root), copied once per distinct grammar, so requests
 * that send the same schema share entries and a grammar freed and compiled again finds them;
 * rlx_grammar.serial lets a lookup skip the content comparison after the first time. Positions
 * are serialised with their stacks in a canonical order (by hash, then content), so a set
 * reached in a different order is the same key. Entries are filled lazily (a mask is built the
 * first time a step at that position needs it) and evicted least recently used. A miss builds
 * its mask from the per-position tables (grammar_tables.c) the cache also owns: they are kept
 * per grammar slot, so they too are shared by requests with the same grammar, and go with it. */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_GRAMMARS 128
#define SERIAL_MEMO 128

typedef struct gslot {
    bool used;
    uint64_t hash;
    uint32_t n_e, n_rules, root;
    gelem *e;
    uint32_t *rule_start;
    int32_t *chain_prev;    /* the counted repetitions (grammar_internal.h), NULL when none: a */
    uint32_t *chain_left;   /* property of the content, so the first grammar's serve any */
    uint64_t last_use;
    bool prepared;          /* rlx_grammar_cache_prepare started a walk of it */
    rlx__gwalk *walk;       /* that walk while it goes on (grammar_tables.c), else NULL */
} gslot;

typedef struct centry {
    bool used;
    uint32_t slot;
    uint64_t hash;
    uint32_t *key;          /* the serialised position */
    size_t key_len;
    uint64_t *bits;         /* n_vocab bits: allowed tokens */
    int64_t count;
    uint64_t last_use;
} centry;

struct rlx_grammar_cache {
    int32_t n_vocab;
    size_t words;           /* uint64 words of a mask */
    centry *ent;
    size_t n_ent;
    gslot slot[MAX_GRAMMARS];
    struct { uint64_t serial; uint32_t slot; } memo[SERIAL_MEMO];
    size_t memo_next;
    uint64_t clock;
    rlx__gtables *tables;   /* per-position tables (grammar_tables.c): a miss's mask */
    uint32_t *key;          /* scratch: the position being looked up */
    size_t key_cap;
    uint32_t *order;        /* scratch: stack order */
    size_t order_cap;
    rlx_grammar_cache_stats stats;
};

rlx_grammar_cache *rlx_grammar_cache_new(int32_t n_vocab, size_t max_entries)
{
    if (n_vocab <= 0 || !max_entries) return NULL;
    rlx_grammar_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->n_vocab = n_vocab;
    c->words = ((size_t)n_vocab + 63) / 64;
    c->n_ent = max_entries;
    c->ent = calloc(max_entries, sizeof *c->ent);
    c->tables = rlx__gtables_new(n_vocab, RLX_GRAMMAR_CACHE_TABLES);
    if (!c->ent || !c->tables) {
        rlx_grammar_cache_free(c);
        return NULL;
    }
    return c;
}

static void slot_clear(gslot *s)
{
    rlx__gwalk_free(s->walk);
    free(s->e);
    free(s->rule_start);
    free(s->chain_prev);
    free(s->chain_left);
    memset(s, 0, sizeof *s);
}

void rlx_grammar_cache_free(rlx_grammar_cache *c)
{
    if (!c) return;
    for (size_t i = 0; c->ent && i < c->n_ent; i++) {
        free(c->ent[i].key);
        free(c->ent[i].bits);
    }
    for (int i = 0; i < MAX_GRAMMARS; i++) slot_clear(&c->slot[i]);
    free(c->ent);
    rlx__gtables_free(c->tables);
    free(c->key);
    free(c->order);
    free(c);
}

void rlx_grammar_cache_get_stats(const rlx_grammar_cache *c, rlx_grammar_cache_stats *out)
{
    *out = c->stats;
    rlx__gtables_stats ts;
    rlx__gtables_get_stats(c->tables, &ts);
    out->tables_built = ts.built;
    out->table_hits = ts.hits;
    out->table_evictions = ts.evictions;
    out->tables_derived = ts.derived;
    out->tables_counted = ts.counted;
    out->table_classes = ts.classes;
}

/* The slot holding g's content (found or made); -1 when out of memory. */
static int grammar_slot(rlx_grammar_cache *c, const rlx_grammar *g)
{
    for (size_t i = 0; i < SERIAL_MEMO; i++)
        if (c->memo[i].serial == g->serial) {
            c->slot[c->memo[i].slot].last_use = ++c->clock;
            return (int)c->memo[i].slot;
        }
    uint64_t h = rlx__fnv(1469598103934665603ull, g->e, (size_t)g->n_e * sizeof *g->e);
    h = rlx__fnv(h, g->rule_start, (size_t)g->n_rules * sizeof *g->rule_start);
    h = rlx__fnv(h, &g->root, sizeof g->root);
    int found = -1, victim = 0;
    for (int i = 0; i < MAX_GRAMMARS; i++) {
        gslot *s = &c->slot[i];
        if (s->used && s->hash == h && s->n_e == g->n_e && s->n_rules == g->n_rules && s->root == g->root &&
            !memcmp(s->e, g->e, (size_t)g->n_e * sizeof *g->e) &&
            !memcmp(s->rule_start, g->rule_start, (size_t)g->n_rules * sizeof *g->rule_start)) {
            found = i;
            break;
        }
        if (!s->used || (c->slot[victim].used && s->last_use < c->slot[victim].last_use)) victim = i;
    }
    if (found < 0) { /* a new grammar: evict the least recently used one and its entries */
        gslot *s = &c->slot[victim];
        if (s->used) {
            for (size_t i = 0; i < c->n_ent; i++)
                if (c->ent[i].used && c->ent[i].slot == (uint32_t)victim) c->ent[i].used = false;
            for (size_t i = 0; i < SERIAL_MEMO; i++) /* the evicted grammar's serials name another one now */
                if (c->memo[i].serial && c->memo[i].slot == (uint32_t)victim) c->memo[i].serial = 0;
            rlx__gtables_drop(c->tables, (uint32_t)victim);
        }
        slot_clear(s);
        s->e = malloc(((size_t)g->n_e + 1) * sizeof *s->e); /* with the sentinel: a walk reads it */
        s->rule_start = malloc((size_t)g->n_rules * sizeof *s->rule_start + 1);
        if (!s->e || !s->rule_start) {
            slot_clear(s);
            return -1;
        }
        memcpy(s->e, g->e, ((size_t)g->n_e + 1) * sizeof *g->e);
        memcpy(s->rule_start, g->rule_start, (size_t)g->n_rules * sizeof *g->rule_start);
        if (g->chain_prev) {
            s->chain_prev = malloc((size_t)g->n_rules * sizeof *s->chain_prev);
            s->chain_left = malloc((size_t)g->n_rules * sizeof *s->chain_left);
            if (!s->chain_prev || !s->chain_left) {
                slot_clear(s);
                return -1;
            }
            memcpy(s->chain_prev, g->chain_prev, (size_t)g->n_rules * sizeof *s->chain_prev);
            memcpy(s->chain_left, g->chain_left, (size_t)g->n_rules * sizeof *s->chain_left);
        }
        s->n_e = g->n_e;
        s->n_rules = g->n_rules;
        s->root = g->root;
        s->hash = h;
        s->used = true;
        found = victim;
    }
    c->slot[found].last_use = ++c->clock;
    c->memo[c->memo_next].serial = g->serial;
    c->memo[c->memo_next].slot = (uint32_t)found;
    c->memo_next = (c->memo_next + 1) % SERIAL_MEMO;
    return found;
}

static _Thread_local const rlx__sset *sort_set; /* qsort has no context argument; one per thread */
static int stack_cmp(const void *a, const void *b)
{
    const rlx__sset *s = sort_set;
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    if (s->hash[i] != s->hash[j]) return s->hash[i] < s->hash[j] ? -1 : 1;
    if (s->len[i] != s->len[j]) return s->len[i] < s->len[j] ? -1 : 1;
    return s->len[i] ? memcmp(s->data + s->off[i], s->data + s->off[j], s->len[i] * sizeof *s->data) : 0;
}

static bool grow(uint32_t **p, size_t *cap, size_t need)
{
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 256;
    while (nc < need) nc *= 2;
    uint32_t *q = realloc(*p, nc * sizeof *q);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

/* Serialises the state into c->key: partial, remain, number of stacks, then each stack (length,
 * elements) in canonical order. Returns the length, 0 when out of memory. */
static size_t serialise(rlx_grammar_cache *c, const rlx_grammar_state *s)
{
    const rlx__sset *set = &s->stacks;
    if (!grow(&c->order, &c->order_cap, set->n + 1) || !grow(&c->key, &c->key_cap, 3 + set->n + set->dlen)) return 0;
    for (size_t i = 0; i < set->n; i++) c->order[i] = (uint32_t)i;
    sort_set = set; /* this thread's (workers of different models sort at once) */
    qsort(c->order, set->n, sizeof *c->order, stack_cmp);
    size_t k = 0;
    c->key[k++] = s->remain ? s->partial : 0; /* the bits of a complete sequence are left over, unused */
    c->key[k++] = (uint32_t)s->remain;
    c->key[k++] = (uint32_t)set->n;
    for (size_t i = 0; i < set->n; i++) {
        uint32_t j = c->order[i];
        c->key[k++] = set->len[j];
        if (set->len[j]) /* an empty stack may have no data at all (NULL) */
            memcpy(c->key + k, set->data + set->off[j], set->len[j] * sizeof *c->key);
        k += set->len[j];
    }
    return k;
}

const uint64_t *rlx_grammar_cache_mask(rlx_grammar_cache *c, const rlx_grammar_state *s, const rlx_grammar_vocab *v,
                                       int64_t *count, int *rc)
{
    *rc = 0;
    int slot = grammar_slot(c, s->g);
    size_t klen = slot < 0 ? 0 : serialise(c, s);
    if (!klen) {
        *rc = RLX_ENOMEM;
        return NULL;
    }
    uint64_t h = rlx__fnv(1469598103934665603ull ^ (uint64_t)slot, c->key, klen * sizeof *c->key);
    size_t victim = 0;
    for (size_t i = 0; i < c->n_ent; i++) {
        centry *e = &c->ent[i];
        if (e->used && e->hash == h && e->slot == (uint32_t)slot && e->key_len == klen &&
            !memcmp(e->key, c->key, klen * sizeof *c->key)) {
            e->last_use = ++c->clock;
            c->stats.hits++;
            *count = e->count;
            return e->bits;
        }
        if (!e->used || (c->ent[victim].used && e->last_use < c->ent[victim].last_use)) victim = i;
    }
    c->stats.misses++;
    centry *e = &c->ent[victim];
    if (e->used) c->stats.evictions++;
    e->used = false;
    if (!e->bits && !(e->bits = malloc(c->words * sizeof *e->bits))) {
        *rc = RLX_ENOMEM;
        return NULL;
    }
    uint32_t *key = realloc(e->key, klen * sizeof *key);
    if (!key) {
        *rc = RLX_ENOMEM;
        return NULL;
    }
    e->key = key;
    memcpy(e->key, c->key, klen * sizeof *c->key);
    e->key_len = klen;
    int64_t n = rlx__gtables_mask(c->tables, (uint32_t)slot, s, v, e->bits);
    if (n < 0) {
        *rc = (int)n;
        return NULL;
    }
    e->slot = (uint32_t)slot;
    e->hash = h;
    e->count = n;
    e->last_use = ++c->clock;
    e->used = true;
    *count = n;
    return e->bits;
}

int64_t rlx_grammar_cache_fast_mask(rlx_grammar_cache *c, const rlx_grammar_state *s, const rlx_grammar_vocab *v,
                                    uint64_t *bits)
{
    int slot = grammar_slot(c, s->g);
    if (slot < 0) return RLX_ENOMEM;
    return rlx__gtables_mask(c->tables, (uint32_t)slot, s, v, bits);
}

/* Slot i's walk on for slice_ms (0: to its end); freed once done */
static int64_t walk_slot(rlx_grammar_cache *c, int i, const rlx_grammar_vocab *v, double slice_ms, const atomic_bool *stop)
{
    gslot *s = &c->slot[i];
    const rlx_grammar g = {.e = s->e, .n_e = s->n_e, .rule_start = s->rule_start, .n_rules = s->n_rules, .root = s->root,
                           .chain_prev = s->chain_prev, .chain_left = s->chain_left};
    int64_t n = rlx__gwalk_run(c->tables, s->walk, &g, v, slice_ms, stop);
    if (rlx__gwalk_done(s->walk)) {
        rlx__gwalk_free(s->walk);
        s->walk = NULL;
    }
    return n;
}

int64_t rlx_grammar_cache_prepare(rlx_grammar_cache *c, const rlx_grammar_state *start, const rlx_grammar_vocab *v,
                                  size_t max_new, double max_ms, double slice_ms)
{
    int slot = grammar_slot(c, start->g);
    if (slot < 0) return RLX_ENOMEM;
    gslot *s = &c->slot[slot];
    if (s->prepared || start->remain) return 0;
    if (!(s->walk = rlx__gwalk_new((uint32_t)slot, &start->stacks, RLX_GRAMMAR_PREPARE_STACKS, max_new, max_ms)))
        return RLX_ENOMEM;
    s->prepared = true;
    return walk_slot(c, slot, v, slice_ms, NULL);
}

bool rlx_grammar_cache_preparing(const rlx_grammar_cache *c)
{
    for (int i = 0; i < MAX_GRAMMARS; i++)
        if (c->slot[i].walk) return true;
    return false;
}

/* The walks going on, one after the other: each for slice_ms (0: to its end or *stop), only the
 * first one found when `one` */
static int64_t walk_slots(rlx_grammar_cache *c, const rlx_grammar_vocab *v, double slice_ms, const atomic_bool *stop,
                          bool one)
{
    int64_t total = 0;
    for (int i = 0; i < MAX_GRAMMARS && !(stop && atomic_load_explicit(stop, memory_order_relaxed)); i++) {
        if (!c->slot[i].walk) continue;
        int64_t n = walk_slot(c, i, v, slice_ms, stop);
        if (n < 0) return n;
        total += n;
        if (one) break;
    }
    return total;
}

int64_t rlx_grammar_cache_prepare_more(rlx_grammar_cache *c, const rlx_grammar_vocab *v, double slice_ms)
{
    return walk_slots(c, v, slice_ms, NULL, slice_ms > 0); /* one walk's slice per call */
}

int64_t rlx_grammar_cache_prepare_until(rlx_grammar_cache *c, const rlx_grammar_vocab *v, const atomic_bool *stop)
{
    return walk_slots(c, v, 0, stop, false);
}

int rlx__grammar_cache_configure_tables(rlx_grammar_cache *c, uint32_t depth, size_t max_tables, size_t max_bytes,
                                        size_t max_und)
{
    for (int i = 0; i < MAX_GRAMMARS; i++) { /* its tables go, and the walks with them */
        rlx__gwalk_free(c->slot[i].walk);
        c->slot[i].walk = NULL;
        c->slot[i].prepared = false;
    }
    return rlx__gtables_configure(c->tables, depth, max_tables, max_bytes, max_und);
}

void rlx__grammar_cache_count_tables(rlx_grammar_cache *c, int mode) { rlx__gtables_count(c->tables, mode); }
