/* test_sample_chain.c - the sampler as a chain of stages (engine/sample.h): the stages built
 * from parameters and their order, a constraint stage added from outside (sample first, full
 * mask only on refusal, restart from the raw logits, veto and demand of the end), what stages
 * are told about prompt and generated tokens, and the grammar stage on a toy vocabulary. */
#include "tests/rlx_test.h"
#include <math.h>
#include "engine/grammar.h"
#include "engine/sample.h"
#include "engine/sample_internal.h"

static rlx_sampling_params params(float temp, uint64_t seed)
{
    rlx_sampling_params p;
    rlx_sampling_params_default(&p);
    p.temperature = temp;
    p.seed = seed;
    p.has_seed = true;
    return p;
}

static const char *describe(const rlx_sampling_params *p, int32_t nv)
{
    static char buf[256];
    rlx_sampler *s = rlx_sampler_new(p, nv);
    if (!s) return "(oom)";
    rlx_sampler_describe(s, buf, sizeof buf);
    rlx_sampler_free(s);
    return buf;
}

TEST(stages_follow_the_parameters)
{
    rlx_sampling_params p = params(0.0f, 1);
    ASSERT_STR_EQ(describe(&p, 10), "greedy");
    p = params(0.7f, 1);
    ASSERT_STR_EQ(describe(&p, 10), "dist"); /* temperature alone: the full-vocabulary draw */
    rlx_logit_bias b = {3, 2.0f};
    p.logit_bias = &b;
    p.n_logit_bias = 1;
    p.repetition_penalty = 1.1f;
    p.top_k = 5;
    p.top_p = 0.9f;
    p.min_p = 0.05f;
    ASSERT_STR_EQ(describe(&p, 10), "penalties -> logit_bias -> top_k -> top_p -> min_p -> dist");
    p.top_k = 10; /* the whole vocabulary: no stage */
    p.penalty_last_n = 0; /* penalties off */
    ASSERT_STR_EQ(describe(&p, 10), "logit_bias -> top_p -> min_p -> dist");
}

/* A constraint for the tests: allows tokens whose bit is set in `allowed`; counts what it is
 * told and asked. */
typedef struct toy {
    rlx_sampler_stage base;
    uint32_t allowed;
    int n_prompt, n_generated, n_allows, n_mask;
    bool can_end, must_end;
    int *freed;
} toy;

static bool toy_allows(rlx_sampler_stage *st, int32_t t)
{
    toy *s = (toy *)st;
    s->n_allows++;
    return t >= 0 && t < 32 && (s->allowed >> t & 1u);
}

static int64_t toy_mask(rlx_sampler_stage *st, rlx_token_cands *c)
{
    toy *s = (toy *)st;
    s->n_mask++;
    int64_t left = 0;
    for (int32_t t = 0; t < c->n_vocab; t++) {
        if (t < 32 && (s->allowed >> t & 1u)) left++;
        else c->logits[t] = -INFINITY;
    }
    return left;
}

static int toy_accept(rlx_sampler_stage *st, int32_t t, bool generated)
{
    (void)t;
    toy *s = (toy *)st;
    if (generated) s->n_generated++;
    else s->n_prompt++;
    return 0;
}

static bool toy_can_end(const rlx_sampler_stage *st) { return ((const toy *)st)->can_end; }
static bool toy_must_end(const rlx_sampler_stage *st) { return ((const toy *)st)->must_end; }
static void toy_free(rlx_sampler_stage *st)
{
    toy *s = (toy *)st;
    if (s->freed) (*s->freed)++;
    free(s);
}

static const rlx_stage_ops toy_ops = {.name = "toy", .allows = toy_allows, .mask = toy_mask, .accept = toy_accept,
                                      .can_end = toy_can_end, .must_end = toy_must_end, .free = toy_free};

static toy *toy_new(uint32_t allowed, int *freed)
{
    toy *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->base.ops = &toy_ops;
    s->allowed = allowed;
    s->can_end = true;
    s->freed = freed;
    return s;
}

