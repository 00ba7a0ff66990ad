/* sample_grammar.c - a GBNF grammar as a constraint stage of the sampler chain (grammar.h,
 * sample.h). The chain draws first and asks allows() about the one token; the full mask over
 * the vocabulary's trie is built only when that token is refused. */
#include "engine/grammar.h"
#include "engine/sample.h"

#include <math.h>
#include <stdlib.h>

typedef struct grammar_stage {
    rlx_sampler_stage base;
    rlx_grammar *g;
    rlx_grammar_state *st;
    rlx_grammar_tokens t;
} grammar_stage;

static bool g_allows(rlx_sampler_stage *st, int32_t tok)
{
    const grammar_stage *s = (const grammar_stage *)st;
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
static int g_accept(rlx_sampler_stage *st, int32_t tok, bool generated)
{
    grammar_stage *s = (grammar_stage *)st;
    if (!generated) return 0;
    return rlx_grammar_accept(s->st, s->t.texts[tok], s->t.lens[tok]) ? RLX_ENOMEM : 0;
}

static bool g_can_end(const rlx_sampler_stage *st) { return rlx_grammar_can_end(((const grammar_stage *)st)->st); }
static bool g_must_end(const rlx_sampler_stage *st) { return rlx_grammar_must_end(((const grammar_stage *)st)->st); }

static void g_free(rlx_sampler_stage *st)
{
    grammar_stage *s = (grammar_stage *)st;
    rlx_grammar_state_free(s->st);
    rlx_grammar_free(s->g);
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
