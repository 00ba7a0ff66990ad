/* watchdog.h - a deadline on the daemon's shutdown. Once the requests have had their grace
 * period, `serve` waits for what still holds the process: threadpool tasks, each model's worker
 * (a forward step cannot be interrupted) and loads or unloads in progress (a load blocked in
 * open() on a FIFO or a hung network mount never returns). The watchdog bounds that wait: past
 * --stop-timeout seconds, or at a signal (SIGTERM, SIGINT, SIGHUP) received meanwhile, it prints what
 * it was waiting for and ends the process with _exit(1), so a supervisor sees a failed stop
 * rather than a daemon that never exits.
 *
 * Ownership and threads: the loop thread (cmd_serve.c's shutdown) starts and ends a watchdog and
 * sets what it waits for; the watchdog runs a thread of its own with a libuv loop (a timer and
 * the three signals: libuv delivers a signal to every loop that watches it). rlx_watchdog_set may
 * be called from any thread. */
#ifndef RLX_SERVER_WATCHDOG_H
#define RLX_SERVER_WATCHDOG_H

typedef struct rlx_watchdog rlx_watchdog;

/* Starts the deadline, `secs` from now (> 0). NULL when the thread cannot start (the wait is
 * then unbounded, as without a watchdog). */
rlx_watchdog *rlx_watchdog_start(double secs);
/* What the process waits for now, for the message (copied; "" when nothing is named). */
void rlx_watchdog_set(rlx_watchdog *wd, const char *what);
/* The wait is over: stops the thread and frees the watchdog (NULL: nothing). */
void rlx_watchdog_end(rlx_watchdog *wd);

#endif
