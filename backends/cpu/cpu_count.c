/* cpu_count.c - how many CPUs this process may use: the online CPUs, fewer when the affinity
 * mask (taskset, cpusets) allows fewer, fewer still when a cgroup CPU quota (docker --cpus,
 * Kubernetes limits) grants less time than that. The default thread count of the CPU backend,
 * so a container limited to one CPU does not run a thread per host core. */
#include "backends/cpu/threadpool.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool rlx__read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    return ok;
}

/* CPUs a quota grants (rounded up), 0 when unlimited or unreadable. */
static int quota_cpus(long long quota, long long period)
{
    if (quota <= 0 || period <= 0) return 0;
    long long n = (quota + period - 1) / period;
    return n > INT_MAX ? INT_MAX : (int)n;
}

int rlx__cpu_max_cpus(const char *text)
{
    /* "$MAX $PERIOD": MAX is "max" (no limit) or the microseconds of CPU time per PERIOD */
    char *end;
    while (*text == ' ' || *text == '\t') text++;
    if (!strncmp(text, "max", 3) && (text[3] == ' ' || text[3] == '\t' || text[3] == '\n' || !text[3])) return 0;
    errno = 0;
    long long quota = strtoll(text, &end, 10);
    if (end == text || errno || (*end != ' ' && *end != '\t')) return 0;
    text = end;
    long long period = strtoll(text, &end, 10);
    if (end == text || errno) return 0;
    while (*end == ' ' || *end == '\t' || *end == '\n') end++;
    if (*end) return 0;
    return quota_cpus(quota, period);
}

/* cgroup v2: dir/cpu.max holds "max 100000" or "150000 100000". */
static int v2_limit(const char *dir)
{
    char path[PATH_MAX], line[128];
    if (snprintf(path, sizeof path, "%s/cpu.max", dir) >= (int)sizeof path || !rlx__read_line(path, line, sizeof line))
        return 0;
    return rlx__cpu_max_cpus(line);
}

/* cgroup v1: dir/cpu.cfs_quota_us (-1: none) and dir/cpu.cfs_period_us. */
static int v1_limit(const char *dir)
{
    char path[PATH_MAX], line[64];
    long long quota, period;
    if (snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir) >= (int)sizeof path || !rlx__read_line(path, line, sizeof line))
        return 0;
    quota = atoll(line);
    if (snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir) >= (int)sizeof path || !rlx__read_line(path, line, sizeof line))
        return 0;
    period = atoll(line);
    return quota_cpus(quota, period);
}

static int min_limit(int a, int b)
{
    return !a ? b : !b ? a : a < b ? a : b;
}

/* The smallest limit on base/rel and each of its ancestors up to base (a quota on a parent
 * cgroup binds its children too). */
static int walk(const char *base, const char *rel, int (*limit)(const char *))
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s%s%s", base, rel[0] == '/' ? "" : "/", rel) >= (int)sizeof dir) return 0;
    size_t root_len = strlen(base);
    int n = 0;
    for (;;) {
        size_t len = strlen(dir);
        while (len > root_len && dir[len - 1] == '/') dir[--len] = 0;
        n = min_limit(n, limit(dir));
        if (len <= root_len) break;
        char *slash = strrchr(dir + root_len, '/');
        if (!slash) break;
        *slash = 0;
    }
    return n;
}

int rlx__cgroup_cpu_limit(const char *cgroup_root, const char *proc_self_cgroup)
{
    FILE *f = fopen(proc_self_cgroup, "r");
    int n = 0;
    bool any = false;
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        /* "hierarchy-id:controllers:path" */
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        const char *controllers = c1 + 1, *path = c2 + 1;
        if (!controllers[0]) { /* v2, the unified hierarchy */
            n = min_limit(n, walk(cgroup_root, path, v2_limit));
            any = true;
            continue;
        }
        bool cpu = false;
        char list[256];
        snprintf(list, sizeof list, "%s", controllers);
        for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
            cpu = cpu || !strcmp(t, "cpu");
        if (!cpu) continue;
        char base[PATH_MAX];
        snprintf(base, sizeof base, "%s/%s", cgroup_root, controllers);
        int v = walk(base, path, v1_limit);
        snprintf(base, sizeof base, "%s/cpu", cgroup_root);
        n = min_limit(n, min_limit(v, walk(base, path, v1_limit)));
        any = true;
    }
    if (f) fclose(f);
    /* no /proc/self/cgroup (or a namespace that hides it): the root's own files */
    if (!any) n = min_limit(v2_limit(cgroup_root), 0);
    return n;
}

int rlx__cpu_count_from(const char *cgroup_root, const char *proc_self_cgroup)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = online > 0 ? (online > INT_MAX ? INT_MAX : (int)online) : 1;
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int k = CPU_COUNT(&set);
        if (k > 0 && k < n) n = k;
    }
#endif
    int q = rlx__cgroup_cpu_limit(cgroup_root, proc_self_cgroup);
    if (q > 0 && q < n) n = q;
    return n > 0 ? n : 1;
}

int rlx_cpu_count(void)
{
    return rlx__cpu_count_from("/sys/fs/cgroup", "/proc/self/cgroup");
}
