/* test_filemap.c - model files that change while they are mapped (models/filemap.c): a file cut
 * short under a read gives zeros and "changed", not SIGBUS; a write in place and a resize are
 * seen; a deleted or renamed-over file is not a change; a SIGBUS elsewhere still ends the
 * process; a FIFO is refused at once by rlx__read_file; and a runner whose weights file is cut
 * short fails its forward pass with RLX_EIO instead of ending the process. */
#include "tests/rlx_test.h"
#include "models/filemap.h"
#include "models/gguf.h"
#include "engine/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void tmp_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/rlx-filemap-%d-%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(), name);
}

/* A file of n bytes of 0xab, its modification time a day back (so a write now changes it even on
 * file systems with coarse timestamps). */
static int make_file(const char *path, size_t n)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    char *b = malloc(n);
    memset(b, 0xab, n);
    ssize_t w = write(fd, b, n);
    free(b);
    struct timespec ts[2] = {{.tv_sec = time(NULL) - 86400}, {.tv_sec = time(NULL) - 86400}};
    futimens(fd, ts);
    close(fd);
    return w == (ssize_t)n ? 0 : -1;
}

static int map_file(const char *path, rlx_filemap *m)
{
    rlx_error err = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -1 : rlx__filemap_open(m, fd, path, &err);
}

TEST(cut_short_reads_zeros_and_is_seen)
{
    char p[512], why[128] = "";
    tmp_path(p, sizeof p, "cut");
    size_t n = 5 * (size_t)sysconf(_SC_PAGESIZE);
    ASSERT_EQ(make_file(p, n), 0);
    rlx_filemap m;
    ASSERT_EQ(map_file(p, &m), 0);
    const volatile uint8_t *b = m.base;
    ASSERT_EQ(b[n - 1], 0xab);
    ASSERT(!rlx__filemap_changed(&m, why, sizeof why));
    ASSERT_EQ(truncate(p, 0), 0);
    /* without the watch this read ends the process with SIGBUS */
    ASSERT_EQ(b[n - 1], 0);
    ASSERT_EQ(b[0], 0); /* the whole mapping is zeros from then on */
    ASSERT(rlx__filemap_changed(&m, why, sizeof why));
    ASSERT_MSG(strstr(why, "cut short"), "%s", why);
    rlx__filemap_close(&m);
    unlink(p);
}

TEST(write_in_place_and_resize_are_seen)
{
    char p[512], why[128] = "";
    tmp_path(p, sizeof p, "write");
    ASSERT_EQ(make_file(p, 8192), 0);
    rlx_filemap m;
    ASSERT_EQ(map_file(p, &m), 0);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    ASSERT(fd >= 0);
    ASSERT_EQ(pwrite(fd, "x", 1, 100), 1);
    close(fd);
    ASSERT(rlx__filemap_changed(&m, why, sizeof why));
    ASSERT_MSG(strstr(why, "written"), "%s", why);
    rlx__filemap_close(&m);

    ASSERT_EQ(make_file(p, 8192), 0);
    ASSERT_EQ(map_file(p, &m), 0);
    ASSERT_EQ(truncate(p, 16384), 0); /* longer: no read faults, but the file is not what was loaded */
    ASSERT(rlx__filemap_changed(&m, why, sizeof why));
    ASSERT_MSG(strstr(why, "size"), "%s", why);
    rlx__filemap_close(&m);
    unlink(p);
}

TEST(deleted_or_renamed_over_is_no_change)
{
    char p[512], q[512];
    tmp_path(p, sizeof p, "del");
    tmp_path(q, sizeof q, "new");
    ASSERT_EQ(make_file(p, 8192), 0);
    rlx_filemap m;
    ASSERT_EQ(map_file(p, &m), 0);
    ASSERT_EQ(make_file(q, 100), 0);
    ASSERT_EQ(rename(q, p), 0); /* an atomic replacement: the old inode stays mapped */
    ASSERT(!rlx__filemap_changed(&m, NULL, 0));
    ASSERT_EQ(unlink(p), 0);
    ASSERT(!rlx__filemap_changed(&m, NULL, 0));
    ASSERT_EQ(((const uint8_t *)m.base)[8191], 0xab);
    rlx__filemap_close(&m);
}

