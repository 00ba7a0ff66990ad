/* test_nth_ctl.c - the CPU backend's choice of one thread or all per forward pass
 * (backends/cpu/nth_ctl.h), on simulated timings: it settles on the faster choice, keeps looking
 * at the other now and then, looks at once when a pass was starved of CPU, follows a machine
 * that changes, keeps classes of pass apart, and
 * stays on all threads when fixed (by flag or RLX_CPU_FIXED_THREADS) or with one thread. */
#include "backends/cpu/nth_ctl.h"
#include "tests/rlx_test.h"

/* passes of n_tokens with a simulated time per token for one thread and for all; returns how
 * many of them ran on all threads (a large negative count for a choice that is neither) */
static int drive(rlx_nth_ctl *c, int passes, int32_t n_tokens, double one, double all)
{
    int on_all = 0;
    for (int i = 0; i < passes; i++) {
        int nth = rlx_nth_choose(c, n_tokens);
        if (nth != 1 && nth != c->full) return -1000000; /* fails every caller's check */
        on_all += nth > 1;
        /* a little noise: every 7th pass 20% slower */
        double t = (nth > 1 ? all : one) * n_tokens * (i % 7 == 3 ? 1.2 : 1.0);
        rlx_nth_record(c, n_tokens, nth, t, -1);
    }
    return on_all;
}

TEST(settles_on_the_faster_and_follows_changes)
{
    unsetenv("RLX_CPU_FIXED_THREADS");
    rlx_nth_ctl c;
    rlx_nth_init(&c, 2, false);
    /* a quiet machine: two threads are faster; one thread only for the looks */
    int all = drive(&c, 640, 1, 30e-3, 23e-3);
    fprintf(stderr, "  quiet: %d of 640 passes on 2 threads\n", all);
    ASSERT(all >= 640 - 2 - 2 * (640 / RLX_NTH_EXPLORE_EVERY) - 2);
    /* a competitor arrives: one thread is faster; within ~64 passes the choice moves */
    int first = drive(&c, 70, 1, 30e-3, 40e-3);
    int later = drive(&c, 640, 1, 30e-3, 40e-3);
    fprintf(stderr, "  competitor: %d of the first 70, %d of the next 640 on 2 threads\n", first, later);
    ASSERT(first < 70);
    ASSERT(later <= 2 * (640 / RLX_NTH_EXPLORE_EVERY) + 2);
    /* it leaves: back to two threads at the next look */
    first = drive(&c, 70, 1, 30e-3, 23e-3);
    later = drive(&c, 640, 1, 30e-3, 23e-3);
    fprintf(stderr, "  quiet again: %d of 70, %d of 640 on 2 threads\n", first, later);
    ASSERT(first > 0);
    ASSERT(later >= 640 - 2 * (640 / RLX_NTH_EXPLORE_EVERY) - 2);
    /* two choices within 1%: noisy passes may flip it now and then, not back and forth */
    rlx_nth_ctl d;
    rlx_nth_init(&d, 2, false);
    int flips = 0;
    for (int i = 0; i < 640; i++) {
        int before = d.c[0].pick;
        drive(&d, 1, 1, 29.6e-3 * (i % 5 == 2 ? 1.2 : 1.0), 29.5e-3 * (i % 7 == 3 ? 1.2 : 1.0));
        flips += d.c[0].pick != before;
    }
    fprintf(stderr, "  within 1%%: %d flips in 640 passes\n", flips);
    ASSERT(flips <= 8);
}

/* An all-threads pass whose calling thread had its core for under 85% of it starts a look at
 * once (a competitor); one that had it throughout does not (a short run never looks). */
TEST(cpu_starved_pass_starts_a_look)
{
    unsetenv("RLX_CPU_FIXED_THREADS");
    for (int starved = 0; starved < 2; starved++) {
        rlx_nth_ctl c;
        rlx_nth_init(&c, 2, false);
        int first_single = -1;
        for (int i = 0; i < 60 && first_single < 0; i++) {
            int nth = rlx_nth_choose(&c, 1);
            if (nth == 1) first_single = i;
            double t = nth > 1 ? 40e-3 : 30e-3;
            rlx_nth_record(&c, 1, nth, t, nth > 1 && starved ? 0.6 * t : t);
        }
        fprintf(stderr, "  %s: first pass on one thread: %d\n", starved ? "starved" : "on its core", first_single);
        if (starved) ASSERT(first_single >= 2 && first_single <= 3);
        else ASSERT_EQ(first_single, -1);
    }
    /* every pass looks starved but all threads are faster (false alarms): looks thin out */
    rlx_nth_ctl c;
    rlx_nth_init(&c, 2, false);
    int single = 0;
    for (int i = 0; i < 2000; i++) {
        int nth = rlx_nth_choose(&c, 1);
        single += nth == 1;
        double t = nth > 1 ? 20e-3 : 30e-3;
        rlx_nth_record(&c, 1, nth, t, nth > 1 ? 0.5 * t : t);
    }
    fprintf(stderr, "  false alarms: %d of 2000 passes on one thread\n", single);
    ASSERT(single <= 30);
}

