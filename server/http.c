/* http.c - libmicrohttpd driven by the libuv loop: MHD runs with its own epoll set and no
 * threads; a uv_poll on that epoll fd and a uv_timer from MHD_get_timeout call MHD_run.
 * Requests that wait on the engine are suspended; their socket is watched for hang-up
 * (MHD does not notice a client leaving while a connection is suspended) so the generation
 * can be cancelled. Streaming uses a content-reader callback that suspends when no bytes wait. */
#include "server/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

static void on_mhd_timer(uv_timer_t *t)
{
    rlx_http_kick(t->data);
}

static void on_mhd_poll(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    rlx_http_kick(p->data);
}

void rlx_http_kick(rlx_srv *s)
{
    if (!s->mhd) return;
    MHD_run(s->mhd);
    MHD_UNSIGNED_LONG_LONG to = 0;
    if (MHD_get_timeout(s->mhd, &to) == MHD_YES) uv_timer_start(&s->mhd_timer, on_mhd_timer, to, 0);
    else uv_timer_stop(&s->mhd_timer);
}

/* ---- suspend / resume ---------------------------------------------------------------------- */

static void resume(rlx_conn *c)
{
    if (!c->suspended) return; /* resuming a running connection is undefined in MHD */
    c->suspended = false;
    if (c->poll_init) uv_poll_stop(&c->poll);
    MHD_resume_connection(c->mc);
}

/* For the access log. A job cut short (the client left) counts what it got so far. */
static void take_usage(rlx_conn *c, const rlx_job *j)
{
    if (!j->finished || j->aborted) {
        c->prompt_tokens = j->prompt_tokens;
        c->completion_tokens = 0;
        for (size_t i = 0; i < j->n_choices; i++) c->completion_tokens += (int32_t)j->choices[i].n_tokens;
        if (j->aborted) c->log_status = j->err.status; /* ended at shutdown, not by the client (499) */
        return;
    }
    c->prompt_tokens = j->total.prompt_tokens;
    c->completion_tokens = j->total.completion_tokens;
    c->ttft = j->n_choices ? j->choices[0].timings.ttft_s : -1;
    if (j->n_choices) c->finish = rlx_api_finish_name(j->choices[0].finish);
    if (j->failed && !c->stream) c->finish = NULL;
}

static void on_hangup(uv_poll_t *p, int status, int events)
{
    rlx_conn *c = p->data;
    if (status >= 0 && !(events & UV_DISCONNECT)) return;
    c->gone = true;
    c->log_status = 499; /* nginx's "client closed request" */
    if (c->job) {
        take_usage(c, c->job);
        rlx_job_detach(c->job);
        c->job = NULL;
    }
    resume(c);
    rlx_http_kick(c->srv);
}

static void suspend(rlx_conn *c)
{
    if (c->suspended) return;
    MHD_suspend_connection(c->mc);
    c->suspended = true;
    if (!c->poll_init) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci && uv_poll_init_socket(c->srv->loop, &c->poll, ci->connect_fd) == 0) {
            c->poll_init = true;
            c->poll.data = c;
        }
    }
    if (c->poll_init) uv_poll_start(&c->poll, UV_DISCONNECT, on_hangup);
}

void rlx_http_resume_all(rlx_srv *s)
{
    for (rlx_conn *c = s->conns; c; c = c->next) {
        if (!c->suspended) continue;
        if (c->queued) {
            c->gone = true; /* a stream: cut */
        } else {
            /* still waiting for its answer: the server stops */
            rlx_api_error e;
            rlx_api_error_shutdown(&e);
            rlx_conn_error(c, &e);
            if (c->task_conn) *c->task_conn = NULL;
            c->task_conn = NULL;
        }
        if (c->job) {
            rlx_job_detach(c->job);
            c->job = NULL;
        }
        resume(c);
    }
}

void rlx_conn_job_notify(rlx_job *job)
{
    rlx_conn *c = job->sink;
    bool ready = job->finished || (c->stream && ((job->started && !c->queued) || job->len > job->off));
    if (ready) resume(c);
}

