/* loadgen.c - rlxd-loadgen: an OpenAI-streaming load generator for rlxd or any compatible
 * server. N concurrent streams (libcurl multi, one thread) POST {url}/completions with
 * stream:true until M requests are done, and report time to first token, inter-token latency,
 * end-to-end latency, output tokens/s and errors as a table or one JSON object. With
 * --embeddings they POST {url}/embeddings (--inputs texts each) and report inputs/s and
 * prompt tokens/s.
 *
 * It talks only to the URL given: redirects are not followed, proxies from the environment
 * are ignored, only http/https are allowed, and the whole run is bounded by --timeout. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct opts {
    const char *url, *model, *api_key;
    int concurrency, requests, prompt_tokens, max_tokens;
    double timeout_s;
    bool json, chat;
    bool embeddings, base64;   /* POST /embeddings (encoding_format base64 or float) */
    int inputs;                /* texts per embeddings request */
    int prompt_seed;           /* 0: "Request N:" prompts; else "Request SEED-N:" */
} opts;

typedef struct dvec { double *v; size_t n, cap; } dvec;

typedef struct stats {
    dvec ttft, itl, e2e;      /* seconds */
    long out_tokens, prompt_tokens, inputs;
    int ok, errors;
    char first_error[256];
} stats;

typedef struct stream {
    CURL *h;
    struct curl_slist *hdrs;
    char *body;
    char *buf;                /* SSE bytes not yet parsed (an incomplete line) */
    size_t n_buf, cap_buf;
    stats *st;
    bool embeddings;
    int inputs;
    double t_start, t_last;   /* t_last: previous content chunk, 0 before the first */
    double ttft;              /* < 0 until the first content chunk */
    dvec itl;                 /* this request's gaps, merged into st only if it succeeds */
    int chunks;
    long usage_tokens;        /* completion_tokens of the usage chunk, -1 if none */
    long usage_prompt;
    bool done_marker;         /* saw data: [DONE] */
    char err[200];            /* first in-stream error, empty if none */
} stream;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void push(dvec *d, double x)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 64;
        double *v = realloc(d->v, cap * sizeof *v);
        if (!v) return; /* a lost sample under OOM only thins the statistics */
        d->v = v;
        d->cap = cap;
    }
    d->v[d->n++] = x;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted vector, in ms; NAN when empty. */
static double pct_ms(const dvec *d, double p)
{
    if (!d->n) return NAN;
    size_t k = (size_t)ceil(p / 100.0 * (double)d->n);
    if (k < 1) k = 1;
    if (k > d->n) k = d->n;
    return d->v[k - 1] * 1e3;
}

static double mean_ms(const dvec *d)
{
    double s = 0;
    for (size_t i = 0; i < d->n; i++) s += d->v[i];
    return d->n ? s / (double)d->n * 1e3 : NAN;
}

/* ---- one streamed request ---------------------------------------------------------------- */

static void set_err(stream *s, const char *fmt, const char *arg)
{
    if (!s->err[0]) snprintf(s->err, sizeof s->err, fmt, arg);
}

static void on_data(stream *s, const char *data)
{
    if (!strcmp(data, "[DONE]")) { s->done_marker = true; return; }
    cJSON *j = cJSON_Parse(data);
    if (!j) { set_err(s, "unparsable SSE data: %.80s", data); return; }
    cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    if (e) {
        cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
        set_err(s, "error in stream: %.150s", cJSON_IsString(m) ? m->valuestring : "(no message)");
    }
    cJSON *choices = cJSON_GetObjectItemCaseSensitive(j, "choices");
    cJSON *c0 = cJSON_IsArray(choices) ? cJSON_GetArrayItem(choices, 0) : NULL;
    if (c0) {
        cJSON *text = cJSON_GetObjectItemCaseSensitive(c0, "text");
        if (!cJSON_IsString(text)) {
            cJSON *delta = cJSON_GetObjectItemCaseSensitive(c0, "delta");
            text = delta ? cJSON_GetObjectItemCaseSensitive(delta, "content") : NULL;
        }
        /* an empty text is a held-back or role-only chunk: nothing reached the client yet */
        if (cJSON_IsString(text) && text->valuestring[0]) {
            double t = now_s();
            if (s->ttft < 0) s->ttft = t - s->t_start;
            else push(&s->itl, t - s->t_last);
            s->t_last = t;
            s->chunks++;
        }
    }
    cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
    if (cJSON_IsObject(u)) {
        cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
        cJSON *pt = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens");
        if (cJSON_IsNumber(ct)) s->usage_tokens = (long)ct->valuedouble;
        if (cJSON_IsNumber(pt)) s->usage_prompt = (long)pt->valuedouble;
    }
    cJSON_Delete(j);
}

