/* cmd_serve.c - `rlxd serve`: sets up the models (models.c: the -m ones load at start, on the
 * libuv threadpool so /health can answer 503 meanwhile, --models-dir's on demand), serves HTTP
 * or --stdio on one libuv loop, and on SIGTERM/SIGINT stops accepting, lets requests in flight
 * finish for a grace period, and exits 0. */
#include "server/cli.h"
#include "engine/pool.h"
#include "server/pull.h"
#include "server/serve.h"
#include "server/watchdog.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#ifndef RLX_COMMIT
#define RLX_COMMIT "unknown"
#endif

void rlx_srv_begin_stop(rlx_srv *s)
{
    if (s->stopping && s->stop_t0 > 0) return;
    s->stopping = true;
    s->stop_t0 = rlx_now();
    s->front->quiesce(s);
    rlx_models_quiesce(s);
    rlx_srv_maybe_exit(s);
}

/* The grace period is over (or cut short): every request still running gets its final event
 * (a 503 "shutting down") rather than a cut; they have FLUSH_SECONDS to go out. */
static void end_grace(rlx_srv *s)
{
    fprintf(stderr, "rlxd: grace period over, cancelling %zu request(s)\n", s->n_jobs);
    rlx_srv_end_all(s);
    if (s->front->end_tasks) s->front->end_tasks(s);
}

static void on_signal(uv_signal_t *h, int signum)
{
    rlx_srv *s = h->data;
    if (s->stopping && s->stop_t0 > 0 && !s->grace_over) {
        /* another signal while the requests finish: they end now, each with its final event
           (they were cut mid-stream, answered nothing, and logged 499) */
        fprintf(stderr, "rlxd: second signal %d, ending the grace period now\n", signum);
        s->stop_t0 = rlx_now() - s->cfg->grace_seconds; /* the flush is timed from now */
        end_grace(s);
        rlx_srv_maybe_exit(s);
        return;
    }
    if (s->stopping && s->stop_t0 > 0) {
        fprintf(stderr, "rlxd: signal %d while the last answers go out, stopping now\n", signum);
        uv_stop(s->loop);
        return;
    }
    fprintf(stderr, "rlxd: signal %d: no new connections, finishing %zu request(s) (up to %d s)\n", signum,
            s->n_jobs, s->cfg->grace_seconds);
    rlx_srv_begin_stop(s);
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
        end_grace(s);
    } else if (dt >= s->cfg->grace_seconds + FLUSH_SECONDS) {
        /* clients too slow to take those final bytes are cut */
        uv_stop(s->loop);
        return;
    }
    rlx_srv_maybe_exit(s);
}

/* For the watchdog's message: the models whose loads or unloads the shutdown waits for. */
static void name_busy_models(rlx_srv *s, rlx_watchdog *wd)
{
    char what[400] = "";
    size_t len = 0;
    for (size_t i = 0; i < s->n_models && len < sizeof what; i++) {
        const rlx_model_slot *m = s->models[i];
        if (m->state != RLX_MODEL_LOADING && m->state != RLX_MODEL_UNLOADING) continue;
        char name[128];
        rlx_log_escape(m->cfg->name, false, name, sizeof name);
        len += (size_t)snprintf(what + len, sizeof what - len, "%smodel '%s' (%s)", len ? ", " : "", name,
                                m->state == RLX_MODEL_LOADING ? "loading" : "unloading");
    }
    rlx_watchdog_set(wd, what[0] ? what : "the libuv loop's last handles");
    if (what[0] && s->cfg->stop_timeout > 0)
        fprintf(stderr, "rlxd: waiting for %s to stop (up to --stop-timeout %d s)\n", what, s->cfg->stop_timeout);
    else if (what[0])
        fprintf(stderr, "rlxd: waiting for %s to stop\n", what);
}

static void shutdown_all(rlx_srv *s)
{
    s->stopping = true; /* no model loads or unloads from here on */
    /* what is still running gets --stop-timeout seconds (a stuck step or load, else forever) */
    rlx_watchdog *wd = rlx_watchdog_start(s->cfg->stop_timeout);
    rlx_watchdog_set(wd, "threadpool tasks (prompts being prepared)");
    if (s->front->stop) s->front->stop(s);
    /* threadpool tasks borrow a model's tokenizer and template: those queued are cancelled, those
     * running (bounded: prompts are tokenized with a cap) are waited for */
    if (!s->grace_over) rlx_srv_end_all(s);
    while (s->n_tasks) {
        rlx_srv_cancel_work(s); /* also what a finished task queued after it */
        uv_run(s->loop, UV_RUN_ONCE);
    }
    rlx_srv_cancel_all(s);
    /* the workers may still send final events: let the jobs end cleanly (each lets go of its
       model), then stop the models; loads and unloads still running finish in the uv_run below */
    rlx_models_close(s);
    for (size_t i = 0; i < s->n_models; i++)
        if (s->models[i]->w) {
            char what[200], name[128];
            rlx_log_escape(s->models[i]->cfg->name, false, name, sizeof name);
            snprintf(what, sizeof what, "model '%s' (its worker's step in progress)", name);
            rlx_watchdog_set(wd, what);
            rlx_worker_stop(s->models[i]->w, false);
            s->models[i]->w = NULL;
            s->models[i]->state = RLX_MODEL_UNLOADED;
        }
    rlx_srv_drain_queue(s);
    if (s->front->close) s->front->close(s);
    rlx_srv_free_jobs(s);
    uv_close((uv_handle_t *)&s->async, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sighup, NULL);
    uv_close((uv_handle_t *)&s->drain_timer, NULL);
    uv_close((uv_handle_t *)&s->wake_timer, NULL);
    /* closes handles; waits for models still loading or unloading (their work reads the slots):
       a callback that calls uv_stop (rlx_srv_maybe_exit) ends a run early, so run until none is
       left */
    name_busy_models(s, wd);
    while (uv_run(s->loop, UV_RUN_DEFAULT)) {
    }
    rlx_watchdog_end(wd);
    rlx_models_free(s);
    if (s->front->free) s->front->free(s);
    uv_mutex_destroy(&s->qlock);
}

