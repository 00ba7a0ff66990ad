/* http_wait.c - slow clients (http.c's part for sockets): a socket with no request being
 * answered ("waiting": its request still arriving, or idle between requests) must complete a
 * request within --request-timeout of the start of its wait, whatever it trickles (MHD's own
 * timeout counts inactivity only); when sockets reach MHD's limit the oldest waiting one makes
 * room. Only requests being answered count against --max-connections, so clients that never
 * finish a request cannot lock others out. Loop thread. */
#include "server/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Sockets beyond --max-connections that MHD accepts: room for clients sending a request or idle. */
#define WAIT_SLOTS 64

static void wait_unlink(rlx_srv *s, rlx_sock *k)
{
    if (!k->waiting) return;
    if (k->prev) k->prev->next = k->next;
    else s->wait_head = k->next;
    if (k->next) k->next->prev = k->prev;
    else s->wait_tail = k->prev;
    k->prev = k->next = NULL;
    k->waiting = false;
}

static void on_wait_timer(uv_timer_t *t);

/* The timer follows the oldest waiting socket (the list is in order of `since`). */
static void wait_arm(rlx_srv *s)
{
    if (!s->wait_head) {
        uv_timer_stop(&s->wait_timer);
        return;
    }
    double left = s->wait_head->since + s->cfg->request_timeout - rlx_now();
    uv_timer_start(&s->wait_timer, on_wait_timer, left > 0 ? (uint64_t)(left * 1e3) + 1 : 0, 0);
}

void rlx__http_wait_begin(rlx_srv *s, rlx_sock *k)
{
    if (k->waiting || k->dropped) return;
    k->waiting = true;
    k->since = rlx_now();
    k->prev = s->wait_tail;
    k->next = NULL;
    if (s->wait_tail) s->wait_tail->next = k;
    else s->wait_head = k;
    s->wait_tail = k;
    if (s->wait_head == k) wait_arm(s);
}

/* A request of c's socket is being answered: no deadline until the answer is over. */
void rlx__http_wait_end(rlx_conn *c)
{
    rlx_sock *k = c->sock;
    if (!k || !k->waiting) return;
    bool was_head = c->srv->wait_head == k;
    wait_unlink(c->srv, k);
    if (was_head) wait_arm(c->srv);
}

/* Closes a waiting socket. A request that began (or a socket that never had one) first gets a
 * JSON answer, written straight to the socket: MHD queues answers only once a request's headers
 * are in, and nothing of an answer has been sent on a waiting socket. shutdown(2) then ends it;
 * MHD sees the hang-up and closes it (on_completed logs the request with this status). */
static void drop(rlx_srv *s, rlx_sock *k, int status)
{
    wait_unlink(s, k);
    k->dropped = true;
    rlx_conn *c = k->conn;
    if (c || !k->served) {
        rlx_api_error e;
        if (status == 408) {
            rlx_api_errorf(&e, 408, RLX_API_ERR_INVALID, NULL,
                           "The request did not arrive whole within %d s (--request-timeout); the connection is "
                           "closed.", s->cfg->request_timeout);
            e.code = "request_timeout";
            s->metrics.request_timeouts++;
        } else {
            rlx_api_errorf(&e, 503, RLX_API_ERR_SERVER, NULL,
                           "The server is at its connection limit and closed this connection, which had not "
                           "sent a whole request, to accept a newer one; retry shortly.");
            s->metrics.evicted++;
        }
        char *body = rlx_api_error_json(&e), msg[1024];
        int n = snprintf(msg, sizeof msg, "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                         "Connection: close\r\n%s\r\n%s", status == 408 ? "408 Request Timeout" : "503 Service Unavailable",
                         body ? strlen(body) : 0, status == 503 ? "Retry-After: 1\r\n" : "", body ? body : "");
        free(body);
        /* best effort: a client that does not read may not get it */
        if (n > 0 && (size_t)n < sizeof msg && send(k->fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) (void)0;
        if (c) c->log_status = status;
    }
    shutdown(k->fd, SHUT_RDWR);
}

static void on_wait_timer(uv_timer_t *t)
{
    rlx_srv *s = t->data;
    double now = rlx_now();
    while (s->wait_head && s->wait_head->since + s->cfg->request_timeout <= now + 1e-3) drop(s, s->wait_head, 408);
    wait_arm(s);
    rlx_http_kick(s);
}

unsigned rlx__http_mhd_limit(const rlx_srv *s)
{
    return (unsigned)(s->cfg->max_connections + WAIT_SLOTS);
}

void rlx__http_on_connection(void *cls, struct MHD_Connection *mc, void **socket_ctx, enum MHD_ConnectionNotificationCode t)
{
    rlx_srv *s = cls;
    if (t == MHD_CONNECTION_NOTIFY_STARTED) {
        s->n_conns++;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        rlx_sock *k = ci ? calloc(1, sizeof *k) : NULL;
        if (!k) { /* untracked, it could outstay any timeout: refuse it */
            if (ci) shutdown(ci->connect_fd, SHUT_RDWR);
            return;
        }
        k->fd = ci->connect_fd;
        *socket_ctx = k;
        rlx__http_wait_begin(s, k);
        /* one socket short of MHD's limit (it would stop accepting): the oldest socket that is
         * not being answered makes room, so a client that sends its request promptly gets in */
        if ((unsigned)s->n_conns + 1 >= rlx__http_mhd_limit(s) && s->wait_head && s->wait_head != k) {
            drop(s, s->wait_head, 503);
            wait_arm(s);
        }
        return;
    }
    s->n_conns--;
    s->n_closed++;
    rlx_sock *k = *socket_ctx;
    if (k) {
        bool was_head = s->wait_head == k;
        wait_unlink(s, k);
        if (k->conn) k->conn->sock = NULL;
        free(k);
        *socket_ctx = NULL;
        if (was_head) wait_arm(s);
    }
    rlx_srv_maybe_exit(s);
}
