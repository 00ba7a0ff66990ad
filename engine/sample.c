/* sample.c - the sampler chain (see sample.h): parameters, the chain built from them and run
 * per token, the RNG, per-thread scratch, and log-probabilities. The stages are in
 * sample_stages.c; the grammar stage in sample_grammar.c.
 *
 * Order, as llama-server's default: penalties -> logit bias -> [constraints] -> top_k -> top_p
 * -> min_p -> temperature -> draw. temperature <= 0 means greedy after penalties, bias and
 * constraints, so a banned token is never picked even greedily.
 *
 * RNG: xoshiro256** seeded through splitmix64, one state per sampler, so a seeded sequence
 * draws the same numbers whatever else the worker is running. */
#include "engine/sample_internal.h"
#include "engine/grammar.h" /* RLX_GRAMMAR_STACKS_MSG */
#include "engine/engine.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- per-thread scratch ------------------------------------------------------------------ */

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p)
{
    rlx__sample_scratch *sc = p;
    if (!sc) return;
    free(sc->cands);
    free(sc->probs);
    free(sc->bin_of);
    free(sc->weights);
    free(sc->block_sums);
    free(sc);
}

static void scratch_key_init(void) { pthread_key_create(&scratch_key, scratch_free); }

rlx__sample_scratch *rlx__sample_scratch_get(size_t n)
{
    pthread_once(&scratch_once, scratch_key_init);
    rlx__sample_scratch *sc = pthread_getspecific(scratch_key);
    if (!sc) {
        if (!(sc = calloc(1, sizeof *sc))) return NULL;
        if (pthread_setspecific(scratch_key, sc)) { free(sc); return NULL; }
    }
    if (sc->cap < n) {
        cand *c = realloc(sc->cands, n * sizeof *c);
        if (c) sc->cands = c;
        double *pr = realloc(sc->probs, n * sizeof *pr);
        if (pr) sc->probs = pr;
        uint16_t *b = realloc(sc->bin_of, n * sizeof *b);
        if (b) sc->bin_of = b;
        float *wt = realloc(sc->weights, n * sizeof *wt);
        if (wt) sc->weights = wt;
        double *bs = realloc(sc->block_sums, (n / DRAW_BLOCK + 1) * sizeof *bs);
        if (bs) sc->block_sums = bs;
        if (!c || !pr || !b || !wt || !bs) return NULL;
        sc->cap = n;
    }
    return sc;
}

#define MAX_STAGES 16

struct rlx_sampler {
    int32_t n_vocab;
    rlx_sampler_stage *stages[MAX_STAGES];
    int n_stages;
    int n_constraints;        /* stages with allows/mask */
    int first_constraint;     /* where rlx_sampler_add_stage inserts (after the bias) */
    bool needs_scratch;       /* a truncation or a temperature draw */
    bool truncates;           /* top_k, top_p or min_p: a refused draw needs the full masks */
    uint64_t rng[4];          /* xoshiro256** state */
};

/* ---- parameters -------------------------------------------------------------------------- */

void rlx_sampling_params_default(rlx_sampling_params *p)
{
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->repetition_penalty = 1.0f;
    p->presence_penalty = 0.0f;
    p->frequency_penalty = 0.0f;
    p->penalty_last_n = 64;
}

static int check_range(const char *name, float v, float lo, float hi, rlx_error *err)
{
    if (!(v >= lo && v <= hi)) /* also rejects NaN */
        return rlx_errorf(err, RLX_EINVAL, "%s must be between %g and %g (got %g)", name,
                          (double)lo, (double)hi, (double)v);
    return 0;
}

