/* sched.c - continuous batching. Each step builds ONE batch: the next token of every running
 * sequence plus chunks of prompts (chunked prefill) under the token budget, admitting waiting
 * requests while sequence slots and memory allow. Prompt prefixes already in the paged KV
 * cache (full blocks, by chained content hash) are reused instead of recomputed where the
 * model's memory allows it. When memory runs out, the newest running sequence is preempted:
 * its memory is released (KV blocks stay cached while registered, a state slot is freed) and
 * it is recomputed later from its tokens, so outputs never change. All per-sequence memory
 * goes through engine/memory.h.
 *
 * A model with recurrent state shares a prefix only where a checkpoint of the state was taken
 * (engine/memory.h); the policy is here: a prefill chunk stops at the prompt's end rounded down
 * to a block (the longest prefix an identical prompt, or a session's next turn, can reuse) and
 * at every multiple of ckpt_every, and a checkpoint is taken there after the step. Only
 * positions computed as prompt tokens are checkpointed or reused (token_kind: a generated
 * token's arithmetic differs from a prompt token's in the last bits, and a later prompt holding
 * it computes it as a prompt token), so a hit gives exactly the numbers of a computation from
 * position 0: a session's next turn restarts at its previous prompt's checkpoint and
 * recomputes the generated tokens after it.
 *
 * Speculative decoding's part of the step (drafts as extra rows, their verification) is in
 * sched_spec.c. */
#include "engine/worker_internal.h"
#include "backends/cpu/threadpool.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- events ---------------------------------------------------------------------------- */

void rlx__emit(rlx_request *r, rlx_event *ev)
{
    ev->request_id = r->id;
    r->on_event(r->user, ev);
}

static void queued_dec(rlx_worker *w)
{
    pthread_mutex_lock(&w->mu);
    w->queued--;
    pthread_mutex_unlock(&w->mu);
}

void rlx__request_cancelled(rlx_worker *w, rlx_request *req)
{
    rlx_event ev = {.type = RLX_EV_DONE, .finish = RLX_FINISH_CANCELLED, .text = ""};
    rlx__emit(req, &ev);
    queued_dec(w);
    rlx_request_free(req);
}

void rlx__ckpt_stats(rlx_worker *w)
{
    const rlx_ckpt_cache *c = &w->runner->mem.ckpt;
    w->stats.state_ckpt_entries = c->n_entries;
    w->stats.state_ckpt_bytes = rlx_ckpt_bytes(c);
    w->stats.state_ckpt_evictions = c->evictions;
}

static void remove_from(seq **arr, int32_t *n, seq *s)
{
    for (int32_t i = 0; i < *n; i++)
        if (arr[i] == s) {
            memmove(&arr[i], &arr[i + 1], (size_t)(*n - i - 1) * sizeof *arr);
            (*n)--;
            return;
        }
}

static void release_blocks(rlx_worker *w, seq *s)
{
    rlx_memory_release(&w->runner->mem, &s->mem);
    s->n_computed = 0;
}

void rlx__seq_free(rlx_worker *w, seq *s)
{
    release_blocks(w, s);
    rlx_draft_seq_park(w->draft, &s->dseq);
    rlx_sampler_free(s->sampler);
    rlx_stop_free(&s->stop);
    rlx_request_free(s->req);
    free(s->tokens);
    rlx_mem_seq_free(&s->mem);
    free(s->text);
    free(s);
}

static void detach(rlx_worker *w, seq *s)
{
    remove_from(w->running, &w->n_running, s);
    remove_from(w->waiting, &w->n_waiting, s);
    if (!s->started) queued_dec(w);
}

/* The text a finished sequence still owes: the detokenizer's pending bytes and whatever the
 * stop matcher held back, unless a stop string matched (then nothing after it is sent; an
 * ending that completes a stop string turns into a stop). Returned text is malloc'ed. */
