/* fault.h - allocation-failure injection for tests, in the manner of SQLite's test harness:
 * once armed, the N-th allocation (malloc, calloc, realloc, strdup and the other libc
 * allocators, also when cJSON, sqlite3, libuv or libmicrohttpd call them) returns NULL with
 * errno ENOMEM, and a count of live allocations shows what a failure path leaked.
 *
 * How: librlx_fault.so defines malloc and friends and forwards to glibc's __libc_* entry
 * points; a test binary links it (its definitions then come before libc's for every library
 * of the process), and a daemon gets it with LD_PRELOAD. Only release builds have it: under
 * ASan the sanitizer owns malloc, and rlx_fault_available() is false (tests exit 77).
 *
 * Threads: the counters are atomics, usable from any thread. With RLX_FAULT_THREAD only
 * allocations of the arming thread count (deterministic under worker threads); otherwise every
 * thread's do.
 *
 * Daemons: with RLX_FAULT_CTL=<file> in the environment, SIGUSR2 makes the library read one
 * command line from that file, "<seq> arm <n> [thread|persist]", "<seq> disarm" or
 * "<seq> report", and write "<seq> calls=<c> fired=<0|1> live=<l>\n" to RLX_FAULT_OUT
 * (async-signal-safe: open/read/write only). RLX_FAULT_BACKTRACE=1 prints a backtrace of each
 * injected failure on stderr. */
#ifndef RLX_FAULT_H
#define RLX_FAULT_H

#include <stdbool.h>

enum {
    RLX_FAULT_THREAD = 1,  /* count only the arming thread's allocations */
    RLX_FAULT_PERSIST = 2, /* fail the n-th and every later allocation, not just the n-th */
};

/* True when allocations are interposed (release builds). */
bool rlx_fault_available(void);
/* Fails the nth counted allocation from now on (1: the next one). */
void rlx_fault_arm(long nth, int flags);
/* Stops failing and counting. */
void rlx_fault_disarm(void);
/* Allocations counted since the last arm. */
long rlx_fault_calls(void);
/* Whether an allocation failed since the last arm. */
bool rlx_fault_fired(void);
/* Blocks allocated and not yet freed (a process-wide balance: compare two readings). */
long rlx_fault_live(void);

#endif
