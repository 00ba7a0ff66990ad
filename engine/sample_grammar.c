/* sample_grammar.c - a GBNF grammar as a constraint stage of the sampler chain (grammar.h,
 * sample.h). The chain draws first and asks allows() about the one token; the full mask over
 * the vocabulary's trie is built only when that token is refused. A lazy stage (tool_choice
 * "auto") constrains nothing until one of its trigger strings appears in the generated text;
 * the grammar then reads the text from the trigger on, and holds from there. */
#include "engine/grammar.h"
#include "engine/sample.h"

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
    char *tail;    /* the last bytes generated (fewer than max_trigger, plus one token's) */
    size_t n_tail, cap_tail;
} grammar_stage;

static bool g_allows(rlx_sampler_stage *st, int32_t tok)
{
    const grammar_stage *s = (const grammar_stage *)st;
    if (s->waiting) return true;
    if (s->t.is_eog(s->t.eog_ctx, tok)) return rlx_grammar_can_end(s->st);
    return s->t.lens[tok] && rlx_grammar_allows(s->st, s->t.texts[tok], s->t.lens[tok]);
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
        if (w == ~0ull && end - base == 64) {
            left += 64;
            continue;
        }
        for (int32_t t = base; t < end; t++) {
            bool ok = ((w >> (t - base)) & 1) || (can_end && s->t.is_eog(s->t.eog_ctx, t));
            if (!ok) c->logits[t] = -INFINITY;
            else left++;
        }
    }
    return left;
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
/* While waiting: the token's bytes join the tail; at the first trigger found there (the
 * earliest), the grammar reads the tail from it. Text after a trigger that the grammar refuses
 * (the token that completed the trigger ran on outside it) leaves the stage unconstrained for
 * good, as text with no call: the constraint never makes generation fail. */
static int lazy_accept(grammar_stage *s, const char *b, size_t n)
{
    if (!n) return 0; /* an end-of-generation token has no bytes (and no text pointer) */
    if (s->n_tail + n > s->cap_tail) {
        size_t cap = s->n_tail + n + 64;
        char *t = realloc(s->tail, cap);
        if (!t) return RLX_ENOMEM;
        s->tail = t, s->cap_tail = cap;
    }
    memcpy(s->tail + s->n_tail, b, n);
    s->n_tail += n;
    const char *first = NULL;
    for (size_t i = 0; i < s->n_triggers; i++) {
        const char *end = s->tail + s->n_tail, *tr = s->triggers[i];
        size_t tl = strlen(tr);
        for (const char *p = s->tail; p + tl <= end && (!first || p < first); p++)
            if (!memcmp(p, tr, tl)) { first = p; break; }
    }
    if (first) {
        s->waiting = false;
        int rc = rlx_grammar_accept(s->st, first, (size_t)(s->tail + s->n_tail - first));
        s->n_triggers = 0; /* one activation: after a refusal it stays off */
        if (rc == RLX_EINVAL || rc == RLX_ERANGE) s->waiting = true;
        else if (rc) return rc;
        return 0;
    }
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
    if (s->waiting) return s->n_triggers ? lazy_accept(s, s->t.texts[tok], s->t.lens[tok]) : 0;
    return rlx_grammar_accept(s->st, s->t.texts[tok], s->t.lens[tok]) ? RLX_ENOMEM : 0;
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
    free(s->tail);
    free(s);
}

rlx_sampler_stage *rlx_grammar_stage_new(rlx_grammar *g, const rlx_grammar_tokens *toks, rlx_error *err)
{
    static const rlx_stage_ops ops = {.name = "grammar", .allows = g_allows, .mask = g_mask, .accept = g_accept,
                                      .can_end = g_can_end, .must_end = g_must_end, .free = g_free};
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

rlx_sampler_stage *rlx_grammar_stage_new_lazy(rlx_grammar *g, const rlx_grammar_tokens *toks, const char *const *triggers,
                                              size_t n_triggers, rlx_error *err)
{
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