static char *final_text(seq *s, size_t *len, rlx_finish_reason *why)
{
    size_t n = rlx_detok_flush(&s->detok, s->text, s->text_cap);
    *len = 0;
    if (s->stop.matched) return NULL;
    const char *a = s->text, *b = "";
    size_t na = n, nb = 0;
    char *out = NULL;
    if (s->stop.n_stop) {
        int m = rlx_stop_push(&s->stop, s->text, n, &a, &na);
        if (m < 0) return NULL;
        if (m == 1) *why = RLX_FINISH_STOP;
        if (!(out = malloc(na + 1))) return NULL;
        memcpy(out, a, na); /* a points into the matcher, which flush reuses */
        if (m == 0) rlx_stop_flush(&s->stop, &b, &nb);
    }
    char *t = realloc(out, na + nb + 1);
    if (!t) { free(out); return NULL; }
    if (!out) memcpy(t, a, na);
    memcpy(t + na, b, nb);
    t[na + nb] = 0;
    *len = na + nb;
    return t;
}

void rlx__seq_finish(rlx_worker *w, seq *s, rlx_finish_reason why)
{
    detach(w, s);
    double now = rlx_now();
    size_t n = 0;
    char *rest = final_text(s, &n, &why);
    rlx_event ev = {.type = RLX_EV_DONE, .finish = why, .text = rest ? rest : "", .text_len = n,
                    .stop_string = why == RLX_FINISH_STOP && s->stop_hit};
    ev.usage.prompt_tokens = s->n_prompt;
    ev.usage.completion_tokens = s->n_generated;
    ev.usage.cached_tokens = s->cached_tokens;
    double sub = s->req->submitted_at ? s->req->submitted_at : s->t_submit; /* before a commit takes req */
    ev.timings.queued_s = s->started ? s->t_admit - sub : now - sub;
    ev.timings.ttft_s = s->t_first > 0 ? s->t_first - sub : 0;
    ev.timings.prompt_s = s->t_first > 0 ? s->t_first - s->t_admit : 0;
    ev.timings.gen_s = s->t_first > 0 ? s->t_last - s->t_first : 0;
    ev.timings.total_s = now - sub;
    /* a stored session turn's final event goes out from the session writer once the turn is
     * durable (then the writer owns the request) */
    bool handed = false;
    if (why == RLX_FINISH_STOP || why == RLX_FINISH_LENGTH) handed = rlx__session_commit(w, s, &ev);
    else rlx__session_detach(w, s);
    if (!handed) rlx__emit(s->req, &ev);
    free(rest);
    pthread_mutex_lock(&w->mu);
    w->stats.generated_tokens += (uint64_t)s->n_generated;
    pthread_mutex_unlock(&w->mu);
    rlx__seq_free(w, s);
}

void rlx__seq_fail(rlx_worker *w, seq *s, int code, const char *msg)
{
    detach(w, s);
    rlx__session_detach(w, s);
    rlx_event ev = {.type = RLX_EV_ERROR, .error_code = code, .error_msg = msg, .text = "", .error_in_grammar = s->grammar_fault};
    rlx__emit(s->req, &ev);
    rlx__seq_free(w, s);
}

/* ---- admission (a request becomes a sequence: seq_prepare.c) -------------------------- */

/* Positions of s computed with prompt arithmetic (token_kind RLX_TOKEN_PROMPT): the most a
 * state checkpoint may cover. */
static int32_t prompt_span(const seq *s)
{
    return s->n_prompt == 1 ? 0 : s->n_prompt - s->n_prompt % 4;
}

/* The checkpoint at s's prompt end: the last block boundary before its last token (the most an
 * identical prompt can reuse) within the prompt-arithmetic positions. */
static int32_t prompt_ckpt(const seq *s, int32_t B)
{
    return RLX_MIN((s->n_prompt - 1) / B, prompt_span(s) / B) * B;
}

/* Reuses cached full blocks of the sequence's tokens (never the block holding the last token,
 * whose logits must be computed), where the model's memory can share a prefix. */
