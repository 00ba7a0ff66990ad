/* jobs.c - one API request in flight: its engine requests (one per choice), the hand-over of
 * engine events from worker threads to the loop, and the bookkeeping of its choices (usage,
 * finish; their text, logprob entries and tool-call parsers grow in choice.c). The bytes of the response are its sink's (rlx_sink_ops:
 * sink_http.c, stdio.c): the job tells the sink when a stream begins, each piece, each choice's
 * end and the end, and the sink formats them into the job's output queue. Stop strings are
 * matched by the engine, which holds back text that may begin one and sends nothing of it. */
#include "server/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- event queue: worker threads -> loop ------------------------------------------------ */

/* Runs on the thread delivering the event. Out of memory a token is lost, never the final
 * event (its entry was allocated at submit): the loss is recorded and fails the job there. */
static void on_engine_event(void *user, const rlx_event *ev)
{
    rlx_choice *ch = user;
    rlx_srv *s = ch->job->srv;
    bool final = ev->type == RLX_EV_DONE || ev->type == RLX_EV_ERROR;
    rlx_qevent *q = final && ch->final_ev ? ch->final_ev : calloc(1, sizeof *q);
    if (final) ch->final_ev = NULL;
    if (!q) {
        ch->ev_lost = true;
        return;
    }
    q->choice = ch;
    q->ev = *ev;
    if (ev->text && ev->text_len) {
        q->text = malloc(ev->text_len + 1);
        if (q->text) {
            memcpy(q->text, ev->text, ev->text_len);
            q->text[ev->text_len] = 0;
        } else {
            ch->ev_lost = true;
        }
    }
    q->ev.text = q->text;
    q->ev.text_len = q->text ? ev->text_len : 0;
    if (ev->embd) { /* an embedding request's vectors */
        q->embd = malloc((ev->embd_n ? ev->embd_n : 1) * sizeof *q->embd);
        q->embd_tokens = malloc((ev->n_inputs ? ev->n_inputs : 1) * sizeof *q->embd_tokens);
        if (q->embd && q->embd_tokens) {
            memcpy(q->embd, ev->embd, ev->embd_n * sizeof *q->embd);
            memcpy(q->embd_tokens, ev->embd_tokens, ev->n_inputs * sizeof *q->embd_tokens);
        } else {
            ch->ev_lost = true;
        }
    }
    q->ev.embd = q->embd;
    q->ev.embd_tokens = q->embd_tokens;
    if (ev->error_msg) q->msg = strdup(ev->error_msg); /* NULL: handle_event says something generic */
    q->ev.error_msg = q->msg;
    q->lost = final && ch->ev_lost;
    uv_mutex_lock(&s->qlock);
    if (s->qtail) s->qtail->next = q;
    else s->qhead = q;
    s->qtail = q;
    uv_mutex_unlock(&s->qlock);
    uv_async_send(&s->async);
}

static void handle_event(rlx_qevent *q);
static void started(rlx_job *j);

static void on_async(uv_async_t *a)
{
    rlx_srv *s = a->data;
    uv_mutex_lock(&s->qlock);
    rlx_qevent *q = s->qhead;
    s->qhead = s->qtail = NULL;
    uv_mutex_unlock(&s->qlock);
    while (q) {
        rlx_qevent *next = q->next;
        handle_event(q);
        free(q->text);
        free(q->msg);
        free(q->embd);
        free(q->embd_tokens);
        free(q);
        q = next;
    }
    if (s->front && s->front->kick) s->front->kick(s);
    rlx_srv_maybe_exit(s);
}

int rlx_srv_queue_init(rlx_srv *s)
{
    s->async.data = s;
    if (uv_mutex_init(&s->qlock)) return RLX_ENOMEM;
    return uv_async_init(s->loop, &s->async, on_async) ? RLX_EIO : 0;
}

/* ---- models ------------------------------------------------------------------------------ */

