/* models.c - the models `rlxd serve` serves: the -m ones, loaded at start, and every model of
 * --models-dir, loaded when a request names it. Loads and unloads (rlx_worker_start / _stop) run
 * on the libuv threadpool, so the loop keeps answering /health and the other models meanwhile;
 * requests for a model being loaded wait as calls (rlx_srv_model_wait) and run once it is ready.
 * A model is unloaded only when no job or task uses it: after its keep-alive, on POST
 * /models/unload, or to make room (--max-loaded, --max-loaded-mem: the least recently used idle
 * one, model_policy.c). Loop thread only, except load_work / unload_work. */
#include "server/cli.h"
#include "server/serve.h"
#include "engine/pool.h"
#include "backends/dtype.h"
#include "backends/quant.h"
#include "backends/cpu/threadpool.h"
#include "models/model_files.h"
#include "models/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static void pump(rlx_srv *s);
static void begin_unload(rlx_model_slot *m, const char *why);
static bool file_changed(const rlx_model_slot *m);

static double default_keep_alive(const rlx_srv *s)
{
    return s->cfg->keep_alive;
}

/* ---- loads ------------------------------------------------------------------------------- */

static void views(rlx_srv *s, rlx_model_view *v)
{
    for (size_t i = 0; i < s->n_models; i++) {
        const rlx_model_slot *m = s->models[i];
        v[i] = (rlx_model_view){.state = m->state, .busy = m->users > 0 || m->n_waiting > 0,
                                .last_used = m->last_used, .bytes = m->bytes};
    }
}

static rlx_model_limits limits(const rlx_srv *s)
{
    return (rlx_model_limits){.max_loaded = s->cfg->max_loaded, .max_bytes = (uint64_t)s->cfg->max_loaded_mem << 20};
}

/* Reads the model's files once before the loader maps them, logging a line per 10% with the
 * bytes and the rate: the loader maps the weights and cannot tell its progress, and the page
 * cache then holds what the first forward step would read. Only files of PREFETCH_MIN_BYTES or
 * more, and regular files (a FIFO or device is left to the loader). Threadpool. */
#define PREFETCH_MIN_BYTES (16u << 20)
static void prefetch(rlx_model_slot *m)
{
    const char *path = m->cfg->path;
    char prefix[4096], part[4200];
    uint32_t no = 0, count = 1;
    bool split = rlx_gguf_split_parse_name(path, prefix, sizeof prefix, &no, &count) && count > 1;
    uint64_t total = 0;
    for (uint32_t i = 0; i < count; i++) {
        struct stat st;
        if (split && rlx_gguf_split_name(part, sizeof part, prefix, i, count)) return;
        if (stat(split ? part : path, &st) || !S_ISREG(st.st_mode)) return; /* the loader says why */
        total += (uint64_t)st.st_size;
    }
    if (total < PREFETCH_MIN_BYTES) return;
    size_t chunk = (size_t)RLX_MIN(RLX_MAX(total / 100, (uint64_t)1 << 20), (uint64_t)8 << 20);
    char *buf = malloc(chunk);
    if (!buf) return;
    uint64_t done = 0;
    int decile = 0;
    double t0 = rlx_now();
    for (uint32_t i = 0; i < count; i++) {
        if (split && rlx_gguf_split_name(part, sizeof part, prefix, i, count)) break;
        int fd = open(split ? part : path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) break;
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        ssize_t n;
        while ((n = read(fd, buf, chunk)) > 0) {
            done += (uint64_t)n;
            int p = (int)(RLX_MIN(done, total) * 1000 / total);
            atomic_store(&m->load_permille, p);
            if (p / 100 > decile) {
                decile = p / 100;
                double dt = rlx_now() - t0;
                fprintf(stderr, "rlxd: loading model '%s': %d%% (%.1f of %.1f MiB, %.0f MiB/s)\n", m->lname,
                        decile * 10, (double)done / 1048576.0, (double)total / 1048576.0,
                        dt > 0 ? (double)done / 1048576.0 / dt : 0.0);
            }
        }
        close(fd);
    }
    free(buf);
}

static void load_work(uv_work_t *w)
{
    rlx_model_slot *m = w->data;
    double t0 = rlx_now();
    prefetch(m);
    m->prefetch_s = rlx_now() - t0;
    if (rlx_worker_start(&m->w_new, &m->wc, &m->err)) m->w_new = NULL;
}

