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

/* The rules of golden/README.md, enforced as written:
 *  - the top-1 id at every prompt position and greedy step equals the reference's, and the
 *    greedy continuation (one decode step at a time) is the reference's token for token;
 *  - the logit of each of the reference's top-5 ids is within tol of the reference value;
 *  - our top-5 id list equals the reference's, except that two ids whose reference logits are
 *    closer than tol may trade places (rank 1 excepted: it must match).
 * tol is absolute: the README's relative tolerance times max(1, max |logit|) of the model's
 * reference file (the README calibrates it so: "stories260K, whose logits reach 17.8").
 *
 * The CPU and Vulkan backends reproduce llama.cpp's arithmetic and are held to these rules.
 * lenient is for backends whose float arithmetic differs from llama.cpp's (CUDA): a strict failure is
 * still counted and reported (strict_failed, first_strict), but only fails the run when it is
 * not a rounding effect: a near tie in the reference (closer than tol) that went the other way
 * at rank 1 or in the greedy continuation (which then stops), a swap with an id within tol, or
 * a logit within 2 tol on at most 10% of the checks (one 8-bit activation rounding flipped
 * moves logits by ~1e-2).
 * worst: the largest |logit - reference| seen, as a fraction of the tolerance (the margin). */
typedef struct golden_result {
    int checked, failed, soft, strict_failed;
    bool lenient;
    double worst;
    char first_failure[512], first_strict[512];
} golden_result;

