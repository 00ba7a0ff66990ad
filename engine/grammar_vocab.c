/* grammar_vocab.c - the vocabulary as a byte trie, and token masks: one walk down the trie
 * steps the recogniser a byte at a time, so a rejected prefix prunes every token under it. */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- vocabulary trie ------------------------------------------------------------------------- */

typedef struct tnode {
    uint32_t child;     /* first child (0: none; node 0 is the root) */
    uint32_t sibling;   /* next sibling, children sorted by byte */
    int32_t token;      /* first token ending here, -1 none; further ones via next_tok */
    uint8_t byte;
} tnode;

struct rlx_grammar_vocab {
    tnode *nodes;
    uint32_t n_nodes;
    int32_t *next_tok;  /* tokens with identical bytes */
    int32_t n_vocab;
    uint32_t max_depth;
};

typedef struct tok_ref { const char *s; size_t n; int32_t id; } tok_ref;

static int tok_ref_cmp(const void *a, const void *b)
{
    const tok_ref *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, n);
    if (c) return c;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Built from the tokens sorted by their bytes: each token shares its longest common prefix with
 * the one before it, so new nodes are always the last child of a node on the current path. */
rlx_grammar_vocab *rlx_grammar_vocab_new(int32_t n_vocab, const char *const *texts, const size_t *lens)
{
    if (n_vocab < 0) return NULL;
    rlx_grammar_vocab *v = calloc(1, sizeof *v);
    tok_ref *refs = malloc(((size_t)n_vocab + 1) * sizeof *refs);
    uint32_t *path = NULL, *last = NULL;
    size_t n_refs = 0, max_len = 0, total = 1;
    if (!v || !refs) goto fail;
    v->n_vocab = n_vocab;
    v->next_tok = malloc(((size_t)n_vocab + 1) * sizeof *v->next_tok);
    if (!v->next_tok) goto fail;
    for (int32_t t = 0; t < n_vocab; t++) {
        v->next_tok[t] = -1;
        if (!lens[t]) continue;
        refs[n_refs++] = (tok_ref){texts[t], lens[t], t};
        if (lens[t] > max_len) max_len = lens[t];
        total += lens[t];
    }
    qsort(refs, n_refs, sizeof *refs, tok_ref_cmp);
    if (total > UINT32_MAX) goto fail;
    v->nodes = malloc(total * sizeof *v->nodes); /* an upper bound: one node per byte */
    path = malloc((max_len + 1) * sizeof *path);
    last = calloc(total, sizeof *last);          /* last child of each node while building */
    if (!v->nodes || !path || !last) goto fail;
    v->nodes[0] = (tnode){.child = 0, .sibling = 0, .token = -1, .byte = 0};
    v->n_nodes = 1;
    path[0] = 0;
    const tok_ref *prev = NULL;
    int32_t *tail_tok = NULL; /* the last token id appended at the previous token's node */
    for (size_t i = 0; i < n_refs; i++) {
        const tok_ref *r = &refs[i];
        size_t l = 0;
        if (prev)
            while (l < prev->n && l < r->n && prev->s[l] == r->s[l]) l++;
        for (size_t d = l; d < r->n; d++) {
            uint32_t parent = path[d], id = v->n_nodes++;
            v->nodes[id] = (tnode){.child = 0, .sibling = 0, .token = -1, .byte = (uint8_t)r->s[d]};
            if (last[parent]) v->nodes[last[parent]].sibling = id;
            else v->nodes[parent].child = id;
            last[parent] = id;
            path[d + 1] = id;
        }
        tnode *end = &v->nodes[path[r->n]];
        if (prev && l == r->n && l == prev->n) { /* same bytes as the previous token: chain it */
            *tail_tok = r->id;
        } else {
            end->token = r->id;
        }
        tail_tok = &v->next_tok[r->id];
        prev = r;
    }
    v->max_depth = (uint32_t)max_len;
    free(refs);
    free(path);
    free(last);
    return v;
fail:
    free(refs);
    free(path);
    free(last);
    rlx_grammar_vocab_free(v);
    return NULL;
}