/* SSE: handles "data:" lines; other fields and comments are ignored. */
static void on_line(stream *s, char *line, size_t n)
{
    if (n && line[n - 1] == '\r') line[--n] = 0;
    if (n >= 5 && !memcmp(line, "data:", 5)) {
        char *d = line + 5;
        if (*d == ' ') d++;
        on_data(s, d);
    } else if (n && line[0] == '{') {
        /* a non-streamed JSON body (usually an error object) */
        on_data(s, line);
    }
}

static size_t on_write(char *p, size_t sz, size_t nm, void *user)
{
    stream *s = user;
    size_t n = sz * nm;
    if (s->n_buf + n + 1 > s->cap_buf) {
        size_t cap = (s->n_buf + n + 1) * 2;
        char *b = realloc(s->buf, cap);
        if (!b) return 0; /* aborts the transfer: counted as an error */
        s->buf = b;
        s->cap_buf = cap;
    }
    memcpy(s->buf + s->n_buf, p, n);
    s->n_buf += n;
    size_t start = 0;
    for (size_t i = 0; i < s->n_buf; i++) {
        if (s->buf[i] != '\n') continue;
        s->buf[i] = 0;
        on_line(s, s->buf + start, i - start);
        start = i + 1;
    }
    memmove(s->buf, s->buf + start, s->n_buf - start);
    s->n_buf -= start;
    return n;
}

static void make_prompt(char *dst, size_t cap, int seed, int idx, int n_words)
{
    static const char *words[] = {"the", "quick", "brown", "fox", "jumps", "over", "a", "lazy",
                                  "dog", "and", "then", "runs", "far", "away", "from", "home"};
    /* the index up front keeps a server's prefix cache from serving every prompt; the seed,
     * a later run's prompts from the cache of an earlier run's (the same index is the same
     * prompt, so a second run against the same server would otherwise measure cache hits) */
    size_t w = seed ? (size_t)snprintf(dst, cap, "Request %d-%d:", seed, idx) : (size_t)snprintf(dst, cap, "Request %d:", idx);
    for (int i = 0; i < n_words && w + 16 < cap; i++)
        w += (size_t)snprintf(dst + w, cap - w, " %s", words[(i + idx) % 16]);
}

