/* grammar.c - GBNF compiler and pushdown recogniser (see grammar.h).
 *
 * A compiled grammar is a list of rules; a rule is a run of elements whose alternatives are
 * separated by G_ALT and which ends with G_END. A character set is a G_CHAR / G_CHAR_NOT /
 * G_ANY element followed by G_CHAR_ALT and G_RNG_UPPER elements. Repetitions and groups become
 * rules of their own, so a parse position is just an element index.
 *
 * A parse stack is a list of element indexes, the top being the next thing to match; the state
 * of a sequence is the set of stacks it may be in (the grammar can be ambiguous) after every
 * stack was advanced to a character set (rule references expanded) or emptied (the root rule
 * is complete). Accepting a code point keeps the stacks whose top set contains it, moved one
 * element on and advanced again. */
#include "engine/grammar.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { G_END, G_ALT, G_REF, G_CHAR, G_CHAR_NOT, G_RNG_UPPER, G_CHAR_ALT, G_ANY };

typedef struct gelem { uint32_t type, value; } gelem;

struct rlx_grammar {
    gelem *e;
    uint32_t n_e;
    uint32_t *rule_start;   /* first element of each rule */
    char **rule_name;       /* names (generated rules: "parent_N") */
    int n_rules;
    uint32_t root;
};

const char rlx_grammar_json_object[] =
    "root    ::= \"{\" ws ( members )? \"}\"\n"
    "members ::= string \":\" ws value (\",\" ws string \":\" ws value)*\n"
    "value   ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object  ::= root ws\n"
    "array   ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string  ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number  ::= \"-\"? ([0-9] | [1-9] [0-9]{1,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,16})? ws\n"
    "ws      ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

/* ---- stack sets ------------------------------------------------------------------------- */

typedef struct sset {
    uint32_t *data;         /* stacks back to back */
    size_t dlen, dcap;
    uint32_t *off, *len;    /* stack i is data[off[i] .. off[i] + len[i]) */
    uint64_t *hash;
    size_t n, cap;
    int32_t *table;         /* open addressing over stack indexes, -1 empty */
    size_t tcap;
    bool overflow;          /* a limit was hit while building */
    bool oom;
} sset;

static void sset_clear(sset *s)
{
    s->dlen = 0;
    s->n = 0;
    s->overflow = s->oom = false;
    if (s->table) memset(s->table, 0xff, s->tcap * sizeof *s->table);
}

static void sset_free(sset *s)
{
    free(s->data);
    free(s->off);
    free(s->len);
    free(s->hash);
    free(s->table);
    memset(s, 0, sizeof *s);
}

