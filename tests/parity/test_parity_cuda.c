/* test_parity_cuda.c - the golden parity suite (tests/parity/golden_dir.h) through the CUDA
 * backend, under golden.h's lenient rules (its kernels keep their own float summation order,
 * unlike the CPU and Vulkan backends; the strict verdict is printed): every model with a golden file, F16 KV against
 * golden/ and F32 KV against golden/f32kv/. RLX_PARITY_MODELS=stem,stem narrows the run. Skips
 * (77) when this build has no CUDA backend or the machine no GPU; the CUDA compile check
 * (tests/integration/test_cuda_build.sh) builds and runs it. */
#include "tests/parity/golden_dir.h"

#ifdef RLX_HAVE_CUDA
static void golden_cuda(const char *dir, int kv_type)
{
    char why[600] = "";
    int failures = golden_run_backend("cuda", dir, kv_type, 0, false, true, why, sizeof why);
    if (why[0]) SKIP("%s", why);
    ASSERT_EQ(failures, 0);
}

TEST(golden_f16_kv_cuda) { golden_cuda("golden", RLX_F16); }
TEST(golden_f32_kv_cuda) { golden_cuda("golden/f32kv", RLX_F32); }
#else
TEST(golden_f16_kv_cuda)
{
    (void)golden_run_backend; /* header-only helpers this configuration does not call */
    SKIP("this build has no CUDA backend (configure with -DRLX_CUDA=ON)");
}
TEST(golden_f32_kv_cuda) { SKIP("this build has no CUDA backend (configure with -DRLX_CUDA=ON)"); }
#endif

TEST_MAIN(TEST_ENTRY(golden_f16_kv_cuda), TEST_ENTRY(golden_f32_kv_cuda))
