/* grammar.h - constrained decoding: GBNF grammars (llama.cpp's dialect) compiled to a
 * pushdown recogniser over Unicode code points, matched byte by byte against token texts.
 *
 * A compiled rlx_grammar is immutable and may be shared by any number of sequences on any
 * threads. An rlx_grammar_state is one sequence's position in it (a set of parse stacks plus
 * a partial UTF-8 code point); it is owned by that sequence and is not thread-safe. An
 * rlx_grammar_vocab is the tokenizer's token texts as a byte trie, built once per model and
 * shared read-only.
 *
 * Dialect (llama.cpp grammars/README.md): `name ::= alternatives` rules, one per line (a rule
 * continues on the next line after `|` or inside parentheses), `#` comments, string literals
 * with \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH escapes, character classes [a-z] and [^...],
 * `.` (any code point), groups, rule references, and the postfix operators * + ? {m} {m,}
 * {m,n}, and token references: <[id]> matches the token with that id, <text> the one token
 * that text (angle brackets included, no '>' inside) tokenizes to with special tokens parsed,
 * !<[id]> / !<text> any token but that one (never an end-of-generation token: the end is
 * decided apart). A token reference matches a whole token by id at a character boundary,
 * whatever its bytes; text that runs into a token reference never matches it (a token's bytes
 * may end right before one). Left recursion is refused at compile time (it would never terminate); a repetition of
 * something that can match nothing ((a|)*, (b? c?)+) is not left recursion here: it repeats
 * the term's non-empty matches, the same language (llama.cpp refuses these).
 *
 * Limits (over them compilation or a step fails with RLX_ERANGE and a message, never an
 * abort): source size, rules, elements, repetition counts, parse stacks alive at once. */
#ifndef RLX_GRAMMAR_H
#define RLX_GRAMMAR_H

#include "backends/rlx.h"
#include <stdatomic.h>

typedef struct rlx_grammar rlx_grammar;
typedef struct rlx_grammar_state rlx_grammar_state;
typedef struct rlx_grammar_vocab rlx_grammar_vocab;

#define RLX_GRAMMAR_MAX_SOURCE (1u << 20)  /* bytes of GBNF text */
#define RLX_GRAMMAR_MAX_RULES 4096
#define RLX_GRAMMAR_MAX_ELEMS (1u << 18)
#define RLX_GRAMMAR_MAX_REPEAT 1000        /* m and n of {m,n} */
#define RLX_GRAMMAR_MAX_STACKS 2048        /* live parse stacks of one state */
/* What a request hears when its output reaches a state over RLX_GRAMMAR_MAX_STACKS (RLX_ERANGE
 * from a step or a mask): the grammar is too ambiguous there. */
#define RLX_GRAMMAR_STACKS_MSG                                                                       \
    "the grammar (or JSON schema) is too ambiguous or too deep at this point of the output: it would " \
    "need more than 2048 parse stacks (alternatives that overlap, such as x* x{900}, or many that "  \
    "start alike), nesting deeper than 1024, or more than 1000000 expansions of rules that may be "  \
    "empty in one step (nested repetitions of what may be empty, such as ((a?){0,9}){0,9})"
#define RLX_GRAMMAR_MAX_DEPTH 1024         /* nesting of one stack */
/* One expansion of a stack's top (every path through rules that may be empty): steps, and nested
 * calls (popping through empty alternatives recurses without the stack growing) */
#define RLX_GRAMMAR_MAX_EXPAND 1000000
#define RLX_GRAMMAR_MAX_EXPAND_DEPTH 4096
_Static_assert(RLX_GRAMMAR_MAX_STACKS == 2048 && RLX_GRAMMAR_MAX_DEPTH == 1024 && RLX_GRAMMAR_MAX_EXPAND == 1000000,
               "RLX_GRAMMAR_STACKS_MSG names the limits");

/* Compiles GBNF text; `root` names the start rule (NULL: "root"). NULL on failure with a
 * message in err naming the line and column. Token references: any <[id]> below 2^31; a <text>
 * one is refused (it needs the model's vocabulary: rlx_grammar_compile_ids). */
rlx_grammar *rlx_grammar_compile(const char *src, size_t len, const char *root, rlx_error *err);

