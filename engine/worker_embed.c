/* worker_embed.c - embedding requests in the worker (engine.h RLX_REQ_EMBED): a model whose graph
 * outputs hidden states takes requests of one or more inputs; every input is one sequence,
 * computed whole in one step together with inputs of other requests (continuous batching: a
 * step takes queued inputs in arrival order while the token budget and the memory pool allow;
 * --max-seqs does not bound them, since nothing is kept between steps). After the forward step each sequence's rows are pooled (engine/pool.h,
 * the model's pooling) and normalized (the request's embd_normalize) into the request's result,
 * and its memory is released at once: nothing is cached or shared (with bidirectional attention
 * a token's K/V depends on the whole input, so no prefix of it could be reused anyway). A
 * request ends with one RLX_EV_DONE carrying all its vectors once its last input is done.
 *
 * Batch invariance: each token's row kind (rlx_batch.decode) follows from its position in its
 * own input alone, as for a prompt computed by itself, the CPU kernels' results depend only on
 * it, and mean pooling sums in double in token order; so an input's vector is the same alone
 * and among any others, bit for bit. Worker thread only. */
#include "engine/embed.h"
#include "engine/pool.h"
#include "engine/worker_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ejob {
    rlx_request *req;           /* owned */
    int32_t n_inputs;
    int32_t *start, *n_tok;     /* per input: first id in prompt_ids, tokens computed (truncated) */
    size_t *off;                /* per input: its first float in out */
    float *out;
    size_t n_out;
    int32_t dim;
    bool per_token;             /* a vector per token */
    rlx_pooling pool;
    int32_t next, n_done;       /* inputs scheduled, inputs finished */
    int32_t n_tokens;           /* sum of n_tok */
    bool started, cancelled, failed;
    double t_admit;
};

static void ejob_free(ejob *j)
{
    if (!j) return;
    rlx_request_free(j->req);
    free(j->start);
    free(j->n_tok);
    free(j->off);
    free(j->out);
    free(j);
}

/* Coalescing. A step streams every weight of the model once whatever the number of inputs it
 * runs (a MiniLM-sized F32 model: ~2.9 ms of a one-input step of 5 ms, against 2.2 ms per more
 * input), so inputs are cheapest in large steps. Under concurrent load a large step answers many
 * clients at once, and the next step would start with the one or two requests that arrived
 * meanwhile while the others are on their way back. So: when the last step ran k > 1 inputs and
 * fewer than k are waiting, the worker waits for more, until k are there or
 * RLX_EMBED_COALESCE_SHARE of the last step's time (at most RLX_EMBED_COALESCE_MAX seconds) went
 * by - a bounded latency cost, taken only while steps are being shared. A client alone (steps of
 * one input) never waits, nor does a drain or stop. Worker thread. */
#define RLX_EMBED_COALESCE_SHARE 0.25
#define RLX_EMBED_COALESCE_MAX 0.004

void rlx__embed_coalesce(rlx_worker *w)
{
    int32_t want = w->e_last_inputs;
    if (want < 2) return;
    int64_t waiting = 0; /* inputs queued here and not started */
    for (int32_t i = 0; i < w->n_ejobs && waiting < want; i++) waiting += w->ejobs[i]->n_inputs - w->ejobs[i]->next;
    if (waiting >= want) return;
    double wait = w->e_last_secs * RLX_EMBED_COALESCE_SHARE;
    if (wait > RLX_EMBED_COALESCE_MAX) wait = RLX_EMBED_COALESCE_MAX;
    const struct timespec until = rlx__deadline(wait);
    pthread_mutex_lock(&w->mu);
    /* requests in the inbox count one input each (at least) */
    while (!w->stop && !w->cancels && waiting + w->n_inbox < want)
        if (pthread_cond_timedwait(&w->cv, &w->mu, &until)) break;
    pthread_mutex_unlock(&w->mu);
    w->e_last_inputs = 0; /* once per step */
}

