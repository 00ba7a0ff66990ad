/* test_proto_embed.c - proto/embed.c: the bodies of /v1/embeddings, /embedding and /v1/rerank
 * (every input shape, the options, each refusal naming its parameter), base64 (RFC 4648
 * vectors), floats printed so that they read back as exactly the float32 values, and the three
 * response shapes (OpenAI list, native per-token arrays, rerank ordering and top_n) plus the
 * stdio line. */
#include "tests/rlx_test.h"
#include "proto/proto.h"

static int parse(rlx_api_request *r, rlx_api_kind k, const char *body, rlx_api_error *e)
{
    return rlx_api_parse(r, k, body, strlen(body), 0, e);
}

TEST(input_shapes)
{
    rlx_api_request r;
    rlx_api_error e;
    ASSERT_EQ(parse(&r, RLX_API_EMBEDDINGS, "{\"input\":\"hello\",\"model\":\"m\"}", &e), 0);
    ASSERT_EQ(r.n_prompts, 1);
    ASSERT_STR_EQ(r.prompts[0].text, "hello");
    ASSERT_STR_EQ(r.model, "m");
    ASSERT(!r.embed.base64);
    ASSERT_EQ(r.base->embd_normalize, 2);
    rlx_api_request_free(&r);
    ASSERT_EQ(parse(&r, RLX_API_EMBEDDINGS, "{\"input\":[\"a\",\"b\",\"c\"],\"encoding_format\":\"base64\"}", &e), 0);
    ASSERT_EQ(r.n_prompts, 3);
    ASSERT_STR_EQ(r.prompts[2].text, "c");
    ASSERT(r.embed.base64);
    rlx_api_request_free(&r);
    ASSERT_EQ(parse(&r, RLX_API_EMBEDDINGS, "{\"input\":[5,6,7]}", &e), 0);
    ASSERT_EQ(r.n_prompts, 1);
    ASSERT_EQ(r.prompts[0].n_ids, 3);
    ASSERT_EQ(r.prompts[0].ids[2], 7);
    rlx_api_request_free(&r);
    ASSERT_EQ(parse(&r, RLX_API_EMBEDDINGS, "{\"input\":[[1,2],[3],\"x\"],\"truncate\":true,\"embd_normalize\":-1}", &e), 0);
    ASSERT_EQ(r.n_prompts, 3);
    ASSERT_EQ(r.prompts[0].n_ids, 2);
    ASSERT_EQ(r.prompts[1].ids[0], 3);
    ASSERT_STR_EQ(r.prompts[2].text, "x");
    ASSERT(r.base->truncate);
    ASSERT_EQ(r.base->embd_normalize, -1);
    rlx_api_request_free(&r);
    /* native: content (or input) */
    ASSERT_EQ(parse(&r, RLX_API_EMBEDDING, "{\"content\":\"hi\"}", &e), 0);
    ASSERT_STR_EQ(r.prompts[0].text, "hi");
    rlx_api_request_free(&r);
    ASSERT_EQ(parse(&r, RLX_API_EMBEDDING, "{\"input\":[\"hi\",\"yo\"]}", &e), 0);
    ASSERT_EQ(r.n_prompts, 2);
    rlx_api_request_free(&r);
    /* dimensions is parsed here and refused by the server for models without Matryoshka */
    ASSERT_EQ(parse(&r, RLX_API_EMBEDDINGS, "{\"input\":\"x\",\"dimensions\":8,\"user\":\"u\"}", &e), 0);
    ASSERT_EQ(r.embed.dimensions, 8);
    rlx_api_request_free(&r);
}

static void refused(rlx_api_kind k, const char *body, const char *param, const char *needle)
{
    rlx_api_request r;
    rlx_api_error e;
    int rc = parse(&r, k, body, &e);
    rlx_api_request_free(&r);
    ASSERT_MSG(rc != 0, "accepted: %s", body);
    ASSERT_EQ(e.status, 400);
    ASSERT_STR_EQ(e.param, param);
    ASSERT_MSG(strstr(e.message, needle), "%s: message \"%s\" lacks \"%s\"", body, e.message, needle);
}

