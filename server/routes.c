/* routes.c - the HTTP API: a table of routes, authentication, and one handler per endpoint.
 * Handlers run on the loop thread and never block or compute: bodies above a few KiB are
 * parsed on the libuv threadpool first, and tokenizing, templates and the sessions store are
 * answered there too (tasks.c); generation and embedding requests become jobs (jobs.c,
 * prepare.c, embed_job.c), each route only to a model of its kind. */
#include "engine/pool.h"
#include "server/serve.h"
#include "models/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct parsed parsed;

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
    while (*h == ' ' || *h == '\t') h++;
    size_t n = strlen(h);
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t')) n--; /* a field value's trailing whitespace is not part of it (RFC 9110 5.5) */
    bool ok = false; /* the keys, one per line (config.c): every one compared, whichever matches */
    for (const char *k = key; *k;) {
        size_t kn = strcspn(k, "\n");
        ok |= key_equal(h, n, k, kn);
        k += kn + (k[kn] == '\n');
    }
    return ok;
}

static void respond_json(rlx_conn *c, int status, cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    rlx_conn_respond(c, status, "application/json", s);
}

/* ---- simple endpoints --------------------------------------------------------------------- */

static void h_health(rlx_srv *s, rlx_conn *c, parsed *pb)
{
    (void)pb;
    /* the -m models' start-up loads; models loaded later on demand leave /health alone */
    if (!s->n_booting && !s->stopping) {
        rlx_conn_respond(c, 200, "application/json", strdup("{\"status\":\"ok\"}"));
        return;
    }
    rlx_api_error e;
    if (s->stopping) rlx_api_error_shutdown(&e);
    else rlx_api_errorf(&e, 503, RLX_API_ERR_UNAVAILABLE, NULL, "Loading model: the server is not ready yet.");
    rlx_conn_error(c, &e);
}

/* A name or path from the file system as JSON text: bytes that are not UTF-8 (a file named in
 * another encoding) as U+FFFD, so one such file cannot make the whole listing invalid JSON. */
void rlx__json_add_fs_text(cJSON *o, const char *key, const char *s)
{
    char *t = rlx_api_utf8_sanitize(s, strlen(s), NULL);
    cJSON_AddStringToObject(o, key, t ? t : "");
    free(t);
}

static cJSON *model_json(const rlx_model_slot *m)
{
    cJSON *d = cJSON_CreateObject();
    rlx__json_add_fs_text(d, "id", m->cfg->name);
    cJSON_AddStringToObject(d, "object", "model");
    cJSON_AddNumberToObject(d, "created", (double)m->created);
    cJSON_AddStringToObject(d, "owned_by", "rlxd");
    cJSON *meta = cJSON_AddObjectToObject(d, "meta");
    rlx__json_add_fs_text(meta, "path", m->cfg->path);
    cJSON_AddStringToObject(meta, "status", rlx_model_state_name(m->state));
    cJSON_AddStringToObject(meta, "source", m->boot ? "command_line" : "models_dir");
    if (m->removed) cJSON_AddBoolToObject(meta, "file_removed", true);
    if (m->state == RLX_MODEL_FAILED) rlx__json_add_fs_text(meta, "error", m->err.msg);
    if (m->state == RLX_MODEL_LOADING) cJSON_AddNumberToObject(meta, "progress", atomic_load(&m->load_permille) / 1000.0);
    if (m->keep_alive < 0) cJSON_AddNumberToObject(meta, "keep_alive", -1);
    else cJSON_AddNumberToObject(meta, "keep_alive", m->keep_alive);
    cJSON_AddNumberToObject(meta, "loads", (double)m->n_loads);
    if (m->prof.set) cJSON_AddItemToObject(meta, "profile", rlx_profile_json(&m->prof));
    if (m->state == RLX_MODEL_READY) {
        cJSON_AddNumberToObject(meta, "n_ctx", rlx_worker_n_ctx(m->w));
        cJSON_AddNumberToObject(meta, "n_vocab", m->n_vocab);
        cJSON_AddNumberToObject(meta, "memory_bytes", (double)m->bytes);
        cJSON_AddNumberToObject(meta, "load_seconds", m->load_s);
        cJSON_AddNumberToObject(meta, "requests", m->users);
        int pool = rlx_worker_pooling(m->w);
        cJSON_AddStringToObject(meta, "kind", pool < 0 ? "generation" : pool == RLX_POOL_RANK ? "rerank" : "embedding");
        if (pool >= 0) {
            cJSON_AddStringToObject(meta, "pooling", rlx_pooling_name((rlx_pooling)pool));
            cJSON_AddNumberToObject(meta, "n_embd", rlx_worker_n_embd(m->w));
        }
    }
    return d;
}