TEST(constraint_checks_first_and_masks_only_on_refusal)
{
    const float raw[8] = {0.0f, 5.0f, 1.0f, 4.0f, 2.0f, 3.0f, 0.5f, 0.25f};
    rlx_sampling_params p = params(0.0f, 1);
    rlx_sampler *s = rlx_sampler_new(&p, 8);
    ASSERT(s);
    toy *t = toy_new(0xFFu, NULL);
    ASSERT_EQ(rlx_sampler_add_stage(s, &t->base), 0);
    char buf[64];
    ASSERT_STR_EQ(rlx_sampler_describe(s, buf, sizeof buf), "toy -> greedy");
    float l[8];
    int32_t tok = -1;
    memcpy(l, raw, sizeof l);
    ASSERT_EQ(rlx_sampler_pick(s, l, raw, &tok, NULL), 0);
    ASSERT_EQ(tok, 1);            /* allowed at once: no mask built */
    ASSERT_EQ(t->n_mask, 0);
    ASSERT_EQ(t->n_allows, 1);
    t->allowed = 1u << 2 | 1u << 4 | 1u << 6; /* even tokens from 2 */
    memcpy(l, raw, sizeof l);
    ASSERT_EQ(rlx_sampler_pick(s, l, raw, &tok, NULL), 0);
    ASSERT_EQ(tok, 4);            /* the best allowed one, found by redrawing without 1, 3, 5 */
    ASSERT_EQ(t->n_mask, 0);
    ASSERT_EQ(t->n_allows, 1 + 4);
    t->allowed = 1u << 6;         /* 1, 3, 5, 4 refused: the redraws are spent, the mask decides */
    memcpy(l, raw, sizeof l);
    ASSERT_EQ(rlx_sampler_pick(s, l, raw, &tok, NULL), 0);
    ASSERT_EQ(tok, 6);
    ASSERT_EQ(t->n_mask, 1);
    t->allowed = 0;
    rlx_error err = {0};
    memcpy(l, raw, sizeof l);
    ASSERT_EQ(rlx_sampler_pick(s, l, raw, &tok, &err), RLX_EINVAL);
    ASSERT(strstr(err.msg, "toy allows no token"));
    /* without raw logits to restart from, a refusal is an error, not a wrong token */
    t->allowed = 1u << 0;
    memcpy(l, raw, sizeof l);
    ASSERT_EQ(rlx_sampler_pick(s, l, NULL, &tok, &err), RLX_EINVAL);
    rlx_sampler_free(s);
}

/* A refused draw is drawn again without the refused tokens when the chain has no truncation:
 * the same distribution as the masked draw (weights renormalised over the allowed tokens). With
 * a truncation the mask is built at the first refusal (a nucleus of the unmasked logits would
 * differ). */
TEST(redraws_keep_the_masked_distribution)
{
    const float raw[8] = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, 1.8f, 0.2f};
    const uint32_t allowed = 1u << 1 | 1u << 3 | 1u << 4 | 1u << 7;
    rlx_sampling_params p = params(1.0f, 11);
    rlx_sampler *s = rlx_sampler_new(&p, 8);
    toy *t = toy_new(allowed, NULL);
    ASSERT(s && t);
    ASSERT_EQ(rlx_sampler_add_stage(s, &t->base), 0);
    enum { N = 40000 };
    int count[8] = {0};
    for (int i = 0; i < N; i++) {
        float l[8];
        int32_t tok = -1;
        memcpy(l, raw, sizeof l);
        ASSERT_EQ(rlx_sampler_pick(s, l, raw, &tok, NULL), 0);
        ASSERT(allowed >> tok & 1u);
        count[tok]++;
    }
    ASSERT(t->n_mask > 0 && t->n_mask < N / 4); /* mostly redraws; masks when 3 redraws failed */
    double z = 0;
    for (int k = 0; k < 8; k++)
        if (allowed >> k & 1u) z += exp(raw[k]);
    for (int k = 0; k < 8; k++) {
        double want = (allowed >> k & 1u) ? exp(raw[k]) / z : 0.0, got = (double)count[k] / N;
        ASSERT_MSG(fabs(got - want) < 0.01, "token %d: %.4f drawn, %.4f expected", k, got, want);
    }
    rlx_sampler_free(s);
    /* a truncation: the first refusal builds the mask */
    p.top_k = 6;
    s = rlx_sampler_new(&p, 8);
    t = toy_new(1u << 7, NULL);
    ASSERT(s && t);
    ASSERT_EQ(rlx_sampler_add_stage(s, &t->base), 0);
    float l[8];
    int32_t tok = -1;
    memcpy(l, raw, sizeof l);
    ASSERT_EQ(rlx_sampler_pick(s, l, raw, &tok, NULL), 0);
    ASSERT_EQ(tok, 7);
    ASSERT_EQ(t->n_mask, 1);
    ASSERT_EQ(t->n_allows, 2);
    rlx_sampler_free(s);
}

/* The draw stage's redraw (what a refused draw uses instead of running the chain again): from
 * the last full-vocabulary draw's weights with the refused tokens taken out, over several
 * DRAW_BLOCKs, the renormalised distribution, never a refused token, also for the tokens a mask
 * set to -inf after the draw (n_refused < 0); -1 (the chain runs again)
 * when what is left weighs under 2^-20 of the whole or the last draw left no weights. */
