/* spec.h - speculative decoding by prompt lookup (n-gram drafting, no second model).
 *
 * A decoding sequence whose recent tokens (an n-gram of ngram_max down to ngram_min tokens)
 * occurred earlier in its prompt or output drafts the tokens that followed that occurrence.
 * The scheduler (engine/sched.c) adds the drafts as extra decode rows of the sequence's step
 * and verifies them in order with the sequence's own sampler: each row's token is sampled
 * exactly as a one-token step would sample it (rows have one-row arithmetic, so their logits are
 * those of non-speculative steps), and a draft is kept while it equals the sampled token. So
 * greedy output is identical to non-speculative decoding and seeded sampling too (each emitted
 * token takes one draw from the sequence's generator, in the same order); for a point-mass draft
 * this is the standard rejection rule (accept with probability p(draft), otherwise a token
 * from p without the draft). KV rows written for rejected drafts lie past the sequence's
 * computed length and are overwritten by the next step. Models with recurrent-state layers do
 * not draft (a state cannot be rolled back).
 *
 * Pure functions, no allocation; called by the worker thread. */
#ifndef RLX_SPEC_H
#define RLX_SPEC_H

#include <stdint.h>

#define RLX_SPEC_MAX_DRAFT 16   /* upper bound of draft tokens per step (rows per sequence - 1) */
#define RLX_SPEC_NGRAM_MIN 2
#define RLX_SPEC_NGRAM_MAX 4
#define RLX_SPEC_WINDOW 65536   /* how far back the lookup searches, in tokens */

/* The continuation, after the most recent earlier occurrence, of the longest suffix n-gram of
 * tokens[0..n) (ngram_max down to ngram_min tokens) that occurred before: max_draft tokens
 * written to draft (what followed the occurrence; where that runs into the suffix itself the
 * repeat is continued with its period, as a loop would go on). Returns their count (0: no
 * earlier occurrence). */
int32_t rlx_spec_lookup(const int32_t *tokens, int32_t n, int32_t ngram_min, int32_t ngram_max, int32_t *draft,
                        int32_t max_draft);

/* Per-sequence draft length control: drafts grow while they are accepted in full and shrink to
 * what was accepted (plus one) otherwise; a draft rejected at its first token also pauses
 * drafting for a few steps, so text that does not repeat pays almost nothing. */
typedef struct rlx_spec_state {
    int32_t len;                /* next draft's length limit (0: not started, takes the maximum) */
    int32_t cooldown;           /* steps left without drafting */
    int32_t misses;             /* consecutive drafts rejected at their first token */
} rlx_spec_state;

/* The draft length allowed now (0: skip this step), for a request maximum max_draft. */
int32_t rlx_spec_allow(rlx_spec_state *st, int32_t max_draft);
/* After a verified draft of n_draft tokens of which n_accepted were kept. */
void rlx_spec_update(rlx_spec_state *st, int32_t n_draft, int32_t n_accepted, int32_t max_draft);
/* No draft for the next `steps` steps unless a pause is already on (a draft model unsure of
 * its first token: a shorter pause than a refused draft's, which grows). */
void rlx_spec_pause(rlx_spec_state *st, int32_t steps);

#endif