static void special_text(const rlx_tokenizer *t, int32_t id, char *buf, size_t cap)
{
    buf[0] = 0;
    if (id < 0) return;
    size_t n = rlx_token_to_bytes(t, id, true, buf, cap - 1);
    buf[n < cap - 1 ? n : cap - 1] = 0;
}

static void mib(char *buf, size_t cap, uint64_t bytes)
{
    snprintf(buf, cap, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
}

/* The waiters of m, each answered once with status (their calls free themselves). */
static void answer_waiters(rlx_model_slot *m, int status)
{
    rlx_call *c = m->wait_head;
    m->wait_head = m->wait_tail = NULL;
    m->n_waiting = 0;
    while (c) {
        rlx_call *next = c->wait_next;
        if (c->slot) *c->slot = NULL;
        c->slot = NULL;
        c->done(c, c->client, status); /* may free c, may hold m */
        c = next;
    }
}

static void idle(rlx_model_slot *m);

static void ready(rlx_model_slot *m)
{
    m->w = m->w_new;
    m->w_new = NULL;
    m->tok = rlx_worker_tokenizer(m->w);
    m->n_vocab = rlx_tokenizer_n_vocab(m->tok);
    special_text(m->tok, rlx_tokenizer_bos(m->tok), m->bos, sizeof m->bos);
    special_text(m->tok, rlx_tokenizer_eos(m->tok), m->eos, sizeof m->eos);
    size_t tlen = 0;
    const char *tsrc = rlx_worker_chat_template_src(m->w, &tlen);
    rlx_tc_detect(tsrc, tlen, &m->tc);
    /* the format's markers that are control tokens: written as text, seen by grammars */
    const char *markers[32];
    if (rlx_worker_set_marker_tokens(m->w, markers, rlx_tc_marker_texts(&m->tc, markers, 32)) < 0)
        fprintf(stderr, "rlxd: model '%s': out of memory marking its tool-call tokens\n", m->lname);
    m->created = (long long)time(NULL);
    m->state = RLX_MODEL_READY;
    m->last_used = rlx_now();
    m->n_loads++;
    int kv_type;
    int32_t kv_block, kv_blocks;
    rlx_worker_kv_layout(m->w, &kv_type, &kv_block, &kv_blocks);
    size_t wbytes = 0, kvbytes = 0;
    rlx_worker_memory(m->w, &wbytes, &kvbytes);
    m->bytes = wbytes + kvbytes;
    char threads[32] = "", wb[32], kb[32];
    const char *backend = m->wc.backend ? m->wc.backend : "cpu";
    if (!strcmp(backend, "cpu"))
        snprintf(threads, sizeof threads, ", %d thread%s", m->wc.n_threads, m->wc.n_threads == 1 ? "" : "s");
    mib(wb, sizeof wb, wbytes);
    mib(kb, sizeof kb, kvbytes);
    int pool = rlx_worker_pooling(m->w);
    if (pool >= 0) /* an embedding model: its pooling and vector size instead of the KV pool */
        fprintf(stderr, "rlxd: model '%s' ready (%s, backend %s%s, loaded in %.3f s, context %d, weights %s, "
                "embeddings: pooling %s, %d values)\n", m->lname, m->lpath, backend, threads, m->load_s,
                rlx_worker_n_ctx(m->w), wb, rlx_pooling_name((rlx_pooling)pool), rlx_worker_n_embd(m->w));
    else
        fprintf(stderr, "rlxd: model '%s' ready (%s, backend %s%s, loaded in %.3f s, context %d, weights %s, "
                "KV %s %s: %d blocks of %d tokens)\n", m->lname, m->lpath, backend, threads, m->load_s,
                rlx_worker_n_ctx(m->w), wb, kb, rlx_dtype_get(kv_type)->name, kv_blocks, kv_block);
    const size_t packed = rlx_worker_packed_bytes(m->w);
    if (packed) {
        char pb[32];
        mib(pb, sizeof pb, packed);
        fprintf(stderr, "rlxd: model '%s': %s of its weights repacked at load for the %s kernels (RLX_CPU_REPACK=0 keeps the "
                "file's layout)\n", m->lname, pb, rlx_cpu_path());
    }
    if (rlx_worker_draft_model(m->w))
        fprintf(stderr, "rlxd: model '%s' drafts with %s (speculative decoding; weights and KV above include it)\n",
                m->lname, rlx_worker_draft_model(m->w));
    rlx_load_times lt;
    rlx_worker_load_times(m->w, &lt);
    fprintf(stderr, "rlxd: model '%s' load phases: read %.3f s, map %.3f s, graph %.3f s, compile %.3f s, "
            "backend prepare %.3f s, memory %.3f s, tokenizer %.3f s (cache: %s), chat template %.3f s\n",
            m->lname, m->prefetch_s, lt.map, lt.build, lt.compile, lt.prepare, lt.memory, lt.tokenizer,
            lt.tokenizer_cache, lt.chat_template);
    if (lt.pipeline_cache[0]) fprintf(stderr, "rlxd: model '%s' Vulkan pipeline cache: %s\n", m->lname, lt.pipeline_cache);
}

static void load_done(uv_work_t *w, int status)
{
    rlx_model_slot *m = w->data;
    rlx_srv *s = m->srv;
    m->load_s = rlx_now() - m->load_t0;
    bool boot = m->booting;
    if (boot) {
        m->booting = false;
        s->n_booting--;
    }
    if (status || !m->w_new) {
        if (m->drain_after_load) { /* gone already: the models that waited for its room load now */
            m->drain_after_load = false;
            uv_timer_start(&s->wake_timer, rlx_models_wake, 0, 0);
        }
        m->state = RLX_MODEL_FAILED;
        rlx_model_signature(m->cfg->path, m->fail_sig);
        m->n_load_failures++;
        if (status) rlx_errorf(&m->err, RLX_ECANCELED, "the load was cancelled");
        fprintf(stderr, "rlxd: cannot load model '%s' from %s: %s\n", m->lname, m->lpath, m->err.msg);
        answer_waiters(m, RLX_MODEL_LOAD_FAILED);
        if (boot) { /* a -m model the daemon was started to serve: as before, stop */
            s->exit_code = 1;
            if (!s->stopping) rlx_srv_begin_stop(s);
            return;
        }
        pump(s);
        rlx_models_drop_removed(m);
        return;
    }
    ready(m);
    if (s->stopping) {
        answer_waiters(m, RLX_ECANCELED);
        return;
    }
    answer_waiters(m, 0); /* they hold it now (new requests after the drain below wait) */
    if (m->drain_after_load) { /* another model waits for its room (drain_for) */
        m->drain_after_load = false;
        m->unload_asked = true;
    }
    if (!m->users) idle(m);
    if (boot && s->n_booting == 0) {
        fprintf(stderr, "rlxd: all models ready\n");
        if (s->front->models_ready) s->front->models_ready(s);
    }
    pump(s);
}

/* Starts the queued loads that fit now (evicted models have gone). */
static void pump(rlx_srv *s)
{
    if (s->stopping) return;
    rlx_model_view *v = calloc(s->n_models ? s->n_models : 1, sizeof *v);
    if (!v) return;
    rlx_model_limits lim = limits(s);
    for (size_t i = 0; i < s->n_models; i++) {
        rlx_model_slot *m = s->models[i];
        if (m->state != RLX_MODEL_QUEUED) continue;
        views(s, v);
        if (!rlx_model_can_start(v, s->n_models, i, &lim)) continue;
        m->state = RLX_MODEL_LOADING;
        m->load_t0 = rlx_now();
        atomic_store(&m->load_permille, 0);
        m->load.data = m;
        fprintf(stderr, "rlxd: loading model '%s' from %s\n", m->lname, m->lpath);
        if (uv_queue_work(s->loop, &m->load, load_work, load_done)) {
            m->state = RLX_MODEL_FAILED;
            rlx_errorf(&m->err, RLX_EIO, "cannot queue the load");
            answer_waiters(m, RLX_MODEL_LOAD_FAILED);
        }
    }
    free(v);
}

/* Accepts a load of m (UNLOADED or FAILED): evicts what the limits require and queues it.
 * RLX_EFULL when no idle model can make room, RLX_ETOOLONG when the model alone exceeds
 * --max-loaded-mem (its estimate: the file's size until it has loaded once, then what it held). */
static int start_load(rlx_model_slot *m)
{
    rlx_srv *s = m->srv;
    rlx_model_view *v = calloc(s->n_models, sizeof *v);
    size_t *victims = calloc(s->n_models, sizeof *victims), nv = 0;
    if (!v || !victims) {
        free(v);
        free(victims);
        return RLX_ENOMEM;
    }
    views(s, v);
    rlx_model_limits lim = limits(s);
    if (lim.max_bytes > 0 && m->bytes > lim.max_bytes) { /* no eviction can ever make room */
        free(v);
        free(victims);
        return RLX_ETOOLONG;
    }
    size_t target = 0;
    while (s->models[target] != m) target++;
    bool ok = rlx_model_plan_load(v, s->n_models, target, &lim, victims, &nv);
    free(v);
    if (!ok) {
        free(victims);
        return RLX_EFULL;
    }
    for (size_t i = 0; i < nv; i++) {
        s->models[victims[i]]->n_evictions++;
        char why[300];
        snprintf(why, sizeof why, "least recently used, making room for '%s'", m->cfg->name);
        begin_unload(s->models[victims[i]], why);
    }
    free(victims);
    m->state = RLX_MODEL_QUEUED;
    m->err = (rlx_error){0};
    pump(s);
    return 0;
}

bool rlx_model_retry_worth(const rlx_model_slot *m)
{
    if (m->err.code == RLX_ENOMEM || m->err.code == RLX_ECANCELED || m->err.code == RLX_EFULL) return true;
    int64_t now[RLX_MODEL_SIG];
    rlx_model_signature(m->cfg->path, now);
    return memcmp(now, m->fail_sig, sizeof now) != 0;
}

static void busy_error(const rlx_model_slot *m, rlx_api_error *e)
{
    const rlx_serve_config *c = m->srv->cfg;
    char lim[96] = "";
    if (c->max_loaded > 0 && c->max_loaded_mem > 0)
        snprintf(lim, sizeof lim, "--max-loaded %d, --max-loaded-mem %lld MiB", c->max_loaded, (long long)c->max_loaded_mem);
    else if (c->max_loaded > 0) snprintf(lim, sizeof lim, "--max-loaded %d", c->max_loaded);
    else snprintf(lim, sizeof lim, "--max-loaded-mem %lld MiB", (long long)c->max_loaded_mem);
    rlx_api_errorf(e, 503, RLX_API_ERR_UNAVAILABLE, NULL,
                   "The model '%s' cannot be loaded now: the loaded models are all in use (%s); retry shortly.",
                   m->cfg->name, lim);
}

/* No idle model can make room for m: the least recently used ones that would are drained (they
 * take no new request, and unload once their requests end; unload_done then loads m), and m's
 * requests wait for it - under steady traffic to the loaded models m was refused for ever (503
 * "all in use"). A model being loaded (not a -m one at start) may be chosen too: it drains once
 * loaded, after the requests that waited for it - two models asked for in turn at --max-loaded 1
 * got a 503 when one was loading. False when no set of models would make room. */
static bool drain_for(rlx_model_slot *m)
{
    rlx_srv *s = m->srv;
    rlx_model_view *v = calloc(s->n_models, sizeof *v);
    size_t *victims = calloc(s->n_models, sizeof *victims), nv = 0, target = 0;
    bool ok = v && victims;
    if (ok) {
        views(s, v);
        for (size_t i = 0; i < s->n_models; i++) {
            rlx_model_slot *x = s->models[i];
            if (x == m) target = i;
            if ((v[i].state == RLX_MODEL_QUEUED || v[i].state == RLX_MODEL_LOADING) && !x->booting)
                v[i].state = RLX_MODEL_READY; /* drained once loaded */
            if (v[i].state != RLX_MODEL_READY) continue;
            if (x->unload_asked || x->drain_after_load) v[i].state = RLX_MODEL_UNLOADING; /* draining already: going */
            else v[i].busy = false;                                                        /* may be drained */
        }
        rlx_model_limits lim = limits(s);
        ok = rlx_model_plan_load(v, s->n_models, target, &lim, victims, &nv);
    }
    for (size_t k = 0; ok && k < nv; k++) {
        rlx_model_slot *x = s->models[victims[k]];
        if (x->unload_asked || x->drain_after_load) continue;
        x->n_evictions++;
        if (x->state != RLX_MODEL_READY) {
            fprintf(stderr, "rlxd: draining model '%s' once loaded, to make room for '%s' (the requests that wait for "
                    "it run first, new ones wait)\n", x->lname, m->lname);
            x->drain_after_load = true;
            continue;
        }
        fprintf(stderr, "rlxd: draining model '%s' to make room for '%s' (its requests end, new ones wait)\n", x->lname,
                m->lname);
        x->unload_asked = true;
        idle(x); /* idle already: it goes now */
    }
    if (ok && !m->blocked) m->blocked = ++s->block_seq;
    free(v);
    free(victims);
    return ok;
}

/* After an unload: the models that waited for room, in the order they began to, then m's own
 * requests (which came while it drained): the first to wait loads first. */
static void load_waiting(rlx_model_slot *m)
{
    rlx_srv *s = m->srv;
    for (;;) {
        rlx_model_slot *next = NULL;
        for (size_t i = 0; i < s->n_models; i++) {
            rlx_model_slot *x = s->models[i];
            if (x->blocked && x->n_waiting && x->state == RLX_MODEL_UNLOADED && (!next || x->blocked < next->blocked)) next = x;
        }
        if (!next) break;
        int rc = start_load(next);
        if (rc == RLX_EFULL) break; /* still draining: the next unload tries again */
        next->blocked = 0;
        if (rc) answer_waiters(next, rc == RLX_ETOOLONG ? rc : RLX_ECANCELED);
    }
    if (m->n_waiting && m->state == RLX_MODEL_UNLOADED) {
        int rc = start_load(m); /* requests came meanwhile: load it again */
        if (rc == RLX_EFULL && drain_for(m)) return;
        if (rc) answer_waiters(m, rc == RLX_EFULL || rc == RLX_ETOOLONG ? rc : RLX_ECANCELED);
    }
}

/* A model that can never load under --max-loaded-mem: said so, not "retry shortly" (it got 503
 * + Retry-After for ever, with nothing in use). */
static void too_big_error(const rlx_model_slot *m, rlx_api_error *e)
{
    rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, "model", "The model '%s' cannot be loaded: it needs %.1f MiB (%s), more "
                   "than --max-loaded-mem %lld MiB allows for all models together.", m->cfg->name, (double)m->bytes / 1048576.0,
                   m->n_loads ? "what it held when last loaded" : "its file's size", (long long)m->srv->cfg->max_loaded_mem);
    e->code = "model_load_failed";
}

