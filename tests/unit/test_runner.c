/* test_runner.c - the runner's default KV sizing: a model with a huge context and many
 * sequences must still load (the pool is capped by available memory), and explicit sizes win. */
#include "tests/rlx_test.h"
#include "engine/runner.h"

#include <unistd.h>

static const char *make_model(char *path, size_t cap)
{
    const char *bin = getenv("RLX_BIN");
    if (!bin) return NULL;
    snprintf(path, cap, "/tmp/rlxd-runner-%d.gguf", (int)getpid());
    char cmd[1024];
    /* context 8M tokens: 64 sequences x 8M x 256 bytes of KV per token would be 128 GiB */
    snprintf(cmd, sizeof cmd, "'%s/rlxd-synth' --arch llama --preset tiny --ctx 8388608 -o '%s' >/dev/null 2>&1", bin, path);
    return system(cmd) == 0 ? path : NULL;
}

TEST(default_kv_fits_memory)
{
    char path[256];
    if (!make_model(path, sizeof path)) SKIP("rlxd-synth not available (RLX_BIN)");
    rlx_runner_config cfg = {.model_path = path, .max_seqs = 64, .max_batch_tokens = 64, .backend = {.n_threads = 1}};
    rlx_runner *r = NULL;
    rlx_error err = {0};
    int rc = rlx_runner_open(&r, &cfg, &err);
    ASSERT_MSG(rc == 0, "open: %s", err.msg);
    ASSERT_EQ(r->n_ctx, 8388608);
    long pages = sysconf(_SC_AVPHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    size_t pool = (size_t)r->kv.n_blocks * (size_t)r->kv.block_size * 256;
    ASSERT(pool <= (size_t)pages * (size_t)psize / 2);
    rlx_runner_close(r);
    /* an explicit block count is taken as given */
    cfg.kv_blocks = 7;
    ASSERT_EQ(rlx_runner_open(&r, &cfg, &err), 0);
    ASSERT_EQ(r->kv.n_blocks, 7);
    rlx_runner_close(r);
    unlink(path);
}

TEST_MAIN(TEST_ENTRY(default_kv_fits_memory))
