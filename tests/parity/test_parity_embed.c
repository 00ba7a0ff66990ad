/* test_parity_embed.c - the encoders (bert, nomic-bert) against llama.cpp's embeddings in
 * ../shared/golden/embgolden-*.json, under golden/README.md's rules for embedding models:
 *   token ids identical; |d embedding| <= 1e-3 max(1, max|e|) per component; |d embedding_l2|
 *   <= 3e-4; cosine >= 1 - 1e-6; |d token_embeddings| <= 1e-3 max(1, max|x|).
 * Each text runs alone (the golden's setting), with the model's pooling, then with pooling none
 * for the per-token states; and all texts of a model together in one step must give every
 * text's vector bit for bit (batch invariance). Backend: RLXD_BACKEND (default cpu; another
 * backend is also compared with the CPU's vectors, printed; one without a device skips). */
#include "engine/embed.h"
#include "models/tokenizer.h"
#include "server/cli.h"
#include "tests/rlx_test.h"

#include <cjson/cJSON.h>
#include <math.h>

static const char *const golden_models[] = {"synth-bert-tiny-f32", "synth-bert-cls-tiny-f32", "synth-nomic-bert-tiny-f32"};

static double max_abs(const cJSON *arr)
{
    double m = 0.0;
    const cJSON *v;
    cJSON_ArrayForEach(v, arr) m = fmax(m, fabs(v->valuedouble));
    return m;
}

/* worst |ours - reference| over a JSON array of n numbers */
static double worst_diff(const float *ours, const cJSON *ref, int64_t n, bool *len_ok)
{
    *len_ok = cJSON_GetArraySize(ref) == n;
    double w = 0.0;
    for (int64_t i = 0; *len_ok && i < n; i++) w = fmax(w, fabs((double)ours[i] - cJSON_GetArrayItem(ref, (int)i)->valuedouble));
    return w;
}

static double cosine(const float *a, const cJSON *ref, int64_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < n; i++) {
        double b = cJSON_GetArrayItem(ref, (int)i)->valuedouble;
        ab += a[i] * b;
        aa += (double)a[i] * a[i];
        bb += b * b;
    }
    return ab / sqrt(aa * bb);
}