/* The answer to a load start_load refused (RLX_EFULL, RLX_ETOOLONG, or out of memory). */
static void load_refusal(const rlx_model_slot *m, int rc, rlx_api_error *e)
{
    if (rc == RLX_EFULL) busy_error(m, e);
    else if (rc == RLX_ETOOLONG) too_big_error(m, e);
    else rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
}

void rlx_srv_model_wait_error(const rlx_model_slot *m, int status, rlx_api_error *e)
{
    if (status == RLX_ECANCELED) rlx_api_error_shutdown(e);
    else if (status == RLX_EFULL || status == RLX_ETOOLONG) load_refusal(m, status, e);
    else if (status) {
        rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, "model", "The model '%s' failed to load: %s", m->cfg->name,
                       m->err.msg);
        e->code = "model_load_failed";
    }
}

int rlx_srv_model_wait(rlx_model_slot *m, rlx_call *call, void *client, rlx_call **slot, rlx_call_done_fn done,
                       rlx_api_error *e)
{
    rlx_srv *s = m->srv;
    if (s->stopping) return rlx_api_error_shutdown(e);
    if (m->n_waiting >= (size_t)s->cfg->max_queue)
        return rlx_api_errorf(e, 503, RLX_API_ERR_UNAVAILABLE, NULL,
                              "Too many requests wait for the model '%s' to load (--max-queue %d); retry shortly.",
                              m->cfg->name, s->cfg->max_queue);
    if (m->state == RLX_MODEL_UNLOADED || m->state == RLX_MODEL_FAILED) {
        int rc = start_load(m);
        if (rc == RLX_EFULL && drain_for(m)) rc = 0; /* it waits for the room being made */
        if (rc) {
            load_refusal(m, rc, e);
            return rc;
        }
    }
    /* QUEUED, LOADING, or UNLOADING (it loads again once gone) */
    call->srv = s;
    call->client = client;
    call->slot = slot;
    call->done = done;
    call->run = NULL;
    call->wait_next = NULL;
    if (m->wait_tail) m->wait_tail->wait_next = call;
    else m->wait_head = call;
    m->wait_tail = call;
    m->n_waiting++;
    if (slot) *slot = call;
    return 0;
}