static void h_models(rlx_srv *s, rlx_conn *c, parsed *pb)
{
    (void)pb;
    rlx_models_rescan(s, false); /* models added to or removed from --models-dir since */
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    for (size_t i = 0; i < s->n_models; i++) cJSON_AddItemToArray(data, model_json(s->models[i]));
    respond_json(c, 200, o);
}

/* GET /v1/models/{id} */
static void h_model(rlx_srv *s, rlx_conn *c, parsed *pb)
{
    (void)pb;
    const char *id = c->path + strlen("/v1/models/");
    rlx_models_rescan(s, false);
    rlx_model_slot *m = rlx_models_find(s, id);
    if (m) {
        respond_json(c, 200, model_json(m));
        return;
    }
    rlx_api_error e;
    rlx_api_errorf(&e, 404, RLX_API_ERR_INVALID, "model", "The model '%s' does not exist; GET /v1/models lists the served ones.", id);
    e.code = "model_not_found";
    rlx_conn_error(c, &e);
}

static void h_metrics(rlx_srv *s, rlx_conn *c, parsed *pb)
{
    (void)pb;
    rlx_metrics_model *mm = calloc(s->n_models ? s->n_models : 1, sizeof *mm);
    if (!mm) {
        rlx_conn_respond(c, 500, "text/plain", NULL);
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < s->n_models; i++) {
        if (s->models[i]->state != RLX_MODEL_READY) continue;
        rlx_worker_stats st = {0};
        rlx_worker_get_stats(s->models[i]->w, &st);
        mm[n++] = (rlx_metrics_model){.name = s->models[i]->cfg->name, .running = st.running, .waiting = st.waiting,
                                      .kv_usage = st.kv_usage, .prefix_queries = st.prefix_queries,
                                      .prefix_hits = st.prefix_hits, .preemptions = st.preemptions,
                                      .embd_inputs = st.embd_inputs, .embd_tokens = st.embd_tokens,
                                      .draft_tokens = st.draft_tokens, .draft_accepted = st.draft_accepted,
                                      .draft_positions = st.draft_positions,
                                      .cpu_passes_one = st.cpu_passes_one, .cpu_passes_more = st.cpu_passes_more,
                                      .grammar_aside_s = st.grammar_aside_s,
                                      .state_slots_used = st.state_slots_used, .state_slots_total = st.state_slots_total,
                                      .state_ckpt_entries = st.state_ckpt_entries, .state_ckpt_bytes = st.state_ckpt_bytes,
                                      .state_ckpt_hits = st.state_ckpt_hits, .state_ckpt_evictions = st.state_ckpt_evictions};
    }
    char *text = rlx_metrics_render(&s->metrics, mm, n), *models = rlx_models_metrics(s);
    free(mm);
    char *all = text && models ? malloc(strlen(text) + strlen(models) + 1) : NULL;
    if (all) {
        strcpy(all, text);
        strcat(all, models);
    }
    free(text);
    free(models);
    rlx_conn_respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", all);
}

/* ---- bodies: parsed on the loop when small, on the threadpool otherwise -------------------- */

/* Bodies up to this size parse in microseconds; larger ones (up to --max-body) would stall
 * every other connection, so they go to the threadpool. */
#define INLINE_PARSE_MAX 16384

typedef enum { P_NONE, P_API, P_TOKENIZE, P_DETOKENIZE } parse_kind;

/* What a body parsed into; a handler takes what it uses (setting it NULL/zero), parsed_free
 * releases the rest. */
struct parsed {
    int rc;
    rlx_api_error e;
    rlx_api_request req;           /* P_API */
    char *text, *model;            /* P_TOKENIZE; model also P_DETOKENIZE */
    bool add_special, parse_special, with_pieces;
    int32_t *ids;                  /* P_DETOKENIZE */
    size_t n_ids;
};

