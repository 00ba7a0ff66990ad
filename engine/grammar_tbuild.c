/* grammar_tbuild.c - building one per-position table (grammar_tables.c keeps them; the table's
 * meaning is there and in grammar_internal.h): a walk of the vocabulary's trie from a stack's top
 * part; or a shorter walk that takes a counted repetition's earlier position's table as it is for
 * every token too short to reach the repetition's end; or, at a repetition of one code point of
 * a class (grammar_tclass.c), the tokens of that class decided by their code points' count and a
 * walk of the other tokens' subtrees only. Runs on the thread of the owning cache. */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

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

static uint32_t tok_len(const rlx_grammar_vocab *v, int32_t t) { return v->tok_off[t + 1] - v->tok_off[t]; }

/* Every token longer than `cut` bytes in nodes [from, to) (a subtree below a node, in preorder)
 * with offset off. */
static void collect_range(const rlx_grammar_vocab *v, uint32_t from, uint32_t to, uint32_t off, uint32_t cut, recs *rs)
{
    if (rs->n > rs->max) return; /* the table will say: look deeper */
    for (uint32_t node = from; node < to; node++)
        if (v->depth[node] > cut)
            for (int32_t t = v->nodes[node].token; t >= 0; t = v->next_tok[t]) rec_push(rs, t, off);
}

/* The tokens t .. t + 7 of at most cut (< 127) bytes, as bits 0..7: eight lengths at once, a
 * byte's high bit set where cut - length does not borrow, then gathered by a multiply. */
static uint64_t short8(const uint8_t *len7, uint64_t cut_bytes)
{
    uint64_t x;
    memcpy(&x, len7, 8); /* little-endian: token t in the low byte */
    uint64_t hi = ((cut_bytes | 0x8080808080808080ull) - x) & 0x8080808080808080ull;
    return (hi >> 7) * 0x0102040810204080ull >> 56;
}

/* What ref says of every token of at most `cut` (< 127) bytes: its accepted bit into acc, its
 * undecided (token, offset) pairs into rs (an offset is the token's length less its suffix's). */
static void copy_short(const gtable *ref, const rlx_grammar_vocab *v, uint32_t cut, uint64_t *acc, recs *rs)
{
    const uint64_t lb = 0x0101010101010101ull * cut;
    for (int32_t base = 0; base < v->n_vocab; base += 64) {
        uint64_t w = ref->acc[base >> 6], keep = 0;
        for (int k = 0; w && k < 8; k++) keep |= short8(v->len7 + base + 8 * k, lb) << (8 * k);
        acc[base >> 6] = w & keep;
    }
    for (size_t i = 0; i < ref->n_und; i++) {
        const int32_t tok = ref->und_tok[i];
        const uint32_t len = tok_len(v, tok);
        if (len > cut) continue;
        for (uint32_t j = ref->und_off[i]; j < ref->und_off[i + 1]; j++) {
            const int32_t s = (int32_t)ref->und_suf[j];
            rec_push(rs, tok, len - (ref->suf->tok_off[s + 1] - ref->suf->tok_off[s]));
        }
    }
}

static bool has_empty(const rlx__sset *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (!s->len[i]) return true;
    return false;
}

/* ---- stepping, remembered across a grammar's table builds --------------------------------
 * The walk from a top part meets few distinct stack sets (a string's characters lead back to
 * the same few), but steps each of the trie's hundreds of thousands of nodes: each (set,
 * half-read sequence, byte) is stepped once and then looked up. Sets are interned by their
 * stacks in order (a set reached in another order is just another entry). What a step does
 * depends on the set alone, so the store keeps one memo for the grammar whose tables it builds
 * (rlx__gmemo): the walks from a repetition's successive counts go through the same sets (a
 * string's count j walks through the sets of counts j + 1, j + 2, ...), and each later walk
 * finds those sets and their steps made. */

typedef struct mstate {
    rlx__sset set;
    uint64_t hash;
    bool empty;
    int32_t ascii[128]; /* the step by an ASCII byte: the next state, -1 refused, -2 not yet known */
} mstate;
typedef struct ment { uint64_t a; uint32_t sid, nsid; int8_t r, used; } ment;

