/* stdio.c - `rlxd serve --stdio`: JSON lines. Each stdin line is one request object with an
 * "id" (any JSON value but null), the fields of /v1/generate (or "messages" for chat, which the
 * model's template renders) and "stream". Each stdout line is JSON carrying that id: token
 * events {"id","token","text"} when streaming, then one result {"id","ok":true,...} or
 * {"id","ok":false,"error":{...}}. Requests run concurrently and their lines go out as they
 * are produced, so a long request does not hold back a short one behind it. A malformed line
 * gets an error line (id null when it could not be read) and the stream goes on. At EOF the
 * work in flight finishes, then the daemon exits 0.
 *
 * The loop neither blocks nor parses: lines are parsed on the threadpool; stdin/stdout are
 * libuv pipes or ttys, or regular files read and written through uv_fs (the threadpool), one
 * write at a time so lines keep their order. */
#include "models/json.h"
#include "server/serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Lines in flight (parsing or generating) at once; further lines wait, and reading pauses
 * while many wait, so a large input overflows neither the engine's queue nor memory. */
#define MAX_RUNNING 32
#define MAX_WAITING 256
/* An id is repeated on every output line of its request: longer ones are refused. */
#define MAX_ID_BYTES 256

typedef struct stdio_state stdio_state;

typedef struct entry {
    struct entry *next;        /* waiting FIFO */
    stdio_state *st;
    char *line;                /* owned until parsed */
    size_t len;
    double t0;
    rlx_work work;             /* the parse (listed: shutdown cancels it while queued) */
    bool refuse;               /* read before SIGTERM but not started: parsed for its id, refused */
    char *id;                  /* the client's id as JSON text (owned), "null" when unknown */
    cJSON *root;               /* parsed line (owned until the request starts) */
    rlx_api_request req;
    int rc;
    rlx_api_error err;
    rlx_api_kind kind;         /* for the access log */
    rlx_job *job;              /* borrowed while running */
    rlx_call wait;             /* waiting for its model's load (models.c) ... */
    rlx_model_slot *wait_model;/* ... of this model */
    size_t reqs;               /* engine requests its job submits (counted in st->inflight_reqs) */
} entry;

typedef struct out_buf { char *p; size_t len, cap; } out_buf;

struct stdio_state {
    rlx_srv *srv;
    union { uv_pipe_t pipe; uv_tty_t tty; uv_stream_t stream; } in, out;
    bool in_stream, out_stream, in_open, out_open;
    uv_fs_t read_req;
    bool reading_file;         /* a uv_fs_read is in flight */
    char rbuf[65536];
    char *line; size_t len, cap;
    bool too_long;             /* the current line passed the limit: skip to its end */
    entry *head, *tail;        /* read, not started */
    size_t waiting, running;
    /* lines parsed but held back (linked by next): started together, their engine requests
       would pass --max-queue and be refused as busy, which a pipe has no way to retry; they go
       on, in order, as earlier ones end */
    entry *park_head, *park_tail;
    size_t inflight_reqs;      /* engine requests of the lines past that point */
    bool unparking;
    bool eof, paused, closing;
    out_buf pending, writing;  /* bytes to write next / being written */
    size_t write_off;
    uv_write_t wreq;
    uv_fs_t wfs;
    bool write_busy, out_broken;
};

static void start_waiting(stdio_state *st);
static void resume_reading(stdio_state *st);

/* ---- output: one write in flight, later lines gather behind it --------------------------- */

static void write_next(stdio_state *st);

static void write_finished(stdio_state *st, int status)
{
    if (status < 0 && !st->out_broken) {
        /* the reader is gone: results have nowhere to go, so nothing more is computed (a
           pipeline whose consumer ended, `... | head`): stop as for SIGTERM, cancel what runs,
           exit 1 */
        st->out_broken = true;
        fprintf(stderr, "rlxd: stdout: %s; stopping (the requests in flight are cancelled)\n", uv_strerror(status));
        if (!st->srv->exit_code) st->srv->exit_code = 1;
        rlx_srv_begin_stop(st->srv);
        rlx_srv_end_all(st->srv);
    }
    st->write_busy = false;
    st->writing.len = 0;
    st->write_off = 0;
    write_next(st);
    rlx_srv_maybe_exit(st->srv);
}