/* Sequences one embedding step may hold: as many inputs as fit the token budget (they hold no
 * slot beyond their step, so --max-seqs, which bounds sequences kept between steps, does not
 * apply; the memory pool still does). */
static int32_t step_seqs(const rlx_worker *w) { return RLX_MAX(w->cfg.max_batch_tokens, w->cfg.max_seqs); }

int rlx__embed_init(rlx_worker *w, rlx_error *err)
{
    int32_t S = step_seqs(w);
    w->e_mem = calloc((size_t)S, sizeof *w->e_mem);
    w->e_job = calloc((size_t)S, sizeof *w->e_job);
    w->e_input = calloc((size_t)S, sizeof *w->e_input);
    w->e_row = calloc((size_t)S, sizeof *w->e_row);
    w->e_seqs = calloc((size_t)S, sizeof *w->e_seqs);
    w->e_vec = malloc((size_t)RLX_MAX(w->runner->out_cols, 1) * sizeof *w->e_vec);
    if (!w->e_mem || !w->e_job || !w->e_input || !w->e_row || !w->e_seqs || !w->e_vec) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    for (int32_t i = 0; i < S; i++) rlx_mem_seq_init(&w->e_mem[i]);
    return 0;
}

void rlx__embed_free(rlx_worker *w)
{
    for (int32_t i = 0; w->e_mem && i < step_seqs(w); i++) rlx_mem_seq_free(&w->e_mem[i]);
    free(w->e_mem);
    free(w->e_job);
    free(w->e_input);
    free(w->e_row);
    free(w->e_seqs);
    free(w->e_vec);
    free(w->ejobs);
    w->e_mem = NULL;
    w->e_job = NULL;
    w->e_input = w->e_row = NULL;
    w->e_seqs = NULL;
    w->e_vec = NULL;
    w->ejobs = NULL;
}

/* Input i of r: its first id and length. */
static void input_span(const rlx_request *r, size_t i, size_t *first, size_t *len)
{
    if (!r->input_ends || r->n_inputs == 0) {
        *first = 0;
        *len = r->n_prompt;
        return;
    }
    size_t a = i ? (size_t)r->input_ends[i - 1] : 0;
    *first = a;
    *len = (size_t)r->input_ends[i] - a;
}

int32_t rlx_worker_embd_limit(const rlx_worker *w)
{
    const rlx_runner *rn = w->runner;
    int64_t lim = RLX_MIN((int64_t)rlx_embed_max_tokens(rn), (int64_t)rn->max_batch_tokens); /* learned positions too */
    lim = RLX_MIN(lim, rlx_memory_capacity(&rn->mem));
    return (int32_t)lim;
}

int rlx__embed_check(rlx_worker *w, const rlx_request *req, rlx_error *err)
{
    if (req->embd_normalize < -1)
        return rlx_errorf(err, RLX_EINVAL, "embd_normalize must be -1 (none), 0 (max absolute), 1 (taxicab), 2 "
                          "(Euclidean) or a larger p-norm, got %d", req->embd_normalize);
    size_t n = req->input_ends ? req->n_inputs : 1;
    if (req->input_ends && n == 0) return rlx_errorf(err, RLX_EINVAL, "the request has no input");
    if (n > INT32_MAX / 2) return rlx_errorf(err, RLX_EINVAL, "too many inputs");
    int32_t limit = rlx_worker_embd_limit(w);
    rlx_admit_limits lim = {.n_ctx = limit, .n_vocab = w->runner->n_vocab};
    for (size_t i = 0; i < n; i++) {
        if (req->input_ends && ((i && req->input_ends[i] < req->input_ends[i - 1]) || req->input_ends[i] < 0 ||
                                (size_t)req->input_ends[i] > req->n_prompt || (i == n - 1 && (size_t)req->input_ends[i] != req->n_prompt)))
            return rlx_errorf(err, RLX_EINVAL, "the inputs' bounds do not cover the prompt ids in order");
        size_t first, len;
        input_span(req, i, &first, &len);
        rlx_admit_query q = {.ids = req->prompt_ids + first, .n_prompt = len, .bound = RLX_ADMIT_EXACT, .embed = true};
        if (req->truncate && len > (size_t)limit) q.n_prompt = (size_t)limit; /* only what is kept is checked */
        rlx_admit a;
        if (rlx_admit_check(&lim, &q, &a)) {
            char msg[sizeof err->msg];
            int rc = rlx_admit_error(&a, err);
            snprintf(msg, sizeof msg, "%s", err->msg);
            return n > 1 ? rlx_errorf(err, rc, "input %zu: %s", i, msg) : rc;
        }
    }
    return 0;
}

