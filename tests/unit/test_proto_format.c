/* test_proto_format.c - responses, SSE chunks, ndjson and error objects (proto/format.c). */
#include "tests/rlx_test.h"
#include "proto/proto.h"

static cJSON *parse_sse(const char *s)
{
    if (strncmp(s, "data: ", 6)) return NULL;
    size_t n = strlen(s);
    if (n < 8 || strcmp(s + n - 2, "\n\n")) return NULL;
    return cJSON_ParseWithLength(s + 6, n - 8);
}

TEST(error_object_shape)
{
    rlx_api_error e;
    rlx_api_errorf(&e, 400, "invalid_request_error", "top_p", "'top_p' must be between 0 and 1.");
    char *s = rlx_api_error_json(&e);
    ASSERT_STR_EQ(s, "{\"error\":{\"message\":\"'top_p' must be between 0 and 1.\",\"type\":"
                     "\"invalid_request_error\",\"param\":\"top_p\",\"code\":null}}");
    free(s);
    rlx_api_error_from_rlx(&e, RLX_EFULL, "queue full");
    ASSERT_EQ(e.status, 503);
    rlx_api_error_from_rlx(&e, RLX_ETOOLONG, "too long");
    ASSERT_EQ(e.status, 400);
    ASSERT(strstr(e.message, "cannot fit") != NULL);
    ASSERT_EQ(rlx_api_error_shutdown(&e), RLX_EFULL);
    ASSERT_EQ(e.status, 503);
    ASSERT_STR_EQ(e.type, "unavailable_error");
    ASSERT_STR_EQ(e.message, "The server is shutting down.");
    char *sse = rlx_api_sse_error(&e);
    cJSON *j = parse_sse(sse);
    ASSERT(j && cJSON_GetObjectItem(j, "error"));
    cJSON_Delete(j);
    free(sse);
}

/* Regression: meta_init left fingerprint and include_usage as the stack held them; an AVX2 host's
 * libc left garbage there and header() handed it to cJSON (segfault). Every field is set. */
TEST(meta_init_sets_every_field)
{
    rlx_api_meta m;
    memset(&m, 0xA5, sizeof m);
    rlx_api_meta_init(&m, RLX_API_COMPLETIONS, "tiny", 3, 4);
    ASSERT(m.fingerprint == NULL);
    ASSERT(!m.include_usage);
    ASSERT_EQ(m.kind, RLX_API_COMPLETIONS);
    char *s = rlx_api_sse_chunk(&m, 0, "x", 1, false, NULL, 0, RLX_FINISH_NONE);
    ASSERT(s && !strstr(s, "system_fingerprint") && !strstr(s, "\"usage\""));
    free(s);
}

TEST(chat_response)
{
    rlx_api_meta m;
    rlx_api_meta_init(&m, RLX_API_CHAT, "tiny", 7, 1700000000);
    ASSERT(!strncmp(m.id, "chatcmpl-", 9));
    rlx_api_choice c = {.index = 0, .text = "Hi \"there\"", .text_len = 10, .finish = RLX_FINISH_LENGTH};
    rlx_usage u = {.prompt_tokens = 5, .completion_tokens = 3};
    char *s = rlx_api_response_json(&m, &c, 1, &u, NULL);
    cJSON *j = cJSON_Parse(s);
    ASSERT(j != NULL);
    ASSERT_STR_EQ(cJSON_GetObjectItem(j, "object")->valuestring, "chat.completion");
    ASSERT_STR_EQ(cJSON_GetObjectItem(j, "model")->valuestring, "tiny");
    ASSERT_EQ(cJSON_GetObjectItem(j, "created")->valuedouble, 1700000000);
    cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "message"), "content")->valuestring, "Hi \"there\"");
    ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "message"), "role")->valuestring, "assistant");
    ASSERT_STR_EQ(cJSON_GetObjectItem(ch, "finish_reason")->valuestring, "length");
    ASSERT(cJSON_IsNull(cJSON_GetObjectItem(ch, "logprobs")));
    ASSERT_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "total_tokens")->valueint, 8);
    cJSON_Delete(j);
    free(s);
}