int rlx_srv_model_load(rlx_model_slot *m, rlx_api_error *e)
{
    if (m->srv->stopping) return rlx_api_error_shutdown(e);
    if (m->state != RLX_MODEL_UNLOADED && m->state != RLX_MODEL_FAILED) return 0;
    int rc = start_load(m);
    if (rc) load_refusal(m, rc, e);
    return rc;
}

rlx_model_slot *rlx_srv_model(rlx_srv *s, const char *name, rlx_model_slot **wait, rlx_api_error *e)
{
    rlx_model_slot *m = !name || !name[0] ? (s->n_models ? s->models[0] : NULL) : rlx_models_find(s, name);
    if (!m && s->cfg->models_dir) { /* added to the folder since the last scan? */
        rlx_models_rescan(s, false);
        m = !name || !name[0] ? (s->n_models ? s->models[0] : NULL) : rlx_models_find(s, name);
    }
    if (m && m->state == RLX_MODEL_FAILED && !m->boot && s->cfg->models_dir) {
        /* its file may have been mended since: a changed one gets a fresh slot (this one is
           dropped, so its name is kept first) */
        char *nm = strdup(m->cfg->name);
        rlx_models_rescan(s, false);
        if (nm) m = rlx_models_find(s, nm);
        free(nm);
    }
    if (wait) *wait = NULL;
    if (!m && !s->n_models) {
        rlx_api_errorf(e, 404, RLX_API_ERR_INVALID, "model", "No model is served: --models-dir %s holds no GGUF model.",
                       s->cfg->models_dir ? s->cfg->models_dir : "");
        e->code = "model_not_found";
        return NULL;
    }
    if (!m) {
        rlx_api_errorf(e, 404, RLX_API_ERR_INVALID, "model", "The model '%s' does not exist; GET /v1/models lists the served ones.",
                       name ? name : "");
        e->code = "model_not_found";
        return NULL;
    }
    if (m->state == RLX_MODEL_READY && !m->users && file_changed(m))
        begin_unload(m, "its file changed on disk: it loads again from the file"); /* this request waits */
    /* POST /models/unload asked while in use: the model drains - a new request waits for the
       unload and the load after it (under steady traffic it was never idle, so never unloaded) */
    if (m->state == RLX_MODEL_READY && m->unload_asked && wait) {
        *wait = m;
        return NULL;
    }
    if (m->state == RLX_MODEL_READY) return m;
    if (m->booting) {
        rlx_api_errorf(e, 503, RLX_API_ERR_UNAVAILABLE, NULL, "The model '%s' is still loading; retry shortly.",
                       m->cfg->name);
        return NULL;
    }
    if (m->state == RLX_MODEL_FAILED) {
        rlx_srv_model_wait_error(m, RLX_MODEL_LOAD_FAILED, e);
        return NULL;
    }
    if (wait) {
        *wait = m;
        return NULL;
    }
    if (!rlx_srv_model_load(m, e))
        rlx_api_errorf(e, 503, RLX_API_ERR_UNAVAILABLE, NULL, "The model '%s' is loading; retry shortly.",
                       m->cfg->name);
    return NULL;
}

