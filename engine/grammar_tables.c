/* grammar_tables.c - token masks from per-position tables (XGrammar style; grammar_internal.h,
 * used by grammar_cache.c). Owned by one rlx_grammar_cache, so by the thread that uses it.
 *
 * A state's mask is the union, over its parse stacks, of what each stack accepts alone (the
 * stacks are stepped independently; the half-read UTF-8 check only prunes). A stack is split
 * into its top part T (its top RLX__GTABLE_DEPTH entries, or all of it) and the rest B below.
 * The table of (T, half-read sequence) is computed once by walking the vocabulary's trie from T
 * alone, and sorts every token into:
 *   accepted   - T consumes all its bytes without running out (whatever B is);
 *   undecided  - T runs out (its last entry done, the real stack would go on with B) after k
 *                bytes with more bytes left: the token is accepted iff the stacks B advances to
 *                accept its suffix from byte k (for one of the k where this happens);
 *   rejected   - everything else (whatever B is).
 * The mask is then: the tables' accepted bits, plus the undecided tokens whose suffix the
 * real B accepts, found by walking a small trie of the table's distinct suffixes with B. Inside
 * a JSON string the accepted set is most of the vocabulary and the undecided tokens are those
 * that close the string and go on (`",`, `abc"}`), whose distinct suffixes are few. A top part
 * that leaves too many undecided pairs (a nested value's last entries) marks its table, and a
 * stack deeper than it is looked up with four times as many entries, up to the whole stack
 * (which leaves nothing undecided: below it the grammar is over).
 *
 * A table is built in one pass over the trie's nodes in preorder (grammar_tbuild.c); at a
 * repetition of one code point of a class (a JSON string's characters, x{n,m} or x*) by counting
 * instead: a token of that class's code points only is accepted iff its count fits the terms
 * left, and only the subtrees of the other tokens are walked (grammar_tclass.c); or, at another
 * counted repetition's later count, from an earlier count's table and a pass over the subtrees
 * of longer tokens only (chain_ref below). Tables are kept per grammar (the cache's slot) and
 * reused by every state and request whose stack has the same top part, evicted least recently
 * used beyond the store's bounds (a count and bytes). */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

struct rlx__gtables {
    int32_t n_vocab;
    size_t words;
    gtable *tab;
    size_t n_tab;
    size_t bytes;           /* of every table together */
    size_t max_bytes;
    size_t max_und;         /* undecided (token, offset) pairs a table may hold */
    uint32_t depth;         /* entries of a stack's top part */
    uint64_t clock;
    uint32_t *buf;          /* RLX_GRAMMAR_MAX_DEPTH + 1 */
    uint32_t *key;
    size_t key_cap;
    rlx__sset cset;         /* the stacks B advances to */
    uint8_t *suf_ok;
    size_t suf_ok_cap;
    rlx__gclasses *classes; /* the classes tables are counted by (grammar_tclass.c) */
    rlx__gmemo *memo;       /* the steps of the builds for grammar slot memo_slot (grammar_tbuild.c) */
    uint32_t memo_slot;
    int32_t *ix;            /* open addressing over the used tables by hash: a table's index, IX_EMPTY or IX_DEAD */
    size_t ix_mask, ix_dead;
    rlx__gtables_stats stats;
};

enum { IX_EMPTY = -1, IX_DEAD = -2 };

/* An empty index for n_tab tables (a power of two, at least four times as many), its size - 1
 * in *mask; NULL when out of memory. */
static int32_t *ix_new(size_t n_tab, size_t *mask)
{
    size_t cap = 16;
    while (cap < 4 * n_tab) cap *= 2;
    int32_t *ix = malloc(cap * sizeof *ix);
    for (size_t i = 0; ix && i < cap; i++) ix[i] = IX_EMPTY;
    *mask = cap - 1;
    return ix;
}

static void ix_put(rlx__gtables *t, size_t tab)
{
    size_t h = (size_t)t->tab[tab].hash & t->ix_mask;
    while (t->ix[h] >= 0) h = (h + 1) & t->ix_mask;
    if (t->ix[h] == IX_DEAD) t->ix_dead--;
    t->ix[h] = (int32_t)tab;
}

