/* grammar_internal.h - what the grammar's files share (not a public API).
 *
 * grammar_compile.c turns GBNF text into a compiled rlx_grammar; grammar.c holds the
 * recogniser (stack sets, a state's steps); grammar_vocab.c the vocabulary trie and the
 * reference masks, which step the recogniser byte by byte down the trie; grammar_tables.c the
 * per-position tables a grammar cache (grammar_cache.c) builds its masks from. Ownership and
 * threads as grammar.h says: a compiled grammar is immutable, a state belongs to one sequence.
 *
 * A compiled grammar is a list of rules; a rule is a run of elements whose alternatives are
 * separated by G_ALT and which ends with G_END. A character set is a G_CHAR / G_CHAR_NOT /
 * G_ANY element followed by G_CHAR_ALT and G_RNG_UPPER elements. A token reference is one
 * G_TOKEN (that token) or G_TOKEN_NOT (any token but that one) element whose value is the id: to
 * the byte machinery it is a set that holds no code point (a byte walk stops there: a token's
 * bytes may end right before it, never run into it); only a whole token, by id and at a character
 * boundary, passes it (rlx_grammar_accept_token). Repetitions and groups become rules of their
 * own, so a parse position is just an element index. */
#ifndef RLX_GRAMMAR_INTERNAL_H
#define RLX_GRAMMAR_INTERNAL_H

#include "engine/grammar.h"

enum { G_END, G_ALT, G_REF, G_CHAR, G_CHAR_NOT, G_RNG_UPPER, G_CHAR_ALT, G_ANY, G_TOKEN, G_TOKEN_NOT };

typedef struct gelem { uint32_t type, value; } gelem;

struct rlx_grammar {
    gelem *e;               /* every rule's elements back to back, then a G_END sentinel */
    uint32_t n_e;
    uint32_t *rule_start;   /* first element of each rule */
    uint32_t n_rules;
    uint32_t root;
    bool has_tokens;        /* some element is a G_TOKEN / G_TOKEN_NOT */
    uint64_t serial;        /* unique per compiled grammar in this process (never reused, unlike
                               the address), so a cache may remember which grammar it has seen */
    /* Counted repetitions (x{n,m} with m > n, whose x cannot match the empty string) become a
     * chain of rules R_1 ::= x R_2 | (empty), ..., R_k ::= x | (empty) (grammar_compile.c); their
     * bodies agree element for element over x. Per rule (NULL when the grammar has none):
     * chain_prev, the rule of the chain's previous position (-1: none, or not in a chain);
     * chain_left, the terms that may still follow the one at this position (k - j for R_j). */
    int32_t *chain_prev;
    uint32_t *chain_left;
};



/* The range that element p of a character set stands for (G_ANY every code point, a G_CHAR /
 * G_CHAR_NOT / G_CHAR_ALT followed by G_RNG_UPPER a range, else one code point) into *a, *b;
 * returns the element after it. */
static inline uint32_t rlx__grammar_set_range(const gelem *e, uint32_t p, uint32_t *a, uint32_t *b)
{
    if (e[p].type == G_ANY) {
        *a = 0;
        *b = 0x10ffff;
        return p + 1;
    }
    *a = e[p].value;
    if (e[p + 1].type == G_RNG_UPPER) {
        *b = e[p + 1].value;
        return p + 2;
    }
    *b = e[p].value;
    return p + 1;
}