TEST(completion_logprobs)
{
    rlx_api_meta m;
    rlx_api_meta_init(&m, RLX_API_COMPLETIONS, "tiny", 1, 1);
    rlx_api_logprob lp[2] = {0};
    lp[0].text = strdup("He");
    lp[0].text_len = 2;
    lp[0].logprob = -0.5f;
    lp[0].n_top = 1;
    lp[0].top_text[0] = strdup("He");
    lp[0].top_len[0] = 2;
    lp[0].top_logprob[0] = -0.5f;
    lp[1].text = strdup("llo");
    lp[1].text_len = 3;
    lp[1].logprob = -1.0f;
    lp[1].text_offset = 2;
    rlx_api_choice c = {.index = 0, .text = "Hello", .text_len = 5, .logprobs = lp, .n_logprobs = 2,
                        .finish = RLX_FINISH_STOP};
    rlx_usage u = {1, 2, 0};
    char *s = rlx_api_response_json(&m, &c, 1, &u, NULL);
    cJSON *j = cJSON_Parse(s);
    cJSON *l = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "logprobs");
    ASSERT_STR_EQ(cJSON_GetArrayItem(cJSON_GetObjectItem(l, "tokens"), 1)->valuestring, "llo");
    ASSERT_NEAR(cJSON_GetArrayItem(cJSON_GetObjectItem(l, "token_logprobs"), 0)->valuedouble, -0.5, 1e-6);
    ASSERT_EQ(cJSON_GetArrayItem(cJSON_GetObjectItem(l, "text_offset"), 1)->valueint, 2);
    ASSERT_NEAR(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(l, "top_logprobs"), 0), "He")->valuedouble,
                -0.5, 1e-6);
    cJSON_Delete(j);
    free(s);
    /* chat format of the same data */
    m.kind = RLX_API_CHAT;
    s = rlx_api_sse_chunk(&m, 0, "He", 2, false, lp, 1, RLX_FINISH_NONE);
    j = parse_sse(s);
    ASSERT(j != NULL);
    cJSON *e0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(
        cJSON_GetObjectItem(j, "choices"), 0), "logprobs"), "content"), 0);
    ASSERT_STR_EQ(cJSON_GetObjectItem(e0, "token")->valuestring, "He");
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(e0, "bytes")), 2);
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(e0, "top_logprobs")), 1);
    cJSON_Delete(j);
    free(s);
    rlx_api_logprob_clear(&lp[0]);
    rlx_api_logprob_clear(&lp[1]);
}

TEST(chat_stream_chunks)
{
    rlx_api_meta m;
    rlx_api_meta_init(&m, RLX_API_CHAT, "tiny", 2, 5);
    char *a = rlx_api_sse_chunk(&m, 0, "", 0, true, NULL, 0, RLX_FINISH_NONE);
    char *b = rlx_api_sse_chunk(&m, 0, "lo", 2, false, NULL, 0, RLX_FINISH_STOP);
    char *u = rlx_api_sse_usage(&m, &(rlx_usage){3, 4, 1});
    cJSON *ja = parse_sse(a), *jb = parse_sse(b), *ju = parse_sse(u);
    ASSERT(ja && jb && ju);
    ASSERT_STR_EQ(cJSON_GetObjectItem(ja, "id")->valuestring, cJSON_GetObjectItem(jb, "id")->valuestring);
    ASSERT_STR_EQ(cJSON_GetObjectItem(ja, "object")->valuestring, "chat.completion.chunk");
    cJSON *da = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ja, "choices"), 0), "delta");
    ASSERT_STR_EQ(cJSON_GetObjectItem(da, "role")->valuestring, "assistant");
    cJSON *cb = cJSON_GetArrayItem(cJSON_GetObjectItem(jb, "choices"), 0);
    ASSERT(cJSON_GetObjectItem(cJSON_GetObjectItem(cb, "delta"), "role") == NULL);
    ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(cb, "delta"), "content")->valuestring, "lo");
    ASSERT_STR_EQ(cJSON_GetObjectItem(cb, "finish_reason")->valuestring, "stop");
    ASSERT(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ja, "choices"), 0), "finish_reason")));
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(ju, "choices")), 0);
    ASSERT_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(ju, "usage"), "completion_tokens")->valueint, 4);
    ASSERT_STR_EQ(rlx_api_sse_done, "data: [DONE]\n\n");
    ASSERT(strstr(a, "event:") == NULL);
    cJSON_Delete(ja); cJSON_Delete(jb); cJSON_Delete(ju);
    free(a); free(b); free(u);
}