static void prefix_lookup(rlx_worker *w, seq *s)
{
    rlx_memory *m = &w->runner->mem;
    /* a state checkpoint only within the prompt positions (take_checkpoint) */
    int32_t n = m->has_state ? RLX_MIN(s->n_tokens, prompt_span(s) + 1) : s->n_tokens;
    s->n_computed += rlx_memory_prefix_lookup(m, &s->mem, s->tokens, n);
}

/* The tokens of s to compute in this step within budget: with a checkpoint cache a prefill
 * chunk ends at the next checkpoint position (a prompt gives the same numbers wherever its
 * chunks are cut: see token_kind). */
static int32_t chunk_len(const rlx_worker *w, const seq *s, int32_t budget)
{
    int32_t k = RLX_MIN(s->n_tokens - s->n_computed, budget);
    const rlx_memory *m = &w->runner->mem;
    if (k <= 1 || !rlx_memory_has_ckpt(m)) return k;
    int32_t B = rlx_memory_block_size(m), from = s->n_computed, N = w->ckpt_every;
    int32_t end = prompt_ckpt(s, B), next = (from / N + 1) * N;
    if (end > from && end < next) next = end;
    return next < from + k ? next - from : k;
}

/* After a step: a checkpoint of s's state where the policy (top of file) wants one. */
static void take_checkpoint(rlx_worker *w, seq *s)
{
    rlx_memory *m = &w->runner->mem;
    int32_t pos = s->n_computed, B = rlx_memory_block_size(m);
    if (!rlx_memory_has_ckpt(m) || pos <= 0 || pos % B || pos > prompt_span(s)) return;
    if (pos != prompt_ckpt(s, B) && pos % w->ckpt_every) return;
    rlx_memory_checkpoint(m, &s->mem, pos);
}

/* Records the content hashes of the full blocks s completes with its next k tokens in this
 * step (they are registered after the step runs). */
static void note_inflight(rlx_worker *w, seq *s, int32_t k)
{
    for (;;) {
        int32_t room = w->cap_inflight - w->n_inflight;
        int32_t n = rlx_memory_pending_hashes(&w->runner->mem, &s->mem, s->tokens, s->n_computed + k,
                                              w->b_inflight + w->n_inflight, room);
        if (n < room) { w->n_inflight += n; return; }
        int32_t nc = w->cap_inflight ? 2 * w->cap_inflight : 64;
        uint64_t *a = realloc(w->b_inflight, (size_t)nc * sizeof *a);
        if (!a) { w->n_inflight += n; return; } /* only an optimisation */
        w->b_inflight = a;
        w->cap_inflight = nc;
    }
}

/* Whether the next block s would look up in the prefix cache is being computed in this step by
 * another sequence: then s waits a step and reuses it, instead of computing it a second time. */
static bool prefix_in_flight(rlx_worker *w, const seq *s)
{
    if (w->n_inflight == 0) return false;
    uint64_t h = rlx_memory_next_lookup(&w->runner->mem, &s->mem, s->tokens, s->n_tokens);
    for (int32_t i = 0; h && i < w->n_inflight; i++)
        if (w->b_inflight[i] == h) return true;
    return false;
}

static void preempt(rlx_worker *w, seq *s)
{
    remove_from(w->running, &w->n_running, s);
    release_blocks(w, s);
    rlx_draft_seq_park(w->draft, &s->dseq); /* kept while the draft's pool has room; readmitted, it takes it back */
    /* back to the head of the queue: it was admitted before anything still waiting */
    memmove(&w->waiting[1], &w->waiting[0], (size_t)w->n_waiting * sizeof *w->waiting);
    w->waiting[0] = s;
    w->n_waiting++;
    pthread_mutex_lock(&w->mu);
    w->stats.preemptions++;
    pthread_mutex_unlock(&w->mu);
}

static seq *newest_running(rlx_worker *w, seq *except)
{
    seq *best = NULL;
    for (int32_t i = 0; i < w->n_running; i++)
        if (w->running[i] != except && (!best || w->running[i]->admit_order > best->admit_order)) best = w->running[i];
    return best;
}

/* Makes s's memory cover n_pos positions. When the pool is short, idle sessions' pins go
 * first (least recently used first), then newer sequences are preempted. Returns false if s
 * itself cannot get them now. */
