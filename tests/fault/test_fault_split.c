/* test_fault_split.c - allocation failure at every allocation in turn (fault.h) while opening a
 * split GGUF (rlx_gguf_open_split: name parsing, the missing-part list, every part's parse, the
 * merged tensor table) and while checking and scanning a folder of models (rlx_model_check,
 * rlx_model_scan): each returns an error or succeeds, never crashes or leaks. */
#include "tests/rlx_test.h"
#include "tests/fault/fault.h"
#include "models/model_files.h"
#include "backends/dtype.h"

#include <unistd.h>

#define MAX_WALK 20000

static char dir[64];

static int write_model(uint32_t n_split)
{
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    if (!w) return RLX_ENOMEM;
    rlx_gguf_writer_set_str(w, "general.architecture", "llama", 5);
    float v[64] = {0};
    for (int i = 0; i < 6; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        int64_t ne[2] = {8, 8};
        rlx_gguf_writer_add_tensor(w, name, RLX_F32, 2, ne, v, sizeof v);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    rlx_error err = {0};
    int rc = rlx_gguf_writer_write_split(w, path, n_split, &err);
    rlx_gguf_writer_free(w);
    return rc;
}

TEST(open_split)
{
    if (!rlx_fault_available()) SKIP("no allocation interposer in this build (sanitizers)");
    strcpy(dir, "/tmp/rlx_fault_split_XXXXXX");
    ASSERT(mkdtemp(dir));
    ASSERT_EQ(write_model(3), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/m-00002-of-00003.gguf", dir);
    long live0 = rlx_fault_live(), n;
    for (n = 1; n < MAX_WALK; n++) {
        rlx_gguf *g = NULL;
        rlx_error err = {0};
        rlx_fault_arm(n, RLX_FAULT_THREAD);
        int rc = rlx_gguf_open_split(&g, path, &err);
        bool fired = rlx_fault_fired();
        rlx_fault_disarm();
        ASSERT_MSG(fired ? rc != 0 || g : rc == 0, "n=%ld rc=%d", n, rc);
        if (!rc) ASSERT_EQ(rlx_gguf_n_tensors(g), 6);
        rlx_gguf_close(g);
        ASSERT_EQ(rlx_fault_live(), live0);
        if (!fired) break;
    }
    ASSERT(n > 10);
}

TEST(check_and_scan)
{
    if (!rlx_fault_available()) SKIP("no allocation interposer in this build (sanitizers)");
    if (!dir[0]) SKIP("open_split did not run");
    /* one part missing: the check lists it; the scan groups the rest */
    char gone[128];
    snprintf(gone, sizeof gone, "%s/m-00003-of-00003.gguf", dir);
    ASSERT_EQ(unlink(gone), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/m-00001-of-00003.gguf", dir);
    long live0 = rlx_fault_live(), n;
    for (n = 1; n < MAX_WALK; n++) {
        rlx_check_result r;
        rlx_model_entry *e = NULL;
        size_t ne = 0;
        rlx_error err = {0};
        rlx_fault_arm(n, RLX_FAULT_THREAD);
        rlx_model_check(path, &r);
        int rc = rlx_model_scan(dir, &e, &ne, &err);
        bool fired = rlx_fault_fired();
        rlx_fault_disarm();
        ASSERT_EQ(r.status, RLX_CHECK_UNKNOWN);
        if (!rc) {
            ASSERT_EQ(ne, 1);
            ASSERT_EQ(e[0].n_present, 2);
        }
        rlx_model_scan_free(e, ne);
        ASSERT_EQ(rlx_fault_live(), live0);
        if (!fired) break;
    }
    ASSERT(n > 3);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
}

TEST_MAIN(TEST_ENTRY(open_split), TEST_ENTRY(check_and_scan))
