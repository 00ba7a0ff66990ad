/* worker.c - one model worker: loads the model, owns a thread running the scheduler step loop,
 * and takes requests and cancellations from any thread through a mutex-guarded inbox. */
#ifdef RLX_HAVE_VULKAN
#include "backends/vulkan/vulkan.h"
#endif
#include "engine/pool.h"
#include "engine/session.h"
#include "engine/worker_internal.h"
#include "models/filemap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>

/* The tokenizer: from the cache when it holds this model's, else built from the GGUF (and
 * written to the cache). What the cache did goes to w->tok_cache for the load log. */
static int load_tokenizer(rlx_worker *w, const rlx_worker_config *cfg, rlx_error *err)
{
    snprintf(w->tok_cache, sizeof w->tok_cache, "off");
    if (!cfg->cache_dir || !cfg->cache_dir[0]) return rlx_tokenizer_from_gguf(&w->tok, w->runner->model->gguf, err);
    char path[4200];
    rlx_tokenizer_cache_path(cfg->cache_dir, cfg->model_path, path, sizeof path);
    rlx_tok_cache_status st;
    rlx_error cerr = {0};
    if (!rlx_tokenizer_cache_load(&w->tok, path, cfg->model_path, &st, &cerr)) {
        snprintf(w->tok_cache, sizeof w->tok_cache, "hit");
        return 0;
    }
    int rc = rlx_tokenizer_from_gguf(&w->tok, w->runner->model->gguf, err);
    if (rc) return rc;
    char why[300];
    snprintf(why, sizeof why, "%.280s", cerr.msg);
    const char *what = st == RLX_TOK_CACHE_STALE ? "stale" : st == RLX_TOK_CACHE_CORRUPT ? "corrupt" : "miss";
    rlx_error werr = {0};
    bool saved = !rlx_tokenizer_cache_save(w->tok, path, cfg->model_path, &werr);
    if (st == RLX_TOK_CACHE_MISS)
        snprintf(w->tok_cache, sizeof w->tok_cache, "miss, %s%.200s", saved ? "written" : "not written: ", saved ? "" : werr.msg);
    else
        snprintf(w->tok_cache, sizeof w->tok_cache, "%s (%.150s), rebuilt, %s%.100s", what, why,
                 saved ? "written" : "not written: ", saved ? "" : werr.msg);
    return 0;
}

/* The draft model and its step's job arrays (engine/draft.h); NULL ones are fine. */
static void close_draft(rlx_worker *w)
{
    rlx_draft_close(w->draft);
    free(w->djobs);
    free(w->djob_seq);
}