void rlx_models_boot(rlx_srv *s)
{
    for (size_t i = 0; i < s->n_models; i++) {
        rlx_model_slot *m = s->models[i];
        if (!m->boot) continue;
        m->booting = true;
        s->n_booting++;
        if (start_load(m)) {
            fprintf(stderr, "rlxd: model '%s' does not fit --max-loaded-mem %lld MiB\n", m->lname,
                    (long long)s->cfg->max_loaded_mem);
            m->booting = false;
            s->n_booting--;
            s->exit_code = 1;
            rlx_srv_begin_stop(s);
            return;
        }
    }
    if (!s->n_booting) {
        fprintf(stderr, "rlxd: all models ready\n");
        if (s->front->models_ready) s->front->models_ready(s);
    }
}

/* ---- unloads ----------------------------------------------------------------------------- */

static void unload_work(uv_work_t *w)
{
    rlx_model_slot *m = w->data;
    rlx_worker_stop(m->w_old, false);
}

static void unload_done(uv_work_t *w, int status)
{
    (void)status;
    rlx_model_slot *m = w->data;
    rlx_srv *s = m->srv;
    m->w_old = NULL;
    m->state = RLX_MODEL_UNLOADED;
    m->n_unloads++;
    fprintf(stderr, "rlxd: model '%s' unloaded\n", m->lname);
    if (!s->stopping) load_waiting(m);
    pump(s);
    rlx_models_drop_removed(m); /* its file went away while it was loaded: it goes now */
}

