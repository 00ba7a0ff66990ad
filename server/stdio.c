/* stdio.c - `rlxd serve --stdio`: one JSON request per line on stdin (a /v1/generate body,
 * plus optional "id", echoed back, and "endpoint": "generate" | "completions" | "chat"), one
 * JSON result per line on stdout, in input order. Errors are {"id":..,"error":{...}}. At EOF
 * the work in flight finishes, then the daemon exits. stdin/stdout are libuv pipes or ttys on
 * the loop; regular files are read through uv_fs (the threadpool) and written synchronously.
 * "stream" is ignored here: each request gives exactly one line. */
#include "server/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INVALID "invalid_request_error"

typedef struct entry {
    struct entry *next;
    struct stdio_state *st;
    cJSON *id;                 /* owned; JSON null when absent */
    rlx_job *job;              /* borrowed while running */
    char *line;                /* owned until the request starts */
    size_t len;
    rlx_api_kind kind;         /* for the access log */
    double t0;
    char *result;              /* the output line, once known */
} entry;

typedef struct stdio_state {
    rlx_srv *srv;
    union { uv_pipe_t pipe; uv_tty_t tty; uv_stream_t stream; } in, out;
    bool in_stream, out_stream, in_open, out_open;
    uv_fs_t read_req;
    char rbuf[65536];
    char *line; size_t len, cap;
    entry *head, *tail;
    bool eof, paused;
    size_t writes_pending;
    size_t running, waiting;   /* lines started / read but not started (backpressure) */
} stdio_state;

/* Requests run at once; more lines wait in order, and reading pauses while many wait, so a
 * large input neither overflows the engine's queue nor memory. */
#define MAX_RUNNING 16
#define MAX_WAITING 256

static void start_waiting(stdio_state *st);
static void resume_reading(stdio_state *st);

static char *with_id(const char *json, const cJSON *id)
{
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    if (!o) o = cJSON_CreateObject();
    cJSON *idc = id ? cJSON_Duplicate(id, true) : cJSON_CreateNull();
    cJSON_DeleteItemFromObjectCaseSensitive(o, "id");
    if (idc) cJSON_AddItemToObject(o, "id", idc);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static void on_written(uv_write_t *w, int status)
{
    (void)status;
    stdio_state *st = w->data;
    free(((char **)(w + 1))[0]);
    free(w);
    st->writes_pending--;
    rlx_srv_maybe_exit(st->srv);
}

static void write_line(stdio_state *st, char *line)
{
    size_t n = strlen(line);
    line[n] = '\n'; /* the NUL slot: the line was allocated with room for it below */
    if (st->out_stream) {
        uv_write_t *w = malloc(sizeof *w + sizeof(char *));
        if (!w) { free(line); return; }
        ((char **)(w + 1))[0] = line;
        w->data = st;
        uv_buf_t b = uv_buf_init(line, (unsigned)n + 1);
        st->writes_pending++;
        if (uv_write(w, &st->out.stream, &b, 1, on_written)) {
            st->writes_pending--;
            free(line);
            free(w);
        }
        return;
    }
    uv_fs_t req;
    uv_buf_t b = uv_buf_init(line, (unsigned)n + 1);
    uv_fs_write(st->srv->loop, &req, 1, &b, 1, -1, NULL);
    uv_fs_req_cleanup(&req);
    free(line);
}

static void flush(stdio_state *st)
{
    while (st->head && st->head->result) {
        entry *e = st->head;
        st->head = e->next;
        if (!st->head) st->tail = NULL;
        write_line(st, e->result);
        cJSON_Delete(e->id);
        free(e);
    }
    if (st->eof && !st->head) st->srv->stopping = true;
    rlx_srv_maybe_exit(st->srv);
}

/* result lines get one spare byte for the '\n' write_line puts in place of the NUL */
static char *spare(char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s);
    char *r = realloc(s, n + 2);
    if (!r) { free(s); return NULL; }
    r[n + 1] = 0;
    return r;
}

/* One access-log line and one metrics count per request, as over HTTP. */
static void log_request(entry *e, int status, const rlx_job *job)
{
    rlx_srv *s = e->st->srv;
    static const char *const names[] = {"completions", "chat_completions", "generate"};
    const char *endpoint = names[e->kind];
    rlx_metrics_request(&s->metrics, endpoint, status);
    char path[32], line[1024];
    snprintf(path, sizeof path, "stdio:%s", endpoint);
    rlx_access_entry ae = {.method = "LINE", .path = path, .status = status, .ttft_s = -1,
                           .duration_s = rlx_now() - e->t0};
    if (job) {
        ae.model = job->model->cfg->name;
        ae.prompt_tokens = job->total.prompt_tokens;
        ae.completion_tokens = job->total.completion_tokens;
        if (job->n_choices) {
            ae.ttft_s = job->choices[0].timings.ttft_s;
            ae.finish = rlx_api_finish_name(job->choices[0].finish);
        }
    }
    rlx_access_log_format(&ae, s->cfg->log_json, line, sizeof line);
    fputs(line, stderr);
}

static void set_error(entry *e, const rlx_api_error *err)
{
    char *j = rlx_api_error_json(err);
    e->result = spare(with_id(j, e->id));
    free(j);
    log_request(e, err->status, NULL);
}

static void on_job(rlx_job *job)
{
    entry *e = job->sink;
    if (!job->finished) return;
    stdio_state *st = e->st;
    e->result = spare(with_id(job->out ? job->out + job->off : NULL, e->id));
    log_request(e, job->failed ? job->err.status : job->status, job);
    e->job = NULL;
    st->running--;
    rlx_job_detach(job);
    start_waiting(st);
    flush(st);
}