/* Runs one model; returns the number of failed checks (-1: files absent). */
static int run_model(const char *stem)
{
    char rel[256];
    snprintf(rel, sizeof rel, "golden/embgolden-%s.json", stem);
    const char *gpath = rlx_test_shared(rel);
    snprintf(rel, sizeof rel, "models/%s.gguf", stem);
    const char *mpath = rlx_test_shared(rel);
    if (!gpath || !mpath) return -1;
    size_t len = 0;
    char *text = rlx_read_file(gpath, &len);
    cJSON *gold = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    if (!gold) { fprintf(stderr, "  %s: cannot read %s\n", stem, gpath); return 1; }

    rlx_error err = {0};
    rlx_runner *r = NULL;
    rlx_runner_config cfg = {.model_path = mpath, .max_seqs = 16, .max_batch_tokens = 1024};
    int fails = 0;
    if (rlx_runner_open(&r, &cfg, &err)) {
        fprintf(stderr, "  %s: %s\n", stem, err.msg);
        cJSON_Delete(gold);
        return 1;
    }
    rlx_tokenizer *tok = NULL;
    if (rlx_tokenizer_from_gguf(&tok, r->model->gguf, &err)) {
        fprintf(stderr, "  %s: tokenizer: %s\n", stem, err.msg);
        rlx_runner_close(r);
        cJSON_Delete(gold);
        return 1;
    }
    const char *pool_name = cJSON_GetObjectItem(gold, "pooling")->valuestring;
    rlx_pooling pooling;
    if (rlx_pooling_parse(pool_name, &pooling, &err) || pooling != rlx_embed_default_pooling(r)) {
        fprintf(stderr, "  %s: pooling %s, the model says %s\n", stem, pool_name, rlx_pooling_name(rlx_embed_default_pooling(r)));
        fails++;
    }
    const int64_t d = rlx_embed_dim(r, pooling);
    if (d != cJSON_GetObjectItem(gold, "n_embd")->valueint) { fprintf(stderr, "  %s: n_embd %lld\n", stem, (long long)d); fails++; }

    const cJSON *cases = cJSON_GetObjectItem(gold, "cases");
    const int nc = cJSON_GetArraySize(cases);
    rlx_embed_seq *seqs = calloc((size_t)nc, sizeof *seqs);
    float *alone = calloc((size_t)nc * (size_t)d, sizeof *alone), *together = calloc((size_t)nc * (size_t)d, sizeof *together);
    double worst_e = 0, worst_l2 = 0, worst_tok = 0, worst_cos = 0;
    for (int c = 0; c < nc && seqs && alone && together; c++) {
        const cJSON *cs = cJSON_GetArrayItem(cases, c);
        const char *t = cJSON_GetObjectItem(cs, "text")->valuestring;
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (rlx_tokenize(tok, t, strlen(t), true, true, &ids, &n_ids, &err)) {
            fprintf(stderr, "  %s case %d: tokenize: %s\n", stem, c, err.msg);
            fails++;
            continue;
        }
        seqs[c] = (rlx_embed_seq){ids, (int32_t)n_ids};
        const cJSON *ref_ids = cJSON_GetObjectItem(cs, "tokens");
        bool same = cJSON_GetArraySize(ref_ids) == (int)n_ids;
        for (size_t i = 0; same && i < n_ids; i++) same = cJSON_GetArrayItem(ref_ids, (int)i)->valueint == ids[i];
        if (!same) { fprintf(stderr, "  %s case %d: token ids differ from the reference\n", stem, c); fails++; continue; }

        /* pooled, not normalized: embedding */
        float *e = alone + (size_t)c * (size_t)d;
        if (rlx_embed_step(r, &seqs[c], 1, pooling, -1, e, &err)) {
            fprintf(stderr, "  %s case %d: %s\n", stem, c, err.msg);
            fails++;
            continue;
        }
        const cJSON *ref_e = cJSON_GetObjectItem(cs, "embedding");
        bool ok;
        double w = worst_diff(e, ref_e, d, &ok), tol = 1e-3 * fmax(1.0, max_abs(ref_e));
        worst_e = fmax(worst_e, w / tol);
        if (!ok || w > tol) { fprintf(stderr, "  %s case %d: embedding off by %g (tol %g)\n", stem, c, w, tol); fails++; }
        double cs_ = cosine(e, ref_e, d);
        worst_cos = fmax(worst_cos, 1.0 - cs_);
        if (!(cs_ >= 1.0 - 1e-6)) { fprintf(stderr, "  %s case %d: cosine %.9f\n", stem, c, cs_); fails++; }

        /* Euclidean-normalized: embedding_l2 */
        float *l2 = malloc((size_t)d * sizeof *l2);
        if (l2 && !rlx_embed_step(r, &seqs[c], 1, pooling, 2, l2, &err)) {
            w = worst_diff(l2, cJSON_GetObjectItem(cs, "embedding_l2"), d, &ok);
            worst_l2 = fmax(worst_l2, w / 3e-4);
            if (!ok || w > 3e-4) { fprintf(stderr, "  %s case %d: embedding_l2 off by %g\n", stem, c, w); fails++; }
        } else {
            fprintf(stderr, "  %s case %d: l2: %s\n", stem, c, err.msg);
            fails++;
        }
        free(l2);

        /* per-token hidden states (pooling none) */
        const cJSON *ref_t = cJSON_GetObjectItem(cs, "token_embeddings");
        if (ref_t) {
            const int64_t n_embd = r->model->cfg.n_embd;
            float *rows = malloc(n_ids * (size_t)n_embd * sizeof *rows);
            if (rows && !rlx_embed_step(r, &seqs[c], 1, RLX_POOL_NONE, 2, rows, &err) && cJSON_GetArraySize(ref_t) == (int)n_ids) {
                double mx = 0, wt = 0;
                for (size_t i = 0; i < n_ids; i++) mx = fmax(mx, max_abs(cJSON_GetArrayItem(ref_t, (int)i)));
                for (size_t i = 0; i < n_ids; i++) {
                    wt = fmax(wt, worst_diff(rows + i * (size_t)n_embd, cJSON_GetArrayItem(ref_t, (int)i), n_embd, &ok));
                    if (!ok) break;
                }
                worst_tok = fmax(worst_tok, wt / (1e-3 * fmax(1.0, mx)));
                if (!ok || wt > 1e-3 * fmax(1.0, mx)) { fprintf(stderr, "  %s case %d: token embeddings off by %g\n", stem, c, wt); fails++; }
            } else {
                fprintf(stderr, "  %s case %d: token embeddings: %s\n", stem, c, err.msg);
                fails++;
            }
            free(rows);
        }
    }
    /* another backend than the CPU: how far from the CPU backend's vectors (bit for bit where
     * the device has 64-bit floats, as the decoders) */
    double cpu_diff = -1.0;
    if (!fails && strcmp(r->backend->ops->name, "cpu")) {
        rlx_runner *rc = NULL;
        rlx_runner_config cc = cfg;
        cc.backend.name = "cpu";
        float *v = malloc((size_t)d * sizeof *v);
        if (v && !rlx_runner_open(&rc, &cc, &err)) {
            cpu_diff = 0.0;
            for (int c = 0; c < nc; c++)
                if (!rlx_embed_step(rc, &seqs[c], 1, pooling, -1, v, &err))
                    for (int64_t i = 0; i < d; i++) cpu_diff = fmax(cpu_diff, fabs((double)v[i] - alone[(size_t)c * (size_t)d + (size_t)i]));
            rlx_runner_close(rc);
        }
        free(v);
    }
    /* all texts in one step, in reverse order: each vector bit for bit the one it had alone */
    if (!fails && seqs && together) {
        rlx_embed_seq *rev = calloc((size_t)nc, sizeof *rev);
        for (int c = 0; rev && c < nc; c++) rev[c] = seqs[nc - 1 - c];
        if (!rev || rlx_embed_step(r, rev, nc, pooling, -1, together, &err)) {
            fprintf(stderr, "  %s: batch of %d: %s\n", stem, nc, err.msg);
            fails++;
        }
        for (int c = 0; rev && !fails && c < nc; c++)
            if (memcmp(together + (size_t)(nc - 1 - c) * (size_t)d, alone + (size_t)c * (size_t)d, (size_t)d * sizeof(float))) {
                fprintf(stderr, "  %s case %d: vector in a batch of %d differs from alone\n", stem, c, nc);
                fails++;
            }
        free(rev);
    }
    fprintf(stderr, "  %-28s %s: %d texts, worst/tolerance: embedding %.3f, l2 %.3f, tokens %.3f; 1-cos %.2g%s\n", stem,
            r->backend->ops->name, nc, worst_e, worst_l2, worst_tok, worst_cos, fails ? " FAILED" : "");
    if (cpu_diff >= 0.0) fprintf(stderr, "  %-28s max |%s - cpu| %g%s\n", stem, r->backend->ops->name, cpu_diff, cpu_diff == 0.0 ? " (bit for bit)" : "");
    for (int c = 0; seqs && c < nc; c++) free((void *)seqs[c].tokens);
    free(seqs);
    free(alone);
    free(together);
    rlx_tokenizer_free(tok);
    rlx_runner_close(r);
    cJSON_Delete(gold);
    return fails;
}

TEST(embedding_goldens)
{
    /* a GPU backend the machine has no device for skips (the CUDA build check runs this without
     * one); every later failure to open a model on it fails */
    rlx_backend *probe = NULL;
    rlx_error err = {0};
    int prc = rlx_backend_create(&probe, &(rlx_backend_config){0}, &err);
    if (prc == RLX_EUNSUPPORTED) SKIP("%s", err.msg);
    ASSERT_MSG(prc == 0, "%s", err.msg);
    rlx_backend_destroy(probe);
    int ran = 0, failed = 0;
    for (size_t i = 0; i < RLX_ARRAY_LEN(golden_models); i++) { /* every model runs, whatever the one before gave */
        int f = run_model(golden_models[i]);
        if (f < 0) continue;
        ran++;
        failed += f;
    }
    ASSERT_EQ(failed, 0);
    if (!ran) SKIP("../shared/golden/embgolden-* or their models are absent");
}

TEST_MAIN(TEST_ENTRY(embedding_goldens))
