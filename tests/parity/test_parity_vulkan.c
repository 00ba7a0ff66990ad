/* test_parity_vulkan.c - the golden parity suite (tests/parity/golden.h) through the Vulkan
 * backend: logits and greedy continuations against llama.cpp for the small reference models
 * (lavapipe runs at a few GFLOP/s, so the large qwen2/qwen3 files are left to the CPU suite),
 * under golden.h's lenient rules (the strict README verdict is printed). The runner reaches the backend through
 * RLXD_BACKEND=vulkan, exactly as `rlxd generate/serve` do without a --backend flag.
 * Skips (77) when this build or machine has no Vulkan device. */
#include "tests/parity/golden.h"

#ifdef RLX_HAVE_VULKAN
/* golden file stems (golden/<dir>/golden-<stem>.json, models/<stem>.gguf) */
static const char *const f16_models[] = {
    "stories260K", "stories260K-q8_0", "synth-llama-mid-f32", "synth-llama-mid-f16", "synth-llama-mid-bf16",
    "synth-llama-mid-q8_0", "synth-llama-mid-q4_0", "synth-llama-mid-q4_k_m", "synth-llama-mid-q5_k_m",
    "synth-llama-mid-q6_k", "synth-gemma2-tiny-f32"};
static const char *const f32_models[] = {"stories260K", "synth-llama-mid-f32", "synth-gemma2-tiny-f32"};

static bool have_vulkan(char *why, size_t n)
{
    rlx_backend *be = NULL;
    rlx_error err = {0};
    rlx_backend_config cfg = {.name = "vulkan"};
    if (rlx_backend_create(&be, &cfg, &err)) { snprintf(why, n, "%s", err.msg); return false; }
    rlx_backend_destroy(be);
    return true;
}

static int run_list(const char *dir, const char *const *stems, size_t n, int kv_type, int *n_models)
{
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        char grel[256], mrel[256], gpath[1024], mpath[1024];
        snprintf(grel, sizeof grel, "%s/golden-%s.json", dir, stems[i]);
        snprintf(mrel, sizeof mrel, "models/%s.gguf", stems[i]);
        const char *g = rlx_test_shared(grel), *m = rlx_test_shared(mrel);
        if (!g || !m) { fprintf(stderr, "  skip %s: %s or %s absent\n", stems[i], grel, mrel); continue; }
        snprintf(gpath, sizeof gpath, "%s", g);
        snprintf(mpath, sizeof mpath, "%s", m);
        rlx_model *model = NULL;
        rlx_error err = {0};
        if (rlx_model_load(&model, mpath, &err)) { /* families not supported yet are skipped, as in test_parity.c */
            if (err.code == RLX_EUNSUPPORTED) fprintf(stderr, "  skip %-28s (%s)\n", stems[i], err.msg);
            else { fprintf(stderr, "  FAIL %s: %s\n", stems[i], err.msg); failures++; }
            continue;
        }
        rlx_model_free(model);
        double t0 = rlx_now();
        /* lenient rules: the shaders' float sums are not llama.cpp's, so near ties may go the
         * other way; the strict (README) verdict is printed for the record */
        golden_result res = golden_run(gpath, mpath, kv_type, golden_tolerance(mrel), 0, true);
        fprintf(stderr, "  %s %-28s %s KV: %d checks, %d failed, %d within 2x tol, worst %.2f tol (%.1f s)%s%s\n",
                res.failed ? "FAIL" : "ok  ", stems[i], kv_type == RLX_F16 ? "f16" : "f32", res.checked, res.failed, res.soft,
                res.worst, rlx_now() - t0, res.failed ? ": " : "", res.first_failure);
        if (res.strict_failed)
            fprintf(stderr, "       strict README rules: %d checks fail, first: %s\n", res.strict_failed, res.first_strict);
        failures += res.failed ? 1 : 0;
        (*n_models)++;
    }
    return failures;
}

static void golden_vulkan(const char *dir, const char *const *stems, size_t n, int kv_type)
{
    char why[512];
    if (!have_vulkan(why, sizeof why)) SKIP("no Vulkan device: %s", why);
    setenv("RLXD_BACKEND", "vulkan", 1);
    int models = 0, failures = run_list(dir, stems, n, kv_type, &models);
    unsetenv("RLXD_BACKEND");
    if (models == 0) SKIP("../shared/%s or its models are absent", dir);
    ASSERT_EQ(failures, 0);
}

TEST(golden_f16_kv_vulkan) { golden_vulkan("golden", f16_models, RLX_ARRAY_LEN(f16_models), RLX_F16); }
TEST(golden_f32_kv_vulkan) { golden_vulkan("golden/f32kv", f32_models, RLX_ARRAY_LEN(f32_models), RLX_F32); }
#else
TEST(golden_f16_kv_vulkan)
{
    (void)golden_run; /* header-only helpers this configuration does not call */
    (void)golden_tolerance;
    SKIP("this build has no Vulkan backend (configure with -DRLX_VULKAN=ON)");
}
TEST(golden_f32_kv_vulkan) { SKIP("this build has no Vulkan backend (configure with -DRLX_VULKAN=ON)"); }
#endif

TEST_MAIN(TEST_ENTRY(golden_f16_kv_vulkan), TEST_ENTRY(golden_f32_kv_vulkan))
