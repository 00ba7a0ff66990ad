/* http.c - libmicrohttpd driven by the libuv loop: MHD runs with its own epoll set and no
 * threads; a uv_poll on that epoll fd and a uv_timer from MHD_get_timeout call MHD_run.
 * Requests that wait on the engine are suspended; their socket is watched for hang-up
 * (MHD does not notice a client leaving while a connection is suspended) so the generation
 * can be cancelled. Streaming uses a content-reader callback that suspends when no bytes wait;
 * a stream whose client leaves more than --max-pending-bytes unread is cancelled.
 *
 * Slow clients (--request-timeout, room at the connection limit): http_wait.c. */
#include "server/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Request headers beyond this get a JSON 431; MHD's pool (twice this) answers larger ones itself,
 * in HTML (see README, "HTTP errors libmicrohttpd answers itself"). */
#define MAX_HEADER_BYTES (32 * 1024)


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
    /* MHD takes its listening socket out of its epoll set at the connection limit and puts it
     * back only at the start of a run: after a run that closed sockets, run again, or clients
     * in the backlog wait for an unrelated event */
    for (int i = 0; i < 4; i++) {
        unsigned closed = s->n_closed;
        MHD_run(s->mhd);
        if (s->n_closed == closed) break;
    }
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
    rlx_job_log_tokens(j, &c->prompt_tokens, &c->completion_tokens);
    if (!j->finished || j->aborted) {
        if (j->aborted) c->log_status = j->err.status; /* ended at shutdown, not by the client (499) */
        return;
    }
    c->ttft = j->n_choices ? j->choices[0].timings.ttft_s : -1;
    if (j->n_choices) c->finish = rlx_api_finish_name(j->choices[0].finish);
    if (j->failed) c->finish = c->stream ? "error" : NULL; /* a stream that ended with an error event */
}

/* c's client left after its request was routed: its work is cancelled, its response ends. No
 * MHD run here (reap calls it from inside MHD's callbacks; a resume wakes MHD's loop itself). */
static void routed_hangup(rlx_conn *c)
{
    c->gone = true;
    c->log_status = 499; /* nginx's "client closed request" */
    if (c->job) {
        take_usage(c, c->job);
        rlx_job_detach(c->job);
        c->job = NULL;
    }
    resume(c);
}

static void on_hangup(uv_poll_t *p, int status, int events)
{
    rlx_conn *c = p->data;
    if (status >= 0 && !(events & UV_DISCONNECT)) return;
    if (!c->routed && !c->has_resp && c->sock) {
        /* it left while its body was arriving: MHD would wait for the rest until
           --request-timeout (and log a 408); the socket ends now */
        c->gone = true;
        c->log_status = 499;
        uv_poll_stop(p);
        shutdown(c->sock->fd, SHUT_RDWR);
        rlx_http_kick(c->srv);
        return;
    }
    routed_hangup(c);
    rlx_http_kick(c->srv);
}

void rlx_http_reap_hangups(rlx_srv *s)
{
    for (rlx_conn *c = s->conns; c; c = c->next) {
        if (!c->job || c->gone) continue; /* (a job: routed) */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci) continue;
        struct pollfd pf = {.fd = ci->connect_fd, .events = POLLRDHUP};
        /* as the hang-up watch would at the loop's next turn, or MHD at its next write when the
           connection is not suspended (cancel_unread ends one the same way) */
        if (poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR))) routed_hangup(c);
    }
}

/* Watches c's socket for the client leaving (on_hangup): while it is suspended, and while its
 * body arrives. */
static void watch_hangup(rlx_conn *c)
{
    if (!c->poll_init) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci && uv_poll_init_socket(c->srv->loop, &c->poll, ci->connect_fd) == 0) {
            c->poll_init = true;
            c->poll.data = c;
        }
    }
    if (c->poll_init) uv_poll_start(&c->poll, UV_DISCONNECT, on_hangup);
}