static void on_stream_written(uv_write_t *w, int status)
{
    write_finished(w->data, status);
}

static void on_file_written(uv_fs_t *req)
{
    stdio_state *st = req->data;
    ssize_t n = req->result;
    uv_fs_req_cleanup(req);
    if (n > 0 && st->write_off + (size_t)n < st->writing.len) { /* a short write: the rest */
        st->write_off += (size_t)n;
        uv_buf_t b = uv_buf_init(st->writing.p + st->write_off, (unsigned)(st->writing.len - st->write_off));
        if (uv_fs_write(st->srv->loop, &st->wfs, 1, &b, 1, -1, on_file_written) == 0) return;
        n = -1;
    }
    write_finished(st, n < 0 ? (int)n : 0);
}

static void write_next(stdio_state *st)
{
    if (st->write_busy || !st->pending.len || st->closing) return;
    if (st->out_broken) {
        st->pending.len = 0;
        return;
    }
    out_buf t = st->writing; /* swap: pending becomes the buffer in flight */
    st->writing = st->pending;
    st->pending = t;
    st->pending.len = 0;
    st->write_off = 0;
    uv_buf_t b = uv_buf_init(st->writing.p, (unsigned)st->writing.len);
    int rc;
    if (st->out_stream) {
        st->wreq.data = st;
        rc = uv_write(&st->wreq, &st->out.stream, &b, 1, on_stream_written);
    } else {
        st->wfs.data = st;
        rc = uv_fs_write(st->srv->loop, &st->wfs, 1, &b, 1, -1, on_file_written);
    }
    if (rc) {
        st->out_broken = true;
        st->writing.len = 0;
        fprintf(stderr, "rlxd: cannot write to stdout: %s\n", uv_strerror(rc));
        return;
    }
    st->write_busy = true;
}

static void emit(stdio_state *st, const char *s, size_t n)
{
    if (!s || !n || st->out_broken) return;
    out_buf *b = &st->pending;
    if (b->len + n > b->cap) {
        size_t nc = b->cap ? b->cap : 65536;
        while (nc < b->len + n) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) return;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    write_next(st);
}

static void emit_take(stdio_state *st, char *s)
{
    if (s) emit(st, s, strlen(s));
    free(s);
}

/* ---- requests ------------------------------------------------------------------------------ */

/* One access-log line and one metrics count per request, as over HTTP. */
static void log_request(entry *e, int status, const rlx_job *job)
{
    rlx_srv *s = e->st->srv;
    const char *endpoint = e->kind == RLX_API_CHAT ? "chat_completions" : e->kind == RLX_API_EMBEDDINGS ? "embeddings"
                         : e->kind == RLX_API_RERANK ? "rerank" : "generate";
    rlx_metrics_request(&s->metrics, endpoint, status);
    char path[32], line[4096];
    snprintf(path, sizeof path, "stdio:%s", e->kind == RLX_API_CHAT ? "chat" : e->kind == RLX_API_GENERATE ? "generate" : endpoint);
    rlx_access_entry ae = {.method = "LINE", .path = path, .status = status, .ttft_s = -1,
                           .duration_s = rlx_now() - e->t0};
    if (job) {
        ae.model = job->model->cfg->name;
        rlx_job_log_tokens(job, &ae.prompt_tokens, &ae.completion_tokens);
        if (job->n_choices && job->finished) {
            ae.ttft_s = job->choices[0].timings.ttft_s;
            ae.finish = rlx_api_finish_name(job->choices[0].finish);
        }
    }
    rlx_access_log_format(&ae, s->cfg->log_json, line, sizeof line);
    fputs(line, stderr);
}

static void entry_free(entry *e)
{
    free(e->line);
    free(e->id);
    cJSON_Delete(e->root);
    rlx_api_request_free(&e->req);
    free(e);
}