static void parse_body(parsed *pb, parse_kind pk, rlx_api_kind ak, const char *body, size_t len)
{
    memset(pb, 0, sizeof *pb);
    pb->add_special = pb->parse_special = true;
    if (pk == P_API) pb->rc = rlx_api_parse(&pb->req, ak, body, len, 0, &pb->e);
    else if (pk == P_TOKENIZE)
        pb->rc = rlx_api_parse_tokenize(body, len, &pb->text, &pb->add_special, &pb->parse_special, &pb->with_pieces,
                                        &pb->model, &pb->e);
    else if (pk == P_DETOKENIZE) pb->rc = rlx_api_parse_detokenize(body, len, 0, &pb->ids, &pb->n_ids, &pb->model, &pb->e);
}

static void parsed_free(parsed *pb)
{
    rlx_api_request_free(&pb->req);
    free(pb->text);
    free(pb->model);
    free(pb->ids);
    memset(pb, 0, sizeof *pb);
}

typedef void (*handler_fn)(rlx_srv *s, rlx_conn *c, parsed *pb);

/* ---- models loaded on demand ---------------------------------------------------------------- */

/* A request waiting for its model's load (models.c): its parsed body, and the handler that runs
 * it again once the model is loaded. */
typedef struct model_wait {
    rlx_call call;                 /* first: the wait is the call; its client is the connection */
    handler_fn fn;
    rlx_model_slot *m;
    parsed pb;
} model_wait;

static void wait_done(rlx_call *call, void *client, int status)
{
    model_wait *w = (model_wait *)call;
    rlx_conn *c = client;
    if (c) {
        if (status) {
            rlx_api_error e;
            rlx_srv_model_wait_error(w->m, status, &e);
            rlx_conn_error(c, &e);
        } else {
            w->fn(call->srv, c, &w->pb); /* finds the model loaded now */
        }
        rlx_conn_wake(c);
    }
    parsed_free(&w->pb);
    free(w);
}

/* The model a request names, when loaded. Otherwise NULL: the connection was answered (an error),
 * or, with fn, it waits for the load holding pb (moved) and fn runs again with it once loaded. */
