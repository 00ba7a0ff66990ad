/* test_pool.c - pooling and normalization of embeddings (engine/pool.h): each pooling and
 * norm on hand-made rows, and against llama.cpp's vectors in ../shared/golden: the mean of
 * the per-token hidden states within the README's tolerance of the pooled vector, and the
 * Euclidean normalization of the pooled vector bit for bit (the golden's embedding_l2). */
#include "tests/rlx_test.h"
#include "engine/pool.h"
#include "server/cli.h"

#include <cjson/cJSON.h>

TEST(names_and_gguf_values)
{
    rlx_pooling p;
    ASSERT_EQ(rlx_pooling_from_gguf(2, &p, NULL), 0);
    ASSERT_EQ(p, RLX_POOL_CLS);
    ASSERT_STR_EQ(rlx_pooling_name(p), "cls");
    rlx_error err = {0};
    ASSERT_EQ(rlx_pooling_from_gguf(7, &p, &err), RLX_EUNSUPPORTED);
    ASSERT(strstr(err.msg, "pooling type 7"));
    ASSERT_EQ(rlx_pooling_from_gguf(-1, &p, NULL), RLX_EUNSUPPORTED);
    for (int i = RLX_POOL_NONE; i <= RLX_POOL_RANK; i++) {
        ASSERT_EQ(rlx_pooling_parse(rlx_pooling_name((rlx_pooling)i), &p, NULL), 0);
        ASSERT_EQ(p, i);
    }
    ASSERT_EQ(rlx_pooling_parse("avg", &p, &err), RLX_EINVAL);
    ASSERT(strstr(err.msg, "\"avg\""));
}

TEST(pool_rows)
{
    const float rows[3 * 2] = {1.0f, -2.0f, 3.0f, 4.0f, 5.0f, 0.5f};
    float out[2];
    ASSERT_EQ(rlx_pool_rows(RLX_POOL_MEAN, rows, 3, 2, out), 0);
    ASSERT_NEAR(out[0], 3.0, 0);
    ASSERT_NEAR(out[1], 2.5 / 3.0, 1e-7);
    ASSERT_EQ(rlx_pool_rows(RLX_POOL_CLS, rows, 3, 2, out), 0);
    ASSERT(out[0] == 1.0f && out[1] == -2.0f);
    ASSERT_EQ(rlx_pool_rows(RLX_POOL_LAST, rows, 3, 2, out), 0);
    ASSERT(out[0] == 5.0f && out[1] == 0.5f);
    ASSERT_EQ(rlx_pool_rows(RLX_POOL_NONE, rows, 3, 2, out), RLX_EINVAL);
    ASSERT_EQ(rlx_pool_rows(RLX_POOL_RANK, rows, 3, 2, out), RLX_EINVAL);
    ASSERT_EQ(rlx_pool_rows(RLX_POOL_MEAN, rows, 0, 2, out), RLX_EINVAL);
}

TEST(norms)
{
    const float v[4] = {3.0f, -4.0f, 0.0f, 0.0f};
    float o[4];
    ASSERT_EQ(rlx_embd_normalize(v, o, 4, 2), 0);
    ASSERT_NEAR(o[0], 0.6, 1e-7);
    ASSERT_NEAR(o[1], -0.8, 1e-7);
    ASSERT_EQ(rlx_embd_normalize(v, o, 4, 1), 0); /* taxicab: |3| + |-4| */
    ASSERT_NEAR(o[0], 3.0 / 7.0, 1e-7);
    ASSERT_EQ(rlx_embd_normalize(v, o, 4, 0), 0); /* max-abs onto the int16 range */
    ASSERT_NEAR(o[1], -32760.0, 1e-2);
    ASSERT_NEAR(o[0], 24570.0, 1e-2);
    ASSERT_EQ(rlx_embd_normalize(v, o, 4, 3), 0); /* p = 3: (27 + 64)^(1/3) */
    ASSERT_NEAR(o[0], 3.0 / cbrt(91.0), 1e-6);
    ASSERT_EQ(rlx_embd_normalize(v, o, 4, -1), 0);
    ASSERT(o[0] == 3.0f && o[1] == -4.0f);
    const float z[3] = {0};
    ASSERT_EQ(rlx_embd_normalize(z, o, 3, 2), 0); /* a zero vector stays zero, no NaN */
    ASSERT(o[0] == 0.0f && o[2] == 0.0f);
    ASSERT_EQ(rlx_embd_normalize(v, o, 4, -2), RLX_EINVAL);
    float inplace[2] = {0.0f, 2.0f};
    ASSERT_EQ(rlx_embd_normalize(inplace, inplace, 2, 2), 0);
    ASSERT(inplace[1] == 1.0f);
    /* a large p overflowed |x|^p (values over 1) or underflowed it (values under 1) to a zero
       vector; the p-norm tends to the largest |x| */
    const float big[3] = {3.0f, -4.0f, 1.0f}, small[3] = {0.03f, -0.04f, 0.01f};
    for (int p = 800; p <= 1000; p += 200) {
        ASSERT_EQ(rlx_embd_normalize(big, o, 3, p), 0);
        ASSERT_NEAR(o[1], -1.0, 1e-6);
        ASSERT_NEAR(o[0], 0.75, 1e-6);
        ASSERT_EQ(rlx_embd_normalize(small, o, 3, p), 0);
        ASSERT_NEAR(o[1], -1.0, 1e-6);
        ASSERT_NEAR(o[2], 0.25, 1e-6);
    }
    ASSERT_EQ(rlx_embd_normalize(z, o, 3, 1000), 0);
    ASSERT(o[0] == 0.0f && o[2] == 0.0f);
}