TEST(other_sigbus_still_ends_the_process)
{
    char p[512];
    tmp_path(p, sizeof p, "other");
    ASSERT_EQ(make_file(p, 8192), 0);
    rlx_filemap m; /* installs the handler */
    ASSERT_EQ(map_file(p, &m), 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(p, O_RDONLY);
        const volatile uint8_t *x = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, fd, 0);
        if (ftruncate(open(p, O_WRONLY), 0)) _exit(44);
        _exit(x[4096] == 0 ? 42 : 43); /* not watched: SIGBUS (or a sanitizer's report of it), never these */
    }
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_MSG(!(WIFEXITED(st) && (WEXITSTATUS(st) == 42 || WEXITSTATUS(st) == 43)),
               "an unwatched SIGBUS was swallowed (status %d)", st);
    rlx__filemap_close(&m);
    unlink(p);
}

TEST(read_file_refuses_a_fifo)
{
    char p[512];
    tmp_path(p, sizeof p, "fifo");
    unlink(p);
    ASSERT_EQ(mkfifo(p, 0600), 0);
    char *text = NULL;
    rlx_error err = {0};
    ASSERT_NE(rlx__read_file(p, &text, NULL, &err), 0); /* before: open() waited for a writer forever */
    ASSERT_MSG(strstr(err.msg, "not a regular file"), "%s", err.msg);
    ASSERT(text == NULL);
    unlink(p);
}

static int copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t k;
    int rc = a && b ? 0 : -1;
    while (!rc && (k = fread(buf, 1, sizeof buf, a)) > 0)
        if (fwrite(buf, 1, k, b) != k) rc = -1;
    if (a) fclose(a);
    if (b && fclose(b)) rc = -1;
    return rc;
}

TEST(runner_fails_a_pass_over_a_cut_file)
{
    const char *src = rlx_test_shared("models/stories260K.gguf");
    if (!src) SKIP("models/stories260K.gguf not found");
    char p[512];
    tmp_path(p, sizeof p, "model.gguf");
    ASSERT_EQ(copy_file(src, p), 0);
    rlx_runner_config cfg = {.model_path = p, .n_ctx = 64, .max_batch_tokens = 16, .max_outputs = 16,
                             .backend = {.n_threads = 1}};
    rlx_runner *r = NULL;
    rlx_error err = {0};
    ASSERT_MSG(rlx_runner_open(&r, &cfg, &err) == 0, "%s", err.msg);
    int32_t *table = NULL, nb = 0, cap = 0, tok[2] = {1, 400}, pos[2] = {0, 1}, seq[2] = {0, 0};
    uint8_t outf[2] = {0, 1};
    ASSERT_EQ(rlx_runner_reserve(r, &table, &nb, &cap, 2), 0);
    rlx_batch_seq bs = {table, nb, -1};
    rlx_batch b = {2, tok, pos, seq, outf, 1, 1, &bs, NULL};
    ASSERT_MSG(rlx_runner_forward(r, &b, &err) == 0, "%s", err.msg);
    ASSERT(!rlx_runner_file_changed(r, NULL, 0));
    ASSERT_EQ(truncate(p, 4096), 0); /* as `cp other.gguf model.gguf` leaves it for a moment */
    ASSERT_EQ(rlx_runner_forward(r, &b, &err), RLX_EIO);
    ASSERT_MSG(strstr(err.msg, "changed on disk") && strstr(err.msg, p), "%s", err.msg);
    ASSERT(rlx_runner_file_changed(r, NULL, 0));
    free(table);
    rlx_runner_close(r);
    unlink(p);
}

TEST_MAIN(TEST_ENTRY(cut_short_reads_zeros_and_is_seen), TEST_ENTRY(write_in_place_and_resize_are_seen),
          TEST_ENTRY(deleted_or_renamed_over_is_no_change), TEST_ENTRY(other_sigbus_still_ends_the_process),
          TEST_ENTRY(read_file_refuses_a_fifo), TEST_ENTRY(runner_fails_a_pass_over_a_cut_file))