int rlx_worker_start(rlx_worker **out, const rlx_worker_config *cfg, rlx_error *err)
{
    rlx_worker *w = calloc(1, sizeof *w);
    if (!w) {
        rlx_backend_destroy(cfg->backend_impl);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    }
    w->cfg = *cfg;
    w->cfg.backend_impl = NULL; /* the runner's */
    if (w->cfg.max_seqs <= 0) w->cfg.max_seqs = 16;
    if (w->cfg.max_batch_tokens <= 0) w->cfg.max_batch_tokens = 512;
    if (w->cfg.draft_max == 0) w->cfg.draft_max = 8;
    if (w->cfg.draft_max > RLX_SPEC_MAX_DRAFT) w->cfg.draft_max = RLX_SPEC_MAX_DRAFT;
    if (w->cfg.max_queue <= 0) w->cfg.max_queue = 256;
    if (w->cfg.max_batch_tokens < w->cfg.max_seqs) w->cfg.max_batch_tokens = w->cfg.max_seqs;
    rlx_runner_config rc = {
        .model_path = cfg->model_path,
        .backend = {.name = cfg->backend, .n_threads = cfg->n_threads, .device = cfg->device, .cache_dir = cfg->cache_dir},
        .n_ctx = cfg->n_ctx,
        .kv_type = cfg->kv_type_set ? cfg->kv_type : RLX_F16,
        .kv_type_set = true,
        .kv_block = cfg->kv_block,
        .kv_mem_mib = cfg->kv_mem_mib,
        .kv_blocks = cfg->kv_blocks,
        .max_seqs = w->cfg.max_seqs,
        .max_batch_tokens = w->cfg.max_batch_tokens,
        /* room for a sequence's draft rows beside one row per sequence */
        .max_outputs = w->cfg.max_seqs + RLX_MAX(w->cfg.draft_max, 0),
        .backend_impl = cfg->backend_impl,
        .mem_layers = cfg->mem_layers,
    };
    int rc_ = rlx_runner_open(&w->runner, &rc, err);
    if (rc_) { free(w); return rc_; }
    w->cfg.max_batch_tokens = w->runner->max_batch_tokens; /* an embedding model's is its context */
    if (rlx_worker_pooling(w) == RLX_POOL_RANK && !w->runner->model->cfg.rank_head) {
        rc_ = rlx_errorf(err, RLX_EUNSUPPORTED, "%s: pooling rank needs a classifier head (cls.weight or cls.output.weight), "
                         "which the file lacks", cfg->model_path);
        rlx_runner_close(w->runner);
        free(w);
        return rc_;
    }
    if (cfg->draft_model && w->cfg.draft_max > 0) {
        if (rlx_worker_embeds(w) || w->runner->mem.has_state) {
            rc_ = rlx_errorf(err, RLX_EUNSUPPORTED, "%s: a draft model cannot serve it: %s", cfg->model_path,
                             rlx_worker_embeds(w) ? "an embedding model generates nothing"
                                                  : "its recurrent state cannot be rolled back past rejected drafts");
        } else {
            rlx_backend_config bc = {.name = cfg->backend, .n_threads = cfg->n_threads, .device = cfg->device};
            rc_ = rlx_draft_open(&w->draft, cfg->draft_model, w->runner, &bc, w->cfg.max_seqs, w->cfg.max_batch_tokens,
                                 cfg->draft_p_min > 0 ? cfg->draft_p_min : cfg->draft_p_min < 0 ? 0.0f : 0.75f, err);
            if (!rc_ && (!(w->djobs = calloc((size_t)w->cfg.max_seqs, sizeof *w->djobs)) ||
                         !(w->djob_seq = calloc((size_t)w->cfg.max_seqs, sizeof *w->djob_seq))))
                rc_ = rlx_errorf(err, RLX_ENOMEM, "out of memory opening the draft model");
        }
        if (rc_) {
            close_draft(w);
            rlx_runner_close(w->runner);
            free(w);
            return rc_;
        }
    }
    double t0 = rlx_now();
    if ((rc_ = load_tokenizer(w, cfg, err))) goto fail;
    w->t_tokenizer = rlx_now() - t0;
    t0 = rlx_now();
    rlx_gguf_str tsrc;
    if (cfg->chat_template_file) {
        size_t n = 0;
        rlx_error rerr = {0};
        /* a regular file only: a FIFO held the load for ever, /dev/zero filled the memory */
        if (rlx__read_file(cfg->chat_template_file, &w->tmpl_file, &n, &rerr)) {
            rc_ = rlx_errorf(err, RLX_EIO, "cannot read the chat template: %s", rerr.msg);
            goto fail;
        }
        w->tmpl_src = w->tmpl_file;
        w->tmpl_len = n;
        if ((rc_ = rlx_chat_template_parse(&w->tmpl, w->tmpl_file, n, err))) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            rlx_errorf(err, rc_, "%s: the chat template cannot be used: %s", cfg->chat_template_file, msg);
            goto fail;
        }
    } else if (rlx_gguf_get_str(w->runner->model->gguf, "tokenizer.chat_template", &tsrc, NULL) == 0) {
        w->tmpl_src = tsrc.ptr;
        w->tmpl_len = (size_t)tsrc.len;
        rlx_error te = {0};
        if (rlx_chat_template_parse(&w->tmpl, tsrc.ptr, (size_t)tsrc.len, &te)) {
            /* as llama-server: the model still serves (completions need no template), its chats
               in ChatML, said once here; --chat-template FILE gives the right one */
            fprintf(stderr, "rlxd: %s: its chat template cannot be used (%s); chat requests are rendered with "
                    "ChatML instead (give the model's template with --chat-template FILE)\n", cfg->model_path, te.msg);
            w->tmpl_src = NULL;
            w->tmpl_len = 0;
        }
    }
    /* no template in the file, or one that cannot be used */
    if (!w->tmpl && (rc_ = rlx_chat_template_parse(&w->tmpl, rlx_chatml_template, strlen(rlx_chatml_template), err)))
        goto fail;
    w->tmpl_object_args = rlx_chat_template_object_arguments(w->tmpl);
    w->t_template = rlx_now() - t0;
    if (cfg->name && *cfg->name) {
        snprintf(w->name, sizeof w->name, "%s", cfg->name);
    } else {
        const char *base = strrchr(cfg->model_path, '/');
        base = base ? base + 1 : cfg->model_path;
        snprintf(w->name, sizeof w->name, "%s", base);
        char *dot = strstr(w->name, ".gguf");
        if (dot && dot[5] == 0) *dot = 0;
    }
    {
        rlx_memory *m = &w->runner->mem;
        int64_t mib = cfg->state_cache_mib == 0 ? 256 : RLX_MAX(cfg->state_cache_mib, 0);
        int32_t B = rlx_memory_block_size(m);
        w->ckpt_every = cfg->state_ckpt_every > 0 ? cfg->state_ckpt_every : w->cfg.max_batch_tokens;
        w->ckpt_every = RLX_MAX(B, w->ckpt_every / B * B);
        if ((rc_ = rlx_memory_state_cache(m, (size_t)mib << 20, err))) goto fail;
        rlx__ckpt_stats(w);
    }
    if ((rc_ = rlx__sessions_open(w, err))) {
        rlx__sessions_close(w);
        goto fail;
    }
    int32_t T = w->cfg.max_batch_tokens, S = w->cfg.max_seqs;
    w->b_tokens = malloc((size_t)T * sizeof *w->b_tokens);
    w->b_pos = malloc((size_t)T * sizeof *w->b_pos);
    w->b_seq = malloc((size_t)T * sizeof *w->b_seq);
    w->b_out = malloc((size_t)T);
    w->b_dec = malloc((size_t)T);
    w->b_seqs = malloc((size_t)S * sizeof *w->b_seqs);
    w->b_seqptr = malloc((size_t)S * sizeof *w->b_seqptr);
    w->running = calloc((size_t)S, sizeof *w->running);
    w->sample_scratch = malloc((size_t)w->runner->n_vocab * sizeof *w->sample_scratch);
    if (rlx__embed_init(w, err) || !w->sample_scratch || !w->b_tokens || !w->b_pos || !w->b_seq || !w->b_out || !w->b_dec || !w->b_seqs || !w->b_seqptr ||
        !w->running) {
        rc_ = rlx_errorf(err, RLX_ENOMEM, "out of memory");
        rlx__sessions_close(w);
        goto fail;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    extern void *rlx__worker_main(void *);
    if (pthread_create(&w->thread, NULL, rlx__worker_main, w)) {
        rc_ = rlx_errorf(err, RLX_ENOMEM, "cannot start the worker thread");
        rlx__sessions_close(w);
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        goto fail;
    }
    *out = w;
    return 0;
fail:
    rlx_chat_template_free(w->tmpl);
    free(w->tmpl_file);
    rlx_tokenizer_free(w->tok);
    close_draft(w);
    rlx_runner_close(w->runner);
    free(w->b_tokens); free(w->b_pos); free(w->b_seq); free(w->b_out); free(w->b_dec); free(w->b_seqs); free(w->b_seqptr);
    free(w->running);
    free(w->sample_scratch);
    rlx__embed_free(w);
    free(w);
    return rc_;
}

