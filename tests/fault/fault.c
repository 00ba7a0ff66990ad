/* fault.c - allocation-failure injection (see fault.h). Built as librlx_fault.so in release
 * builds; with RLX_FAULT_STUB (sanitizer builds) only the control functions exist and nothing
 * is interposed. */
#include "tests/fault/fault.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#ifdef RLX_FAULT_STUB

bool rlx_fault_available(void) { return false; }
void rlx_fault_arm(long nth, int flags) { (void)nth, (void)flags; }
void rlx_fault_disarm(void) {}
long rlx_fault_calls(void) { return 0; }
bool rlx_fault_fired(void) { return false; }
long rlx_fault_live(void) { return 0; }

#else

#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* glibc's own allocator entry points (exported for exactly this use). */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

static atomic_bool g_armed;
static atomic_int g_flags;
static atomic_long g_nth, g_calls, g_live;
static atomic_bool g_fired;
/* initial-exec: no allocation (and no recursion into malloc) on first access */
static __thread bool t_armed __attribute__((tls_model("initial-exec")));
static bool g_backtrace; /* RLX_FAULT_BACKTRACE=1: print where each injected failure happens */

/* Counts one allocation attempt; true when it must fail. */
static bool should_fail(void)
{
    if (!atomic_load_explicit(&g_armed, memory_order_acquire)) return false;
    int flags = atomic_load_explicit(&g_flags, memory_order_relaxed);
    if ((flags & RLX_FAULT_THREAD) && !t_armed) return false;
    long c = atomic_fetch_add(&g_calls, 1) + 1;
    long nth = atomic_load_explicit(&g_nth, memory_order_relaxed);
    if (c == nth || ((flags & RLX_FAULT_PERSIST) && c > nth)) {
        atomic_store(&g_fired, true);
        if (g_backtrace) {
            void *fr[32];
            static const char msg[] = "rlx_fault: allocation failed here:\n";
            ssize_t w = write(2, msg, sizeof msg - 1);
            (void)w;
            backtrace_symbols_fd(fr, backtrace(fr, 32), 2);
        }
        errno = ENOMEM;
        return true;
    }
    return false;
}

static void *counted(void *p)
{
    if (p) atomic_fetch_add_explicit(&g_live, 1, memory_order_relaxed);
    return p;
}

EXPORT void *malloc(size_t n)
{
    return should_fail() ? NULL : counted(__libc_malloc(n));
}

EXPORT void *calloc(size_t n, size_t size)
{
    return should_fail() ? NULL : counted(__libc_calloc(n, size));
}

EXPORT void free(void *p)
{
    if (!p) return;
    atomic_fetch_sub_explicit(&g_live, 1, memory_order_relaxed);
    __libc_free(p);
}

EXPORT void *realloc(void *p, size_t n)
{
    if (!p) return malloc(n);
    if (!n) { /* glibc frees and returns NULL */
        free(p);
        return NULL;
    }
    if (should_fail()) return NULL; /* p stays valid, as a real failure leaves it */
    return __libc_realloc(p, n);
}

EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, n * size);
}