int rlx_render_chat(rlx_model_slot *m, const rlx_api_request *r, char **out, rlx_api_error *e)
{
    cJSON *ctx = rlx_api_chat_context(r, m->bos, m->eos, rlx_worker_chat_object_arguments(m->w));
    size_t tlen = 0;
    const char *tsrc = rlx_worker_chat_template_src(m->w, &tlen);
    if (ctx && (rlx_api_chat_format_vars(ctx, r, m->tc.format, time(NULL)) || rlx_api_chat_roles(ctx, tsrc, tlen))) {
        cJSON_Delete(ctx);
        ctx = NULL;
    }
    if (!ctx) return rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
    rlx_error err = {0};
    size_t out_len = 0;
    int rc = rlx_chat_template_render_len(rlx_worker_chat_template(m->w), ctx, NULL, out, &out_len, &err);
    cJSON_Delete(ctx);
    if (rc) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "messages", "The chat template failed: %s", err.msg);
    if (strlen(*out) != out_len) { /* the prompt is a C string from here on: a NUL would cut it */
        free(*out);
        *out = NULL;
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "messages", "The rendered prompt holds a NUL character (\\u0000).");
    }
    if ((rc = rlx_api_continue_final(r, *out, e))) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

/* ---- output helpers ------------------------------------------------------------------------ */


/* Out of memory, part of the answer is lost: the job fails (500) and stops generating. */
void rlx__job_oom(rlx_job *j)
{
    if (!j->failed) {
        j->failed = true;
        rlx_api_errorf(&j->err, 500, RLX_API_ERR_SERVER, NULL, "Out of memory: the response could not be completed.");
    }
    rlx__job_cancel_open(j);
}

/* Appends whole or not at all; once bytes were lost nothing more is added (the client must
 * not get a stream with a gap: finish_job replaces a whole answer by an error, a stream ends
 * with an error). */
void rlx_job_out_put(rlx_job *j, const char *s, size_t n)
{
    if (j->out_lost) return;
    if (j->len + n + 1 > j->cap) {
        size_t nc = j->cap ? j->cap : 1024;
        while (nc < j->len + n + 1) nc *= 2;
        char *nb = realloc(j->out, nc);
        if (!nb) {
            j->out_lost = true;
            rlx__job_oom(j);
            return;
        }
        j->out = nb;
        j->cap = nc;
    }
    memcpy(j->out + j->len, s, n);
    j->len += n;
    j->out[j->len] = 0;
}

/* s: a formatter's malloc'ed output; NULL means it ran out of memory, so the piece is lost. */
void rlx_job_out_take(rlx_job *j, char *s)
{
    if (s) {
        rlx_job_out_put(j, s, strlen(s));
    } else if (!j->out_lost) {
        j->out_lost = true;
        rlx__job_oom(j);
    }
    free(s);
}

static void notify(rlx_job *j)
{
    if (j->sink) j->ops->notify(j);
}

/* ---- job lifecycle -------------------------------------------------------------------------- */

static void job_free(rlx_job *j)
{
    rlx_srv *s = j->srv;
    if (j->prev) j->prev->next = j->next;
    else if (s->jobs == j) s->jobs = j->next;
    if (j->next) j->next->prev = j->prev;
    s->n_jobs--;
    for (size_t i = 0; i < j->n_choices; i++) {
        rlx_choice *ch = &j->choices[i];
        free(ch->text);
        free(ch->tokens);
        for (size_t k = 0; k < ch->n_lps; k++) rlx_api_logprob_clear(&ch->lps[k]);
        free(ch->lps);
        free(ch->final_ev); /* still ours when the choice was never submitted */
        rlx_tc_parser_free(ch->tc);
        rlx_api_tool_out_free(&ch->tout);
    }
    free(j->choices);
    for (size_t i = 0; j->echo && i < j->req.n_prompts; i++) free(j->echo[i]);
    free(j->echo);
    free(j->chat_ids);
    free(j->prompt_tail);
    free(j->embd);
    free(j->embd_tokens);
    rlx_api_request_free(&j->req);
    free(j->out);
    rlx_srv_model_release(j->model);
    free(j);
}

void rlx__job_cancel_open(rlx_job *j)
{
    for (size_t i = 0; i < j->n_choices; i++)
        if (j->choices[i].submitted && !j->choices[i].final) rlx_worker_cancel(j->model->w, j->choices[i].req_id);
}

static void maybe_free(rlx_job *j)
{
    if (!j->sink && !j->preparing && j->n_final == j->n_submitted) job_free(j);
}

