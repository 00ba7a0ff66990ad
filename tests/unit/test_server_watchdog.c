/* test_server_watchdog.c - the shutdown's deadline (server/watchdog.h): ended in time it does
 * nothing; past its deadline, or at a signal while it waits, it names what it waited for on
 * stderr and ends the process with status 1. The firing cases run in a child process. */
#include "tests/rlx_test.h"
#include "server/watchdog.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs the watchdog in a child that outlives it: *status and its stderr (at most cap bytes). */
static void child_run(double secs, bool signal_it, int *status, char *out, size_t cap)
{
    int fds[2];
    if (pipe(fds)) { *status = -1; return; }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        rlx_watchdog *wd = rlx_watchdog_start(secs);
        rlx_watchdog_set(wd, "model 'stuck' (loading)");
        if (signal_it) kill(getpid(), SIGTERM);
        sleep(5); /* a stop that never ends */
        _exit(7);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t k;
    while (n + 1 < cap && (k = read(fds[0], out + n, cap - 1 - n)) > 0) n += (size_t)k;
    out[n] = 0;
    close(fds[0]);
    waitpid(pid, status, 0);
}

TEST(ended_in_time)
{
    ASSERT(rlx_watchdog_start(0) == NULL); /* 0: no deadline */
    rlx_watchdog *wd = rlx_watchdog_start(30);
    ASSERT(wd != NULL);
    rlx_watchdog_set(wd, "nothing");
    rlx_watchdog_end(wd); /* returns at once, the process goes on */
    rlx_watchdog_end(NULL);
}

TEST(deadline_names_what_it_waited_for)
{
    int status = 0;
    char out[512];
    child_run(0.2, false, &status, out, sizeof out);
    ASSERT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d: %s", status, out);
    ASSERT_MSG(strstr(out, "the stop took over --stop-timeout 0.2 s; exiting without waiting for model 'stuck' (loading)"),
               "%s", out);
}

TEST(signal_while_waiting)
{
    int status = 0;
    char out[512];
    child_run(60, true, &status, out, sizeof out);
    ASSERT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d: %s", status, out);
    ASSERT_MSG(strstr(out, "signal 15 while stopping; exiting without waiting for model 'stuck' (loading)"), "%s", out);
}

TEST_MAIN(TEST_ENTRY(ended_in_time), TEST_ENTRY(deadline_names_what_it_waited_for), TEST_ENTRY(signal_while_waiting))