/* Takes a used table out of the index (before it is cleared); rebuilds the index when dead
 * entries pile up. */
static void ix_remove(rlx__gtables *t, const gtable *tb)
{
    size_t want = (size_t)(tb - t->tab), h = (size_t)tb->hash & t->ix_mask;
    while (t->ix[h] != IX_EMPTY && t->ix[h] != (int32_t)want) h = (h + 1) & t->ix_mask;
    if (t->ix[h] == IX_EMPTY) return;
    t->ix[h] = IX_DEAD;
    if (++t->ix_dead > t->n_tab) { /* tombstones: start over from the used tables */
        for (size_t i = 0; i <= t->ix_mask; i++) t->ix[i] = IX_EMPTY;
        t->ix_dead = 0;
        for (size_t i = 0; i < t->n_tab; i++)
            if (t->tab[i].used && &t->tab[i] != tb) ix_put(t, i);
    }
}

rlx__gtables *rlx__gtables_new(int32_t n_vocab, size_t max_tables)
{
    rlx__gtables *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->n_vocab = n_vocab;
    t->words = ((size_t)n_vocab + 63) / 64;
    t->n_tab = max_tables;
    t->depth = RLX__GTABLE_DEPTH;
    t->max_bytes = RLX__GTABLE_BYTES;
    t->max_und = RLX__GTABLE_UNDECIDED;
    t->tab = calloc(max_tables, sizeof *t->tab);
    t->buf = malloc((RLX_GRAMMAR_MAX_DEPTH + 1) * sizeof *t->buf);
    t->ix = ix_new(max_tables, &t->ix_mask);
    t->classes = rlx__gclasses_new();
    t->memo = rlx__gmemo_new();
    if (!t->tab || !t->buf || !t->ix || !t->classes || !t->memo) {
        rlx__gtables_free(t);
        return NULL;
    }
    return t;
}

static void table_clear(rlx__gtables *t, gtable *tb)
{
    if (tb->used && t->ix) ix_remove(t, tb);
    t->bytes -= tb->bytes;
    free(tb->key);
    free(tb->acc);
    free(tb->und_tok);
    free(tb->und_off);
    free(tb->und_suf);
    rlx_grammar_vocab_free(tb->suf);
    memset(tb, 0, sizeof *tb);
}

void rlx__gtables_free(rlx__gtables *t)
{
    if (!t) return;
    for (size_t i = 0; t->tab && i < t->n_tab; i++) table_clear(t, &t->tab[i]);
    free(t->tab);
    free(t->buf);
    free(t->key);
    rlx__sset_free(&t->cset);
    free(t->suf_ok);
    free(t->ix);
    rlx__gclasses_free(t->classes);
    rlx__gmemo_free(t->memo);
    free(t);
}

void rlx__gtables_drop(rlx__gtables *t, uint32_t slot)
{
    if (t->memo_slot == slot) rlx__gmemo_clear(t->memo);
    for (size_t i = 0; i < t->n_tab; i++)
        if (t->tab[i].used && t->tab[i].slot == slot) table_clear(t, &t->tab[i]);
}

int rlx__gtables_configure(rlx__gtables *t, uint32_t depth, size_t max_tables, size_t max_bytes, size_t max_und)
{
    gtable *tab = max_tables ? calloc(max_tables, sizeof *tab) : NULL;
    size_t mask;
    int32_t *ix = tab ? ix_new(max_tables, &mask) : NULL;
    if (!ix) {
        free(tab);
        return RLX_ENOMEM;
    }
    for (size_t i = 0; i < t->n_tab; i++) table_clear(t, &t->tab[i]);
    rlx__gmemo_clear(t->memo);
    free(t->tab);
    free(t->ix);
    t->tab = tab;
    t->n_tab = max_tables;
    t->ix = ix;
    t->ix_mask = mask;
    t->ix_dead = 0;
    t->depth = depth ? depth : 1;
    t->max_bytes = max_bytes;
    t->max_und = max_und;
    return 0;
}

void rlx__gtables_count(rlx__gtables *t, int mode) { rlx__gclasses_set_mode(t->classes, mode); }

void rlx__gtables_get_stats(const rlx__gtables *t, rlx__gtables_stats *out)
{
    *out = t->stats;
    out->classes = rlx__gclasses_built(t->classes);
}

