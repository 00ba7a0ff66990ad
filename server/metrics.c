/* metrics.c - Prometheus text exposition and the access log line (see metrics.h). */
#include "server/metrics.h"

#include <cjson/cJSON.h>
#include <utf8proc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const double latency_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                        0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};

void rlx_metrics_init(rlx_metrics *m)
{
    memset(m, 0, sizeof *m);
    rlx_histogram *hs[] = {&m->ttft, &m->itl, &m->e2e};
    for (size_t i = 0; i < RLX_ARRAY_LEN(hs); i++) {
        hs[i]->bounds = latency_bounds;
        hs[i]->n_bounds = (int)RLX_ARRAY_LEN(latency_bounds);
    }
}

const char *rlx_metrics_label(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)(s ? s : "");
    while (*p) {
        char esc[4];
        size_t k;
        utf8proc_int32_t cp;
        utf8proc_ssize_t n = utf8proc_iterate(p, -1, &cp);
        if (n <= 0) { /* not UTF-8: U+FFFD, as the exposition format needs UTF-8 */
            esc[0] = (char)0xef; esc[1] = (char)0xbf; esc[2] = (char)0xbd; k = 3;
            n = 1;
        } else if (*p == '\\' || *p == '"' || *p == '\n') {
            esc[0] = '\\'; esc[1] = *p == '\n' ? 'n' : (char)*p; k = 2;
        } else {
            memcpy(esc, p, (size_t)n);
            k = (size_t)n;
        }
        if (o + k + 1 > cap) break;
        memcpy(out + o, esc, k);
        o += k;
        p += n;
    }
    if (cap) out[o < cap ? o : cap - 1] = 0;
    return out;
}

void rlx_metrics_request(rlx_metrics *m, const char *endpoint, int status)
{
    for (int i = 0; i < m->n_requests; i++)
        if (m->requests[i].status == status && !strcmp(m->requests[i].endpoint, endpoint)) {
            m->requests[i].n++;
            return;
        }
    /* bounded series: unknown paths are folded into "other" by the caller, the rest fit */
    if (m->n_requests == RLX_METRICS_MAX_SERIES) return;
    snprintf(m->requests[m->n_requests].endpoint, sizeof m->requests[0].endpoint, "%s", endpoint);
    m->requests[m->n_requests].status = status;
    m->requests[m->n_requests].n = 1;
    m->n_requests++;
}

void rlx_histogram_observe(rlx_histogram *h, double v)
{
    int b = 0;
    while (b < h->n_bounds && v > h->bounds[b]) b++;
    h->counts[b]++;
    h->sum += v;
    h->count++;
}

typedef struct sbuf { char *s; size_t n, cap; bool oom; } sbuf;

__attribute__((format(printf, 2, 3)))
static void put(sbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) { b->oom = true; return; }
        if ((size_t)k < b->cap - b->n) { b->n += (size_t)k; return; }
        size_t nc = (b->cap + (size_t)k) * 2;
        char *ns = realloc(b->s, nc);
        if (!ns) { b->oom = true; return; }
        b->s = ns;
        b->cap = nc;
    }
}

static void put_hist(sbuf *b, const char *name, const char *help, const rlx_histogram *h)
{
    put(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < h->n_bounds; i++) {
        cum += h->counts[i];
        put(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i], (unsigned long long)cum);
    }
    cum += h->counts[h->n_bounds];
    put(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    put(b, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->count);
}

/* A label value as the exposition format writes it: '\\', '"' and newlines escaped. */
static void label_value(const char *v, char *out, size_t cap)
{
    size_t k = 0;
    for (; v && *v && k + 3 < cap; v++) {
        if (*v == '\\' || *v == '"') {
            out[k++] = '\\';
            out[k++] = *v;
        } else if (*v == '\n') {
            out[k++] = '\\';
            out[k++] = 'n';
        } else {
            out[k++] = *v;
        }
    }
    out[k] = 0;
}