struct timespec rlx__deadline(double secs)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double t = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + secs;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    return ts;
}

void *rlx__worker_main(void *arg)
{
    rlx_worker *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        if (!w->stop && w->n_inbox == 0 && !w->cancels && w->n_running == 0 && w->n_waiting == 0 && w->n_ejobs == 0 &&
            !w->gc_wanted) {
            /* idle: wake for the periodic session expiry (a step runs it) */
            struct timespec until = rlx__deadline(w->gc_interval);
            pthread_cond_timedwait(&w->cv, &w->mu, &until);
        }
        bool stop = w->stop, drain = w->drain;
        w->gc_wanted = false; /* the step below runs the session expiry and frees deleted ones */
        pthread_mutex_unlock(&w->mu);
        if (stop && !drain) break;
        int did = rlx__sched_step(w);
        if (stop && !did) {
            pthread_mutex_lock(&w->mu);
            bool empty = w->n_inbox == 0 && w->n_running == 0 && w->n_waiting == 0 && w->n_ejobs == 0;
            pthread_mutex_unlock(&w->mu);
            if (empty) break;
        }
    }
    /* cancel whatever is left (stop without drain) */
    pthread_mutex_lock(&w->mu);
    rlx_request **inbox = w->inbox;
    int32_t n_inbox = w->n_inbox;
    w->inbox = NULL;
    w->n_inbox = w->cap_inbox = 0;
    pthread_mutex_unlock(&w->mu);
    for (int32_t i = 0; i < n_inbox; i++) rlx__request_cancelled(w, inbox[i]);
    free(inbox);
    while (w->n_running > 0) rlx__seq_finish(w, w->running[w->n_running - 1], RLX_FINISH_CANCELLED);
    while (w->n_waiting > 0) rlx__seq_finish(w, w->waiting[w->n_waiting - 1], RLX_FINISH_CANCELLED);
    rlx__embed_reap(w, true);
    return NULL;
}