/* The model's vocabulary as token references see it at compile time. */
typedef struct rlx_grammar_token_ids {
    int32_t n_vocab;   /* ids at or above it are refused (0: not checked) */
    /* the one token `text` (len bytes, its angle brackets included) tokenizes to, or -1 when it
     * is several or none (refused); NULL: every <text> reference is refused */
    int32_t (*lookup)(const void *ctx, const char *text, size_t len);
    /* whether a token ends generation (NULL: none does): <..> naming one is refused, as it
     * could never be matched (the end is allowed where the grammar is complete instead) */
    bool (*is_eog)(const void *ctx, int32_t token);
    const void *ctx;
} rlx_grammar_token_ids;
rlx_grammar *rlx_grammar_compile_ids(const char *src, size_t len, const char *root, const rlx_grammar_token_ids *ids,
                                     rlx_error *err);
void rlx_grammar_free(rlx_grammar *g);

/* A fresh state at the start of the root rule; NULL on allocation failure or a limit. */
rlx_grammar_state *rlx_grammar_state_new(const rlx_grammar *g, rlx_error *err);
rlx_grammar_state *rlx_grammar_state_clone(const rlx_grammar_state *s);
void rlx_grammar_state_free(rlx_grammar_state *s);

/* Feeds bytes (any split of UTF-8 across calls is fine). Returns 0 and advances when the text
 * can continue the grammar; RLX_EINVAL (state unchanged) when it cannot; RLX_ERANGE when the
 * parse would need more than RLX_GRAMMAR_MAX_STACKS stacks (state unchanged). */
int rlx_grammar_accept(rlx_grammar_state *s, const char *bytes, size_t n);
/* True when the bytes could be accepted (state unchanged). */
bool rlx_grammar_allows(const rlx_grammar_state *s, const char *bytes, size_t n);
/* The same for a whole token: `token` (its id) with its bytes (n may be 0: a control token). The
 * stacks whose top is a token reference matching the id (only at a character boundary) pass it;
 * the others read its bytes (none: they refuse it). When the bytes end inside a character, the
 * stacks that passed a reference are dropped (the state has one half-read sequence for all its
 * stacks, and theirs read none). Without token references in the grammar: rlx_grammar_accept /
 * _allows on the bytes, a token of none refused. A state knows no vocabulary: an end-of-
 * generation token is the caller's to decide (the stage allows it where rlx_grammar_can_end, and
 * never passes it here). Returns as rlx_grammar_accept does. */
int rlx_grammar_accept_token(rlx_grammar_state *s, int32_t token, const char *bytes, size_t n);
bool rlx_grammar_allows_token(const rlx_grammar_state *s, int32_t token, const char *bytes, size_t n);
/* The same, saying why not: 0 allowed, RLX_EINVAL refused, RLX_ERANGE over a limit (the state
 * would hold more than RLX_GRAMMAR_MAX_STACKS stacks), RLX_ENOMEM. */
int rlx_grammar_token_check(const rlx_grammar_state *s, int32_t token, const char *bytes, size_t n);
/* True when the text so far is a complete sentence of the grammar (end-of-generation may be
 * sampled): some stack is empty and no UTF-8 sequence is half-read. */
bool rlx_grammar_can_end(const rlx_grammar_state *s);
/* True when nothing but the end can follow (every stack is empty). */
bool rlx_grammar_must_end(const rlx_grammar_state *s);
/* Every string w for which the text so far, then w, then `stop` can continue the grammar, w
 * holding `stop` only right after an unpaired `esc` (JSON's \" inside a key, esc '\\';
 * UINT32_MAX for no escape) - when they are few: cb(ctx, w, |w|) once per string (in
 * code point order; a nonzero return stops the walk and is returned), *count their number.
 * RLX_ERANGE, with the strings so far already given, when the language is not such a list:
 * more than max_strings strings, one longer than max_len, over max_steps steps of the walk, a
 * position that offers a negated or wide set (more than 64 code points), a token reference, or
 * a state inside a character. RLX_ENOMEM. The state is not changed (engine/grammar_enum.c; the
 * JSON keys stage lists the keys an object may still take this way). */
int rlx_grammar_strings_before(const rlx_grammar_state *s, uint32_t stop, uint32_t esc, size_t max_strings, size_t max_len,
                               size_t max_steps, int (*cb)(void *ctx, const uint32_t *cps, size_t n), void *ctx,
                               size_t *count);