TEST(redraw_takes_refused_tokens_out_of_the_weights)
{
    enum { NV = 3 * DRAW_BLOCK + 17, N = 60000 };
    static float logits[NV];
    uint64_t rng[4] = {1, 2, 3, 4};
    for (int i = 0; i < NV; i++) logits[i] = -30.0f; /* weight ~e^-30 each: ~1e-10 of the whole */
    /* the mass: tokens 5 and 600 (refused), 7, 300 and NV - 1 (allowed) */
    logits[5] = 3.0f, logits[600] = 2.5f, logits[7] = 1.0f, logits[300] = 0.0f, logits[NV - 1] = 0.5f;
    rlx_sampler_stage *d = rlx__stage_dist(1.0f, rng);
    ASSERT(d && d->ops->redraw);
    rlx_token_cands c = {.logits = logits, .n_vocab = NV, .scratch = rlx__sample_scratch_get(NV)};
    ASSERT(c.scratch);
    int count[NV] = {0}, n = 0;
    const int32_t refused[2] = {5, 600};
    while (n < N) {
        int32_t t = d->ops->select(d, &c);
        if (t != 5 && t != 600) continue; /* a refusal is what the redraw follows */
        int32_t r = d->ops->redraw(d, &c, refused, 2);
        ASSERT_MSG(r >= 0 && r != 5 && r != 600, "redraw gave %d", r);
        count[r]++;
        n++;
    }
    double z = exp(1.0) + exp(0.0) + exp(0.5) + (NV - 5) * exp(-30.0);
    const int32_t top[3] = {7, 300, NV - 1};
    for (int k = 0; k < 3; k++) {
        double want = exp((double)logits[top[k]]) / z, got = (double)count[top[k]] / N;
        ASSERT_MSG(fabs(got - want) < 0.01, "token %d: %.4f drawn, %.4f expected", top[k], got, want);
    }
    /* n_refused < 0: the tokens a mask set to -inf in the logits after the draw go (here 5, 7 and
     * 600, whatever was drawn), the rest renormalised */
    memset(count, 0, sizeof count);
    for (int i = 0; i < N; i++) {
        logits[5] = 3.0f, logits[7] = 1.0f, logits[600] = 2.5f;
        (void)d->ops->select(d, &c);
        logits[5] = logits[7] = logits[600] = -INFINITY;
        int32_t r = d->ops->redraw(d, &c, NULL, -1);
        ASSERT_MSG(r >= 0 && r != 5 && r != 7 && r != 600, "masked redraw gave %d", r);
        count[r]++;
    }
    z = exp(0.0) + exp(0.5) + (NV - 5) * exp(-30.0);
    for (int k = 1; k < 3; k++) {
        double want = exp((double)logits[top[k]]) / z, got = (double)count[top[k]] / N;
        ASSERT_MSG(fabs(got - want) < 0.01, "masked: token %d: %.4f drawn, %.4f expected", top[k], got, want);
    }
    logits[5] = 3.0f, logits[600] = 2.5f;
    /* the refused tokens held all but ~2^-40 of the weight: the chain must run again */
    logits[7] = logits[300] = logits[NV - 1] = -30.0f;
    int32_t t;
    do t = d->ops->select(d, &c); while (t != 5 && t != 600);
    ASSERT_EQ(d->ops->redraw(d, &c, refused, 2), -1);
    /* after a greedy fallback (every logit -inf but one is +inf) there are no weights to reuse */
    logits[9] = INFINITY;
    ASSERT_EQ(d->ops->select(d, &c), 9);
    ASSERT_EQ(d->ops->redraw(d, &c, refused, 2), -1);
    d->ops->free(d);
}

TEST(constraint_sits_after_bias_and_before_truncation)
{
    rlx_sampling_params p = params(0.8f, 7);
    rlx_logit_bias b = {1, -100.0f};
    p.logit_bias = &b;
    p.n_logit_bias = 1;
    p.top_k = 2;
    rlx_sampler *s = rlx_sampler_new(&p, 8);
    ASSERT(s);
    ASSERT_EQ(rlx_sampler_add_stage(s, &toy_new(0xF0u, NULL)->base), 0);
    char buf[128];
    ASSERT_STR_EQ(rlx_sampler_describe(s, buf, sizeof buf), "logit_bias -> toy -> top_k -> dist");
    /* tokens 4..7 only; top-k 2 of those is {5, 7}, whatever the best banned/refused ones are */
    const float raw[8] = {9.0f, 8.0f, 7.0f, 6.0f, 1.0f, 3.0f, 0.0f, 2.0f};
    for (int i = 0; i < 200; i++) {
        float l[8];
        memcpy(l, raw, sizeof l);
        int32_t tok = -1;
        ASSERT_EQ(rlx_sampler_pick(s, l, raw, &tok, NULL), 0);
        ASSERT_MSG(tok == 5 || tok == 7, "draw %d gave token %d", i, tok);
    }
    rlx_sampler_free(s);
}

TEST(accepting_constraint_leaves_draws_unchanged)
{
    /* a constraint that allows everything costs no RNG draws: the same tokens as without */
    float raw[16];
    for (int i = 0; i < 16; i++) raw[i] = (float)((i * 7) % 5) * 0.5f;
    rlx_sampling_params p = params(1.0f, 42);
    p.top_p = 0.95f;
    rlx_sampler *a = rlx_sampler_new(&p, 16), *b = rlx_sampler_new(&p, 16);
    ASSERT(a && b);
    ASSERT_EQ(rlx_sampler_add_stage(b, &toy_new(0xFFFFu, NULL)->base), 0);
    for (int i = 0; i < 100; i++) {
        float la[16], lb[16];
        memcpy(la, raw, sizeof la);
        memcpy(lb, raw, sizeof lb);
        int32_t ta = -1, tb = -1;
        ASSERT_EQ(rlx_sampler_pick(a, la, raw, &ta, NULL), 0);
        ASSERT_EQ(rlx_sampler_pick(b, lb, raw, &tb, NULL), 0);
        ASSERT_EQ(ta, tb);
    }
    rlx_sampler_free(a);
    rlx_sampler_free(b);
}