typedef struct rlx__gmemo {
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

rlx__gmemo *rlx__gmemo_new(void) { return calloc(1, sizeof(rlx__gmemo)); }

void rlx__gmemo_free(rlx__gmemo *m)
{
    if (!m) return;
    memo_free(m);
    free(m);
}

void rlx__gmemo_clear(rlx__gmemo *m) { memo_free(m); }

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

/* What the count says (grammar_tclass.c): every token of whole code points of the class, at
 * most left + 1 of them, accepted (cnt 127 marks the walked ones, never accepted) */
static void count_accepted(const rlx__gclass *cls, const rlx_grammar_vocab *v, uint32_t left, uint64_t *acc)
{
    const uint64_t lb = 0x0101010101010101ull * (left < 125 ? left + 1 : 126);
    for (int32_t base = 0; base < v->n_vocab; base += 64) {
        uint64_t w = 0;
        for (int k = 0; k < 8; k++) w |= short8(cls->cnt + base + 8 * k, lb) << (8 * k);
        acc[base >> 6] = w;
    }
}

int rlx__gtable_build(const rlx_grammar *g, const uint32_t *key, size_t klen, const rlx_grammar_vocab *v, size_t words,
                      size_t max_und, uint32_t *buf, rlx__gmemo *m, const gtable *ref, const rlx__gclass *cls,
                      uint32_t left, gtable *tb)
{
    uint32_t depth = v->max_depth + 2, tn = (uint32_t)(klen - 2);
    wlevel *lv = calloc(depth, sizeof *lv);
    recs rs = {.max = max_und};
    if (m->n_st > RLX__GMEMO_STATES || m->n > RLX__GMEMO_STEPS) memo_free(m); /* (bounds: start over) */
    rlx__sset start = {0}, scratch = {0};
    int rc = 0;
    /* the tokens taken from ref: at most left + 1 bytes (the term at the key's top has a byte or
     * more to go, then left terms of a byte or more could follow: the repetition's end lies past
     * the token); copy_short's bound is 126 (a smaller cut walks more, as correctly) */
    const uint32_t cut = !ref ? 0 : left < 126 ? left + 1 : 126;
    tb->acc = calloc(words, sizeof *tb->acc);
    if (!lv || !tb->acc) {
        rc = RLX_ENOMEM;
        goto done;
    }
    if (cls) count_accepted(cls, v, left, tb->acc);
    else if (ref) copy_short(ref, v, cut, tb->acc, &rs);
    memcpy(buf, key + 2, tn * sizeof *buf);
    rlx__grammar_advance(g, buf, tn, &start);
    if (start.oom || start.overflow) {
        rc = start.oom ? RLX_ENOMEM : RLX_ERANGE;
        goto done;
    }
    if ((lv[0].sid = memo_intern(m, &start)) == UINT32_MAX) {
        rc = RLX_ENOMEM;
        goto done;
    }
    lv[0].partial = key[0];
    lv[0].remain = (int)key[1];
    /* counted: only the nodes of the walked tokens, from the class's list (a refused node skips
     * its subtree's entries) */
    for (uint32_t i = 0; cls && i < cls->n_wn;) {
        const struct rlx__gwnode w = cls->wn[i];
        wlevel here = lv[w.depth - 1];
        int r = memo_step(m, g, &here.sid, &here.partial, &here.remain, w.byte, &scratch, buf);
        if (r < 0) {
            rc = r;
            goto done;
        }
        if (r == 0) {
            i = w.end;
            continue;
        }
        lv[w.depth] = here;
        if (w.tok)
            for (int32_t tok = v->nodes[w.node].token; tok >= 0; tok = v->nodes[w.node].more ? v->next_tok[tok] : -1)
                tb->acc[tok >> 6] |= 1ull << (tok & 63);
        /* (the top part ran out after a code point outside the class: every token below is walked) */
        if (r == 1 && m->st[here.sid].empty) collect_range(v, w.node + 1, v->end[w.node], w.depth, 0, &rs);
        i++;
    }
    /* the nodes in preorder: a refused node skips its subtree, and so does one whose tokens are
     * all `cut` bytes or shorter (ref said what they do) */
    for (uint32_t node = cls ? v->n_nodes : 1; node < v->n_nodes;) {
        uint32_t d = v->depth[node];
        if (v->maxlen[node] <= cut) {
            node = v->end[node];
            continue;
        }
        /* the step in locals, stored whole: the parent's fields read back through pointers from
         * separate stores stalled every node (store forwarding) */
        wlevel here = lv[d - 1];
        const rlx__tnode nd = v->nodes[node];
        int r = memo_step(m, g, &here.sid, &here.partial, &here.remain, nd.byte, &scratch, buf);
        if (r < 0) {
            rc = r;
            goto done;
        }
        if (r == 0) {
            node = v->end[node];
            continue;
        }
        lv[d] = here;
        if (nd.token >= 0 && d > cut) { /* next_tok (in token order, far from the node) only for more */
            tb->acc[nd.token >> 6] |= 1ull << (nd.token & 63);
            for (int32_t tok = nd.more ? v->next_tok[nd.token] : -1; tok >= 0; tok = v->next_tok[tok])
                tb->acc[tok >> 6] |= 1ull << (tok & 63);
        }
        if (r == 1 && m->st[here.sid].empty) collect_range(v, node + 1, v->end[node], d, cut, &rs);
        node++;
    }
    if (rs.oom) rc = RLX_ENOMEM;
    else if (rs.n > rs.max) tb->deeper = true;
    else rc = table_undecided(tb, v, &rs);
done:
    if (rc) memo_free(m); /* whatever a failed step left half made */
    rlx__sset_free(&start);
    rlx__sset_free(&scratch);
    free(lv);
    free(rs.r);
    return rc;
}
