/* golden.h - runs a model over the reference prompts of ../shared/golden and compares logits
 * and greedy continuations under the rules of golden/README.md. Header-only, for parity tests. */
#ifndef RLX_TEST_GOLDEN_H
#define RLX_TEST_GOLDEN_H

#include "engine/runner.h"
#include "engine/sample.h"
#include "server/cli.h"
#include "tests/rlx_test.h"

#include <cjson/cJSON.h>
#include <stdarg.h>

/* soft: a logit beyond tol but within 2*tol. Allowed (up to 10% of checks) only for quantized
 * weights: llama.cpp's SIMD sums differ from ours in the last bits, and where that flips the
 * rounding of one 8-bit activation, later logits move by about 1e-2 (measured on the
 * synth-llama-mid K-quant and Q4_0/Q8_0 files). */
/* worst: the largest |logit - reference| seen, as a fraction of the tolerance (the margin). */
typedef struct golden_result { int checked, failed, soft; bool allow_soft; double worst; char first_failure[512]; } golden_result;

static void golden_fail(golden_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void golden_fail(golden_result *res, const char *fmt, ...)
{
    res->failed++;
    if (res->failed == 1) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(res->first_failure, sizeof res->first_failure, fmt, ap);
        va_end(ap);
    }
}

/* Compares our logits with a reference top-5 list [[id, logit], ...]. */
/* tol is absolute: the README's relative tolerance times max(1, max |logit|) of the model's
 * reference file (the README calibrates it so: "stories260K, whose logits reach 17.8"). */
static void golden_check_top5(golden_result *res, const float *logits, int32_t n_vocab, const cJSON *ref,
                              double tol, const char *where)
{
    int nref = cJSON_GetArraySize(ref);
    int32_t top[5];
    float tv[5];
    rlx_logprobs(logits, n_vocab, 0, 5, top, tv);
    res->checked++;
    for (int k = 0; k < nref && k < 5; k++) {
        const cJSON *e = cJSON_GetArrayItem(ref, k);
        int id = cJSON_GetArrayItem(e, 0)->valueint;
        double lv = cJSON_GetArrayItem(e, 1)->valuedouble;
        double err_abs = fabs(logits[id] - lv);
        res->worst = fmax(res->worst, err_abs / tol);
        if (err_abs > tol) {
            if (res->allow_soft && err_abs <= 2 * tol) { res->soft++; return; }
            golden_fail(res, "%s: logit of id %d is %.5f, reference %.5f (tol %.4f)", where, id, logits[id], lv, tol);
            return;
        }
        if (top[k] != id) {
            if (k == 0) {
                /* a near tie in the reference (closer than tol) may go either way */
                double ours_ref = -1e30;
                for (int j = 1; j < nref; j++)
                    if (cJSON_GetArrayItem(cJSON_GetArrayItem(ref, j), 0)->valueint == top[0])
                        ours_ref = cJSON_GetArrayItem(cJSON_GetArrayItem(ref, j), 1)->valuedouble;
                if (lv - ours_ref >= tol) { golden_fail(res, "%s: top-1 is %d, reference %d", where, top[0], id); return; }
                continue;
            }
            /* a swap is allowed only between reference neighbours closer than the tolerance */
            double prev = cJSON_GetArrayItem(cJSON_GetArrayItem(ref, k - 1), 1)->valuedouble;
            double next = k + 1 < nref ? cJSON_GetArrayItem(cJSON_GetArrayItem(ref, k + 1), 1)->valuedouble : -1e30;
            if (lv - next >= tol && prev - lv >= tol && fabs(logits[top[k]] - lv) > tol) {
                golden_fail(res, "%s: rank %d is id %d, reference %d", where, k + 1, top[k], id);
                return;
            }
        }
    }
}

static double golden_tolerance(const char *model_file)
{
    return (strstr(model_file, "-q") && !strstr(model_file, "qwen")) ? 1e-2 : 2e-3;
}

/* Runs the prompts of golden file `gpath` (the first max_prompts; 0 = all) on model `mpath`
 * with KV type kv_type. */
