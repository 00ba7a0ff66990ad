/* grammar_tclass.c - tables by counting code points (grammar_internal.h, rlx__gclass_plan): where
 * what follows a stack's top is a run of terms that are each one code point of a class C, a
 * token made only of code points of C is decided by how many it has; only the rest of the
 * vocabulary is walked.
 *
 * The position: the stack's top is a character set that has just begun a term x, and what
 * follows is `left` more terms x - a repetition's minimum (x x x), then maybe a reference to a
 * counted repetition's chain rule (x{n,m}, grammar_compile.c: R_j ::= x R_{j+1} | (empty), its
 * terms to come), a star's rule (x*: R ::= x R | (empty), no bound) or an optional x - and then,
 * inside the key, a continuation that cannot start with a code point of C and does not run out
 * of the key:
 *   (a) x is one character set, the top itself (the terms follow it in its rule); C = that set;
 *   (b) x is one reference to a rule X: the top is an alternative of X that is one character set
 *       (the terms follow in the entry below); C = that set less the first sets of X's other
 *       alternatives (each must begin with a set or a token).
 * From there a code point of C goes one way only: it completes a term (no other alternative of
 * X starts with it, and the continuation refuses it), after which the next term begins. So a
 * token of k code points all in C is accepted iff k <= left + 1 (this term and `left` more), and
 * refused otherwise (the continuation refuses its next code point; nothing runs out of the key).
 * A half-read character at a token's end that can only become one of C counts as one more (the
 * top accepts it while a term is left; after the last, the continuation, whose sets are then all
 * positive, refuses it exactly). A token with bytes that are not UTF-8 is never accepted.
 * Every other token (a code point outside C, a half character that may become another, 127 code
 * points and more) is decided by the walk of the trie (grammar_tbuild.c), which needs to visit
 * only the subtrees where such a token ends. What a class says of the vocabulary (the counts, and
 * the list of trie nodes on the walked tokens' paths) is built once per class and kept in the store, least
 * recently used out beyond CLASSES; by default only for a class that enough tokens are made of
 * (worth below). Owned by the tables' store, so by its cache's thread. */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

#define CLASSES 16
#define RMAX 128 /* ranges of a class, at most (a set with more is not counted) */

struct rlx__gclasses {
    rlx__gclass c[CLASSES];
    uint64_t clock;
    int mode;               /* RLX__GCOUNT_* */
    rlx__sset cont;         /* scratch: the continuation's stacks */
    uint64_t built;
};

typedef struct rset { uint32_t r[2 * RMAX]; int n; } rset; /* sorted, disjoint, not adjacent: lo, hi pairs */

rlx__gclasses *rlx__gclasses_new(void)
{
    rlx__gclasses *s = calloc(1, sizeof *s);
    if (s) s->mode = RLX__GCOUNT_AUTO;
    return s;
}

static void class_clear(rlx__gclass *c)
{
    free(c->rng);
    free(c->cnt);
    free(c->wn);
    memset(c, 0, sizeof *c);
}

void rlx__gclasses_free(rlx__gclasses *s)
{
    if (!s) return;
    for (int i = 0; i < CLASSES; i++) class_clear(&s->c[i]);
    rlx__sset_free(&s->cont);
    free(s);
}

void rlx__gclasses_set_mode(rlx__gclasses *s, int mode) { s->mode = mode; }
uint64_t rlx__gclasses_built(const rlx__gclasses *s) { return s->built; }

static bool is_set(uint32_t type) { return type == G_CHAR || type == G_CHAR_NOT || type == G_ANY; }
static bool end_of_seq(uint32_t type) { return type == G_END || type == G_ALT; }