/* GBNF for one JSON object (OpenAI's response_format {"type":"json_object"}): llama.cpp's
 * grammars/json.gbnf with an object at the root, whitespace bounded. */
extern const char rlx_grammar_json_object[];

/* ---- vocabulary ---- */

/* texts[i] / lens[i]: the bytes token i produces (special tokens should be given length 0:
 * they are never allowed by a grammar). Copies what it needs. */
rlx_grammar_vocab *rlx_grammar_vocab_new(int32_t n_vocab, const char *const *texts, const size_t *lens);
/* Marks the tokens that end generation (is_eog(ctx, t) true), which !<..> never allows: the
 * stage allows them where the grammar is complete. Once per vocabulary, before it is shared.
 * 0, or RLX_ENOMEM. */
int rlx_grammar_vocab_set_eog(rlx_grammar_vocab *v, bool (*is_eog)(const void *ctx, int32_t token), const void *ctx);
void rlx_grammar_vocab_free(rlx_grammar_vocab *v);

/* Fills allowed[0..n_vocab) with 1 for every token whose bytes the state accepts, 0 otherwise,
 * walking the byte trie once (a rejected prefix prunes every token under it), plus those the
 * token references at the stacks' tops match by id. Returns the number allowed, or a negative
 * RLX_E* code. */
int64_t rlx_grammar_mask(const rlx_grammar_state *s, const rlx_grammar_vocab *v, uint8_t *allowed);

/* Each token's bytes as a grammar sees them (grammar_tokens.c): texts[t] / lens[t] for every
 * token of `tok` (n_vocab of them), end-of-generation and control tokens given none. The
 * worker builds them once per model, `rlxd bench --grammar` once per run. 0, or RLX_ENOMEM
 * with err set (nothing to free then). */
struct rlx_tokenizer;
int rlx_grammar_token_bytes(const struct rlx_tokenizer *tok, int32_t n_vocab, char ***texts, size_t **lens,
                            rlx_error *err);
void rlx_grammar_token_bytes_free(char **texts, size_t *lens, int32_t n_vocab);
/* Token references resolved by `tok` (borrowed; its n_vocab tokens): <text> is the one token the
 * text tokenizes to with special tokens parsed (as llama.cpp); <..> naming an end-of-generation
 * token is refused. */
rlx_grammar_token_ids rlx_grammar_tokenizer_ids(const struct rlx_tokenizer *tok, int32_t n_vocab);
/* rlx_tokenizer_is_eog with `tok` an rlx_tokenizer, in the callback form the grammar's
 * interfaces take (rlx_grammar_tokens.is_eog, rlx_grammar_vocab_set_eog). */
bool rlx_grammar_tokenizer_is_eog(const void *tok, int32_t t);

/* ---- masks remembered per grammar position (grammar_cache.c) ----
 *
 * A state's exact content (its parse stacks and half-read UTF-8 sequence) in a given grammar
 * decides its mask, so masks are kept by (grammar content, state content): filled lazily, the
 * first time a step at that position needs the full mask, and evicted least recently used.
 * Grammars are recognised by content, so requests with the same schema share entries. A cache
 * is used by one thread only (the model's worker); each entry costs n_vocab / 8 bytes. A miss
 * computes its mask from per-position tables the cache keeps too (rlx_grammar_cache_fast_mask
 * below; RLX_GRAMMAR_CACHE_TABLES of them, each n_vocab / 8 bytes plus its undecided tokens). */
typedef struct rlx_grammar_cache rlx_grammar_cache;
typedef struct rlx_grammar_cache_stats {
    uint64_t hits, misses, evictions;                  /* masks by exact position */
    uint64_t tables_built, table_hits, table_evictions; /* per-position tables (below) */
    uint64_t tables_derived; /* of tables_built: from a counted repetition's earlier position's */
    uint64_t tables_counted; /* of tables_built: by counting a repetition's code points (grammar_tclass.c) */
    uint64_t table_classes;  /* the code point classes those were counted by, built */
} rlx_grammar_cache_stats;

#define RLX_GRAMMAR_CACHE_ENTRIES 256
#define RLX_GRAMMAR_CACHE_TABLES 8192 /* per-position tables kept, n_vocab / 8 bytes and more each (RLX__GTABLE_BYTES in all) */

