/* seq_prepare.c - a request becomes a sequence (worker thread, at admission): its tokens (a
 * session's history first), its sampler (the request's bias, ignore_eos's bans of the
 * end-of-generation tokens, a grammar compiled against the vocabulary as the grammar sees it,
 * built once per worker), its stop strings, and the prompt length that fixes each position's
 * arithmetic for the prefix cache (memory.h). Split from sched.c, which admits and steps. */
#include "engine/worker_internal.h"
#include "backends/cpu/threadpool.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The vocabulary as the grammar sees it: each token's bytes, control tokens none (they can
 * never continue a grammar; end-of-generation is decided apart) except the format's markers
 * (w->marker: their text, as the output writes them). Built once per worker. */
static int grammar_vocab(rlx_worker *w, rlx_error *err)
{
    if (w->gvocab) return 0;
    int32_t V = w->runner->n_vocab;
    if (!w->gtext) {
        int rc = rlx_grammar_token_bytes(w->tok, V, &w->gtext, &w->glen, err);
        if (rc) return rc;
        for (int32_t t = 0; w->marker && t < V; t++) { /* marker control tokens: their text */
            char buf[64];
            size_t n = w->marker[t] ? rlx_token_to_bytes(w->tok, t, true, buf, sizeof buf) : 0;
            if (!n || n > sizeof buf) continue;
            char *p = malloc(n);
            if (!p) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
            memcpy(p, buf, n);
            free(w->gtext[t]);
            w->gtext[t] = p;
            w->glen[t] = n;
        }
    }
    if (!w->gmask && !(w->gmask = malloc((size_t)V))) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    if (!w->gcache && !(w->gcache = rlx_grammar_cache_new(V, RLX_GRAMMAR_CACHE_ENTRIES)))
        return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    w->gvocab = rlx_grammar_vocab_new(V, (const char *const *)w->gtext, w->glen);
    if (w->gvocab && rlx_grammar_vocab_set_eog(w->gvocab, rlx_grammar_tokenizer_is_eog, w->tok)) { /* what !<..> never allows */
        rlx_grammar_vocab_free(w->gvocab);
        w->gvocab = NULL;
    }
    if (!w->gvocab) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    /* the helper beside the forward pass, where the backend allows it (gaside.h); without it
     * (or when it cannot start) the walks go on in slices between steps */
    int n_cpus = rlx_cpu_count(), threads = w->cfg.n_threads > 0 ? w->cfg.n_threads : n_cpus;
    if (!w->gaside && rlx__gaside_wanted(w->cfg.grammar_aside, w->cfg.backend, threads, n_cpus) &&
        (w->gaside_samplers = calloc((size_t)w->cfg.max_seqs, sizeof *w->gaside_samplers)))
        w->gaside = rlx__gaside_new();
    return 0;
}

void rlx__grammar_vocab_free(rlx_worker *w)
{
    rlx__gaside_free(w->gaside); /* idle here: it works only inside a step */
    w->gaside = NULL;
    free(w->gaside_samplers);
    w->gaside_samplers = NULL;
    rlx_grammar_vocab_free(w->gvocab);
    rlx_grammar_token_bytes_free(w->gtext, w->glen, w->gtext ? w->runner->n_vocab : 0);
    free(w->gmask);
    rlx_grammar_cache_free(w->gcache);
    w->gcache = NULL;
    w->gvocab = NULL;
    w->gtext = NULL;
    w->glen = NULL;
    w->gmask = NULL;
}

/* The request's grammar as a constraint stage of the sequence's sampler chain. */
static int grammar_prepare(rlx_worker *w, seq *s, const rlx_sampler_stage **stage, rlx_error *err)
{
    int rc = grammar_vocab(w, err);
    if (rc) return rc;
    const char *src = s->req->grammar;
    rlx_error gerr = {0};
    rlx_grammar_token_ids ids = rlx_grammar_tokenizer_ids(w->tok, w->runner->n_vocab); /* token references: <text> */
    rlx_grammar *g = rlx_grammar_compile_ids(src, strlen(src), NULL, &ids, &gerr);
    if (g) { /* the per-position tables its masks will ask for, built ahead - once per grammar content
              * per worker: with the helper (gaside.h) beside each forward pass and nothing now,
              * RLX_GRAMMAR_PREPARE_ASIDE_MS in all, else RLX_GRAMMAR_PREPARE_MS, a slice now and one per step after
              * (rlx__sched_step) so that other sequences are not held up for the whole walk -
              * rather than one at a time at its first steps; best effort: what is not built ahead
              * (or fails) is built when a mask needs it */
        rlx_grammar_state *gs = rlx_grammar_state_new(g, NULL);
        if (gs)
            rlx_grammar_cache_prepare(w->gcache, gs, w->gvocab, RLX_GRAMMAR_PREPARE_TABLES,
                                      RLX_GRAMMAR_PREPARE_BUDGET_MS(w->gaside != NULL),
                                      w->gaside ? -1 : RLX_GRAMMAR_PREPARE_SLICE_MS);
        rlx_grammar_state_free(gs);
    }
    rlx_grammar_tokens toks = {.vocab = w->gvocab, .texts = (const char *const *)w->gtext, .lens = w->glen,
                               .mask = w->gmask, .is_eog = rlx_grammar_tokenizer_is_eog, .eog_ctx = w->tok, .cache = w->gcache};
    rlx_sampler_stage *st = g ? rlx_grammar_stage_new_lazy(g, &toks, (const char *const *)s->req->grammar_triggers,
                                                           s->req->n_grammar_triggers,
                                                           s->req->grammar_trigger_pattern, &gerr)
                              : NULL;
    if (!st) return rlx_errorf(err, gerr.code ? gerr.code : RLX_EINVAL, "%s", gerr.msg);
    if ((rc = rlx_sampler_add_stage(s->sampler, st))) return rlx_errorf(err, rc, "out of memory");
    *stage = st;
    return 0;
}