void rlx_grammar_vocab_free(rlx_grammar_vocab *v)
{
    if (!v) return;
    free(v->nodes);
    free(v->next_tok);
    free(v);
}

/* ---- masks ---------------------------------------------------------------------------------- */

/* The walk meets the same recogniser states again and again (inside a JSON string every
 * ordinary byte leads back to the state it left), so states are interned and each (state, byte)
 * step is computed once per walk: a node of the trie then costs one lookup. */
typedef struct wstate {
    rlx__sset set;
    uint32_t partial;
    int remain;
    uint64_t h;
} wstate;

typedef struct walk {
    const rlx_grammar *g;
    uint32_t *buf;
    wstate *st;
    size_t n_st, cap_st;
    int32_t *stab;          /* interned states by hash, -1 empty */
    size_t stcap;
    uint64_t *tkey;         /* (state << 8 | byte) + 1, 0 empty */
    int32_t *tval;          /* next state, -1 refused */
    size_t tcap, n_t;
    rlx__sset tmp;
    int err;
} walk;

static uint64_t set_hash(const rlx__sset *s, uint32_t partial, int remain)
{
    uint64_t h = 1469598103934665603ull ^ ((uint64_t)partial << 8) ^ (uint64_t)remain ^ ((uint64_t)s->n << 40);
    for (size_t i = 0; i < s->n; i++) h = (h ^ s->hash[i]) * 1099511628211ull;
    return h ^ (h >> 31);
}

static bool set_eq(const rlx__sset *a, const rlx__sset *b)
{
    if (a->n != b->n) return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->len[i] != b->len[i] || memcmp(a->data + a->off[i], b->data + b->off[i], a->len[i] * sizeof *a->data))
            return false;
    return true;
}

static bool grow_table(int32_t **t, size_t *cap, size_t need)
{
    if (need * 2 <= *cap) return true;
    size_t nc = *cap ? *cap * 2 : 256;
    int32_t *n = malloc(nc * sizeof *n);
    if (!n) return false;
    memset(n, 0xff, nc * sizeof *n);
    free(*t);
    *t = n;
    *cap = nc;
    return true;
}

/* The id of (set, partial, remain), added (a copy) when new; -1 when out of memory. */
static int32_t intern(walk *w, const rlx__sset *set, uint32_t partial, int remain)
{
    uint64_t h = set_hash(set, partial, remain);
    if (w->stcap < 2 * (w->n_st + 1)) { /* rehash */
        if (!grow_table(&w->stab, &w->stcap, w->n_st + 1)) return -1;
        for (size_t i = 0; i < w->n_st; i++) {
            size_t p = w->st[i].h & (w->stcap - 1);
            while (w->stab[p] >= 0) p = (p + 1) & (w->stcap - 1);
            w->stab[p] = (int32_t)i;
        }
    }
    size_t p = h & (w->stcap - 1);
    for (; w->stab[p] >= 0; p = (p + 1) & (w->stcap - 1)) {
        const wstate *o = &w->st[w->stab[p]];
        if (o->h == h && o->partial == partial && o->remain == remain && set_eq(&o->set, set)) return w->stab[p];
    }
    if (w->n_st == w->cap_st) {
        size_t nc = w->cap_st ? w->cap_st * 2 : 64;
        wstate *n = realloc(w->st, nc * sizeof *n);
        if (!n) return -1;
        w->st = n;
        w->cap_st = nc;
    }
    wstate *ns = &w->st[w->n_st];
    memset(ns, 0, sizeof *ns);
    if (!rlx__sset_copy(&ns->set, set)) {
        rlx__sset_free(&ns->set);
        return -1;
    }
    ns->partial = partial;
    ns->remain = remain;
    ns->h = h;
    w->stab[p] = (int32_t)w->n_st;
    return (int32_t)w->n_st++;
}