char *rlx_metrics_render(const rlx_metrics *m, const rlx_metrics_model *models, size_t n_models)
{
    sbuf b = {.cap = 4096};
    if (!(b.s = malloc(b.cap))) return NULL;
    b.s[0] = 0;
    if (m->version) {
        char v[64], c[64], be[64];
        label_value(m->version, v, sizeof v);
        label_value(m->commit ? m->commit : "unknown", c, sizeof c);
        label_value(m->backend ? m->backend : "cpu", be, sizeof be);
        put(&b, "# HELP rlxd_build_info The build serving: version, commit and compute backend (always 1).\n"
                "# TYPE rlxd_build_info gauge\nrlxd_build_info{version=\"%s\",commit=\"%s\",backend=\"%s\"} 1\n",
            v, c, be);
    }
    put(&b, "# HELP rlxd_requests_total Finished HTTP requests by endpoint and status.\n"
            "# TYPE rlxd_requests_total counter\n");
    for (int i = 0; i < m->n_requests; i++)
        put(&b, "rlxd_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", m->requests[i].endpoint,
            m->requests[i].status, (unsigned long long)m->requests[i].n);
    put(&b, "# HELP rlxd_prompt_tokens_total Prompt tokens processed.\n# TYPE rlxd_prompt_tokens_total counter\n"
            "rlxd_prompt_tokens_total %llu\n", (unsigned long long)m->prompt_tokens);
    put(&b, "# HELP rlxd_generation_tokens_total Tokens generated.\n# TYPE rlxd_generation_tokens_total counter\n"
            "rlxd_generation_tokens_total %llu\n", (unsigned long long)m->generation_tokens);
    put(&b, "# HELP rlxd_requests_cancelled_total Generations cancelled because the client disconnected.\n"
            "# TYPE rlxd_requests_cancelled_total counter\nrlxd_requests_cancelled_total %llu\n",
        (unsigned long long)m->cancelled);
    put(&b, "# HELP rlxd_request_timeouts_total Requests not received whole within --request-timeout (408).\n"
            "# TYPE rlxd_request_timeouts_total counter\nrlxd_request_timeouts_total %llu\n",
        (unsigned long long)m->request_timeouts);
    put(&b, "# HELP rlxd_connections_evicted_total Connections still sending their request, closed (503) to "
            "accept new ones at the connection limit.\n"
            "# TYPE rlxd_connections_evicted_total counter\nrlxd_connections_evicted_total %llu\n",
        (unsigned long long)m->evicted);
    put(&b, "# HELP rlxd_streams_unread_cancelled_total Streams cancelled because their client left more than "
            "--max-pending-bytes unread.\n"
            "# TYPE rlxd_streams_unread_cancelled_total counter\nrlxd_streams_unread_cancelled_total %llu\n",
        (unsigned long long)m->unread_cancelled);
    static const struct { const char *name, *type, *help; } gauges[] = {
        {"rlxd_num_requests_running", "gauge", "Sequences being processed by the engine."},
        {"rlxd_num_requests_waiting", "gauge", "Requests waiting for admission."},
        {"rlxd_kv_cache_usage_ratio", "gauge", "Fraction of KV cache blocks in use."},
        {"rlxd_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache."},
        {"rlxd_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache."},
        {"rlxd_preemptions_total", "counter", "Sequences preempted (recomputed later) for want of KV blocks."},
        {"rlxd_embedding_inputs_total", "counter", "Embedding inputs (texts, documents) computed."},
        {"rlxd_embedding_tokens_total", "counter", "Tokens of the embedding inputs computed."},
        {"rlxd_spec_decode_draft_tokens_total", "counter", "Tokens drafted by speculative decoding (prompt lookup or --draft-model)."},
        {"rlxd_spec_decode_accepted_tokens_total", "counter",
         "Drafted tokens the model's own sampling confirmed (acceptance rate = accepted / draft)."},
        {"rlxd_state_slots_used", "gauge", "Recurrent-state slots held by sequences (hybrid models; 0 for others)."},
        {"rlxd_state_slots_total", "gauge", "Recurrent-state slots of the model (--max-seqs for hybrid models; 0 for others)."},
        {"rlxd_state_checkpoints", "gauge", "Recurrent-state checkpoints held (hybrid models, --state-cache-mb)."},
        {"rlxd_state_checkpoint_bytes", "gauge", "Bytes of the recurrent-state checkpoints held."},
        {"rlxd_state_checkpoint_hits_total", "counter", "Requests whose prompt started at a recurrent-state checkpoint (prefix reused)."},
        {"rlxd_state_checkpoint_evictions_total", "counter", "Recurrent-state checkpoints dropped for the --state-cache-mb budget."},
        {"rlxd_spec_decode_draft_model_positions_total", "counter",
         "Positions the draft model (--draft-model) computed: catching up with the text, and drafting."},
        {"rlxd_cpu_passes_one_thread_total", "counter",
         "CPU forward passes run on one thread: small work, --threads 1, or one thread faster lately (a competing process)."},
        {"rlxd_cpu_passes_more_threads_total", "counter", "CPU forward passes run on all the pool's threads."},
        {"rlxd_grammar_aside_seconds_total", "counter",
         "Seconds constrained sampling's helper worked beside forward passes (grammar masks and tables; 0 where it is off)."},
    };
    for (size_t g = 0; g < RLX_ARRAY_LEN(gauges); g++) {
        put(&b, "# HELP %s %s\n# TYPE %s %s\n", gauges[g].name, gauges[g].help, gauges[g].name, gauges[g].type);
        for (size_t i = 0; i < n_models; i++) {
            const rlx_metrics_model *x = &models[i];
            double v = g == 0 ? x->running : g == 1 ? x->waiting : g == 2 ? x->kv_usage
                     : g == 3 ? (double)x->prefix_queries : g == 4 ? (double)x->prefix_hits
                     : g == 5 ? (double)x->preemptions : g == 6 ? (double)x->embd_inputs : g == 7 ? (double)x->embd_tokens
                     : g == 8 ? (double)x->draft_tokens : g == 9 ? (double)x->draft_accepted
                     : g == 10 ? x->state_slots_used : g == 11 ? x->state_slots_total
                     : g == 12 ? x->state_ckpt_entries : g == 13 ? (double)x->state_ckpt_bytes
                     : g == 14 ? (double)x->state_ckpt_hits : g == 15 ? (double)x->state_ckpt_evictions
                     : g == 16 ? (double)x->draft_positions : g == 17 ? (double)x->cpu_passes_one
                     : g == 18 ? (double)x->cpu_passes_more : x->grammar_aside_s;
            char name[512];
            put(&b, "%s{model_name=\"%s\"} %.17g\n", gauges[g].name, rlx_metrics_label(x->name, name, sizeof name), v);
        }
    }
    put_hist(&b, "rlxd_time_to_first_token_seconds", "Time from request arrival to the first token.", &m->ttft);
    put_hist(&b, "rlxd_inter_token_latency_seconds", "Mean time between generated tokens, per request.", &m->itl);
    put_hist(&b, "rlxd_e2e_request_latency_seconds", "Time from request arrival to its last token.", &m->e2e);
    if (b.oom) { free(b.s); return NULL; }
    return b.s;
}