/* The request is over (answered, failed or never started): free its slot. */
static void unpark(stdio_state *st);

static void entry_done(entry *e)
{
    stdio_state *st = e->st;
    st->running--;
    st->inflight_reqs -= e->reqs;
    entry_free(e);
    unpark(st);
    start_waiting(st);
    rlx_srv_maybe_exit(st->srv);
}

static void fail_entry(entry *e, const rlx_api_error *err)
{
    emit_take(e->st, rlx_api_line_error(e->id, err, (rlx_now() - e->t0) * 1000));
    log_request(e, err->status, NULL);
}

static void on_job(rlx_job *job)
{
    entry *e = job->sink;
    stdio_state *st = e->st;
    if (job->len > job->off) emit(st, job->out + job->off, job->len - job->off);
    job->off = job->len = 0;
    if (!job->finished) return;
    log_request(e, job->failed ? job->err.status : job->status, job);
    e->job = NULL;
    rlx_job_detach(job);
    entry_done(e);
}

/* ---- the sink: JSON lines (rlx_api_line_*) carrying the request's id ------------------------ */

static void line_piece(rlx_job *j, rlx_choice *ch, int32_t token, const char *text, size_t n, const rlx_api_logprob *lps,
                       size_t n_lps)
{
    (void)lps;
    (void)n_lps;
    if (token >= 0)
        rlx_job_out_take(j, rlx_api_line_token(j->line_id, j->n_choices > 1 ? ch->index : -1, token, text, n));
}

static void line_fail(rlx_job *j)
{
    rlx_job_out_take(j, rlx_api_line_error(j->line_id, &j->err, (rlx_now() - j->t_start) * 1000));
}