/* A chat message carries refusal: null as OpenAI's does (the openai client's type requires it) */
TEST(chat_message_refusal_null)
{
    rlx_api_meta m;
    rlx_api_meta_init(&m, RLX_API_CHAT, "tiny", 3, 9);
    rlx_api_choice c = {.text = "hi", .text_len = 2, .finish = RLX_FINISH_STOP};
    rlx_usage u = {1, 1, 0};
    char *s = rlx_api_response_json(&m, &c, 1, &u, NULL);
    cJSON *j = cJSON_Parse(s);
    cJSON *msg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "message");
    ASSERT(msg && cJSON_IsNull(cJSON_GetObjectItem(msg, "refusal")));
    ASSERT_STR_EQ(cJSON_GetObjectItem(msg, "content")->valuestring, "hi");
    cJSON_Delete(j);
    free(s);
}

TEST(native_generate)
{
    rlx_api_meta m;
    rlx_api_meta_init(&m, RLX_API_GENERATE, "tiny", 3, 9);
    int32_t ids[] = {10, 11};
    rlx_api_choice c = {.text = "ab", .text_len = 2, .tokens = ids, .n_tokens = 2, .finish = RLX_FINISH_LENGTH};
    rlx_usage u = {4, 2, 0};
    rlx_timings t = {.ttft_s = 0.01, .total_s = 0.02, .gen_s = 0.01};
    char *s = rlx_api_response_json(&m, &c, 1, &u, &t);
    cJSON *j = cJSON_Parse(s);
    ASSERT_STR_EQ(cJSON_GetObjectItem(j, "text")->valuestring, "ab");
    ASSERT_EQ(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "token_ids"), 1)->valueint, 11);
    ASSERT_STR_EQ(cJSON_GetObjectItem(j, "finish_reason")->valuestring, "length");
    ASSERT(cJSON_GetObjectItem(j, "usage") && cJSON_GetObjectItem(j, "timings"));
    cJSON_Delete(j);
    free(s);
    s = rlx_api_ndjson_token(10, "a\n", 2);
    ASSERT_STR_EQ(s, "{\"token\":10,\"text\":\"a\\n\"}\n");
    free(s);
}

/* A model can emit the byte-0 token: the text after it was lost (cJSON strings end at NUL) and
 * its logprob entry had no bytes; now written as \u0000 everywhere. */
