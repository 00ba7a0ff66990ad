/* draft.h - speculative decoding with a draft model (`--draft-model`): a small model that shares
 * the target's vocabulary proposes the next tokens greedily; the scheduler verifies them in one
 * step of the target exactly as it verifies prompt-lookup drafts (engine/spec.h), so outputs are
 * those of non-speculative decoding whatever the draft proposes.
 *
 * The draft model has its own runner (its own paged KV pool, on the target's backend). Each
 * target sequence holds an rlx_draft_seq: its blocks in that pool and the tokens whose K/V they
 * hold. A proposal first catches the draft's KV up with the sequence's tokens (keeping the
 * longest prefix it already computed, so a sequence pays for its prompt once, and a rejected
 * draft costs only the positions past the kept ones), then runs one token at a time, stopping
 * where the draft's top probability falls under p_min (llama.cpp's --draft-p-min).
 *
 * Ownership: rlx_draft owns its runner; an rlx_draft_seq owns its block table and history and
 * lends its blocks from the draft's pool until rlx_draft_seq_free. Called by the model worker's
 * thread only. */
#ifndef RLX_DRAFT_H
#define RLX_DRAFT_H

#include "engine/runner.h"

typedef struct rlx_draft rlx_draft;

typedef struct rlx_draft_seq {
    int32_t *blocks;            /* the draft pool's blocks holding positions 0.. */
    int32_t n_blocks, cap_blocks;
    int32_t *hist;              /* tokens whose K/V the blocks hold, by position */
    int32_t n_hist, cap_hist;
} rlx_draft_seq;

/* Opens the draft model at path on the target's backend configuration with room for max_seqs
 * sequences of target->n_ctx positions (past its training context too, as the runner allows:
 * its drafts may get worse there, never the output). Refused (RLX_EUNSUPPORTED, naming what differs) unless
 * its vocabulary is the target's as llama.cpp's speculative decoding checks it: the same
 * tokenizer model, BOS/EOS ids and add-BOS flag (each where both files give it), sizes within
 * 128 and the same token texts from id 5 on; refused also for a model with recurrent state or one that outputs no logits. */
int rlx_draft_open(rlx_draft **out, const char *path, const rlx_runner *target, const rlx_backend_config *backend,
                   int32_t max_seqs, int32_t max_batch_tokens, float p_min, rlx_error *err);
void rlx_draft_close(rlx_draft *d);

/* One sequence's proposal in rlx_draft_propose_many. */
typedef struct rlx_draft_job {
    rlx_draft_seq *ds;
    const int32_t *tokens;      /* the sequence's tokens [0..n) */
    int32_t n, max;             /* max: the most drafts wanted */
    int32_t *out;               /* room for max drafts */
    float p_min;                /* > 0: this job's confidence floor; 0: the draft's; < 0: none */
    int32_t got;                /* out: the drafts written */
    int32_t cand;               /* internal */
} rlx_draft_job;

/* Every job's proposal (as rlx_draft_propose), batched: the catch-ups of all jobs share forward
 * passes (up to the draft's max_batch_tokens each), then each draft position is one forward over
 * the jobs still drafting, so the draft model's weights stream once per position, not once per
 * sequence. 0, or a negative error code when a forward pass fails (then every job has got 0 and
 * its history forgotten). */
int rlx_draft_propose_many(rlx_draft *d, rlx_draft_job *jobs, int32_t n_jobs, rlx_error *err);

/* Up to max tokens that follow tokens[0..n) by the draft model's greedy choice, written to out.
 * Returns their count: 0 when the draft's pool has no room (nothing fails: the sequence just
 * does not draft this step), or a negative error code when the forward pass fails. */
int32_t rlx_draft_propose(rlx_draft *d, rlx_draft_seq *ds, const int32_t *tokens, int32_t n, int32_t max, int32_t *out,
                          rlx_error *err);

/* Gives the sequence's blocks back to the draft's pool and frees its table and history. */
void rlx_draft_seq_free(rlx_draft *d, rlx_draft_seq *ds);
/* For a sequence that ends: its draft KV is kept (the max_seqs most recent, while the pool has
 * room) for a later sequence that begins with the same tokens - a chat's system prompt and
 * history - which takes it over at its first proposal (the longest shared beginning, at least a
 * block), so the draft computes only what differs. *ds is left empty. */
void rlx_draft_seq_park(rlx_draft *d, rlx_draft_seq *ds);

/* The draft model's weight and KV pool bytes (0 for NULL). */
void rlx_draft_memory(const rlx_draft *d, size_t *weights, size_t *kv);
/* Whether the draft model's files changed since it was opened (rlx_runner_file_changed). */
bool rlx_draft_file_changed(const rlx_draft *d, char *why, size_t cap);

/* Positions computed by the draft model (catch-up and drafting), for /metrics and tests. */
uint64_t rlx_draft_positions(const rlx_draft *d);

#endif
