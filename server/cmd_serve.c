/* cmd_serve.c - `rlxd serve`: loads the models (one rlx_worker each, on the libuv threadpool so
 * /health can answer 503 meanwhile), serves HTTP or --stdio on one libuv loop, and on
 * SIGTERM/SIGINT stops accepting, lets requests in flight finish for a grace period, and
 * exits 0. */
#include "server/cli.h"
#include "server/serve.h"
#include "backends/cpu/threadpool.h"
#include "backends/dtype.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void load_work(uv_work_t *w)
{
    rlx_model_slot *m = w->data;
    if (rlx_worker_start(&m->w, &m->wc, &m->err)) m->w = NULL;
}

static void begin_stop(rlx_srv *s)
{
    if (s->stopping && s->stop_t0 > 0) return;
    s->stopping = true;
    s->stop_t0 = rlx_now();
    s->front->quiesce(s);
    rlx_srv_maybe_exit(s);
}

static void special_text(const rlx_tokenizer *t, int32_t id, char *buf, size_t cap)
{
    buf[0] = 0;
    if (id < 0) return;
    size_t n = rlx_token_to_bytes(t, id, true, buf, cap - 1);
    buf[n < cap - 1 ? n : cap - 1] = 0;
}

static void load_done(uv_work_t *w, int status)
{
    rlx_model_slot *m = w->data;
    rlx_srv *s = m->srv;
    if (status || !m->w) {
        m->state = RLX_MODEL_FAILED;
        s->n_failed++;
        fprintf(stderr, "rlxd: cannot load model '%s' from %s: %s\n", m->cfg->name, m->cfg->path,
                status ? "cancelled" : m->err.msg);
        s->exit_code = 1;
        begin_stop(s);
        return;
    }
    m->tok = rlx_worker_tokenizer(m->w);
    m->n_vocab = rlx_tokenizer_n_vocab(m->tok);
    special_text(m->tok, rlx_tokenizer_bos(m->tok), m->bos, sizeof m->bos);
    special_text(m->tok, rlx_tokenizer_eos(m->tok), m->eos, sizeof m->eos);
    size_t tlen = 0;
    const char *tsrc = rlx_worker_chat_template_src(m->w, &tlen);
    rlx_tc_detect(tsrc, tlen, &m->tc);
    m->created = (long long)time(NULL);
    m->state = RLX_MODEL_READY;
    s->n_ready++;
    int kv_type;
    int32_t kv_block, kv_blocks;
    rlx_worker_kv_layout(m->w, &kv_type, &kv_block, &kv_blocks);
    char threads[32] = "";
    if (!m->wc.backend || !strcmp(m->wc.backend, "cpu"))
        snprintf(threads, sizeof threads, ", %d thread%s", m->wc.n_threads, m->wc.n_threads == 1 ? "" : "s");
    fprintf(stderr, "rlxd: model '%s' ready (%s, context %d, KV %s: %d blocks of %d tokens%s)\n", m->cfg->name,
            m->cfg->path, rlx_worker_n_ctx(m->w), rlx_dtype_get(kv_type)->name, kv_blocks, kv_block, threads);
    if (s->stopping) return;
    if (s->n_ready == s->n_models) {
        fprintf(stderr, "rlxd: all models ready\n");
        if (s->front->models_ready) s->front->models_ready(s);
    }
}

static void on_signal(uv_signal_t *h, int signum)
{
    rlx_srv *s = h->data;
    if (s->stopping && s->stop_t0 > 0) {
        fprintf(stderr, "rlxd: second signal %d, stopping now\n", signum);
        uv_stop(s->loop);
        return;
    }
    fprintf(stderr, "rlxd: signal %d: no new connections, finishing %zu request(s) (up to %d s)\n", signum,
            s->n_jobs, s->cfg->grace_seconds);
    begin_stop(s);
}

void rlx_srv_maybe_exit(rlx_srv *s)
{
    if (!s->stopping) return;
    /* connections still sending their bodies do not hold the exit: they are answered 503 then */
    bool idle = s->n_jobs == 0 && s->n_tasks == 0 && s->front->idle(s);
    if (idle) uv_stop(s->loop);
}

/* After the grace period, how long the final events of cancelled requests may take to go out. */
#define FLUSH_SECONDS 0.5

static void on_drain_tick(uv_timer_t *t)
{
    rlx_srv *s = t->data;
    if (!s->stopping || s->stop_t0 <= 0) return;
    double dt = rlx_now() - s->stop_t0;
    if (dt >= s->cfg->grace_seconds && !s->grace_over) {
        /* every request gets its final event (a 503 "shutting down") rather than a cut */
        fprintf(stderr, "rlxd: grace period over, cancelling %zu request(s)\n", s->n_jobs);
        rlx_srv_end_all(s);
        if (s->front->end_tasks) s->front->end_tasks(s);
    } else if (dt >= s->cfg->grace_seconds + FLUSH_SECONDS) {
        /* clients too slow to take those final bytes are cut */
        uv_stop(s->loop);
        return;
    }
    rlx_srv_maybe_exit(s);
}