void rlx_job_detach(rlx_job *j)
{
    j->sink = NULL;
    rlx_call_drop(&j->prep); /* its done frees the job */
    if (j->n_final < j->n_submitted) {
        j->client_gone = true;
        j->srv->metrics.cancelled++;
        rlx__job_cancel_open(j);
    }
    maybe_free(j);
}

void rlx_srv_cancel_all(rlx_srv *s)
{
    for (rlx_job *j = s->jobs; j; j = j->next) rlx__job_cancel_open(j);
}

/* The end of the response, in the sink's format. */
static void write_final(rlx_job *j)
{
    if (j->failed) j->ops->fail(j);
    else j->ops->finish(j);
}

static void finish_job(rlx_job *j)
{
    rlx_srv *s = j->srv;
    for (size_t i = 0; i < j->n_choices; i++) {
        const rlx_choice *ch = &j->choices[i];
        if (!ch->submitted) continue;
        /* a prompt counts once however many choices it has (as OpenAI and vLLM count it) */
        if (i % (size_t)j->req.n == 0) {
            j->total.prompt_tokens += ch->usage.prompt_tokens;
            j->total.cached_tokens += ch->usage.cached_tokens;
        }
        j->total.completion_tokens += ch->usage.completion_tokens;
        s->metrics.prompt_tokens += (uint64_t)RLX_MAX(ch->usage.prompt_tokens, 0);
        s->metrics.generation_tokens += (uint64_t)RLX_MAX(ch->usage.completion_tokens, 0);
        if (ch->usage.completion_tokens > 0) {
            rlx_histogram_observe(&s->metrics.ttft, ch->timings.ttft_s);
            if (ch->usage.completion_tokens > 1)
                rlx_histogram_observe(&s->metrics.itl, ch->timings.gen_s / (ch->usage.completion_tokens - 1));
        }
        rlx_histogram_observe(&s->metrics.e2e, ch->timings.total_s);
    }
    if (j->client_gone) {
        j->finished = true;
        return;
    }
    write_final(j);
    if (j->out_lost && j->ops->whole(j)) {
        /* the whole answer (or line) did not fit: an error replaces it */
        rlx__job_oom(j);
        j->off = j->len = 0;
        j->out_lost = false;
        write_final(j);
    }
    j->finished = true;
}

void rlx_job_log_tokens(const rlx_job *j, int32_t *prompt, int32_t *completion)
{
    if (j->finished && !j->aborted) {
        *prompt = j->total.prompt_tokens;
        *completion = j->total.completion_tokens;
        return;
    }
    *prompt = j->prompt_tokens;
    *completion = 0;
    for (size_t i = 0; i < j->n_choices; i++) *completion += (int32_t)j->choices[i].n_tokens;
}

rlx_api_choice *rlx_job_api_choices(const rlx_job *j)
{
    rlx_api_choice *cs = calloc(j->n_choices ? j->n_choices : 1, sizeof *cs);
    for (size_t i = 0; cs && i < j->n_choices; i++) {
        const rlx_choice *ch = &j->choices[i];
        cs[i] = (rlx_api_choice){.index = ch->index, .text = ch->text, .text_len = ch->len, .tokens = ch->tokens,
                                 .n_tokens = ch->n_tokens, .logprobs = j->req.logprobs >= 0 ? ch->lps : NULL,
                                 .n_logprobs = ch->n_lps, .finish = ch->finish, .tools = ch->tc ? &ch->tout : NULL,
                                 .calls_cut = ch->calls_cut};
    }
    return cs;
}