int rlx_sampling_params_validate(const rlx_sampling_params *p, int32_t n_vocab, rlx_error *err)
{
    int rc;
    if (!p) return rlx_errorf(err, RLX_EINVAL, "sampling parameters are missing");
    if ((rc = check_range("temperature", p->temperature, 0.0f, 2.0f, err))) return rc;
    /* 0 keeps the most probable token alone, as llama.cpp's sampler does (OpenAI accepts it) */
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f))
        return rlx_errorf(err, RLX_EINVAL, "top_p must be between 0 and 1 (got %g)",
                          (double)p->top_p);
    if (p->top_k < -1)
        return rlx_errorf(err, RLX_EINVAL, "top_k must be 0 or more (0 or -1 disables it; got %d)",
                          (int)p->top_k);
    if ((rc = check_range("min_p", p->min_p, 0.0f, 1.0f, err))) return rc;
    if ((rc = check_range("presence_penalty", p->presence_penalty, -2.0f, 2.0f, err))) return rc;
    if ((rc = check_range("frequency_penalty", p->frequency_penalty, -2.0f, 2.0f, err))) return rc;
    if (!(p->repetition_penalty > 0.0f && isfinite(p->repetition_penalty)))
        return rlx_errorf(err, RLX_EINVAL,
                          "repetition_penalty must be a positive number (1 disables it; got %g)",
                          (double)p->repetition_penalty);
    if (p->penalty_last_n < -1)
        return rlx_errorf(err, RLX_EINVAL,
                          "penalty_last_n must be -1 (whole history), 0 (off) or a positive "
                          "count (got %d)", (int)p->penalty_last_n);
    if (p->n_logit_bias && !p->logit_bias)
        return rlx_errorf(err, RLX_EINVAL, "logit_bias has %zu entries but no data",
                          p->n_logit_bias);
    for (size_t i = 0; i < p->n_logit_bias; i++) {
        const rlx_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab)
            return rlx_errorf(err, RLX_EINVAL,
                              "logit_bias token %d is outside the vocabulary (0..%d)",
                              (int)b->token, (int)n_vocab - 1);
        if (!(b->bias >= -100.0f && b->bias <= 100.0f))
            return rlx_errorf(err, RLX_EINVAL,
                              "logit_bias for token %d must be between -100 and 100 (got %g)",
                              (int)b->token, (double)b->bias);
    }
    return 0;
}

/* ---- RNG --------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
double rlx__uniform01(uint64_t s[4]) { return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53; }

/* ---- the chain --------------------------------------------------------------------------- */

static int push(rlx_sampler *s, rlx_sampler_stage *st)
{
    if (!st) return RLX_ENOMEM;
    if (s->n_stages == MAX_STAGES) { st->ops->free(st); return RLX_ENOMEM; }
    s->stages[s->n_stages++] = st;
    return 0;
}

static bool penalties_on(const rlx_sampling_params *p)
{
    return p->penalty_last_n != 0 && (p->repetition_penalty != 1.0f ||
                                      p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f);
}

rlx_sampler *rlx_sampler_new(const rlx_sampling_params *p, int32_t n_vocab)
{
    if (!p || n_vocab <= 0) return NULL;
    rlx_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->n_vocab = n_vocab;
    uint64_t seed = p->seed;
    if (!p->has_seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        /* the address separates samplers created in the same nanosecond */
        seed = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)s;
    }
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&seed);
    if (penalties_on(p) && push(s, rlx__stage_penalties(p, n_vocab))) goto fail;
    if (p->n_logit_bias && p->logit_bias && push(s, rlx__stage_bias(p, n_vocab))) goto fail;
    s->first_constraint = s->n_stages;
    if (p->temperature <= 0.0f) {
        if (push(s, rlx__stage_greedy())) goto fail;
        return s;
    }
    s->needs_scratch = true;
    s->truncates = (p->top_k > 0 && p->top_k < n_vocab) || p->top_p < 1.0f || p->min_p > 0.0f;
    if (p->top_k > 0 && p->top_k < n_vocab && push(s, rlx__stage_top_k(p->top_k))) goto fail;
    if (p->top_p < 1.0f && push(s, rlx__stage_top_p(p->top_p))) goto fail;
    if (p->min_p > 0.0f && push(s, rlx__stage_min_p(p->min_p))) goto fail;
    if (push(s, rlx__stage_dist(p->temperature, s->rng))) goto fail;
    return s;
fail:
    rlx_sampler_free(s);
    return NULL;
}

void rlx_sampler_free(rlx_sampler *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_stages; i++) s->stages[i]->ops->free(s->stages[i]);
    free(s);
}

int rlx_sampler_add_stage(rlx_sampler *s, rlx_sampler_stage *st)
{
    if (!st) return RLX_EINVAL;
    if (!s || !st->ops->allows || !st->ops->mask) { st->ops->free(st); return RLX_EINVAL; }
    if (s->n_stages == MAX_STAGES) { st->ops->free(st); return RLX_ENOMEM; }
    int at = s->first_constraint + s->n_constraints;
    memmove(&s->stages[at + 1], &s->stages[at], (size_t)(s->n_stages - at) * sizeof s->stages[0]);
    s->stages[at] = st;
    s->n_stages++;
    s->n_constraints++;
    return 0;
}

int rlx_sampler_accept(rlx_sampler *s, int32_t token, bool generated)
{
    if (!s) return 0;
    for (int i = 0; i < s->n_stages; i++) {
        rlx_sampler_stage *st = s->stages[i];
        int rc = st->ops->accept ? st->ops->accept(st, token, generated) : 0;
        if (rc) return rc;
    }
    return 0;
}

