/* sample_grammar.c - a GBNF grammar as a constraint stage of the sampler chain (grammar.h,
 * sample.h). The chain draws first and asks allows() about the one token; the full mask over
 * the vocabulary's trie is built only when that token is refused. A lazy stage (tool_choice
 * "auto") constrains nothing until one of its trigger strings appears in the generated text,
 * or until the generated text from its start matches its anchored pattern (PCRE2); the grammar
 * then reads the text from the trigger (the pattern's first group) on, and holds from there. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/grammar.h"
#include "engine/sample.h"

#include <pcre2.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct grammar_stage {
    rlx_sampler_stage base;
    rlx_grammar *g;
    rlx_grammar_state *st;
    rlx_grammar_tokens t;
    /* lazy: the triggers, and the generated text's last bytes while none has appeared */
    char *triggers[RLX_GRAMMAR_MAX_TRIGGERS];
    size_t n_triggers, max_trigger;
    bool waiting;  /* lazy, no trigger seen yet: the stage constrains nothing */
    char *tail;    /* the last bytes generated (fewer than max_trigger, plus one token's); with a
                      pattern, all of them (at most RLX_GRAMMAR_PATTERN_MAX_TEXT) */
    size_t n_tail, cap_tail;
    pcre2_code *re; /* lazy on a pattern (compiled once, at construction), else NULL */
    pcre2_match_data *md;
} grammar_stage;

const rlx_grammar_state *rlx_grammar_stage_state(const rlx_sampler_stage *st)
{
    const grammar_stage *s = (const grammar_stage *)st;
    return s->waiting ? NULL : s->st;
}

static bool g_allows(rlx_sampler_stage *st, int32_t tok)
{
    const grammar_stage *s = (const grammar_stage *)st;
    if (s->waiting) return true;
    if (s->t.is_eog(s->t.eog_ctx, tok)) return rlx_grammar_can_end(s->st);
    return rlx_grammar_allows_token(s->st, tok, s->t.texts[tok], s->t.lens[tok]);
}

/* The mask from the cache: whole words of refused tokens at a time. */
static int64_t mask_cached(grammar_stage *s, rlx_token_cands *c)
{
    int64_t n;
    int rc;
    const uint64_t *bits = rlx_grammar_cache_mask(s->t.cache, s->st, s->t.vocab, &n, &rc);
    if (!bits) return rc;
    bool can_end = rlx_grammar_can_end(s->st);
    int64_t left = 0;
    for (int32_t base = 0; base < c->n_vocab; base += 64) {
        uint64_t w = bits[base >> 6];
        int32_t end = RLX_MIN(base + 64, c->n_vocab);
        if (can_end) { /* the end tokens too: token by token (only where the value may end) */
            for (int32_t t = base; t < end; t++) {
                bool ok = ((w >> (t - base)) & 1) || s->t.is_eog(s->t.eog_ctx, t);
                if (!ok) c->logits[t] = -INFINITY;
                else left++;
            }
            continue;
        }
        /* whole words: most of a schema's positions refuse almost every token (one store per
         * refused token, none of the per-token tests) */
        uint64_t valid = end - base == 64 ? ~0ull : (1ull << (end - base)) - 1;
        left += __builtin_popcountll(w & valid);
        if (!(w & valid)) {
            for (int32_t t = base; t < end; t++) c->logits[t] = -INFINITY;
        } else {
            for (uint64_t z = ~w & valid; z; z &= z - 1) c->logits[base + __builtin_ctzll(z)] = -INFINITY;
        }
    }
    return left;
}

/* The mask of the current position, into the cache (its entry and tables), for mask_cached. */
static int g_prefetch(rlx_sampler_stage *st)
{
    grammar_stage *s = (grammar_stage *)st;
    if (s->waiting || !s->t.cache) return 0;
    int64_t n;
    int rc;
    return rlx_grammar_cache_mask(s->t.cache, s->st, s->t.vocab, &n, &rc) ? 0 : rc;
}