TEST(refusals)
{
    refused(RLX_API_EMBEDDINGS, "{}", "input", "required");
    refused(RLX_API_EMBEDDINGS, "{\"input\":\"\"}", "input", "empty");
    refused(RLX_API_EMBEDDINGS, "{\"input\":[]}", "input", "empty");
    refused(RLX_API_EMBEDDINGS, "{\"input\":[\"a\",\"\"]}", "input", "input[1]");
    refused(RLX_API_EMBEDDINGS, "{\"input\":[[1],[]]}", "input", "input[1]");
    refused(RLX_API_EMBEDDINGS, "{\"input\":[1,-2]}", "input", "token ids");
    refused(RLX_API_EMBEDDINGS, "{\"input\":[1.5]}", "input", "token ids");
    /* an integer id past any vocabulary is said to be one (it was "must hold integer token ids") */
    refused(RLX_API_EMBEDDINGS, "{\"input\":[99999999999]}", "input", "token id 99999999999, outside the vocabulary");
    refused(RLX_API_EMBEDDINGS, "{\"input\":{\"a\":1}}", "input", "must be a string");
    refused(RLX_API_EMBEDDINGS, "{\"input\":[\"a\",3]}", "input", "input[1]");
    refused(RLX_API_EMBEDDINGS, "{\"input\":\"a\",\"encoding_format\":\"int8\"}", "encoding_format", "base64");
    refused(RLX_API_EMBEDDINGS, "{\"input\":\"a\",\"dimensions\":0}", "dimensions", "between");
    refused(RLX_API_EMBEDDINGS, "{\"input\":\"a\",\"embd_normalize\":-2}", "embd_normalize", "between");
    refused(RLX_API_EMBEDDINGS, "{\"input\":\"a\",\"truncate\":1}", "truncate", "boolean");
    refused(RLX_API_EMBEDDINGS, "{\"input\":\"a\",\"model\":3}", "model", "string");
    refused(RLX_API_EMBEDDING, "{\"content\":\"\"}", "content", "empty");
    refused(RLX_API_EMBEDDING, "{}", "content", "'content' (or 'input') is required");
    refused(RLX_API_RERANK, "{\"documents\":[\"a\"]}", "query", "query");
    refused(RLX_API_RERANK, "{\"query\":\"q\"}", "documents", "documents");
    refused(RLX_API_RERANK, "{\"query\":\"q\",\"documents\":[]}", "documents", "non-empty");
    refused(RLX_API_RERANK, "{\"query\":\"q\",\"documents\":[\"a\",1]}", "documents", "documents[1]");
    refused(RLX_API_RERANK, "{\"query\":\"q\",\"documents\":[\"a\"],\"top_n\":0}", "top_n", "between");
    /* more inputs than the limit */
    size_t cap = 8 * (RLX_API_MAX_INPUTS + 2) + 32;
    char *big = malloc(cap);
    size_t n = (size_t)snprintf(big, cap, "{\"input\":[");
    for (int i = 0; i <= RLX_API_MAX_INPUTS; i++) n += (size_t)snprintf(big + n, cap - n, "%s\"a\"", i ? "," : "");
    snprintf(big + n, cap - n, "]}");
    refused(RLX_API_EMBEDDINGS, big, "input", "at most");
    free(big);
}

TEST(rerank_body)
{
    rlx_api_request r;
    rlx_api_error e;
    ASSERT_EQ(parse(&r, RLX_API_RERANK, "{\"query\":\"q?\",\"documents\":[\"a\",\"b\"],\"top_n\":1,\"return_documents\":true}", &e), 0);
    ASSERT_STR_EQ(r.embed.query, "q?");
    ASSERT_EQ(r.n_prompts, 2);
    ASSERT_STR_EQ(r.prompts[1].text, "b");
    ASSERT_EQ(r.embed.top_n, 1);
    ASSERT(r.embed.return_documents);
    rlx_api_request_free(&r);
}

TEST(base64_rfc4648)
{
    static const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char *s = rlx_api_base64(in[i], strlen(in[i]));
        ASSERT_STR_EQ(s, out[i]);
        free(s);
    }
    float one = 1.0f; /* 0x3f800000 little-endian: 00 00 80 3f */
    char *s = rlx_api_base64(&one, 4);
    ASSERT_STR_EQ(s, "AACAPw==");
    free(s);
}

static const float vals[] = {0.1f, -1.0f / 3.0f, 1e-38f, 3.4028235e38f, 0.0f, -0.0f, 123456.789f, 1.17549435e-38f, 2.0f};
#define NV ((int)(sizeof vals / sizeof vals[0]))

