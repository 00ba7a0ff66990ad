/* sample_internal.h - between the sampler chain (sample.c) and its built-in stages
 * (sample_stages.c): the per-thread scratch, candidate ranking and the stage constructors.
 * Called only by the thread running the sampler. */
#ifndef RLX_SAMPLE_INTERNAL_H
#define RLX_SAMPLE_INTERNAL_H

#include "engine/sample.h"

typedef rlx_token_logit cand;

/* Top-p mass histogram: bins by distance below the max logit; logits further below than
 * TOP_P_RANGE share the last bin (their mass is below e^-64 of the max's). */
#define TOP_P_BINS 4096
#define TOP_P_RANGE 64.0f
/* Full-vocabulary draws sum the weights per block of this many tokens. */
#define DRAW_BLOCK 256

/* Per-thread scratch of vocabulary size, shared by every sampler the thread runs: a worker
 * sampling 256 sequences keeps one set of buffers (~2.7 MB at 151,936 tokens), not 256. */
typedef struct rlx__sample_scratch {
    size_t cap;               /* entries in each per-token array */
    cand *cands;
    double *probs;
    uint16_t *bin_of;         /* each candidate's top-p bin */
    double bins[TOP_P_BINS];
    float *weights;           /* full-vocabulary path: each token's weight */
    double *block_sums;       /* full-vocabulary path: per DRAW_BLOCK tokens */
} rlx__sample_scratch;

/* The calling thread's scratch with room for n tokens; NULL when out of memory. */
rlx__sample_scratch *rlx__sample_scratch_get(size_t n);

/* Keeps the k best logits in dst[0..k), sorted best first; returns the count kept. */
size_t rlx__select_top_k(const float *logits, size_t n, size_t k, cand *dst);

/* Lists every token that can still be drawn (logit above -inf) if c is not listed yet. */
void rlx__cands_list(rlx_token_cands *c);

/* Uniform in [0, 1) with 53 random bits from a xoshiro256** state. */
double rlx__uniform01(uint64_t s[4]);

/* The full-vocabulary draw's weights: w[i] = e^((l[i] - mx) * inv_t) (0 below e^-87), 0 for
 * -inf and NaN logits; and w[i] = 0 where l[i] is -inf. Vectorized for the CPU path in use
 * (RLX_CPU_PATH), the same bits on every path. Exposed for tests. */
void rlx__sample_weights(const float *l, int32_t n, float mx, float inv_t, float *w);
void rlx__sample_zero_masked(const float *l, int32_t n, float *w);

/* Built-in stages (NULL when out of memory). The sampler owns `params` and the RNG they point
 * into; the stages borrow them for their lifetime. */
rlx_sampler_stage *rlx__stage_penalties(const rlx_sampling_params *p, int32_t n_vocab);
rlx_sampler_stage *rlx__stage_bias(const rlx_sampling_params *p, int32_t n_vocab);
rlx_sampler_stage *rlx__stage_top_k(int32_t k);
rlx_sampler_stage *rlx__stage_top_p(float p);
rlx_sampler_stage *rlx__stage_min_p(float p);
rlx_sampler_stage *rlx__stage_greedy(void);
/* Temperature, softmax and the draw (the full-vocabulary path when nothing listed the
 * candidates); rng: the sampler's xoshiro256** state. */
rlx_sampler_stage *rlx__stage_dist(float temperature, uint64_t *rng);

#endif