static bool reserve(rlx_worker *w, seq *s, int32_t n_pos, bool may_preempt)
{
    for (;;) {
        int rc = rlx_memory_grow(&w->runner->mem, &s->mem, n_pos);
        if (rc == 0) return true;
        if (rc != RLX_EFULL) return false;
        if (rlx__sessions_release_pins(w, false)) continue;
        seq *victim = may_preempt ? newest_running(w, s) : NULL;
        if (!victim || victim->admit_order < s->admit_order) return false;
        preempt(w, victim);
    }
}

/* ---- the step -------------------------------------------------------------------------- */

static int grow_waiting(rlx_worker *w)
{
    if (w->n_waiting + 1 <= w->cap_waiting) return 0;
    int32_t nc = w->cap_waiting ? w->cap_waiting * 2 : 64;
    seq **n = realloc(w->waiting, (size_t)nc * sizeof *n);
    if (!n) return RLX_ENOMEM;
    w->waiting = n;
    w->cap_waiting = nc;
    return 0;
}

static void finish_cancelled(rlx_worker *w)
{
    for (int32_t i = w->n_running - 1; i >= 0; i--)
        if (w->running[i]->cancelled) rlx__seq_finish(w, w->running[i], RLX_FINISH_CANCELLED);
    for (int32_t i = w->n_waiting - 1; i >= 0; i--)
        if (w->waiting[i]->cancelled) rlx__seq_finish(w, w->waiting[i], RLX_FINISH_CANCELLED);
}

static void intake(rlx_worker *w)
{
    rlx__sessions_gc(w);
    pthread_mutex_lock(&w->mu);
    rlx_request **inbox = w->inbox;
    int32_t n_inbox = w->n_inbox;
    cancel_node *cancels = w->cancels; /* stays listed until their sessions are let go (below) */
    w->inbox = NULL;
    w->n_inbox = w->cap_inbox = 0;
    pthread_mutex_unlock(&w->mu);
    /* cancels first, so that a cancelled turn lets go of its session before the next turn of it
       (submitted once the client hung up, rlx_worker_submit) attaches; a cancel that finds
       nothing is kept for the requests taken in with it. The nodes stay in w->cancels until
       finish_cancelled has let go of the sessions: a submit in between (which reads that list
       to let a turn in on a session being cancelled) found neither the node nor a free session
       and refused the turn as busy. Later cancels are pushed at the head, so the nodes taken
       here are the list's tail from `cancels` on. */
    for (cancel_node *c = cancels; c; c = c->next) {
        c->found = false;
        for (int32_t i = 0; i < w->n_running && !c->found; i++)
            if (w->running[i]->req->id == c->id) w->running[i]->cancelled = c->found = true;
        for (int32_t i = 0; i < w->n_waiting && !c->found; i++)
            if (w->waiting[i]->req->id == c->id) w->waiting[i]->cancelled = c->found = true;
    }
    finish_cancelled(w);
    pthread_mutex_lock(&w->mu);
    cancel_node **tail = &w->cancels;
    while (*tail != cancels) tail = &(*tail)->next;
    *tail = NULL;
    pthread_mutex_unlock(&w->mu);
    cancel_node *keep = NULL;
    while (cancels) {
        cancel_node *c = cancels;
        cancels = c->next;
        if (c->found) free(c);
        else c->next = keep, keep = c;
    }
    cancels = keep;

    for (int32_t i = 0; i < n_inbox; i++) {
        if (inbox[i]->kind == RLX_REQ_EMBED) { /* worker_embed.c's queue */
            rlx__embed_enqueue(w, inbox[i]);
            continue;
        }
        seq *s = calloc(1, sizeof *s);
        rlx_error err = {0};
        if (!s || grow_waiting(w)) {
            rlx_event ev = {.type = RLX_EV_ERROR, .error_code = RLX_ENOMEM, .error_msg = "out of memory", .text = ""};
            rlx__emit(inbox[i], &ev);
            queued_dec(w);
            rlx_request_free(inbox[i]);
            free(s);
            continue;
        }
        s->req = inbox[i];
        rlx_mem_seq_init(&s->mem);
        s->t_submit = rlx_now();
        w->waiting[w->n_waiting++] = s;
        int rc = rlx__seq_prepare(w, s, &err);
        if (rc) rlx__seq_fail(w, s, rc, err.msg);
    }
    free(inbox);
    /* the cancels once more: those of requests that came in with them (prepared just now) */
    while (cancels) {
        cancel_node *c = cancels;
        cancels = c->next;
        if (!rlx__embed_mark_cancel(w, c->id))
            for (int32_t i = 0; i < w->n_waiting; i++)
                if (w->waiting[i]->req->id == c->id) { w->waiting[i]->cancelled = true; break; }
        free(c);
    }
    finish_cancelled(w);
}