/* NULL when out of memory or on bad arguments. */
rlx_grammar_cache *rlx_grammar_cache_new(int32_t n_vocab, size_t max_entries);
void rlx_grammar_cache_free(rlx_grammar_cache *c);
/* The mask of state s over vocabulary v (which must have the cache's n_vocab): a bitmap of
 * n_vocab bits (bit t of word t / 64: token t allowed), valid until the next call; *count
 * gets the number of allowed tokens. NULL with *rc an RLX_E* code on failure. */
const uint64_t *rlx_grammar_cache_mask(rlx_grammar_cache *c, const rlx_grammar_state *s, const rlx_grammar_vocab *v,
                                       int64_t *count, int *rc);
void rlx_grammar_cache_get_stats(const rlx_grammar_cache *c, rlx_grammar_cache_stats *out);
/* The mask of s (bits: n_vocab bits, cleared first) from the cache's per-position tables, as a
 * miss computes it, without the exact-position entries: the tables split each parse stack into
 * its top entries and the rest; tokens the top part accepts (or refuses) whatever lies below are
 * known from a table built once per (grammar, top part, half-read UTF-8 sequence), and only the
 * few that finish the top part and go on (a string's `",`) are checked against the rest. The
 * same set as rlx_grammar_mask, bit for bit. The count, or a negative RLX_E* code. */
int64_t rlx_grammar_cache_fast_mask(rlx_grammar_cache *c, const rlx_grammar_state *s, const rlx_grammar_vocab *v,
                                    uint64_t *bits);

/* Builds ahead the per-position tables of start's grammar (start: a state with no half-read
 * sequence, normally the grammar's start) for the positions reachable from it, shortest stacks
 * first, so that the masks of the first request with a schema find them. The walk starts once
 * per grammar content per cache (a later call returns 0 at once, also when evictions have taken
 * tables since) and ends when every reachable position (up to RLX_GRAMMAR_PREPARE_STACKS) has
 * its table, or at max_new tables, max_ms milliseconds in all (0: no bound) or half the cache's
 * table store. This call runs it for about slice_ms (0: to its end; < 0: not now, only
 * started, for a helper to go on with; a slice takes one position at least, however short, so
 * slices always end the walk); rlx_grammar_cache_prepare_more
 * continues it (rlx_grammar_cache_preparing: whether one goes on). Positions inside a multi-byte character (a token ending mid-character) are left
 * to be built when met. Returns the tables built by the call, or a negative RLX_E* code. Same
 * thread rules as the cache. */
/* Bounds of the walk: on a fast host (AVX-512 Zen 5) 100 ms built 1,760 tables of article.json
 * and stopped at the old bounds (2,048 positions, half of 64 MiB), leaving its first request's
 * mask p50 at 145 us (111 tables built on the way); 16,384 / 4,096 / 128 MiB: 2,750-3,200 in 100 ms,
 * p50 11-12 us (bench/RESULTS.md section 64). A slower host stops at the time bound first. */
#define RLX_GRAMMAR_PREPARE_STACKS 16384 /* positions the walk's set holds */
#define RLX_GRAMMAR_PREPARE_TABLES 4096
#define RLX_GRAMMAR_PREPARE_MS 100
/* with a helper thread on a spare core (engine/gaside.h) the walk costs the steps nothing: it
 * may go on longer, so that slower hosts also finish a schema's positions (person.json on a
 * Zen 3: 100 ms built ~1000 tables and left the first request's mask p99 at 5.2 ms; 300 ms,
 * ~1400-1600 and 0.16 ms; bench/RESULTS.md section 49) */
#define RLX_GRAMMAR_PREPARE_ASIDE_MS 300
/* the walk's budget in ms, built by the helper (true) or in slices of the worker's steps */
#define RLX_GRAMMAR_PREPARE_BUDGET_MS(helper) ((helper) ? RLX_GRAMMAR_PREPARE_ASIDE_MS : RLX_GRAMMAR_PREPARE_MS)
#define RLX_GRAMMAR_PREPARE_SLICE_MS 10 /* the worker's share per step */
int64_t rlx_grammar_cache_prepare(rlx_grammar_cache *c, const rlx_grammar_state *start, const rlx_grammar_vocab *v,
                                  size_t max_new, double max_ms, double slice_ms);
/* Continues one walk that rlx_grammar_cache_prepare left going, for about slice_ms (0: every
 * walk to its end). The tables built, 0 when no walk is going, or a negative RLX_E* code. */