static stream *stream_new(const opts *o, stats *st, int idx, double deadline, char *errbuf)
{
    stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->st = st;
    s->ttft = -1;
    s->usage_tokens = s->usage_prompt = -1;
    size_t cap = (size_t)o->prompt_tokens * 8 + 64;
    char *prompt = malloc(cap);
    cJSON *req = cJSON_CreateObject();
    char url[2048];
    snprintf(url, sizeof url, "%s%s%s", o->url, o->url[strlen(o->url) - 1] == '/' ? "" : "/",
             o->embeddings ? "embeddings" : o->chat ? "chat/completions" : "completions");
    if (!prompt || !req) goto fail;
    make_prompt(prompt, cap, o->prompt_seed, idx, o->prompt_tokens > 3 ? o->prompt_tokens - 3 : 1);
    cJSON_AddStringToObject(req, "model", o->model);
    s->embeddings = o->embeddings;
    s->inputs = o->inputs;
    if (o->embeddings) {
        cJSON *in = o->inputs > 1 ? cJSON_AddArrayToObject(req, "input") : NULL;
        for (int k = 0; in && k < o->inputs; k++) {
            make_prompt(prompt, cap, o->prompt_seed, idx * o->inputs + k, o->prompt_tokens > 3 ? o->prompt_tokens - 3 : 1);
            cJSON_AddItemToArray(in, cJSON_CreateString(prompt));
        }
        if (!in) cJSON_AddStringToObject(req, "input", prompt);
        cJSON_AddStringToObject(req, "encoding_format", o->base64 ? "base64" : "float");
    } else if (o->chat) {
        cJSON *msgs = cJSON_AddArrayToObject(req, "messages");
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", prompt);
        cJSON_AddItemToArray(msgs, m);
    } else {
        cJSON_AddStringToObject(req, "prompt", prompt);
    }
    if (!o->embeddings) {
        cJSON_AddNumberToObject(req, "max_tokens", o->max_tokens);
        cJSON_AddBoolToObject(req, "stream", 1);
        cJSON_AddBoolToObject(cJSON_AddObjectToObject(req, "stream_options"), "include_usage", 1);
        cJSON_AddBoolToObject(req, "ignore_eos", 1);
    }
    s->body = cJSON_PrintUnformatted(req);
    free(prompt);
    prompt = NULL;
    cJSON_Delete(req);
    req = NULL;
    if (!s->body || !(s->h = curl_easy_init())) goto fail;
    s->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    s->hdrs = curl_slist_append(s->hdrs, "Accept: text/event-stream");
    if (o->api_key) {
        char auth[512];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->api_key);
        s->hdrs = curl_slist_append(s->hdrs, auth);
    }
    long left_ms = (long)((deadline - now_s()) * 1e3);
    curl_easy_setopt(s->h, CURLOPT_URL, url);
    curl_easy_setopt(s->h, CURLOPT_HTTPHEADER, s->hdrs);
    curl_easy_setopt(s->h, CURLOPT_POSTFIELDS, s->body);
    curl_easy_setopt(s->h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(s->h, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(s->h, CURLOPT_PRIVATE, s);
    curl_easy_setopt(s->h, CURLOPT_TIMEOUT_MS, left_ms > 1 ? left_ms : 1L);
    curl_easy_setopt(s->h, CURLOPT_CONNECTTIMEOUT_MS, left_ms > 1 ? left_ms : 1L);
    curl_easy_setopt(s->h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(s->h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(s->h, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(s->h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(s->h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(s->h, CURLOPT_ERRORBUFFER, errbuf);
    errbuf[0] = 0;
    s->t_start = now_s();
    return s;
fail:
    free(prompt);
    cJSON_Delete(req);
    if (s->h) curl_easy_cleanup(s->h);
    free(s->body);
    free(s);
    return NULL;
}

static void stream_free(stream *s)
{
    if (!s) return;
    if (s->h) curl_easy_cleanup(s->h);
    curl_slist_free_all(s->hdrs);
    free(s->body);
    free(s->buf);
    free(s->itl.v);
    free(s);
}

/* Folds a finished request into the totals. */
static void finish(stream *s, CURLcode cc, const char *curl_err)
{
    stats *st = s->st;
    long status = 0;
    curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
    if (s->n_buf) { s->buf[s->n_buf] = 0; on_line(s, s->buf, s->n_buf); s->n_buf = 0; }
    char why[256] = "";
    if (cc != CURLE_OK)
        snprintf(why, sizeof why, "%s%s%s", curl_easy_strerror(cc), curl_err[0] ? ": " : "", curl_err);
    else if (status != 200)
        snprintf(why, sizeof why, "HTTP %ld%s%s", status, s->err[0] ? ", " : "", s->err);
    else if (s->err[0])
        snprintf(why, sizeof why, "%s", s->err);
    else if (s->embeddings && s->usage_prompt <= 0)
        snprintf(why, sizeof why, "the embeddings response has no usage");
    else if (!s->embeddings && s->chunks == 0 && !s->done_marker && s->usage_tokens < 0)
        /* no text is fine for a finished stream (a model may emit only held-back bytes), but
         * a stream cut short before [DONE] or usage is an error */
        snprintf(why, sizeof why, "the stream ended without content, usage or [DONE]");
    if (why[0]) {
        st->errors++;
        if (!st->first_error[0]) snprintf(st->first_error, sizeof st->first_error, "%s", why);
        return;
    }
    st->ok++;
    if (s->ttft >= 0) push(&st->ttft, s->ttft);
    for (size_t i = 0; i < s->itl.n; i++) push(&st->itl, s->itl.v[i]);
    push(&st->e2e, now_s() - s->t_start);
    st->out_tokens += s->usage_tokens >= 0 ? s->usage_tokens : s->chunks;
    if (s->usage_prompt > 0) st->prompt_tokens += s->usage_prompt;
    if (s->embeddings) st->inputs += s->inputs;
}

/* ---- driver ------------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: rlxd-loadgen --url http://HOST:PORT/v1 --model NAME [options]\n"
        "  --concurrency N     concurrent streams (default 4)\n"
        "  --requests M        requests to complete (default 16)\n"
        "  --prompt-tokens P   approximate prompt length in tokens (default 128)\n"
        "  --max-tokens T      tokens to generate per request, with ignore_eos (default 64)\n"
        "  --timeout S         bound on the whole run in seconds (default 300)\n"
        "  --chat              POST /chat/completions instead of /completions\n"
        "  --embeddings        POST /embeddings (a text of about --prompt-tokens tokens per input)\n"
        "  --inputs K          texts per embeddings request (default 1)\n"
        "  --prompt-seed S     prompts \"Request S-N: ...\" instead of \"Request N: ...\" (default 0:\n"
        "                      the latter), so a run shares no prefix-cache entries with runs of\n"
        "                      another seed against the same server\n"
        "  --base64            embeddings with encoding_format base64 (default float)\n"
        "  --api-key KEY       send Authorization: Bearer KEY\n"
        "  --json              print one JSON object instead of a table\n"
        "Exit status: 0 if at least one request succeeded, 1 if none did, 2 on bad usage.\n");
}

static int parse_int(const char *name, const char *v, int lo, int *out)
{
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || x < lo || x > 1000000) {
        fprintf(stderr, "rlxd-loadgen: %s needs an integer >= %d (got '%s')\n", name, lo, v ? v : "");
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int parse_args(int argc, char **argv, opts *o)
{
    *o = (opts){.concurrency = 4, .requests = 16, .prompt_tokens = 128, .max_tokens = 64,
                .timeout_s = 300, .inputs = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (!strcmp(a, "--json")) { o->json = true; continue; }
        if (!strcmp(a, "--chat")) { o->chat = true; continue; }
        if (!strcmp(a, "--embeddings")) { o->embeddings = true; continue; }
        if (!strcmp(a, "--base64")) { o->base64 = true; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); exit(0); }
        if (!v) { fprintf(stderr, "rlxd-loadgen: %s needs a value\n", a); return -1; }
        i++;
        if (!strcmp(a, "--url")) o->url = v;
        else if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--api-key")) o->api_key = v;
        else if (!strcmp(a, "--concurrency")) rc = parse_int(a, v, 1, &o->concurrency);
        else if (!strcmp(a, "--requests")) rc = parse_int(a, v, 1, &o->requests);
        else if (!strcmp(a, "--prompt-tokens")) rc = parse_int(a, v, 1, &o->prompt_tokens);
        else if (!strcmp(a, "--max-tokens")) rc = parse_int(a, v, 1, &o->max_tokens);
        else if (!strcmp(a, "--inputs")) rc = parse_int(a, v, 1, &o->inputs);
        else if (!strcmp(a, "--prompt-seed")) rc = parse_int(a, v, 0, &o->prompt_seed);
        else if (!strcmp(a, "--timeout")) {
            char *end;
            o->timeout_s = strtod(v, &end);
            if (*end || !(o->timeout_s > 0) || !(o->timeout_s <= 1e7)) { /* inf overflowed the milliseconds */
                fprintf(stderr, "rlxd-loadgen: --timeout needs a positive number of seconds, at most 1e7\n");
                return -1;
            }
        } else {
            fprintf(stderr, "rlxd-loadgen: unknown option '%s'\n", a);
            return -1;
        }
        if (rc) return -1;
    }
    if (!o->url || !o->model) {
        fprintf(stderr, "rlxd-loadgen: --url and --model are required\n");
        return -1;
    }
    if (strncmp(o->url, "http://", 7) && strncmp(o->url, "https://", 8)) {
        fprintf(stderr, "rlxd-loadgen: --url must start with http:// or https:// (got '%s')\n", o->url);
        return -1;
    }
    return 0;
}

static void print_json(const opts *o, const stats *st, double wall, int not_started)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "requests", st->ok + st->errors);
    cJSON_AddNumberToObject(j, "ok", st->ok);
    cJSON_AddNumberToObject(j, "errors", st->errors);
    cJSON_AddNumberToObject(j, "not_started", not_started);
    cJSON_AddNumberToObject(j, "concurrency", o->concurrency);
    cJSON_AddNumberToObject(j, "duration_s", wall);
    cJSON_AddNumberToObject(j, "output_tokens", (double)st->out_tokens);
    cJSON_AddNumberToObject(j, "prompt_tokens", (double)st->prompt_tokens);
    cJSON_AddNumberToObject(j, "output_tps", wall > 0 ? (double)st->out_tokens / wall : 0);
    cJSON_AddNumberToObject(j, "requests_per_s", wall > 0 ? st->ok / wall : 0);
    if (o->embeddings) {
        cJSON_AddNumberToObject(j, "inputs", (double)st->inputs);
        cJSON_AddNumberToObject(j, "inputs_per_s", wall > 0 ? (double)st->inputs / wall : 0);
        cJSON_AddNumberToObject(j, "prompt_tps", wall > 0 ? (double)st->prompt_tokens / wall : 0);
    }
    const struct { const char *name; const dvec *d; } rows[] = {
        {"ttft", &st->ttft}, {"itl", &st->itl}, {"latency", &st->e2e}};
    for (size_t r = 0; r < 3; r++) {
        char k[32];
        const double ps[] = {50, 90, 99};
        for (size_t i = 0; i < 3; i++) {
            snprintf(k, sizeof k, "%s_p%d_ms", rows[r].name, (int)ps[i]);
            double v = pct_ms(rows[r].d, ps[i]);
            if (isnan(v)) cJSON_AddNullToObject(j, k); else cJSON_AddNumberToObject(j, k, v);
        }
        snprintf(k, sizeof k, "%s_mean_ms", rows[r].name);
        double v = mean_ms(rows[r].d);
        if (isnan(v)) cJSON_AddNullToObject(j, k); else cJSON_AddNumberToObject(j, k, v);
    }
    if (st->first_error[0]) cJSON_AddStringToObject(j, "first_error", st->first_error);
    char *s = cJSON_PrintUnformatted(j);
    if (s) puts(s);
    free(s);
    cJSON_Delete(j);
}