typedef struct plan_entry { seq *s; int32_t k; } plan_entry;

/* The kind of s's token at pos (rlx_batch.decode): llama.cpp runs a prompt as one batch and then
 * one token per step, and these are the arithmetics it gives each token then, whatever chunks
 * our steps cut (generated tokens recomputed after a preemption keep theirs too). */
static uint8_t token_kind(const seq *s, int32_t pos)
{
    const int32_t p = s->n_prompt;
    if (pos >= p || p == 1) return RLX_TOKEN_DECODE;
    return pos < p - p % 4 ? RLX_TOKEN_PROMPT : RLX_TOKEN_PROMPT_TAIL;
}

/* Adds up to `budget` pending tokens of s to the batch. Logits rows are limited to the
 * runner's max_outputs: a sequence still owing prompt logprobs takes one per token, the others
 * one for their last token (or stop short of it when none is left). */
static int32_t add_tokens(rlx_worker *w, seq *s, int32_t budget, int32_t *n_tok, int32_t *n_seq, int32_t *n_out)
{
    int32_t k = chunk_len(w, s, budget);
    int32_t rows = w->runner->max_outputs - *n_out;
    bool plp = s->req->prompt_logprobs && s->plp_next < s->n_prompt;
    s->plp_n = 0;
    if (plp) k = RLX_MIN(k, rows);
    else if (rows <= 0 && s->n_computed + k == s->n_tokens) k--;
    if (plp || k != 1 || rows < 1 + s->n_draft) s->n_draft = 0; /* drafts only with their rows */
    if (k <= 0) return 0;
    int32_t si = (*n_seq)++;
    w->b_seqptr[si] = s;
    for (int32_t i = 0; i < k; i++) {
        int32_t t = (*n_tok)++;
        w->b_tokens[t] = s->tokens[s->n_computed + i];
        w->b_pos[t] = s->n_computed + i;
        w->b_seq[t] = si;
        w->b_out[t] = 0;
        w->b_dec[t] = token_kind(s, s->n_computed + i);
    }
    if (s->n_draft > 0) {
        /* the pending token, then the drafts: every row gives logits (rows ahead were checked) */
        for (int32_t j = 0; j < s->n_draft; j++) {
            int32_t t = (*n_tok)++;
            w->b_tokens[t] = s->draft[j];
            w->b_pos[t] = s->n_computed + 1 + j;
            w->b_seq[t] = si;
            w->b_dec[t] = RLX_TOKEN_DECODE;
        }
        for (int32_t j = 0; j <= s->n_draft; j++) w->b_out[*n_tok - 1 - j] = 1;
        s->out_row = *n_out;
        *n_out += 1 + s->n_draft;
        return k + s->n_draft;
    }
    if (plp) {
        for (int32_t i = 0; i < k; i++) w->b_out[*n_tok - k + i] = 1;
        s->plp_pos = s->n_computed;
        s->plp_row = *n_out;
        s->plp_n = k;
        *n_out += k;
        s->out_row = s->n_computed + k == s->n_tokens ? *n_out - 1 : -1;
    } else if (s->n_computed + k == s->n_tokens) {
        w->b_out[*n_tok - 1] = 1;
        s->out_row = (*n_out)++;
    } else {
        s->out_row = -1;
    }
    return k;
}