bool rlx_sampler_can_end(const rlx_sampler *s)
{
    for (int i = 0; s && i < s->n_stages; i++)
        if (s->stages[i]->ops->can_end && !s->stages[i]->ops->can_end(s->stages[i])) return false;
    return true;
}

int rlx_sampler_prefetch(rlx_sampler *s)
{
    int first = 0;
    for (int i = 0; i < s->n_stages; i++) {
        rlx_sampler_stage *st = s->stages[i];
        int rc = st->ops->prefetch ? st->ops->prefetch(st) : 0;
        if (rc && !first) first = rc;
    }
    return first;
}

bool rlx_sampler_must_end(const rlx_sampler *s)
{
    for (int i = 0; s && i < s->n_stages; i++)
        if (s->stages[i]->ops->must_end && s->stages[i]->ops->must_end(s->stages[i])) return true;
    return false;
}

/* A stage left no token (token: the one of its mask it still refused, -1 none): its own reason,
 * or the generic one. */
static int no_token(const rlx_sampler_stage *st, int32_t token, rlx_error *err)
{
    const int rc = token >= 0 && st->ops->refusal ? st->ops->refusal(st, token, err) : 0;
    return rc ? rc : rlx_errorf(err, RLX_EINVAL, "the %s allows no token of this vocabulary here", st->ops->name);
}

/* A constraint's mask over c: 0, or an RLX_E* code naming it (a grammar past its stack bound,
 * out of memory, or no token left). */
static int apply_mask(rlx_sampler_stage *st, rlx_token_cands *c, rlx_error *err)
{
    int64_t left = st->ops->mask(st, c);
    if (left == RLX_ERANGE) return rlx_errorf(err, RLX_ERANGE, "%s", RLX_GRAMMAR_STACKS_MSG);
    if (left < 0) return rlx_errorf(err, (int)left, "%s: out of memory building the mask", st->ops->name);
    if (left == 0) return no_token(st, -1, err);
    return 0;
}

/* One pass of the chain over `logits`; masked: constraints apply their masks (else they are
 * only checked afterwards). Returns 0 and the token or an RLX_E* code. */
static int run_chain(rlx_sampler *s, float *logits, bool masked, int32_t *token, rlx_error *err)
{
    rlx_token_cands c = {.logits = logits, .n_vocab = s->n_vocab};
    if (s->needs_scratch) c.scratch = rlx__sample_scratch_get((size_t)s->n_vocab);
    for (int i = 0; i < s->n_stages; i++) {
        rlx_sampler_stage *st = s->stages[i];
        const rlx_stage_ops *o = st->ops;
        if (o->mask) {
            int rc = masked ? apply_mask(st, &c, err) : 0;
            if (rc) return rc;
            continue;
        }
        if (o->select) {
            *token = o->select(st, &c);
            return 0;
        }
        int rc = o->apply ? o->apply(st, &c) : 0;
        if (rc) return rlx_errorf(err, rc, "sampler stage %s failed", o->name);
    }
    *token = rlx_argmax(logits, s->n_vocab); /* a chain without a draw (not built here) */
    return 0;
}

/* The first constraint that refuses `token`, or NULL. */
static const rlx_sampler_stage *refused_by(const rlx_sampler *s, int32_t token)
{
    for (int i = 0; i < s->n_stages; i++) {
        rlx_sampler_stage *st = s->stages[i];
        if (st->ops->allows && !st->ops->allows(st, token)) return st;
    }
    return NULL;
}

/* Draws again from the raw logits with the refused tokens taken out: without a truncation
 * stage (temperature only, or greedy) this draws from exactly the distribution the full masks
 * give - the candidates' weights renormalised over what is left, argmax over what is left - at
 * the cost of one draw instead of a walk over the vocabulary (a grammar inside a string allows
 * most tokens, and the walk then visits most of the trie). */
#define REDRAWS 3

