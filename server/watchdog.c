/* watchdog.c - the shutdown's deadline (see watchdog.h). */
#include "server/watchdog.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

struct rlx_watchdog {
    uv_loop_t loop;
    uv_timer_t timer;
    uv_signal_t sigterm, sigint, sighup;
    uv_async_t end;
    uv_thread_t thread;
    uv_mutex_t mu; /* what */
    char what[512];
    double secs;
};

/* Written with write(2): a thread stuck elsewhere may hold stdio's lock on stderr. */
static void give_up(rlx_watchdog *wd, const char *why)
{
    char msg[1024];
    uv_mutex_lock(&wd->mu);
    int n = snprintf(msg, sizeof msg, "rlxd: %s; exiting without waiting for %s\n", why,
                     wd->what[0] ? wd->what : "what is left");
    uv_mutex_unlock(&wd->mu);
    if (n > 0) {
        size_t len = (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
        ssize_t w = write(STDERR_FILENO, msg, len);
        (void)w;
    }
    _exit(1);
}

static void on_timer(uv_timer_t *t)
{
    rlx_watchdog *wd = t->data;
    char why[128];
    snprintf(why, sizeof why, "the stop took over --stop-timeout %g s", wd->secs);
    give_up(wd, why);
}

static void on_signal(uv_signal_t *h, int signum)
{
    char why[64];
    snprintf(why, sizeof why, "signal %d while stopping", signum);
    give_up(h->data, why);
}

static void on_end(uv_async_t *a)
{
    rlx_watchdog *wd = a->data;
    uv_close((uv_handle_t *)&wd->timer, NULL);
    uv_close((uv_handle_t *)&wd->sigterm, NULL);
    uv_close((uv_handle_t *)&wd->sigint, NULL);
    uv_close((uv_handle_t *)&wd->sighup, NULL);
    uv_close((uv_handle_t *)&wd->end, NULL);
}

static void run(void *arg)
{
    rlx_watchdog *wd = arg;
    uv_run(&wd->loop, UV_RUN_DEFAULT);
}

rlx_watchdog *rlx_watchdog_start(double secs)
{
    if (!(secs > 0)) return NULL;
    rlx_watchdog *wd = calloc(1, sizeof *wd);
    if (!wd) return NULL;
    wd->secs = secs;
    if (uv_loop_init(&wd->loop)) {
        free(wd);
        return NULL;
    }
    if (uv_mutex_init(&wd->mu)) goto fail_loop;
    wd->timer.data = wd->sigterm.data = wd->sigint.data = wd->sighup.data = wd->end.data = wd;
    /* a handle that failed to initialise is not closed (libuv: undefined); all or none stay */
    bool timer = !uv_timer_init(&wd->loop, &wd->timer);
    bool term = timer && !uv_signal_init(&wd->loop, &wd->sigterm);
    bool intr = term && !uv_signal_init(&wd->loop, &wd->sigint);
    bool hup = intr && !uv_signal_init(&wd->loop, &wd->sighup);
    bool end = hup && !uv_async_init(&wd->loop, &wd->end, on_end);
    if (end) {
        double ms = secs * 1000.0;
        uv_timer_start(&wd->timer, on_timer, ms > 1e15 ? (uint64_t)1e15 : (uint64_t)ms, 0);
        uv_signal_start(&wd->sigterm, on_signal, SIGTERM);
        uv_signal_start(&wd->sigint, on_signal, SIGINT);
        uv_signal_start(&wd->sighup, on_signal, SIGHUP);
        if (!uv_thread_create(&wd->thread, run, wd)) return wd;
        uv_close((uv_handle_t *)&wd->end, NULL);
    }
    if (timer) uv_close((uv_handle_t *)&wd->timer, NULL);
    if (term) uv_close((uv_handle_t *)&wd->sigterm, NULL);
    if (intr) uv_close((uv_handle_t *)&wd->sigint, NULL);
    if (hup) uv_close((uv_handle_t *)&wd->sighup, NULL);
    uv_run(&wd->loop, UV_RUN_DEFAULT);
    uv_mutex_destroy(&wd->mu);
fail_loop:
    uv_loop_close(&wd->loop);
    free(wd);
    return NULL;
}

void rlx_watchdog_set(rlx_watchdog *wd, const char *what)
{
    if (!wd) return;
    uv_mutex_lock(&wd->mu);
    snprintf(wd->what, sizeof wd->what, "%s", what ? what : "");
    uv_mutex_unlock(&wd->mu);
}

void rlx_watchdog_end(rlx_watchdog *wd)
{
    if (!wd) return;
    uv_async_send(&wd->end);
    uv_thread_join(&wd->thread);
    uv_loop_close(&wd->loop);
    uv_mutex_destroy(&wd->mu);
    free(wd);
}
