/* test_cpu_count.c - the default thread count heeds the cgroup CPU quota (v2 cpu.max, v1
 * cpu.cfs_quota_us / cpu.cfs_period_us, on the process's cgroup and its ancestors) and the
 * affinity mask; read from a fake cgroup tree and /proc/self/cgroup in a temporary directory. */
#include "tests/rlx_test.h"
#include "backends/cpu/threadpool.h"

#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[256];

static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++) /* mkdir -p of the parents */
        if (*p == '/') { *p = 0; mkdir(path, 0700); *p = '/'; }
    FILE *f = fopen(path, "w");
    if (f) { fputs(text, f); fclose(f); }
}

static const char *at(const char *rel)
{
    static char paths[2][512];
    static int next;
    char *path = paths[next++ % 2]; /* two live at once: the cgroup root and the proc file */
    snprintf(path, 512, "%s/%s", root, rel);
    return path;
}

static void fresh(void)
{
    char cmd[300];
    if (root[0]) { snprintf(cmd, sizeof cmd, "rm -rf '%s'", root); if (system(cmd)) {} }
    snprintf(root, sizeof root, "/tmp/rlx-cpucount.XXXXXX");
    if (!mkdtemp(root)) root[0] = 0;
}

static int affinity_cpus(void)
{
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = online > 0 ? (int)online : 1;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 && CPU_COUNT(&set) < n) n = CPU_COUNT(&set);
    return n;
}

TEST(cpu_max_contents)
{
    ASSERT_EQ(rlx__cpu_max_cpus("max 100000\n"), 0);
    ASSERT_EQ(rlx__cpu_max_cpus("max\n"), 0);
    ASSERT_EQ(rlx__cpu_max_cpus("100000 100000\n"), 1);
    ASSERT_EQ(rlx__cpu_max_cpus("100001 100000\n"), 2);   /* rounded up */
    ASSERT_EQ(rlx__cpu_max_cpus("150000 100000"), 2);
    ASSERT_EQ(rlx__cpu_max_cpus("50000 100000\n"), 1);    /* half a CPU still gets a thread */
    ASSERT_EQ(rlx__cpu_max_cpus("1 1000000\n"), 1);
    ASSERT_EQ(rlx__cpu_max_cpus("400000 50000\n"), 8);   /* a period other than the default */
    ASSERT_EQ(rlx__cpu_max_cpus("  200000\t100000  \n"), 2);
    /* not a limit: absent or broken contents mean none */
    ASSERT_EQ(rlx__cpu_max_cpus(""), 0);
    ASSERT_EQ(rlx__cpu_max_cpus("\n"), 0);
    ASSERT_EQ(rlx__cpu_max_cpus("100000\n"), 0);          /* no period */
    ASSERT_EQ(rlx__cpu_max_cpus("0 100000\n"), 0);
    ASSERT_EQ(rlx__cpu_max_cpus("-100000 100000\n"), 0);
    ASSERT_EQ(rlx__cpu_max_cpus("100000 0\n"), 0);
    ASSERT_EQ(rlx__cpu_max_cpus("12abc 100000\n"), 0);
    ASSERT_EQ(rlx__cpu_max_cpus("maximum 100000\n"), 0);
    ASSERT_EQ(rlx__cpu_max_cpus("100000 100000 7\n"), 0); /* a third field */
    ASSERT_EQ(rlx__cpu_max_cpus("99999999999999999999 100000\n"), 0); /* overflows */
}

TEST(v2_quota_of_the_cgroup_and_its_parents)
{
    fresh();
    ASSERT(root[0]);
    put("self_cgroup", "0::/kube/pod1\n");
    put("fs/kube/pod1/cpu.max", "max 100000\n");
    put("fs/kube/cpu.max", "150000 100000\n");   /* 1.5 CPUs on the parent: 2 threads */
    put("fs/cpu.max", "max 100000\n");
    ASSERT_EQ(rlx__cgroup_cpu_limit(at("fs"), at("self_cgroup")), 2);
    put("fs/kube/pod1/cpu.max", "50000 100000\n"); /* half a CPU on the leaf: 1 */
    ASSERT_EQ(rlx__cgroup_cpu_limit(at("fs"), at("self_cgroup")), 1);
    ASSERT_EQ(rlx__cpu_count_from(at("fs"), at("self_cgroup")), 1);
}

TEST(v2_namespaced_root)
{
    fresh();
    put("self_cgroup", "0::/\n");
    put("fs/cpu.max", "100000 100000\n");
    ASSERT_EQ(rlx__cgroup_cpu_limit(at("fs"), at("self_cgroup")), 1);
    ASSERT_EQ(rlx__cpu_count_from(at("fs"), at("self_cgroup")), 1);
    /* a path the namespace hides (docker without cgroupns): the root's file still counts */
    put("self_cgroup", "0::/docker/abc\n");
    ASSERT_EQ(rlx__cgroup_cpu_limit(at("fs"), at("self_cgroup")), 1);
    put("fs/cpu.max", "max 100000\n");
    ASSERT_EQ(rlx__cgroup_cpu_limit(at("fs"), at("self_cgroup")), 0);
    ASSERT_EQ(rlx__cpu_count_from(at("fs"), at("self_cgroup")), affinity_cpus());
}

TEST(v1_cfs_quota)
{
    fresh();
    put("self_cgroup", "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n0::/\n");
    put("fs/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "300000\n");
    put("fs/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
    ASSERT_EQ(rlx__cgroup_cpu_limit(at("fs"), at("self_cgroup")), 3);
    put("fs/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
    ASSERT_EQ(rlx__cgroup_cpu_limit(at("fs"), at("self_cgroup")), 0);
    put("fs/cpu/docker/abc/cpu.cfs_quota_us", "100000\n"); /* the "cpu" mount point */
    put("fs/cpu/docker/abc/cpu.cfs_period_us", "100000\n");
    ASSERT_EQ(rlx__cpu_count_from(at("fs"), at("self_cgroup")), 1);
}

TEST(nothing_readable_means_affinity)
{
    fresh();
    ASSERT_EQ(rlx__cgroup_cpu_limit(at("none"), at("missing")), 0);
    ASSERT_EQ(rlx__cpu_count_from(at("none"), at("missing")), affinity_cpus());
    ASSERT(rlx_cpu_count() >= 1);
    ASSERT(rlx_cpu_count() <= affinity_cpus());
}

TEST(affinity_mask)
{
    cpu_set_t old, one;
    if (sched_getaffinity(0, sizeof old, &old)) SKIP("sched_getaffinity failed");
    int first = -1;
    for (int i = 0; i < CPU_SETSIZE && first < 0; i++) if (CPU_ISSET(i, &old)) first = i;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof one, &one)) SKIP("sched_setaffinity failed");
    int n = rlx__cpu_count_from("/nonexistent", "/nonexistent");
    sched_setaffinity(0, sizeof old, &old);
    ASSERT_EQ(n, 1);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (root[0] && system(cmd)) {}
}

TEST_MAIN(TEST_ENTRY(cpu_max_contents), TEST_ENTRY(v2_quota_of_the_cgroup_and_its_parents), TEST_ENTRY(v2_namespaced_root), TEST_ENTRY(v1_cfs_quota),
          TEST_ENTRY(nothing_readable_means_affinity), TEST_ENTRY(affinity_mask))
