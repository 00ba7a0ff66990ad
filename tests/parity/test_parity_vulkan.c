/* test_parity_vulkan.c - the golden parity suite (tests/parity/golden_dir.h) through the Vulkan
 * backend: every model with a golden file, F16 KV against golden/ and F32 KV against
 * golden/f32kv/, under the same rules as the CPU test. The runner reaches the backend through
 * RLXD_BACKEND=vulkan, exactly as `rlxd generate/serve` do without a --backend flag.
 * RLX_PARITY_MODELS=stem,stem narrows the run (ctest runs one model once more with
 * RLX_VK_FORCE_STAGING=1). Skips (77) when this build or machine has no Vulkan device. */
#include "tests/parity/golden_dir.h"

#ifdef RLX_HAVE_VULKAN
/* lavapipe's kernels are not instrumented, but the sanitizer build's host side is slower: as in
 * test_parity.c, the 151936-token vocabularies run two prompts with F16 KV there */
#if defined(__SANITIZE_ADDRESS__)
#define BIG_VOCAB 65536
#else
#define BIG_VOCAB 0
#endif

static bool have_vulkan(char *why, size_t n)
{
    rlx_backend *be = NULL;
    rlx_error err = {0};
    rlx_backend_config cfg = {.name = "vulkan"};
    if (rlx_backend_create(&be, &cfg, &err)) { snprintf(why, n, "%s", err.msg); return false; }
    rlx_backend_destroy(be);
    return true;
}

static void golden_vulkan(const char *dir, int kv_type)
{
    char why[512];
    if (!have_vulkan(why, sizeof why)) SKIP("no Vulkan device: %s", why);
    setenv("RLXD_BACKEND", "vulkan", 1);
    int models = 0;
    golden_dir_opts o = {BIG_VOCAB, getenv("RLX_PARITY_MODELS")};
    int failures = golden_run_dir(dir, kv_type, &o, &models);
    unsetenv("RLXD_BACKEND");
    if (models == 0 && failures == 0) SKIP("../shared/%s or its models are absent", dir);
    ASSERT_EQ(failures, 0);
}

TEST(golden_f16_kv_vulkan) { golden_vulkan("golden", RLX_F16); }
TEST(golden_f32_kv_vulkan) { golden_vulkan("golden/f32kv", RLX_F32); }
#else
TEST(golden_f16_kv_vulkan)
{
    (void)golden_run_dir; /* header-only helpers this configuration does not call */
    SKIP("this build has no Vulkan backend (configure with -DRLX_VULKAN=ON)");
}
TEST(golden_f32_kv_vulkan) { SKIP("this build has no Vulkan backend (configure with -DRLX_VULKAN=ON)"); }
#endif

TEST_MAIN(TEST_ENTRY(golden_f16_kv_vulkan), TEST_ENTRY(golden_f32_kv_vulkan))