void rlx_access_log_format(const rlx_access_entry *e, bool json, char *buf, size_t cap)
{
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    /* method, path and model are the client's text: escaped so that they cannot forge a line
     * (text) or make the line invalid UTF-8 (JSON; cJSON escapes the control bytes) */
    char method[64], path[1100], model[300];
    rlx_log_escape(e->method, !json, method, sizeof method);
    rlx_log_escape(e->path, !json, path, sizeof path);
    rlx_log_escape(e->model ? e->model : "-", !json, model, sizeof model);
    if (!json) {
        char ttft[32] = "-";
        if (e->ttft_s >= 0) snprintf(ttft, sizeof ttft, "%.1fms", e->ttft_s * 1e3);
        int n = snprintf(buf, cap, "%s %s %s %d model=%s prompt_tokens=%d completion_tokens=%d ttft=%s duration=%.1fms%s%s\n",
                 ts, method, path, e->status, model, e->prompt_tokens,
                 e->completion_tokens, ttft, e->duration_s * 1e3, e->finish ? " finish=" : "",
                 e->finish ? e->finish : "");
        if (n >= 0 && (size_t)n >= cap && cap >= 2) buf[cap - 2] = '\n'; /* cut, but still one line */
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "time", ts);
    cJSON_AddStringToObject(o, "method", method);
    cJSON_AddStringToObject(o, "path", path);
    cJSON_AddNumberToObject(o, "status", e->status);
    if (e->model) cJSON_AddStringToObject(o, "model", model);
    else cJSON_AddNullToObject(o, "model");
    cJSON_AddNumberToObject(o, "prompt_tokens", e->prompt_tokens);
    cJSON_AddNumberToObject(o, "completion_tokens", e->completion_tokens);
    if (e->ttft_s >= 0) cJSON_AddNumberToObject(o, "ttft_ms", e->ttft_s * 1e3);
    else cJSON_AddNullToObject(o, "ttft_ms");
    cJSON_AddNumberToObject(o, "duration_ms", e->duration_s * 1e3);
    if (e->finish) cJSON_AddStringToObject(o, "finish", e->finish);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    snprintf(buf, cap, "%s\n", s ? s : "{}");
    free(s);
}