int rlx_sampler_pick(rlx_sampler *s, float *logits, const float *raw, int32_t *token, rlx_error *err)
{
    int rc = run_chain(s, logits, false, token, err);
    if (rc || !s->n_constraints || !refused_by(s, *token)) return rc;
    /* refused: the full masks, and once more from the raw logits */
    if (!raw) return rlx_errorf(err, RLX_EINVAL, "the sampler has constraints but no raw logits to restart from");
    if (!s->truncates) {
        int32_t refused[REDRAWS + 1];
        refused[0] = *token;
        /* the draw stage takes the refused tokens out of its last weights (a few microseconds),
         * or the chain runs again over the logits with them at -inf (~0.15 ms at 151,936 tokens) */
        rlx_sampler_stage *sel = s->n_stages ? s->stages[s->n_stages - 1] : NULL;
        bool quick = sel && sel->ops->select && sel->ops->redraw;
        rlx_token_cands c = {.logits = logits, .n_vocab = s->n_vocab};
        if (s->needs_scratch) c.scratch = rlx__sample_scratch_get((size_t)s->n_vocab);
        for (int k = 1; k <= REDRAWS; k++) {
            const int32_t t = quick ? sel->ops->redraw(sel, &c, refused, k) : -1;
            if (t >= 0) {
                *token = t;
            } else { /* the run leaves its own weights for the next redraw */
                memcpy(logits, raw, (size_t)s->n_vocab * sizeof *logits);
                for (int j = 0; j < k; j++) logits[refused[j]] = -INFINITY;
                if ((rc = run_chain(s, logits, false, token, err))) return rc;
            }
            if (!refused_by(s, *token)) return 0;
            refused[k] = *token;
        }
        /* every redraw refused: the constraints' masks over the logits the last draw read (the
         * chain's stages before them already applied; nothing between them and the draw without
         * a truncation), then a draw from its weights without what they refuse */
        for (int i = 0; quick && i < s->n_stages; i++)
            if (s->stages[i]->ops->mask && (rc = apply_mask(s->stages[i], &c, err))) return rc;
        const int32_t t = quick ? sel->ops->redraw(sel, &c, NULL, -1) : -1;
        if (t >= 0) {
            *token = t;
            const rlx_sampler_stage *st = refused_by(s, *token);
            if (st) return no_token(st, *token, err);
            return 0;
        }
    }
    memcpy(logits, raw, (size_t)s->n_vocab * sizeof *logits);
    if ((rc = run_chain(s, logits, true, token, err))) return rc;
    const rlx_sampler_stage *st = refused_by(s, *token);
    if (st) return no_token(st, *token, err);
    return 0;
}

int32_t rlx_sampler_sample(rlx_sampler *s, float *logits)
{
    int32_t tok = -1;
    return rlx_sampler_pick(s, logits, NULL, &tok, NULL) ? -1 : tok;
}

const char *rlx_sampler_describe(const rlx_sampler *s, char *buf, size_t cap)
{
    if (!cap) return buf;
    buf[0] = 0;
    size_t used = 0;
    for (int i = 0; s && i < s->n_stages; i++) {
        int n = snprintf(buf + used, cap - used, "%s%s", i ? " -> " : "", s->stages[i]->ops->name);
        if (n < 0 || (size_t)n >= cap - used) break;
        used += (size_t)n;
    }
    return buf;
}

int32_t rlx_argmax(const float *logits, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best] || (logits[best] != logits[best] && logits[i] == logits[i]))
            best = i;
    return best;
}

/* ---- log-probabilities ------------------------------------------------------------------- */

float rlx_logprobs(const float *logits, int32_t n_vocab, int32_t token, int k,
                   int32_t *top_ids, float *top_lp)
{
    if (!logits || n_vocab <= 0) return -INFINITY;
    double mx = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) if (logits[i] > mx) mx = logits[i];
    if (mx == -INFINITY) mx = 0.0; /* all -inf: every logprob is -inf, avoid inf - inf */
    double z = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) z += exp((double)logits[i] - mx);
    double lse = mx + log(z);
    if (k > 0 && top_ids && top_lp) {
        size_t kk = (size_t)k < (size_t)n_vocab ? (size_t)k : (size_t)n_vocab;
        /* on the stack for what the API asks (k <= RLX_MAX_TOP_LOGPROBS): out of memory must
         * not turn the alternatives into id -1 / -inf, which a client would get as real */
        cand stack[RLX_MAX_TOP_LOGPROBS];
        cand *h = kk <= RLX_MAX_TOP_LOGPROBS ? stack : malloc(kk * sizeof *h);
        if (h) {
            kk = rlx__select_top_k(logits, (size_t)n_vocab, kk, h);
            for (size_t i = 0; i < kk; i++) {
                top_ids[i] = h[i].id;
                top_lp[i] = (float)((double)h[i].logit - lse);
            }
            if (h != stack) free(h);
        } else {
            kk = 0;
        }
        for (size_t i = kk; i < (size_t)k; i++) { top_ids[i] = -1; top_lp[i] = -INFINITY; }
    }
    if (token < 0 || token >= n_vocab) return -INFINITY;
    return (float)((double)logits[token] - lse);
}