static void begin_unload(rlx_model_slot *m, const char *why)
{
    rlx_srv *s = m->srv;
    if (m->state != RLX_MODEL_READY || m->users) return;
    uv_timer_stop(&m->idle_timer);
    fprintf(stderr, "rlxd: unloading model '%s' (%s)\n", m->lname, why);
    m->state = RLX_MODEL_UNLOADING;
    m->unload_asked = false;
    m->w_old = m->w;
    m->w = NULL;
    m->tok = NULL;
    m->load.data = m;
    if (uv_queue_work(s->loop, &m->load, unload_work, unload_done)) {
        rlx_worker_stop(m->w_old, false); /* cannot happen with libuv's pool; never leak the model */
        unload_done(&m->load, 0);
    }
}

static void on_idle_timer(uv_timer_t *t)
{
    rlx_model_slot *m = t->data;
    if (!m->users && !m->srv->stopping) begin_unload(m, "keep-alive expired");
}

/* Whether the loaded model's files changed on disk (cut short or written to in place); its
 * requests fail from then on, so it is unloaded as soon as none uses it and loaded again. */
static bool file_changed(const rlx_model_slot *m)
{
    char why[600];
    if (!m->w || !rlx_worker_file_changed(m->w, why, sizeof why)) return false;
    fprintf(stderr, "rlxd: model '%s': %s\n", m->lname, why);
    return true;
}