/* The logprob of each prompt token whose row this step computed (row i predicts position
 * plp_pos + i + 1); rows recomputed after a preemption are not sent twice. */
static void emit_prompt_logprobs(rlx_worker *w, seq *s, const float *logits)
{
    rlx_request *r = s->req;
    int32_t V = w->runner->n_vocab;
    for (int32_t i = 0; i < s->plp_n; i++) {
        int32_t next = s->plp_pos + i + 1;
        if (next != s->plp_next || next >= s->n_prompt) continue;
        rlx_event ev = {.type = RLX_EV_PROMPT_TOKEN, .token = s->tokens[next], .text = ""};
        ev.n_top = RLX_MAX(r->top_logprobs, 0);
        ev.logprob = rlx_logprobs(logits + (size_t)(s->plp_row + i) * V, V, ev.token, ev.n_top, ev.top_ids,
                                  ev.top_logprobs);
        rlx__emit(r, &ev);
        s->plp_next++;
    }
    s->plp_n = 0;
}

/* Samples s's next token from its logits row and delivers it. Returns false when s has ended
 * (finished or failed: s is freed). */
bool rlx__emit_token(rlx_worker *w, seq *s, const float *logits, float *scratch)
{
    rlx_request *r = s->req;
    if (r->no_generation) { /* scored, not continued (max_tokens 0) */
        rlx__seq_finish(w, s, RLX_FINISH_LENGTH);
        return false;
    }
    int32_t V = w->runner->n_vocab;
    memcpy(scratch, logits, (size_t)V * sizeof *scratch);
    int32_t tok = -1;
    rlx_error serr = {0};
    int rc = rlx_sampler_pick(s->sampler, scratch, logits, &tok, &serr);
    if (rc) { /* a pick fails for its constraints' sake (none allows a token, or past a limit) */
        s->grammar_fault = r->grammar && (rc == RLX_EINVAL || rc == RLX_ERANGE);
        rlx__seq_fail(w, s, rc, serr.msg);
        return false;
    }
    double now = rlx_now();
    if (s->t_first == 0) s->t_first = now;
    s->t_last = now;
    if (!r->ignore_eos && rlx_tokenizer_is_eog(w->tok, tok)) {
        rlx__seq_finish(w, s, RLX_FINISH_STOP);
        return false;
    }
    const int arc = rlx_sampler_accept(s->sampler, tok, true);
    if (arc) {
        s->grammar_fault = arc == RLX_ERANGE;
        rlx__seq_fail(w, s, arc, arc == RLX_ERANGE ? RLX_GRAMMAR_STACKS_MSG : "out of memory following the grammar");
        return false;
    }
    s->tokens[s->n_tokens++] = tok;
    s->n_generated++;
    size_t n = rlx_detok_push(w->tok, &s->detok, tok, w->marker && w->marker[tok], s->text, s->text_cap);
    rlx_event ev = {.type = RLX_EV_TOKEN, .token = tok, .text = s->text, .text_len = n,
                    .piece_len = rlx_token_to_bytes(w->tok, tok, w->marker && w->marker[tok], NULL, 0)};
    /* text that may begin a stop string is held back; a match ends the sequence at this token,
     * which counts as generated and stays in the session history */
    int m = s->stop.n_stop ? rlx_stop_push(&s->stop, s->text, n, &ev.text, &ev.text_len) : 0;
    if (m < 0) {
        rlx__seq_fail(w, s, RLX_ENOMEM, "out of memory matching stop strings");
        return false;
    }
    if (r->top_logprobs >= 0) {
        ev.n_top = r->top_logprobs;
        ev.logprob = rlx_logprobs(logits, V, tok, ev.n_top, ev.top_ids, ev.top_logprobs);
    }
    rlx__emit(r, &ev);
    /* a grammar with nothing left to take ends the text as end-of-generation would */
    s->stop_hit = m == 1;
    if (m == 1 || rlx_sampler_must_end(s->sampler)) rlx__seq_finish(w, s, RLX_FINISH_STOP);
    else if (s->n_generated >= s->max_tokens) rlx__seq_finish(w, s, RLX_FINISH_LENGTH);
    else return true;
    return false;
}