/* The table of key (klen entries) in slot, or NULL; its hash in *hash. */
static gtable *table_find(rlx__gtables *t, uint32_t slot, const uint32_t *key, size_t klen, uint64_t *hash)
{
    uint64_t h = *hash = rlx__fnv(1469598103934665603ull ^ slot, key, klen * sizeof *key);
    for (size_t p = (size_t)h & t->ix_mask; t->ix[p] != IX_EMPTY; p = (p + 1) & t->ix_mask) {
        if (t->ix[p] < 0) continue;
        gtable *tb = &t->tab[t->ix[p]];
        if (tb->used && tb->hash == h && tb->slot == slot && tb->key_len == klen && !memcmp(tb->key, key, klen * sizeof *key))
            return tb;
    }
    return NULL;
}

/* A table to derive key's from (rlx__gtable_build): the key's topmost entry inside a counted
 * repetition's position (grammar_internal.h, chain_prev) moved to an earlier position of that
 * repetition, whose table exists (not `deeper`); *left: the terms the key's position has still
 * to come. NULL when there is none. */
static gtable *chain_ref(rlx__gtables *t, uint32_t slot, const rlx_grammar *g, size_t klen, uint32_t *left)
{
    if (!g->chain_prev) return NULL;
    for (size_t i = klen; i-- > 2;) {
        const uint32_t e = t->key[i], r = rlx__grammar_rule_of(g, e);
        if (g->chain_prev[r] < 0) continue;
        uint32_t *rk = malloc(klen * sizeof *rk);
        gtable *ref = NULL;
        if (!rk) return NULL;
        memcpy(rk, t->key, klen * sizeof *rk);
        uint64_t h;
        for (int32_t cur = g->chain_prev[r], tries = 0; cur >= 0 && !ref && tries < 64; cur = g->chain_prev[cur], tries++) {
            rk[i] = g->rule_start[cur] + (e - g->rule_start[r]);
            ref = table_find(t, slot, rk, klen, &h);
            if (ref && ref->deeper) ref = NULL;
        }
        free(rk);
        *left = g->chain_left[r];
        return ref;
    }
    return NULL;
}

/* The table for key (found, derived or built); NULL with *rc set on failure. */
static gtable *table_get(rlx__gtables *t, uint32_t slot, const rlx_grammar *g, const rlx_grammar_vocab *v, size_t klen,
                         int *rc)
{
    uint64_t h;
    gtable *hit = table_find(t, slot, t->key, klen, &h);
    if (hit) {
        hit->last_use = ++t->clock;
        t->stats.hits++;
        return hit;
    }
    uint32_t left = 0;
    const rlx__gclass *cls = rlx__gclass_plan(t->classes, g, v, t->key, klen, &left, t->buf, rc);
    if (*rc) return NULL;
    gtable *ref = cls ? NULL : chain_ref(t, slot, g, klen, &left);
    if (ref) ref->last_use = ++t->clock; /* not the victim below */
    size_t victim = 0;
    for (size_t i = 0; i < t->n_tab; i++) {
        const gtable *tb = &t->tab[i];
        if (!tb->used) {
            victim = i;
            break;
        }
        if (tb->last_use < t->tab[victim].last_use) victim = i;
    }
    gtable *tb = &t->tab[victim];
    if (tb == ref) ref = NULL; /* a store of one table */
    if (tb->used) t->stats.evictions++;
    table_clear(t, tb);
    t->stats.built++;
    if (ref) t->stats.derived++;
    if (cls) t->stats.counted++;
    if (!(tb->key = malloc(klen * sizeof *tb->key))) {
        *rc = RLX_ENOMEM;
        return NULL;
    }
    memcpy(tb->key, t->key, klen * sizeof *t->key);
    tb->key_len = klen;
    if (t->memo_slot != slot) {
        rlx__gmemo_clear(t->memo);
        t->memo_slot = slot;
    }
    if ((*rc = rlx__gtable_build(g, t->key, klen, v, t->words, t->max_und, t->buf, t->memo, ref, cls, left, tb))) {
        table_clear(t, tb);
        return NULL;
    }
    tb->slot = slot;
    tb->hash = h;
    tb->last_use = ++t->clock;
    tb->used = true;
    ix_put(t, (size_t)(tb - t->tab));
    tb->bytes = t->words * 8 + tb->n_und * 8 + (tb->und_tok ? tb->und_off[tb->n_und] * 4 : 0) +
                (tb->suf ? (size_t)tb->suf->n_nodes * (sizeof *tb->suf->nodes + 8) + tb->suf->tok_off[tb->n_suf] +
                           (size_t)tb->n_suf * 8 : 0);
    t->bytes += tb->bytes;
    while (t->bytes > t->max_bytes) { /* least recently used others out */
        gtable *old = NULL;
        for (size_t i = 0; i < t->n_tab; i++)
            if (t->tab[i].used && &t->tab[i] != tb && (!old || t->tab[i].last_use < old->last_use)) old = &t->tab[i];
        if (!old) break;
        table_clear(t, old);
        t->stats.evictions++;
    }
    return tb;
}

