/* routes.c - the HTTP API: a table of routes, authentication, and one handler per endpoint.
 * Handlers run on the loop thread and never block: they parse and validate (bounded by
 * --max-body) and hand tokenizing, detokenizing and template rendering to the threadpool. */
#include "server/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define INVALID "invalid_request_error"

typedef void (*handler_fn)(rlx_srv *s, rlx_conn *c);

typedef struct route {
    const char *method, *path;
    handler_fn fn;
    bool open;                    /* no API key needed */
    const char *endpoint;         /* metrics label */
} route;

/* Equal-time comparison so response timing does not reveal how much of a key matched. */
static bool key_equal(const char *a, size_t an, const char *b, size_t bn)
{
    unsigned char d = an != bn;
    for (size_t i = 0; i < an; i++) d |= (unsigned char)a[i] ^ (unsigned char)b[i % (bn ? bn : 1)];
    return d == 0;
}

static bool authorized(rlx_srv *s, rlx_conn *c)
{
    const char *key = s->cfg->api_key;
    if (!key) return true;
    const char *h = MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return false;
    h += 7;
    while (*h == ' ') h++;
    return key_equal(h, strlen(h), key, strlen(key));
}

static void respond_json(rlx_conn *c, int status, cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    rlx_conn_respond(c, status, "application/json", s);
}

/* ---- simple endpoints --------------------------------------------------------------------- */

static void h_health(rlx_srv *s, rlx_conn *c)
{
    if (s->n_ready == s->n_models && !s->stopping) {
        rlx_conn_respond(c, 200, "application/json", strdup("{\"status\":\"ok\"}"));
        return;
    }
    rlx_api_error e;
    rlx_api_errorf(&e, 503, "unavailable_error", NULL, s->stopping ? "The server is shutting down."
                   : "Loading model: the server is not ready yet.");
    rlx_conn_error(c, &e);
}

static cJSON *model_json(const rlx_model_slot *m)
{
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "id", m->cfg->name);
    cJSON_AddStringToObject(d, "object", "model");
    cJSON_AddNumberToObject(d, "created", (double)m->created);
    cJSON_AddStringToObject(d, "owned_by", "rlxd");
    cJSON *meta = cJSON_AddObjectToObject(d, "meta");
    cJSON_AddStringToObject(meta, "path", m->cfg->path);
    cJSON_AddStringToObject(meta, "status", m->state == RLX_MODEL_READY ? "ready"
                            : m->state == RLX_MODEL_LOADING ? "loading" : "failed");
    if (m->state == RLX_MODEL_READY) {
        cJSON_AddNumberToObject(meta, "n_ctx", rlx_worker_n_ctx(m->w));
        cJSON_AddNumberToObject(meta, "n_vocab", m->n_vocab);
    }
    return d;
}

static void h_models(rlx_srv *s, rlx_conn *c)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    for (size_t i = 0; i < s->n_models; i++) cJSON_AddItemToArray(data, model_json(&s->models[i]));
    respond_json(c, 200, o);
}

/* GET /v1/models/{id} */
static void h_model(rlx_srv *s, rlx_conn *c)
{
    const char *id = c->path + strlen("/v1/models/");
    for (size_t i = 0; i < s->n_models; i++)
        if (!strcmp(s->models[i].cfg->name, id)) {
            respond_json(c, 200, model_json(&s->models[i]));
            return;
        }
    rlx_api_error e;
    rlx_api_errorf(&e, 404, INVALID, "model", "The model '%s' does not exist; GET /v1/models lists the served ones.", id);
    e.code = "model_not_found";
    rlx_conn_error(c, &e);
}

