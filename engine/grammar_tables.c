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
 * A table is built in one pass over the trie's nodes in preorder (a refused node skips its
 * subtree), stepping the recogniser through a memo: the sets met are interned, a complete code
 * point's step is remembered by the set of tops that hold it, an ASCII byte's per set in an
 * array. Tables are kept per grammar (the cache's slot) and reused by every state and request
 * whose stack has the same top part, evicted least recently used beyond the store's bounds
 * (a count and bytes). */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct gtable {
    bool used;
    uint32_t slot;
    uint64_t hash;
    uint32_t *key;          /* partial, remain, entries of T */
    size_t key_len;
    uint64_t *acc;          /* n_vocab bits */
    int32_t *und_tok;       /* undecided tokens (not accepted), ascending */
    uint32_t *und_off;      /* n_und + 1: token i's suffixes are und_suf[und_off[i] .. und_off[i + 1]) */
    uint32_t *und_suf;      /* suffix ids */
    size_t n_und;
    rlx_grammar_vocab *suf; /* the distinct suffixes as a trie (NULL: none) */
    int32_t n_suf;
    bool deeper;            /* too many undecided tokens (over max_und): a stack
                               deeper than T is looked up with more of its entries instead */
    size_t bytes;           /* what it holds, roughly */
    uint64_t last_use;
} gtable;

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
    if (!t->tab || !t->buf || !t->ix) {
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
    free(t);
}

void rlx__gtables_drop(rlx__gtables *t, uint32_t slot)
{
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

void rlx__gtables_get_stats(const rlx__gtables *t, rlx__gtables_stats *out) { *out = t->stats; }

/* ---- building a table ------------------------------------------------------------------- */

typedef struct rec { int32_t tok; uint32_t off; } rec;
typedef struct recs { rec *r; size_t n, cap, max; bool oom; } recs;

static void rec_push(recs *rs, int32_t tok, uint32_t off)
{
    if (rs->oom) return;
    if (rs->n == rs->cap) {
        size_t nc = rs->cap ? rs->cap * 2 : 256;
        rec *r = realloc(rs->r, nc * sizeof *r);
        if (!r) {
            rs->oom = true;
            return;
        }
        rs->r = r;
        rs->cap = nc;
    }
    rs->r[rs->n++] = (rec){tok, off};
}

/* Every token in nodes [from, to) (a subtree below a node, in preorder) with offset off. */
static void collect_range(const rlx_grammar_vocab *v, uint32_t from, uint32_t to, uint32_t off, recs *rs)
{
    if (rs->n > rs->max) return; /* the table will say: look deeper */
    for (uint32_t node = from; node < to; node++)
        for (int32_t t = v->nodes[node].token; t >= 0; t = v->next_tok[t]) rec_push(rs, t, off);
}

static bool has_empty(const rlx__sset *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (!s->len[i]) return true;
    return false;
}

/* ---- stepping, remembered during one table build ----------------------------------------
 * The walk from a top part meets few distinct stack sets (a string's characters lead back to
 * the same few), but steps each of the trie's hundreds of thousands of nodes: each (set,
 * half-read sequence, byte) is stepped once and then looked up. Sets are interned by their
 * stacks in order (a set reached in another order is just another entry). */

typedef struct mstate {
    rlx__sset set;
    uint64_t hash;
    bool empty;
    int32_t ascii[128]; /* the step by an ASCII byte: the next state, -1 refused, -2 not yet known */
} mstate;
typedef struct ment { uint64_t a; uint32_t sid, nsid; int8_t r, used; } ment;

typedef struct memo {
    mstate *st;
    size_t n_st, cap_st;
    int32_t *itab;          /* interning: open addressing over state ids, -1 empty */
    size_t itcap;
    ment *tab;
    size_t tcap, n;
    bool oom;
} memo;

static void memo_free(memo *m)
{
    for (size_t i = 0; i < m->n_st; i++) rlx__sset_free(&m->st[i].set);
    free(m->st);
    free(m->itab);
    free(m->tab);
    memset(m, 0, sizeof *m);
}

static uint64_t set_hash(const rlx__sset *s)
{
    uint64_t h = 1469598103934665603ull ^ s->n;
    for (size_t i = 0; i < s->n; i++) h = (h ^ s->hash[i]) * 1099511628211ull;
    return h ^ (h >> 31);
}

static bool set_eq(const rlx__sset *x, const rlx__sset *y)
{
    if (x->n != y->n) return false;
    for (size_t i = 0; i < x->n; i++)
        if (x->hash[i] != y->hash[i] || x->len[i] != y->len[i] ||
            (x->len[i] && memcmp(x->data + x->off[i], y->data + y->off[i], x->len[i] * sizeof *x->data)))
            return false;
    return true;
}

/* The id of a set with s's stacks (added when new); UINT32_MAX when out of memory. */
static uint32_t memo_intern(memo *m, const rlx__sset *s)
{
    uint64_t h = set_hash(s);
    if (2 * (m->n_st + 1) > m->itcap) {
        size_t nc = m->itcap ? m->itcap * 2 : 256;
        int32_t *t = malloc(nc * sizeof *t);
        if (!t) return UINT32_MAX;
        memset(t, 0xff, nc * sizeof *t);
        for (size_t i = 0; i < m->n_st; i++) {
            size_t p = m->st[i].hash & (nc - 1);
            while (t[p] >= 0) p = (p + 1) & (nc - 1);
            t[p] = (int32_t)i;
        }
        free(m->itab);
        m->itab = t;
        m->itcap = nc;
    }
    size_t p = h & (m->itcap - 1);
    for (; m->itab[p] >= 0; p = (p + 1) & (m->itcap - 1)) {
        const mstate *x = &m->st[m->itab[p]];
        if (x->hash == h && set_eq(&x->set, s)) return (uint32_t)m->itab[p];
    }
    if (m->n_st == m->cap_st) {
        size_t nc = m->cap_st ? m->cap_st * 2 : 64;
        mstate *st = realloc(m->st, nc * sizeof *st);
        if (!st) return UINT32_MAX;
        m->st = st;
        m->cap_st = nc;
    }
    mstate *x = &m->st[m->n_st];
    memset(x, 0, sizeof *x);
    if (!rlx__sset_copy(&x->set, s)) {
        rlx__sset_free(&x->set);
        return UINT32_MAX;
    }
    x->hash = h;
    x->empty = has_empty(s);
    for (int i = 0; i < 128; i++) x->ascii[i] = -2;
    m->itab[p] = (int32_t)m->n_st;
    return (uint32_t)m->n_st++;
}

static uint64_t ment_hash(uint64_t a, uint32_t sid)
{
    uint64_t h = (a ^ ((uint64_t)sid << 40) ^ sid) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 31);
}

/* Remembers (sid, signature) -> r, nsid. */
static bool memo_put(memo *m, uint64_t a, uint32_t sid, int r, uint32_t nsid)
{
    if (2 * (m->n + 1) > m->tcap) {
        size_t nc = m->tcap ? m->tcap * 2 : 1024;
        ment *t = calloc(nc, sizeof *t);
        if (!t) return false;
        for (size_t i = 0; i < m->tcap; i++) {
            if (!m->tab[i].used) continue;
            size_t q = ment_hash(m->tab[i].a, m->tab[i].sid) & (nc - 1);
            while (t[q].used) q = (q + 1) & (nc - 1);
            t[q] = m->tab[i];
        }
        free(m->tab);
        m->tab = t;
        m->tcap = nc;
    }
    size_t p = ment_hash(a, sid) & (m->tcap - 1);
    while (m->tab[p].used) p = (p + 1) & (m->tcap - 1);
    m->tab[p] = (ment){.a = a, .sid = sid, .nsid = nsid, .r = (int8_t)r, .used = 1};
    m->n++;
    return true;
}

/* One byte from state sid with the half-read sequence (*partial, *remain): as
 * rlx__grammar_step_byte, with the resulting set's id in *sid. A complete code point's step
 * depends only on which stacks' tops hold it (its signature), so each (set, signature) is
 * stepped once: a JSON string's characters make one signature, not thousands of code points. */
static int memo_step(memo *m, const rlx_grammar *g, uint32_t *sid, uint32_t *partial, int *remain, uint8_t b,
                     rlx__sset *scratch, uint32_t *buf)
{
    if (!*remain && b < 0x80) {
        int32_t x = m->st[*sid].ascii[b];
        if (x == -1) return 0;
        if (x >= 0) {
            *sid = (uint32_t)x;
            return 1;
        }
    }
    uint32_t np = *partial, cp = 0, from = *sid;
    int nr = *remain;
    int d = rlx__grammar_decode_byte(&np, &nr, b, &cp);
    if (!d) return 0;
    const rlx__sset *set = &m->st[*sid].set;
    if (d == 2) {
        if (!rlx__grammar_partial_possible(g, set, np, nr)) return 0;
        *partial = np;
        *remain = nr;
        return 2;
    }
    uint64_t sig = 0;
    bool remember = set->n <= 64;
    if (remember) {
        for (size_t i = 0; i < set->n; i++)
            if (set->len[i] && rlx__grammar_top_has(g, set->data[set->off[i] + set->len[i] - 1], cp)) sig |= 1ull << i;
        if (!sig) {
            if (cp < 0x80) m->st[from].ascii[cp] = -1;
            return 0;
        }
        for (size_t p = m->tcap ? ment_hash(sig, *sid) & (m->tcap - 1) : 0; m->tcap && m->tab[p].used;
             p = (p + 1) & (m->tcap - 1)) {
            const ment *e = &m->tab[p];
            if (e->a == sig && e->sid == *sid) {
                if (cp < 0x80) m->st[from].ascii[cp] = e->r ? (int32_t)e->nsid : -1;
                if (!e->r) return 0;
                *sid = e->nsid;
                *partial = np;
                *remain = nr;
                return 1;
            }
        }
    }
    rlx__grammar_step_cp(g, set, cp, scratch, buf);
    if (scratch->oom) return RLX_ENOMEM;
    if (scratch->overflow) return RLX_ERANGE;
    uint32_t ns = 0;
    int r = scratch->n ? 1 : 0;
    if (r && (ns = memo_intern(m, scratch)) == UINT32_MAX) return RLX_ENOMEM;
    if (remember && !memo_put(m, sig, *sid, r, ns)) return RLX_ENOMEM;
    if (cp < 0x80) m->st[from].ascii[cp] = r ? (int32_t)ns : -1;
    if (r) {
        *sid = ns;
        *partial = np;
        *remain = nr;
    }
    return r;
}

typedef struct wlevel { uint32_t sid, partial; int remain; } wlevel;

static int rec_cmp(const void *a, const void *b)
{
    const rec *x = a, *y = b;
    if (x->tok != y->tok) return x->tok < y->tok ? -1 : 1;
    return (x->off > y->off) - (x->off < y->off);
}

static _Thread_local const rlx_grammar_vocab *sort_vocab; /* qsort has no context argument */
static _Thread_local const rec *sort_recs;

static int suf_cmp(const void *a, const void *b)
{
    const rec *x = &sort_recs[*(const uint32_t *)a], *y = &sort_recs[*(const uint32_t *)b];
    const rlx_grammar_vocab *v = sort_vocab;
    size_t xn = v->tok_off[x->tok + 1] - v->tok_off[x->tok] - x->off;
    size_t yn = v->tok_off[y->tok + 1] - v->tok_off[y->tok] - y->off;
    int c = memcmp(v->bytes + v->tok_off[x->tok] + x->off, v->bytes + v->tok_off[y->tok] + y->off, xn < yn ? xn : yn);
    if (c) return c;
    return (xn > yn) - (xn < yn);
}

/* The undecided part of tb from the records (tokens and the offsets where T ran out). */
static int table_undecided(gtable *tb, const rlx_grammar_vocab *v, recs *rs)
{
    if (rs->n) qsort(rs->r, rs->n, sizeof *rs->r, rec_cmp); /* r is NULL when there are none */
    size_t m = 0; /* drop accepted tokens and duplicates */
    for (size_t i = 0; i < rs->n; i++) {
        rec r = rs->r[i];
        if ((tb->acc[r.tok >> 6] >> (r.tok & 63)) & 1) continue;
        if (m && rs->r[m - 1].tok == r.tok && rs->r[m - 1].off == r.off) continue;
        rs->r[m++] = r;
    }
    rs->n = m;
    if (!m) return 0;
    uint32_t *order = malloc(m * sizeof *order), *sid = malloc(m * sizeof *sid);
    const char **texts = malloc(m * sizeof *texts);
    size_t *lens = malloc(m * sizeof *lens);
    tb->und_tok = malloc(m * sizeof *tb->und_tok);
    tb->und_off = malloc((m + 1) * sizeof *tb->und_off);
    tb->und_suf = malloc(m * sizeof *tb->und_suf);
    int rc = 0;
    if (!order || !sid || !texts || !lens || !tb->und_tok || !tb->und_off || !tb->und_suf) {
        rc = RLX_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < m; i++) order[i] = (uint32_t)i;
    sort_vocab = v;
    sort_recs = rs->r;
    qsort(order, m, sizeof *order, suf_cmp);
    int32_t n_suf = 0;
    for (size_t i = 0; i < m; i++) {
        const rec *r = &rs->r[order[i]];
        if (!i || suf_cmp(&order[i - 1], &order[i])) {
            texts[n_suf] = v->bytes + v->tok_off[r->tok] + r->off;
            lens[n_suf] = v->tok_off[r->tok + 1] - v->tok_off[r->tok] - r->off;
            n_suf++;
        }
        sid[order[i]] = (uint32_t)(n_suf - 1);
    }
    if (!(tb->suf = rlx_grammar_vocab_new(n_suf, texts, lens))) {
        rc = RLX_ENOMEM;
        goto done;
    }
    tb->n_suf = n_suf;
    size_t nu = 0;
    for (size_t i = 0; i < m; i++) {
        if (!i || rs->r[i].tok != rs->r[i - 1].tok) {
            tb->und_tok[nu] = rs->r[i].tok;
            tb->und_off[nu++] = (uint32_t)i;
        }
        tb->und_suf[i] = sid[i];
    }
    tb->und_off[nu] = (uint32_t)m;
    tb->n_und = nu;
done:
    free(order);
    free(sid);
    free(texts);
    free(lens);
    return rc;
}

/* Walks the trie from T alone (key: partial, remain, T's entries) into tb. */
static int table_build(rlx__gtables *t, const rlx_grammar *g, const uint32_t *key, size_t klen,
                       const rlx_grammar_vocab *v, gtable *tb)
{
    uint32_t depth = v->max_depth + 2, tn = (uint32_t)(klen - 2);
    wlevel *lv = calloc(depth, sizeof *lv);
    recs rs = {.max = t->max_und};
    memo m = {0};
    rlx__sset start = {0}, scratch = {0};
    int rc = 0;
    tb->acc = calloc(t->words, sizeof *tb->acc);
    if (!lv || !tb->acc) {
        rc = RLX_ENOMEM;
        goto done;
    }
    memcpy(t->buf, key + 2, tn * sizeof *t->buf);
    rlx__grammar_advance(g, t->buf, tn, &start);
    if (start.oom || start.overflow) {
        rc = start.oom ? RLX_ENOMEM : RLX_ERANGE;
        goto done;
    }
    if ((lv[0].sid = memo_intern(&m, &start)) == UINT32_MAX) {
        rc = RLX_ENOMEM;
        goto done;
    }
    lv[0].partial = key[0];
    lv[0].remain = (int)key[1];
    /* the nodes in preorder: a refused node skips its subtree */
    for (uint32_t node = 1; node < v->n_nodes;) {
        uint32_t d = v->depth[node];
        wlevel *here = &lv[d];
        *here = lv[d - 1];
        int r = memo_step(&m, g, &here->sid, &here->partial, &here->remain, v->nodes[node].byte, &scratch, t->buf);
        if (r < 0) {
            rc = r;
            goto done;
        }
        if (r == 0) {
            node = v->end[node];
            continue;
        }
        for (int32_t tok = v->nodes[node].token; tok >= 0; tok = v->next_tok[tok])
            tb->acc[tok >> 6] |= 1ull << (tok & 63);
        if (r == 1 && m.st[here->sid].empty) collect_range(v, node + 1, v->end[node], d, &rs);
        node++;
    }
    if (rs.oom) rc = RLX_ENOMEM;
    else if (rs.n > rs.max) tb->deeper = true;
    else rc = table_undecided(tb, v, &rs);
done:
    memo_free(&m);
    rlx__sset_free(&start);
    rlx__sset_free(&scratch);
    free(lv);
    free(rs.r);
    return rc;
}

/* The table for key (found or built); NULL with *rc set on failure. */
static gtable *table_get(rlx__gtables *t, uint32_t slot, const rlx_grammar *g, const rlx_grammar_vocab *v, size_t klen,
                         int *rc)
{
    uint64_t h = rlx__fnv(1469598103934665603ull ^ slot, t->key, klen * sizeof *t->key);
    for (size_t p = (size_t)h & t->ix_mask; t->ix[p] != IX_EMPTY; p = (p + 1) & t->ix_mask) {
        if (t->ix[p] < 0) continue;
        gtable *tb = &t->tab[t->ix[p]];
        if (tb->used && tb->hash == h && tb->slot == slot && tb->key_len == klen &&
            !memcmp(tb->key, t->key, klen * sizeof *t->key)) {
            tb->last_use = ++t->clock;
            t->stats.hits++;
            return tb;
        }
    }
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
    if (tb->used) t->stats.evictions++;
    table_clear(t, tb);
    t->stats.built++;
    if (!(tb->key = malloc(klen * sizeof *tb->key))) {
        *rc = RLX_ENOMEM;
        return NULL;
    }
    memcpy(tb->key, t->key, klen * sizeof *t->key);
    tb->key_len = klen;
    if ((*rc = table_build(t, g, t->key, klen, v, tb))) {
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
 * the deep nestings of a recursive grammar. It can stop at any stack and go on later. */
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
    w->next = calloc(RLX_GRAMMAR_MAX_DEPTH + 1, sizeof *w->next);
    w->bk = calloc(RLX_GRAMMAR_MAX_DEPTH + 1, sizeof *w->bk);
    if (!w->st || !w->next || !w->bk || !rlx__sset_copy(&w->seen, start)) {
        rlx__gwalk_free(w);
        return NULL;
    }
    return w;
}

void rlx__gwalk_free(rlx__gwalk *w)
{
    if (!w) return;
    for (size_t l = 0; w->bk && l <= RLX_GRAMMAR_MAX_DEPTH; l++) free(w->bk[l].v);
    free(w->bk);
    free(w->next);
    free(w->st);
    rlx__sset_free(&w->seen);
    free(w);
}

bool rlx__gwalk_done(const rlx__gwalk *w) { return w->done; }

int64_t rlx__gwalk_run(rlx__gtables *t, rlx__gwalk *w, const rlx_grammar *g, const rlx_grammar_vocab *v, double slice_ms)
{
    const double t0 = rlx_now() * 1e3;
    const uint64_t built0 = t->stats.built;
    int64_t rc = 0;
    while (!w->done) {
        for (; w->queued < w->seen.n; w->queued++) { /* file the stacks reached since last time */
            uint32_t len = w->seen.len[w->queued];
            if (!len || len > RLX_GRAMMAR_MAX_DEPTH) continue; /* finished */
            if (w->bk[len].n == w->bk[len].cap) {
                size_t cap = w->bk[len].cap ? 2 * w->bk[len].cap : 16;
                uint32_t *p = realloc(w->bk[len].v, cap * sizeof *p);
                if (!p) { rc = RLX_ENOMEM; break; }
                w->bk[len].v = p;
                w->bk[len].cap = cap;
            }
            w->bk[len].v[w->bk[len].n++] = (uint32_t)w->queued;
            if (len < w->lo) w->lo = len;
        }
        while (w->lo <= RLX_GRAMMAR_MAX_DEPTH && w->next[w->lo] == w->bk[w->lo].n) w->lo++;
        const double spent = rlx_now() * 1e3 - t0;
        if (rc || w->lo > RLX_GRAMMAR_MAX_DEPTH || w->visited >= w->max_stacks || w->built >= w->max_new ||
            2 * w->built >= t->n_tab || 2 * t->bytes >= t->max_bytes || (w->max_ms > 0 && w->ms + spent > w->max_ms)) {
            w->done = true; /* nothing left, or a bound of the whole walk */
            break;
        }
        if (slice_ms > 0 && spent > slice_ms) break; /* this call's share */
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
        uint64_t built = t->stats.built;
        int rc = 0;
        const gtable *tb = stack_table(t, slot, s->g, v, st, len, s->partial, s->remain, &bn, &rc);
        if (!tb) return rc;
        if (tb != last || t->stats.built != built) /* a table just rebuilt in the same place is another one */
            for (size_t w = 0; w < t->words; w++) bits[w] |= tb->acc[w];
        last = tb;
        if (bn && tb->n_und && (rc = add_undecided(t, s->g, tb, st, bn, bits))) return rc;
    }
    int64_t count = 0;
    for (size_t w = 0; w < t->words; w++) count += __builtin_popcountll(bits[w]);
    return count;
}
