/* sample.h - token sampling: a chain of stages (greedy, temperature, top-k, top-p, min-p,
 * repetition / presence / frequency penalties, logit bias, constraints such as a grammar),
 * seeded RNG; plus log-probabilities for responses.
 *
 * Ownership: an rlx_sampler is owned by one sequence and called by the thread running it (the
 * worker; not thread-safe); it copies the params (including the bias list) and owns its
 * stages. Logit arrays passed in are borrowed and may be modified. Scratch buffers of
 * vocabulary size are per thread, shared by every sampler that thread runs. */
#ifndef RLX_SAMPLE_H
#define RLX_SAMPLE_H

#include "backends/rlx.h"

typedef struct rlx_logit_bias { int32_t token; float bias; } rlx_logit_bias;

typedef struct rlx_sampling_params {
    float temperature;         /* <= 0: greedy (ties -> lowest id) */
    int32_t top_k;             /* <= 0: off */
    float top_p;               /* >= 1: off */
    float min_p;               /* <= 0: off */
    float repetition_penalty;  /* 1: off (llama.cpp semantics: divide positive, multiply negative) */
    float presence_penalty;    /* 0: off (OpenAI semantics) */
    float frequency_penalty;   /* 0: off */
    int32_t penalty_last_n;    /* window of recent tokens the penalties look at; -1 = all */
    uint64_t seed;             /* used when has_seed; otherwise seeded from the clock */
    bool has_seed;
    const rlx_logit_bias *logit_bias; /* copied by rlx_sampler_new */
    size_t n_logit_bias;
} rlx_sampling_params;

/* Defaults as llama-server / OpenAI: temperature 1, top_p 1, top_k off, min_p off, no penalties,
 * penalty_last_n 64. */
void rlx_sampling_params_default(rlx_sampling_params *p);
/* Checks ranges; on failure names the parameter in err (for a 400 "param"). */
int rlx_sampling_params_validate(const rlx_sampling_params *p, int32_t n_vocab, rlx_error *err);

/* ---- the sampler chain -------------------------------------------------------------------
 *
 * A sampler is a chain of stages with one interface, as llama.cpp's sampler chain:
 *
 *   penalties -> logit bias -> [constraints: grammar, ...] -> top_k -> top_p -> min_p -> draw
 *
 * rlx_sampler_new builds it from the parameters (a stage whose parameter is off is left out, so
 * temperature-only sampling keeps the full-vocabulary draw, and greedy is penalties -> bias ->
 * argmax). Stages see the candidates either as the dense logits of the whole vocabulary or, once
 * a truncation listed them, as an (id, logit) list; only the list is ever cut, the logits stay.
 *
 * Constraint stages (rlx_sampler_add_stage) are checked, not applied, first: the chain draws, asks
 * every constraint whether the token may come next, and only when one refuses does it start over
 * from the raw logits with each constraint's mask applied at its place in the chain, and
 * draw again. Every stage is told each token of the sequence and whether it was generated
 * (penalties count the prompt too; a grammar only follows generated text), and constraints may
 * veto end-of-generation (rlx_sampler_can_end) or demand it (rlx_sampler_must_end). */

typedef struct rlx_token_logit { int32_t id; float logit; } rlx_token_logit;

/* The candidates as stages see them. */
typedef struct rlx_token_cands {
    float *logits;            /* the whole vocabulary's logits, always valid (stages before any
                                 truncation modify them in place) */
    int32_t n_vocab;
    rlx_token_logit *list;    /* valid when listed: the candidates still in the running */
    size_t n;
    bool listed;              /* a truncation made the list; later stages cut it */
    bool sorted;              /* the list is best first (ties: lower id) */
    void *scratch;            /* per-thread buffers of vocabulary size (sample.c) */
} rlx_token_cands;