void rlx__embed_enqueue(rlx_worker *w, rlx_request *req)
{
    ejob *j = calloc(1, sizeof *j);
    size_t n = req->input_ends ? req->n_inputs : 1;
    const rlx_runner *rn = w->runner;
    int32_t limit = rlx_worker_embd_limit(w);
    if (j) {
        j->req = req;
        j->n_inputs = (int32_t)n;
        j->start = malloc(n * sizeof *j->start);
        j->n_tok = malloc(n * sizeof *j->n_tok);
        j->off = malloc((n + 1) * sizeof *j->off);
        int p = rlx_worker_pooling(w);
        j->pool = p < 0 ? RLX_POOL_NONE : (rlx_pooling)p;
        j->per_token = req->embd_per_token || j->pool == RLX_POOL_NONE;
        j->dim = (int32_t)rn->out_cols;
        if (j->pool == RLX_POOL_RANK && !j->per_token) j->dim = (int32_t)rlx_embed_dim(rn, RLX_POOL_RANK);
    }
    if (!j || !j->start || !j->n_tok || !j->off) goto oom;
    for (size_t i = 0; i < n; i++) {
        size_t first, len;
        input_span(req, i, &first, &len);
        j->start[i] = (int32_t)first;
        j->n_tok[i] = (int32_t)RLX_MIN(len, (size_t)limit);
        j->n_tokens += j->n_tok[i];
        j->off[i] = j->n_out;
        j->n_out += (size_t)(j->per_token ? j->n_tok[i] : 1) * (size_t)j->dim;
    }
    j->off[n] = j->n_out;
    if (!(j->out = malloc(RLX_MAX(j->n_out, (size_t)1) * sizeof *j->out))) goto oom;
    if (w->n_ejobs == w->cap_ejobs) {
        int32_t nc = w->cap_ejobs ? 2 * w->cap_ejobs : 32;
        ejob **a = realloc(w->ejobs, (size_t)nc * sizeof *a);
        if (!a) goto oom;
        w->ejobs = a;
        w->cap_ejobs = nc;
    }
    w->ejobs[w->n_ejobs++] = j;
    return;
oom:;
    rlx_event ev = {.type = RLX_EV_ERROR, .error_code = RLX_ENOMEM, .error_msg = "out of memory", .text = ""};
    rlx__emit(req, &ev);
    pthread_mutex_lock(&w->mu);
    w->queued--;
    pthread_mutex_unlock(&w->mu);
    if (j) j->req = NULL;
    ejob_free(j);
    rlx_request_free(req);
}

bool rlx__embed_mark_cancel(rlx_worker *w, uint64_t id)
{
    for (int32_t i = 0; i < w->n_ejobs; i++)
        if (w->ejobs[i]->req->id == id) {
            w->ejobs[i]->cancelled = true;
            return true;
        }
    return false;
}

/* Removes job i from the queue (its inputs are never in flight between steps) and frees it;
 * a job that never started still counted as queued. */