TEST(stages_are_told_prompt_and_generated_tokens_and_may_veto_the_end)
{
    rlx_sampling_params p = params(0.0f, 1);
    rlx_sampler *s = rlx_sampler_new(&p, 8);
    toy *t = toy_new(0xFFu, NULL);
    ASSERT(s && t);
    ASSERT_EQ(rlx_sampler_add_stage(s, &t->base), 0);
    for (int i = 0; i < 3; i++) ASSERT_EQ(rlx_sampler_accept(s, i, false), 0);
    ASSERT_EQ(rlx_sampler_accept(s, 5, true), 0);
    ASSERT_EQ(t->n_prompt, 3);
    ASSERT_EQ(t->n_generated, 1);
    ASSERT(rlx_sampler_can_end(s));
    ASSERT(!rlx_sampler_must_end(s));
    t->can_end = false;
    t->must_end = true;
    ASSERT(!rlx_sampler_can_end(s));
    ASSERT(rlx_sampler_must_end(s));
    rlx_sampler_free(s);
}

TEST(add_stage_takes_ownership_also_on_refusal)
{
    int freed = 0;
    rlx_sampling_params p = params(0.0f, 1);
    rlx_sampler *s = rlx_sampler_new(&p, 8);
    ASSERT(s);
    static const rlx_stage_ops no_mask = {.name = "half", .allows = toy_allows, .free = toy_free};
    toy *t = toy_new(1, &freed);
    t->base.ops = &no_mask;
    ASSERT_EQ(rlx_sampler_add_stage(s, &t->base), RLX_EINVAL); /* allows without mask */
    ASSERT_EQ(freed, 1);
    int added = 0, rc;
    while ((rc = rlx_sampler_add_stage(s, &toy_new(0xFFu, &freed)->base)) == 0) added++;
    ASSERT_EQ(rc, RLX_ENOMEM); /* the chain is full */
    ASSERT(added >= 8);
    ASSERT_EQ(freed, 2);
    rlx_sampler_free(s);
    ASSERT_EQ(freed, added + 2);
}

/* ---- the grammar stage on a toy vocabulary ---- */

static const char *const vocab_text[] = {"", "a", "b", "ab", "c", ""};
static const size_t vocab_len[] = {0, 1, 1, 2, 1, 0};
enum { TOY_EOS = 5, TOY_NV = 6 };
static bool toy_eog(const void *ctx, int32_t t) { (void)ctx; return t == TOY_EOS; }

TEST(grammar_stage_constrains_and_ends)
{
    rlx_grammar_vocab *v = rlx_grammar_vocab_new(TOY_NV, vocab_text, vocab_len);
    uint8_t mask[TOY_NV];
    rlx_grammar_tokens toks = {.vocab = v, .texts = vocab_text, .lens = vocab_len, .mask = mask, .is_eog = toy_eog};
    const char *src = "root ::= \"a\" \"b\"+";
    rlx_grammar *g = rlx_grammar_compile(src, strlen(src), NULL, NULL);
    ASSERT(v && g);
    rlx_sampler_stage *st = rlx_grammar_stage_new(g, &toks, NULL);
    ASSERT(st);
    rlx_sampling_params p = params(0.0f, 1);
    rlx_sampler *s = rlx_sampler_new(&p, TOY_NV);
    ASSERT(s);
    ASSERT_EQ(rlx_sampler_add_stage(s, st), 0);
    ASSERT_EQ(rlx_sampler_accept(s, 4, false), 0); /* a prompt token: the grammar does not follow it */
    /* c and end-of-generation are the favourites; the grammar wants a (not ab: less likely),
     * then b, then may end */
    const float raw[TOY_NV] = {0.0f, 1.0f, 2.0f, 0.5f, 9.0f, 8.0f};
    int32_t want[] = {1, 2, TOY_EOS};
    for (int i = 0; i < 3; i++) {
        ASSERT(rlx_sampler_can_end(s) == (i == 2));
        float l[TOY_NV];
        memcpy(l, raw, sizeof l);
        int32_t tok = -1;
        ASSERT_EQ(rlx_sampler_pick(s, l, raw, &tok, NULL), 0);
        ASSERT_EQ(tok, want[i]);
        ASSERT(!rlx_sampler_must_end(s)); /* b+ can always take one more b */
        if (tok != TOY_EOS) ASSERT_EQ(rlx_sampler_accept(s, tok, true), 0);
    }
    rlx_sampler_free(s);
    /* a grammar with nothing left to take demands the end */
    src = "root ::= \"ab\"";
    g = rlx_grammar_compile(src, strlen(src), NULL, NULL);
    st = g ? rlx_grammar_stage_new(g, &toks, NULL) : NULL;
    s = rlx_sampler_new(&p, TOY_NV);
    ASSERT(st && s);
    ASSERT_EQ(rlx_sampler_add_stage(s, st), 0);
    ASSERT_EQ(rlx_sampler_accept(s, 3, true), 0);
    ASSERT(rlx_sampler_must_end(s));
    ASSERT(rlx_sampler_can_end(s));
    rlx_sampler_free(s);
    rlx_grammar_vocab_free(v);
}

