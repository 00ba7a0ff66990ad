/* embed.h - one encoder step: several inputs (each one sequence) through an encoder model's
 * runner (models/arch/bert.c: bert, nomic-bert) in one batch, pooled per input
 * (engine/pool.h) and normalized, or the per-token rows for pooling none, or the `cls` head's
 * relevance score for pooling rank.
 *
 * Batch invariance: an input's result is bit-identical whatever other inputs share the step
 * and wherever it sits in the batch (the CPU kernels are row-wise, attention reads only the
 * input's own rows, and each token's arithmetic follows from its own sequence's length).
 *
 * Threads: the runner's thread (the model worker) only; not thread-safe, like the runner. */
#ifndef RLX_EMBED_H
#define RLX_EMBED_H

#include "engine/pool.h"
#include "engine/runner.h"

/* One input: its token ids (borrowed), as the tokenizer made them (add_special: [CLS] ... [SEP]). */
typedef struct rlx_embed_seq {
    const int32_t *tokens;
    int32_t n_tokens;
} rlx_embed_seq;

/* Whether the runner's model is an encoder rlx_embed_step can run. */
bool rlx_embed_is_encoder(const rlx_runner *r);

/* The model's own pooling (GGUF <arch>.pooling_type); RLX_POOL_NONE for non-encoders. */
rlx_pooling rlx_embed_default_pooling(const rlx_runner *r);

/* Values per input for pooling p: n_embd for mean, cls and last, the rank head's outputs
 * (usually 1) for rank, n_embd per token for none (times n_tokens). */
int64_t rlx_embed_dim(const rlx_runner *r, rlx_pooling p);

/* The longest input rlx_embed_step accepts: the runner's context, and for models with learned
 * position embeddings (bert) at most their rows. */
int32_t rlx_embed_max_tokens(const rlx_runner *r);

/* Pooling rank: the classifier head over an input's first ([CLS]) row of hidden states (n_embd
 * values) into out (rlx_embed_dim(r, RLX_POOL_RANK) scores). For the worker, which runs its own
 * steps (engine/worker_embed.c). The model must have the head (cfg.rank_head). */
int rlx_embed_rank_scores(const rlx_runner *r, const float *cls_row, float *out, rlx_error *err);

/* Runs n inputs (n >= 1) as one forward step and writes their results to `out`, input after
 * input: for mean / cls / last the pooled vector (rlx_embed_dim values) normalized with
 * rlx_embd_normalize(norm) (-1 none, 0 max-abs int16, 1 taxicab, 2 Euclidean, p > 2 p-norm);
 * for rank the classifier's scores (not normalized); for none the input's n_tokens rows of
 * n_embd hidden states (not normalized, as llama-server's /embedding). `out` holds the sum of
 * those sizes. Errors (nothing is run): RLX_EINVAL for a model that is not an encoder, an
 * empty input, a bad norm, or rank on a model without a `cls` head; RLX_ETOOLONG for an input
 * over rlx_embed_max_tokens or inputs whose tokens together exceed r->max_batch_tokens (the
 * caller splits the work into steps); RLX_ERANGE for a token id outside the vocabulary. */
int rlx_embed_step(rlx_runner *r, const rlx_embed_seq *in, int32_t n, rlx_pooling pooling, int norm, float *out,
                   rlx_error *err);

#endif