static void shutdown_all(rlx_srv *s)
{
    if (s->front->stop) s->front->stop(s);
    /* threadpool tasks borrow a model's tokenizer and template: those queued are cancelled, those
     * running (bounded: prompts are tokenized with a cap) are waited for */
    if (!s->grace_over) rlx_srv_end_all(s);
    while (s->n_tasks) {
        rlx_srv_cancel_work(s); /* also what a finished task queued after it */
        uv_run(s->loop, UV_RUN_ONCE);
    }
    rlx_srv_cancel_all(s);
    for (size_t i = 0; i < s->n_models; i++)
        if (s->models[i].w) {
            rlx_worker_stop(s->models[i].w, false);
            s->models[i].w = NULL;
            s->models[i].state = RLX_MODEL_FAILED;
        }
    /* the workers may have queued final events: handle them so jobs end cleanly */
    rlx_srv_drain_queue(s);
    if (s->front->close) s->front->close(s);
    rlx_srv_free_jobs(s);
    uv_close((uv_handle_t *)&s->async, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->drain_timer, NULL);
    uv_run(s->loop, UV_RUN_DEFAULT); /* closes handles; waits for a model still loading */
    for (size_t i = 0; i < s->n_models; i++)
        if (s->models[i].w) rlx_worker_stop(s->models[i].w, false);
    if (s->front->free) s->front->free(s);
    uv_mutex_destroy(&s->qlock);
}

static int serve(rlx_serve_config *cfg)
{
    rlx_srv *s = calloc(1, sizeof *s);
    if (!s) return 1;
    s->cfg = cfg;
    s->front = cfg->stdio ? &rlx_stdio_front : &rlx_http_front;
    s->loop = uv_default_loop();
    snprintf(s->fingerprint, sizeof s->fingerprint, "fp_rlxd_%s_%s", RLX_VERSION, cfg->backend ? cfg->backend : "cpu");
    rlx_metrics_init(&s->metrics);
    rlx_error err = {0};
    if (rlx_srv_queue_init(s)) {
        fprintf(stderr, "rlxd serve: cannot set up the event queue\n");
        free(s);
        return 1;
    }
    uv_signal_init(s->loop, &s->sigterm);
    uv_signal_init(s->loop, &s->sigint);
    uv_timer_init(s->loop, &s->drain_timer);
    s->sigterm.data = s->sigint.data = s->drain_timer.data = s;
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_timer_start(&s->drain_timer, on_drain_tick, 100, 100);
    uv_unref((uv_handle_t *)&s->drain_timer);

    int rc = s->front->start(s, &err);
    if (rc) {
        fprintf(stderr, "rlxd serve: %s\n", err.msg);
        s->exit_code = 1;
    } else {
        s->n_models = cfg->n_models;
        /* the default heeds the affinity mask and a cgroup CPU quota (a container's --cpus) */
        int threads = cfg->threads > 0 ? cfg->threads : rlx_cpu_count();
        for (size_t i = 0; i < cfg->n_models; i++) {
            rlx_model_slot *m = &s->models[i];
            m->srv = s;
            m->cfg = &cfg->models[i];
            m->wc = (rlx_worker_config){.model_path = m->cfg->path, .name = m->cfg->name, .n_threads = threads,
                                        .n_ctx = m->cfg->ctx ? m->cfg->ctx : cfg->ctx, .kv_type = cfg->kv_type,
                                        .kv_type_set = true, .kv_block = cfg->kv_block,
                                        .kv_mem_mib = (size_t)cfg->kv_mem_mib, .max_batch_tokens = cfg->max_batch_tokens,
                                        .draft_max = cfg->draft_max > 0 ? cfg->draft_max : -1,
                                        .max_seqs = cfg->max_seqs, .backend = cfg->backend, .device = cfg->device,
                                        .db_path = cfg->db, .session_ttl_s = cfg->session_ttl,
                                        .max_sessions = cfg->max_sessions, .max_queue = cfg->max_queue,
                                        .chat_template_file = m->cfg->chat_template ? m->cfg->chat_template
                                                                                    : cfg->chat_template};
            m->load.data = m;
            uv_queue_work(s->loop, &m->load, load_work, load_done);
        }
        uv_run(s->loop, UV_RUN_DEFAULT);
    }
    shutdown_all(s);
    int code = s->exit_code;
    if (!code) fprintf(stderr, "rlxd: stopped\n");
    free(s);
    return code;
}

int rlx_cmd_serve(int argc, char **argv)
{
    rlx_serve_config cfg;
    rlx_error err = {0};
    if (rlx_serve_config_load(&cfg, argc, argv, &err)) {
        fprintf(stderr, "rlxd serve: %s\n", err.msg);
        rlx_serve_config_free(&cfg);
        return 2;
    }
    if (cfg.help) {
        fputs(rlx_serve_usage(), stdout);
        rlx_serve_config_free(&cfg);
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    int rc = serve(&cfg);
    rlx_serve_config_free(&cfg);
    return rc;
}