/* The helper's work for this step (gaside.h): the masks of the constrained sequences that draw
 * from it, then the walks ahead. Whether it was handed any. */
static bool aside_begin(rlx_worker *w, int32_t n_seq)
{
    if (!w->gaside || !w->gcache) return false;
    size_t n = 0;
    for (int32_t i = 0; i < n_seq && n < (size_t)w->cfg.max_seqs; i++) {
        seq *s = w->b_seqptr[i];
        if (s->out_row >= 0 && s->n_draft <= 0 && s->req->grammar)
            w->gaside_samplers[n++] = s->sampler;
    }
    if (!n && !rlx_grammar_cache_preparing(w->gcache)) return false;
    rlx__gaside_begin(w->gaside, w->gcache, w->gvocab, w->gaside_samplers, n);
    return true;
}

static void aside_end(rlx_worker *w)
{
    rlx__gaside_end(w->gaside);
    rlx__gaside_stats st;
    rlx__gaside_get_stats(w->gaside, &st);
    pthread_mutex_lock(&w->mu);
    w->stats.grammar_aside_runs = st.runs;
    w->stats.grammar_aside_prefetches = st.prefetches;
    w->stats.grammar_aside_tables = st.tables;
    w->stats.grammar_aside_s = st.busy_s;
    pthread_mutex_unlock(&w->mu);
}