/* A lazy grammar stage (tool_choice "auto"): free text and any end until the trigger appears,
 * split across tokens or inside one token with more bytes; then the grammar holds from the
 * trigger's first byte; text after the trigger that the grammar refuses leaves it off. */
/* the end token has no text at all, as rlx_grammar_token_bytes leaves it */
static const char *const lz_text[] = {"", "x", "<t", "ool>", "<tool>", "{", "}", "a", "<tool>{a", "<tool>z", NULL};
static const size_t lz_len[] = {0, 1, 2, 4, 6, 1, 1, 1, 8, 7, 0};
enum { LZ_X = 1, LZ_T1, LZ_T2, LZ_TOOL, LZ_OPEN, LZ_CLOSE, LZ_A, LZ_TOOL_OPEN_A, LZ_TOOL_Z, LZ_EOS, LZ_NV };
static bool lz_eog(const void *ctx, int32_t t) { (void)ctx; return t == LZ_EOS; }

static int32_t lz_pick(rlx_sampler *s, int32_t favourite)
{
    float l[LZ_NV], raw[LZ_NV];
    for (int i = 0; i < LZ_NV; i++) raw[i] = (float)i * 0.01f;
    raw[favourite] = 10.0f;
    memcpy(l, raw, sizeof l);
    int32_t tok = -1;
    if (rlx_sampler_pick(s, l, raw, &tok, NULL)) return -1;
    return tok;
}

static rlx_sampler *lz_sampler(rlx_grammar_vocab *v, uint8_t *mask)
{
    rlx_grammar_tokens toks = {.vocab = v, .texts = lz_text, .lens = lz_len, .mask = mask, .is_eog = lz_eog};
    const char *src = "root ::= \"<tool>\" \"{\" \"a\"* \"}\"";
    const char *const trig[] = {"<tool>"};
    rlx_grammar *g = rlx_grammar_compile(src, strlen(src), NULL, NULL);
    rlx_sampler_stage *st = g ? rlx_grammar_stage_new_lazy(g, &toks, trig, 1, NULL, NULL) : NULL;
    rlx_sampling_params p = params(0.0f, 1);
    rlx_sampler *s = st ? rlx_sampler_new(&p, LZ_NV) : NULL;
    if (!s || rlx_sampler_add_stage(s, st)) {
        rlx_sampler_free(s);
        return NULL;
    }
    return s;
}

/* The stage's mask from the grammar cache (whole words of bits) and from the trie walk (a byte
 * per token) set the same logits to -inf and count the same tokens, at every step of random
 * walks over a 200-token vocabulary: words all refused, all allowed (!<..>), mixed, the last
 * one partial, and positions where the end may come (the end token then allowed). */
static bool big_eog(const void *ctx, int32_t t) { (void)ctx; return t == 130; }

TEST(grammar_stage_cached_mask_equals_walk)
{
    enum { BNV = 200 };
    static char buf[BNV][4];
    const char *texts[BNV];
    size_t lens[BNV];
    for (int t = 0; t < BNV; t++) {
        int k = t % 40;
        if (t == 130 || t % 50 == 49) snprintf(buf[t], sizeof buf[t], "%s", ""); /* the end; control tokens */
        else if (t >= 64 && t < 128) snprintf(buf[t], sizeof buf[t], "%%%c", 'a' + t % 26); /* a word no text takes */
        else if (k < 10) snprintf(buf[t], sizeof buf[t], "%c", '0' + k);
        else if (k < 36) snprintf(buf[t], sizeof buf[t], "%c%s", 'a' + k - 10, t >= 40 ? "b" : "");
        else snprintf(buf[t], sizeof buf[t], "%s", k == 36 ? " " : k == 37 ? " 1" : k == 38 ? "9 " : "ab");
        texts[t] = buf[t];
        lens[t] = strlen(buf[t]);
    }
    rlx_grammar_vocab *v = rlx_grammar_vocab_new(BNV, texts, lens);
    rlx_grammar_cache *cache = rlx_grammar_cache_new(BNV, 8);
    ASSERT(v && cache && rlx_grammar_vocab_set_eog(v, big_eog, NULL) == 0);
    static uint8_t mask[BNV];
    const char *src = "root ::= ( [a-m]+ | !<[7]> | [0-9] ) ( \" \" [a-c]{1,3} )+ \" \" [0-9]\n";
    uint64_t rng = 11;
    int ends = 0;
    for (int walk = 0; walk < 40; walk++) {
        rlx_sampler_stage *st[2];
        for (int k = 0; k < 2; k++) {
            rlx_grammar_tokens toks = {.vocab = v, .texts = texts, .lens = lens, .mask = mask, .is_eog = big_eog,
                                       .cache = k ? cache : NULL};
            rlx_grammar *g = rlx_grammar_compile(src, strlen(src), NULL, NULL);
            st[k] = g ? rlx_grammar_stage_new(g, &toks, NULL) : NULL;
            ASSERT(st[k] != NULL);
        }
        for (int step = 0; step < 12; step++) {
            float l[2][BNV];
            int64_t n[2];
            for (int k = 0; k < 2; k++) {
                for (int t = 0; t < BNV; t++) l[k][t] = (float)(t % 7);
                rlx_token_cands c = {.logits = l[k], .n_vocab = BNV};
                n[k] = st[k]->ops->mask(st[k], &c);
            }
            ASSERT_EQ(n[0], n[1]);
            ASSERT_MSG(!memcmp(l[0], l[1], sizeof l[0]), "walk %d step %d: the masks differ", walk, step);
            ends += isfinite(l[1][130]);
            if (!n[0]) break;
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int64_t pick = (int64_t)((rng >> 33) % (uint64_t)n[0]);
            int32_t tok = 0;
            for (; tok < BNV; tok++)
                if (isfinite(l[0][tok]) && pick-- == 0) break;
            if (tok == 130) break;
            for (int k = 0; k < 2; k++) ASSERT_EQ(st[k]->ops->accept(st[k], tok, true), 0);
        }
        for (int k = 0; k < 2; k++) st[k]->ops->free(st[k]);
    }
    ASSERT(ends > 5);
    rlx_grammar_cache_free(cache);
    rlx_grammar_vocab_free(v);
}