static void h_metrics(rlx_srv *s, rlx_conn *c)
{
    rlx_metrics_model mm[RLX_SERVE_MAX_MODELS];
    size_t n = 0;
    for (size_t i = 0; i < s->n_models; i++) {
        if (s->models[i].state != RLX_MODEL_READY) continue;
        rlx_worker_stats st = {0};
        rlx_worker_get_stats(s->models[i].w, &st);
        mm[n++] = (rlx_metrics_model){.name = s->models[i].cfg->name, .running = st.running, .waiting = st.waiting,
                                      .kv_usage = st.kv_usage, .prefix_queries = st.prefix_queries,
                                      .prefix_hits = st.prefix_hits};
    }
    rlx_conn_respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", rlx_metrics_render(&s->metrics, mm, n));
}

static rlx_model_slot *pick_model(rlx_srv *s, rlx_conn *c, const char *name)
{
    rlx_api_error e;
    snprintf(c->model, sizeof c->model, "%s", name ? name : s->models[0].cfg->name);
    rlx_model_slot *m = rlx_srv_model(s, name, &e);
    if (!m) rlx_conn_error(c, &e);
    return m;
}

/* Tokenizing, detokenizing and rendering templates run on the libuv threadpool; the
 * connection waits suspended and the task hands back a finished JSON answer. */
typedef enum { TASK_TOKENIZE, TASK_DETOKENIZE, TASK_TEMPLATE } task_kind;

typedef struct route_task {
    uv_work_t work;
    rlx_conn *conn;                /* NULL once the connection is gone */
    rlx_model_slot *m;
    task_kind kind;
    char *text;                    /* tokenize input */
    bool add_special, parse_special;
    int32_t *ids;                  /* detokenize input */
    size_t n_ids;
    rlx_api_request req;           /* template input */
    int status;
    char *body;                    /* the answer (JSON) */
} route_task;