/* ---- a state's mask ------------------------------------------------------------------------ */

/* Sets the bits of tb's undecided tokens whose suffix the stacks below (b, bn entries) accept. */
static int add_undecided(rlx__gtables *t, const rlx_grammar *g, const gtable *tb, const uint32_t *b, uint32_t bn,
                         uint64_t *bits)
{
    rlx__sset_clear(&t->cset);
    memcpy(t->buf, b, bn * sizeof *t->buf);
    rlx__grammar_advance(g, t->buf, bn, &t->cset);
    if (t->cset.oom) return RLX_ENOMEM;
    if (t->cset.overflow) return RLX_ERANGE;
    if ((size_t)tb->n_suf > t->suf_ok_cap) {
        uint8_t *p = realloc(t->suf_ok, (size_t)tb->n_suf);
        if (!p) return RLX_ENOMEM;
        t->suf_ok = p;
        t->suf_ok_cap = (size_t)tb->n_suf;
    }
    rlx_grammar_state below = {.g = g, .stacks = t->cset, .partial = 0, .remain = 0, .buf = t->buf};
    int64_t n = rlx_grammar_mask(&below, tb->suf, t->suf_ok);
    if (n < 0) return (int)n;
    if (!n) return 0;
    for (size_t i = 0; i < tb->n_und; i++) {
        int32_t tok = tb->und_tok[i];
        for (uint32_t j = tb->und_off[i]; j < tb->und_off[i + 1]; j++)
            if (t->suf_ok[tb->und_suf[j]]) {
                bits[tok >> 6] |= 1ull << (tok & 63);
                break;
            }
    }
    return 0;
}

/* The table of stack st (len > 0 entries) with half-read sequence (partial, remain): its top
 * t->depth entries, more where that leaves too much undecided; *bn gets the entries below the
 * top part. NULL with *rc set on failure. */
static const gtable *stack_table(rlx__gtables *t, uint32_t slot, const rlx_grammar *g, const rlx_grammar_vocab *v,
                                 const uint32_t *st, uint32_t len, uint32_t partial, int remain, uint32_t *bn, int *rc)
{
    uint32_t tn = len < t->depth ? len : t->depth;
    for (;;) {
        *bn = len - tn;
        size_t klen = 2 + tn;
        if (klen > t->key_cap) {
            uint32_t *k = realloc(t->key, (klen + 16) * sizeof *k);
            if (!k) {
                *rc = RLX_ENOMEM;
                return NULL;
            }
            t->key = k;
            t->key_cap = klen + 16;
        }
        t->key[0] = remain ? partial : 0; /* a complete sequence leaves its bits behind: not part of the position */
        t->key[1] = (uint32_t)remain;
        memcpy(t->key + 2, st + *bn, tn * sizeof *st);
        const gtable *tb = table_get(t, slot, g, v, klen, rc);
        if (!tb || !tb->deeper || !*bn) return tb;
        tn = len - tn < 3 * tn ? len : 4 * tn;
    }
}