void rlx_worker_stop(rlx_worker *w, bool drain)
{
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    w->drain = drain;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    while (w->cancels) {
        cancel_node *c = w->cancels;
        w->cancels = c->next;
        free(c);
    }
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    rlx__sessions_close(w);
    rlx__grammar_vocab_free(w); /* reads the runner's n_vocab */
    free(w->marker);
    free(w->eog_bans);
    rlx_chat_template_free(w->tmpl);
    free(w->tmpl_file);
    rlx_tokenizer_free(w->tok);
    close_draft(w);
    rlx_runner_close(w->runner);
    free(w->waiting);
    free(w->running);
    free(w->sample_scratch);
    free(w->b_tokens); free(w->b_pos); free(w->b_seq); free(w->b_out); free(w->b_dec); free(w->b_seqs); free(w->b_seqptr);
    free(w->b_inflight);
    rlx__embed_free(w);
    free(w);
}

/* A logit_bias of -100 on every token (with ignore_eos: on every token but the end-of-generation
 * ones, which it bans) leaves nothing to sample: a 400, rather than token 0 every step. */
static int check_not_all_banned(const rlx_worker *w, const rlx_request *req, rlx_error *err)
{
    const rlx_sampling_params *p = &req->sampling;
    const int32_t V = w->runner->n_vocab;
    size_t n_ban = 0;
    for (size_t i = 0; i < p->n_logit_bias; i++) n_ban += p->logit_bias[i].bias <= -100.0f;
    if (n_ban + (req->ignore_eos ? 256u : 0u) < (size_t)V) return 0; /* cannot cover it (few EOG tokens) */
    uint8_t *seen = calloc((size_t)V, 1);
    if (!seen) return 0;
    int32_t left = V;
    for (size_t i = 0; i < p->n_logit_bias; i++) {
        const int32_t t = p->logit_bias[i].token;
        if (p->logit_bias[i].bias <= -100.0f && t >= 0 && t < V && !seen[t]) seen[t] = 1, left--;
    }
    for (int32_t t = 0; req->ignore_eos && left > 0 && t < V; t++)
        if (!seen[t] && rlx_tokenizer_is_eog(w->tok, t)) seen[t] = 1, left--;
    free(seen);
    if (left > 0) return 0;
    return rlx_errorf(err, RLX_EINVAL, req->ignore_eos ? "logit_bias bans every token but the end-of-generation ones, "
                      "which ignore_eos bans: nothing is left to sample" : "logit_bias bans every token of the vocabulary "
                      "(-100 on all): nothing is left to sample");
}