static void enqueue_line(stdio_state *st, const char *line, size_t len)
{
    while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) len--;
    if (!len) return;
    entry *e = calloc(1, sizeof *e);
    if (!e || !(e->line = malloc(len + 1))) { free(e); return; }
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

static void start_entry(stdio_state *st, entry *e)
{
    rlx_srv *s = st->srv;
    const char *line = e->line;
    size_t len = e->len;
    rlx_api_error err;
    cJSON *root = cJSON_ParseWithLength(line, len);
    if (root) e->id = cJSON_DetachItemFromObjectCaseSensitive(root, "id");
    const cJSON *ep = root ? cJSON_GetObjectItemCaseSensitive(root, "endpoint") : NULL;
    rlx_api_kind kind = RLX_API_GENERATE;
    if (!root || !cJSON_IsObject(root)) {
        rlx_api_errorf(&err, 400, INVALID, NULL, "Each line must be one JSON object.");
    } else if (ep && !cJSON_IsNull(ep) && (!cJSON_IsString(ep) || (strcmp(ep->valuestring, "generate")
               && strcmp(ep->valuestring, "completions") && strcmp(ep->valuestring, "chat")))) {
        rlx_api_errorf(&err, 400, INVALID, "endpoint", "'endpoint' must be \"generate\", \"completions\" or \"chat\".");
    } else {
        if (cJSON_IsString(ep)) kind = !strcmp(ep->valuestring, "chat") ? RLX_API_CHAT
                                     : !strcmp(ep->valuestring, "completions") ? RLX_API_COMPLETIONS : RLX_API_GENERATE;
        err.status = 0;
    }
    cJSON_Delete(root);
    e->kind = kind;
    if (err.status) { set_error(e, &err); return; }
    rlx_api_request r;
    if (rlx_api_parse(&r, kind, line, len, 0, &err)) {
        rlx_api_request_free(&r);
        set_error(e, &err);
        return;
    }
    r.stream = false; /* one result line per request */
    rlx_model_slot *m = rlx_srv_model(s, r.model, &err);
    rlx_job *job;
    if (!m || rlx_job_start(s, m, &r, on_job, e, &job, &err)) {
        rlx_api_request_free(&r);
        set_error(e, &err);
        return;
    }
    e->job = job;
    st->running++;
}


static void start_waiting(stdio_state *st)
{
    for (entry *e = st->head; e && st->running < MAX_RUNNING; e = e->next) {
        if (!e->line) continue;
        st->waiting--;
        start_entry(st, e);
        free(e->line);
        e->line = NULL;
    }
    if (st->paused && st->waiting < MAX_WAITING / 2) resume_reading(st);
    flush(st);
}

static void feed(stdio_state *st, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == '\n') {
            enqueue_line(st, st->line ? st->line : "", st->len);
            st->len = 0;
            continue;
        }
        if (st->len + 1 >= st->cap) {
            size_t nc = st->cap ? st->cap * 2 : 4096;
            char *nl = realloc(st->line, nc);
            if (!nl) return;
            st->line = nl;
            st->cap = nc;
        }
        st->line[st->len++] = buf[i];
    }
}

static void at_eof(stdio_state *st)
{
    if (st->len) enqueue_line(st, st->line, st->len);
    st->len = 0;
    st->eof = true;
    start_waiting(st);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)suggested;
    stdio_state *st = h->data;
    *b = uv_buf_init(st->rbuf, sizeof st->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    stdio_state *st = s->data;
    if (n > 0) {
        feed(st, b->base, (size_t)n);
        start_waiting(st);
        if (st->waiting >= MAX_WAITING && !st->eof) {
            uv_read_stop(s);
            st->paused = true;
        }
    }
    if (n < 0) {
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
    if (n > 0) {
        feed(st, st->rbuf, (size_t)n);
        start_waiting(st);
        if (st->waiting >= MAX_WAITING) st->paused = true;
        else read_file_next(st);
    } else {
        at_eof(st);
    }
}

static void read_file_next(stdio_state *st)
{
    uv_buf_t b = uv_buf_init(st->rbuf, sizeof st->rbuf);
    st->read_req.data = st;
    if (uv_fs_read(st->srv->loop, &st->read_req, 0, &b, 1, -1, on_file_read)) at_eof(st);
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
        return 0; /* a regular file: uv_fs */
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

static void resume_reading(stdio_state *st)
{
    st->paused = false;
    if (st->in_stream) {
        if (uv_read_start(&st->in.stream, on_alloc, on_read)) at_eof(st);
    } else {
        read_file_next(st);
    }
}

void rlx_stdio_models_ready(rlx_srv *s)
{
    stdio_state *st = s->stdio;
    if (!st) return;
    if (st->in_stream) {
        if (uv_read_start(&st->in.stream, on_alloc, on_read)) at_eof(st);
    } else {
        read_file_next(st);
    }
}

bool rlx_stdio_idle(rlx_srv *s)
{
    stdio_state *st = s->stdio;
    return !st || (st->eof && !st->head && st->writes_pending == 0);
}

void rlx_stdio_close(rlx_srv *s)
{
    stdio_state *st = s->stdio;
    if (!st) return;
    if (st->in_open) uv_close((uv_handle_t *)&st->in.stream, NULL);
    if (st->out_open) uv_close((uv_handle_t *)&st->out.stream, NULL);
    while (st->head) {
        entry *e = st->head;
        st->head = e->next;
        if (e->job) rlx_job_detach(e->job);
        free(e->line);
        free(e->result);
        cJSON_Delete(e->id);
        free(e);
    }
}

void rlx_stdio_free(rlx_srv *s)
{
    stdio_state *st = s->stdio;
    if (!st) return;
    free(st->line);
    free(st);
    s->stdio = NULL;
}