static void suspend(rlx_conn *c)
{
    if (c->suspended) return;
    MHD_suspend_connection(c->mc);
    c->suspended = true;
    watch_hangup(c);
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
            rlx_call_drop(&c->call);
        }
        if (c->job) {
            rlx_job_detach(c->job);
            c->job = NULL;
        }
        resume(c);
    }
}

/* The client of a stream left more than --max-pending-bytes unread (it reads slower than the
 * engine writes, or not at all): cancel the generation rather than buffer without bound. */
static void cancel_unread(rlx_conn *c, rlx_job *j)
{
    rlx_srv *s = c->srv;
    char path[1100];
    fprintf(stderr, "rlxd: %s %s: stream cancelled, the client left %zu bytes unread (over --max-pending-bytes %lld)\n",
            c->method, rlx_log_escape(c->path, true, path, sizeof path), j->len - j->off,
            (long long)s->cfg->max_pending_bytes);
    s->metrics.unread_cancelled++;
    take_usage(c, j);
    c->unread = true;
    c->finish = "unread";
    c->gone = true; /* the reader ends the response */
    rlx_job_detach(j); /* frees what was queued */
    c->job = NULL;
    resume(c);
    /* the client reads nothing: end the socket now rather than after MHD's inactivity timeout */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci) shutdown(ci->connect_fd, SHUT_RDWR);
}