/* q's owned buffers stay q's unless taken (the vectors of an embedding request). */
static void handle_event(rlx_qevent *q)
{
    rlx_choice *ch = q->choice;
    const rlx_event *ev = &q->ev;
    bool lost = q->lost;
    rlx_job *j = ch->job;
    if (ch->final) return;
    if (j->defer_start && (ev->type == RLX_EV_TOKEN || ev->type == RLX_EV_DONE) && !j->failed) {
        j->defer_start = false; /* output comes: the stream begins (an error first stays a plain error) */
        started(j);
    }
    if (ev->type == RLX_EV_PROMPT_TOKEN) { /* echo with logprobs: sent with the echoed prompt */
        if (rlx__choice_add_logprob(j, ch, ev->token, ev, &ch->prompt_lp_offset)) ch->n_prompt_lps++;
        return;
    }
    if (ev->type == RLX_EV_TOKEN) {
        rlx__choice_token(j, ch, ev);
    } else {
        ch->final = true;
        j->n_final++;
        if (lost && ev->type != RLX_EV_ERROR) {
            rlx__job_oom(j); /* a token (or the final text) never reached us */
        } else if (ev->type == RLX_EV_ERROR) {
            if (!j->failed) {
                j->failed = true;
                rlx_api_error_from_rlx(&j->err, ev->error_code, ev->error_msg ? ev->error_msg : "generation failed");
                if (ev->error_in_grammar && j->req.grammar_param) /* the field the grammar came from */
                    snprintf(j->err.param, sizeof j->err.param, "%s", j->req.grammar_param);
            }
            rlx__job_cancel_open(j);
        } else {
            ch->usage = ev->usage;
            ch->timings = ev->timings;
            ch->finish = ev->finish;
            ch->stop_string = ev->stop_string;
            if (ev->embd && !j->embd) { /* the job takes the vectors */
                j->embd = q->embd;
                j->embd_tokens = q->embd_tokens;
                q->embd = NULL;
                q->embd_tokens = NULL;
                j->embd_n = ev->embd_n;
                j->embd_dim = ev->embd_dim;
                j->embd_inputs = ev->n_inputs;
            } else if (rlx_api_kind_embeds(j->req.kind) && ev->finish != RLX_FINISH_CANCELLED && !j->failed) {
                rlx__job_oom(j); /* the vectors never reached us */
            }
            const char *out = ev->text ? ev->text : "";
            size_t n = ev->text_len;
            rlx__choice_text_append(ch, out, n);
            size_t from = 0, k = rlx__choice_lps_released(ch, true, &from);
            if (ch->tc) { /* the parser's chunks take the entries released; the last chunk the rest */
                rlx__choice_tc_feed(ch, out, n);
                rlx__choice_tc_finish(j, ch);
                n = 0;
                from = ch->lp_held;
                k = ch->lp_sent - ch->lp_held;
            }
            if (j->req.stream && !j->client_gone && !j->failed && j->ops->choice_end)
                j->ops->choice_end(j, ch, out, n, ch->lps + from, k);
        }
    }
    if (j->n_final == j->n_submitted && !j->finished) finish_job(j);
    if (j->sink) {
        notify(j); /* the sink may detach, and so free j, in here */
        return;
    }
    maybe_free(j);
}

/* The admission checks that need no prompt tokens: max_tokens against the context, logit_bias
 * keys against the vocabulary (prompts are checked on the threadpool, see prepare.c). */
static int check_params(const rlx_api_request *r, const rlx_model_slot *m, rlx_api_error *e)
{
    rlx_admit_limits lim = {.n_ctx = m->w ? rlx_worker_n_ctx(m->w) : 0, .n_vocab = m->n_vocab};
    rlx_admit_query q = {.bound = RLX_ADMIT_UNKNOWN, .max_tokens = r->base->max_tokens,
                         .bias = r->base->sampling.logit_bias, .n_bias = r->base->sampling.n_logit_bias};
    rlx_admit a;
    if (!rlx_admit_check(&lim, &q, &a)) return 0;
    return rlx_api_error_from_admit(e, &a, "prompt", r->max_tokens_param);
}

/* Submits one engine request (token ids) per choice; on failure cancels those already
 * submitted. The engine's synchronous refusals (context, capacity, full queue) come back here. */