/* A check that broke the strict rules; `allowed`: the lenient rules accept it. */
static void golden_fail(golden_result *res, bool allowed, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void golden_fail(golden_result *res, bool allowed, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (res->strict_failed++ == 0) snprintf(res->first_strict, sizeof res->first_strict, "%s", msg);
    if (res->lenient && allowed) return;
    if (res->failed++ == 0) snprintf(res->first_failure, sizeof res->first_failure, "%s", msg);
}

static int golden_id(const cJSON *ref, int k) { return cJSON_GetArrayItem(cJSON_GetArrayItem(ref, k), 0)->valueint; }
static double golden_logit(const cJSON *ref, int k) { return cJSON_GetArrayItem(cJSON_GetArrayItem(ref, k), 1)->valuedouble; }

/* The reference logit of `id` if the list has it, else -inf. */
static double golden_ref_logit_of(const cJSON *ref, int nref, int id)
{
    for (int j = 0; j < nref; j++)
        if (golden_id(ref, j) == id) return golden_logit(ref, j);
    return -INFINITY;
}

/* Compares our logits with a reference top-5 list [[id, logit], ...]. */
static void golden_check_top5(golden_result *res, const float *logits, int32_t n_vocab, const cJSON *ref,
                              double tol, const char *where)
{
    const int nref = RLX_MIN(cJSON_GetArraySize(ref), 5);
    int32_t top[5];
    float tv[5];
    rlx_logprobs(logits, n_vocab, 0, 5, top, tv);
    res->checked++;
    for (int k = 0; k < nref; k++) {
        const int id = golden_id(ref, k);
        const double lv = golden_logit(ref, k), err_abs = fabs(logits[id] - lv);
        res->worst = fmax(res->worst, err_abs / tol);
        if (err_abs > tol) {
            const bool soft = err_abs <= 2 * tol;
            if (soft) res->soft++;
            golden_fail(res, soft, "%s: logit of id %d (rank %d) is %.5f, reference %.5f (tol %.4f)", where, id, k + 1, logits[id],
                        lv, tol);
            return;
        }
    }
    if (nref > 0 && top[0] != golden_id(ref, 0)) {
        golden_fail(res, golden_logit(ref, 0) - golden_ref_logit_of(ref, nref, top[0]) < tol,
                    "%s: top-1 is %d (%.5f), reference %d (%.5f)", where, top[0], logits[top[0]], golden_id(ref, 0),
                    golden_logit(ref, 0));
        return;
    }
    for (int k = 1; k < nref; k++) {
        if (top[k] == golden_id(ref, k)) continue;
        /* a swap with a neighbouring rank whose reference logit is closer than tol */
        bool ok = false;
        for (int j = k - 1; j <= k + 1; j += 2)
            if (j >= 1 && j < nref && top[k] == golden_id(ref, j) && fabs(golden_logit(ref, j) - golden_logit(ref, k)) < tol) ok = true;
        /* the reference lists five: rank 5's lower neighbour is unlisted, so an unlisted id there
         * must be within tol of the rank-5 reference logit */
        if (k == nref - 1 && !ok)
            ok = golden_ref_logit_of(ref, nref, top[k]) == -INFINITY && fabs(logits[top[k]] - golden_logit(ref, k)) < tol;
        if (!ok) {
            golden_fail(res, fabs(logits[top[k]] - golden_logit(ref, k)) <= tol,
                        "%s: rank %d is id %d, reference %d (reference neighbours not within tol)", where, k + 1, top[k],
                        golden_id(ref, k));
            return;
        }
    }
}

/* README's own rule for synth-qwen35-tiny-q8_0 (a random 8-layer DeltaNet that amplifies
 * 8-bit activation rounding flips): |delta| <= 1.0 (absolute) on each reference top-5 logit,
 * top-1 compared only where the reference's top-1/top-2 margin exceeds 1.0; the greedy
 * continuation is compared while that margin exceeds 1.0 at each step (golden_run). */
#define GOLDEN_MARGIN_TOL 1.0

static bool golden_margin_rule(const char *model_file)
{
    return strstr(model_file, "synth-qwen35-") && strstr(model_file, "-q8_0");
}

static double golden_margin(const cJSON *ref)
{
    return cJSON_GetArraySize(ref) >= 2 ? golden_logit(ref, 0) - golden_logit(ref, 1) : INFINITY;
}

static void golden_check_margin(golden_result *res, const float *logits, int32_t n_vocab, const cJSON *ref, const char *where)
{
    const int nref = RLX_MIN(cJSON_GetArraySize(ref), 5);
    res->checked++;
    for (int k = 0; k < nref; k++) {
        const int id = golden_id(ref, k);
        const double lv = golden_logit(ref, k), e = fabs(logits[id] - lv);
        res->worst = fmax(res->worst, e / GOLDEN_MARGIN_TOL);
        if (e > GOLDEN_MARGIN_TOL) {
            golden_fail(res, false, "%s: logit of id %d (rank %d) is %.5f, reference %.5f (tol %.1f)", where, id, k + 1, logits[id], lv,
                        GOLDEN_MARGIN_TOL);
            return;
        }
    }
    const int32_t top = rlx_argmax(logits, n_vocab);
    if (nref > 0 && golden_margin(ref) > GOLDEN_MARGIN_TOL && top != golden_id(ref, 0))
        golden_fail(res, false, "%s: top-1 is %d, reference %d (margin %.3f)", where, top, golden_id(ref, 0), golden_margin(ref));
}

/* README: 1e-2 for quantized weights (files named ...-q4_0, -q8_0, -q4_k_m, ...), else 2e-3 */
static double golden_tolerance(const char *model_file)
{
    for (const char *p = strstr(model_file, "-q"); p; p = strstr(p + 2, "-q"))
        if (p[2] >= '0' && p[2] <= '9') return 1e-2;
    return 2e-3;
}

/* Runs the prompts of golden file `gpath` (the first max_prompts; 0 = all) on model `mpath`
 * with KV type kv_type, under the strict or the lenient rules. */
static golden_result golden_run(const char *gpath, const char *mpath, int kv_type, double tol, int max_prompts, bool lenient)
{
    golden_result res = {.lenient = lenient};
    size_t len;
    char *txt = rlx_read_file(gpath, &len);
    cJSON *root = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    if (!root) { golden_fail(&res, false, "%s: cannot read or parse", gpath); return res; }
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
    const bool margin_rule = golden_margin_rule(mpath);
    if (margin_rule) tol = GOLDEN_MARGIN_TOL;
    rlx_runner_config cfg = {.model_path = mpath, .kv_type = kv_type, .kv_type_set = true,
                             .n_ctx = 256, .max_batch_tokens = 128, .max_outputs = 128, .backend = {.n_threads = 2}};
    rlx_runner *r = NULL;
    rlx_error err = {0};
    if (rlx_runner_open(&r, &cfg, &err)) { golden_fail(&res, false, "%s: %s", mpath, err.msg); cJSON_Delete(root); return res; }
    int pi = 0;
    cJSON_ArrayForEach(p, prompts) {
        if (max_prompts > 0 && pi >= max_prompts) break;
        const cJSON *toks = cJSON_GetObjectItem(p, "tokens");
        int n = cJSON_GetArraySize(toks);
        int32_t ids[256], pos[256], seq[256];
        uint8_t outf[256];
        for (int i = 0; i < n; i++) { ids[i] = cJSON_GetArrayItem(toks, i)->valueint; pos[i] = i; seq[i] = 0; outf[i] = 1; }
        const cJSON *greedy = cJSON_GetObjectItem(p, "greedy");
        int ng = cJSON_GetArraySize(greedy);
        /* fresh memory per prompt through the engine's interface: KV blocks, and a cleared
         * recurrent-state slot for hybrid models */
        rlx_mem_seq ms;
        rlx_mem_seq_init(&ms);
        if (rlx_memory_grow(&r->mem, &ms, n + ng)) {
            golden_fail(&res, false, "memory reserve failed");
            rlx_memory_release(&r->mem, &ms);
            rlx_mem_seq_free(&ms);
            break;
        }
        rlx_batch_seq bs = {ms.blocks, ms.n_blocks, ms.slot};
        rlx_batch b = {n, ids, pos, seq, outf, n, 1, &bs, NULL};
        if (rlx_runner_forward(r, &b, &err)) {
            golden_fail(&res, false, "forward: %s", err.msg);
            rlx_memory_release(&r->mem, &ms);
            rlx_mem_seq_free(&ms);
            break;
        }
        const cJSON *top5 = cJSON_GetObjectItem(p, "top5");
        char where[128];
        for (int i = 0; i < n; i++) {
            snprintf(where, sizeof where, "prompt %d position %d", pi, i);
            if (margin_rule) golden_check_margin(&res, r->logits + (size_t)i * r->n_vocab, r->n_vocab, cJSON_GetArrayItem(top5, i), where);
            else golden_check_top5(&res, r->logits + (size_t)i * r->n_vocab, r->n_vocab, cJSON_GetArrayItem(top5, i), tol, where);
        }
        /* beyond the README (which checks top-5 lists): every logit of the last position, whose
         * full vector the reference keeps, must be within tol too */
        const cJSON *last = cJSON_GetObjectItem(p, "last_logits");
        if (last) {
            double worst = 0.0;
            const float *lg = r->logits + (size_t)(n - 1) * r->n_vocab;
            const cJSON *e;
            int v = 0;
            cJSON_ArrayForEach(e, last) { if (v < r->n_vocab) worst = fmax(worst, fabs(lg[v] - e->valuedouble)); v++; }
            res.checked++;
            res.worst = fmax(res.worst, worst / tol);
            if (worst > tol)
                golden_fail(&res, worst <= 2 * tol, "prompt %d: last-position logits differ by up to %.5f (tol %.4f)", pi, worst, tol);
        }
        /* greedy continuation, one decode step at a time */
        int32_t cur = rlx_argmax(r->logits + (size_t)(n - 1) * r->n_vocab, r->n_vocab);
        const cJSON *gtop = cJSON_GetObjectItem(p, "greedy_top5");
        for (int k = 0; k < ng; k++) {
            int want = cJSON_GetArrayItem(greedy, k)->valueint;
            /* the margin rule: the continuation is compared while the reference's choice is clear */
            if (margin_rule && (!gtop || golden_margin(cJSON_GetArrayItem(gtop, k)) <= GOLDEN_MARGIN_TOL)) break;
            res.checked++;
            if (cur != want) {
                /* a near tie in the reference went the other way: the continuations then part */
                const cJSON *cand = gtop ? cJSON_GetArrayItem(gtop, k) : NULL;
                const int nc = cand ? RLX_MIN(cJSON_GetArraySize(cand), 5) : 0;
                const bool tie = cand && golden_ref_logit_of(cand, nc, want) - golden_ref_logit_of(cand, nc, cur) < tol;
                golden_fail(&res, tie, "prompt %d greedy step %d: got %d, reference %d", pi, k, cur, want);
                break;
            }
            if (k == ng - 1) break;
            int32_t t1 = cur, p1 = n + k, s1 = 0;
            uint8_t o1 = 1;
            rlx_batch d = {1, &t1, &p1, &s1, &o1, 1, 1, &bs, NULL};
            if (rlx_runner_forward(r, &d, &err)) { golden_fail(&res, false, "decode: %s", err.msg); break; }
            snprintf(where, sizeof where, "prompt %d greedy step %d", pi, k + 1);
            if (gtop && margin_rule) golden_check_margin(&res, r->logits, r->n_vocab, cJSON_GetArrayItem(gtop, k + 1), where);
            else if (gtop) golden_check_top5(&res, r->logits, r->n_vocab, cJSON_GetArrayItem(gtop, k + 1), tol, where);
            cur = rlx_argmax(r->logits, r->n_vocab);
        }
        rlx_memory_release(&r->mem, &ms);
        rlx_mem_seq_free(&ms);
        pi++;
    }
    rlx_runner_close(r);
    cJSON_Delete(root);
    if (lenient && res.soft * 10 > res.checked)
        golden_fail(&res, false, "%d of %d checks beyond tolerance (at most 10%% allowed)", res.soft, res.checked);
    return res;
}

#endif