typedef struct rlx_sampler_stage rlx_sampler_stage;
typedef struct rlx_stage_ops {
    const char *name;
    /* Filters or modifies the candidates; 0 or an RLX_E* code. NULL: nothing to do. */
    int (*apply)(rlx_sampler_stage *st, rlx_token_cands *c);
    /* The draw (the chain's last stage only): the chosen token. */
    int32_t (*select)(rlx_sampler_stage *st, rlx_token_cands *c);
    /* Optional, with select: right after select's draw was refused, a draw from the same
     * distribution with the tokens refused[0..n) taken out (c: the same candidates and scratch),
     * or with n < 0 those whose logit in c is now -inf (masks applied to the logits it read);
     * -1 when it cannot (the chain is then run again over the logits with them at -inf). */
    int32_t (*redraw)(rlx_sampler_stage *st, rlx_token_cands *c, const int32_t *refused, int n_refused);
    /* Constraint stages: may `token` come next? */
    bool (*allows)(rlx_sampler_stage *st, int32_t token);
    /* Constraint stages: sets every token allows() refuses to -inf in c->logits (c not yet
     * listed); returns how many tokens remain allowed, or < 0 (an RLX_E* code) on failure. */
    int64_t (*mask)(rlx_sampler_stage *st, rlx_token_cands *c);
    /* A token of the sequence: a prompt token (generated false) or a generated one; 0 or an
     * RLX_E* code (the sequence then fails). NULL: not interested. */
    int (*accept)(rlx_sampler_stage *st, int32_t token, bool generated);
    /* End-of-generation may come now / must come now. NULL: yes / no. */
    bool (*can_end)(const rlx_sampler_stage *st);
    bool (*must_end)(const rlx_sampler_stage *st);
    /* Optional, constraint stages: builds ahead what mask() will need at the current position
     * (into a cache the stage shares), so that a refused draw finds it; 0 or an RLX_E* code
     * (best effort: mask() meets the same failure and reports it). See rlx_sampler_prefetch. */
    int (*prefetch)(rlx_sampler_stage *st);
    /* Optional, constraint stages: why allows() refuses `token`, a token its own mask let
     * through: fills err and returns an RLX_E* code, or 0 for the sampler's generic message. */
    int (*refusal)(const rlx_sampler_stage *st, int32_t token, rlx_error *err);
    void (*free)(rlx_sampler_stage *st);
} rlx_stage_ops;
/* A stage: the ops first, its state after (stages embed this as their first member). */
struct rlx_sampler_stage { const rlx_stage_ops *ops; };

typedef struct rlx_sampler rlx_sampler;

/* The chain for `p` (validated). NULL when out of memory. */
rlx_sampler *rlx_sampler_new(const rlx_sampling_params *p, int32_t n_vocab);
void rlx_sampler_free(rlx_sampler *s);
/* Adds a constraint stage (allows and mask set) after the logit bias; the chain takes
 * ownership, also on failure (RLX_EINVAL for a stage without allows/mask, RLX_ENOMEM). */
int rlx_sampler_add_stage(rlx_sampler *s, rlx_sampler_stage *st);
/* A constraint stage for generated JSON (engine/sample_json.c): refuses a token that would close
 * a key its object already has - or, with `grammar` (the grammar stage before it in the chain,
 * NULL: none), that leaves a key spelling one its object has where the grammar lets nothing
 * but the closing quote follow - unless nothing else is left. texts/lens: each token's bytes
 * (borrowed for the stage's life). NULL when out of memory. */
rlx_sampler_stage *rlx_json_keys_stage_new(const char *const *texts, const size_t *lens, int32_t n_vocab,
                                           const rlx_sampler_stage *grammar);
/* Tells every stage a token of the sequence (see accept above); the first error is returned. */
int rlx_sampler_accept(rlx_sampler *s, int32_t token, bool generated);
/* Picks the next token from raw logits (n_vocab of them; modified in place, so a caller that
 * needs them afterwards passes a copy). With constraints, `raw` (may equal NULL when there are
 * none) is the untouched copy the chain restarts from when the first draw is refused.
 * Returns 0 and *token, RLX_EINVAL when the constraints allow no token at all (err says so),
 * or another RLX_E* code. */
int rlx_sampler_pick(rlx_sampler *s, float *logits, const float *raw, int32_t *token, rlx_error *err);
/* rlx_sampler_pick without constraints' restart (raw NULL): the token, or -1 on failure. */
int32_t rlx_sampler_sample(rlx_sampler *s, float *logits);
/* Every stage's prefetch (above). Runs on a helper thread beside the forward pass
 * (engine/gaside.h) while the thread that owns the chain touches neither it nor the stages'
 * caches; reads the chain, writes only those caches. The first error, else 0. */
int rlx_sampler_prefetch(rlx_sampler *s);
/* Whether the constraint stages let the sequence end now / require it to. */
bool rlx_sampler_can_end(const rlx_sampler *s);
bool rlx_sampler_must_end(const rlx_sampler *s);
/* The stages in order, for diagnostics and tests: names joined by " -> " into buf. */
const char *rlx_sampler_describe(const rlx_sampler *s, char *buf, size_t cap);

/* Log-softmax of raw logits: logprob of `token` and the k most likely (descending, ties by
 * lower id). top_ids/top_lp hold at least k entries. Returns the logprob of `token`. */
float rlx_logprobs(const float *logits, int32_t n_vocab, int32_t token, int k,
                   int32_t *top_ids, float *top_lp);

/* Greedy argmax (ties -> lowest id). */
int32_t rlx_argmax(const float *logits, int32_t n);

#endif