static int64_t g_mask(rlx_sampler_stage *st, rlx_token_cands *c)
{
    grammar_stage *s = (grammar_stage *)st;
    if (s->waiting) { /* nothing masked */
        int64_t left = 0;
        for (int32_t t = 0; t < c->n_vocab; t++) left += c->logits[t] != -INFINITY;
        return left;
    }
    if (s->t.cache) return mask_cached(s, c);
    int64_t n = rlx_grammar_mask(s->st, s->t.vocab, s->t.mask);
    if (n < 0) return n;
    bool can_end = rlx_grammar_can_end(s->st);
    int64_t left = 0;
    for (int32_t t = 0; t < c->n_vocab; t++) {
        bool ok = s->t.mask[t] || (can_end && s->t.is_eog(s->t.eog_ctx, t));
        if (!ok) c->logits[t] = -INFINITY;
        else left++;
    }
    return left;
}

/* Generated tokens only (an end-of-generation token that ignore_eos lets through has no bytes). */
/* Appends a token's bytes to the tail. */
static int tail_add(grammar_stage *s, const char *b, size_t n)
{
    if (s->n_tail + n > s->cap_tail) {
        size_t cap = s->n_tail + n + 64;
        if (s->re && cap < 2 * s->cap_tail) cap = 2 * s->cap_tail; /* the whole text: grows geometrically */
        char *t = realloc(s->tail, cap);
        if (!t) return RLX_ENOMEM;
        s->tail = t, s->cap_tail = cap;
    }
    memcpy(s->tail + s->n_tail, b, n);
    s->n_tail += n;
    return 0;
}

/* The trigger has appeared at `from` (within the tail): the grammar reads the tail from there. */
static int fire(grammar_stage *s, const char *from)
{
    s->waiting = false;
    int rc = rlx_grammar_accept(s->st, from, (size_t)(s->tail + s->n_tail - from));
    s->n_triggers = 0; /* one activation: after a refusal it stays off */
    if (rc == RLX_EINVAL || rc == RLX_ERANGE) s->waiting = true;
    else if (rc) return rc;
    return 0;
}

/* Waiting on a pattern: no longer (the output is not a call, or its text outgrew the bound). */
static void pattern_off(grammar_stage *s)
{
    pcre2_match_data_free(s->md);
    pcre2_code_free(s->re);
    s->md = NULL, s->re = NULL;
    free(s->tail);
    s->tail = NULL, s->n_tail = s->cap_tail = 0;
}

/* While waiting on a pattern: the text so far, from its first byte, is matched anchored. A full
 * match fires (the grammar reads from group 1's start, or the match's); a partial one (the text
 * ends while it could still match) waits for more; no match (or a match limit) leaves the stage
 * unconstrained for good. PCRE2_PARTIAL_SOFT, not _HARD: a pattern that ends in [\s\S]* (the
 * rest of the output, llama.cpp's "pattern full" form) could always take more, so a hard
 * partial would never let it match in full. Bytes, not UTF-8 (a token may end mid-character). */