TEST(lazy_grammar_waits_for_its_trigger)
{
    rlx_grammar_vocab *v = rlx_grammar_vocab_new(LZ_NV, lz_text, lz_len);
    uint8_t mask[LZ_NV];
    ASSERT(v);
    /* the trigger split across two tokens, after free text */
    rlx_sampler *s = lz_sampler(v, mask);
    ASSERT(s);
    ASSERT_EQ(rlx_sampler_accept(s, LZ_TOOL, false), 0); /* in the prompt: not a trigger */
    ASSERT_EQ(lz_pick(s, LZ_X), LZ_X);
    ASSERT(rlx_sampler_can_end(s) && !rlx_sampler_must_end(s));
    ASSERT_EQ(lz_pick(s, LZ_EOS), LZ_EOS); /* ending is allowed before any call */
    ASSERT_EQ(rlx_sampler_accept(s, LZ_EOS, true), 0); /* ignore_eos: an end with no bytes */
    ASSERT_EQ(rlx_sampler_accept(s, LZ_X, true), 0);
    ASSERT_EQ(rlx_sampler_accept(s, LZ_T1, true), 0);
    ASSERT_EQ(lz_pick(s, LZ_X), LZ_X); /* "<t" is not the trigger yet */
    ASSERT_EQ(rlx_sampler_accept(s, LZ_T2, true), 0);
    ASSERT(!rlx_sampler_can_end(s));
    ASSERT_EQ(lz_pick(s, LZ_X), LZ_OPEN); /* the call now: only "{" continues it */
    ASSERT_EQ(lz_pick(s, LZ_EOS), LZ_OPEN);
    ASSERT_EQ(rlx_sampler_accept(s, LZ_OPEN, true), 0);
    ASSERT_EQ(lz_pick(s, LZ_X), LZ_A); /* of "a" and "}", the likelier */
    ASSERT_EQ(rlx_sampler_accept(s, LZ_A, true), 0);
    ASSERT_EQ(rlx_sampler_accept(s, LZ_CLOSE, true), 0);
    ASSERT(rlx_sampler_can_end(s) && rlx_sampler_must_end(s));
    rlx_sampler_free(s);
    /* the trigger and more of the call in one token */
    s = lz_sampler(v, mask);
    ASSERT(s);
    ASSERT_EQ(rlx_sampler_accept(s, LZ_TOOL_OPEN_A, true), 0);
    ASSERT_EQ(lz_pick(s, LZ_OPEN), LZ_A);
    ASSERT(!rlx_sampler_can_end(s));
    rlx_sampler_free(s);
    /* the trigger, then bytes the grammar refuses in the same token: unconstrained from then on */
    s = lz_sampler(v, mask);
    ASSERT(s);
    ASSERT_EQ(rlx_sampler_accept(s, LZ_TOOL_Z, true), 0);
    ASSERT_EQ(lz_pick(s, LZ_X), LZ_X);
    ASSERT_EQ(rlx_sampler_accept(s, LZ_TOOL, true), 0); /* and a later trigger does not rearm it */
    ASSERT_EQ(lz_pick(s, LZ_X), LZ_X);
    ASSERT(rlx_sampler_can_end(s));
    rlx_sampler_free(s);
    /* bad triggers are refused */
    const char *src = "root ::= \"a\"";
    rlx_grammar_tokens toks = {.vocab = v, .texts = lz_text, .lens = lz_len, .mask = mask, .is_eog = lz_eog};
    const char *const empty[] = {""};
    rlx_error err = {0};
    ASSERT(!rlx_grammar_stage_new_lazy(rlx_grammar_compile(src, strlen(src), NULL, NULL), &toks, empty, 1, NULL, &err));
    ASSERT_EQ(err.code, RLX_EINVAL);
    rlx_grammar_vocab_free(v);
}

