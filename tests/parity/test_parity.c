/* test_parity.c - logits and greedy continuations against llama.cpp for every model of
 * ../shared/models that has a golden file: F16 KV against golden/, F32 KV against
 * golden/f32kv/, under golden/README.md's rules as written (tests/parity/golden.h) on the default
 * kernel path, which reproduces llama.cpp's arithmetic bit for bit for every weight type.
 * Families rlxd does not support yet are listed as skipped. */
#include "tests/parity/golden_dir.h"
#include "backends/cpu/kernels.h"

/* The parity-avx2* variants (CMakeLists.txt) force a kernel family with RLX_CPU_PATH; on a CPU
 * without it the daemon would quietly run another, so the variant skips instead. */
static const char *missing_path(void)
{
    const char *want = getenv("RLX_CPU_PATH");
    return want && *want && !rlx_cpu_has_path(want) ? want : NULL;
}

/* Sanitizer builds run unoptimised matmul kernels at a fraction of their speed, and the
 * 151936-token Qwen vocabularies make the output projection most of the work: there, models
 * with vocabularies this large run the first two prompts with an F16 KV cache only (the
 * release build runs everything; the F32 KV path is covered by the smaller models). */
#if defined(__SANITIZE_ADDRESS__)
#define BIG_VOCAB 65536
#else
#define BIG_VOCAB 0
#endif

TEST(golden_f16_kv)
{
    if (missing_path()) SKIP("RLX_CPU_PATH=%s: this CPU lacks that kernel family", missing_path());
    const char *want = getenv("RLX_CPU_PATH");
    if (want && *want) ASSERT_STR_EQ(rlx_cpu_path(), want); /* the family this variant is for runs */
    int n = 0;
    golden_dir_opts o = {BIG_VOCAB, getenv("RLX_PARITY_MODELS"), false, false};
    int failures = golden_run_dir("golden", RLX_F16, &o, &n);
    if (n == 0 && failures == 0) SKIP("../shared/golden or its models are absent");
    ASSERT_EQ(failures, 0);
}

TEST(golden_f32_kv)
{
    if (missing_path()) SKIP("RLX_CPU_PATH=%s: this CPU lacks that kernel family", missing_path());
    int n = 0;
    golden_dir_opts o = {BIG_VOCAB, getenv("RLX_PARITY_MODELS"), false, false};
    int failures = golden_run_dir("golden/f32kv", RLX_F32, &o, &n);
    if (n == 0 && failures == 0) SKIP("../shared/golden/f32kv or its models are absent");
    ASSERT_EQ(failures, 0);
}

TEST_MAIN(TEST_ENTRY(golden_f16_kv), TEST_ENTRY(golden_f32_kv))