int rlx__sched_step(rlx_worker *w)
{
    if (rlx_worker_embeds(w)) {
        rlx__embed_coalesce(w);
        intake(w);
        return rlx__embed_step(w);
    }
    intake(w);
    if (w->gcache && w->gvocab && !w->gaside) /* else beside the forward pass, below */
        rlx_grammar_cache_prepare_more(w->gcache, w->gvocab, RLX_GRAMMAR_PREPARE_SLICE_MS);
    rlx_runner *rn = w->runner;
    int32_t budget = w->cfg.max_batch_tokens, n_tok = 0, n_seq = 0, n_out = 0;
    w->n_inflight = 0;

    /* logits rows beyond one per running or admissible sequence, for drafts */
    int32_t spare_rows = rn->max_outputs - w->n_running - RLX_MIN(w->n_waiting, w->cfg.max_seqs - w->n_running);

    if (w->draft) rlx__spec_draft_model_pass(w, spare_rows);
    /* running sequences, oldest first: decodes and unfinished prefills */
    for (int32_t i = 0; i < w->n_running && budget > 0 && n_seq < w->cfg.max_seqs; i++) {
        seq *s = w->running[i];
        int32_t k = chunk_len(w, s, budget);
        if (k <= 0) continue;
        if (!reserve(w, s, s->n_computed + k, true)) {
            preempt(w, s);
            i--;
            continue;
        }
        /* preemption may have removed sequences after i only (they are newer) */
        rlx__spec_draft(w, s, budget, &spare_rows);
        note_inflight(w, s, k);
        budget -= add_tokens(w, s, budget, &n_tok, &n_seq, &n_out);
    }
    /* admit waiting requests while slots, budget and blocks allow, oldest first; one whose
     * prefix another sequence computes in this step waits for it */
    int32_t wi = 0;
    while (wi < w->n_waiting && w->n_running < w->cfg.max_seqs && budget > 0 && n_seq < w->cfg.max_seqs) {
        seq *s = w->waiting[wi];
        int32_t before = s->n_computed;
        if (!s->req->prompt_logprobs) prefix_lookup(w, s); /* cached blocks have no logits */
        int32_t hit = s->n_computed - before;
        if (prefix_in_flight(w, s)) {
            release_blocks(w, s);
            wi++;
            continue;
        }
        int32_t k = chunk_len(w, s, budget);
        if (!reserve(w, s, s->n_computed + k, false)) {
            release_blocks(w, s);
            break;
        }
        remove_from(w->waiting, &w->n_waiting, s);
        s->admit_order = ++w->admit_counter;
        w->running[w->n_running++] = s;
        if (!s->started) {
            s->started = true;
            s->t_admit = rlx_now();
            s->cached_tokens = hit;
            pthread_mutex_lock(&w->mu);
            w->queued--;
            w->stats.running = w->n_running; /* submit's free slots (--max-queue) see it at once */
            w->stats.prefix_queries += (uint64_t)s->n_prompt;
            w->stats.prefix_hits += (uint64_t)hit;
            if (hit > 0 && rn->mem.has_state) w->stats.state_ckpt_hits++;
            w->stats.prompt_tokens += (uint64_t)s->n_prompt;
            pthread_mutex_unlock(&w->mu);
        }
        note_inflight(w, s, chunk_len(w, s, budget));
        budget -= add_tokens(w, s, budget, &n_tok, &n_seq, &n_out);
    }
    if (n_tok == 0) {
        pthread_mutex_lock(&w->mu);
        w->stats.running = w->n_running;
        w->stats.waiting = w->n_waiting + w->n_inbox;
        w->stats.kv_usage = rlx_memory_usage(&rn->mem);
        w->stats.state_slots_used = rlx_memory_slots_used(&rn->mem);
        w->stats.state_slots_total = rlx_memory_slots_total(&rn->mem);
        rlx__ckpt_stats(w);
        pthread_mutex_unlock(&w->mu);
        /* nothing fits now although work waits and nothing runs: pins of sessions whose own
         * requests wait are all that is left to give back; then the head request cannot fit */
        if (w->n_running == 0 && w->n_waiting > 0) {
            if (rlx__sessions_release_pins(w, true)) return 1;
            rlx__seq_fail(w, w->waiting[0], RLX_ETOOLONG, "the request does not fit the KV cache");
        }
        return 0;
    }
    for (int32_t i = 0; i < n_seq; i++) {
        const rlx_mem_seq *ms = &w->b_seqptr[i]->mem;
        w->b_seqs[i] = (rlx_batch_seq){ms->blocks, ms->n_blocks, ms->slot};
    }
    rlx_batch b = {n_tok, w->b_tokens, w->b_pos, w->b_seq, w->b_out, n_out, n_seq, w->b_seqs, w->b_dec};
    rlx_error err = {0};
    bool aside = aside_begin(w, n_seq);
    int rc = rlx_runner_forward(rn, &b, &err);
    if (aside) aside_end(w);
    if (rc) {
        for (int32_t i = 0; i < n_seq; i++) rlx__seq_fail(w, w->b_seqptr[i], rc, err.msg);
        return 1;
    }
    /* account computed tokens (per sequence, in batch order), then sample */
    for (int32_t t = 0; t < n_tok; t++) w->b_seqptr[w->b_seq[t]]->n_computed++;
    float *scratch = w->sample_scratch;
    for (int32_t i = 0; i < n_seq; i++) {
        seq *s = w->b_seqptr[i];
        if (s->n_draft > 0) {
            rlx__spec_verify(w, s, scratch);
            continue;
        }
        rlx_memory_commit(&rn->mem, &s->mem, s->tokens, s->n_computed);
        take_checkpoint(w, s);
        if (s->plp_n) emit_prompt_logprobs(w, s, rn->logits);
        if (s->out_row >= 0) rlx__emit_token(w, s, rn->logits + (size_t)s->out_row * rn->n_vocab, scratch);
    }
    pthread_mutex_lock(&w->mu);
    w->stats.running = w->n_running;
    w->stats.waiting = w->n_waiting + w->n_inbox;
    w->stats.kv_usage = rlx_memory_usage(&rn->mem);
    w->stats.state_slots_used = rlx_memory_slots_used(&rn->mem);
    w->stats.state_slots_total = rlx_memory_slots_total(&rn->mem);
    rlx__ckpt_stats(w);
    pthread_mutex_unlock(&w->mu);
    return 1;
}
