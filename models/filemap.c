/* filemap.c - watched read-only file mappings (see filemap.h). */
#include "models/filemap.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The registry the SIGBUS handler reads without a lock: a slot is live while base is nonzero
 * (len is written before base is published, and base is cleared before the slot is reused). */
typedef struct watch {
    _Atomic uintptr_t base;
    _Atomic size_t len;
    atomic_int damaged;
} watch;

static watch g_watch[RLX_FILEMAP_SLOTS];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct sigaction g_prev;  /* the handler ours replaced (a sanitizer's, or the default) */
static atomic_bool g_installed;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; i < RLX_FILEMAP_SLOTS; i++) {
        uintptr_t b = atomic_load(&g_watch[i].base);
        size_t n = atomic_load(&g_watch[i].len);
        if (!b || a < b || a - b >= n) continue;
        /* the file was cut short under this mapping: zeros for all of it from now on (one call,
           so no other page of it faults again); mmap is a plain system call, safe here */
        if (mmap((void *)b, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) break;
        atomic_store(&g_watch[i].damaged, 1);
        return;
    }
    /* not a watched mapping: what would have happened without us */
    if ((g_prev.sa_flags & SA_SIGINFO) && g_prev.sa_sigaction) {
        g_prev.sa_sigaction(sig, si, uc);
        return;
    }
    if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN && g_prev.sa_handler) {
        g_prev.sa_handler(sig);
        return;
    }
    /* the default action: a faulting read runs again and ends the process; a SIGBUS sent by
       kill is raised again, delivered once this handler returns */
    signal(SIGBUS, SIG_DFL);
    if (si->si_code <= 0) raise(sig);
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (!sigaction(SIGBUS, &sa, &g_prev)) atomic_store(&g_installed, true);
}

static int watch_add(void *base, size_t len)
{
    pthread_once(&g_once, install);
    if (!atomic_load(&g_installed)) return -1;
    pthread_mutex_lock(&g_mu);
    int slot = -1;
    for (int i = 0; i < RLX_FILEMAP_SLOTS && slot < 0; i++)
        if (!atomic_load(&g_watch[i].base)) slot = i;
    if (slot >= 0) {
        atomic_store(&g_watch[slot].damaged, 0);
        atomic_store(&g_watch[slot].len, len);
        atomic_store(&g_watch[slot].base, (uintptr_t)base);
    }
    pthread_mutex_unlock(&g_mu);
    return slot;
}

int rlx__filemap_open(rlx_filemap *m, int fd, const char *path, rlx_error *err)
{
    *m = (rlx_filemap){.fd = -1, .slot = -1};
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return rlx_errorf(err, RLX_EIO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return rlx_errorf(err, RLX_EIO, "%s: %s", path, S_ISDIR(st.st_mode) ? "is a directory, not a model file" : "is not a regular file");
    }
    m->dev = (uint64_t)st.st_dev;
    m->ino = (uint64_t)st.st_ino;
    m->size = (int64_t)st.st_size;
    m->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return rlx_errorf(err, RLX_EIO, "%s: cannot map the file: %s", path, strerror(e));
        }
        m->base = p;
        m->len = (size_t)st.st_size;
        m->slot = watch_add(p, m->len);
    }
    m->fd = fd;
    return 0;
}

void rlx__filemap_close(rlx_filemap *m)
{
    if (m->slot >= 0) {
        pthread_mutex_lock(&g_mu);
        atomic_store(&g_watch[m->slot].base, 0);
        pthread_mutex_unlock(&g_mu);
    }
    if (m->base) munmap(m->base, m->len);
    if (m->fd >= 0) close(m->fd);
    *m = (rlx_filemap){.fd = -1, .slot = -1};
}

bool rlx__filemap_changed(const rlx_filemap *m, char *why, size_t cap)
{
    const char *w = NULL;
    struct stat st;
    if (m->slot >= 0 && atomic_load(&g_watch[m->slot].damaged)) w = "it was cut short while it was read";
    else if (m->fd >= 0 && !fstat(m->fd, &st)) {
        int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        if ((int64_t)st.st_size != m->size) w = "its size changed";
        else if (mt != m->mtime_ns) w = "it was written to";
    }
    if (w && why && cap) snprintf(why, cap, "%s", w);
    return w != NULL;
}

/* A regular file of at most max_bytes opened for reading, without waiting in open (a FIFO)
 * and never a device or a folder: 0 and *fd (blocking again), else RLX_ENOTFOUND / RLX_EIO
 * with a message naming path. */
static int open_regular(const char *path, int64_t max_bytes, int *fd, rlx_error *err)
{
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (*fd < 0) return rlx_errorf(err, errno == ENOENT ? RLX_ENOTFOUND : RLX_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(*fd, &st) || !S_ISREG(st.st_mode)) rc = rlx_errorf(err, RLX_EIO, "%s: not a regular file", path);
    else if (st.st_size > max_bytes) rc = rlx_errorf(err, RLX_EIO, "%s: over %lld bytes", path, (long long)max_bytes);
    if (rc) {
        close(*fd);
        *fd = -1;
        return rc;
    }
    fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
    return 0;
}

const char *rlx__special_file(const char *path)
{
    struct stat st;
    if (!path || stat(path, &st) || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return NULL;
    return S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device";
}

int rlx__fopen_regular(const char *path, int64_t max_bytes, FILE **out, rlx_error *err)
{
    int fd, rc;
    *out = NULL;
    if ((rc = open_regular(path, max_bytes, &fd, err))) return rc;
    if (!(*out = fdopen(fd, "r"))) {
        close(fd);
        return rlx_errorf(err, RLX_ENOMEM, "%s: out of memory", path);
    }
    return 0;
}

int rlx__read_file(const char *path, char **out, size_t *len, rlx_error *err)
{
    *out = NULL;
    /* not blocking in open: a FIFO put where a file should be must not hold the load forever */
    int fd, rc = open_regular(path, INT64_MAX, &fd, err);
    if (rc) return rc;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) {
            size_t nc = cap ? 2 * cap : 65536;
            char *b = realloc(buf, nc + 1);
            if (!b) {
                free(buf);
                close(fd);
                return rlx_errorf(err, RLX_ENOMEM, "%s: out of memory reading it", path);
            }
            buf = b;
            cap = nc;
        }
        ssize_t k = read(fd, buf + n, cap - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return rlx_errorf(err, RLX_EIO, "%s: read error: %s", path, strerror(e));
        }
        if (k == 0) break;
        n += (size_t)k;
    }
    close(fd);
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return 0;
}