TEST(float_response_is_exact)
{
    rlx_api_request r;
    rlx_api_error e;
    ASSERT_EQ(parse(&r, RLX_API_EMBEDDINGS, "{\"input\":[\"a\",\"b\"]}", &e), 0);
    float v[2 * NV];
    for (int i = 0; i < NV; i++) v[i] = vals[i], v[NV + i] = -vals[i] * 0.5f;
    int32_t toks[2] = {3, 4};
    rlx_api_embd_result res = {.v = v, .n = 2 * NV, .dim = NV, .tokens = toks, .n_inputs = 2};
    rlx_usage u = {.prompt_tokens = 7};
    char *s = rlx_api_embed_response(&r, "emb", &res, &u);
    ASSERT(s);
    cJSON *o = cJSON_Parse(s);
    free(s);
    ASSERT(o);
    ASSERT_STR_EQ(cJSON_GetObjectItem(o, "object")->valuestring, "list");
    ASSERT_STR_EQ(cJSON_GetObjectItem(o, "model")->valuestring, "emb");
    cJSON *usage = cJSON_GetObjectItem(o, "usage");
    ASSERT_EQ(cJSON_GetObjectItem(usage, "prompt_tokens")->valueint, 7);
    ASSERT_EQ(cJSON_GetObjectItem(usage, "total_tokens")->valueint, 7);
    cJSON *data = cJSON_GetObjectItem(o, "data");
    ASSERT_EQ(cJSON_GetArraySize(data), 2);
    for (int d = 0; d < 2; d++) {
        cJSON *it = cJSON_GetArrayItem(data, d);
        ASSERT_EQ(cJSON_GetObjectItem(it, "index")->valueint, d);
        ASSERT_STR_EQ(cJSON_GetObjectItem(it, "object")->valuestring, "embedding");
        cJSON *emb = cJSON_GetObjectItem(it, "embedding");
        ASSERT_EQ(cJSON_GetArraySize(emb), NV);
        for (int i = 0; i < NV; i++) {
            double x = cJSON_GetArrayItem(emb, i)->valuedouble;
            ASSERT_MSG(x == (double)v[d * NV + i], "value %d of %d: %.17g != %.17g", i, d, x, (double)v[d * NV + i]);
        }
    }
    cJSON_Delete(o);
    /* base64: the same bytes */
    r.embed.base64 = true;
    s = rlx_api_embed_response(&r, "emb", &res, &u);
    o = cJSON_Parse(s);
    free(s);
    char *want = rlx_api_base64(v + NV, NV * sizeof(float));
    ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "data"), 1), "embedding")->valuestring, want);
    free(want);
    cJSON_Delete(o);
    /* a result that does not match the request is refused (NULL), never half-written */
    res.n_inputs = 1;
    ASSERT(!rlx_api_embed_response(&r, "emb", &res, &u));
    rlx_api_request_free(&r);
}

TEST(native_per_token_and_line)
{
    rlx_api_request r;
    rlx_api_error e;
    ASSERT_EQ(parse(&r, RLX_API_EMBEDDING, "{\"content\":[\"a\",\"b\"]}", &e), 0);
    float v[10];
    for (int i = 0; i < 10; i++) v[i] = (float)i;
    int32_t toks[2] = {3, 2}; /* 3 tokens x 2 values, then 2 tokens x 2 values */
    rlx_api_embd_result res = {.v = v, .n = 10, .dim = 2, .tokens = toks, .n_inputs = 2, .per_token = true};
    rlx_usage u = {.prompt_tokens = 5};
    char *s = rlx_api_embed_response(&r, "emb", &res, &u);
    ASSERT_STR_EQ(s, "[{\"index\":0,\"embedding\":[[0,1],[2,3],[4,5]]},{\"index\":1,\"embedding\":[[6,7],[8,9]]}]");
    free(s);
    char *line = rlx_api_line_embed("\"x\"", &r, "emb", &res, &u, 1.5);
    ASSERT(line && line[strlen(line) - 1] == '\n');
    cJSON *o = cJSON_Parse(line);
    free(line);
    ASSERT_STR_EQ(cJSON_GetObjectItem(o, "id")->valuestring, "x");
    ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(o, "ok")));
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(o, "data")), 2);
    cJSON_Delete(o);
    rlx_api_request_free(&r);
    /* the OpenAI kind's stdio line carries the response's fields */
    ASSERT_EQ(parse(&r, RLX_API_EMBEDDINGS, "{\"input\":\"a\"}", &e), 0);
    res = (rlx_api_embd_result){.v = v, .n = 2, .dim = 2, .tokens = toks, .n_inputs = 1};
    line = rlx_api_line_embed("7", &r, "emb", &res, &u, 1.5);
    o = cJSON_Parse(line);
    free(line);
    ASSERT_EQ(cJSON_GetObjectItem(o, "id")->valueint, 7);
    ASSERT(cJSON_GetObjectItem(o, "data") && cJSON_GetObjectItem(o, "usage") && cJSON_GetObjectItem(o, "elapsed_ms"));
    cJSON_Delete(o);
    rlx_api_request_free(&r);
}