static void ejob_remove(rlx_worker *w, int32_t i)
{
    ejob *j = w->ejobs[i];
    memmove(&w->ejobs[i], &w->ejobs[i + 1], (size_t)(w->n_ejobs - i - 1) * sizeof *w->ejobs);
    w->n_ejobs--;
    if (!j->started) {
        pthread_mutex_lock(&w->mu);
        w->queued--;
        pthread_mutex_unlock(&w->mu);
    }
    ejob_free(j);
}

static void ejob_fail(rlx_worker *w, ejob *j, int code, const char *msg)
{
    if (j->failed) return;
    j->failed = true;
    rlx_event ev = {.type = RLX_EV_ERROR, .error_code = code, .error_msg = msg, .text = ""};
    rlx__emit(j->req, &ev);
    (void)w;
}

void rlx__embed_reap(rlx_worker *w, bool all)
{
    for (int32_t i = w->n_ejobs - 1; i >= 0; i--) {
        ejob *j = w->ejobs[i];
        if (!all && !j->cancelled && !j->failed) continue;
        if (!j->failed) {
            rlx_event ev = {.type = RLX_EV_DONE, .finish = RLX_FINISH_CANCELLED, .text = ""};
            double now = rlx_now();
            ev.timings.total_s = now - j->req->submitted_at;
            ev.timings.queued_s = (j->started ? j->t_admit : now) - j->req->submitted_at;
            rlx__emit(j->req, &ev);
        }
        ejob_remove(w, i);
    }
}

static void ejob_done(rlx_worker *w, ejob *j)
{
    double now = rlx_now();
    rlx_event ev = {.type = RLX_EV_DONE, .finish = RLX_FINISH_STOP, .text = "", .embd = j->out, .embd_n = j->n_out,
                    .embd_dim = j->dim, .embd_tokens = j->n_tok, .n_inputs = (size_t)j->n_inputs};
    ev.usage.prompt_tokens = j->n_tokens;
    ev.timings.queued_s = j->t_admit - j->req->submitted_at;
    ev.timings.prompt_s = now - j->t_admit;
    ev.timings.total_s = now - j->req->submitted_at;
    rlx__emit(j->req, &ev);
    (void)w;
}

/* The kind of a token at pos of an input of len tokens: a prompt computed by itself (see
 * sched.c token_kind), whatever else shares the step. */
static uint8_t input_token_kind(int32_t len, int32_t pos)
{
    if (len == 1) return RLX_TOKEN_DECODE;
    return pos < len - len % 4 ? RLX_TOKEN_PROMPT : RLX_TOKEN_PROMPT_TAIL;
}

/* Pools sequence si's rows into its job's result. */
static void finish_input(rlx_worker *w, int32_t si, const float *rows_all)
{
    ejob *j = w->e_job[si];
    int32_t in = w->e_input[si], L = j->n_tok[in];
    const int64_t D = w->runner->out_cols;
    const float *rows = rows_all + (size_t)w->e_row[si] * (size_t)D;
    float *dst = j->out + j->off[in];
    if (j->per_token) {
        memcpy(dst, rows, (size_t)L * (size_t)D * sizeof *dst);
    } else if (j->pool == RLX_POOL_RANK) { /* the classifier head over the [CLS] row: the score(s) */
        rlx_error err = {0};
        int rc = rlx_embed_rank_scores(w->runner, rows, dst, &err);
        if (rc) ejob_fail(w, j, rc, err.msg);
    } else {
        rlx_pool_rows(j->pool, rows, L, D, w->e_vec);
        rlx_embd_normalize(w->e_vec, dst, D, j->req->embd_normalize);
    }
    j->n_done++;
}