int64_t rlx_grammar_cache_prepare_more(rlx_grammar_cache *c, const rlx_grammar_vocab *v, double slice_ms);
/* Continues the walks rlx_grammar_cache_prepare left going, one after the other, until *stop
 * is set (checked between two tables: a table being built is finished first) or none is left;
 * each walk's own bounds still hold. For a helper thread beside the forward pass
 * (engine/gaside.h): *stop is the only thing another thread touches meanwhile. The tables
 * built, or a negative RLX_E* code. */
int64_t rlx_grammar_cache_prepare_until(rlx_grammar_cache *c, const rlx_grammar_vocab *v, const atomic_bool *stop);
/* Whether a walk is still going. */
bool rlx_grammar_cache_preparing(const rlx_grammar_cache *c);

/* ---- as a stage of the sampler chain (engine/sample.h; sample_grammar.c) ---- */

typedef struct rlx_sampler_stage rlx_sampler_stage;

/* What the grammar stage borrows from the worker (all n_vocab long, valid while the stage
 * lives, used only by the thread running the sequence): each token's bytes (texts/lens, as
 * given to rlx_grammar_vocab_new, control tokens length 0), the vocabulary's trie, a mask
 * buffer, and whether a token ends generation. */
typedef struct rlx_grammar_tokens {
    const rlx_grammar_vocab *vocab;
    const char *const *texts;
    const size_t *lens;
    uint8_t *mask;
    bool (*is_eog)(const void *ctx, int32_t token);
    const void *eog_ctx;
    rlx_grammar_cache *cache;   /* optional (NULL: every refused draw walks the trie) */
} rlx_grammar_tokens;

/* A constraint stage following `g` (taken over, freed with the stage, also on failure) from
 * its start: it allows a token whose bytes continue the text, an end-of-generation token only
 * where the text is complete, follows generated tokens (not the prompt's), and demands the
 * end when nothing else can follow. NULL with err set on failure. */
rlx_sampler_stage *rlx_grammar_stage_new(rlx_grammar *g, const rlx_grammar_tokens *toks, rlx_error *err);

/* The same stage, lazy (llama.cpp's lazy grammars, for tool_choice "auto"): it allows anything,
 * and any end, until it is triggered; the grammar then constrains what follows. Two kinds of
 * trigger, not mixed (both: RLX_EINVAL):
 * - strings (copied, at most RLX_GRAMMAR_MAX_TRIGGERS, none empty): the first one to appear
 *   anywhere in the generated text; the grammar reads the text from that trigger's first byte.
 * - pattern (a PCRE2 regex, copied compiled; NULL: none): matched ANCHORED against the whole
 *   generated text from its first byte after every token (bytes, not UTF-8: a token may end
 *   inside a character, and the text may hold any byte; matched with its length). A full match
 *   triggers, and the grammar reads the text from the start of capture group 1 (or of the match
 *   when the pattern has no group 1 or it did not take part); a partial match (the text ends
 *   where it could still match, PCRE2_PARTIAL_SOFT) keeps waiting; no match means the output
 *   is not what the grammar is for, and the stage stays unconstrained for good. A pattern may
 *   end in [\s\S]* (llama.cpp's "pattern full" form). The text is kept while waiting, up to
 *   RLX_GRAMMAR_PATTERN_MAX_TEXT bytes; beyond that the stage stays unconstrained too.
 *   A pattern that does not compile: RLX_EINVAL with PCRE2's message and offset.
 * None of either: not lazy (as rlx_grammar_stage_new). If the text read from the trigger cannot
 * continue the grammar, the stage stays unconstrained. `g` is taken over as by
 * rlx_grammar_stage_new, also on failure. Built and used by the thread running the sequence. */
/* The grammar state of a stage made above, NULL while a lazy one waits for its trigger (the
 * stage's own thread; valid until its next accept). */
const rlx_grammar_state *rlx_grammar_stage_state(const rlx_sampler_stage *st);

#define RLX_GRAMMAR_MAX_TRIGGERS 4
#define RLX_GRAMMAR_PATTERN_MAX_TEXT (64u << 10)
rlx_sampler_stage *rlx_grammar_stage_new_lazy(rlx_grammar *g, const rlx_grammar_tokens *toks, const char *const *triggers,
                                              size_t n_triggers, const char *pattern, rlx_error *err);

#endif