void rlx_conn_wake(rlx_conn *c)
{
    resume(c);
    rlx_http_kick(c->srv);
}

/* ---- answers ------------------------------------------------------------------------------- */

void rlx_conn_respond(rlx_conn *c, int status, const char *ctype, char *body)
{
    free(c->resp);
    c->has_resp = true;
    c->status = body ? status : 500;
    c->resp = body;
    c->resp_len = body ? strlen(body) : 0;
    c->ctype = ctype;
}

void rlx_conn_error(rlx_conn *c, const rlx_api_error *e)
{
    rlx_conn_respond(c, e->status, "application/json", rlx_api_error_json(e));
    c->retry_after = e->status == 503;
    c->www_auth = e->status == 401;
}

static enum MHD_Result queue_resp(rlx_conn *c)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(c->resp_len, c->resp ? c->resp : (char *)"",
                                                             MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    if (c->ctype) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, c->ctype);
    if (c->retry_after) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (c->www_auth) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (c->allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, c->allow);
    if (!c->log_status) c->log_status = c->status;
    enum MHD_Result ok = MHD_queue_response(c->mc, (unsigned)c->status, r);
    MHD_destroy_response(r);
    return ok;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    rlx_conn *c = cls;
    if (c->gone) return MHD_CONTENT_READER_END_WITH_ERROR;
    rlx_job *j = c->job;
    if (!j) return MHD_CONTENT_READER_END_OF_STREAM;
    size_t avail = j->len - j->off;
    if (avail) {
        size_t n = avail < max ? avail : max;
        memcpy(buf, j->out + j->off, n);
        j->off += n;
        if (j->off == j->len) j->off = j->len = 0;
        return (ssize_t)n;
    }
    if (j->finished) {
        take_usage(c, j);
        rlx_job_detach(j);
        c->job = NULL;
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    suspend(c);
    return 0;
}