/* m has no user left: its keep-alive applies. */
static void idle(rlx_model_slot *m)
{
    if (m->state != RLX_MODEL_READY || m->users || m->srv->stopping) return;
    if (file_changed(m)) begin_unload(m, "its file changed on disk: it loads again from the file at the next request");
    else if (m->unload_asked) begin_unload(m, "asked by POST /models/unload");
    else if (m->keep_alive == 0) begin_unload(m, "keep_alive 0");
    else if (m->keep_alive > 0)
        uv_timer_start(&m->idle_timer, on_idle_timer, (uint64_t)fmin(m->keep_alive * 1000.0, 1e15), 0);
}

void rlx_srv_model_keep_alive(rlx_model_slot *m, double seconds)
{
    m->keep_alive = seconds;
    uv_timer_stop(&m->idle_timer);
    idle(m);
}

void rlx_srv_model_unload_cancel(rlx_model_slot *m)
{
    if (m->drain_after_load) { /* the models waiting for its room: loaded if they can, else 503 */
        m->drain_after_load = false;
        uv_timer_start(&m->srv->wake_timer, rlx_models_wake, 0, 0);
    }
    if (!m->unload_asked) return;
    m->unload_asked = false;
    if (m->state == RLX_MODEL_READY && m->n_waiting) { /* they run, from the loop */
        m->wake_waiters = true;
        uv_timer_start(&m->srv->wake_timer, rlx_models_wake, 0, 0);
    }
}

