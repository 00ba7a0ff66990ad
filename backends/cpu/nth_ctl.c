/* nth_ctl.c - the thread count of CPU forward passes, chosen by measuring (see nth_ctl.h). */
#include "backends/cpu/nth_ctl.h"

#include <stdlib.h>
#include <string.h>

void rlx_nth_init(rlx_nth_ctl *c, int full, bool fixed)
{
    memset(c, 0, sizeof *c);
    c->full = full < 1 ? 1 : full;
    const char *e = getenv("RLX_CPU_FIXED_THREADS");
    c->fixed = fixed || (e && *e && strcmp(e, "0"));
    for (int k = 0; k < RLX_NTH_CLASSES; k++) {
        c->c[k].pick = 1;
        c->c[k].every = c->c[k].next = RLX_NTH_EXPLORE_EVERY;
    }
}

static rlx_nth_class *class_of(rlx_nth_ctl *c, int32_t n_tokens)
{
    /* 1, 2-3, 4-15, 16-63, 64-255, 256+ tokens */
    int k = n_tokens <= 1 ? 0 : n_tokens < 4 ? 1 : n_tokens < 16 ? 2 : n_tokens < 64 ? 3 : n_tokens < 256 ? 4 : 5;
    return &c->c[k];
}

int rlx_nth_choose(rlx_nth_ctl *c, int32_t n_tokens)
{
    if (c->fixed || c->full <= 1) return c->full;
    rlx_nth_class *k = class_of(c, n_tokens);
    k->runs++;
    int choice = k->pick;
    if (k->explore_left > 0) {
        k->explore_left--;
        choice = 1 - k->pick;
    } else if (k->seen[k->pick] < 2) { /* all threads first */
        choice = k->pick;
    } else if ((k->hint && k->runs >= k->hint_after) || k->runs >= k->next ||
               (k->ref > 0 && k->sec[k->pick] > 1.15 * k->ref)) {
        k->by_hint = k->hint && k->runs >= k->hint_after;
        k->hint = false;
        k->explore_left = RLX_NTH_EXPLORE_RUNS - 1;
        choice = 1 - k->pick;
    }
    return choice ? c->full : 1;
}

void rlx_nth_record(rlx_nth_ctl *c, int32_t n_tokens, int nth, double seconds, double cpu_seconds)
{
    if (c->fixed || c->full <= 1 || seconds <= 0) return;
    rlx_nth_class *k = class_of(c, n_tokens);
    /* a class's first pass is not timed: it is the first to touch its memory (the weights paged
     * in, lazily committed scratch), whose faults and waits would read as a starved pass and a
     * slow choice - a look at one thread that cost the first 256-input embedding request of a
     * fresh server ~15% */
    if (k->runs <= 1) return;
    int i = nth > 1;
    /* the calling thread off its core for a sixth of an all-threads pass: more runnable threads
     * than cores, so look at one thread (a waiting thread spins or sleeps on a futex; sleeping is
     * the wait for a thread the OS took away) */
    if (i == 1 && k->pick == 1 && cpu_seconds >= 0 && cpu_seconds < 0.85 * seconds && !k->explore_left) k->hint = true;
    double x = seconds / (n_tokens > 0 ? n_tokens : 1);
    /* the choice in use moves slowly (a noisy pass does not flip it); a look at the other one
     * is mostly its new passes (the machine may have changed since the last look) */
    bool looked = i != k->pick;
    double a = looked ? 0.6 : 0.25;
    k->sec[i] = k->seen[i] ? (1 - a) * k->sec[i] + a * x : x;
    k->seen[i]++;
    if (!k->seen[0] || !k->seen[1]) return;
    if (k->sec[1 - k->pick] < 0.95 * k->sec[k->pick]) {
        k->pick = 1 - k->pick;
        k->explore_left = 0; /* the look found the better choice: no more of the old one */
        k->every = RLX_NTH_EXPLORE_EVERY;
        k->hint_gap = 0;
    } else if (looked && k->explore_left == 0) { /* a look ended and confirmed the choice */
        /* a starved pass that was no competitor (this machine's waits sleep, say): heed such
         * hints less and less often, 16 passes apart doubling to 1024 */
        if (k->by_hint) {
            k->hint_gap = k->hint_gap ? (k->hint_gap * 2 > RLX_NTH_EXPLORE_MAX ? RLX_NTH_EXPLORE_MAX : k->hint_gap * 2) : 16;
            k->hint_after = k->runs + k->hint_gap;
        }
        /* only all threads' looks thin out: on one thread, a look at all is cheap and is the
         * only way to notice cores coming back (one thread's time does not change then) */
        bool clear = k->pick == 1 && k->sec[0] > 1.2 * k->sec[1];
        k->every = clear ? (k->every * 2 > RLX_NTH_EXPLORE_MAX ? RLX_NTH_EXPLORE_MAX : k->every * 2) : RLX_NTH_EXPLORE_EVERY;
    } else {
        return;
    }
    k->ref = k->sec[k->pick];
    k->next = k->runs + k->every;
}