static rlx_model_slot *pick_model(rlx_srv *s, rlx_conn *c, const char *name, handler_fn fn, parsed *pb)
{
    rlx_api_error e;
    snprintf(c->model, sizeof c->model, "%s", name ? name : s->n_models ? s->models[0]->cfg->name : "");
    rlx_model_slot *wait = NULL, *m = rlx_srv_model(s, name, fn ? &wait : NULL, &e);
    if (m) return m;
    if (!wait) {
        rlx_conn_error(c, &e);
        return NULL;
    }
    model_wait *w = calloc(1, sizeof *w);
    if (!w) {
        rlx_api_errorf(&e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
        rlx_conn_error(c, &e);
        return NULL;
    }
    w->fn = fn;
    w->m = wait;
    w->pb = *pb;
    memset(pb, 0, sizeof *pb);
    if (rlx_srv_model_wait(wait, &w->call, c, &c->call, wait_done, &e)) {
        *pb = w->pb;
        free(w);
        rlx_conn_error(c, &e);
    }
    return NULL;
}

typedef struct route {
    const char *method, *path;
    handler_fn fn;
    bool open;                    /* no API key needed */
    const char *endpoint;         /* metrics label */
    parse_kind body;              /* how the body is parsed before fn runs */
    rlx_api_kind api;             /* for P_API */
} route;

/* ---- tokenizer and template routes (answered on the threadpool, see tasks.c) ---------------- */

static void h_tokenize(rlx_srv *s, rlx_conn *c, parsed *pb)
{
    rlx_model_slot *m = pick_model(s, c, pb->model, h_tokenize, pb);
    if (!m) return;
    rlx_task_tokenize(c, m, pb->text, pb->add_special, pb->parse_special, pb->with_pieces);
    pb->text = NULL;
}

static void h_detokenize(rlx_srv *s, rlx_conn *c, parsed *pb)
{
    rlx_api_error e;
    /* the model decides the vocabulary size, so ids are bounded only now */
    rlx_model_slot *m = pick_model(s, c, pb->model, h_detokenize, pb);
    if (!m) return;
    rlx_admit a;
    if (rlx_admit_tokens(m->n_vocab, pb->ids, pb->n_ids, &a)) {
        rlx_api_error_from_admit(&e, &a, "tokens", NULL);
        rlx_conn_error(c, &e);
        return;
    }
    rlx_task_detokenize(c, m, pb->ids, pb->n_ids);
    pb->ids = NULL;
}

static rlx_model_slot *model_for(rlx_srv *s, rlx_conn *c, parsed *pb, handler_fn fn)
{
    rlx_api_request *r = &pb->req;
    /* the session may also come as a header, for clients that cannot add body fields */
    const char *sid = MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, "X-Session-Id");
    rlx_api_error e;
    if (sid && r->base->session_id && strcmp(sid, r->base->session_id)) { /* the body won silently */
        rlx_api_errorf(&e, 400, RLX_API_ERR_INVALID, "session_id", "The X-Session-Id header and the body's session_id "
                       "name different sessions; give one.");
        rlx_conn_error(c, &e);
        return NULL;
    }
    if (sid && !r->base->session_id) {
        if (!rlx_api_utf8_valid(sid, strlen(sid))) {
            rlx_api_errorf(&e, 400, RLX_API_ERR_INVALID, "session_id", "The X-Session-Id header is not valid UTF-8 text.");
            rlx_conn_error(c, &e);
            return NULL;
        }
        if (!(r->base->session_id = strdup(sid))) {
            rlx_api_errorf(&e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
            rlx_conn_error(c, &e);
            return NULL;
        }
        /* the body's rules for it (a valid id; n = 1, one prompt: with n = 2 the choices raced
           for the session, a random 503 "busy") */
        if (rlx_api_session_check(r, &e)) {
            rlx_conn_error(c, &e);
            return NULL;
        }
    }
    return pick_model(s, c, r->model, fn, pb);
}

static void h_apply_template(rlx_srv *s, rlx_conn *c, parsed *pb)
{
    rlx_model_slot *m = model_for(s, c, pb, h_apply_template);
    if (m) rlx_task_template(c, m, &pb->req);
}

static void generate(rlx_srv *s, rlx_conn *c, parsed *pb)
{
    rlx_api_request *r = &pb->req;
    rlx_api_error e;
    rlx_model_slot *m = model_for(s, c, pb, generate);
    if (!m) return;
    if (rlx_embed_check_model(m, r, &e)) { /* generation vs embeddings: the routes it serves */
        rlx_conn_error(c, &e);
        return;
    }
    if (s->stopping) {
        rlx_api_error_shutdown(&e);
        rlx_conn_error(c, &e);
        return;
    }
    if (r->base->session_id) rlx_http_reap_hangups(s); /* its previous turn's client may have just left */
    bool stream = r->stream;
    rlx_api_kind kind = r->kind;
    rlx_job *j;
    if (rlx_job_start(s, m, r, &rlx_http_sink, c, &j, &e)) {
        rlx_conn_error(c, &e);
        return;
    }
    c->job = j;
    c->stream = stream;
    c->stream_ctype = kind == RLX_API_GENERATE ? "application/x-ndjson" : "text/event-stream";
}

/* ---- operators: POST /models/load, POST /models/unload ------------------------------------ */

/* {"model": NAME, "keep_alive"?: ...}: the name (malloc'ed into pb->model) and keep_alive (into
 * pb->req), or the connection was answered 400. */
static int op_model_name(rlx_conn *c, parsed *pb)
{
    rlx_api_error e;
    if (c->body_len > INLINE_PARSE_MAX) { /* parsed on the loop thread: only a name and keep_alive */
        rlx_api_errorf(&e, 400, RLX_API_ERR_INVALID, "model", "The body is %zu bytes; {\"model\": NAME, "
                       "\"keep_alive\"?: ...} takes at most %d.", (size_t)c->body_len, (int)INLINE_PARSE_MAX);
        rlx_conn_error(c, &e);
        return -1;
    }
    cJSON *o = NULL;
    rlx_error perr = {0};
    if (rlx_json_parse(c->body ? c->body : "", c->body_len, &o, &perr)) o = NULL; /* as the other routes read bodies */
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "model");
    if (cJSON_IsString(name) && name->valueint == RLX_JSON_STR_NUL) { /* NULs never name a model */
        cJSON_Delete(o);
        rlx_api_errorf(&e, 400, RLX_API_ERR_INVALID, "model", "Strings in the request must not contain NUL characters (\\u0000).");
        rlx_conn_error(c, &e);
        return -1;
    }
    const cJSON *ka = cJSON_GetObjectItemCaseSensitive(o, "keep_alive");
    rlx_error kerr = {0};
    if (ka && !cJSON_IsNull(ka)) {
        if (rlx_keep_alive_json(ka, &pb->req.keep_alive_s, &kerr)) {
            cJSON_Delete(o);
            rlx_api_errorf(&e, 400, RLX_API_ERR_INVALID, "keep_alive", "%s.", kerr.msg);
            rlx_conn_error(c, &e);
            return -1;
        }
        pb->req.has_keep_alive = true;
    }
    if (cJSON_IsString(name) && name->valuestring[0]) pb->model = strdup(name->valuestring);
    cJSON_Delete(o);
    if (pb->model) return 0;
    rlx_api_errorf(&e, 400, RLX_API_ERR_INVALID, "model", "The body must be a JSON object {\"model\": NAME} naming a "
                   "served model (GET /v1/models lists them), with an optional \"keep_alive\".");
    rlx_conn_error(c, &e);
    return -1;
}

