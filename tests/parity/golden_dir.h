/* golden_dir.h - runs every model of ../shared/models that has a golden file in one golden
 * directory (golden/ with an F16 KV cache, golden/f32kv/ with F32) through golden_run() on
 * whatever backend RLXD_BACKEND names, printing one line per model. Families rlxd does not
 * support yet are listed as skipped. Header-only, for the parity tests. */
#ifndef RLX_TEST_GOLDEN_DIR_H
#define RLX_TEST_GOLDEN_DIR_H

#include "tests/parity/golden.h"

#include <dirent.h>

typedef struct golden_dir_opts {
    /* models with a larger vocabulary run only their first two prompts (where the output
     * projection dominates: sanitizer builds, lavapipe); 0: no limit */
    int64_t big_vocab;
    /* RLX_PARITY_MODELS: a comma-separated list of model stems to run (all when unset) */
    const char *only;
    /* golden.h's lenient rules (backends with their own float sums); the strict verdict is
     * still printed */
    bool lenient;
    /* with big_vocab: every KV type, not only F16 (the sanitizer builds run F16 only) */
    bool big_every_kv;
} golden_dir_opts;

static bool golden_dir_selected(const char *only, const char *stem)
{
    if (!only || !*only) return true;
    size_t n = strlen(stem);
    for (const char *p = only; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !strncmp(p, stem, n)) return true;
        p += l + (e ? 1 : 0);
    }
    return false;
}

static int golden_names_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Returns the number of failing models; *n_models gets the number run. */
static int golden_run_dir(const char *sub, int kv_type, const golden_dir_opts *o, int *n_models)
{
    const char *dirpath = rlx_test_shared(sub);
    if (!dirpath) return 0;
    DIR *d = opendir(dirpath);
    if (!d) return 0;
    char dcopy[1024];
    snprintf(dcopy, sizeof dcopy, "%s", dirpath);
    int failures = 0, nn = 0;
    struct dirent *e;
    char *names[64];
    while ((e = readdir(d)) && nn < 64)
        if (!strncmp(e->d_name, "golden-", 7) && strstr(e->d_name, ".json")) names[nn++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, golden_names_cmp);
    for (int i = 0; i < nn; i++) {
        char stem[256], model_rel[300], gpath[1400], mcopy[1024];
        snprintf(stem, sizeof stem, "%.*s", (int)(strlen(names[i]) - 7 - 5), names[i] + 7);
        snprintf(model_rel, sizeof model_rel, "models/%s.gguf", stem);
        snprintf(gpath, sizeof gpath, "%s/%s", dcopy, names[i]);
        free(names[i]);
        if (!golden_dir_selected(o->only, stem)) continue;
        const char *mpath = rlx_test_shared(model_rel);
        if (!mpath) { fprintf(stderr, "  skip %s: %s absent\n", stem, model_rel); continue; }
        snprintf(mcopy, sizeof mcopy, "%s", mpath);
        rlx_model *m = NULL;
        rlx_error err = {0};
        if (rlx_model_load(&m, mcopy, &err)) {
            if (err.code == RLX_EUNSUPPORTED) fprintf(stderr, "  skip %-28s (%s)\n", stem, err.msg);
            else { fprintf(stderr, "  FAIL %s: %s\n", stem, err.msg); failures++; }
            continue;
        }
        bool big = o->big_vocab > 0 && m->cfg.n_vocab > o->big_vocab;
        /* recurrent (hybrid) models have CPU kernels only: a GPU backend must refuse them at
         * load naming the op (checked here), never compute them */
        const bool hybrid = m->cfg.full_attn_interval > 0;
        rlx_model_free(m);
        const char *be = getenv("RLXD_BACKEND");
        if (hybrid && be && *be && strcmp(be, "cpu")) {
            golden_result res = golden_run(gpath, mcopy, kv_type, golden_tolerance(model_rel), 1, o->lenient);
            if (res.checked == 0 && strstr(res.first_failure, "does not support op")) {
                fprintf(stderr, "  skip %-28s (refused as it must be: %.160s)\n", stem, res.first_failure);
            } else {
                fprintf(stderr, "  FAIL %s: the %s backend did not refuse a recurrent model: %d checks run%s%s\n", stem, be,
                        res.checked, res.failed ? ", " : "", res.first_failure);
                failures++;
            }
            continue;
        }
        if (big && kv_type != RLX_F16 && !o->big_every_kv) {
            fprintf(stderr, "  skip %-28s (sanitizer build: large vocabulary, F16 KV only)\n", stem);
            continue;
        }
        double t0 = rlx_now();
        golden_result res = golden_run(gpath, mcopy, kv_type, golden_tolerance(model_rel), big ? 2 : 0, o->lenient);
        fprintf(stderr, "  %s %-28s %s KV: %d checks, %d failed, %d within 2x tol, worst %.2f tol (%.1f s)%s%s\n",
                res.failed ? "FAIL" : "ok  ", stem, kv_type == RLX_F16 ? "f16" : "f32", res.checked, res.failed, res.soft,
                res.worst, rlx_now() - t0, res.failed ? ": " : "", res.first_failure);
        if (o->lenient && res.strict_failed)
            fprintf(stderr, "       strict README rules: %d checks fail, first: %s\n", res.strict_failed, res.first_strict);
        if (big) fprintf(stderr, "       (large vocabulary: first 2 prompts)\n");
        failures += res.failed ? 1 : 0;
        (*n_models)++;
    }
    return failures;
}

/* The golden directory `sub` with KV type kv_type on the GPU backend `name` (reached through
 * RLXD_BACKEND as `rlxd generate/serve` do), under golden.h's strict or lenient rules: 77-style
 * skip reason in *why when there is no such device or no reference data, else the number of
 * failing models. */
__attribute__((unused)) static int golden_run_backend(const char *name, const char *sub, int kv_type, int64_t big_vocab,
                                                      bool big_every_kv, bool lenient, char *why, size_t why_n)
{
    rlx_backend *be = NULL;
    rlx_error err = {0};
    rlx_backend_config cfg = {.name = name};
    if (rlx_backend_create(&be, &cfg, &err)) {
        snprintf(why, why_n, "no %s device: %s", name, err.msg);
        return 0;
    }
    rlx_backend_destroy(be);
    setenv("RLXD_BACKEND", name, 1);
    int models = 0;
    golden_dir_opts o = {big_vocab, getenv("RLX_PARITY_MODELS"), lenient, big_every_kv};
    int failures = golden_run_dir(sub, kv_type, &o, &models);
    unsetenv("RLXD_BACKEND");
    if (models == 0 && failures == 0) snprintf(why, why_n, "../shared/%s or its models are absent", sub);
    return failures;
}

#endif