/* One daemon per --db: a second one on the same database forked every session silently (each
 * continued from its own memory and overwrote the other's turns; a delete through one was undone
 * by the other's next turn). An exclusive lock on DB.lock, held for the process's life (the
 * kernel drops it at exit, kill -9 too). -1 and a message when another process holds it. */
static int lock_db(const char *db, int *fd)
{
    *fd = -1;
    if (!db) return 0;
    size_t n = strlen(db) + 6;
    char *path = malloc(n);
    if (!path) return -1;
    snprintf(path, n, "%s.lock", db);
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (f < 0) {
        fprintf(stderr, "rlxd serve: --db %s: cannot open its lock file %s (%s)\n", db, path, strerror(errno));
        free(path);
        return -1;
    }
    if (flock(f, LOCK_EX | LOCK_NB)) {
        if (errno == EWOULDBLOCK)
            fprintf(stderr, "rlxd serve: --db %s is in use by another rlxd (it holds %s); give each daemon its own "
                    "database\n", db, path);
        else
            fprintf(stderr, "rlxd serve: --db %s: cannot lock %s (%s)\n", db, path, strerror(errno));
        close(f);
        free(path);
        return -1;
    }
    free(path);
    *fd = f;
    return 0;
}

static int serve(rlx_serve_config *cfg)
{
    int db_lock;
    if (lock_db(cfg->db, &db_lock)) return 1;
    rlx_srv *s = calloc(1, sizeof *s);
    if (!s) {
        if (db_lock >= 0) close(db_lock);
        return 1;
    }
    s->cfg = cfg;
    s->front = cfg->stdio ? &rlx_stdio_front : &rlx_http_front;
    s->loop = uv_default_loop();
    snprintf(s->fingerprint, sizeof s->fingerprint, "fp_rlxd_%s_%s", RLX_VERSION, cfg->backend ? cfg->backend : "cpu");
    rlx_metrics_init(&s->metrics);
    s->metrics.version = RLX_VERSION;
    s->metrics.commit = RLX_COMMIT;
    s->metrics.backend = cfg->backend ? cfg->backend : "cpu";
    rlx_error err = {0};
    if (rlx_srv_queue_init(s)) {
        fprintf(stderr, "rlxd serve: cannot set up the event queue\n");
        free(s);
        if (db_lock >= 0) close(db_lock);
        return 1;
    }
    uv_signal_init(s->loop, &s->sigterm);
    uv_signal_init(s->loop, &s->sigint);
    uv_signal_init(s->loop, &s->sighup);
    uv_timer_init(s->loop, &s->drain_timer);
    uv_timer_init(s->loop, &s->wake_timer);
    s->wake_timer.data = s;
    s->sigterm.data = s->sigint.data = s->sighup.data = s->drain_timer.data = s;
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_signal_start(&s->sighup, on_signal, SIGHUP);
    uv_timer_start(&s->drain_timer, on_drain_tick, 100, 100);
    uv_unref((uv_handle_t *)&s->drain_timer);

    int rc = rlx_models_init(s, &err);
    if (!rc) rc = s->front->start(s, &err);
    if (rc) {
        fprintf(stderr, "rlxd serve: %s\n", err.msg);
        s->exit_code = 1;
    } else {
        rlx_models_boot(s);
        uv_run(s->loop, UV_RUN_DEFAULT);
    }
    shutdown_all(s);
    int code = s->exit_code;
    if (!code) fprintf(stderr, "rlxd: stopped\n");
    free(s);
    if (db_lock >= 0) close(db_lock); /* after the stores closed (shutdown_all) */
    return code;
}

/* -m hf:... (and [model.NAME] path=hf:...): the files already downloaded to the cache, else a
 * download as `rlxd pull` makes (before serving: the models' loads read the local path). */
static int resolve_hf(rlx_serve_config *cfg)
{
    for (size_t i = 0; i < cfg->n_models; i++) {
        rlx_serve_model *m = &cfg->models[i];
        if (!rlx_hf_is_ref(m->path)) continue;
        rlx_hf_ref r;
        rlx_error err = {0};
        char path[4096];
        rlx_pull_opts o = {.retries = -1, .offline_first = true};
        if (rlx_hf_ref_parse(m->path, false, &r, &err) || rlx_pull(&r, &o, path, sizeof path, &err)) {
            fprintf(stderr, "rlxd serve: model '%s' (%s): %s\n", m->name, m->path, err.msg);
            return -1;
        }
        fprintf(stderr, "rlxd: model '%s': %s is %s\n", m->name, m->path, path);
        char *p = strdup(path);
        if (!p) return -1;
        free(m->path);
        m->path = p;
    }
    return 0;
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
    if (resolve_hf(&cfg)) {
        rlx_serve_config_free(&cfg);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    int rc = serve(&cfg);
    rlx_serve_config_free(&cfg);
    return rc;
}