static rlx_model_slot *op_model(rlx_srv *s, rlx_conn *c, parsed *pb)
{
    snprintf(c->model, sizeof c->model, "%s", pb->model);
    rlx_model_slot *m = rlx_models_find(s, pb->model);
    if (!m) {
        rlx_models_rescan(s, false);
        m = rlx_models_find(s, pb->model);
    }
    if (m) return m;
    rlx_api_error e;
    rlx_api_errorf(&e, 404, RLX_API_ERR_INVALID, "model", "The model '%s' does not exist; GET /v1/models lists the served ones.",
                   pb->model);
    e.code = "model_not_found";
    rlx_conn_error(c, &e);
    return NULL;
}

/* Loads the model (a failed one is tried again) and answers once it is loaded, with its entry;
 * its keep-alive is then the body's keep_alive, else --keep-alive (as an Ollama request's). */
static void h_load(rlx_srv *s, rlx_conn *c, parsed *pb)
{
    parsed local;
    memset(&local, 0, sizeof local);
    bool first = !pb;
    if (first && op_model_name(c, pb = &local)) return;
    rlx_model_slot *m = op_model(s, c, pb);
    /* a failed model is loaded again when that can end otherwise: not for a file that failed
       and has not changed since (the retry evicted a model in use to fail the same way) */
    if (m && first && m->state == RLX_MODEL_FAILED && !m->booting && rlx_model_retry_worth(m)) m->state = RLX_MODEL_UNLOADED;
    if (m) rlx_srv_model_unload_cancel(m); /* a load after an unload asked while in use: it stays */
    if (m) m = pick_model(s, c, pb->model, h_load, pb);
    if (m) {
        rlx_srv_model_keep_alive(m, pb->req.has_keep_alive ? pb->req.keep_alive_s : s->cfg->keep_alive);
        respond_json(c, 200, model_json(m));
    }
    parsed_free(&local);
}

/* Unloads the model once no request uses it (at once when idle); answers with its state now. */
static void h_unload(rlx_srv *s, rlx_conn *c, parsed *pb)
{
    (void)pb;
    parsed local;
    memset(&local, 0, sizeof local);
    if (op_model_name(c, &local)) return;
    rlx_model_slot *m = op_model(s, c, &local);
    rlx_api_error e;
    if (m && rlx_srv_model_unload(m, &e)) rlx_conn_error(c, &e);
    else if (m) respond_json(c, 200, model_json(m));
    parsed_free(&local);
}

/* ---- sessions (the store is sqlite3: answered on the threadpool) ------------------------- */

static long query_long(rlx_conn *c, const char *key, long def, long max)
{
    const char *v = MHD_lookup_connection_value(c->mc, MHD_GET_ARGUMENT_KIND, key);
    if (!v) return def;
    char *end;
    long x = strtol(v, &end, 10);
    return (end == v || *end || x < 0) ? -1 : (x > max ? max : x);
}