static enum MHD_Result queue_stream(rlx_conn *c)
{
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, c, NULL);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, c->stream_ctype);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    c->queued = true;
    c->status = 200;
    c->log_status = 200;
    enum MHD_Result ok = MHD_queue_response(c->mc, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

/* After routing, or after a resume: queue what is ready or wait for it. */
static enum MHD_Result progress(rlx_conn *c)
{
    if (c->gone && !c->has_resp) rlx_conn_respond(c, 500, "text/plain", strdup(""));
    if (c->has_resp) return queue_resp(c);
    if (c->task_conn) {
        suspend(c);
        return MHD_YES;
    }
    rlx_job *j = c->job;
    if (j && c->stream && j->started) return c->queued ? MHD_YES : queue_stream(c);
    if (j && j->finished) {
        /* a whole response, or an error that came before a stream could start */
        take_usage(c, j);
        rlx_conn_respond(c, j->status == 200 && j->failed ? j->err.status : j->status, "application/json",
                         j->out ? strdup(j->out + j->off) : NULL);
        c->retry_after = c->status == 503;
        rlx_job_detach(j);
        c->job = NULL;
        return queue_resp(c);
    }
    if (j) {
        suspend(c);
        return MHD_YES;
    }
    rlx_conn_respond(c, 500, "text/plain", strdup("no answer"));
    return queue_resp(c);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    rlx_srv *s = cls;
    rlx_conn *c = *con_cls;
    if (!c) {
        if (!(c = calloc(1, sizeof *c))) return MHD_NO;
        c->srv = s;
        c->mc = mc;
        c->t0 = rlx_now();
        c->ttft = -1;
        snprintf(c->method, sizeof c->method, "%s", method);
        snprintf(c->path, sizeof c->path, "%s", url);
        for (char *p = c->path; *p; p++) /* the path goes into the log: no control bytes */
            if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
        c->endpoint = rlx_route_endpoint(c->path);
        c->next = s->conns;
        if (s->conns) s->conns->prev = c;
        s->conns = c;
        *con_cls = c;
        rlx_api_error e;
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (s->n_conns > s->cfg->max_connections) {
            rlx_api_errorf(&e, 503, "server_error", NULL, "Too many open connections (%d); retry shortly.",
                           s->cfg->max_connections);
            rlx_conn_error(c, &e);
            return queue_resp(c);
        }
        if (cl && strtoll(cl, NULL, 10) > s->cfg->max_body) {
            rlx_api_errorf(&e, 413, "invalid_request_error", NULL,
                           "The request body is larger than the server's limit of %lld bytes.",
                           (long long)s->cfg->max_body);
            rlx_conn_error(c, &e);
            return queue_resp(c);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (c->too_large || c->has_resp) return MHD_YES;
        if (c->body_len + n > (size_t)s->cfg->max_body) {
            c->too_large = true;
            return MHD_YES;
        }
        if (c->body_len + n + 1 > c->body_cap) {
            size_t nc = c->body_cap ? c->body_cap : 4096;
            while (nc < c->body_len + n + 1) nc *= 2;
            char *nb = realloc(c->body, nc);
            if (!nb) return MHD_NO;
            c->body = nb;
            c->body_cap = nc;
        }
        memcpy(c->body + c->body_len, upload, n);
        c->body_len += n;
        c->body[c->body_len] = 0;
        return MHD_YES;
    }
    if (!c->routed && !c->has_resp) {
        c->routed = true;
        if (c->too_large) {
            rlx_api_error e;
            rlx_api_errorf(&e, 413, "invalid_request_error", NULL,
                           "The request body is larger than the server's limit of %lld bytes.",
                           (long long)s->cfg->max_body);
            rlx_conn_error(c, &e);
        } else {
            rlx_route(s, c);
        }
    }
    return progress(c);
}

static void free_conn(uv_handle_t *h)
{
    free(h->data);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)mc;
    rlx_srv *s = cls;
    rlx_conn *c = *con_cls;
    if (!c) return;
    *con_cls = NULL;
    if (c->task_conn) *c->task_conn = NULL;
    if (c->job) {
        take_usage(c, c->job);
        if (!c->job->finished) c->log_status = 499;
        rlx_job_detach(c->job);
        c->job = NULL;
    }
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && c->stream && c->log_status == 200) c->log_status = 499;
    if (!c->log_status) c->log_status = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? c->status : 499;
    rlx_metrics_request(&s->metrics, c->endpoint, c->log_status);
    char line[1024];
    rlx_access_entry ae = {.method = c->method, .path = c->path, .model = c->model[0] ? c->model : NULL,
                           .status = c->log_status, .prompt_tokens = c->prompt_tokens,
                           .completion_tokens = c->completion_tokens, .ttft_s = c->ttft,
                           .duration_s = rlx_now() - c->t0, .finish = c->log_status == 499 ? "cancelled" : c->finish};
    rlx_access_log_format(&ae, s->cfg->log_json, line, sizeof line);
    fputs(line, stderr);
    if (c->prev) c->prev->next = c->next;
    else s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    free(c->body);
    free(c->resp);
    if (c->poll_init) uv_close((uv_handle_t *)&c->poll, free_conn);
    else free(c);
    rlx_srv_maybe_exit(s);
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_ctx, enum MHD_ConnectionNotificationCode t)
{
    (void)mc;
    (void)socket_ctx;
    rlx_srv *s = cls;
    s->n_conns += t == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1;
    if (t == MHD_CONNECTION_NOTIFY_CLOSED) rlx_srv_maybe_exit(s);
}