int rlx__embed_step(rlx_worker *w)
{
    rlx_runner *rn = w->runner;
    rlx__embed_reap(w, false);
    int32_t budget = rn->max_batch_tokens, n_tok = 0, n_seq = 0, max_seq = step_seqs(w);
    uint64_t tokens = 0, inputs = 0;
    bool blocked = false;
    for (int32_t ji = 0; ji < w->n_ejobs && !blocked && n_seq < max_seq; ji++) {
        ejob *j = w->ejobs[ji];
        while (j->next < j->n_inputs && n_seq < max_seq) {
            int32_t L = j->n_tok[j->next];
            rlx_mem_seq *ms = &w->e_mem[n_seq];
            if (L > budget) { blocked = true; break; }
            int rc = rlx_memory_grow(&rn->mem, ms, L);
            if (rc) {
                rlx_memory_release(&rn->mem, ms);
                if (rc != RLX_EFULL) ejob_fail(w, j, rc, "cannot reserve memory for the input");
                blocked = true;
                break;
            }
            const int32_t *ids = j->req->prompt_ids + j->start[j->next];
            w->e_job[n_seq] = j;
            w->e_input[n_seq] = j->next;
            w->e_row[n_seq] = n_tok;
            for (int32_t p = 0; p < L; p++, n_tok++) {
                w->b_tokens[n_tok] = ids[p];
                w->b_pos[n_tok] = p;
                w->b_seq[n_tok] = n_seq;
                w->b_out[n_tok] = 0;
                w->b_dec[n_tok] = input_token_kind(L, p);
            }
            w->e_seqs[n_seq] = (rlx_batch_seq){ms->blocks, ms->n_blocks, ms->slot};
            n_seq++;
            budget -= L;
            tokens += (uint64_t)L;
            inputs++;
            j->next++;
            if (!j->started) {
                j->started = true;
                j->t_admit = rlx_now();
                pthread_mutex_lock(&w->mu);
                w->queued--;
                pthread_mutex_unlock(&w->mu);
            }
        }
    }
    if (n_seq == 0) {
        /* nothing runs between steps: an input that cannot get memory now never will */
        if (w->n_ejobs > 0 && !w->ejobs[0]->failed) ejob_fail(w, w->ejobs[0], RLX_ETOOLONG, "the input does not fit the memory pool");
        int did = w->n_ejobs > 0;
        rlx__embed_reap(w, false);
        pthread_mutex_lock(&w->mu);
        w->stats.running = 0;
        w->stats.waiting = w->n_ejobs + w->n_inbox;
        pthread_mutex_unlock(&w->mu);
        return did;
    }
    rlx_batch b = {n_tok, w->b_tokens, w->b_pos, w->b_seq, w->b_out, 0, n_seq, w->e_seqs, w->b_dec};
    rlx_error err = {0};
    double t_step = rlx_now();
    int rc = rlx_runner_forward(rn, &b, &err);
    w->e_last_secs = rlx_now() - t_step;
    w->e_last_inputs = n_seq;
    for (int32_t si = 0; si < n_seq; si++) {
        if (rc) ejob_fail(w, w->e_job[si], rc, err.msg);
        else if (!w->e_job[si]->failed) finish_input(w, si, rn->logits);
        rlx_memory_release(&rn->mem, &w->e_mem[si]);
    }
    /* counted before any request's final event, so a client that got its vectors sees them */
    pthread_mutex_lock(&w->mu);
    w->stats.prompt_tokens += tokens;
    w->stats.embd_tokens += tokens;
    w->stats.embd_inputs += inputs;
    w->stats.embd_steps++;
    pthread_mutex_unlock(&w->mu);
    /* finished requests leave in arrival order */
    int32_t running = 0;
    for (int32_t i = 0; i < w->n_ejobs;) {
        ejob *j = w->ejobs[i];
        if (!j->failed && j->n_done == j->n_inputs) {
            ejob_done(w, j);
            ejob_remove(w, i);
            continue;
        }
        running += j->started;
        i++;
    }
    rlx__embed_reap(w, false); /* the failed ones */
    pthread_mutex_lock(&w->mu);
    w->stats.running = running;
    w->stats.waiting = w->n_ejobs - running + w->n_inbox;
    w->stats.kv_usage = rlx_memory_usage(&rn->mem);
    pthread_mutex_unlock(&w->mu);
    return 1;
}