static void line_finish(rlx_job *j)
{
    if (rlx_api_kind_embeds(j->req.kind)) {
        rlx_api_embd_result res;
        rlx_embed_result(j, &res);
        char *line = rlx_api_line_embed(j->line_id, &j->req, j->model->cfg->name, &res, &j->total,
                                        (rlx_now() - j->t_start) * 1000);
        if (!line) {
            j->failed = true;
            rlx_api_errorf(&j->err, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
            line_fail(j);
            return;
        }
        rlx_job_out_take(j, line);
        return;
    }
    rlx_api_choice *cs = rlx_job_api_choices(j);
    if (!cs) {
        j->failed = true;
        rlx_api_errorf(&j->err, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
        line_fail(j);
        return;
    }
    rlx_job_out_take(j, rlx_api_line_result(j->line_id, cs, j->n_choices, &j->total, (rlx_now() - j->t_start) * 1000));
    free(cs);
}

static bool line_whole(const rlx_job *j)
{
    (void)j;
    return true; /* the result is one line, written after the token lines already taken */
}

static const rlx_sink_ops line_sink = {
    .piece = line_piece,
    .finish = line_finish,
    .fail = line_fail,
    .whole = line_whole,
    .notify = on_job,
};

/* Whether a started request (its job not yet answered) has this id: its lines could not be
 * told apart from a second one's. */
static bool id_in_flight(rlx_srv *s, const char *id)
{
    for (const rlx_job *j = s->jobs; j; j = j->next)
        if (j->ops == &line_sink && j->sink && !strcmp(((const entry *)j->sink)->id, id)) return true;
    return false;
}

/* An id's numbers as their literal text (models/json.h keeps it in valuestring): printed as raw
 * JSON, a 64-bit id comes back as sent (18446744073709551615 came back 1.8446744073709552e+19).
 * False when a number is NaN or Infinity, which JSON does not have (they came back null). */
static bool numbers_as_literals(cJSON *v)
{
    if (cJSON_IsNumber(v)) {
        if (!v->valuestring || strpbrk(v->valuestring, "NI")) return false; /* NaN, [-]Infinity; 1e400 is JSON */
        v->type = cJSON_Raw | (v->type & cJSON_IsReference);
        return true;
    }
    for (cJSON *c = v->child; c; c = c->next)
        if (!numbers_as_literals(c)) return false;
    return true;
}

/* Threadpool: the line -> id + request. */
static void parse_work(uv_work_t *w)
{
    entry *e = w->data;
    rlx_error jerr = {0};
    /* read as Python's json reads it, as HTTP bodies are (1.0 stays a float for the templates) */
    if (rlx_json_parse(e->line, e->len, &e->root, &jerr)) e->root = NULL;
    const cJSON *id = e->root ? cJSON_GetObjectItemCaseSensitive(e->root, "id") : NULL;
    size_t id_len = 0;
    bool id_finite = true;
    if (id && !cJSON_IsNull(id)) {
        cJSON *copy = cJSON_Duplicate(id, true);
        id_finite = copy && numbers_as_literals(copy);
        char *txt = id_finite ? cJSON_PrintUnformatted(copy) : NULL;
        cJSON_Delete(copy);
        id_len = txt ? strlen(txt) : 0;
        if (txt && id_len <= MAX_ID_BYTES && rlx_api_utf8_valid(txt, id_len)) e->id = txt;
        else free(txt);
    }
    if (!e->root || !cJSON_IsObject(e->root)) {
        e->rc = rlx_api_errorf(&e->err, 400, RLX_API_ERR_INVALID, NULL, "Each line must be one JSON object.");
        return;
    }
    if (id_len > MAX_ID_BYTES) {
        e->rc = rlx_api_errorf(&e->err, 400, RLX_API_ERR_INVALID, "id", "The 'id' is %zu bytes of JSON; at most %d are "
                               "allowed (it is repeated on every output line).", id_len, MAX_ID_BYTES);
        return;
    }
    if (!id_finite) {
        e->rc = rlx_api_errorf(&e->err, 400, RLX_API_ERR_INVALID, "id", "The 'id' holds NaN or Infinity, which JSON does "
                               "not have; use a string or a number.");
        return;
    }
    if (!e->id) {
        e->rc = rlx_api_errorf(&e->err, 400, RLX_API_ERR_INVALID, "id", "Each request needs an 'id' (any JSON value but null) "
                               "to tell its output lines apart.");
        return;
    }
    if ((e->rc = rlx_api_check_nul(e->root, e->line, e->len, &e->err))) return;
    /* what the line holds: messages (chat), input (embeddings), query + documents (rerank), or a
     * prompt (generate) */
    const cJSON *r = e->root;
    e->kind = cJSON_GetObjectItemCaseSensitive(r, "messages") ? RLX_API_CHAT
            : cJSON_GetObjectItemCaseSensitive(r, "input") ? RLX_API_EMBEDDINGS
            : cJSON_GetObjectItemCaseSensitive(r, "documents") ? RLX_API_RERANK : RLX_API_GENERATE;
    e->rc = rlx_api_parse_json(&e->req, e->kind, e->root, 0, &e->err);
}

static void run_entry(entry *e, rlx_model_slot *m, rlx_api_error *err);
static void model_ready(rlx_call *call, void *client, int status);
static void resolve_entry(entry *e);

/* Parked lines go on, in order, while their requests fit (or alone when nothing runs). */
static void unpark(stdio_state *st)
{
    if (st->unparking) return; /* a line that fails at once comes back here through entry_done */
    st->unparking = true;
    while (st->park_head && (!st->inflight_reqs || st->inflight_reqs + st->park_head->reqs <=
                                                      (size_t)st->srv->cfg->max_queue)) {
        entry *e = st->park_head;
        st->park_head = e->next;
        if (!st->park_head) st->park_tail = NULL;
        e->next = NULL;
        st->inflight_reqs += e->reqs;
        resolve_entry(e);
    }
    st->unparking = false;
}

static void parse_done(uv_work_t *w, int status)
{
    entry *e = w->data;
    stdio_state *st = e->st;
    rlx_srv *s = st->srv;
    rlx_srv_work_done(s, &e->work);
    free(e->line);
    e->line = NULL;
    cJSON_Delete(e->root);
    e->root = NULL;
    if (!e->id && !(e->id = strdup("null"))) { entry_done(e); return; }
    if (status || st->closing || e->refuse) {
        rlx_api_error_shutdown(&e->err);
        fail_entry(e, &e->err);
        entry_done(e);
        return;
    }
    if (!e->rc) {
        size_t reqs = RLX_MAX(rlx_job_n_requests(&e->req), (size_t)1);
        if (st->park_head || (st->inflight_reqs && st->inflight_reqs + reqs > (size_t)s->cfg->max_queue)) {
            e->reqs = reqs; /* counted once it goes on */
            e->next = NULL;
            if (st->park_tail) st->park_tail->next = e;
            else st->park_head = e;
            st->park_tail = e;
            return;
        }
        e->reqs = reqs;
        st->inflight_reqs += reqs;
    }
    resolve_entry(e);
}

/* The parsed line's model, loaded on demand, then its job. */
static void resolve_entry(entry *e)
{
    stdio_state *st = e->st;
    rlx_srv *s = st->srv;
    rlx_api_error err;
    if (st->closing || s->stopping) {
        rlx_api_error_shutdown(&err);
        fail_entry(e, &err);
        entry_done(e);
        return;
    }
    rlx_model_slot *wait = NULL, *m = e->rc ? NULL : rlx_srv_model(s, e->req.model, &wait, &err);
    if (e->rc) {
        err = e->err;
    } else if (wait) { /* loaded on demand: the line goes on once its model is ready */
        e->wait_model = wait;
        if (!rlx_srv_model_wait(wait, &e->wait, e, NULL, model_ready, &err)) return;
    }
    run_entry(e, m, &err);
}

/* The line's model is loaded (m), or err says why not (m NULL): its job starts, or its error
 * line is written. */
static void run_entry(entry *e, rlx_model_slot *m, rlx_api_error *err)
{
    rlx_srv *s = e->st->srv;
    if (m && id_in_flight(s, e->id)) {
        m = NULL;
        rlx_api_errorf(err, 400, RLX_API_ERR_INVALID, "id", "A request with this id is still in flight; ids must be unique "
                       "among requests in flight.");
    }
    if (m && rlx_embed_check_model(m, &e->req, err)) m = NULL;
    /* chat is rendered by the template, then answered like generate: one native result */
    if (!rlx_api_kind_embeds(e->req.kind)) e->req.kind = RLX_API_GENERATE;
    rlx_job *job;
    if (!m || rlx_job_start(s, m, &e->req, &line_sink, e, &job, err)) {
        fail_entry(e, err);
        entry_done(e);
        return;
    }
    job->line_id = e->id;
    job->t_start = e->t0;
    e->job = job;
}

static void model_ready(rlx_call *call, void *client, int status)
{
    entry *e = client;
    rlx_api_error err;
    rlx_model_slot *m = NULL;
    (void)call;
    if (status) rlx_srv_model_wait_error(e->wait_model, status, &err);
    else m = rlx_srv_model(e->st->srv, e->req.model, NULL, &err); /* loaded now; else err says why */
    run_entry(e, m, &err);
}

static void start_entry(stdio_state *st, entry *e)
{
    rlx_srv *s = st->srv;
    st->running++;
    e->work.req.data = e;
    if (rlx_srv_queue_work(s, &e->work, e->len > RLX_BIG_WORK_BYTES, parse_work, parse_done)) {
        e->id = strdup("null");
        rlx_api_errorf(&e->err, 500, RLX_API_ERR_SERVER, NULL, "Cannot queue the parsing of this line.");
        fail_entry(e, &e->err);
        entry_done(e);
        return;
    }
}

static void start_waiting(stdio_state *st)
{
    while (st->head && st->running < MAX_RUNNING && !st->closing) {
        entry *e = st->head;
        st->head = e->next;
        if (!st->head) st->tail = NULL;
        st->waiting--;
        /* SIGTERM: lines read but not started are refused, not silently dropped; they are still
         * parsed (on the threadpool) so that the refusal carries the line's id */
        e->refuse = st->srv->stopping && !st->eof;
        start_entry(st, e);
    }
    if (st->paused && st->waiting < MAX_WAITING / 2 && !st->srv->stopping) resume_reading(st);
    if (st->eof && !st->head && st->running == 0) st->srv->stopping = true; /* EOF drained */
}

/* ---- input ----------------------------------------------------------------------------------- */

static void enqueue_line(stdio_state *st, const char *line, size_t len)
{
    /* a UTF-8 byte order mark before the JSON (PowerShell 5's utf8 output starts with one;
     * RFC 8259 8.1 lets a parser ignore it), as the HTTP bodies have it skipped */
    if (len >= 3 && !memcmp(line, "\xEF\xBB\xBF", 3)) line += 3, len -= 3;
    while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) len--;
    if (!len) return;
    entry *e = calloc(1, sizeof *e);
    if (!e || !(e->line = malloc(len + 1))) {
        free(e);
        return;
    }
    memcpy(e->line, line, len);
    e->line[len] = 0;
    e->len = len;
    e->st = st;
    e->t0 = rlx_now();
    e->kind = RLX_API_GENERATE;
    if (st->tail) st->tail->next = e;
    else st->head = e;
    st->tail = e;
    st->waiting++;
}

static void line_too_long(stdio_state *st)
{
    rlx_api_error err;
    rlx_api_errorf(&err, 413, RLX_API_ERR_INVALID, NULL, "The line is longer than the limit of %lld bytes (--max-body).",
                   (long long)st->srv->cfg->max_body);
    emit_take(st, rlx_api_line_error("null", &err, 0));
    entry e = {.st = st, .t0 = rlx_now(), .kind = RLX_API_GENERATE};
    log_request(&e, 413, NULL);
}

static void feed(stdio_state *st, const char *buf, size_t n)
{
    size_t limit = (size_t)st->srv->cfg->max_body;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(buf + i, '\n', n - i);
        size_t k = (nl ? (size_t)(nl - buf) : n) - i;
        if (!st->too_long && st->len + k > limit) {
            st->too_long = true;
            st->len = 0;
            line_too_long(st);
        }
        if (!st->too_long) {
            if (st->len + k + 1 > st->cap) {
                size_t nc = st->cap ? st->cap : 4096;
                while (nc < st->len + k + 1) nc *= 2;
                char *nl2 = realloc(st->line, nc);
                if (!nl2) return;
                st->line = nl2;
                st->cap = nc;
            }
            memcpy(st->line + st->len, buf + i, k);
            st->len += k;
        }
        i += k;
        if (nl) {
            if (!st->too_long) enqueue_line(st, st->line, st->len);
            st->too_long = false;
            st->len = 0;
            i++;
        }
    }
}