void rlx_models_wake(uv_timer_t *t)
{
    rlx_srv *s = t->data;
    for (size_t i = 0; i < s->n_models; i++) {
        rlx_model_slot *m = s->models[i];
        if (!m->wake_waiters) continue;
        m->wake_waiters = false;
        if (m->state == RLX_MODEL_READY && !m->unload_asked && m->n_waiting) answer_waiters(m, 0);
    }
    /* a model that waited for room that no model is making any more (the drain was cancelled):
       it loads if it can now, else its requests get the 503 "all in use" after all */
    bool draining = false;
    for (size_t i = 0; i < s->n_models; i++)
        draining |= s->models[i]->state == RLX_MODEL_UNLOADING || s->models[i]->drain_after_load ||
                    (s->models[i]->state == RLX_MODEL_READY && s->models[i]->unload_asked);
    for (size_t i = 0; !draining && i < s->n_models; i++) {
        rlx_model_slot *x = s->models[i];
        if (!x->blocked || !x->n_waiting || x->state != RLX_MODEL_UNLOADED) continue;
        x->blocked = 0;
        int rc = start_load(x);
        if (rc) answer_waiters(x, rc == RLX_EFULL || rc == RLX_ETOOLONG ? rc : RLX_ECANCELED);
    }
}

int rlx_srv_model_unload(rlx_model_slot *m, rlx_api_error *e)
{
    if (m->state == RLX_MODEL_QUEUED || m->state == RLX_MODEL_LOADING)
        return rlx_api_errorf(e, 409, RLX_API_ERR_INVALID, "model",
                              "The model '%s' is loading; unload it once it is loaded.", m->cfg->name);
    if (m->state != RLX_MODEL_READY) return 0;
    m->unload_asked = true;
    idle(m);
    return 0;
}

void rlx_srv_model_hold(rlx_model_slot *m, const rlx_api_request *r)
{
    m->users++;
    uv_timer_stop(&m->idle_timer);
    if (r) m->keep_alive = r->has_keep_alive ? r->keep_alive_s : default_keep_alive(m->srv);
}

void rlx_srv_model_release(rlx_model_slot *m)
{
    if (--m->users > 0) return;
    m->last_used = rlx_now();
    idle(m);
}

/* ---- shutdown ---------------------------------------------------------------------------- */

void rlx_models_quiesce(rlx_srv *s)
{
    for (size_t i = 0; i < s->n_models; i++) {
        rlx_model_slot *m = s->models[i];
        uv_timer_stop(&m->idle_timer);
        if (m->state == RLX_MODEL_QUEUED) m->state = RLX_MODEL_UNLOADED;
        answer_waiters(m, RLX_ECANCELED);
    }
}

void rlx_models_close(rlx_srv *s)
{
    rlx_models_quiesce(s);
    for (size_t i = 0; i < s->n_models; i++) uv_close((uv_handle_t *)&s->models[i]->idle_timer, NULL);
}

/* ---- metrics ----------------------------------------------------------------------------- */

char *rlx_models_metrics(rlx_srv *s)
{
    static const struct { const char *name, *type, *help; } series[] = {
        {"rlxd_model_loaded", "gauge", "1 when the model is loaded, else 0."},
        {"rlxd_model_loads_total", "counter", "Loads of the model that succeeded."},
        {"rlxd_model_load_failures_total", "counter", "Loads of the model that failed."},
        {"rlxd_model_unloads_total", "counter", "Unloads of the model (keep-alive, eviction, operator)."},
        {"rlxd_model_evictions_total", "counter", "Unloads of the model to make room for another (LRU)."},
        {"rlxd_model_load_seconds", "gauge", "Duration of the model's last load."},
    };
    size_t cap = 2048 + s->n_models * RLX_ARRAY_LEN(series) * 400, len = 0; /* a line < 400 bytes */
    char *b = malloc(cap);
    if (!b) return NULL;
    b[0] = 0;
    for (size_t k = 0; k < RLX_ARRAY_LEN(series); k++) {
        len += (size_t)snprintf(b + len, cap - len, "# HELP %s %s\n# TYPE %s %s\n", series[k].name, series[k].help,
                                series[k].name, series[k].type);
        for (size_t i = 0; i < s->n_models && len < cap; i++) {
            const rlx_model_slot *m = s->models[i];
            double v = k == 0 ? (m->state == RLX_MODEL_READY) : k == 1 ? (double)m->n_loads
                     : k == 2 ? (double)m->n_load_failures : k == 3 ? (double)m->n_unloads
                     : k == 4 ? (double)m->n_evictions : m->load_s;
            char name[300];
            rlx_metrics_label(m->cfg->name, name, sizeof name);
            len += (size_t)snprintf(b + len, cap - len, "%s{model_name=\"%s\"} %.17g\n", series[k].name, name, v);
        }
        if (len >= cap) break;
    }
    return b;
}