/* A walk of a grammar's reachable positions (rlx__gwalk_run): every stack reached goes into seen
 * once; the next one visited is a shortest one not yet visited (a bucket of seen's indexes per
 * length), so the walk covers shallow positions - the ones outputs reach first and most - before
 * the deep nestings of a recursive grammar. Stacks at a counted repetition's later counts (one
 * per count and per state inside its term: hundreds for a string of maxLength 40, their product
 * for a repetition inside another) count 4 entries longer where the count's term has just
 * begun, and those further inside a term or inside two repetitions' later counts wait in
 * buckets of their own until every other stack is visited (walk_bucket): their tables
 * derive from earlier counts' (chain_ref) for a fraction of the whole walk of the trie that a
 * position outside them (an unbounded string deep in an object) costs, so within the walk's
 * bounds the costly positions come first (bench/RESULTS.md section 44). It can stop at any stack
 * and go on later. */
#define WALK_BUCKETS (2 * (RLX_GRAMMAR_MAX_DEPTH + 1)) /* by length; then the nested repetitions' by length */

/* The walk's bucket of stack st (len entries, top last): its length; 4 more at a repetition's
 * later count where the count's term has just begun (the entry above the repetition's is where
 * one of its rule's alternatives starts: a string's next character); in the second half of the
 * buckets inside a term further on (an escape sequence half-written) or inside two repetitions'
 * later counts. */
static uint32_t walk_bucket(const rlx_grammar *g, const uint32_t *st, uint32_t len)
{
    uint32_t later = 0, top = 0; /* later counts on the stack; the topmost one's index */
    for (uint32_t k = 0; g->chain_prev && k < len && later < 2; k++)
        if (g->chain_prev[rlx__grammar_rule_of(g, st[k])] >= 0) later++, top = k;
    if (!later) return len;
    const uint32_t e = st[len - 1];
    const bool begun = later == 1 && top + 2 >= len &&
                       (top + 1 == len || e == g->rule_start[rlx__grammar_rule_of(g, e)] || g->e[e - 1].type == G_ALT);
    return begun ? RLX_MIN(len + 4, RLX_GRAMMAR_MAX_DEPTH) : len + RLX_GRAMMAR_MAX_DEPTH + 1;
}
struct rlx__gwalk {
    uint32_t slot;
    size_t max_stacks, max_new; /* the whole walk's bounds */
    double max_ms;
    rlx__sset seen;
    uint32_t *st;           /* the stack being visited (seen may move as it grows) */
    uint32_t *next;         /* per length: the bucket's first entry not yet visited */
    struct { uint32_t *v; size_t n, cap; } *bk;
    size_t queued, visited;
    uint32_t lo;
    uint64_t built;         /* tables built by the walk */
    double ms;              /* time spent in it */
    bool done;
};

rlx__gwalk *rlx__gwalk_new(uint32_t slot, const rlx__sset *start, size_t max_stacks, size_t max_new, double max_ms)
{
    rlx__gwalk *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->slot = slot;
    w->max_stacks = max_stacks;
    w->max_new = max_new;
    w->max_ms = max_ms;
    w->st = malloc((RLX_GRAMMAR_MAX_DEPTH + 1) * sizeof *w->st);
    w->next = calloc(WALK_BUCKETS, sizeof *w->next);
    w->bk = calloc(WALK_BUCKETS, sizeof *w->bk);
    w->seen.max = max_stacks; /* the positions reached, more than one state's live stacks */
    if (!w->st || !w->next || !w->bk || !rlx__sset_copy(&w->seen, start)) {
        rlx__gwalk_free(w);
        return NULL;
    }
    return w;
}

void rlx__gwalk_free(rlx__gwalk *w)
{
    if (!w) return;
    for (size_t l = 0; w->bk && l < WALK_BUCKETS; l++) free(w->bk[l].v);
    free(w->bk);
    free(w->next);
    free(w->st);
    rlx__sset_free(&w->seen);
    free(w);
}

bool rlx__gwalk_done(const rlx__gwalk *w) { return w->done; }