static char *print_free(cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static void task_work(uv_work_t *w)
{
    route_task *t = w->data;
    rlx_api_error e;
    rlx_error err = {0};
    t->status = 200;
    if (t->kind == TASK_TOKENIZE) {
        int32_t *ids = NULL;
        size_t n = 0;
        int rc = rlx_tokenize(t->m->tok, t->text, strlen(t->text), t->add_special, t->parse_special, &ids, &n, &err);
        if (rc) {
            rlx_api_error_from_rlx(&e, rc, err.msg);
            t->status = e.status;
            t->body = rlx_api_error_json(&e);
            return;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON *arr = cJSON_AddArrayToObject(o, "tokens");
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
        free(ids);
        t->body = print_free(o);
    } else if (t->kind == TASK_DETOKENIZE) {
        char *raw = rlx_detokenize(t->m->tok, t->ids, t->n_ids, false);
        /* arbitrary ids may end inside a character or hold lone bytes */
        char *text = raw ? rlx_api_utf8_sanitize(raw, strlen(raw), NULL) : NULL;
        free(raw);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "content", text ? text : "");
        free(text);
        t->body = print_free(o);
    } else {
        char *prompt = NULL;
        if (rlx_render_chat(t->m, &t->req, &prompt, &e)) {
            t->status = e.status;
            t->body = rlx_api_error_json(&e);
            return;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "prompt", prompt);
        free(prompt);
        t->body = print_free(o);
    }
}

static void task_done(uv_work_t *w, int status)
{
    route_task *t = w->data;
    rlx_srv *s = t->m->srv;
    s->n_tasks--;
    if (t->conn) {
        rlx_conn *c = t->conn;
        if (status) {
            rlx_api_error e;
            rlx_api_errorf(&e, 503, "unavailable_error", NULL, "The server is shutting down.");
            rlx_conn_error(c, &e);
            free(t->body);
        } else {
            rlx_conn_respond(c, t->status, "application/json", t->body);
        }
        rlx_conn_wake(c);
    } else {
        free(t->body);
    }
    free(t->text);
    free(t->ids);
    rlx_api_request_free(&t->req);
    free(t);
    rlx_srv_maybe_exit(s);
}

static route_task *task_new(rlx_conn *c, rlx_model_slot *m, task_kind kind)
{
    route_task *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->conn = c;
    t->m = m;
    t->kind = kind;
    t->work.data = t;
    return t;
}

static void task_queue(rlx_srv *s, rlx_conn *c, route_task *t)
{
    if (uv_queue_work(s->loop, &t->work, task_work, task_done)) {
        rlx_api_error e;
        rlx_api_errorf(&e, 500, "server_error", NULL, "Cannot queue the work for this request.");
        rlx_conn_error(c, &e);
        free(t->text);
        free(t->ids);
        rlx_api_request_free(&t->req);
        free(t);
        return;
    }
    s->n_tasks++;
    c->task_conn = &t->conn;
}

static void oom(rlx_conn *c)
{
    rlx_api_error e;
    rlx_api_errorf(&e, 500, "server_error", NULL, "Out of memory.");
    rlx_conn_error(c, &e);
}

static void h_tokenize(rlx_srv *s, rlx_conn *c)
{
    char *text, *model;
    bool add_special = true, parse_special = true;
    rlx_api_error e;
    if (rlx_api_parse_tokenize(c->body, c->body_len, &text, &add_special, &parse_special, &model, &e)) {
        rlx_conn_error(c, &e);
        return;
    }
    rlx_model_slot *m = pick_model(s, c, model);
    free(model);
    route_task *t = m ? task_new(c, m, TASK_TOKENIZE) : NULL;
    if (!t) {
        if (m) oom(c);
        free(text);
        return;
    }
    t->text = text;
    t->add_special = add_special;
    t->parse_special = parse_special;
    task_queue(s, c, t);
}

static void h_detokenize(rlx_srv *s, rlx_conn *c)
{
    rlx_api_error e;
    char *model = NULL;
    int32_t *ids;
    size_t n;
    /* the model decides the vocabulary size, so look at "model" before validating ids */
    if (rlx_api_parse_detokenize(c->body, c->body_len, 0, &ids, &n, &model, &e)) {
        rlx_conn_error(c, &e);
        return;
    }
    rlx_model_slot *m = pick_model(s, c, model);
    free(model);
    if (!m) { free(ids); return; }
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= m->n_vocab) {
            free(ids);
            rlx_api_errorf(&e, 400, INVALID, "tokens", "'tokens' must hold token ids between 0 and %d.", m->n_vocab - 1);
            rlx_conn_error(c, &e);
            return;
        }
    route_task *t = task_new(c, m, TASK_DETOKENIZE);
    if (!t) { free(ids); oom(c); return; }
    t->ids = ids;
    t->n_ids = n;
    task_queue(s, c, t);
}

static rlx_model_slot *parse_for_model(rlx_srv *s, rlx_conn *c, rlx_api_kind kind, rlx_api_request *r)
{
    rlx_api_error e;
    if (rlx_api_parse(r, kind, c->body ? c->body : "", c->body_len, 0, &e)) {
        rlx_conn_error(c, &e);
        return NULL;
    }
    /* the session may also come as a header, for clients that cannot add body fields */
    const char *sid = MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, "X-Session-Id");
    if (sid && !r->base->session_id && !(r->base->session_id = strdup(sid))) {
        oom(c);
        rlx_api_request_free(r);
        return NULL;
    }
    return pick_model(s, c, r->model);
}

static void h_apply_template(rlx_srv *s, rlx_conn *c)
{
    rlx_api_request r;
    rlx_model_slot *m = parse_for_model(s, c, RLX_API_CHAT, &r);
    route_task *t = m ? task_new(c, m, TASK_TEMPLATE) : NULL;
    if (!t) {
        if (m) oom(c);
        rlx_api_request_free(&r);
        return;
    }
    t->req = r;
    task_queue(s, c, t);
}