static golden_result golden_run(const char *gpath, const char *mpath, int kv_type, double tol, int max_prompts)
{
    golden_result res = {.allow_soft = tol > 5e-3};
    size_t len;
    char *txt = rlx_read_file(gpath, &len);
    cJSON *root = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    if (!root) { golden_fail(&res, "%s: cannot read or parse", gpath); return res; }
    const cJSON *prompts = cJSON_GetObjectItem(root, "prompts");
    double maxabs = 1.0;
    const cJSON *p;
    cJSON_ArrayForEach(p, prompts) {
        const char *lists[] = {"top5", "greedy_top5"};
        for (int li = 0; li < 2; li++) {
            const cJSON *pos, *e;
            cJSON_ArrayForEach(pos, cJSON_GetObjectItem(p, lists[li]))
                cJSON_ArrayForEach(e, pos) maxabs = fmax(maxabs, fabs(cJSON_GetArrayItem(e, 1)->valuedouble));
        }
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(p, "last_logits")) maxabs = fmax(maxabs, fabs(e->valuedouble));
    }
    tol *= maxabs;
    rlx_runner_config cfg = {.model_path = mpath, .kv_type = kv_type, .kv_type_set = true,
                             .n_ctx = 256, .max_batch_tokens = 128, .max_outputs = 128, .backend = {.n_threads = 2}};
    rlx_runner *r = NULL;
    rlx_error err = {0};
    if (rlx_runner_open(&r, &cfg, &err)) { golden_fail(&res, "%s: %s", mpath, err.msg); cJSON_Delete(root); return res; }
    int pi = 0;
    cJSON_ArrayForEach(p, prompts) {
        if (max_prompts > 0 && pi >= max_prompts) break;
        const cJSON *toks = cJSON_GetObjectItem(p, "tokens");
        int n = cJSON_GetArraySize(toks);
        int32_t ids[256], pos[256], seq[256];
        uint8_t outf[256];
        int32_t *table = NULL, nb = 0, cap = 0;
        for (int i = 0; i < n; i++) { ids[i] = cJSON_GetArrayItem(toks, i)->valueint; pos[i] = i; seq[i] = 0; outf[i] = 1; }
        const cJSON *greedy = cJSON_GetObjectItem(p, "greedy");
        int ng = cJSON_GetArraySize(greedy);
        if (rlx_runner_reserve(r, &table, &nb, &cap, n + ng)) { golden_fail(&res, "KV reserve failed"); break; }
        rlx_batch_seq bs = {table, nb};
        rlx_batch b = {n, ids, pos, seq, outf, n, 1, &bs, NULL};
        if (rlx_runner_forward(r, &b, &err)) { golden_fail(&res, "forward: %s", err.msg); free(table); break; }
        const cJSON *top5 = cJSON_GetObjectItem(p, "top5");
        char where[128];
        for (int i = 0; i < n; i++) {
            snprintf(where, sizeof where, "prompt %d position %d", pi, i);
            golden_check_top5(&res, r->logits + (size_t)i * r->n_vocab, r->n_vocab, cJSON_GetArrayItem(top5, i), tol, where);
        }
        /* the last position's full logit vector */
        /* beyond the README (which checks top-5 lists): for unquantized weights every logit of
         * the last position must be within tol too; quantized weights only get the top-5 rules,
         * since a flipped 8-bit activation moves individual far-from-top logits by ~2 tol */
        const cJSON *last = cJSON_GetObjectItem(p, "last_logits");
        if (last && !res.allow_soft) {
            double worst = 0.0;
            const float *lg = r->logits + (size_t)(n - 1) * r->n_vocab;
            const cJSON *e;
            int v = 0;
            cJSON_ArrayForEach(e, last) { if (v < r->n_vocab) worst = fmax(worst, fabs(lg[v] - e->valuedouble)); v++; }
            res.checked++;
            res.worst = fmax(res.worst, worst / tol);
            if (worst > tol && res.allow_soft && worst <= 2 * tol) res.soft++;
            else if (worst > tol) golden_fail(&res, "prompt %d: last-position logits differ by up to %.5f (tol %.4f)", pi, worst, tol);
        }
        /* greedy continuation, one decode step at a time */
        int32_t cur = rlx_argmax(r->logits + (size_t)(n - 1) * r->n_vocab, r->n_vocab);
        const cJSON *gtop = cJSON_GetObjectItem(p, "greedy_top5");
        for (int k = 0; k < ng; k++) {
            int want = cJSON_GetArrayItem(greedy, k)->valueint;
            res.checked++;
            if (cur != want) {
                /* a near tie in the reference may go either way; the continuations then part */
                const cJSON *cand = gtop ? cJSON_GetArrayItem(gtop, k) : NULL, *e;
                double ref_top = -1e30, ref_ours = -1e30;
                cJSON_ArrayForEach(e, cand) {
                    int id = cJSON_GetArrayItem(e, 0)->valueint;
                    double lv = cJSON_GetArrayItem(e, 1)->valuedouble;
                    if (id == want) ref_top = lv;
                    if (id == cur) ref_ours = lv;
                }
                if (ref_top - ref_ours < tol && res.allow_soft) { res.soft++; break; }
                golden_fail(&res, "prompt %d greedy step %d: got %d, reference %d", pi, k, cur, want);
                break;
            }
            if (k == ng - 1) break;
            int32_t t1 = cur, p1 = n + k, s1 = 0;
            uint8_t o1 = 1;
            rlx_batch d = {1, &t1, &p1, &s1, &o1, 1, 1, &bs, NULL};
            if (rlx_runner_forward(r, &d, &err)) { golden_fail(&res, "decode: %s", err.msg); break; }
            snprintf(where, sizeof where, "prompt %d greedy step %d", pi, k + 1);
            if (gtop) golden_check_top5(&res, r->logits, r->n_vocab, cJSON_GetArrayItem(gtop, k + 1), tol, where);
            cur = rlx_argmax(r->logits, r->n_vocab);
        }
        for (int32_t i = 0; i < nb; i++) rlx_kv_release(&r->kv, table[i]);
        free(table);
        pi++;
    }
    rlx_runner_close(r);
    cJSON_Delete(root);
    if (res.soft * 10 > res.checked) golden_fail(&res, "%d of %d checks beyond tolerance (at most 10%% allowed)", res.soft, res.checked);
    return res;
}

#endif