static int pattern_accept(grammar_stage *s, const char *b, size_t n)
{
    if (!n) return 0; /* an end-of-generation token has no bytes (and no text pointer) */
    if (s->n_tail + n > RLX_GRAMMAR_PATTERN_MAX_TEXT) {
        pattern_off(s);
        return 0;
    }
    int rc = tail_add(s, b, n);
    if (rc) return rc;
    int m = pcre2_match(s->re, (PCRE2_SPTR)s->tail, s->n_tail, 0, PCRE2_ANCHORED | PCRE2_PARTIAL_SOFT, s->md, NULL);
    if (m == PCRE2_ERROR_PARTIAL) return 0;
    if (m == PCRE2_ERROR_NOMEMORY) return RLX_ENOMEM;
    if (m < 0) { /* no match, or a limit: not a call */
        pattern_off(s);
        return 0;
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
    size_t at = m >= 2 && ov[2] != PCRE2_UNSET ? (size_t)ov[2] : (size_t)ov[0];
    rc = fire(s, s->tail + at);
    pattern_off(s);
    return rc;
}

/* While waiting: the token's bytes join the tail; at the first trigger found there (the
 * earliest), the grammar reads the tail from it. Text after a trigger that the grammar refuses
 * (the token that completed the trigger ran on outside it) leaves the stage unconstrained for
 * good, as text with no call: the constraint never makes generation fail. */
static int lazy_accept(grammar_stage *s, const char *b, size_t n)
{
    if (!n) return 0; /* an end-of-generation token has no bytes (and no text pointer) */
    int rc = tail_add(s, b, n);
    if (rc) return rc;
    const char *first = NULL;
    for (size_t i = 0; i < s->n_triggers; i++) {
        const char *end = s->tail + s->n_tail, *tr = s->triggers[i];
        size_t tl = strlen(tr);
        for (const char *p = s->tail; p + tl <= end && (!first || p < first); p++)
            if (!memcmp(p, tr, tl)) { first = p; break; }
    }
    if (first) return fire(s, first);
    size_t keep = s->max_trigger - 1; /* a trigger's prefix may end the text */
    if (s->n_tail > keep) {
        memmove(s->tail, s->tail + s->n_tail - keep, keep);
        s->n_tail = keep;
    }
    return 0;
}

/* Generated tokens only (an end-of-generation token that ignore_eos lets through has no bytes). */
static int g_accept(rlx_sampler_stage *st, int32_t tok, bool generated)
{
    grammar_stage *s = (grammar_stage *)st;
    if (!generated) return 0;
    if (s->waiting && s->re) return pattern_accept(s, s->t.texts[tok], s->t.lens[tok]);
    if (s->waiting) return s->n_triggers ? lazy_accept(s, s->t.texts[tok], s->t.lens[tok]) : 0;
    if (s->t.is_eog(s->t.eog_ctx, tok)) return 0; /* the end (ignore_eos lets it through): no text */
    int rc = rlx_grammar_accept_token(s->st, tok, s->t.texts[tok], s->t.lens[tok]);
    if (rc == RLX_EINVAL && !s->t.lens[tok]) return 0; /* a control token no reference names: no text, no step */
    return rc == RLX_ERANGE ? RLX_ERANGE : rc ? RLX_ENOMEM : 0;
}

/* A token of the mask refused: because the whole state would go over its stack bound (a mask
 * reads the stacks one at a time, and may allow a token the whole state cannot take)? (An
 * empty mask never is: the mask itself reports a state past the bound.) */
static int g_refusal(const rlx_sampler_stage *st, int32_t token, rlx_error *err)
{
    const grammar_stage *s = (const grammar_stage *)st;
    if (s->waiting || rlx_grammar_token_check(s->st, token, s->t.texts[token], s->t.lens[token]) != RLX_ERANGE) return 0;
    return rlx_errorf(err, RLX_ERANGE, "%s", RLX_GRAMMAR_STACKS_MSG);
}

static bool g_can_end(const rlx_sampler_stage *st)
{
    const grammar_stage *s = (const grammar_stage *)st;
    return s->waiting || rlx_grammar_can_end(s->st);
}

static bool g_must_end(const rlx_sampler_stage *st)
{
    const grammar_stage *s = (const grammar_stage *)st;
    return !s->waiting && rlx_grammar_must_end(s->st);
}

static void g_free(rlx_sampler_stage *st)
{
    grammar_stage *s = (grammar_stage *)st;
    rlx_grammar_state_free(s->st);
    rlx_grammar_free(s->g);
    for (size_t i = 0; i < RLX_GRAMMAR_MAX_TRIGGERS; i++) free(s->triggers[i]);
    pattern_off(s);
    free(s);
}

rlx_sampler_stage *rlx_grammar_stage_new(rlx_grammar *g, const rlx_grammar_tokens *toks, rlx_error *err)
{
    static const rlx_stage_ops ops = {.name = "grammar", .allows = g_allows, .mask = g_mask, .accept = g_accept,
                                      .can_end = g_can_end, .must_end = g_must_end, .prefetch = g_prefetch,
                                      .refusal = g_refusal, .free = g_free};
    grammar_stage *s = calloc(1, sizeof *s);
    if (!g || !toks || !s) {
        free(s);
        rlx_grammar_free(g);
        rlx_errorf(err, g && toks ? RLX_ENOMEM : RLX_EINVAL, g && toks ? "out of memory" : "no grammar or tokens");
        return NULL;
    }
    s->base.ops = &ops;
    s->g = g;
    s->t = *toks;
    if (!(s->st = rlx_grammar_state_new(g, err))) {
        g_free(&s->base);
        return NULL;
    }
    return &s->base;
}

/* The pattern compiled for anchored byte matching; NULL with err set (RLX_EINVAL naming the
 * offset, or RLX_ENOMEM). */
static pcre2_code *pattern_compile(const char *pattern, rlx_error *err)
{
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED, &ec, &eo, NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        rlx_errorf(err, ec == PCRE2_ERROR_HEAPLIMIT || ec == PCRE2_ERROR_NOMEMORY ? RLX_ENOMEM : RLX_EINVAL,
                   "the grammar trigger pattern does not compile at offset %zu: %s", (size_t)eo, (const char *)msg);
    }
    return re;
}

