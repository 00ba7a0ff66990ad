/* sched_spec.c - speculative decoding's part of the scheduler step (engine/spec.h for prompt
 * lookup, engine/draft.h for a draft model): how many drafts a sequence may have, the draft
 * model's batched proposals before the step is built, the drafts added as extra decode rows'
 * tokens, and their verification after the step with the sequence's own sampler. Worker
 * thread only, as the rest of the step (sched.c). */
#include "engine/worker_internal.h"
#include <stdio.h>

/* The most drafts s may have this step: 0 unless it decodes one pending token (no prompt
 * logprobs due), then within its request's maximum, its generation limit, the context, the
 * step's token budget and the spare logits rows. */
static int32_t draft_limit(const rlx_worker *w, const seq *s, int32_t budget, int32_t spare_rows)
{
    const rlx_request *r = s->req;
    int32_t max = r->draft_max < 0 ? w->cfg.draft_max : RLX_MIN(r->draft_max, RLX_SPEC_MAX_DRAFT);
    if (max <= 0 || w->runner->mem.has_state || s->n_tokens <= s->n_prompt || s->n_tokens - s->n_computed != 1 ||
        (r->prompt_logprobs && s->plp_next < s->n_prompt))
        return 0;
    max = RLX_MIN(max, s->max_tokens - s->n_generated - 1);
    max = RLX_MIN(max, w->runner->n_ctx - s->n_tokens);
    return RLX_MIN(max, RLX_MIN(budget - 1, spare_rows));
}

/* With a draft model: the proposals of every running sequence that may draft, in one batched
 * pass of the draft model (engine/draft.h) before the step is built; rlx__spec_draft then takes what
 * the step's budget leaves room for. A draft model not sure of a sequence's first token skips
 * that sequence's next draft (and its forward pass), no longer: a refused draft's growing pause
 * would lose the drafts of a well-matched model, which is often unsure for a token or two. */
void rlx__spec_draft_model_pass(rlx_worker *w, int32_t spare_rows)
{
    int32_t n = 0;
    for (int32_t i = 0; i < w->n_running; i++) {
        seq *s = w->running[i];
        s->n_proposed = 0;
        int32_t max = draft_limit(w, s, w->cfg.max_batch_tokens, spare_rows);
        if (max <= 0 || (max = rlx_spec_allow(&s->spec, max)) <= 0) continue;
        w->djobs[n] = (rlx_draft_job){.ds = &s->dseq, .tokens = s->tokens, .n = s->n_tokens, .max = max, .out = s->draft,
                                      .p_min = s->req->draft_p_min};
        w->djob_seq[n++] = s;
    }
    if (!n) return;
    rlx_error err = {0};
    uint64_t p0 = rlx_draft_positions(w->draft);
    int rc = rlx_draft_propose_many(w->draft, w->djobs, n, &err);
    pthread_mutex_lock(&w->mu);
    w->stats.draft_positions += rlx_draft_positions(w->draft) - p0;
    pthread_mutex_unlock(&w->mu);
    if (rc) { /* the sequences go on without drafts */
        fprintf(stderr, "rlxd: %s: the draft model failed (%s): this step drafts nothing\n", w->name, err.msg);
        return;
    }
    for (int32_t j = 0; j < n; j++) {
        seq *s = w->djob_seq[j];
        s->n_proposed = w->djobs[j].got;
        if (!s->n_proposed) rlx_spec_pause(&s->spec, 1);
    }
}

/* Drafts for s, a running sequence whose one pending token is this step's, within the step's
 * token budget and spare logits rows: rlx__spec_draft_model_pass's proposal, or a prompt lookup. The
 * memory for the drafts' positions is taken only if free (never by preempting). Sets
 * s->n_draft. */
void rlx__spec_draft(rlx_worker *w, seq *s, int32_t budget, int32_t *spare_rows)
{
    s->n_draft = 0;
    int32_t proposed = s->n_proposed;
    s->n_proposed = 0;
    int32_t n = draft_limit(w, s, budget, *spare_rows);
    if (n <= 0) return;
    if (w->draft) n = RLX_MIN(n, proposed);
    else if ((n = rlx_spec_allow(&s->spec, n)) > 0)
        n = rlx_spec_lookup(s->tokens, s->n_tokens, RLX_SPEC_NGRAM_MIN, RLX_SPEC_NGRAM_MAX, s->draft, n);
    if (n <= 0) return;
    if (rlx_memory_grow(&w->runner->mem, &s->mem, s->n_tokens + n) != 0) return;
    s->n_draft = n;
    *spare_rows -= n;
}

/* Verifies s's drafts after the step: row i of s's logits (from out_row) follows the pending
 * token and drafts 0..i-1. Each row's token is sampled as a one-token step would (same
 * logits, same sampler state), and drafting goes on while the sampled token equals the draft;
 * the KV of a kept draft is kept, that of the others lies past n_computed and is rewritten by
 * the next step. Returns false when s has ended. */
bool rlx__spec_verify(rlx_worker *w, seq *s, float *scratch)
{
    rlx_runner *rn = w->runner;
    int32_t d = s->n_draft, kept = 0, row = s->out_row;
    s->n_draft = 0;
    s->n_computed -= d; /* the pending token's position is computed; the drafts' are not yet */
    bool alive = true;
    for (int32_t i = 0; i <= d; i++) {
        rlx_memory_commit(&rn->mem, &s->mem, s->tokens, s->n_computed);
        int32_t at = s->n_tokens;
        alive = rlx__emit_token(w, s, rn->logits + (size_t)(row + i) * rn->n_vocab, scratch);
        if (!alive || i == d || s->tokens[at] != s->draft[i]) break;
        s->n_computed++; /* the draft was this token: its row's KV stands */
        kept++;
    }
    pthread_mutex_lock(&w->mu);
    w->stats.draft_tokens += (uint64_t)d;
    w->stats.draft_accepted += (uint64_t)kept;
    pthread_mutex_unlock(&w->mu);
    if (alive) rlx_spec_update(&s->spec, d, kept, RLX_SPEC_MAX_DRAFT);
    return alive;
}