static int check_stops(const rlx_request *req, rlx_error *err)
{
    if (req->n_stop && !req->stop) return rlx_errorf(err, RLX_EINVAL, "the request counts stop strings but has none");
    for (size_t i = 0; i < req->n_stop; i++)
        if (!req->stop[i] || !req->stop[i][0]) return rlx_errorf(err, RLX_EINVAL, "stop strings must not be empty");
    return 0;
}

/* Can never fit (the admission rule, engine.h): prompt ids out of the vocabulary, or the prompt
 * (after the session's history, as far as it is known now) plus max_tokens beyond the context or
 * the whole KV pool. Decided here so that a streaming route answers 400 before its first byte. */
static int check_admit(rlx_worker *w, const rlx_request *req, rlx_error *err)
{
    rlx_admit_limits lim;
    rlx_worker_admit_limits(w, &lim);
    rlx_admit_query q = {.ids = req->prompt_ids, .n_prompt = req->prompt_ids ? req->n_prompt : 0,
                         .bound = req->prompt_ids ? RLX_ADMIT_EXACT : RLX_ADMIT_UNKNOWN, .max_tokens = req->max_tokens,
                         .scored = req->no_generation};
    q.n_history = req->session_id && !req->session_replace ? rlx__session_history(w, req->session_id) : 0;
    /* a turn after a history drops the BOS its tokenizing added (rlx__session_attach): counting it
       refused a turn that exactly fills the context */
    int32_t bos = rlx_tokenizer_bos(w->tok);
    if (q.n_history > 0 && req->bos_added && q.n_prompt > 1 && bos >= 0 && q.ids[0] == bos) {
        q.ids++;
        q.n_prompt--;
    }
    rlx_admit a;
    return rlx_admit_check(&lim, &q, &a) ? rlx_admit_error(&a, err) : 0;
}