/* A lazy stage on an anchored pattern (tool_choice "auto" for Llama 3 / generic JSON): it waits
 * while the text from its start could still match, fires on a full match (the grammar reads from
 * group 1, here after the leading space), and turns off for good when the text cannot match.
 * Token texts split the trigger and a UTF-8 character; one holds a NUL byte; the end has none. */
static char pt_big[4096];
static const char *pt_text[] = {"",    " ",   "{",       "\"", "na",       "me\":", " \"\xc3", "\xa9", "\"}",
                                "X",   "a",   "hello",   "{\"x", "\0",     " \"Q",  pt_big,    NULL};
static const size_t pt_len[] = {0, 1, 1, 1, 2, 4, 3, 1, 2, 1, 1, 5, 3, 1, 3, sizeof pt_big, 0};
enum { PT_SP = 1, PT_OB, PT_Q, PT_NA, PT_ME, PT_SPQ_E1, PT_E2, PT_END, PT_X, PT_A, PT_HELLO, PT_OBX, PT_NUL, PT_SPQ_Q,
       PT_BIG, PT_EOS, PT_NV };
static bool pt_eog(const void *ctx, int32_t t) { (void)ctx; return t == PT_EOS; }

static int32_t pt_pick(rlx_sampler *s, int32_t favourite)
{
    float l[PT_NV], raw[PT_NV];
    for (int i = 0; i < PT_NV; i++) raw[i] = (float)i * 0.01f;
    raw[favourite] = 10.0f;
    memcpy(l, raw, sizeof l);
    int32_t tok = -1;
    if (rlx_sampler_pick(s, l, raw, &tok, NULL)) return -1;
    return tok;
}

static rlx_sampler *pt_sampler(rlx_grammar_vocab *v, uint8_t *mask, const char *pattern)
{
    rlx_grammar_tokens toks = {.vocab = v, .texts = pt_text, .lens = pt_len, .mask = mask, .is_eog = pt_eog};
    const char *src = "root ::= \"{\\\"name\\\": \\\"\" [a-z\\u00E9]* \"\\\"}\"";
    rlx_grammar *g = rlx_grammar_compile(src, strlen(src), NULL, NULL);
    rlx_sampler_stage *st = g ? rlx_grammar_stage_new_lazy(g, &toks, NULL, 0, pattern, NULL) : NULL;
    rlx_sampling_params p = params(0.0f, 1);
    rlx_sampler *s = st ? rlx_sampler_new(&p, PT_NV) : NULL;
    if (!s || rlx_sampler_add_stage(s, st)) {
        rlx_sampler_free(s);
        return NULL;
    }
    return s;
}

#define PT_PATTERN "\\s*(\\{ ?\"name\": ?\")[\\s\\S]*"

static int feed(rlx_sampler *s, const int32_t *toks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (rlx_sampler_accept(s, toks[i], true)) return -1;
    return 0;
}