static void h_sessions(rlx_srv *s, rlx_conn *c, parsed *pb)
{
    (void)s;
    (void)pb;
    long offset = query_long(c, "offset", 0, 1L << 30), limit = query_long(c, "limit", 100, 1000);
    rlx_api_error e;
    if (offset < 0 || limit < 0) {
        rlx_api_errorf(&e, 400, RLX_API_ERR_INVALID, offset < 0 ? "offset" : "limit", "offset and limit must be non-negative integers.");
        rlx_conn_error(c, &e);
        return;
    }
    rlx_task_sessions(c, NULL, false, (size_t)offset, (size_t)limit);
}

static void h_session(rlx_srv *s, rlx_conn *c, parsed *pb)
{
    (void)s;
    (void)pb;
    const char *id = c->path + strlen("/v1/sessions/");
    if (!rlx_api_utf8_valid(id, strlen(id))) {
        rlx_api_error e;
        rlx_api_errorf(&e, 400, RLX_API_ERR_INVALID, "session_id", "The session id in the path is not valid UTF-8 text.");
        rlx_conn_error(c, &e);
        return;
    }
    rlx_task_sessions(c, id, !strcmp(c->method, "DELETE"), 0, 0);
}

static const route routes[] = {
    {"GET", "/health", h_health, true, "health", P_NONE, 0},
    {"GET", "/v1/models", h_models, false, "models", P_NONE, 0},
    {"GET", "/v1/models/**", h_model, false, "models", P_NONE, 0}, /* ids may hold '/' (sub/name) */
    {"GET", "/metrics", h_metrics, false, "metrics", P_NONE, 0},
    {"POST", "/v1/completions", generate, false, "completions", P_API, RLX_API_COMPLETIONS},
    {"POST", "/v1/chat/completions", generate, false, "chat_completions", P_API, RLX_API_CHAT},
    {"POST", "/v1/generate", generate, false, "generate", P_API, RLX_API_GENERATE},
    {"POST", "/v1/embeddings", generate, false, "embeddings", P_API, RLX_API_EMBEDDINGS},
    {"POST", "/embedding", generate, false, "embedding", P_API, RLX_API_EMBEDDING},
    {"POST", "/v1/rerank", generate, false, "rerank", P_API, RLX_API_RERANK},
    {"POST", "/rerank", generate, false, "rerank", P_API, RLX_API_RERANK},
    {"POST", "/tokenize", h_tokenize, false, "tokenize", P_TOKENIZE, 0},
    {"POST", "/detokenize", h_detokenize, false, "detokenize", P_DETOKENIZE, 0},
    {"POST", "/apply-template", h_apply_template, false, "apply_template", P_API, RLX_API_CHAT},
    {"GET", "/v1/sessions", h_sessions, false, "sessions", P_NONE, 0},
    {"GET", "/v1/sessions/*", h_session, false, "sessions", P_NONE, 0},
    {"DELETE", "/v1/sessions/*", h_session, false, "sessions", P_NONE, 0},
    {"POST", "/models/load", h_load, false, "models_load", P_NONE, 0},
    {"POST", "/models/unload", h_unload, false, "models_unload", P_NONE, 0},
};

static void run_parsed(rlx_srv *s, rlx_conn *c, const route *r, parsed *pb)
{
    if (pb->rc) rlx_conn_error(c, &pb->e);
    else r->fn(s, c, pb);
    parsed_free(pb);
}

typedef struct parse_task {
    rlx_call call;                 /* first: the call is the task; its client is the connection */
    const route *route;
    char *body;                    /* taken from the connection */
    size_t len;
    parsed pb;
} parse_task;

static void parse_work(rlx_call *call)
{
    parse_task *t = (parse_task *)call;
    parse_body(&t->pb, t->route->body, t->route->api, t->body, t->len);
}