/* A class's first pass touches memory for the first time (weights paged in, scratch committed):
 * slow and off its core, it is no competitor. It neither starts a look nor counts as a time. */
TEST(first_pass_is_not_timed)
{
    unsetenv("RLX_CPU_FIXED_THREADS");
    rlx_nth_ctl c;
    rlx_nth_init(&c, 2, false);
    int single = 0;
    for (int i = 0; i < 60; i++) {
        int nth = rlx_nth_choose(&c, 512);
        single += nth == 1;
        double t = (nth > 1 ? 20e-3 : 35e-3) * (i == 0 ? 5 : 1);
        rlx_nth_record(&c, 512, nth, t, i == 0 ? 0.3 * t : t);
    }
    fprintf(stderr, "  after a slow, starved first pass: %d of 60 passes on one thread\n", single);
    ASSERT_EQ(single, 0);
    ASSERT_EQ(c.c[5].seen[1], 59);
    ASSERT(c.c[5].sec[1] < 21e-3 / 512);
}

TEST(classes_are_apart)
{
    unsetenv("RLX_CPU_FIXED_THREADS");
    rlx_nth_ctl c;
    rlx_nth_init(&c, 4, false);
    /* decode (1 token) slower on all threads, prefill (128 tokens) faster on all */
    for (int r = 0; r < 20; r++) {
        drive(&c, 32, 1, 30e-3, 50e-3);
        drive(&c, 8, 128, 8e-3, 3e-3);
    }
    int dec = drive(&c, 128, 1, 30e-3, 50e-3), pre = drive(&c, 128, 128, 8e-3, 3e-3);
    fprintf(stderr, "  decode %d / 128, prefill %d / 128 passes on 4 threads\n", dec, pre);
    ASSERT(dec <= 8);
    ASSERT(pre >= 120);
    /* the classes' bounds: 1 | 2-3 | 4-15 | 16-63 | 64-255 | 256+ */
    static const int32_t n[] = {1, 2, 3, 4, 15, 16, 63, 64, 255, 256, 100000};
    static const int k[] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
        rlx_nth_ctl e;
        rlx_nth_init(&e, 2, false);
        rlx_nth_choose(&e, n[i]);
        ASSERT_MSG(e.c[k[i]].runs == 1, "%d tokens: not class %d", n[i], k[i]);
    }
}

TEST(fixed_and_single)
{
    rlx_nth_ctl c;
    rlx_nth_init(&c, 2, true);
    ASSERT_EQ(drive(&c, 200, 1, 10e-3, 90e-3), 200); /* fixed: all threads however slow */
    rlx_nth_init(&c, 1, false);
    ASSERT_EQ(drive(&c, 50, 1, 10e-3, 90e-3), 0); /* one thread: nothing to choose */
    setenv("RLX_CPU_FIXED_THREADS", "1", 1);
    rlx_nth_init(&c, 2, false);
    ASSERT(c.fixed);
    ASSERT_EQ(drive(&c, 100, 1, 10e-3, 90e-3), 100);
    setenv("RLX_CPU_FIXED_THREADS", "0", 1);
    rlx_nth_init(&c, 2, false);
    ASSERT(!c.fixed);
    unsetenv("RLX_CPU_FIXED_THREADS");
    rlx_nth_record(&c, 1, 2, -1.0, -1.0); /* a clock that went back: ignored */
    ASSERT_EQ(c.c[0].seen[1], 0);
}

TEST_MAIN(TEST_ENTRY(first_pass_is_not_timed), TEST_ENTRY(settles_on_the_faster_and_follows_changes), TEST_ENTRY(cpu_starved_pass_starts_a_look),
          TEST_ENTRY(classes_are_apart), TEST_ENTRY(fixed_and_single))
