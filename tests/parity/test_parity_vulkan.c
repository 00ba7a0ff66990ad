/* test_parity_vulkan.c - the golden parity suite (tests/parity/golden_dir.h) through the Vulkan
 * backend: every model with a golden file, F16 KV against golden/ and F32 KV against
 * golden/f32kv/, under the README's strict rules, as the CPU backend (the shaders compute the
 * CPU backend's arithmetic, llama.cpp's, operation for operation; RLX_VK_NO_F64=1, the builds
 * for devices without 64-bit floats, gets the lenient ones). The runner reaches the backend through
 * RLXD_BACKEND=vulkan, exactly as `rlxd generate/serve` do without a --backend flag.
 * RLX_PARITY_MODELS=stem,stem narrows the run (ctest runs one model once more with
 * RLX_VK_FORCE_STAGING=1). Skips (77) when this build or machine has no Vulkan device. */
#include "tests/parity/golden_dir.h"

#ifdef RLX_HAVE_VULKAN
/* The 151936-token vocabularies run their first two prompts (5 and 17 tokens and their greedy
 * continuations): on lavapipe the output projection, 151936 rows through the CPU-exact dot
 * product shader at every position, was more than half the suite's time; the longer prompts'
 * paths (attention over 33 and 60 positions) run in every other model. Every KV type in the release build; F16 KV only in
 * the sanitizer build, whose host side is slower (as test_parity.c there). The CPU suite
 * (test_parity) runs all four prompts. */
#define BIG_VOCAB 65536
#if defined(__SANITIZE_ADDRESS__)
#define BIG_EVERY_KV false
#else
#define BIG_EVERY_KV true
#endif

static void golden_vulkan(const char *dir, int kv_type)
{
    char why[600] = "";
    /* the shader builds for devices without 64-bit floats keep float sums: the lenient rules */
    const char *nf = getenv("RLX_VK_NO_F64");
    int failures = golden_run_backend("vulkan", dir, kv_type, BIG_VOCAB, BIG_EVERY_KV, nf && !strcmp(nf, "1"), why, sizeof why);
    if (why[0]) SKIP("%s", why);
    ASSERT_EQ(failures, 0);
}

TEST(golden_f16_kv_vulkan) { golden_vulkan("golden", RLX_F16); }
TEST(golden_f32_kv_vulkan) { golden_vulkan("golden/f32kv", RLX_F32); }
#else
TEST(golden_f16_kv_vulkan)
{
    (void)golden_run_backend; /* header-only helpers this configuration does not call */
    SKIP("this build has no Vulkan backend (configure with -DRLX_VULKAN=ON)");
}
TEST(golden_f32_kv_vulkan) { SKIP("this build has no Vulkan backend (configure with -DRLX_VULKAN=ON)"); }
#endif

TEST_MAIN(TEST_ENTRY(golden_f16_kv_vulkan), TEST_ENTRY(golden_f32_kv_vulkan))