int64_t rlx__gwalk_run(rlx__gtables *t, rlx__gwalk *w, const rlx_grammar *g, const rlx_grammar_vocab *v, double slice_ms,
                       const atomic_bool *stop)
{
    const double t0 = rlx_now() * 1e3;
    const uint64_t built0 = t->stats.built;
    const size_t visited0 = w->visited;
    int64_t rc = 0;
    while (!w->done) {
        for (; w->queued < w->seen.n; w->queued++) { /* file the stacks reached since last time */
            const uint32_t len = w->seen.len[w->queued];
            if (!len || len > RLX_GRAMMAR_MAX_DEPTH) continue; /* finished */
            const uint32_t b = walk_bucket(g, w->seen.data + w->seen.off[w->queued], len);
            if (w->bk[b].n == w->bk[b].cap) {
                size_t cap = w->bk[b].cap ? 2 * w->bk[b].cap : 16;
                uint32_t *p = realloc(w->bk[b].v, cap * sizeof *p);
                if (!p) { rc = RLX_ENOMEM; break; }
                w->bk[b].v = p;
                w->bk[b].cap = cap;
            }
            w->bk[b].v[w->bk[b].n++] = (uint32_t)w->queued;
            if (b < w->lo) w->lo = b;
        }
        while (w->lo < WALK_BUCKETS && w->next[w->lo] == w->bk[w->lo].n) w->lo++;
        const double spent = rlx_now() * 1e3 - t0;
        if (rc || w->lo >= WALK_BUCKETS || w->visited >= w->max_stacks || w->built >= w->max_new ||
            2 * w->built >= t->n_tab || 2 * t->bytes >= t->max_bytes || (w->max_ms > 0 && w->ms + spent > w->max_ms)) {
            w->done = true; /* nothing left, or a bound of the whole walk */
            break;
        }
        /* this call's share - after one position at least, so that a slice shorter than the
         * clock's reads (a slow host, valgrind, a preempted worker) still moves the walk on */
        if (slice_ms < 0 || (slice_ms > 0 && w->visited > visited0 && spent > slice_ms)) break;
        if (stop && atomic_load_explicit(stop, memory_order_relaxed)) break; /* called off (grammar.h) */
        size_t i = w->bk[w->lo].v[w->next[w->lo]++];
        uint32_t len = w->seen.len[i], bn;
        memcpy(w->st, w->seen.data + w->seen.off[i], len * sizeof *w->st);
        w->visited++;
        int r = 0;
        uint64_t before = t->stats.built;
        const gtable *tb = stack_table(t, w->slot, g, v, w->st, len, 0, 0, &bn, &r);
        w->built += t->stats.built - before;
        if (!tb && r != RLX_ERANGE) { /* (a position over the limits is the mask's to report, when it is reached) */
            rc = r;
            break;
        }
        w->seen.overflow = false;
        rlx__grammar_after_top(g, w->st, len, &w->seen, t->buf);
        if (w->seen.oom) rc = RLX_ENOMEM;
    }
    w->ms += rlx_now() * 1e3 - t0;
    if (rc) w->done = true;
    return rc ? rc : (int64_t)(t->stats.built - built0);
}

int64_t rlx__gtables_mask(rlx__gtables *t, uint32_t slot, const rlx_grammar_state *s, const rlx_grammar_vocab *v,
                          uint64_t *bits)
{
    const rlx__sset *set = &s->stacks;
    memset(bits, 0, t->words * sizeof *bits);
    const gtable *last = NULL;
    for (size_t i = 0; i < set->n; i++) {
        uint32_t len = set->len[i], bn;
        if (!len) continue; /* a finished stack takes no more bytes */
        const uint32_t *st = set->data + set->off[i];
        if (s->g->e[st[len - 1]].type >= G_TOKEN) continue; /* a token reference: by id, below */
        uint64_t built = t->stats.built;
        int rc = 0;
        const gtable *tb = stack_table(t, slot, s->g, v, st, len, s->partial, s->remain, &bn, &rc);
        if (!tb) return rc;
        if (tb != last || t->stats.built != built) /* a table just rebuilt in the same place is another one */
            for (size_t w = 0; w < t->words; w++) bits[w] |= tb->acc[w];
        last = tb;
        if (bn && tb->n_und && (rc = add_undecided(t, s->g, tb, st, bn, bits))) return rc;
    }
    rlx__grammar_token_bits(s, v, bits, NULL);
    int64_t count = 0;
    for (size_t w = 0; w < t->words; w++) count += __builtin_popcountll(bits[w]);
    return count;
}