static void print_table(const opts *o, const stats *st, double wall, int not_started)
{
    printf("url            %s%s\n", o->url, o->chat ? " (chat)" : "");
    printf("requests       %d ok, %d errors, %d not started (concurrency %d)\n", st->ok,
           st->errors, not_started, o->concurrency);
    printf("duration       %.2f s\n", wall);
    if (o->embeddings)
        printf("inputs         %ld (%.1f inputs/s, %.1f prompt tok/s, %.2f req/s)\n", st->inputs,
               wall > 0 ? (double)st->inputs / wall : 0.0, wall > 0 ? (double)st->prompt_tokens / wall : 0.0,
               wall > 0 ? st->ok / wall : 0.0);
    else
        printf("output tokens  %ld (%.1f tok/s, %.2f req/s)\n", st->out_tokens,
               wall > 0 ? (double)st->out_tokens / wall : 0.0, wall > 0 ? st->ok / wall : 0.0);
    printf("%-14s %10s %10s %10s %10s\n", "", "p50", "p90", "p99", "mean");
    const struct { const char *name; const dvec *d; } rows[] = {
        {"TTFT (ms)", &st->ttft}, {"ITL (ms)", &st->itl}, {"latency (ms)", &st->e2e}};
    for (size_t r = 0; r < 3; r++)
        printf("%-14s %10.2f %10.2f %10.2f %10.2f\n", rows[r].name, pct_ms(rows[r].d, 50),
               pct_ms(rows[r].d, 90), pct_ms(rows[r].d, 99), mean_ms(rows[r].d));
    if (st->first_error[0]) printf("first error    %s\n", st->first_error);
}