/* The worker's end-of-generation tokens as bans (made once); how many (0: none, or no memory). */
static size_t eog_bans(rlx_worker *w)
{
    if (w->eog_bans) return w->n_eog_bans;
    int32_t V = w->runner->n_vocab;
    size_t n = 0;
    for (int32_t t = 0; t < V; t++) n += rlx_tokenizer_is_eog(w->tok, t);
    if (!n || !(w->eog_bans = malloc(n * sizeof *w->eog_bans))) return 0;
    for (int32_t t = 0; t < V; t++)
        if (rlx_tokenizer_is_eog(w->tok, t)) w->eog_bans[w->n_eog_bans++] = (rlx_logit_bias){t, -100.0f};
    return w->n_eog_bans;
}

int rlx__seq_prepare(rlx_worker *w, seq *s, rlx_error *err)
{
    rlx_request *r = s->req;
    rlx_runner *rn = w->runner;
    int32_t *ids = r->prompt_ids;
    size_t n = r->n_prompt;
    int rc;
    bool drop_bos = r->bos_added;
    if (r->session_id && (rc = rlx__session_attach(w, s, &ids, &n, drop_bos, err))) {
        if (ids != r->prompt_ids) free(ids);
        return rc;
    }
    /* the admission rule again, now that the history (read from the store, perhaps) is attached */
    rlx_admit_limits lim;
    rlx_worker_admit_limits(w, &lim);
    lim.n_vocab = 0; /* ids: checked at submit, or the tokenizer's own */
    rlx_admit_query q = {.n_prompt = n - (size_t)s->n_history, .bound = RLX_ADMIT_EXACT, .n_history = s->n_history,
                         .max_tokens = r->max_tokens, .scored = r->no_generation};
    rlx_admit a;
    if (rlx_admit_check(&lim, &q, &a)) {
        rc = rlx_admit_error(&a, err);
        if (ids != r->prompt_ids) free(ids);
        return rc;
    }
    int64_t room = RLX_MIN((int64_t)rn->n_ctx, rlx_memory_capacity(&rn->mem)) - (int64_t)n;
    int64_t want = r->max_tokens > 0 ? r->max_tokens : room;
    s->max_tokens = (int32_t)want;
    s->cap_tokens = (int32_t)n + s->max_tokens + 1;
    s->tokens = malloc((size_t)s->cap_tokens * sizeof *s->tokens);
    s->text_cap = 4096;
    s->text = malloc(s->text_cap);
    /* ignore_eos bans the end-of-generation tokens, as llama-server does (a logit bias of -inf):
       the text goes on without them (they were sampled and skipped, counted in usage but not in
       the text or the logprobs) */
    rlx_sampling_params sp = r->sampling;
    const size_t n_bans = r->ignore_eos ? eog_bans(w) : 0;
    rlx_logit_bias *bias = n_bans ? malloc((sp.n_logit_bias + n_bans) * sizeof *bias) : NULL;
    if (bias) {
        if (sp.n_logit_bias) memcpy(bias, sp.logit_bias, sp.n_logit_bias * sizeof *bias);
        memcpy(bias + sp.n_logit_bias, w->eog_bans, n_bans * sizeof *bias);
        sp.logit_bias = bias;
        sp.n_logit_bias += n_bans;
    }
    s->sampler = n_bans && !bias ? NULL : rlx_sampler_new(&sp, rn->n_vocab); /* NULL: out of memory below */
    free(bias);
    if (!s->tokens || !s->text || !s->sampler || rlx_mem_seq_reserve(&rn->mem, &s->mem, s->cap_tokens)) {
        if (ids != r->prompt_ids) free(ids);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    }
    if ((rc = rlx_stop_init(&s->stop, r->stop, r->n_stop, err))) {
        if (ids != r->prompt_ids) free(ids);
        return rc;
    }
    const rlx_sampler_stage *gstage = NULL;
    if (r->grammar && (rc = grammar_prepare(w, s, &gstage, err))) {
        if (ids != r->prompt_ids) free(ids);
        s->grammar_fault = rc != RLX_ENOMEM;
        return rc;
    }
    if (r->grammar && r->json_keys_unique) { /* after the grammar's stage: its mask comes first */
        rlx_sampler_stage *js = rlx_json_keys_stage_new((const char *const *)w->gtext, w->glen, rn->n_vocab, gstage);
        if (!js || rlx_sampler_add_stage(s->sampler, js)) {
            if (ids != r->prompt_ids) free(ids);
            return rlx_errorf(err, RLX_ENOMEM, "out of memory");
        }
    }
    memcpy(s->tokens, ids, n * sizeof *ids);
    if (ids != r->prompt_ids) free(ids);
    s->n_tokens = s->n_prompt = (int32_t)n;
    s->mem.n_prompt = s->n_prompt; /* which blocks' arithmetic a later prompt can reuse (memory.h) */
    s->plp_next = 1;
    for (size_t i = 0; i < n; i++) rlx_sampler_accept(s->sampler, s->tokens[i], false);
    s->out_row = -1;
    return 0;
}