TEST(lazy_grammar_on_an_anchored_pattern)
{
    memset(pt_big, ' ', sizeof pt_big);
    rlx_grammar_vocab *v = rlx_grammar_vocab_new(PT_NV, pt_text, pt_len);
    uint8_t mask[PT_NV];
    ASSERT(v);
    /* the trigger over five tokens after a leading space, its last one ending inside "é" */
    rlx_sampler *s = pt_sampler(v, mask, PT_PATTERN);
    ASSERT(s);
    ASSERT_EQ(rlx_sampler_accept(s, PT_HELLO, false), 0); /* the prompt is not the output */
    const int32_t lead[] = {PT_SP, PT_OB, PT_Q, PT_NA};
    ASSERT_EQ(feed(s, lead, 4), 0);
    ASSERT_EQ(pt_pick(s, PT_X), PT_X); /* a partial match: still free */
    ASSERT_EQ(rlx_sampler_accept(s, PT_EOS, true), 0); /* ignore_eos: an end with no text */
    ASSERT_EQ(rlx_sampler_accept(s, PT_ME, true), 0);
    ASSERT(rlx_sampler_can_end(s));
    ASSERT_EQ(rlx_sampler_accept(s, PT_SPQ_E1, true), 0); /* {"name": "\xc3: fires */
    ASSERT(!rlx_sampler_can_end(s));
    ASSERT_EQ(pt_pick(s, PT_X), PT_E2); /* only the rest of "é" continues it */
    ASSERT_EQ(pt_pick(s, PT_EOS), PT_E2);
    ASSERT_EQ(rlx_sampler_accept(s, PT_E2, true), 0);
    int32_t t = pt_pick(s, PT_X); /* X is not a name's letter */
    ASSERT(t == PT_A || t == PT_NA || t == PT_HELLO || t == PT_END);
    ASSERT_EQ(rlx_sampler_accept(s, PT_A, true), 0);
    ASSERT_EQ(rlx_sampler_accept(s, PT_END, true), 0);
    ASSERT(rlx_sampler_can_end(s) && rlx_sampler_must_end(s));
    rlx_sampler_free(s);
    /* no match: plain text, or an object that is not a call, or a NUL byte, turns it off for good */
    const int32_t starts[] = {PT_HELLO, PT_OBX, PT_NUL};
    for (int k = 0; k < 3; k++) {
        s = pt_sampler(v, mask, PT_PATTERN);
        ASSERT(s);
        const int32_t call[] = {starts[k], PT_OB, PT_Q, PT_NA, PT_ME, PT_SPQ_E1};
        ASSERT_EQ(feed(s, call, 6), 0);
        ASSERT_EQ(pt_pick(s, PT_X), PT_X);
        ASSERT(rlx_sampler_can_end(s));
        rlx_sampler_free(s);
    }
    /* a full match whose last token runs on where the grammar refuses: off too */
    s = pt_sampler(v, mask, PT_PATTERN);
    const int32_t refused[] = {PT_OB, PT_Q, PT_NA, PT_ME, PT_SPQ_Q};
    ASSERT(s && feed(s, refused, 5) == 0);
    ASSERT_EQ(pt_pick(s, PT_X), PT_X);
    rlx_sampler_free(s);
    /* more text than RLX_GRAMMAR_PATTERN_MAX_TEXT while it still could match: off */
    s = pt_sampler(v, mask, PT_PATTERN);
    ASSERT(s);
    for (size_t i = 0; i <= RLX_GRAMMAR_PATTERN_MAX_TEXT / sizeof pt_big; i++)
        ASSERT_EQ(rlx_sampler_accept(s, PT_BIG, true), 0);
    ASSERT_EQ(feed(s, lead + 1, 3), 0);
    const int32_t rest[] = {PT_ME, PT_SPQ_E1};
    ASSERT_EQ(feed(s, rest, 2), 0);
    ASSERT_EQ(pt_pick(s, PT_X), PT_X);
    rlx_sampler_free(s);
    /* no group 1: the grammar reads from the match's start */
    s = pt_sampler(v, mask, "\\{");
    ASSERT(s);
    ASSERT_EQ(rlx_sampler_accept(s, PT_OB, true), 0);
    ASSERT(pt_pick(s, PT_X) != PT_X);
    ASSERT_EQ(pt_pick(s, PT_Q), PT_Q);
    rlx_sampler_free(s);
    /* a pattern that does not compile, an empty one, or one with trigger strings: RLX_EINVAL */
    rlx_grammar_tokens toks = {.vocab = v, .texts = pt_text, .lens = pt_len, .mask = mask, .is_eog = pt_eog};
    const char *src = "root ::= \"a\"";
    const char *const trig[] = {"{"};
    rlx_error err = {0};
    ASSERT(!rlx_grammar_stage_new_lazy(rlx_grammar_compile(src, strlen(src), NULL, NULL), &toks, NULL, 0, "(\\{", &err));
    ASSERT_EQ(err.code, RLX_EINVAL);
    ASSERT(strstr(err.msg, "offset 3"));
    err = (rlx_error){0};
    ASSERT(!rlx_grammar_stage_new_lazy(rlx_grammar_compile(src, strlen(src), NULL, NULL), &toks, NULL, 0, "", &err));
    ASSERT_EQ(err.code, RLX_EINVAL);
    err = (rlx_error){0};
    ASSERT(!rlx_grammar_stage_new_lazy(rlx_grammar_compile(src, strlen(src), NULL, NULL), &toks, trig, 1, "\\{", &err));
    ASSERT_EQ(err.code, RLX_EINVAL);
    rlx_grammar_vocab_free(v);
}

int main(void)
{
    static const rlx_test_case cases[] = {
        TEST_ENTRY(stages_follow_the_parameters),
        TEST_ENTRY(constraint_checks_first_and_masks_only_on_refusal), TEST_ENTRY(redraws_keep_the_masked_distribution), TEST_ENTRY(redraw_takes_refused_tokens_out_of_the_weights),
        TEST_ENTRY(constraint_sits_after_bias_and_before_truncation),
        TEST_ENTRY(accepting_constraint_leaves_draws_unchanged),
        TEST_ENTRY(stages_are_told_prompt_and_generated_tokens_and_may_veto_the_end),
        TEST_ENTRY(add_stage_takes_ownership_also_on_refusal),
        TEST_ENTRY(grammar_stage_constrains_and_ends),
        TEST_ENTRY(grammar_stage_cached_mask_equals_walk),
        TEST_ENTRY(lazy_grammar_waits_for_its_trigger),
        TEST_ENTRY(lazy_grammar_on_an_anchored_pattern),
    };
    return rlx_test_run(cases, RLX_ARRAY_LEN(cases));
}