int rlx_worker_submit(rlx_worker *w, rlx_request *req, rlx_error *err)
{
    int rc = 0;
    bool embeds = rlx_worker_embeds(w);
    if (!req->on_event) rc = rlx_errorf(err, RLX_EINVAL, "request has no event callback");
    else if (!req->prompt_ids || req->n_prompt == 0)
        rc = rlx_errorf(err, RLX_EINVAL, "the prompt is empty");
    else if (embeds != (req->kind == RLX_REQ_EMBED))
        rc = rlx_errorf(err, RLX_EINVAL, embeds ? "the model %s is an embedding model: it computes embeddings, not text"
                                                : "the model %s generates text: it computes no embeddings", w->name);
    else if (embeds) rc = rlx__embed_check(w, req, err);
    else if ((rc = check_stops(req, err))) {
    } else if (req->session_id && (rc = rlx_session_id_check(req->session_id, err))) {
    } else if (req->top_logprobs > RLX_MAX_TOP_LOGPROBS)
        rc = rlx_errorf(err, RLX_EINVAL, "top_logprobs must be at most %d", RLX_MAX_TOP_LOGPROBS);
    else if ((rc = rlx_sampling_params_validate(&req->sampling, w->runner->n_vocab, err))) {
    } else if ((rc = check_not_all_banned(w, req, err))) {
    }
    if (!rc && !embeds) rc = check_admit(w, req, err);
    /* a turn on a session another request holds (running, or submitted before it and not yet
       taken in) is refused here, so that a stream gets the 503 as its HTTP status instead of an
       error event after a 200 (attach still refuses what slips between the two) */
    if (rc) { rlx_request_free(req); return rc; }
    pthread_mutex_lock(&w->mu);
    /* under mu (then smu: the one order of the two), so that the session and the cancels are
       seen at one moment: intake lets go of a cancelled turn's session before it drops the
       cancel from the list */
    uint64_t holder = 0;
    bool held = req->session_id && rlx__session_busy(w, req->session_id, &holder);
    /* ... unless that request is being cancelled (its client hung up, and this is the client's
       next turn): the worker applies cancels before it takes in new requests (sched.c intake),
       so the session is free by then (it was a 503 "busy" for about a step) */
    for (const cancel_node *c = w->cancels; held && c; c = c->next) held = c->id != holder;
    for (int32_t i = 0; !held && req->session_id && i < w->n_inbox; i++)
        held = w->inbox[i]->session_id && !strcmp(w->inbox[i]->session_id, req->session_id);
    if (held) rc = rlx_errorf(err, RLX_EFULL, "session '%s' is busy with another request; retry when it finishes", req->session_id);
    else if (w->stop) rc = rlx_errorf(err, RLX_EFULL, "the server is shutting down");
    else if (w->queued - (embeds ? 0 : RLX_MAX(w->cfg.max_seqs - w->stats.running, 0)) >= w->cfg.max_queue)
        /* --max-queue bounds the requests that wait: those a free sequence slot takes at the next
           step do not count (a burst of max_seqs + max_queue into an idle model was refused) */
        rc = rlx_errorf(err, RLX_EFULL, "too many requests are waiting (%d); retry later", w->cfg.max_queue);
    else if (w->n_inbox == w->cap_inbox) {
        int32_t nc = w->cap_inbox ? w->cap_inbox * 2 : 16;
        rlx_request **n = realloc(w->inbox, (size_t)nc * sizeof *n);
        if (!n) rc = rlx_errorf(err, RLX_ENOMEM, "out of memory");
        else { w->inbox = n; w->cap_inbox = nc; }
    }
    if (!rc) {
        req->submitted_at = rlx_now();
        w->inbox[w->n_inbox++] = req;
        w->queued++;
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    if (rc) rlx_request_free(req);
    return rc;
}

void rlx_worker_cancel(rlx_worker *w, uint64_t request_id)
{
    cancel_node *c = malloc(sizeof *c);
    if (!c) return;
    c->id = request_id;
    pthread_mutex_lock(&w->mu);
    c->next = w->cancels;
    w->cancels = c;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

const char *rlx_worker_name(const rlx_worker *w) { return w->name; }
const rlx_tokenizer *rlx_worker_tokenizer(const rlx_worker *w) { return w->tok; }
const rlx_chat_template *rlx_worker_chat_template(const rlx_worker *w) { return w->tmpl; }
bool rlx_worker_chat_object_arguments(const rlx_worker *w) { return w->tmpl_object_args; }
const char *rlx_worker_chat_template_src(const rlx_worker *w, size_t *len)
{
    *len = w->tmpl_len;
    return w->tmpl_src;
}
int32_t rlx_worker_n_ctx(const rlx_worker *w) { return w->runner->n_ctx; }

bool rlx_worker_file_changed(const rlx_worker *w, char *why, size_t cap)
{
    return rlx_runner_file_changed(w->runner, why, cap) || (w->draft && rlx_draft_file_changed(w->draft, why, cap));
}

int rlx_worker_set_marker_tokens(rlx_worker *w, const char *const *texts, int n)
{
    int32_t V = w->runner->n_vocab;
    int marked = 0;
    for (int32_t t = 0; t < V && n > 0; t++) {
        char buf[64];
        if (rlx_tokenizer_is_eog(w->tok, t) || rlx_token_to_bytes(w->tok, t, false, buf, sizeof buf)) continue;
        size_t len = rlx_token_to_bytes(w->tok, t, true, buf, sizeof buf); /* a control token's text */
        if (!len || len >= sizeof buf) continue;
        for (int i = 0; i < n; i++) {
            if (strlen(texts[i]) != len || memcmp(texts[i], buf, len)) continue;
            if (!w->marker && !(w->marker = calloc((size_t)V, 1))) return RLX_ENOMEM;
            w->marker[t] = 1;
            marked++;
            break;
        }
    }
    return marked;
}
bool rlx_worker_embeds(const rlx_worker *w) { return w->runner->graph.output_kind == RLX_OUTPUT_HIDDEN; }
int rlx_worker_pooling(const rlx_worker *w)
{
    if (!rlx_worker_embeds(w)) return -1;
    return w->runner->model->cfg.pooling_type < 0 ? 0 : w->runner->model->cfg.pooling_type;
}
int32_t rlx_worker_n_embd(const rlx_worker *w) { return (int32_t)w->runner->out_cols; }

void rlx_worker_admit_limits(const rlx_worker *w, rlx_admit_limits *lim)
{
    const rlx_runner *rn = w->runner;
    *lim = (rlx_admit_limits){.n_ctx = rn->n_ctx, .n_vocab = rn->n_vocab,
                              .kv_tokens = rlx_memory_capacity(&rn->mem)};
}

void rlx_worker_kv_layout(const rlx_worker *w, int *type, int32_t *block_size, int32_t *n_blocks)
{
    if (type) *type = w->runner->kv_geo.type;
    if (block_size) *block_size = w->runner->kv_geo.block_size;
    if (n_blocks) *n_blocks = w->runner->kv_geo.n_blocks;
}

void rlx_worker_memory(const rlx_worker *w, size_t *weights, size_t *kv)
{
    const rlx_mem_desc *d = &w->runner->kv_geo;
    if (weights) *weights = w->runner->weight_bytes;
    const rlx_ckpt_cache *c = &w->runner->mem.ckpt; /* at most its budget, once filled */
    if (kv)
        *kv = rlx_mem_block_bytes(d) * (size_t)d->n_blocks + rlx_mem_slot_bytes(d) * (size_t)d->n_state_slots +
              (size_t)c->max_entries * c->entry_bytes;
    size_t dw = 0, dk = 0;
    rlx_draft_memory(w->draft, &dw, &dk);
    if (weights) *weights += dw;
    if (kv) *kv += dk;
}

size_t rlx_worker_packed_bytes(const rlx_worker *w) { return rlx_backend_cpu_packed_bytes(w->runner->backend); }

const char *rlx_worker_draft_model(const rlx_worker *w) { return w->draft ? w->cfg.draft_model : NULL; }

void rlx_worker_load_times(const rlx_worker *w, rlx_load_times *t)
{
    const rlx_runner *r = w->runner;
    *t = (rlx_load_times){.map = r->t_map, .build = r->t_build, .compile = r->t_compile, .prepare = r->t_prepare,
                          .memory = r->t_memory, .tokenizer = w->t_tokenizer, .chat_template = w->t_template};
    snprintf(t->tokenizer_cache, sizeof t->tokenizer_cache, "%s", w->tok_cache);
#ifdef RLX_HAVE_VULKAN
    rlx_vk_stats vs;
    if (!rlx_vk_get_stats(r->backend, &vs))
        snprintf(t->pipeline_cache, sizeof t->pipeline_cache, "%s, %llu bytes read, %llu written",
                 rlx_vk_pcache_state_name(vs.pipeline_cache), (unsigned long long)vs.pipeline_cache_loaded_bytes,
                 (unsigned long long)vs.pipeline_cache_saved_bytes);
#endif
}

void rlx_worker_get_stats(rlx_worker *w, rlx_worker_stats *st)
{
    pthread_mutex_lock(&w->mu);
    *st = w->stats;
    pthread_mutex_unlock(&w->mu);
    rlx_backend_cpu_passes(w->runner->backend, &st->cpu_passes_one, &st->cpu_passes_more);
}
