/* nth_ctl.h - how many of the pool's threads a CPU forward pass runs on, chosen by measuring.
 *
 * With more runnable threads than cores (a competing busy process, a CPU quota below the thread
 * count), a pass on every thread can be slower than on one: the OS deschedules a thread that
 * holds a unit of work and the others wait for it (issue 18 measured 0.73-0.79x of one thread's
 * decode with one competitor on 2 cores, work units and all). So the backend runs each pass on
 * one thread or on all of them, whichever has been faster lately for passes of that size: per
 * class of pass (by token count) it keeps a recent time per token of each choice, runs on the
 * faster (switching only for a 5% gain) and now and then looks at the other for 2 passes: every
 * 64 passes; at once when the choice's own time grows by 15%; and at once when an all-threads
 * pass finds the calling thread had its core for under 85% of the pass (more runnable threads
 * than cores: a competitor arrived; a look that finds no gain makes such hints count less and
 * less often, 16 passes apart doubling to 1024, for a machine whose waits sleep anyway). On all threads the interval doubles up to 1024 while looks
 * confirm them by 20%, so a quiet machine pays ~0.1% for looking and a short run none; on one
 * thread it stays 64 (one thread's time does not change when cores come back: only a look
 * notices). Results do
 * not depend on the choice: every output element is computed by the same code on any number of
 * threads (unit/test_cpu_backend compares thread counts bit for bit).
 *
 * A class's first pass is not timed (its first touches of memory are not the machine's state).
 *
 * RLX_CPU_FIXED_THREADS=1 in the environment (read when the controller is set up) keeps every
 * pass on all threads (tests comparing thread counts; benchmarks of a fixed count).
 *
 * Pure bookkeeping, no clock: the caller times its passes. Owned by one CPU backend and used by
 * the thread that runs it (one pass at a time). */
#ifndef RLX_NTH_CTL_H
#define RLX_NTH_CTL_H

#include <stdbool.h>
#include <stdint.h>

#define RLX_NTH_CLASSES 6
#define RLX_NTH_EXPLORE_EVERY 64   /* passes of a class between two looks at the other choice... */
#define RLX_NTH_EXPLORE_MAX 1024   /* ...doubled up to this while looks confirm the choice by 20% */
#define RLX_NTH_EXPLORE_RUNS 2     /* passes per look */

typedef struct rlx_nth_class {
    double sec[2];       /* recent seconds per token: [0] one thread, [1] all */
    int seen[2];         /* passes timed */
    uint32_t runs;       /* passes of this class */
    int pick;            /* 0 or 1: the faster lately */
    int explore_left;    /* passes left of the current look at the other choice */
    uint32_t every;      /* passes between looks (RLX_NTH_EXPLORE_EVERY..RLX_NTH_EXPLORE_MAX) */
    uint32_t next;       /* the pass of the next look */
    double ref;          /* the choice's time per token when last looked: 15% slower starts a look */
    bool hint;           /* the last all-threads pass was starved of CPU: look at one thread now */
    bool by_hint;        /* the current look was started by a hint */
    uint32_t hint_gap;   /* passes between heeded hints after false alarms (0, then 16..1024) */
    uint32_t hint_after; /* hints are heeded from this pass on */
} rlx_nth_class;

typedef struct rlx_nth_ctl {
    int full;            /* the pool's size */
    bool fixed;          /* every pass on `full` threads */
    rlx_nth_class c[RLX_NTH_CLASSES];
} rlx_nth_ctl;

/* full: the pool's thread count; fixed: no adaptation (also when RLX_CPU_FIXED_THREADS=1). */
void rlx_nth_init(rlx_nth_ctl *c, int full, bool fixed);
/* The threads for a pass of n_tokens tokens: 1 or c->full. */
int rlx_nth_choose(rlx_nth_ctl *c, int32_t n_tokens);
/* After that pass: it ran on nth threads (what rlx_nth_choose returned) in `seconds` of wall
 * time, of which the calling thread had cpu_seconds on a core (< 0: unknown). */
void rlx_nth_record(rlx_nth_ctl *c, int32_t n_tokens, int nth, double seconds, double cpu_seconds);

#endif