static float *floats(const cJSON *a, int *n)
{
    *n = cJSON_GetArraySize(a);
    float *v = calloc((size_t)(*n ? *n : 1), sizeof *v);
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) v[i++] = (float)x->valuedouble;
    return v;
}

static void golden(const char *file)
{
    const char *path = rlx_test_shared(file);
    if (!path) SKIP("%s not found", file);
    size_t len = 0;
    char *txt = rlx_read_file(path, &len);
    cJSON *root = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    ASSERT(root);
    const char *pool = cJSON_GetObjectItem(root, "pooling")->valuestring;
    rlx_pooling p;
    ASSERT_EQ(rlx_pooling_parse(pool, &p, NULL), 0);
    int n_embd = cJSON_GetObjectItem(root, "n_embd")->valueint, checked_rows = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        int ne, nl;
        float *e = floats(cJSON_GetObjectItem(c, "embedding"), &ne);
        float *l2 = floats(cJSON_GetObjectItem(c, "embedding_l2"), &nl);
        ASSERT_EQ(ne, n_embd);
        ASSERT_EQ(nl, n_embd);
        float *o = malloc((size_t)n_embd * sizeof *o);
        ASSERT_EQ(rlx_embd_normalize(e, o, n_embd, 2), 0);
        for (int i = 0; i < n_embd; i++) ASSERT_MSG(o[i] == l2[i], "%s: l2[%d] %.9g != %.9g", file, i, o[i], l2[i]);
        const cJSON *te = cJSON_GetObjectItem(c, "token_embeddings");
        if (te) {
            int n_tok = cJSON_GetArraySize(te), k = 0;
            float *rows = malloc((size_t)n_tok * (size_t)n_embd * sizeof *rows);
            const cJSON *row;
            cJSON_ArrayForEach(row, te) {
                int nr;
                float *r = floats(row, &nr);
                memcpy(rows + (size_t)k++ * (size_t)n_embd, r, (size_t)n_embd * sizeof *r);
                free(r);
            }
            ASSERT_EQ(rlx_pool_rows(p, rows, n_tok, n_embd, o), 0);
            float mx = 1.0f;
            for (int i = 0; i < n_embd; i++) mx = fmaxf(mx, fabsf(e[i]));
            for (int i = 0; i < n_embd; i++)
                ASSERT_MSG(fabsf(o[i] - e[i]) <= 1e-3f * mx, "%s: pooled[%d] %.9g vs %.9g", file, i, o[i], e[i]);
            free(rows);
            checked_rows++;
        }
        free(o);
        free(e);
        free(l2);
    }
    cJSON_Delete(root);
    if (!strcmp(file, "golden/embgolden-synth-bert-tiny-f32.json")) ASSERT(checked_rows > 0); /* the file with rows */
}

TEST(golden_bert_mean) { golden("golden/embgolden-synth-bert-tiny-f32.json"); }
TEST(golden_bert_cls) { golden("golden/embgolden-synth-bert-cls-tiny-f32.json"); }
TEST(golden_nomic_bert) { golden("golden/embgolden-synth-nomic-bert-tiny-f32.json"); }

TEST_MAIN(TEST_ENTRY(names_and_gguf_values), TEST_ENTRY(pool_rows), TEST_ENTRY(norms), TEST_ENTRY(golden_bert_mean),
          TEST_ENTRY(golden_bert_cls), TEST_ENTRY(golden_nomic_bert))
