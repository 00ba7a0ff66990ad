/* sample.h - token sampling: greedy, temperature, top-k, top-p, min-p, repetition / presence /
 * frequency penalties, logit bias, seeded RNG; plus log-probabilities for responses.
 *
 * Ownership: an rlx_sampler is owned by one sequence (not thread-safe); it copies the params
 * (including the bias list). Logit arrays passed in are borrowed and may be modified. */
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

typedef struct rlx_sampler rlx_sampler;

rlx_sampler *rlx_sampler_new(const rlx_sampling_params *p, int32_t n_vocab);
void rlx_sampler_free(rlx_sampler *s);
/* Records a token in the penalty history (prompt tokens and generated ones). */
void rlx_sampler_accept(rlx_sampler *s, int32_t token);
/* Picks the next token from raw logits (n_vocab of them; modified in place). */
int32_t rlx_sampler_sample(rlx_sampler *s, float *logits);

/* Log-softmax of raw logits: logprob of `token` and the k most likely (descending, ties by
 * lower id). top_ids/top_lp hold at least k entries. Returns the logprob of `token`. */
float rlx_logprobs(const float *logits, int32_t n_vocab, int32_t token, int k,
                   int32_t *top_ids, float *top_lp);

/* Greedy argmax (ties -> lowest id). */
int32_t rlx_argmax(const float *logits, int32_t n);

#endif