static int submit_all(rlx_job *j, rlx_api_error *e)
{
    rlx_model_slot *m = j->model;
    bool chat = j->req.messages != NULL;
    for (size_t i = 0; i < j->n_choices; i++) {
        rlx_choice *ch = &j->choices[i];
        size_t pi = chat ? 0 : i / (size_t)j->req.n;
        bool embeds = rlx_api_kind_embeds(j->req.kind);
        const int32_t *ids = chat ? j->chat_ids : j->req.prompts[pi].ids;
        size_t n_ids = chat ? j->n_chat_ids : j->req.prompts[pi].n_ids;
        rlx_error err = {0};
        ch->req_id = ++j->srv->next_id;
        if (!ch->final_ev && !(ch->final_ev = calloc(1, sizeof *ch->final_ev))) {
            rlx__job_cancel_open(j);
            return rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
        }
        /* the embedding kinds: one engine request carries every input */
        rlx_request *q = embeds ? rlx_embed_make_request(j, ch->req_id) : rlx_api_make_request(&j->req, ids, n_ids, ch->req_id);
        int rc = q ? 0 : rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
        if (q) {
            if (q->sampling.has_seed) q->sampling.seed += (uint64_t)(i % (size_t)j->req.n);
            q->bos_added = chat || j->req.prompts[pi].text; /* tokenized here, not ids the client sent */
            /* echo with logprobs: the prompt's tokens get logprobs too, the first none (as OpenAI) */
            q->prompt_logprobs = j->req.echo && j->req.logprobs >= 0;
            if (q->prompt_logprobs && rlx__choice_add_logprob(j, ch, ids[0], NULL, &ch->prompt_lp_offset)) ch->n_prompt_lps++;
            q->on_event = on_engine_event;
            q->user = ch;
            if ((rc = rlx_worker_submit(m->w, q, &err))) {
                rlx_api_error_from_rlx(e, rc, err.msg);
                if (embeds && rc != RLX_EFULL) snprintf(e->param, sizeof e->param, "%s", rlx_embed_param(j));
                else if (rc == RLX_ETOOLONG) rlx_job_context_param(j, pi, n_ids, e); /* context or KV pool */
            }
        }
        if (rc) {
            rlx__job_cancel_open(j);
            return rc;
        }
        ch->submitted = true;
        j->n_submitted++;
        if (embeds)
            for (size_t k = 0; k < j->req.n_prompts; k++) j->prompt_tokens += (int32_t)j->req.prompts[k].n_ids;
        else if (i % (size_t)j->req.n == 0) j->prompt_tokens += (int32_t)n_ids;
    }
    return 0;
}

static void started(rlx_job *j)
{
    j->started = true;
    if (j->req.stream && j->ops->begin) j->ops->begin(j);
}

/* Tokenizing and rendering run on the libuv threadpool (prepare.c): the loop must not
 * compute. */
typedef struct prepare_task {
    rlx_call call;                 /* first: the call is the task; its client is the job while
                                      the sink holds it (rlx_job_detach drops the call) */
    rlx_job *job;                  /* kept alive until done (j->preparing) */
    int rc;
    rlx_api_error e;
} prepare_task;

/* Prompt text over a request's prompts or messages: what its preparation costs. */
static size_t prompt_bytes(const rlx_api_request *r)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_prompts; i++)
        if (r->prompts[i].text) n += strlen(r->prompts[i].text);
    const cJSON *m;
    cJSON_ArrayForEach(m, r->messages) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (cJSON_IsString(c)) n += strlen(c->valuestring);
    }
    return n;
}

static void prepare_work(rlx_call *call)
{
    prepare_task *t = (prepare_task *)call;
    t->rc = rlx_job_prepare(t->job, &t->e);
}