TEST(rerank_response_order_and_top_n)
{
    rlx_api_request r;
    rlx_api_error e;
    ASSERT_EQ(parse(&r, RLX_API_RERANK, "{\"query\":\"q\",\"documents\":[\"a\",\"b\",\"c\",\"d\"],\"top_n\":3,"
                                         "\"return_documents\":true}", &e), 0);
    float v[4] = {0.5f, 2.0f, -1.0f, 2.0f};
    int32_t toks[4] = {3, 3, 3, 3};
    rlx_api_embd_result res = {.v = v, .n = 4, .dim = 1, .tokens = toks, .n_inputs = 4};
    rlx_usage u = {.prompt_tokens = 12};
    char *s = rlx_api_embed_response(&r, "rr", &res, &u);
    cJSON *o = cJSON_Parse(s);
    free(s);
    cJSON *results = cJSON_GetObjectItem(o, "results");
    ASSERT_EQ(cJSON_GetArraySize(results), 3);
    int want[3] = {1, 3, 0}; /* by score, ties in input order */
    for (int k = 0; k < 3; k++) {
        cJSON *it = cJSON_GetArrayItem(results, k);
        int idx = cJSON_GetObjectItem(it, "index")->valueint;
        ASSERT_EQ(idx, want[k]);
        ASSERT_NEAR(cJSON_GetObjectItem(it, "relevance_score")->valuedouble, v[idx], 0);
        ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(it, "document"), "text")->valuestring, r.prompts[idx].text);
    }
    cJSON_Delete(o);
    rlx_api_request_free(&r);
}

/* rlx_api_f32_text(f) against printf's "%.17g" of (double)f, and the length it returns */
static int f32_text_matches(float f)
{
    char got[32], want[40];
    size_t n = rlx_api_f32_text(f, got);
    snprintf(want, sizeof want, "%.17g", (double)f);
    if (n == strlen(got) && !strcmp(got, want)) return 1;
    uint32_t b;
    memcpy(&b, &f, 4);
    fprintf(stderr, "  0x%08x: \"%s\" (length %zu), printf \"%s\"\n", (unsigned)b, got, n, want);
    return 0;
}

static float from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

TEST(f32_text_is_printf_17g)
{
    char s[32];
    /* exact ties at the 18th digit round half to even: 2^-25 = 2.98023223876953125e-08 exactly,
     * 3 x 2^-25 = 8.94069671630859375e-08 */
    ASSERT_STR_EQ((rlx_api_f32_text(0x1p-25f, s), s), "2.9802322387695312e-08");
    ASSERT_STR_EQ((rlx_api_f32_text(0x3p-25f, s), s), "8.9406967163085938e-08");
    ASSERT_STR_EQ((rlx_api_f32_text(0.1f, s), s), "0.10000000149011612");
    ASSERT_STR_EQ((rlx_api_f32_text(-0.0f, s), s), "-0");
    ASSERT_STR_EQ((rlx_api_f32_text(0.5f, s), s), "0.5");
    ASSERT_STR_EQ((rlx_api_f32_text(100.0f, s), s), "100");
    ASSERT_STR_EQ((rlx_api_f32_text(-0.0001f, s), s), "-9.9999997473787516e-05");
    ASSERT_STR_EQ((rlx_api_f32_text(16777215.0f, s), s), "16777215");
    int bad = 0;
    /* every exponent with edge and scattered mantissas, both signs */
    static const uint32_t mant[] = {0, 1, 2, 3, 0x400000, 0x7fffff, 0x7ffffe, 0x123456, 0x654321, 0x0ccccd, 0x4ccccd};
    for (uint32_t ex = 0; ex < 256 && bad < 5; ex++)
        for (size_t m = 0; m < sizeof mant / sizeof mant[0]; m++)
            for (uint32_t sg = 0; sg < 2; sg++) bad += !f32_text_matches(from_bits(sg << 31 | ex << 23 | mant[m]));
    /* around every power of ten a float reaches */
    for (int k = -45; k <= 38 && bad < 5; k++) {
        float p = (float)pow(10.0, k);
        for (int i = 0; i < 8; i++) p = nextafterf(p, 0.0f);
        for (int i = 0; i < 16; i++, p = nextafterf(p, INFINITY)) bad += !f32_text_matches(p);
    }
    /* random bit patterns, and random values of an embedding's range */
    uint32_t x = 12345;
    for (int i = 0; i < 200000 && bad < 5; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        bad += !f32_text_matches(from_bits(x));
        bad += !f32_text_matches((float)((double)(x >> 8) / 16777216.0 - 0.5) * 0.25f);
    }
    ASSERT_EQ(bad, 0);
}

TEST_MAIN(TEST_ENTRY(input_shapes), TEST_ENTRY(refusals), TEST_ENTRY(rerank_body), TEST_ENTRY(base64_rfc4648),
          TEST_ENTRY(float_response_is_exact), TEST_ENTRY(native_per_token_and_line),
          TEST_ENTRY(rerank_response_order_and_top_n), TEST_ENTRY(f32_text_is_printf_17g))