/* The rule holding element e (rules lie in order). */
static inline uint32_t rlx__grammar_rule_of(const rlx_grammar *g, uint32_t e)
{
    uint32_t lo = 0, hi = g->n_rules;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (g->rule_start[mid] <= e) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* A set of parse stacks (duplicates merged), each a list of element indexes, top last. */
typedef struct rlx__sset {
    uint32_t *data;         /* stacks back to back */
    size_t dlen, dcap;
    uint32_t *off, *len;    /* stack i is data[off[i] .. off[i] + len[i]) */
    uint64_t *hash;
    size_t n, cap;
    int32_t *table;         /* open addressing over stack indexes, -1 empty */
    size_t tcap;
    size_t max;             /* stacks it may hold (0: RLX_GRAMMAR_MAX_STACKS, a state's bound) */
    bool overflow;          /* a limit was hit while building */
    bool oom;
} rlx__sset;

void rlx__sset_free(rlx__sset *s);
void rlx__sset_clear(rlx__sset *s);
/* dst = src (same stacks, same order); false when out of memory. */
bool rlx__sset_copy(rlx__sset *dst, const rlx__sset *src);
/* Adds to `out` the stacks that stack v (n entries; buf-sized room above, v is restored) advances
 * to: rule references at the top expanded until a character set or nothing is left. */
void rlx__grammar_advance(const rlx_grammar *g, uint32_t *v, uint32_t n, rlx__sset *out);

/* Adds to `out` the stacks that stack v (n entries, its top a character set) goes on to once
 * that set has matched a code point, whichever (what every matching code point leads to; the
 * walk of reachable positions, rlx__gwalk_run). buf: RLX_GRAMMAR_MAX_DEPTH + 1 entries. */
void rlx__grammar_after_top(const rlx_grammar *g, const uint32_t *v, uint32_t n, rlx__sset *out, uint32_t *buf);

/* The vocabulary's byte trie (grammar_vocab.c); grammar_tables.c walks it too. */
typedef struct rlx__tnode {
    uint32_t child;     /* first child (0: none; node 0 is the root) */
    uint32_t sibling;   /* next sibling, children sorted by byte */
    int32_t token;      /* first token ending here, -1 none; further ones via next_tok */
    uint8_t byte;
    uint8_t more;       /* 1: further tokens end here (next_tok[token] is one) */
} rlx__tnode;

struct rlx_grammar_vocab {
    rlx__tnode *nodes;
    uint32_t n_nodes;
    int32_t *next_tok;  /* tokens with identical bytes */
    int32_t n_vocab;
    uint32_t max_depth;
    char *bytes;        /* every token's bytes back to back: token t is bytes[tok_off[t] .. tok_off[t + 1]) */
    uint32_t *tok_off;
    uint32_t *depth;    /* per node: its depth (the root 0); nodes are numbered in preorder, */
    uint32_t *end;      /* so node i's subtree is nodes [i, end[i]) */
    uint32_t *maxlen;   /* per node: the longest token (bytes) in its subtree */
    uint32_t *tend;     /* n_nodes + 1: the nodes where a token ends among nodes [0, i) */
    uint8_t *len7;      /* per token: its length, 127 for 127 bytes or more; zeros up to a multiple of 64 */
    uint64_t *eog;      /* n_vocab bits: the tokens that end generation (NULL: none marked) */
};

/* Adds to a mask the tokens that the token references at the tops of s's stacks match by id
 * (none while a character is half-read; end-of-generation tokens never): bits (n_vocab bits)
 * and/or allowed (one byte per token) may be NULL. Returns how many were not set before. */
int64_t rlx__grammar_token_bits(const rlx_grammar_state *s, const rlx_grammar_vocab *v, uint64_t *bits,
                                uint8_t *allowed);

/* Parses the token reference at s (its '<', after any '!': negated) up to end: <[id]> or <text>,
 * the latter resolved by ids->lookup (ids may be NULL), checked against ids' vocabulary. The
 * byte after its '>' with *id set, or NULL with why set. */
const char *rlx__grammar_token_ref(const char *s, const char *end, bool negated, const rlx_grammar_token_ids *ids,
                                   uint32_t *id, char *why, size_t why_len);

/* Feeds one byte from (*in, *partial, *remain) into out / the updated partial. Returns 1 when
 * the result lies in `out`, 2 when it is the input stacks (a half-read UTF-8 sequence goes on),
 * 0 when the byte is rejected, negative on a limit or allocation failure. buf: scratch of
 * RLX_GRAMMAR_MAX_DEPTH + 1 entries. */
int rlx__grammar_step_byte(const rlx_grammar *g, const rlx__sset *in, uint32_t *partial, int *remain, uint8_t b,
                           rlx__sset *out, uint32_t *buf);

/* The pieces of rlx__grammar_step_byte, for walks that remember steps (grammar_tables.c):
 * decode_byte feeds one byte into the half-read sequence (0: not UTF-8, 2: more to come,
 * 1: code point *cp complete; inline: the walks of the whole trie call it per byte);
 * partial_possible says whether a half-read sequence can still match some stack's top; top_has
 * whether the character set at element elem holds cp; step_cp steps a set by a complete code
 * point (out: the advanced stacks whose top held it). */
#define RLX__UTF8_LEAD (1u << 31) /* in a partial: only the lead byte was read */
static inline int rlx__grammar_decode_byte(uint32_t *partial, int *remain, uint8_t b, uint32_t *cp)
{
    if (*remain > 0) {
        if ((b & 0xc0) != 0x80) return 0;
        if (*partial & RLX__UTF8_LEAD) { /* the second byte: no overlong forms, surrogates or > U+10FFFF */
            uint32_t v = *partial & ~RLX__UTF8_LEAD;
            if (*remain == 2 && ((v == 0 && b < 0xa0) || (v == 0xd && b > 0x9f))) return 0;
            if (*remain == 3 && ((v == 0 && b < 0x90) || (v == 4 && b > 0x8f) || v > 4)) return 0;
            *partial = v;
        }
        *partial = (*partial << 6) | (b & 0x3f);
        if (--*remain > 0) return 2;
        *cp = *partial;
        return 1;
    }
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    int r = (b & 0xe0) == 0xc0 ? 1 : (b & 0xf0) == 0xe0 ? 2 : (b & 0xf8) == 0xf0 ? 3 : -1;
    if (r < 0 || b == 0xc0 || b == 0xc1 || b > 0xf4) return 0; /* C0/C1 only start overlong forms */
    *partial = (b & (0x3f >> r)) | RLX__UTF8_LEAD;
    *remain = r;
    return 2;
}
/* The code points a half-read sequence (partial, remain > 0) may still become, [*lo, *hi];
 * false when none. */
static inline bool rlx__grammar_partial_range(uint32_t partial, int remain, uint32_t *lo, uint32_t *hi)
{
    const bool lead_only = partial & RLX__UTF8_LEAD;
    partial &= ~RLX__UTF8_LEAD;
    *lo = partial << (6 * remain);
    *hi = *lo | ((1u << (6 * remain)) - 1);
    if (lead_only) { /* the shortest forms only: a lead byte of n bytes starts U+0080, U+0800, U+10000 on */
        static const uint32_t min_cp[4] = {0, 0x80, 0x800, 0x10000};
        if (*lo < min_cp[remain]) *lo = min_cp[remain];
    }
    if (*hi > 0x10ffff) *hi = 0x10ffff;
    return *lo <= *hi;
}
bool rlx__grammar_partial_possible(const rlx_grammar *g, const rlx__sset *s, uint32_t partial, int remain);
bool rlx__grammar_top_has(const rlx_grammar *g, uint32_t elem, uint32_t cp);
void rlx__grammar_step_cp(const rlx_grammar *g, const rlx__sset *in, uint32_t cp, rlx__sset *out, uint32_t *buf);

struct rlx_grammar_state {
    const rlx_grammar *g;
    rlx__sset stacks;
    uint32_t partial;       /* bits of a half-read UTF-8 sequence */
    int remain;             /* continuation bytes still expected (0: none) */
    /* scratch, reached through pointers so the const checks (allows, mask) may use it: */
    uint32_t *buf;          /* RLX_GRAMMAR_MAX_DEPTH + 1 entries */
    rlx__sset *spare;       /* two stack sets */
};

/* ---- per-position tables (grammar_tables.c), owned by a grammar cache ---- */

#define RLX__GTABLE_DEPTH 8 /* entries at the top of a stack that key a table */
#define RLX__GTABLE_UNDECIDED 20000 /* undecided (token, offset) pairs of a table, at most */
/* a store's tables together, at most (one table may exceed it); a walk ahead fills at most half
 * (grammar.h): ~3,400 tables of a 151,936-token vocabulary; a Zen 5 built 2,750-3,200 in its 100 ms */
#define RLX__GTABLE_BYTES ((size_t)128 << 20)

typedef struct rlx__gtables rlx__gtables;
typedef struct rlx__gtables_stats { uint64_t built, hits, evictions, derived, counted, classes; } rlx__gtables_stats;

/* One table (grammar_tables.c says what it holds), built by grammar_tbuild.c. */
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

/* A code point class of a counted repetition's term and what it says of a vocabulary
 * (grammar_tclass.c: the position where a table is built by counting). */
typedef struct rlx__gclass {
    uint32_t *rng;          /* the class: sorted disjoint ranges lo, hi (n_rng pairs), then the top's */
    size_t n_rng, n_top;    /* set's (n_top pairs: a token's first code point must be in it) */
    uint64_t hash;
    const rlx_grammar_vocab *v;
    bool partials;          /* a token's last, half-read character counts (below) */
    uint8_t *cnt;           /* per token (padded to whole words of 64): its code points, 1..126, when it is whole
                               code points of the class only, or such code points and then, with
                               partials, a half-read one that can only become one of the class
                               (counted as one more); 127 for every other token (walked, or never
                               accepted: not UTF-8) */
    struct rlx__gwnode {    /* the trie nodes whose subtree holds a walked token, in preorder (a */
        uint32_t node, end; /* small array, read in order: the nodes of the trie lie far apart) */
        uint32_t depth;     /* node, the entry after its subtree's last, its depth, its byte, */
        uint8_t byte, tok;  /* 1 where walked tokens end at it */
    } *wn;
    uint32_t n_wn;
    uint64_t last_use;
} rlx__gclass;

typedef struct rlx__gclasses rlx__gclasses;
rlx__gclasses *rlx__gclasses_new(void);
void rlx__gclasses_free(rlx__gclasses *s);
enum { RLX__GCOUNT_OFF, RLX__GCOUNT_AUTO, RLX__GCOUNT_ALWAYS }; /* when to count (AUTO: classes worth it) */
void rlx__gclasses_set_mode(rlx__gclasses *s, int mode);
uint64_t rlx__gclasses_built(const rlx__gclasses *s);
/* The class by which key's table (klen entries, as rlx__gtable_build's) may be counted, *left
 * set to the terms that may follow the one begun; NULL when it may not be (*rc 0) or on failure
 * (*rc an RLX_E* code). buf: scratch of RLX_GRAMMAR_MAX_DEPTH + 1. The class stays valid until
 * the next call. */
const rlx__gclass *rlx__gclass_plan(rlx__gclasses *s, const rlx_grammar *g, const rlx_grammar_vocab *v,
                                    const uint32_t *key, size_t klen, uint32_t *left, uint32_t *buf, int *rc);

/* The steps the table builds' walks made (grammar_tbuild.c), kept for the next build of the
 * same grammar (the caller clears it before it builds another grammar's table); at most
 * RLX__GMEMO_STATES stack sets and RLX__GMEMO_STEPS remembered steps (then it starts over:
 * some 5 MB at most). */
#define RLX__GMEMO_STATES 4096
#define RLX__GMEMO_STEPS (1u << 16)
typedef struct rlx__gmemo rlx__gmemo;
rlx__gmemo *rlx__gmemo_new(void);
void rlx__gmemo_free(rlx__gmemo *m);
void rlx__gmemo_clear(rlx__gmemo *m);

/* Builds tb (zeroed; its key is the caller's) for key (partial, remain, the top part's entries;
 * klen in all) over v: words = the accepted bitmap's 64-bit words, max_und the undecided pairs
 * it may hold (beyond: tb->deeper), buf scratch of RLX_GRAMMAR_MAX_DEPTH + 1, m the memo of g's steps. ref: NULL, or the
 * table of the same key with one entry at an earlier position of a counted repetition (chain_ref
 * in grammar_tables.c), where `left` terms of the repetition may still follow this key's term:
 * a token of at most left + 1 bytes cannot reach the repetition's end from either position (the
 * term at the top has a byte or more to go, and every term takes a byte or more), so what ref
 * says of it holds here, and only the trie's subtrees with a longer token are walked. cls
 * (with ref NULL): the class rlx__gclass_plan found for the key, `left` its terms to follow: the
 * counted tokens decided by their counts, only the subtrees of the others walked. 0 or an
 * RLX_E* code. */
int rlx__gtable_build(const rlx_grammar *g, const uint32_t *key, size_t klen, const rlx_grammar_vocab *v, size_t words,
                      size_t max_und, uint32_t *buf, rlx__gmemo *m, const gtable *ref, const rlx__gclass *cls,
                      uint32_t left, gtable *tb);

/* A store of at most max_tables tables over an n_vocab vocabulary; NULL when out of memory. */
rlx__gtables *rlx__gtables_new(int32_t n_vocab, size_t max_tables);
void rlx__gtables_free(rlx__gtables *t);
/* Forgets the tables of grammar slot `slot` (the slot now holds another grammar). */
void rlx__gtables_drop(rlx__gtables *t, uint32_t slot);
/* bits (n_vocab bits) = the tokens state s accepts, from the tables of grammar slot `slot`
 * (built the first time a stack top needs one). The count, or a negative RLX_E* code. */
int64_t rlx__gtables_mask(rlx__gtables *t, uint32_t slot, const rlx_grammar_state *s, const rlx_grammar_vocab *v,
                          uint64_t *bits);
void rlx__gtables_get_stats(const rlx__gtables *t, rlx__gtables_stats *out);
/* Building tables ahead: a walk over the positions reachable from the stacks `start` (no
 * half-read sequence) of grammar slot `slot`, shortest stacks first, building each one's table
 * (grammar_tables.c), within bounds of the whole walk: max_stacks positions, max_new tables,
 * max_ms milliseconds in all its runs (0: none), half the store's count or bytes (so the first
 * positions' tables stay). rlx__gwalk_run goes on for about slice_ms (0: no slice; < 0: none
 * now, the walk only set up) and marks the
 * walk done when nothing is left or a bound is reached; it returns early, the walk not done,
 * once *stop (may be NULL) is set. g: the grammar of the slot (the same content at every run). Tables already there are kept. Returns the tables built by the run, or
 * a negative RLX_E* code (the walk is then done). */
typedef struct rlx__gwalk rlx__gwalk;
rlx__gwalk *rlx__gwalk_new(uint32_t slot, const rlx__sset *start, size_t max_stacks, size_t max_new, double max_ms);
void rlx__gwalk_free(rlx__gwalk *w);
bool rlx__gwalk_done(const rlx__gwalk *w);
int64_t rlx__gwalk_run(rlx__gtables *t, rlx__gwalk *w, const rlx_grammar *g, const rlx_grammar_vocab *v, double slice_ms,
                       const atomic_bool *stop);
/* Another top-part depth and bounds (for tests; forgets every table). 0 or RLX_ENOMEM. */
int rlx__gtables_configure(rlx__gtables *t, uint32_t depth, size_t max_tables, size_t max_bytes, size_t max_und);
int rlx__grammar_cache_configure_tables(rlx_grammar_cache *c, uint32_t depth, size_t max_tables, size_t max_bytes,
                                        size_t max_und);

/* When tables are counted (grammar_tclass.c): RLX__GCOUNT_AUTO by default; tests set OFF (the
 * other ways) and ALWAYS (every class, small ones too). */
void rlx__gtables_count(rlx__gtables *t, int mode);
void rlx__grammar_cache_count_tables(rlx_grammar_cache *c, int mode);

/* FNV-1a over n bytes from h (the grammar cache's keys: compiled content, positions, tables) */
static inline uint64_t rlx__fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

#endif