int main(int argc, char **argv)
{
    opts o;
    if (parse_args(argc, argv, &o)) {
        usage(stderr);
        return 2;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        fprintf(stderr, "rlxd-loadgen: libcurl failed to initialize\n");
        return 1;
    }
    CURLM *m = curl_multi_init();
    stats st = {0};
    int started = 0, running = 0;
    double t0 = now_s(), deadline = t0 + o.timeout_s, t_end = t0;
    /* one error buffer per slot: curl writes into it until the transfer is removed */
    char (*errbufs)[CURL_ERROR_SIZE] = calloc((size_t)o.concurrency, CURL_ERROR_SIZE);
    stream **slots = calloc((size_t)o.concurrency, sizeof *slots);
    if (!m || !errbufs || !slots) {
        fprintf(stderr, "rlxd-loadgen: out of memory\n");
        return 1;
    }
    for (;;) {
        /* keep every slot busy while requests remain and time is left */
        for (int i = 0; i < o.concurrency && started < o.requests && now_s() < deadline; i++) {
            if (slots[i]) continue;
            slots[i] = stream_new(&o, &st, started, deadline, errbufs[i]);
            if (!slots[i]) {
                fprintf(stderr, "rlxd-loadgen: out of memory starting a request\n");
                deadline = now_s();
                break;
            }
            curl_multi_add_handle(m, slots[i]->h);
            started++;
            running++;
        }
        if (running == 0) break;
        int still;
        curl_multi_perform(m, &still);
        CURLMsg *msg;
        int q;
        bool freed = false;
        while ((msg = curl_multi_info_read(m, &q))) {
            if (msg->msg != CURLMSG_DONE) continue;
            stream *s = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            CURLcode cc = msg->data.result;
            int slot = 0;
            while (slot < o.concurrency && slots[slot] != s) slot++;
            curl_multi_remove_handle(m, s->h);
            finish(s, cc, slot < o.concurrency ? errbufs[slot] : "");
            stream_free(s);
            if (slot < o.concurrency) slots[slot] = NULL;
            running--;
            t_end = now_s();
            freed = true;
        }
        /* a finished request's slot starts its next request at once: waiting in poll first
         * held it until some other transfer made progress (at worst 100 ms), so a client
         * answered in a batch with others idled for a whole server step */
        if (freed && started < o.requests && now_s() < deadline) continue;
        if (running > 0) curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    double wall = t_end - t0;
    for (size_t k = 0; k < 3; k++) {
        dvec *d = k == 0 ? &st.ttft : k == 1 ? &st.itl : &st.e2e;
        if (d->n) qsort(d->v, d->n, sizeof *d->v, cmp_d);
    }
    int not_started = o.requests - started;
    if (o.json) print_json(&o, &st, wall, not_started);
    else print_table(&o, &st, wall, not_started);
    curl_multi_cleanup(m);
    curl_global_cleanup();
    free(errbufs);
    free(slots);
    free(st.ttft.v);
    free(st.itl.v);
    free(st.e2e.v);
    return st.ok > 0 ? 0 : 1;
}