static uint64_t stack_hash(const uint32_t *v, uint32_t n)
{
    uint64_t h = 1469598103934665603ull ^ n;
    for (uint32_t i = 0; i < n; i++) {
        h ^= v[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

static bool sset_rehash(sset *s, size_t tcap)
{
    int32_t *t = malloc(tcap * sizeof *t);
    if (!t) return false;
    memset(t, 0xff, tcap * sizeof *t);
    for (size_t i = 0; i < s->n; i++) {
        size_t p = s->hash[i] & (tcap - 1);
        while (t[p] >= 0) p = (p + 1) & (tcap - 1);
        t[p] = (int32_t)i;
    }
    free(s->table);
    s->table = t;
    s->tcap = tcap;
    return true;
}

/* Adds a stack unless the set holds it already. */
static void sset_add(sset *s, const uint32_t *v, uint32_t n)
{
    if (s->oom || s->overflow) return;
    uint64_t h = stack_hash(v, n);
    if (s->tcap < 2 * (s->n + 1) && !sset_rehash(s, s->tcap ? s->tcap * 2 : 64)) {
        s->oom = true;
        return;
    }
    size_t p = h & (s->tcap - 1);
    for (; s->table[p] >= 0; p = (p + 1) & (s->tcap - 1)) {
        size_t i = (size_t)s->table[p];
        if (s->hash[i] == h && s->len[i] == n && (n == 0 || !memcmp(s->data + s->off[i], v, n * sizeof *v))) return;
    }
    if (s->n >= RLX_GRAMMAR_MAX_STACKS) {
        s->overflow = true;
        return;
    }
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        uint32_t *o = realloc(s->off, nc * sizeof *o);
        if (o) s->off = o;
        uint32_t *l = realloc(s->len, nc * sizeof *l);
        if (l) s->len = l;
        uint64_t *hh = realloc(s->hash, nc * sizeof *hh);
        if (hh) s->hash = hh;
        if (!o || !l || !hh) {
            s->oom = true;
            return;
        }
        s->cap = nc;
    }
    if (s->dlen + n > s->dcap) {
        size_t nc = s->dcap ? s->dcap * 2 : 256;
        while (nc < s->dlen + n) nc *= 2;
        uint32_t *d = realloc(s->data, nc * sizeof *d);
        if (!d) {
            s->oom = true;
            return;
        }
        s->data = d;
        s->dcap = nc;
    }
    if (n) memcpy(s->data + s->dlen, v, n * sizeof *v);
    s->off[s->n] = (uint32_t)s->dlen;
    s->len[s->n] = n;
    s->hash[s->n] = h;
    s->table[p] = (int32_t)s->n;
    s->dlen += n;
    s->n++;
}

static bool sset_copy(sset *dst, const sset *src)
{
    sset_clear(dst);
    for (size_t i = 0; i < src->n; i++) sset_add(dst, src->data + src->off[i], src->len[i]);
    return !dst->oom;
}

/* ---- advancing ------------------------------------------------------------------------------ */

static bool end_of_seq(const gelem *e) { return e->type == G_END || e->type == G_ALT; }

/* Expands rule references at the top of stack v (of n entries, with room for one more in buf
 * up to RLX_GRAMMAR_MAX_DEPTH) until every resulting stack's top is a character set or the
 * stack is empty, adding those to out. No left recursion (checked at compile time), so this
 * ends. */
static void advance(const rlx_grammar *g, uint32_t *v, uint32_t n, sset *out)
{
    if (n == 0 || g->e[v[n - 1]].type != G_REF) {
        sset_add(out, v, n);
        return;
    }
    uint32_t pos = v[n - 1];
    uint32_t sub = g->rule_start[g->e[pos].value];
    uint32_t saved_top = v[n - 1];
    for (;;) {
        uint32_t m = n - 1;
        if (!end_of_seq(&g->e[pos + 1])) v[m++] = pos + 1;
        if (!end_of_seq(&g->e[sub])) {
            if (m >= RLX_GRAMMAR_MAX_DEPTH) {
                out->overflow = true;
                v[n - 1] = saved_top;
                break;
            }
            v[m++] = sub;
        }
        advance(g, v, m, out);
        v[n - 1] = saved_top; /* the recursion wrote over the entries above n - 1 only */
        while (!end_of_seq(&g->e[sub])) sub++;
        if (g->e[sub].type != G_ALT) break;
        sub++;
    }
}

/* Does the set starting at element p contain c? *next gets the element after the set. */
static bool match_char(const gelem *e, uint32_t p, uint32_t c, uint32_t *next)
{
    bool positive = e[p].type == G_CHAR || e[p].type == G_ANY, found = false;
    do {
        if (e[p].type == G_ANY) {
            found = true;
            p++;
        } else if (e[p + 1].type == G_RNG_UPPER) {
            found = found || (e[p].value <= c && c <= e[p + 1].value);
            p += 2;
        } else {
            found = found || e[p].value == c;
            p++;
        }
    } while (e[p].type == G_CHAR_ALT);
    *next = p;
    return found == positive;
}

/* Could a code point in [lo, hi] (a half-read UTF-8 sequence) be in the set at p? */
static bool match_range(const gelem *e, uint32_t p, uint32_t lo, uint32_t hi)
{
    bool positive = e[p].type == G_CHAR || e[p].type == G_ANY;
    do {
        uint32_t a, b;
        if (e[p].type == G_ANY) {
            a = 0;
            b = 0x10ffff;
            p++;
        } else if (e[p + 1].type == G_RNG_UPPER) {
            a = e[p].value;
            b = e[p + 1].value;
            p += 2;
        } else {
            a = b = e[p].value;
            p++;
        }
        if (positive && a <= hi && b >= lo) return true;
        if (!positive && a <= lo && b >= hi) return false; /* every candidate is excluded */
    } while (e[p].type == G_CHAR_ALT);
    return !positive;
}

/* One code point: out = the advanced stacks of `in` whose top set holds c. */
static void step_cp(const rlx_grammar *g, const sset *in, uint32_t c, sset *out, uint32_t *buf)
{
    sset_clear(out);
    for (size_t i = 0; i < in->n; i++) {
        uint32_t n = in->len[i];
        if (n == 0) continue;
        const uint32_t *v = in->data + in->off[i];
        uint32_t next;
        if (!match_char(g->e, v[n - 1], c, &next)) continue;
        memcpy(buf, v, (n - 1) * sizeof *buf);
        uint32_t m = n - 1;
        if (!end_of_seq(&g->e[next])) buf[m++] = next;
        advance(g, buf, m, out);
    }
}

/* ---- states -------------------------------------------------------------------------------- */

struct rlx_grammar_state {
    const rlx_grammar *g;
    sset stacks;
    uint32_t partial;       /* bits of a half-read UTF-8 sequence */
    int remain;             /* continuation bytes still expected (0: none) */
    uint32_t *buf;          /* RLX_GRAMMAR_MAX_DEPTH + 1 scratch entries */
};

#define LEAD_FLAG (1u << 31) /* in a partial: only the lead byte was read */

static bool partial_possible(const rlx_grammar *g, const sset *s, uint32_t partial, int remain)
{
    bool lead_only = partial & LEAD_FLAG;
    partial &= ~LEAD_FLAG;
    uint32_t lo = partial << (6 * remain), hi = lo | ((1u << (6 * remain)) - 1);
    if (lead_only) { /* the shortest forms only: a lead byte of n bytes starts U+0080, U+0800, U+10000 on */
        static const uint32_t min_cp[4] = {0, 0x80, 0x800, 0x10000};
        if (lo < min_cp[remain]) lo = min_cp[remain];
    }
    if (hi > 0x10ffff) hi = 0x10ffff;
    if (lo > hi) return false;
    for (size_t i = 0; i < s->n; i++)
        if (s->len[i] && match_range(g->e, s->data[s->off[i] + s->len[i] - 1], lo, hi)) return true;
    return false;
}

/* Feeds one byte from (*stacks, *partial, *remain) into out / the updated partial. Returns 1
 * when the result lies in `out`, 2 when it is the input stacks (a half-read sequence goes on),
 * 0 when the byte is rejected, negative on a limit or allocation failure. */
static int step_byte(const rlx_grammar *g, const sset *in, uint32_t *partial, int *remain, uint8_t b, sset *out,
                     uint32_t *buf)
{
    uint32_t cp;
    if (*remain > 0) {
        if ((b & 0xc0) != 0x80) return 0;
        if (*partial & LEAD_FLAG) { /* the second byte: no overlong forms, surrogates or > U+10FFFF */
            uint32_t v = *partial & ~LEAD_FLAG;
            if (*remain == 2 && ((v == 0 && b < 0xa0) || (v == 0xd && b > 0x9f))) return 0;
            if (*remain == 3 && ((v == 0 && b < 0x90) || (v == 4 && b > 0x8f) || v > 4)) return 0;
            *partial = v;
        }
        *partial = (*partial << 6) | (b & 0x3f);
        if (--*remain > 0) return partial_possible(g, in, *partial, *remain) ? 2 : 0;
        cp = *partial;
    } else if (b < 0x80) {
        cp = b;
    } else {
        int r = (b & 0xe0) == 0xc0 ? 1 : (b & 0xf0) == 0xe0 ? 2 : (b & 0xf8) == 0xf0 ? 3 : -1;
        if (r < 0 || b == 0xc0 || b == 0xc1 || b > 0xf4) return 0; /* C0/C1 only start overlong forms */
        *partial = (b & (0x3f >> r)) | LEAD_FLAG;
        *remain = r;
        return partial_possible(g, in, *partial, *remain) ? 2 : 0;
    }
    step_cp(g, in, cp, out, buf);
    if (out->oom) return RLX_ENOMEM;
    if (out->overflow) return RLX_ERANGE;
    return out->n ? 1 : 0;
}

rlx_grammar_state *rlx_grammar_state_new(const rlx_grammar *g, rlx_error *err)
{
    rlx_grammar_state *s = calloc(1, sizeof *s);
    uint32_t *buf = malloc((RLX_GRAMMAR_MAX_DEPTH + 1) * sizeof *buf);
    if (!s || !buf) {
        free(s);
        free(buf);
        rlx_errorf(err, RLX_ENOMEM, "out of memory");
        return NULL;
    }
    s->g = g;
    s->buf = buf;
    /* one stack per alternative of the root rule */
    uint32_t p = g->rule_start[g->root];
    for (;;) {
        uint32_t n = 0;
        if (!end_of_seq(&g->e[p])) buf[n++] = p;
        advance(g, buf, n, &s->stacks);
        while (!end_of_seq(&g->e[p])) p++;
        if (g->e[p].type != G_ALT) break;
        p++;
    }
    if (s->stacks.oom || s->stacks.overflow) {
        rlx_errorf(err, s->stacks.oom ? RLX_ENOMEM : RLX_ERANGE, "the grammar's start needs more than %d parse stacks",
                   RLX_GRAMMAR_MAX_STACKS);
        rlx_grammar_state_free(s);
        return NULL;
    }
    return s;
}

rlx_grammar_state *rlx_grammar_state_clone(const rlx_grammar_state *src)
{
    rlx_grammar_state *s = calloc(1, sizeof *s);
    uint32_t *buf = malloc((RLX_GRAMMAR_MAX_DEPTH + 1) * sizeof *buf);
    if (!s || !buf || !sset_copy(&s->stacks, &src->stacks)) {
        if (s) sset_free(&s->stacks);
        free(s);
        free(buf);
        return NULL;
    }
    s->g = src->g;
    s->buf = buf;
    s->partial = src->partial;
    s->remain = src->remain;
    return s;
}

void rlx_grammar_state_free(rlx_grammar_state *s)
{
    if (!s) return;
    sset_free(&s->stacks);
    free(s->buf);
    free(s);
}

/* Runs bytes from the state into (res, *partial, *remain) without touching the state. */
static int run_bytes(const rlx_grammar_state *s, const char *bytes, size_t n, sset *a, sset *b, uint32_t *partial,
                     int *remain, uint32_t *buf)
{
    *partial = s->partial;
    *remain = s->remain;
    const sset *cur = &s->stacks;
    sset *spare[2] = {a, b};
    int which = 0;
    for (size_t i = 0; i < n; i++) {
        sset *out = spare[which];
        int rc = step_byte(s->g, cur, partial, remain, (uint8_t)bytes[i], out, buf);
        if (rc <= 0) return rc ? rc : RLX_EINVAL;
        if (rc == 1) {
            cur = out;
            which ^= 1;
        }
    }
    if (cur == &s->stacks) return 2; /* nothing complete was read: the stacks are the state's */
    return cur == a ? 3 : 4;
}

int rlx_grammar_accept(rlx_grammar_state *s, const char *bytes, size_t n)
{
    sset a = {0}, b = {0};
    uint32_t partial;
    int remain;
    int rc = run_bytes(s, bytes, n, &a, &b, &partial, &remain, s->buf);
    if (rc >= 2) {
        if (rc == 3 || rc == 4) {
            sset tmp = s->stacks;
            s->stacks = rc == 3 ? a : b;
            if (rc == 3) a = tmp;
            else b = tmp;
        }
        s->partial = partial;
        s->remain = remain;
        rc = 0;
    }
    sset_free(&a);
    sset_free(&b);
    return rc;
}

bool rlx_grammar_allows(const rlx_grammar_state *s, const char *bytes, size_t n)
{
    sset a = {0}, b = {0};
    uint32_t partial;
    int remain;
    uint32_t *buf = malloc((RLX_GRAMMAR_MAX_DEPTH + 1) * sizeof *buf);
    int rc = buf ? run_bytes(s, bytes, n, &a, &b, &partial, &remain, buf) : RLX_ENOMEM;
    free(buf);
    sset_free(&a);
    sset_free(&b);
    return rc >= 2;
}

bool rlx_grammar_can_end(const rlx_grammar_state *s)
{
    if (s->remain) return false;
    for (size_t i = 0; i < s->stacks.n; i++)
        if (s->stacks.len[i] == 0) return true;
    return false;
}

bool rlx_grammar_must_end(const rlx_grammar_state *s)
{
    if (s->remain) return false;
    for (size_t i = 0; i < s->stacks.n; i++)
        if (s->stacks.len[i] != 0) return false;
    return true;
}

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

typedef struct mask_level {
    sset set;
    uint32_t partial;
    int remain;
    const sset *cur;    /* this level's stacks: &set or an ancestor's */
} mask_level;

int64_t rlx_grammar_mask(const rlx_grammar_state *s, const rlx_grammar_vocab *v, uint8_t *allowed)
{
    memset(allowed, 0, (size_t)v->n_vocab);
    uint32_t depth = v->max_depth + 1;
    mask_level *lv = calloc(depth, sizeof *lv);
    uint32_t *path = malloc(depth * sizeof *path), *buf = malloc((RLX_GRAMMAR_MAX_DEPTH + 1) * sizeof *buf);
    int64_t count = 0;
    int rc = 0;
    if (!lv || !path || !buf) {
        rc = RLX_ENOMEM;
        goto done;
    }
    lv[0].cur = &s->stacks;
    lv[0].partial = s->partial;
    lv[0].remain = s->remain;
    /* iterative DFS: path[d] is the node at depth d + 1 being visited */
    uint32_t d = 0;
    uint32_t node = v->nodes[0].child;
    while (node || d > 0) {
        if (!node) { /* climb: next sibling of the parent */
            d--;
            node = v->nodes[path[d]].sibling;
            continue;
        }
        mask_level *up = &lv[d], *here = &lv[d + 1];
        here->partial = up->partial;
        here->remain = up->remain;
        int r = step_byte(s->g, up->cur, &here->partial, &here->remain, v->nodes[node].byte, &here->set, buf);
        if (r < 0) {
            rc = r;
            goto done;
        }
        if (r == 0) { /* rejected: every token under this node too */
            node = v->nodes[node].sibling;
            continue;
        }
        here->cur = r == 1 ? &here->set : up->cur;
        for (int32_t t = v->nodes[node].token; t >= 0; t = v->next_tok[t]) {
            allowed[t] = 1;
            count++;
        }
        path[d++] = node;
        node = v->nodes[node].child;
    }
done:
    if (lv)
        for (uint32_t i = 0; i < depth; i++) sset_free(&lv[i].set);
    free(lv);
    free(path);
    free(buf);
    return rc ? rc : count;
}

/* ---- compiler ---------------------------------------------------------------------------------- */

typedef struct parser {
    const char *src, *end;
    rlx_error *err;
    bool failed;
} parser;

typedef struct ebuf { gelem *e; size_t n, cap; } ebuf;

static int perr(parser *p, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(parser *p, const char *at, const char *fmt, ...)
{
    if (p->failed) return RLX_EINVAL;
    p->failed = true;
    int line = 1, col = 1;
    for (const char *c = p->src; at && c < at && c < p->end; c++) {
        if (*c == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at) rlx_errorf(p->err, RLX_EINVAL, "grammar line %d column %d: %s", line, col, msg);
    else rlx_errorf(p->err, RLX_EINVAL, "grammar: %s", msg);
    return RLX_EINVAL;
}

static bool eb_push(parser *p, ebuf *b, uint32_t type, uint32_t value)
{
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 16;
        gelem *ne = realloc(b->e, nc * sizeof *ne);
        if (!ne) {
            perr(p, NULL, "out of memory");
            return false;
        }
        b->e = ne;
        b->cap = nc;
    }
    b->e[b->n++] = (gelem){type, value};
    return true;
}

/* rule bodies are built as separate element buffers, then laid out back to back */
typedef struct rule_tab {
    ebuf *body;
    char **name;
    bool *defined;
    int n, cap;
} rule_tab;

static int rule_find(parser *p, rule_tab *rt, const char *name, size_t len, bool create)
{
    for (int i = 0; i < rt->n; i++)
        if (strlen(rt->name[i]) == len && !memcmp(rt->name[i], name, len)) return i;
    if (!create) return -1;
    if (rt->n >= RLX_GRAMMAR_MAX_RULES) return perr(p, NULL, "more than %d rules", RLX_GRAMMAR_MAX_RULES), -1;
    if (rt->n == rt->cap) {
        int nc = rt->cap ? rt->cap * 2 : 32;
        ebuf *nb = realloc(rt->body, (size_t)nc * sizeof *nb);
        if (nb) rt->body = nb;
        char **nn = realloc(rt->name, (size_t)nc * sizeof *nn);
        if (nn) rt->name = nn;
        bool *nd = realloc(rt->defined, (size_t)nc * sizeof *nd);
        if (nd) rt->defined = nd;
        if (!nb || !nn || !nd) return perr(p, NULL, "out of memory"), -1;
        rt->cap = nc;
    }
    char *s = malloc(len + 1);
    if (!s) return perr(p, NULL, "out of memory"), -1;
    memcpy(s, name, len);
    s[len] = 0;
    rt->body[rt->n] = (ebuf){0};
    rt->name[rt->n] = s;
    rt->defined[rt->n] = false;
    return rt->n++;
}

static int rule_new(parser *p, rule_tab *rt, const char *base)
{
    char name[160];
    for (int k = rt->n;; k++) {
        snprintf(name, sizeof name, "%.120s_%d", base, k);
        if (rule_find(p, rt, name, strlen(name), false) < 0) break;
    }
    int id = rule_find(p, rt, name, strlen(name), true);
    if (id >= 0) rt->defined[id] = true;
    return id;
}

static bool is_word_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; }

static const char *skip_space(parser *p, const char *s, bool newline_ok)
{
    while (s < p->end) {
        if (*s == '#') {
            while (s < p->end && *s != '\n' && *s != '\r') s++;
        } else if (*s == ' ' || *s == '\t' || ((*s == '\n' || *s == '\r') && newline_ok)) {
            s++;
        } else {
            break;
        }
    }
    return s;
}

static const char *parse_name(parser *p, const char *s)
{
    const char *b = s;
    while (s < p->end && is_word_char(*s)) s++;
    if (s == b) perr(p, b, "expected a rule name");
    return s;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes one UTF-8 code point at s (strictly); returns the byte count or 0. */
static int utf8_decode(const char *s, const char *end, uint32_t *cp)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t avail = (size_t)(end - s);
    if (!avail) return 0;
    if (u[0] < 0x80) {
        *cp = u[0];
        return 1;
    }
    int n = (u[0] & 0xe0) == 0xc0 ? 2 : (u[0] & 0xf0) == 0xe0 ? 3 : (u[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (!n || avail < (size_t)n) return 0;
    uint32_t c = u[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((u[i] & 0xc0) != 0x80) return 0;
        c = (c << 6) | (u[i] & 0x3f);
    }
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min_cp[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    *cp = c;
    return n;
}

/* One character of a literal or class, escapes included. */
static const char *parse_char(parser *p, const char *s, uint32_t *cp)
{
    if (s >= p->end) {
        perr(p, s, "unexpected end of grammar");
        return s;
    }
    if (*s == '\\') {
        s++;
        if (s >= p->end) {
            perr(p, s, "unfinished escape");
            return s;
        }
        char c = *s++;
        int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (digits) {
            uint32_t v = 0;
            for (int i = 0; i < digits; i++, s++) {
                int h = s < p->end ? hex_value(*s) : -1;
                if (h < 0) {
                    perr(p, s, "expected %d hex digits after \\%c", digits, c);
                    return s;
                }
                v = (v << 4) | (uint32_t)h;
            }
            if (v > 0x10ffff) {
                perr(p, s, "code point U+%X is out of range", v);
                return s;
            }
            *cp = v;
            return s;
        }
        switch (c) {
        case 'n': *cp = '\n'; return s;
        case 'r': *cp = '\r'; return s;
        case 't': *cp = '\t'; return s;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': *cp = (uint8_t)c; return s;
        default:
            perr(p, s - 1, "unknown escape '\\%c'", c);
            return s;
        }
    }
    int n = utf8_decode(s, p->end, cp);
    if (!n) {
        perr(p, s, "invalid UTF-8 in the grammar");
        return s + 1;
    }
    return s + n;
}

static const char *parse_alternates(parser *p, rule_tab *rt, const char *s, int rule, bool nested);

/* Rewrites the last term of b (elements [start, b->n)) repeated {min, max} (max -1: no bound)
 * with helper rules, as llama.cpp does: x{m,n} = x...x (m times) then nested optionals. */
static bool apply_repeat(parser *p, rule_tab *rt, int rule, ebuf *b, size_t start, int min, int max, const char *at)
{
    size_t tlen = b->n - start;
    gelem term[64];
    if (tlen > RLX_ARRAY_LEN(term)) { /* a long char class: make it a rule so the copies are refs */
        int sub = rule_new(p, rt, rt->name[rule]);
        if (sub < 0) return false;
        for (size_t i = start; i < b->n; i++)
            if (!eb_push(p, &rt->body[sub], b->e[i].type, b->e[i].value)) return false;
        if (!eb_push(p, &rt->body[sub], G_END, 0)) return false;
        b->n = start;
        if (!eb_push(p, b, G_REF, (uint32_t)sub)) return false;
        tlen = 1;
    }
    memcpy(term, b->e + start, tlen * sizeof *term);
    b->n = start;
    if (min > RLX_GRAMMAR_MAX_REPEAT || max > RLX_GRAMMAR_MAX_REPEAT) {
        perr(p, at, "repetition count over %d", RLX_GRAMMAR_MAX_REPEAT);
        return false;
    }
    for (int k = 0; k < min; k++)
        for (size_t i = 0; i < tlen; i++)
            if (!eb_push(p, b, term[i].type, term[i].value)) return false;
    if (max == min) return true;
    if (max < 0) { /* star: R ::= term R | (empty) */
        int r = rule_new(p, rt, rt->name[rule]);
        if (r < 0) return false;
        ebuf *rb = &rt->body[r];
        for (size_t i = 0; i < tlen; i++)
            if (!eb_push(p, rb, term[i].type, term[i].value)) return false;
        if (!eb_push(p, rb, G_REF, (uint32_t)r) || !eb_push(p, rb, G_ALT, 0) || !eb_push(p, rb, G_END, 0)) return false;
        return eb_push(p, b, G_REF, (uint32_t)r);
    }
    /* up to (max - min) more: R1 ::= term R2 | (empty), ..., Rk ::= term | (empty) */
    int last = -1;
    for (int k = 0; k < max - min; k++) {
        int r = rule_new(p, rt, rt->name[rule]);
        if (r < 0) return false;
        ebuf *rb = &rt->body[r];
        for (size_t i = 0; i < tlen; i++)
            if (!eb_push(p, rb, term[i].type, term[i].value)) return false;
        if (last >= 0 && !eb_push(p, rb, G_REF, (uint32_t)last)) return false;
        if (!eb_push(p, rb, G_ALT, 0) || !eb_push(p, rb, G_END, 0)) return false;
        last = r;
    }
    return eb_push(p, b, G_REF, (uint32_t)last);
}

static const char *parse_int(parser *p, const char *s, int *v)
{
    const char *b = s;
    long x = 0;
    while (s < p->end && *s >= '0' && *s <= '9') {
        x = x * 10 + (*s - '0');
        if (x > RLX_GRAMMAR_MAX_REPEAT) {
            perr(p, b, "repetition count over %d", RLX_GRAMMAR_MAX_REPEAT);
            return s;
        }
        s++;
    }
    if (s == b) perr(p, b, "expected a number");
    *v = (int)x;
    return s;
}

static const char *parse_sequence(parser *p, rule_tab *rt, const char *s, int rule, ebuf *b, bool nested)
{
    size_t last_start = b->n;
    bool have_last = false;
    while (s < p->end && !p->failed) {
        const char *at = s;
        if (*s == '"') {
            s++;
            last_start = b->n;
            have_last = true;
            bool empty = true;
            while (s < p->end && *s != '"' && !p->failed) {
                uint32_t cp;
                s = parse_char(p, s, &cp);
                if (!eb_push(p, b, G_CHAR, cp)) return s;
                empty = false;
            }
            if (s >= p->end) return perr(p, at, "unterminated string literal"), s;
            s++;
            if (empty) have_last = false; /* "" matches nothing: repeating it is a no-op */
        } else if (*s == '[') {
            s++;
            last_start = b->n;
            have_last = true;
            uint32_t start_type = G_CHAR;
            if (s < p->end && *s == '^') {
                start_type = G_CHAR_NOT;
                s++;
            }
            bool first = true;
            while (s < p->end && *s != ']' && !p->failed) {
                uint32_t cp;
                s = parse_char(p, s, &cp);
                if (!eb_push(p, b, first ? start_type : G_CHAR_ALT, cp)) return s;
                first = false;
                if (s + 1 < p->end && *s == '-' && s[1] != ']') {
                    uint32_t hi;
                    const char *rat = s;
                    s = parse_char(p, s + 1, &hi);
                    if (hi < cp) return perr(p, rat, "character range end U+%X is below its start U+%X", hi, cp), s;
                    if (!eb_push(p, b, G_RNG_UPPER, hi)) return s;
                }
            }
            if (s >= p->end) return perr(p, at, "unterminated character class"), s;
            if (first) return perr(p, at, "empty character class"), s;
            s++;
        } else if (*s == '.') {
            s++;
            last_start = b->n;
            have_last = true;
            if (!eb_push(p, b, G_ANY, 0)) return s;
        } else if (is_word_char(*s)) {
            const char *e = parse_name(p, s);
            int ref = rule_find(p, rt, s, (size_t)(e - s), true);
            if (ref < 0) return e;
            s = e;
            last_start = b->n;
            have_last = true;
            if (!eb_push(p, b, G_REF, (uint32_t)ref)) return s;
        } else if (*s == '(') {
            int sub = rule_new(p, rt, rt->name[rule]);
            if (sub < 0) return s;
            s = parse_alternates(p, rt, s + 1, sub, true);
            if (p->failed) return s;
            if (s >= p->end || *s != ')') return perr(p, at, "unclosed '('"), s;
            s++;
            last_start = b->n;
            have_last = true;
            if (!eb_push(p, b, G_REF, (uint32_t)sub)) return s;
        } else if (*s == '*' || *s == '+' || *s == '?' || *s == '{') {
            if (!have_last) return perr(p, at, "'%c' follows nothing it could repeat", *s), s;
            int min = 0, max = -1;
            if (*s == '*') {
                s++;
            } else if (*s == '+') {
                min = 1;
                s++;
            } else if (*s == '?') {
                max = 1;
                s++;
            } else {
                s = skip_space(p, s + 1, nested);
                s = parse_int(p, s, &min);
                s = skip_space(p, s, nested);
                if (p->failed) return s;
                if (s < p->end && *s == ',') {
                    s = skip_space(p, s + 1, nested);
                    if (s < p->end && *s >= '0' && *s <= '9') s = parse_int(p, s, &max);
                    s = skip_space(p, s, nested);
                } else {
                    max = min;
                }
                if (p->failed) return s;
                if (s >= p->end || *s != '}') return perr(p, at, "expected '}'"), s;
                s++;
                if (max >= 0 && max < min) return perr(p, at, "{%d,%d}: the maximum is below the minimum", min, max), s;
            }
            if (!apply_repeat(p, rt, rule, b, last_start, min, max, at)) return s;
            have_last = false; /* x** is an error, as in llama.cpp */
        } else {
            break;
        }
        s = skip_space(p, s, nested);
    }
    return s;
}

static const char *parse_alternates(parser *p, rule_tab *rt, const char *s, int rule, bool nested)
{
    ebuf b = {0};
    s = skip_space(p, s, nested);
    s = parse_sequence(p, rt, s, rule, &b, nested);
    while (!p->failed && s < p->end && *s == '|') {
        if (!eb_push(p, &b, G_ALT, 0)) break;
        s = skip_space(p, s + 1, true);
        s = parse_sequence(p, rt, s, rule, &b, nested);
    }
    if (!p->failed) eb_push(p, &b, G_END, 0);
    free(rt->body[rule].e);
    rt->body[rule] = b;
    return s;
}

/* nullable[r]: rule r can match the empty string. */
static void compute_nullable(const rule_tab *rt, bool *nullable)
{
    memset(nullable, 0, (size_t)rt->n * sizeof *nullable);
    for (bool changed = true; changed;) {
        changed = false;
        for (int r = 0; r < rt->n; r++) {
            if (nullable[r]) continue;
            const gelem *e = rt->body[r].e;
            size_t i = 0;
            for (;;) { /* each alternative */
                bool all = true;
                for (; e[i].type != G_END && e[i].type != G_ALT; i++) {
                    if (e[i].type == G_REF && nullable[e[i].value]) continue;
                    all = false;
                    if (e[i].type != G_REF) { /* skip the rest of a char set */
                        while (e[i + 1].type == G_CHAR_ALT || e[i + 1].type == G_RNG_UPPER) i++;
                    }
                }
                if (all) {
                    nullable[r] = changed = true;
                    break;
                }
                if (e[i].type == G_END) break;
                i++;
            }
        }
    }
}

/* Finds a rule reachable from r through leading (nullable-prefixed) references that leads back
 * to r: such a rule can never be expanded to a character. */
static int left_recursive(const rule_tab *rt, const bool *nullable, int r, uint8_t *mark)
{
    if (mark[r] == 1) return r; /* on the current path */
    if (mark[r] == 2) return -1;
    mark[r] = 1;
    const gelem *e = rt->body[r].e;
    for (size_t i = 0;; i++) {
        /* start of an alternative */
        for (; e[i].type != G_END && e[i].type != G_ALT; i++) {
            if (e[i].type != G_REF) break;
            int hit = left_recursive(rt, nullable, (int)e[i].value, mark);
            if (hit >= 0) return hit;
            if (!nullable[e[i].value]) break;
        }
        while (e[i].type != G_END && e[i].type != G_ALT) i++;
        if (e[i].type == G_END) break;
    }
    mark[r] = 2;
    return -1;
}

rlx_grammar *rlx_grammar_compile(const char *src, size_t len, const char *root, rlx_error *err)
{
    if (!src) len = 0;
    if (len > RLX_GRAMMAR_MAX_SOURCE) {
        rlx_errorf(err, RLX_ERANGE, "grammar: %zu bytes, over the limit of %u", len, RLX_GRAMMAR_MAX_SOURCE);
        return NULL;
    }
    if (!root) root = "root";
    parser p = {.src = src, .end = src + len, .err = err};
    rule_tab rt = {0};
    rlx_grammar *g = NULL;
    bool *nullable = NULL;
    uint8_t *mark = NULL;
    const char *s = skip_space(&p, src, true);
    while (s < p.end && !p.failed) {
        const char *at = s;
        const char *e = parse_name(&p, s);
        if (p.failed) break;
        int r = rule_find(&p, &rt, s, (size_t)(e - s), true);
        if (r < 0) break;
        if (rt.defined[r]) {
            perr(&p, at, "rule '%s' is defined twice", rt.name[r]);
            break;
        }
        rt.defined[r] = true;
        s = skip_space(&p, e, false);
        if (p.end - s < 3 || memcmp(s, "::=", 3)) {
            perr(&p, s, "expected '::=' after '%s'", rt.name[r]);
            break;
        }
        s = parse_alternates(&p, &rt, skip_space(&p, s + 3, true), r, false); /* the body may start on the next line */
        if (p.failed) break;
        if (s < p.end && *s == '\r') s++;
        if (s < p.end && *s != '\n') {
            perr(&p, s, "unexpected '%c'", *s);
            break;
        }
        s = skip_space(&p, s, true);
    }
    if (p.failed) goto fail;
    for (int r = 0; r < rt.n; r++)
        if (!rt.defined[r]) {
            perr(&p, NULL, "rule '%s' is used but not defined", rt.name[r]);
            goto fail;
        }
    int root_id = rule_find(&p, &rt, root, strlen(root), false);
    if (root_id < 0) {
        perr(&p, NULL, "no rule named '%s' (the start rule)", root);
        goto fail;
    }
    nullable = malloc((size_t)rt.n * sizeof *nullable);
    mark = calloc((size_t)rt.n, 1);
    if (!nullable || !mark) {
        perr(&p, NULL, "out of memory");
        goto fail;
    }
    compute_nullable(&rt, nullable);
    for (int r = 0; r < rt.n; r++) {
        int hit = left_recursive(&rt, nullable, r, mark);
        if (hit >= 0) {
            perr(&p, NULL, "rule '%s' is left-recursive (it can reach itself before any character)", rt.name[hit]);
            goto fail;
        }
    }
    size_t total = 0;
    for (int r = 0; r < rt.n; r++) total += rt.body[r].n;
    if (total > RLX_GRAMMAR_MAX_ELEMS) {
        rlx_errorf(err, RLX_ERANGE, "grammar: %zu elements after expansion, over the limit of %u", total,
                   RLX_GRAMMAR_MAX_ELEMS);
        p.failed = true;
        goto fail;
    }
    g = calloc(1, sizeof *g);
    if (!g || !(g->e = malloc((total + 1) * sizeof *g->e)) || !(g->rule_start = malloc((size_t)rt.n * sizeof *g->rule_start))) {
        perr(&p, NULL, "out of memory");
        goto fail;
    }
    for (int r = 0; r < rt.n; r++) {
        g->rule_start[r] = g->n_e;
        memcpy(g->e + g->n_e, rt.body[r].e, rt.body[r].n * sizeof *g->e);
        g->n_e += (uint32_t)rt.body[r].n;
    }
    g->e[g->n_e] = (gelem){G_END, 0}; /* a sentinel: the set scanners read one past a set */
    g->rule_name = rt.name;
    rt.name = NULL;
    g->n_rules = rt.n;
    g->root = (uint32_t)root_id;
    for (int r = 0; r < rt.n; r++) free(rt.body[r].e);
    free(rt.body);
    free(rt.defined);
    free(nullable);
    free(mark);
    return g;
fail:
    if (g) {
        free(g->e);
        free(g->rule_start);
        free(g);
    }
    for (int r = 0; r < rt.n; r++) {
        free(rt.body[r].e);
        if (rt.name) free(rt.name[r]);
    }
    free(rt.body);
    free(rt.name);
    free(rt.defined);
    free(nullable);
    free(mark);
    return NULL;
}

void rlx_grammar_free(rlx_grammar *g)
{
    if (!g) return;
    for (int r = 0; r < g->n_rules; r++) free(g->rule_name[r]);
    free(g->rule_name);
    free(g->e);
    free(g->rule_start);
    free(g);
}

int rlx_grammar_n_rules(const rlx_grammar *g) { return g->n_rules; }