static void generate(rlx_srv *s, rlx_conn *c, rlx_api_kind kind)
{
    rlx_api_request r;
    rlx_api_error e;
    rlx_model_slot *m = parse_for_model(s, c, kind, &r);
    if (m && s->stopping) {
        rlx_api_errorf(&e, 503, "unavailable_error", NULL, "The server is shutting down.");
        rlx_conn_error(c, &e);
        m = NULL;
    }
    if (!m) {
        rlx_api_request_free(&r);
        return;
    }
    bool stream = r.stream;
    rlx_job *j;
    if (rlx_job_start(s, m, &r, rlx_conn_job_notify, c, &j, &e)) {
        rlx_conn_error(c, &e);
        rlx_api_request_free(&r);
        return;
    }
    c->job = j;
    c->stream = stream;
    c->stream_ctype = kind == RLX_API_GENERATE ? "application/x-ndjson" : "text/event-stream";
}

static void h_completions(rlx_srv *s, rlx_conn *c) { generate(s, c, RLX_API_COMPLETIONS); }
static void h_chat(rlx_srv *s, rlx_conn *c) { generate(s, c, RLX_API_CHAT); }
static void h_generate(rlx_srv *s, rlx_conn *c) { generate(s, c, RLX_API_GENERATE); }

/* ---- sessions ----------------------------------------------------------------------------
 * Reads go to the worker's session table or its sqlite3 store (one indexed query, bounded by
 * the page size), so they are answered on the loop like /metrics. */

static cJSON *session_json(const rlx_session_info *i)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", i->id);
    cJSON_AddStringToObject(o, "object", "session");
    cJSON_AddStringToObject(o, "model", i->model);
    cJSON_AddNumberToObject(o, "n_tokens", i->n_tokens);
    cJSON_AddNumberToObject(o, "created", (double)(long long)i->created);
    cJSON_AddNumberToObject(o, "updated", (double)(long long)i->updated);
    cJSON_AddBoolToObject(o, "kv_snapshot", i->has_kv_snapshot);
    return o;
}

static long query_long(rlx_conn *c, const char *key, long def, long max)
{
    const char *v = MHD_lookup_connection_value(c->mc, MHD_GET_ARGUMENT_KIND, key);
    if (!v) return def;
    char *end;
    long x = strtol(v, &end, 10);
    return (end == v || *end || x < 0) ? -1 : (x > max ? max : x);
}

static void h_sessions(rlx_srv *s, rlx_conn *c)
{
    long offset = query_long(c, "offset", 0, 1L << 30), limit = query_long(c, "limit", 100, 1000);
    rlx_api_error e;
    if (offset < 0 || limit < 0) {
        rlx_api_errorf(&e, 400, INVALID, offset < 0 ? "offset" : "limit", "offset and limit must be non-negative integers.");
        rlx_conn_error(c, &e);
        return;
    }
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data");
    double total = 0;
    for (size_t m = 0; m < s->n_models; m++) {
        if (s->models[m].state != RLX_MODEL_READY) continue;
        rlx_session_info *list = NULL;
        size_t n = 0, tot = 0;
        rlx_error err = {0};
        if (rlx_worker_sessions_list(s->models[m].w, (size_t)offset, (size_t)limit, &list, &n, &tot, &err) == 0) {
            for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(data, session_json(&list[i]));
            total += (double)tot;
        }
        free(list);
    }
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddNumberToObject(o, "total", total);
    respond_json(c, 200, o);
}

