/* test_synth_util.h - models for tests written by the built rlxd-synth (RLX_BIN) into a
 * temporary directory removed at exit. Header-only. */
#ifndef RLX_TEST_SYNTH_UTIL_H
#define RLX_TEST_SYNTH_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static char synth_tmpdir[256];

static inline void synth_cleanup(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", synth_tmpdir);
    if (system(cmd)) fprintf(stderr, "  could not remove %s\n", synth_tmpdir);
}

/* Runs rlxd-synth with `args` into <tmpdir>/out (path gets the file); false if the tool is not
 * built or fails. */
static inline bool synth(const char *args, const char *out, char *path, size_t cap)
{
    const char *bin = getenv("RLX_BIN");
    char tool[512], cmd[2048];
    snprintf(tool, sizeof tool, "%s/rlxd-synth", bin ? bin : ".");
    if (access(tool, X_OK)) return false;
    if (!synth_tmpdir[0]) {
        snprintf(synth_tmpdir, sizeof synth_tmpdir, "/tmp/rlx-test-synth-XXXXXX");
        if (!mkdtemp(synth_tmpdir)) return false;
        atexit(synth_cleanup);
    }
    snprintf(path, cap, "%s/%s", synth_tmpdir, out);
    snprintf(cmd, sizeof cmd, "\"%s\" %s -o \"%s\" 2>/dev/null", tool, args, path);
    int rc = system(cmd);
    return WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

#endif