TEST(nul_bytes_in_generated_text)
{
    rlx_api_meta m;
    rlx_api_meta_init(&m, RLX_API_GENERATE, "tiny", 3, 9);
    int32_t ids[] = {64, 188, 65, 188};
    rlx_api_choice c = {.text = "a\0\"b\0", .text_len = 5, .tokens = ids, .n_tokens = 4, .finish = RLX_FINISH_STOP};
    rlx_usage u = {1, 4, 0};
    char *s = rlx_api_response_json(&m, &c, 1, &u, NULL);
    ASSERT(strstr(s, "\"text\":\"a\\u0000\\\"b\\u0000\"") != NULL);
    cJSON *j = cJSON_Parse(s);
    ASSERT(j != NULL);
    cJSON_Delete(j);
    free(s);
    s = rlx_api_ndjson_token(188, "\0", 1);
    ASSERT_STR_EQ(s, "{\"token\":188,\"text\":\"\\u0000\"}\n");
    free(s);
    s = rlx_api_ndjson_token(9, "\0\0x\n", 4);
    ASSERT_STR_EQ(s, "{\"token\":9,\"text\":\"\\u0000\\u0000x\\n\"}\n");
    free(s);
    /* chat logprobs: the token's text and its bytes */
    m.kind = RLX_API_CHAT;
    rlx_api_logprob lp = {.text = (char *)"\0", .text_len = 1, .logprob = -1.0f, .n_top = 1,
                          .top_text = {(char *)"\0"}, .top_len = {1}, .top_logprob = {-1.0f}};
    s = rlx_api_sse_chunk(&m, 0, "\0", 1, false, &lp, 1, RLX_FINISH_NONE);
    j = parse_sse(s);
    ASSERT(j != NULL);
    cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    ASSERT(strstr(s, "\"content\":\"\\u0000\"") != NULL);
    cJSON *e0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "logprobs"), "content"), 0);
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(e0, "bytes")), 1);
    ASSERT_EQ(cJSON_GetArrayItem(cJSON_GetObjectItem(e0, "bytes"), 0)->valueint, 0);
    cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(e0, "top_logprobs"), 0);
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(t0, "bytes")), 1);
    cJSON_Delete(j);
    free(s);
}

/* text offsets count characters (code points), a sequence cut at the end as begun */
TEST(utf8_chars)
{
    ASSERT_EQ(rlx_api_utf8_chars("h\xc3\xa9llo \xe6\x97\xa5\xf0\x9f\x98\x80", 13), 8);
    ASSERT_EQ(rlx_api_utf8_chars("a\xe6\x97", 3), 2);
    ASSERT_EQ(rlx_api_utf8_chars("", 0), 0);
}

/* Ill-formed UTF-8 becomes one U+FFFD per maximal subpart (Unicode's recommended practice, as
 * WHATWG, Python's "replace" and llama-server): a truncated F0 9F 99 is one, not three; a byte
 * that cannot continue its lead starts anew. Expected strings from Python's bytes.decode. */
TEST(utf8_sanitize_maximal_subparts)
{
    static const struct { const char *in; size_t n; const char *want; } cases[] = {
        {"\xf0\x9f", 2, "\xef\xbf\xbd"},
        {"\xf0\x9f\x99", 3, "\xef\xbf\xbd"},
        {"\xe0\xa0", 2, "\xef\xbf\xbd"},
        {"a\xf0\x9f\x99" "b", 5, "a\xef\xbf\xbd" "b"},
        {"\x80\x80", 2, "\xef\xbf\xbd\xef\xbf\xbd"},                 /* lone continuations: one each */
        {"\xe0\x80\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* overlong: E0 needs A0..BF */
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* a surrogate */
        {"\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* past U+10FFFF */
        {"\xc3", 1, "\xef\xbf\xbd"},
        {"\xc3(", 2, "\xef\xbf\xbd("},
        {"\xf0\x9f\x98\x80\xff", 5, "\xf0\x9f\x98\x80\xef\xbf\xbd"},
        {"\xe2\x82\xe2\x82\xac", 5, "\xef\xbf\xbd\xe2\x82\xac"},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(cases); i++) {
        size_t len = 0;
        char *out = rlx_api_utf8_sanitize(cases[i].in, cases[i].n, &len);
        ASSERT(out);
        ASSERT_MSG(len == strlen(cases[i].want) && !memcmp(out, cases[i].want, len), "case %zu: %zu bytes", i, len);
        free(out);
    }
}

TEST_MAIN(TEST_ENTRY(chat_message_refusal_null), TEST_ENTRY(error_object_shape), TEST_ENTRY(meta_init_sets_every_field), TEST_ENTRY(chat_response), TEST_ENTRY(completion_logprobs),
          TEST_ENTRY(chat_stream_chunks), TEST_ENTRY(native_generate),
          TEST_ENTRY(nul_bytes_in_generated_text), TEST_ENTRY(utf8_chars), TEST_ENTRY(utf8_sanitize_maximal_subparts))