static void h_session(rlx_srv *s, rlx_conn *c)
{
    const char *id = c->path + strlen("/v1/sessions/");
    bool del = !strcmp(c->method, "DELETE");
    rlx_api_error e;
    rlx_error err = {0};
    for (size_t m = 0; m < s->n_models; m++) {
        if (s->models[m].state != RLX_MODEL_READY) continue;
        rlx_session_info info;
        int32_t *tokens = NULL;
        size_t n = 0;
        int rc = del ? rlx_worker_session_delete(s->models[m].w, id, &err)
                     : rlx_worker_session_get(s->models[m].w, id, &info, &tokens, &n, &err);
        if (rc == RLX_ENOTFOUND) continue;
        if (rc) {
            rlx_api_errorf(&e, rc == RLX_EINVAL ? 400 : 500, rc == RLX_EINVAL ? INVALID : "server_error",
                           rc == RLX_EINVAL ? "session_id" : NULL, "%s", err.msg);
            rlx_conn_error(c, &e);
            return;
        }
        cJSON *o;
        if (del) {
            o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "id", id);
            cJSON_AddStringToObject(o, "object", "session.deleted");
            cJSON_AddBoolToObject(o, "deleted", true);
        } else {
            o = session_json(&info);
            cJSON *arr = cJSON_AddArrayToObject(o, "tokens");
            for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(tokens[i]));
            free(tokens);
        }
        respond_json(c, 200, o);
        return;
    }
    rlx_api_errorf(&e, 404, INVALID, "session_id", "The session '%s' does not exist.", id);
    e.code = "session_not_found";
    rlx_conn_error(c, &e);
}

static const route routes[] = {
    {"GET", "/health", h_health, true, "health"},
    {"GET", "/v1/models", h_models, false, "models"},
    {"GET", "/v1/models/*", h_model, false, "models"},
    {"GET", "/metrics", h_metrics, false, "metrics"},
    {"POST", "/v1/completions", h_completions, false, "completions"},
    {"POST", "/v1/chat/completions", h_chat, false, "chat_completions"},
    {"POST", "/v1/generate", h_generate, false, "generate"},
    {"POST", "/tokenize", h_tokenize, false, "tokenize"},
    {"POST", "/detokenize", h_detokenize, false, "detokenize"},
    {"POST", "/apply-template", h_apply_template, false, "apply_template"},
    {"GET", "/v1/sessions", h_sessions, false, "sessions"},
    {"GET", "/v1/sessions/*", h_session, false, "sessions"},
    {"DELETE", "/v1/sessions/*", h_session, false, "sessions"},
};

/* Exact paths, or a prefix when the route ends in '*' (one non-empty path segment). */
static bool path_match(const char *pattern, const char *path)
{
    size_t n = strlen(pattern);
    if (n && pattern[n - 1] == '*')
        return !strncmp(pattern, path, n - 1) && path[n - 1] && !strchr(path + n - 1, '/');
    return !strcmp(pattern, path);
}

const char *rlx_route_endpoint(const char *path)
{
    for (size_t i = 0; i < RLX_ARRAY_LEN(routes); i++)
        if (path_match(routes[i].path, path)) return routes[i].endpoint;
    return "other";
}

void rlx_route(rlx_srv *s, rlx_conn *c)
{
    const route *hit = NULL;
    bool path_known = false;
    const char *allow = NULL;
    for (size_t i = 0; i < RLX_ARRAY_LEN(routes); i++) {
        if (!path_match(routes[i].path, c->path)) continue;
        path_known = true;
        allow = routes[i].method;
        if (!strcmp(routes[i].method, c->method) || (!strcmp(c->method, "HEAD") && !strcmp(routes[i].method, "GET")))
            hit = &routes[i];
    }
    rlx_api_error e;
    if (!path_known) {
        rlx_api_errorf(&e, 404, INVALID, NULL, "Unknown endpoint %s %s.", c->method, c->path);
        e.code = "not_found";
        rlx_conn_error(c, &e);
        return;
    }
    if (!hit) {
        rlx_api_errorf(&e, 405, INVALID, NULL, "%s does not accept %s; use %s.", c->path, c->method, allow);
        rlx_conn_error(c, &e);
        c->allow = allow;
        return;
    }
    c->endpoint = hit->endpoint;
    if (!hit->open && !authorized(s, c)) {
        rlx_api_errorf(&e, 401, "authentication_error", NULL,
                       "Missing or incorrect API key: send the header 'Authorization: Bearer KEY'.");
        e.code = "invalid_api_key";
        rlx_conn_error(c, &e);
        return;
    }
    hit->fn(s, c);
}