EXPORT void *memalign(size_t align, size_t n)
{
    return should_fail() ? NULL : counted(__libc_memalign(align, n));
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
    return memalign(align, n);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (align % sizeof(void *) || (align & (align - 1))) return EINVAL;
    void *p = memalign(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

EXPORT void *valloc(size_t n)
{
    return should_fail() ? NULL : counted(__libc_valloc(n));
}

EXPORT void *pvalloc(size_t n)
{
    return should_fail() ? NULL : counted(__libc_pvalloc(n));
}

EXPORT bool rlx_fault_available(void) { return true; }

EXPORT void rlx_fault_arm(long nth, int flags)
{
    atomic_store(&g_armed, false);
    t_armed = true;
    atomic_store(&g_flags, flags);
    atomic_store(&g_nth, nth);
    atomic_store(&g_calls, 0);
    atomic_store(&g_fired, false);
    atomic_store_explicit(&g_armed, true, memory_order_release);
}

EXPORT void rlx_fault_disarm(void)
{
    atomic_store(&g_armed, false);
    t_armed = false;
}

EXPORT long rlx_fault_calls(void) { return atomic_load(&g_calls); }
EXPORT bool rlx_fault_fired(void) { return atomic_load(&g_fired); }
EXPORT long rlx_fault_live(void) { return atomic_load(&g_live); }

/* ---- daemon control: SIGUSR2 + a command file (async-signal-safe only) ---- */

static char g_ctl[512], g_out[512];

static const char *skip_ws(const char *p) { while (*p == ' ' || *p == '\t') p++; return p; }

static const char *parse_long(const char *p, long *v)
{
    p = skip_ws(p);
    bool neg = *p == '-';
    if (neg) p++;
    long x = 0;
    while (*p >= '0' && *p <= '9') x = x * 10 + (*p++ - '0');
    *v = neg ? -x : x;
    return p;
}

static size_t put_long(char *b, long v)
{
    char t[24];
    size_t n = 0, k = 0;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do t[n++] = (char)('0' + u % 10); while ((u /= 10));
    if (v < 0) b[k++] = '-';
    while (n) b[k++] = t[--n];
    return k;
}

static size_t put_str(char *b, const char *s)
{
    size_t n = strlen(s);
    memcpy(b, s, n);
    return n;
}

static void on_sigusr2(int sig)
{
    (void)sig;
    int saved = errno;
    char cmd[128] = {0};
    int fd = open(g_ctl, O_RDONLY);
    if (fd < 0) goto out;
    ssize_t n = read(fd, cmd, sizeof cmd - 1);
    close(fd);
    if (n <= 0) goto out;
    long seq = 0;
    const char *p = skip_ws(parse_long(cmd, &seq));
    if (!strncmp(p, "arm", 3)) {
        long nth = 0;
        p = skip_ws(parse_long(p + 3, &nth));
        int flags = !strncmp(p, "persist", 7) ? RLX_FAULT_PERSIST : 0;
        atomic_store(&g_armed, false);
        atomic_store(&g_flags, flags);
        atomic_store(&g_nth, nth);
        atomic_store(&g_calls, 0);
        atomic_store(&g_fired, false);
        atomic_store(&g_armed, true);
    } else if (!strncmp(p, "disarm", 6)) {
        atomic_store(&g_armed, false);
    }
    char line[160];
    size_t k = put_long(line, seq);
    k += put_str(line + k, " calls=");
    k += put_long(line + k, atomic_load(&g_calls));
    k += put_str(line + k, " fired=");
    k += put_long(line + k, atomic_load(&g_fired));
    k += put_str(line + k, " live=");
    k += put_long(line + k, atomic_load(&g_live));
    line[k++] = '\n';
    /* written whole to a temporary name, then renamed: a reader never sees half a line */
    char tmp[530];
    size_t tl = strlen(g_out);
    memcpy(tmp, g_out, tl);
    memcpy(tmp + tl, ".tmp", 5);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, line, k);
        (void)w;
        close(fd);
        rename(tmp, g_out);
    }
out:
    errno = saved;
}

__attribute__((constructor)) static void fault_init(void)
{
    const char *bt = getenv("RLX_FAULT_BACKTRACE");
    if (bt && *bt == '1') {
        void *fr[2];
        backtrace(fr, 2); /* loads libgcc now, not inside a failing malloc */
        g_backtrace = true;
    }
    const char *ctl = getenv("RLX_FAULT_CTL"), *out = getenv("RLX_FAULT_OUT");
    if (!ctl || !out || strlen(ctl) >= sizeof g_ctl || strlen(out) >= sizeof g_out) return;
    memcpy(g_ctl, ctl, strlen(ctl) + 1);
    memcpy(g_out, out, strlen(out) + 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr2;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
}

#endif