static void prepare_done(rlx_call *call, void *client, int status)
{
    prepare_task *t = (prepare_task *)call;
    rlx_job *j = t->job;
    rlx_srv *s = j->srv;
    j->preparing = false;
    int rc = status ? rlx_api_error_shutdown(&t->e) : t->rc;
    if (!rc && s->grace_over) rc = rlx_api_error_shutdown(&t->e);
    if (!client) {
        /* the sink left meanwhile: nothing was submitted */
        free(t);
        maybe_free(j);
        return;
    }
    if (!rc && j->echo)
        for (size_t i = 0; i < j->n_choices; i++) {
            rlx_choice *ch = &j->choices[i];
            const char *pre = j->echo[i / (size_t)j->req.n];
            if (!rlx__choice_text_append(ch, pre, strlen(pre)) && !rc)
                rc = rlx_api_errorf(&t->e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
            ch->lp_offset = ch->echo_len = ch->len;
            ch->lp_chars = rlx_api_utf8_chars(ch->text, ch->len);
        }
    if (!rc) rc = rlx__job_tc_start(j, &t->e);
    /* a grammar can fail at the first step (too ambiguous there, nothing allowed): a stream with
       one begins with its output, so that failure is a 400 as for the same request unstreamed */
    const bool constrained = j->req.stream && j->req.base->grammar;
    if (!rc) rc = submit_all(j, &t->e);
    if (rc) {
        j->failed = true;
        j->err = t->e;
        if (j->n_final == j->n_submitted) finish_job(j);
    } else if (constrained) {
        j->defer_start = true;
    } else {
        started(j);
    }
    free(t);
    notify(j); /* may free j */
    if (s->front && s->front->kick) s->front->kick(s);
}

/* Ends a job the engine is still running: its sink gets the 503 "shutting down" as a final
 * event (an error line, or an SSE error event and [DONE] when a stream has begun). The engine's
 * final events still come and are only counted. */
static void abort_job(rlx_job *j)
{
    if (!j->failed) {
        j->failed = true;
        rlx_api_error_shutdown(&j->err);
    }
    j->aborted = true;
    rlx__job_cancel_open(j);
    finish_job(j);
    notify(j); /* may free j */
}

void rlx_srv_end_all(rlx_srv *s)
{
    s->grace_over = true;
    rlx_srv_cancel_work(s);
    for (rlx_job *j = s->jobs, *next; j; j = next) {
        next = j->next;
        if (!j->finished && !j->preparing && j->sink) abort_job(j);
    }
}

size_t rlx_job_n_requests(const rlx_api_request *r)
{
    size_t n_prompts = r->messages ? 1 : r->n_prompts;
    return rlx_api_kind_embeds(r->kind) ? 1 : (size_t)r->n * n_prompts;
}

int rlx_job_start(rlx_srv *s, rlx_model_slot *m, rlx_api_request *req, const rlx_sink_ops *ops, void *sink,
                  rlx_job **out, rlx_api_error *e)
{
    rlx_profile_apply_request(&m->prof, req); /* the model's defaults for what the body left out */
    int vrc = check_params(req, m, e);
    if (vrc) return vrc;
    rlx_job *j = calloc(1, sizeof *j);
    size_t n = rlx_job_n_requests(req);
    if (!j || !(j->choices = calloc(n, sizeof *j->choices))) {
        free(j);
        return rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
    }
    j->srv = s;
    j->model = m;
    rlx_srv_model_hold(m, req); /* until job_free: the model stays loaded */
    j->ops = ops;
    j->req = *req;
    memset(req, 0, sizeof *req);
    j->n_choices = n;
    j->status = 200;
    j->t_start = rlx_now();
    j->next = s->jobs;
    if (s->jobs) s->jobs->prev = j;
    s->jobs = j;
    s->n_jobs++;
    rlx_api_meta_init(&j->meta, j->req.kind, m->cfg->name, ++s->next_id, (long long)time(NULL));
    j->meta.fingerprint = s->fingerprint;
    j->meta.include_usage = j->req.stream && j->req.include_usage;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        rlx_choice *ch = &j->choices[i];
        ch->job = j;
        ch->index = (int)i;
    }
    /* a text prompt that cannot fit is refused here, without a thread or tokenizing */
    for (size_t i = 0; i < j->req.n_prompts && !rc && !rlx_api_kind_embeds(j->req.kind); i++)
        if (j->req.prompts[i].text) rc = rlx_job_check_prompt_bytes(j, i, strlen(j->req.prompts[i].text), e);
    if (!rc) {
        prepare_task *t = calloc(1, sizeof *t);
        if (!t) {
            rc = rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
        } else {
            t->job = j;
            if (rlx_call_start(s, &t->call, prompt_bytes(&j->req) > RLX_BIG_WORK_BYTES, j, &j->prep, prepare_work,
                               prepare_done)) {
                free(t);
                rc = rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Cannot queue the preparation of this request.");
            } else {
                j->preparing = true;
            }
        }
    }
    if (rc) {
        j->client_gone = true;
        maybe_free(j); /* frees now, or once the submitted ones have ended */
        return rc;
    }
    j->sink = sink;
    *out = j;
    return 0;
}

void rlx_srv_drain_queue(rlx_srv *s)
{
    on_async(&s->async);
}

void rlx_srv_free_jobs(rlx_srv *s)
{
    while (s->jobs) job_free(s->jobs);
}
