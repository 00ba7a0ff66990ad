/* test_synth_util.h - models for tests written by the built rlxd-synth (RLX_BIN) into
 * the test's temporary folder (tests/rlx_test_tmp.h), removed at exit. Header-only. */
#ifndef RLX_TEST_SYNTH_UTIL_H
#define RLX_TEST_SYNTH_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/rlx_test_tmp.h"

/* Runs rlxd-synth with `args` into <tmpdir>/out (path gets the file); false if the tool is not
 * built or fails. */
static inline bool synth(const char *args, const char *out, char *path, size_t cap)
{
    const char *bin = getenv("RLX_BIN");
    char tool[512], cmd[2048];
    snprintf(tool, sizeof tool, "%s/rlxd-synth", bin ? bin : ".");
    if (access(tool, X_OK)) return false;
    const char *dir = rlx_test_tmp_dir();
    if (!dir) return false;
    snprintf(path, cap, "%s/%s", dir, out);
    snprintf(cmd, sizeof cmd, "\"%s\" %s -o \"%s\" 2>/dev/null", tool, args, path);
    int rc = system(cmd);
    return WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

#endif