static int pair_cmp(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* The character set at element p as ranges into out; *next gets the element after it. false
 * when it has more than RMAX ranges. */
static bool set_ranges(const gelem *e, uint32_t p, rset *out, uint32_t *next)
{
    const bool negated = e[p].type == G_CHAR_NOT;
    rset in = {.n = 0};
    do {
        uint32_t a, b;
        p = rlx__grammar_set_range(e, p, &a, &b);
        if (in.n == RMAX) return false;
        if (a <= b) {
            in.r[2 * in.n] = a;
            in.r[2 * in.n + 1] = b;
            in.n++;
        }
    } while (e[p].type == G_CHAR_ALT);
    *next = p;
    qsort(in.r, (size_t)in.n, 2 * sizeof *in.r, pair_cmp);
    rset m = {.n = 0}; /* merged */
    for (int i = 0; i < in.n; i++) {
        if (m.n && in.r[2 * i] <= m.r[2 * m.n - 1] + 1) {
            if (in.r[2 * i + 1] > m.r[2 * m.n - 1]) m.r[2 * m.n - 1] = in.r[2 * i + 1];
        } else {
            m.r[2 * m.n] = in.r[2 * i];
            m.r[2 * m.n + 1] = in.r[2 * i + 1];
            m.n++;
        }
    }
    if (!negated) {
        *out = m;
        return true;
    }
    out->n = 0;
    uint32_t lo = 0;
    for (int i = 0; i <= m.n; i++) {
        uint32_t hi = i < m.n ? m.r[2 * i] : 0x110000; /* the gap [lo, hi) */
        if (lo < hi) {
            if (out->n == RMAX) return false;
            out->r[2 * out->n] = lo;
            out->r[2 * out->n + 1] = hi - 1;
            out->n++;
        }
        if (i < m.n) lo = m.r[2 * i + 1] + 1;
    }
    return true;
}

/* a = a less b */
static bool ranges_minus(rset *a, const rset *b)
{
    rset o = {.n = 0};
    for (int i = 0; i < a->n; i++) {
        uint32_t lo = a->r[2 * i], hi = a->r[2 * i + 1];
        for (int j = 0; j < b->n && lo <= hi; j++) {
            uint32_t blo = b->r[2 * j], bhi = b->r[2 * j + 1];
            if (bhi < lo || blo > hi) continue;
            if (blo > lo) {
                if (o.n == RMAX) return false;
                o.r[2 * o.n] = lo;
                o.r[2 * o.n + 1] = blo - 1;
                o.n++;
            }
            if (bhi >= hi) {
                lo = 1, hi = 0; /* nothing left of this range */
                break;
            }
            lo = bhi + 1;
        }
        if (lo <= hi) {
            if (o.n == RMAX) return false;
            o.r[2 * o.n] = lo;
            o.r[2 * o.n + 1] = hi;
            o.n++;
        }
    }
    *a = o;
    return true;
}

static bool ranges_meet(const rset *a, const rset *b)
{
    for (int i = 0, j = 0; i < a->n && j < b->n;) {
        if (a->r[2 * i + 1] < b->r[2 * j]) i++;
        else if (b->r[2 * j + 1] < a->r[2 * i]) j++;
        else return true;
    }
    return false;
}

static bool ranges_have(const uint32_t *r, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n; /* the first range whose hi >= cp */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r[2 * mid + 1] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && r[2 * lo] <= cp;
}

/* ---- what a class says of the vocabulary ---- */

typedef struct cstate { uint32_t partial; int remain; uint32_t count; } cstate;

/* c->wn from spec (n_nodes + 1: the nodes among [0, i) where a walked token ends): the nodes
 * whose subtree has one, in preorder, each with the end of its subtree's entries. */
static int walk_nodes(rlx__gclass *c, const rlx_grammar_vocab *v, const uint32_t *spec)
{
    uint32_t n = 0, top = 0;
    for (uint32_t node = 1; node < v->n_nodes; node = spec[v->end[node]] == spec[node] ? v->end[node] : node + 1)
        n += spec[v->end[node]] != spec[node];
    uint32_t *open = malloc(((size_t)v->max_depth + 1) * sizeof *open); /* entries whose subtree goes on */
    c->wn = malloc(((size_t)n + 1) * sizeof *c->wn);
    if (!open || !c->wn) {
        free(open);
        return RLX_ENOMEM;
    }
    for (uint32_t node = 1; node < v->n_nodes;) {
        if (spec[v->end[node]] == spec[node]) {
            node = v->end[node];
            continue;
        }
        const uint32_t d = v->depth[node];
        while (top && c->wn[open[top - 1]].depth >= d) c->wn[open[--top]].end = c->n_wn;
        open[top++] = c->n_wn;
        c->wn[c->n_wn++] = (struct rlx__gwnode){.node = node, .depth = d, .byte = v->nodes[node].byte,
                                                .tok = spec[node + 1] != spec[node]};
        node++;
    }
    while (top) c->wn[open[--top]].end = c->n_wn;
    free(open);
    return 0;
}

/* Does one range of r hold all of [lo, hi]? */
static bool ranges_hold(const uint32_t *r, size_t n, uint32_t lo, uint32_t hi)
{
    for (size_t i = 0; i < n; i++)
        if (r[2 * i] <= lo && hi <= r[2 * i + 1]) return true;
    return false;
}

/* c->cnt and c->wn for c's ranges over v, in one pass over the trie in preorder: a node whose
 * bytes leave the class has only walked tokens below it, one whose bytes are not UTF-8 only
 * tokens that are never accepted (no walk either), both counted without a visit. */
static int class_build(rlx__gclass *c, const rlx_grammar_vocab *v)
{
    const size_t padded = ((size_t)v->n_vocab + 63) / 64 * 64;
    uint64_t ascii[2] = {0, 0}, ascii_top[2] = {0, 0};
    const uint32_t *top = c->rng + 2 * c->n_rng;
    for (uint32_t cp = 0; cp < 128; cp++) {
        if (ranges_have(c->rng, c->n_rng, cp)) ascii[cp >> 6] |= 1ull << (cp & 63);
        if (ranges_have(top, c->n_top, cp)) ascii_top[cp >> 6] |= 1ull << (cp & 63);
    }
    c->cnt = malloc(padded);
    uint32_t *spec = malloc(((size_t)v->n_nodes + 1) * sizeof *spec);
    cstate *st = malloc(((size_t)v->max_depth + 1) * sizeof *st);
    if (!c->cnt || !spec || !st) {
        free(spec);
        free(st);
        return RLX_ENOMEM;
    }
    memset(c->cnt, 127, padded);
    st[0] = (cstate){0, 0, 0};
    spec[0] = 0;
    spec[1] = 0; /* the root: no token */
    for (uint32_t node = 1; node < v->n_nodes;) {
        cstate s = st[v->depth[node] - 1];
        const uint8_t b = v->nodes[node].byte;
        bool in;
        int r = 1;
        const bool first = !s.count;
        if (!s.remain && b < 0x80) {
            in = (ascii[b >> 6] >> (b & 63)) & 1;
            if (first && !((ascii_top[b >> 6] >> (b & 63)) & 1)) r = 0;
            s.count++;
        } else {
            uint32_t cp = 0;
            r = rlx__grammar_decode_byte(&s.partial, &s.remain, b, &cp);
            in = r == 2 || (r == 1 && ranges_have(c->rng, c->n_rng, cp));
            if (r == 1 && first && !ranges_have(top, c->n_top, cp)) r = 0;
            s.count += r == 1;
        }
        /* not UTF-8, or a first code point the top's set refuses (exactly: a whole one): no token
         * below is ever accepted, nor walked */
        if (!r) {
            const uint32_t e = v->end[node];
            for (uint32_t x = node; x < e; x++) spec[x + 1] = spec[node];
            node = e;
            continue;
        }
        if (!in || s.count > 126) { /* every token below is walked */
            const uint32_t e = v->end[node], base = spec[node] - v->tend[node];
            for (uint32_t x = node; x < e; x++) spec[x + 1] = base + v->tend[x + 1];
            node = e;
            continue;
        }
        st[v->depth[node]] = s;
        const rlx__tnode nd = v->nodes[node];
        uint32_t lo, hi, n = s.count;
        bool walked = false;
        if (nd.token >= 0 && s.remain) { /* a half-read last character: counted as one more where the
                                            class holds all it may become (the plan knows the
                                            continuation's sets tell that exactly), else walked */
            if (!rlx__grammar_partial_range(s.partial, s.remain, &lo, &hi)) n = 127; /* never accepted */
            else if (c->partials && s.count < 126 && ranges_hold(c->rng, c->n_rng, lo, hi)) n = s.count + 1;
            else walked = true;
        }
        if (nd.token >= 0 && !walked && n < 127)
            for (int32_t t = nd.token; t >= 0; t = nd.more ? v->next_tok[t] : -1) c->cnt[t] = (uint8_t)n;
        spec[node + 1] = spec[node] + walked;
        node++;
    }
    free(st);
    int rc = walk_nodes(c, v, spec);
    free(spec);
    return rc;
}

/* Is a class build worth it for ranges r (top: the top set's)? Counting pays where the class's
 * tokens are many (a string's characters: nearly every token), and costs a class build for
 * nothing where they are few (digits, white space: the plain walk is refused at the first byte
 * of most tokens, or the second), or where most tokens start in the class and leave it (then
 * most of the trie is walked anyway): every 16th token is looked at, one in WORTH of those must
 * be made of the class's code points only, and at most a quarter walked. */
#define WORTH 16
static bool worth(const rset *r, const rset *top, const rlx_grammar_vocab *v)
{
    int32_t in = 0, walked = 0, seen = 0;
    for (int32_t t = 0; t < v->n_vocab; t += 16, seen++) {
        const uint8_t *b = (const uint8_t *)v->bytes + v->tok_off[t], *e = (const uint8_t *)v->bytes + v->tok_off[t + 1];
        uint32_t partial = 0, cp = 0;
        int remain = 0, d = 2, n = 0; /* n: whole code points read */
        bool pure = true, first_in = true;
        for (; d && b < e; b++) {
            if ((d = rlx__grammar_decode_byte(&partial, &remain, *b, &cp)) != 1) continue;
            if (!n++) first_in = ranges_have(top->r, (size_t)top->n, cp);
            pure = pure && ranges_have(r->r, (size_t)r->n, cp);
        }
        if (!d || !first_in || v->tok_off[t + 1] == v->tok_off[t]) continue; /* never accepted, or no bytes */
        in += pure;
        walked += !pure;
    }
    return (int64_t)in * WORTH >= seen && 4 * walked <= seen;
}

/* The stored class of ranges r and partials (built when new); NULL with *rc set when out of
 * memory, or (*rc 0) where the class is not worth a build (mode AUTO; remembered too). */
static const rlx__gclass *class_get(rlx__gclasses *s, const rset *r, const rset *top, bool partials,
                                    const rlx_grammar_vocab *v, int *rc)
{
    const uint64_t h = rlx__fnv(rlx__fnv(1469598103934665603ull, r->r, (size_t)r->n * 2 * sizeof *r->r), top->r,
                                (size_t)top->n * 2 * sizeof *top->r);
    rlx__gclass *victim = &s->c[0];
    for (int i = 0; i < CLASSES; i++) {
        rlx__gclass *c = &s->c[i];
        if (c->rng && c->v == v && c->hash == h && c->partials == partials && c->n_rng == (size_t)r->n &&
            c->n_top == (size_t)top->n && !memcmp(c->rng, r->r, (size_t)r->n * 2 * sizeof *r->r) &&
            !memcmp(c->rng + 2 * r->n, top->r, (size_t)top->n * 2 * sizeof *top->r)) {
            c->last_use = ++s->clock;
            if (c->cnt) return c;
            if (s->mode != RLX__GCOUNT_ALWAYS) return NULL; /* not worth it */
            victim = c; /* told to count: build it */
            goto build;
        }
        /* the victim: a free place, else the least recently used of those not worth a class
         * (no counts: a sample to take again), else of all */
        if (!c->rng) {
            if (victim->rng) victim = c;
        } else if (victim->rng && (!c->cnt > !victim->cnt || (!c->cnt == !victim->cnt && c->last_use < victim->last_use))) {
            victim = c;
        }
    }
    class_clear(victim);
    victim->rng = malloc((size_t)(r->n + top->n) * 2 * sizeof *victim->rng + 1);
    if (!victim->rng) {
        *rc = RLX_ENOMEM;
        return NULL;
    }
    memcpy(victim->rng, r->r, (size_t)r->n * 2 * sizeof *r->r);
    memcpy(victim->rng + 2 * r->n, top->r, (size_t)top->n * 2 * sizeof *top->r);
    victim->n_rng = (size_t)r->n;
    victim->n_top = (size_t)top->n;
    victim->hash = h;
    victim->partials = partials;
    victim->v = v;
    victim->last_use = ++s->clock;
    if (s->mode != RLX__GCOUNT_ALWAYS && !worth(r, top, v)) return NULL; /* (kept without counts) */
build:
    if ((*rc = class_build(victim, v))) {
        class_clear(victim);
        return NULL;
    }
    victim->last_use = ++s->clock;
    s->built++;
    return victim;
}

/* ---- the position ---- */

/* The terms that rule rr holds when it is rr ::= x rr' | (empty) with rr' rr itself (x*:
 * UINT32_MAX, no bound) or the next position of a counted repetition's chain (grammar_internal.h:
 * rr's chain_left + 1), or rr ::= x | (empty) (1); 0 when it is none of those. x is rr's first
 * element, into *x. */
static uint32_t rule_terms(const rlx_grammar *g, uint32_t rr, uint32_t *x)
{
    uint32_t a = *x = g->rule_start[rr], p;
    if (g->e[a].type == G_REF) p = a + 1;
    else if (is_set(g->e[a].type)) for (p = a + 1; g->e[p].type == G_CHAR_ALT || g->e[p].type == G_RNG_UPPER; p++) {}
    else return 0;
    if (g->e[p].type == G_ALT && g->e[p + 1].type == G_END) return 1;
    if (g->e[p].type != G_REF || g->e[p + 1].type != G_ALT || g->e[p + 2].type != G_END) return 0;
    if (g->e[p].value == rr) return UINT32_MAX;
    if (g->chain_prev && g->chain_prev[g->e[p].value] == (int32_t)rr) return g->chain_left[rr] + 1;
    return 0;
}

static bool ranges_equal(const rset *a, const rset *b)
{
    return a->n == b->n && !memcmp(a->r, b->r, (size_t)a->n * 2 * sizeof *a->r);
}

/* Is element p the term: a reference to rule xr (xr >= 0), else a set of the ranges `set`? *next
 * gets the element after it. */
static bool is_term(const rlx_grammar *g, uint32_t p, int32_t xr, const rset *set, uint32_t *next)
{
    if (xr >= 0) {
        *next = p + 1;
        return g->e[p].type == G_REF && g->e[p].value == (uint32_t)xr;
    }
    rset o;
    return is_set(g->e[p].type) && set_ranges(g->e, p, &o, next) && ranges_equal(&o, set);
}

/* The terms that come from element p on: a run of the term itself (a repetition's minimum, each
 * one a term that must come), then maybe a reference to a rule of terms of it (rule_terms);
 * UINT32_MAX when there is no bound. *cont gets the element after them. */
static uint32_t terms_from(const rlx_grammar *g, uint32_t p, int32_t xr, const rset *set, uint32_t *cont)
{
    uint32_t m = 0, next, x, t = 0;
    while (m < RLX_GRAMMAR_MAX_REPEAT && is_term(g, p, xr, set, &next)) {
        m++;
        p = next;
    }
    if (g->e[p].type == G_REF && (t = rule_terms(g, g->e[p].value, &x)) && is_term(g, x, xr, set, &next)) p++;
    else t = 0;
    *cont = p;
    return t == UINT32_MAX ? UINT32_MAX : m + t;
}

const rlx__gclass *rlx__gclass_plan(rlx__gclasses *s, const rlx_grammar *g, const rlx_grammar_vocab *v,
                                    const uint32_t *key, size_t klen, uint32_t *left, uint32_t *buf, int *rc)
{
    *rc = 0;
    if (s->mode == RLX__GCOUNT_OFF || klen < 3 || key[1] || !v->n_nodes) return NULL;
    const uint32_t top = key[klen - 1];
    if (!is_set(g->e[top].type)) return NULL;
    rset cls, o, top_set;
    uint32_t after, i, cont, nx;
    const uint32_t r = rlx__grammar_rule_of(g, top);
    if (!set_ranges(g->e, top, &cls, &after)) return NULL;
    top_set = cls;
    if (!end_of_seq(g->e[after].type)) { /* (a): the set goes on to `after`: terms that are sets like it */
        i = (uint32_t)klen - 1;
        *left = terms_from(g, after, -1, &cls, &cont);
    } else { /* (b): the set is an alternative of X; below it, terms that are references to X */
        if (klen < 4 || (top != g->rule_start[r] && g->e[top - 1].type != G_ALT)) return NULL;
        i = (uint32_t)klen - 2;
        *left = terms_from(g, key[i], (int32_t)r, NULL, &cont);
        for (uint32_t a = g->rule_start[r];;) { /* the other alternatives' first sets out */
            if (a != top) {
                const uint32_t t = g->e[a].type;
                if (t == G_REF || end_of_seq(t)) return NULL; /* (a first set through a rule: not worked out) */
                if (is_set(t) && (!set_ranges(g->e, a, &o, &nx) || !ranges_minus(&cls, &o))) return NULL;
            }
            while (!end_of_seq(g->e[a].type)) a++;
            if (g->e[a].type == G_END) break;
            a++;
        }
    }
    if (!cls.n) return NULL;
    /* the continuation (where the terms end, or a repetition's empty alternative goes): the
     * key's entries below, then what follows the terms, advanced; each stack must have a top
     * (not run out of the key) that holds no code point of C */
    rlx__sset_clear(&s->cont);
    uint32_t n = i - 2;
    memcpy(buf, key + 2, n * sizeof *buf);
    if (!end_of_seq(g->e[cont].type)) buf[n++] = cont;
    rlx__grammar_advance(g, buf, n, &s->cont);
    if (s->cont.oom) {
        *rc = RLX_ENOMEM;
        return NULL;
    }
    if (s->cont.overflow) return NULL;
    bool partials = true; /* (the check of a half-read character against a negated set is loose) */
    for (size_t k = 0; k < s->cont.n; k++) {
        if (!s->cont.len[k]) return NULL;
        const uint32_t t = s->cont.data[s->cont.off[k] + s->cont.len[k] - 1];
        if (g->e[t].type >= G_TOKEN) continue; /* a token reference holds no code point */
        if (!set_ranges(g->e, t, &o, &nx) || ranges_meet(&o, &cls)) return NULL;
        if (g->e[t].type == G_CHAR_NOT) partials = false;
    }
    return class_get(s, &cls, &top_set, partials, v, rc);
}
