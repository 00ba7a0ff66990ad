/* rlx_test_tmp.h - one temporary folder per test process: made at the first rlx_test_tmp_path
 * (/tmp/rlx-test-XXXXXX), removed with everything in it when the process that made it exits - a
 * forked child's exit leaves it to its parent; a test that crashes leaves it for inspection.
 * Several tests kept their own folder and never removed it, so every run left files in /tmp.
 * Header-only; single-threaded use (the tests' main thread). */
#ifndef RLX_TEST_TMP_H
#define RLX_TEST_TMP_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char rlx_test_tmpdir_[64];
static pid_t rlx_test_tmp_owner_;

static int rlx_test_tmp_rm_(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    if (remove(p)) fprintf(stderr, "  could not remove %s\n", p);
    return 0;
}

static void rlx_test_tmp_cleanup_(void)
{
    if (rlx_test_tmpdir_[0] && getpid() == rlx_test_tmp_owner_)
        nftw(rlx_test_tmpdir_, rlx_test_tmp_rm_, 16, FTW_DEPTH | FTW_PHYS);
}

/* The process's folder (made on first use), or NULL when it cannot be made. */
static inline const char *rlx_test_tmp_dir(void)
{
    if (!rlx_test_tmpdir_[0]) {
        snprintf(rlx_test_tmpdir_, sizeof rlx_test_tmpdir_, "/tmp/rlx-test-XXXXXX");
        if (!mkdtemp(rlx_test_tmpdir_)) {
            rlx_test_tmpdir_[0] = 0;
            return NULL;
        }
        rlx_test_tmp_owner_ = getpid();
        atexit(rlx_test_tmp_cleanup_);
    }
    return rlx_test_tmpdir_;
}

/* <folder>/name in a ring of 8 static buffers, or NULL when the folder cannot be made. */
static inline const char *rlx_test_tmp_path(const char *name)
{
    static char buf[8][512];
    static int k;
    const char *dir = rlx_test_tmp_dir();
    if (!dir) return NULL;
    char *b = buf[k++ & 7];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

#endif