static void at_eof(stdio_state *st)
{
    if (st->len && !st->too_long) enqueue_line(st, st->line, st->len);
    st->len = 0;
    st->eof = true;
    start_waiting(st);
    rlx_srv_maybe_exit(st->srv);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)suggested;
    stdio_state *st = h->data;
    *b = uv_buf_init(st->rbuf, sizeof st->rbuf);
}

static void after_read(stdio_state *st)
{
    start_waiting(st);
    if (st->waiting >= MAX_WAITING && !st->eof) {
        st->paused = true;
        if (st->in_stream) uv_read_stop(&st->in.stream);
    }
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    stdio_state *st = s->data;
    if (n > 0) {
        feed(st, b->base, (size_t)n);
        after_read(st);
    } else if (n < 0) {
        uv_read_stop(s);
        at_eof(st);
    }
}

static void read_file_next(stdio_state *st);

static void on_file_read(uv_fs_t *req)
{
    stdio_state *st = req->data;
    ssize_t n = req->result;
    uv_fs_req_cleanup(req);
    st->reading_file = false;
    if (st->closing) return;
    if (n > 0) {
        feed(st, st->rbuf, (size_t)n);
        after_read(st);
        if (!st->paused && !st->srv->stopping) read_file_next(st);
    } else {
        at_eof(st);
    }
    rlx_srv_maybe_exit(st->srv);
}