rlx_sampler_stage *rlx_grammar_stage_new_lazy(rlx_grammar *g, const rlx_grammar_tokens *toks, const char *const *triggers,
                                              size_t n_triggers, const char *pattern, rlx_error *err)
{
    if (pattern && (n_triggers || !pattern[0])) {
        rlx_grammar_free(g);
        rlx_errorf(err, RLX_EINVAL, n_triggers ? "a grammar trigger pattern and trigger strings together"
                                               : "an empty grammar trigger pattern");
        return NULL;
    }
    if (pattern) {
        pcre2_code *re = pattern_compile(pattern, err);
        pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
        rlx_sampler_stage *st = md ? rlx_grammar_stage_new(g, toks, err) : NULL;
        if (!st) {
            if (re && !md) rlx_errorf(err, RLX_ENOMEM, "out of memory");
            if (!md) rlx_grammar_free(g);
            pcre2_match_data_free(md);
            pcre2_code_free(re);
            return NULL;
        }
        grammar_stage *s = (grammar_stage *)st;
        s->re = re, s->md = md;
        s->waiting = true;
        return st;
    }
    if (n_triggers > RLX_GRAMMAR_MAX_TRIGGERS) {
        rlx_grammar_free(g);
        rlx_errorf(err, RLX_EINVAL, "more than %d grammar triggers", RLX_GRAMMAR_MAX_TRIGGERS);
        return NULL;
    }
    for (size_t i = 0; i < n_triggers; i++)
        if (!triggers[i] || !triggers[i][0]) {
            rlx_grammar_free(g);
            rlx_errorf(err, RLX_EINVAL, "an empty grammar trigger");
            return NULL;
        }
    rlx_sampler_stage *st = rlx_grammar_stage_new(g, toks, err);
    if (!st || !n_triggers) return st;
    grammar_stage *s = (grammar_stage *)st;
    for (size_t i = 0; i < n_triggers; i++) {
        if (!(s->triggers[i] = strdup(triggers[i]))) {
            g_free(st);
            rlx_errorf(err, RLX_ENOMEM, "out of memory");
            return NULL;
        }
        size_t l = strlen(triggers[i]);
        if (l > s->max_trigger) s->max_trigger = l;
    }
    s->n_triggers = n_triggers;
    s->waiting = true;
    return st;
}