/* The state after byte b from state id, -1 when refused, -2 on failure (w->err). */
static int32_t step(walk *w, int32_t id, uint8_t b)
{
    uint64_t key = ((uint64_t)id << 8 | b) + 1;
    if (w->tcap < 2 * (w->n_t + 1)) {
        size_t nc = w->tcap ? w->tcap * 2 : 1024;
        uint64_t *nk = calloc(nc, sizeof *nk);
        int32_t *nv = malloc(nc * sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            w->err = RLX_ENOMEM;
            return -2;
        }
        for (size_t i = 0; i < w->tcap; i++) {
            if (!w->tkey[i]) continue;
            size_t p = (w->tkey[i] * 0x9e3779b97f4a7c15ull >> 20) & (nc - 1);
            while (nk[p]) p = (p + 1) & (nc - 1);
            nk[p] = w->tkey[i];
            nv[p] = w->tval[i];
        }
        free(w->tkey);
        free(w->tval);
        w->tkey = nk;
        w->tval = nv;
        w->tcap = nc;
    }
    size_t p = (key * 0x9e3779b97f4a7c15ull >> 20) & (w->tcap - 1);
    for (; w->tkey[p]; p = (p + 1) & (w->tcap - 1))
        if (w->tkey[p] == key) return w->tval[p];
    uint32_t partial = w->st[id].partial;
    int remain = w->st[id].remain;
    int r = rlx__grammar_step_byte(w->g, &w->st[id].set, &partial, &remain, b, &w->tmp, w->buf);
    if (r < 0) {
        w->err = r;
        return -2;
    }
    int32_t next = -1;
    if (r) {
        /* r == 2: the same stacks, a longer half-read sequence; interning may move w->st */
        if (r == 2 && rlx__sset_copy(&w->tmp, &w->st[id].set) == false) next = -3;
        else next = intern(w, &w->tmp, partial, remain);
        if (next < 0) {
            w->err = RLX_ENOMEM;
            return -2;
        }
    }
    w->tkey[p] = key;
    w->tval[p] = next;
    w->n_t++;
    return next;
}

int64_t rlx_grammar_mask(const rlx_grammar_state *s, const rlx_grammar_vocab *v, uint8_t *allowed)
{
    memset(allowed, 0, (size_t)v->n_vocab);
    uint32_t depth = v->max_depth + 1;
    walk w = {.g = s->g, .buf = s->buf}; /* the state's scratch */
    uint32_t *path = malloc(depth * sizeof *path);
    int32_t *sid = malloc((depth + 1) * sizeof *sid);
    int64_t count = 0;
    if (!path || !sid || (sid[0] = intern(&w, &s->stacks, s->partial, s->remain)) < 0) {
        w.err = RLX_ENOMEM;
        goto done;
    }
    /* iterative DFS: path[d] is the node at depth d + 1 being visited, sid[d] the state above it */
    uint32_t d = 0;
    uint32_t node = v->nodes[0].child;
    while (node || d > 0) {
        if (!node) { /* climb: next sibling of the parent */
            d--;
            node = v->nodes[path[d]].sibling;
            continue;
        }
        int32_t next = step(&w, sid[d], v->nodes[node].byte);
        if (next == -2) goto done;
        if (next < 0) { /* refused: every token under this node too */
            node = v->nodes[node].sibling;
            continue;
        }
        for (int32_t t = v->nodes[node].token; t >= 0; t = v->next_tok[t]) {
            allowed[t] = 1;
            count++;
        }
        sid[d + 1] = next;
        path[d++] = node;
        node = v->nodes[node].child;
    }
done:
    for (size_t i = 0; i < w.n_st; i++) rlx__sset_free(&w.st[i].set);
    free(w.st);
    free(w.stab);
    free(w.tkey);
    free(w.tval);
    rlx__sset_free(&w.tmp);
    free(path);
    free(sid);
    return w.err ? w.err : count;
}