static void read_file_next(stdio_state *st)
{
    uv_buf_t b = uv_buf_init(st->rbuf, sizeof st->rbuf);
    st->read_req.data = st;
    if (uv_fs_read(st->srv->loop, &st->read_req, 0, &b, 1, -1, on_file_read)) at_eof(st);
    else st->reading_file = true;
}

static void resume_reading(stdio_state *st)
{
    st->paused = false;
    if (st->in_stream) {
        if (uv_read_start(&st->in.stream, on_alloc, on_read)) at_eof(st);
    } else if (!st->reading_file) {
        read_file_next(st);
    }
}

static int open_stream(rlx_srv *s, stdio_state *st, int fd, bool readable, bool *is_stream, bool *open)
{
    uv_handle_type t = uv_guess_handle(fd);
    uv_stream_t *h = readable ? &st->in.stream : &st->out.stream;
    *is_stream = false;
    if (t == UV_TTY) {
        if (uv_tty_init(s->loop, readable ? &st->in.tty : &st->out.tty, fd, 0)) return RLX_EIO;
    } else if (t == UV_NAMED_PIPE) {
        if (uv_pipe_init(s->loop, readable ? &st->in.pipe : &st->out.pipe, 0)) return RLX_EIO;
        if (uv_pipe_open(readable ? &st->in.pipe : &st->out.pipe, fd)) {
            uv_close((uv_handle_t *)h, NULL);
            return RLX_EIO;
        }
    } else {
        return 0; /* a regular file (or /dev/null): uv_fs on the threadpool */
    }
    h->data = st;
    *is_stream = true;
    *open = true;
    return 0;
}