/* MHD's unescaping, except that a URI or argument holding %00 stays as sent: decoded, the NUL
 * would cut the text (GET /v1/sessions/a%00b acting on session "a"); left escaped, the '%' makes
 * the id invalid and the route answers 400. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *uri)
{
    (void)cls;
    (void)c;
    if (strstr(uri, "%00")) return strlen(uri);
    return MHD_http_unescape(uri);
}

int rlx_http_start(rlx_srv *s, rlx_error *err)
{
    struct sockaddr_storage addr;
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC;
    /* names are resolved once, before the loop runs, so the blocking lookup is harmless */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", s->cfg->port);
    if (getaddrinfo(s->cfg->host, port, &hints, &ai) || !ai || ai->ai_addrlen > sizeof addr) {
        if (ai) freeaddrinfo(ai);
        return rlx_errorf(err, RLX_EINVAL, "--host '%s' is not an address or a name this machine resolves",
                          s->cfg->host);
    }
    memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    freeaddrinfo(ai);
    s->mhd = MHD_start_daemon(flags, (uint16_t)s->cfg->port, NULL, NULL, on_access, s,
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)(s->cfg->max_connections + 64),
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300,
                              MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024,
                              MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
                              MHD_OPTION_END);
    if (!s->mhd)
        return rlx_errorf(err, RLX_EIO, "cannot listen on %s:%d (address in use or not allowed?)", s->cfg->host,
                          s->cfg->port);
    const union MHD_DaemonInfo *pi = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = pi ? pi->port : s->cfg->port;
    const union MHD_DaemonInfo *ei = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (!ei || uv_poll_init(s->loop, &s->mhd_poll, ei->epoll_fd) || uv_timer_init(s->loop, &s->mhd_timer)) {
        MHD_stop_daemon(s->mhd);
        s->mhd = NULL;
        return rlx_errorf(err, RLX_EIO, "cannot watch the HTTP daemon's epoll descriptor");
    }
    s->mhd_poll.data = s;
    s->mhd_timer.data = s;
    uv_poll_start(&s->mhd_poll, UV_READABLE, on_mhd_poll);
    rlx_http_kick(s);
    return 0;
}

void rlx_http_quiesce(rlx_srv *s)
{
    if (!s->mhd) return;
    MHD_socket fd = MHD_quiesce_daemon(s->mhd);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

void rlx_http_end_tasks(rlx_srv *s)
{
    for (rlx_conn *c = s->conns; c; c = c->next) {
        if (!c->task_conn) continue;
        *c->task_conn = NULL; /* the task, running or cancelled, then answers no one */
        c->task_conn = NULL;
        rlx_api_error e;
        rlx_api_error_shutdown(&e);
        rlx_conn_error(c, &e);
        resume(c);
    }
    rlx_http_kick(s);
}

bool rlx_http_idle(rlx_srv *s)
{
    for (rlx_conn *c = s->conns; c; c = c->next)
        if (c->routed || c->has_resp) return false;
    return true;
}

/* A request whose body is still arriving when the server stops gets the 503 "shutting down".
 * MHD queues a response only before the body or once it is complete, not in between, so the
 * answer is written on the socket here, before MHD closes the connection (the client has sent
 * nothing that is left unread, so the close does not reset the connection under it). */
static void refuse_unrouted(rlx_conn *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    rlx_api_error e;
    rlx_api_error_shutdown(&e);
    char *body = rlx_api_error_json(&e);
    if (!ci || !body) {
        free(body);
        return;
    }
    char head[256];
    int hn = snprintf(head, sizeof head, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\nRetry-After: 1\r\nConnection: close\r\n\r\n", strlen(body));
    /* a fresh socket's buffer takes these few hundred bytes at once; a short write leaves the
     * client with a cut response, as before */
    if (send(ci->connect_fd, head, (size_t)hn, MSG_NOSIGNAL | MSG_DONTWAIT) == hn)
        (void)!send(ci->connect_fd, body, strlen(body), MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(ci->connect_fd, SHUT_WR);
    free(body);
    c->log_status = 503;
}

void rlx_http_stop(rlx_srv *s)
{
    if (!s->mhd) return;
    for (rlx_conn *c = s->conns; c; c = c->next)
        if (!c->routed && !c->has_resp && !c->suspended) refuse_unrouted(c);
    rlx_http_resume_all(s);
    MHD_run(s->mhd);
    MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
    uv_close((uv_handle_t *)&s->mhd_poll, NULL);
    uv_close((uv_handle_t *)&s->mhd_timer, NULL);
}