void rlx_conn_job_notify(rlx_job *job)
{
    rlx_conn *c = job->sink;
    if (c->stream && !job->finished && job->len - job->off > (size_t)c->srv->cfg->max_pending_bytes) {
        cancel_unread(c, job); /* detaches, and so may free, job */
        return;
    }
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
    if (c->allow[0]) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, c->allow);
    if (c->close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    rlx_cors_headers(c, r);
    if (!c->log_status) c->log_status = c->status;
    rlx__http_wait_end(c);
    enum MHD_Result ok = MHD_queue_response(c->mc, (unsigned)c->status, r);
    MHD_destroy_response(r);
    return ok;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    rlx_conn *c = cls;
    rlx_job *j = c->job;
    if (c->gone || (j && j->out_lost)) return MHD_CONTENT_READER_END_WITH_ERROR; /* lost bytes: no clean end */
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
    rlx_cors_headers(c, r);
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
    /* the client closed its side (or the socket) before its answer: the work is cancelled, and
       the connection closed with no answer rather than an empty 500 a half-closed client reads */
    if (c->gone && !c->has_resp) return MHD_NO;
    if (c->has_resp) return queue_resp(c);
    if (c->call) {
        suspend(c);
        return MHD_YES;
    }
    rlx_job *j = c->job;
    if (j && c->stream && j->started) return c->queued ? MHD_YES : queue_stream(c);
    if (j && j->finished) {
        /* a whole response, or an error that came before a stream could start */
        take_usage(c, j);
        /* the job's buffer is handed over, not copied: no allocation can lose the answer now */
        char *body = j->out;
        if (body && j->off) memmove(body, body + j->off, j->len - j->off + 1);
        j->out = NULL;
        j->off = j->len = j->cap = 0;
        rlx_conn_respond(c, j->status == 200 && j->failed ? j->err.status : j->status, "application/json", body);
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

/* One access-log line and one metrics count for a finished request. */
static void access_log(rlx_srv *s, const rlx_conn *c)
{
    const char *endpoint = c->endpoint ? c->endpoint : "other";
    rlx_metrics_request(&s->metrics, endpoint, c->log_status);
    char line[4096];
    rlx_access_entry ae = {.method = c->method, .path = c->path, .model = c->model[0] ? c->model : NULL,
                           .status = c->log_status, .prompt_tokens = c->prompt_tokens,
                           .completion_tokens = c->completion_tokens, .ttft_s = c->ttft,
                           .duration_s = rlx_now() - c->t0, .finish = c->log_status == 499 ? "cancelled" : c->finish};
    rlx_access_log_format(&ae, s->cfg->log_json, line, sizeof line);
    fputs(line, stderr);
}

static rlx_conn *new_conn(rlx_srv *s, struct MHD_Connection *mc, const char *uri)
{
    rlx_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->srv = s;
    c->mc = mc;
    c->t0 = rlx_now();
    c->ttft = -1;
    snprintf(c->method, sizeof c->method, "-"); /* MHD tells the method with the headers */
    snprintf(c->path, sizeof c->path, "%.*s", (int)strcspn(uri, "?"), uri); /* as MHD gives it later */
    c->endpoint = rlx_route_endpoint(c->path);
    const union MHD_ConnectionInfo *si = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (si && si->socket_context) {
        c->sock = si->socket_context;
        c->sock->conn = c;
    }
    return c;
}

/* MHD_OPTION_URI_LOG_CALLBACK: the request line has arrived (its headers may never come). The
 * connection state starts here so that requests MHD answers itself, or that time out, are
 * logged too. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *mc)
{
    return new_conn(cls, mc, uri);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    rlx_srv *s = cls;
    rlx_conn *c = *con_cls;
    if (!c && !(c = *con_cls = new_conn(s, mc, url))) return MHD_NO;
    if (!c->accessed) { /* the headers are in */
        c->accessed = true;
        snprintf(c->method, sizeof c->method, "%s", method);
        snprintf(c->path, sizeof c->path, "%s", url); /* the log escapes what the client chose */
        c->endpoint = rlx_route_endpoint(c->path);
        c->next = s->conns;
        if (s->conns) s->conns->prev = c;
        s->conns = c;
        rlx_api_error e;
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        const union MHD_ConnectionInfo *hi = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
        rlx_cors_request(s, c); /* the answers below carry the CORS headers too (a browser sees their status) */
        if (rlx__http_framing_check(mc, version, &e)) {
            rlx_conn_error(c, &e);
            c->close = true;
            return queue_resp(c);
        }
        /* the probes answer whatever the load: a saturated server is alive, and its metrics are
           wanted most then (as llama-server and vLLM keep them) */
        bool probe = !strcmp(method, "GET") && (!strcmp(c->endpoint, "health") || !strcmp(c->endpoint, "metrics"));
        if (s->n_requests >= s->cfg->max_connections && !probe) {
            rlx_api_errorf(&e, 503, RLX_API_ERR_SERVER, NULL, "Too many requests in progress (%d); retry shortly.",
                           s->cfg->max_connections);
            rlx_conn_error(c, &e);
            return queue_resp(c);
        }
        if (rlx_route_refused_early(s, c)) {
            rlx_api_errorf(&e, 401, RLX_API_ERR_AUTH, NULL,
                           "Missing or incorrect API key: send the header 'Authorization: Bearer KEY'.");
            e.code = "invalid_api_key";
            rlx_conn_error(c, &e);
            c->close = cl && strcmp(cl, "0"); /* the body is not read */
            return queue_resp(c);
        }
        if (hi && hi->header_size > MAX_HEADER_BYTES) {
            rlx_api_errorf(&e, 431, RLX_API_ERR_INVALID, NULL,
                           "The request's headers are %zu bytes; the server accepts at most %d.", hi->header_size,
                           MAX_HEADER_BYTES);
            rlx_conn_error(c, &e);
            return queue_resp(c);
        }
        if (cl && strtoll(cl, NULL, 10) > s->cfg->max_body) {
            rlx_api_errorf(&e, 413, RLX_API_ERR_INVALID, NULL,
                           "The request body is larger than the server's limit of %lld bytes.",
                           (long long)s->cfg->max_body);
            rlx_conn_error(c, &e);
            return queue_resp(c);
        }
        if (cl && strtoll(cl, NULL, 10) > 0) watch_hangup(c); /* a client leaving mid-body is seen at once */
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
        c->counted = true;
        s->n_requests++;
        rlx__http_wait_end(c);
        if (c->too_large) {
            rlx_api_error e;
            rlx_api_errorf(&e, 413, RLX_API_ERR_INVALID, NULL,
                           "The request body is larger than the server's limit of %lld bytes.",
                           (long long)s->cfg->max_body);
            rlx_conn_error(c, &e);
        } else {
            /* RFC 8259 (8.1) lets a parser ignore a UTF-8 byte order mark, which Windows tools
             * (PowerShell 5's utf8 files) put before the JSON */
            if (c->body_len >= 3 && !memcmp(c->body, "\xEF\xBB\xBF", 3)) {
                memmove(c->body, c->body + 3, c->body_len - 2); /* with the terminating NUL */
                c->body_len -= 3;
            }
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
    rlx_srv *s = cls;
    rlx_conn *c = *con_cls;
    if (!c) return;
    *con_cls = NULL;
    rlx_sock *k = c->sock;
    if (k) {
        k->conn = NULL;
        if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) { /* kept alive: waits for the next request */
            k->served = true;
            rlx__http_wait_begin(s, k);
        }
    }
    if (!c->log_status) { /* MHD answered itself (a malformed request, see README) */
        const union MHD_ConnectionInfo *ri = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_HTTP_STATUS);
        if (ri && ri->http_status) c->log_status = (int)ri->http_status;
    }
    if (!c->accessed) {
        /* ended before its headers were in: logged when answered (by MHD, or 408/503 by drop) */
        if (c->log_status) access_log(s, c);
        free(c);
        return;
    }
    if (c->counted) s->n_requests--;
    rlx_call_drop(&c->call); /* a call in flight then answers no one */
    if (c->job) {
        take_usage(c, c->job);
        if (!c->job->finished) c->log_status = 499;
        rlx_job_detach(c->job);
        c->job = NULL;
    }
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && c->stream && c->log_status == 200 && !c->unread)
        c->log_status = 499;
    if (!c->log_status) c->log_status = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? c->status : 499;
    access_log(s, c);
    if (c->prev) c->prev->next = c->next;
    else s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    free(c->body);
    free(c->resp);
    if (c->poll_init) uv_close((uv_handle_t *)&c->poll, free_conn);
    else free(c);
    rlx_srv_maybe_exit(s);
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
                              MHD_OPTION_NOTIFY_CONNECTION, rlx__http_on_connection, s,
                              MHD_OPTION_URI_LOG_CALLBACK, on_request_line, s,
                              MHD_OPTION_CONNECTION_LIMIT, rlx__http_mhd_limit(s),
                              /* room for 32 KiB of headers however many: each costs libmicrohttpd's
                                 pool a record besides its text (900 headers of 10 bytes filled 64 KiB
                                 and got its HTML 431); pages are touched only as used */
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(8 * MAX_HEADER_BYTES),
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
    if (!ei || uv_poll_init(s->loop, &s->mhd_poll, ei->epoll_fd) || uv_timer_init(s->loop, &s->mhd_timer) ||
        uv_timer_init(s->loop, &s->wait_timer)) {
        MHD_stop_daemon(s->mhd);
        s->mhd = NULL;
        return rlx_errorf(err, RLX_EIO, "cannot watch the HTTP daemon's epoll descriptor");
    }
    s->mhd_poll.data = s;
    s->mhd_timer.data = s;
    s->wait_timer.data = s;
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
        if (!c->call) continue;
        rlx_call_drop(&c->call); /* the call, running or cancelled, then answers no one */
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

static int http_start(rlx_srv *s, rlx_error *err)
{
    int rc = rlx_http_start(s, err);
    if (!rc)
        fprintf(stderr, strchr(s->cfg->host, ':') ? "rlxd: listening on http://[%s]:%d\n"
                : "rlxd: listening on http://%s:%d\n", s->cfg->host, s->port);
    return rc;
}

const rlx_front_ops rlx_http_front = {
    .start = http_start,
    .quiesce = rlx_http_quiesce,
    .end_tasks = rlx_http_end_tasks,
    .kick = rlx_http_kick,
    .idle = rlx_http_idle,
    .stop = rlx_http_stop,
};

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
    uv_close((uv_handle_t *)&s->wait_timer, NULL);
}