int rlx_stdio_start(rlx_srv *s, rlx_error *err)
{
    stdio_state *st = calloc(1, sizeof *st);
    if (!st) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    st->srv = s;
    s->stdio = st;
    if (open_stream(s, st, 0, true, &st->in_stream, &st->in_open) ||
        open_stream(s, st, 1, false, &st->out_stream, &st->out_open))
        return rlx_errorf(err, RLX_EIO, "cannot use stdin/stdout for --stdio");
    return 0;
}

void rlx_stdio_models_ready(rlx_srv *s)
{
    stdio_state *st = s->stdio;
    if (st) resume_reading(st);
}

void rlx_stdio_quiesce(rlx_srv *s)
{
    stdio_state *st = s->stdio;
    if (!st) return;
    if (st->in_stream && st->in_open) uv_read_stop(&st->in.stream);
    st->paused = true;
    start_waiting(st); /* refuses what was read but not started */
}

bool rlx_stdio_idle(rlx_srv *s)
{
    stdio_state *st = s->stdio;
    return !st || (st->running == 0 && !st->head && !st->write_busy && !st->pending.len && !st->reading_file);
}

void rlx_stdio_close(rlx_srv *s)
{
    stdio_state *st = s->stdio;
    if (!st) return;
    st->closing = true;
    if (st->in_open) uv_close((uv_handle_t *)&st->in.stream, NULL);
    if (st->out_open) uv_close((uv_handle_t *)&st->out.stream, NULL);
    while (st->head) {
        entry *e = st->head;
        st->head = e->next;
        entry_free(e);
    }
    /* jobs still running (grace period over) are detached; their entries go with them */
    for (;;) {
        rlx_job *j = s->jobs;
        while (j && j->ops != &line_sink) j = j->next;
        if (!j) break;
        entry *e = j->sink;
        rlx_job_detach(j); /* may free j: the list is walked again from its head */
        entry_free(e);
    }
}

void rlx_stdio_free(rlx_srv *s)
{
    stdio_state *st = s->stdio;
    if (!st) return;
    free(st->line);
    free(st->pending.p);
    free(st->writing.p);
    free(st);
    s->stdio = NULL;
}

const rlx_front_ops rlx_stdio_front = {
    .start = rlx_stdio_start,
    .models_ready = rlx_stdio_models_ready,
    .quiesce = rlx_stdio_quiesce,
    .idle = rlx_stdio_idle,
    .close = rlx_stdio_close,
    .free = rlx_stdio_free,
};