static void parse_done(rlx_call *call, void *client, int status)
{
    parse_task *t = (parse_task *)call;
    rlx_conn *c = client;
    if (c) {
        if (status) {
            rlx_api_error e;
            rlx_api_error_shutdown(&e);
            rlx_conn_error(c, &e);
            parsed_free(&t->pb);
        } else {
            run_parsed(t->call.srv, c, t->route, &t->pb); /* may queue the next call or start a job */
        }
        rlx_conn_wake(c);
    } else {
        parsed_free(&t->pb);
    }
    free(t->body);
    free(t);
}

static void parse_queue(rlx_srv *s, rlx_conn *c, const route *r)
{
    parse_task *t = calloc(1, sizeof *t);
    if (t) {
        t->route = r;
        t->body = c->body; /* the connection may end while the task runs */
        t->len = c->body_len;
    }
    if (!t || rlx_call_start(s, &t->call, t->len > RLX_BIG_WORK_BYTES, c, &c->call, parse_work, parse_done)) {
        free(t);
        rlx_api_error e;
        rlx_api_errorf(&e, 500, RLX_API_ERR_SERVER, NULL, "Cannot queue the parsing of this request.");
        rlx_conn_error(c, &e);
        return;
    }
    c->body = NULL;
    c->body_len = c->body_cap = 0;
}

/* Exact paths, or a prefix when the route ends in '*' (one non-empty path segment) or "**" (a
 * non-empty rest, '/' included). */
static bool path_match(const char *pattern, const char *path)
{
    size_t n = strlen(pattern);
    if (n > 1 && pattern[n - 1] == '*' && pattern[n - 2] == '*')
        return !strncmp(pattern, path, n - 2) && path[n - 2];
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

bool rlx_route_refused_early(rlx_srv *s, rlx_conn *c)
{
    if (!s->cfg->api_key) return false;
    for (size_t i = 0; i < RLX_ARRAY_LEN(routes); i++)
        if (path_match(routes[i].path, c->path) && !strcmp(routes[i].method, c->method))
            return !routes[i].open && !authorized(s, c);
    return false; /* an unknown route, a preflight: answered after the body as ever */
}

void rlx_route(rlx_srv *s, rlx_conn *c)
{
    const route *hit = NULL;
    bool path_known = false;
    char methods[40] = "";
    for (size_t i = 0; i < RLX_ARRAY_LEN(routes); i++) {
        if (!path_match(routes[i].path, c->path)) continue;
        path_known = true;
        const char *m = routes[i].method;
        if (!strstr(methods, m) && strlen(methods) + strlen(m) + 3 < sizeof methods) {
            if (methods[0]) strcat(methods, ", ");
            strcat(methods, m);
        }
        if (!strcmp(routes[i].method, c->method) || (!strcmp(c->method, "HEAD") && !strcmp(routes[i].method, "GET")))
            hit = &routes[i];
    }
    rlx_api_error e;
    if (!path_known) {
        rlx_api_errorf(&e, 404, RLX_API_ERR_INVALID, NULL, "Unknown endpoint %s %s.", c->method, c->path);
        e.code = "not_found";
        rlx_conn_error(c, &e);
        return;
    }
    if (!hit && s->cfg->cors_origins && !strcmp(c->method, "OPTIONS")) {
        rlx_cors_preflight(s, c, methods); /* cors.c */
        return;
    }
    if (!hit) {
        rlx_api_errorf(&e, 405, RLX_API_ERR_INVALID, NULL, "%s does not accept %s; use %s.", c->path, c->method, methods);
        rlx_conn_error(c, &e);
        snprintf(c->allow, sizeof c->allow, "%s", methods); /* every method the path takes (RFC 9110 15.5.6) */
        return;
    }
    c->endpoint = hit->endpoint;
    if (!hit->open && !authorized(s, c)) {
        rlx_api_errorf(&e, 401, RLX_API_ERR_AUTH, NULL,
                       "Missing or incorrect API key: send the header 'Authorization: Bearer KEY'.");
        e.code = "invalid_api_key";
        rlx_conn_error(c, &e);
        return;
    }
    if (hit->body == P_NONE) {
        hit->fn(s, c, NULL);
        return;
    }
    if (c->body_len > INLINE_PARSE_MAX) {
        parse_queue(s, c, hit);
        return;
    }
    parsed pb;
    parse_body(&pb, hit->body, hit->api, c->body ? c->body : "", c->body_len);
    run_parsed(s, c, hit, &pb);
}
