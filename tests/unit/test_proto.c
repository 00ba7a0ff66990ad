/* test_proto.c - request parsing and validation (proto/parse.c, proto/build.c). */
#include "tests/rlx_test.h"
#include "proto/proto.h"

static int parse(rlx_api_request *r, rlx_api_kind k, const char *body, rlx_api_error *e)
{
    return rlx_api_parse(r, k, body, strlen(body), 1000, e);
}

/* Expects a 400 naming `param`. */
#define EXPECT_BAD(kind, body, param_) do { rlx_api_request r_; rlx_api_error e_ = {0}; \
    int rc_ = parse(&r_, kind, body, &e_); rlx_api_request_free(&r_); \
    ASSERT_MSG(rc_ < 0, "accepted bad body %s", body); ASSERT_EQ(e_.status, 400); \
    ASSERT_STR_EQ(e_.param, param_); ASSERT_STR_EQ(e_.type, "invalid_request_error"); } while (0)

TEST(completions_defaults)
{
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT_EQ(parse(&r, RLX_API_COMPLETIONS, "{\"prompt\":\"hi\",\"unknown_field\":[1,2]}", &e), 0);
    ASSERT_EQ(r.n_prompts, 1);
    ASSERT_STR_EQ(r.prompts[0].text, "hi");
    ASSERT_EQ(r.n, 1);
    ASSERT_EQ(r.logprobs, -1);
    ASSERT_EQ(r.base->max_tokens, 16);
    ASSERT(!r.stream);
    ASSERT(r.model == NULL);
    rlx_api_request_free(&r);
}

TEST(sampling_params_parsed)
{
    rlx_api_request r;
    rlx_api_error e = {0};
    const char *body = "{\"model\":\"m\",\"prompt\":[1,2,3],\"temperature\":0.5,\"top_p\":0.9,\"top_k\":40,"
        "\"min_p\":0.05,\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,\"repetition_penalty\":1.1,"
        "\"seed\":42,\"max_tokens\":7,\"stop\":[\"a\",\"bc\"],\"logit_bias\":{\"5\":-100,\"7\":2.5},"
        "\"n\":3,\"ignore_eos\":true,\"user\":\"u\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"logprobs\":2,\"echo\":true}";
    ASSERT_EQ(parse(&r, RLX_API_COMPLETIONS, body, &e), 0);
    ASSERT_STR_EQ(r.model, "m");
    ASSERT_EQ(r.prompts[0].n_ids, 3);
    ASSERT_EQ(r.prompts[0].ids[2], 3);
    ASSERT_NEAR(r.base->sampling.temperature, 0.5, 1e-6);
    ASSERT_NEAR(r.base->sampling.top_p, 0.9, 1e-6);
    ASSERT_EQ(r.base->sampling.top_k, 40);
    ASSERT_NEAR(r.base->sampling.min_p, 0.05, 1e-6);
    ASSERT_NEAR(r.base->sampling.presence_penalty, 0.5, 1e-6);
    ASSERT_NEAR(r.base->sampling.frequency_penalty, -0.5, 1e-6);
    ASSERT_NEAR(r.base->sampling.repetition_penalty, 1.1, 1e-6);
    ASSERT(r.base->sampling.has_seed);
    ASSERT_EQ(r.base->sampling.seed, 42);
    ASSERT_EQ(r.base->max_tokens, 7);
    ASSERT_EQ(r.base->n_stop, 2);
    ASSERT_STR_EQ(r.base->stop[1], "bc");
    ASSERT_EQ(r.base->sampling.n_logit_bias, 2);
    ASSERT_EQ(r.base->sampling.logit_bias[0].token, 5);
    ASSERT_NEAR(r.base->sampling.logit_bias[1].bias, 2.5, 1e-6);
    ASSERT_EQ(r.n, 3);
    ASSERT(r.base->ignore_eos);
    ASSERT(r.stream && r.include_usage && r.echo);
    ASSERT_EQ(r.logprobs, 2);
    ASSERT_EQ(r.base->top_logprobs, 2);

    rlx_request *q = rlx_api_make_request(&r, r.prompts[0].ids, r.prompts[0].n_ids, 99);
    ASSERT(q != NULL);
    ASSERT_EQ(q->id, 99);
    ASSERT_EQ(q->n_prompt, 3);
    ASSERT_EQ(q->n_stop, 2);
    ASSERT(q->stop[0] != r.base->stop[0]);
    ASSERT_EQ(q->sampling.n_logit_bias, 2);
    ASSERT(q->sampling.logit_bias != r.base->sampling.logit_bias);
    ASSERT_EQ(q->max_tokens, 7);
    rlx_request_free(q);
    rlx_api_request_free(&r);
    /* llama-server's spellings: repeat_penalty, and seed -1 for a random one */
    ASSERT_EQ(parse(&r, RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"repeat_penalty\":1.3,\"seed\":-1}", &e), 0);
    ASSERT_NEAR(r.base->sampling.repetition_penalty, 1.3, 1e-6);
    ASSERT(!r.base->sampling.has_seed);
    rlx_api_request_free(&r);
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"repeat_penalty\":\"high\"}", "repeat_penalty");
    /* an integer past 2^53 is out of range, not "not an integer" */
    rlx_api_error e2 = {0};
    ASSERT(parse(&r, RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"n\":9223372036854775808}", &e2) < 0);
    rlx_api_request_free(&r);
    ASSERT_STR_EQ(e2.param, "n");
    ASSERT_MSG(strstr(e2.message, "between") != NULL, "%s", e2.message);
    /* a seed is any 64-bit integer, as OpenAI takes (random.getrandbits(64)); it was a 400 past 2^53 */
    ASSERT_EQ(parse(&r, RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"seed\":18446744073709549568}", &e), 0);
    ASSERT(r.base->sampling.has_seed);
    ASSERT_EQ(r.base->sampling.seed, 18446744073709549568ULL);
    rlx_api_request_free(&r);
    ASSERT_EQ(parse(&r, RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"seed\":-9223372036854775808}", &e), 0);
    ASSERT_EQ(r.base->sampling.seed, (uint64_t)INT64_MIN);
    rlx_api_request_free(&r);
    /* read from the literal, exactly: 2^64 - 1 and 2^53 + 1 (as doubles, 2^64 - a 400 - and 2^53) */
    ASSERT_EQ(parse(&r, RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"seed\":18446744073709551615}", &e), 0);
    ASSERT_EQ(r.base->sampling.seed, UINT64_MAX);
    rlx_api_request_free(&r);
    ASSERT_EQ(parse(&r, RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"seed\":9007199254740993}", &e), 0);
    ASSERT_EQ(r.base->sampling.seed, 9007199254740993ULL);
    rlx_api_request_free(&r);
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"seed\":18446744073709551616}", "seed");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"seed\":-9223372036854775809}", "seed");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"seed\":1e300}", "seed");
}

TEST(prompt_shapes)
{
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT_EQ(parse(&r, RLX_API_COMPLETIONS, "{\"prompt\":[\"a\",\"b\"],\"n\":2}", &e), 0);
    ASSERT_EQ(r.n_prompts, 2);
    ASSERT_STR_EQ(r.prompts[1].text, "b");
    rlx_api_request_free(&r);
    ASSERT_EQ(parse(&r, RLX_API_COMPLETIONS, "{\"prompt\":[[1,2],[3]]}", &e), 0);
    ASSERT_EQ(r.n_prompts, 2);
    ASSERT_EQ(r.prompts[1].ids[0], 3);
    rlx_api_request_free(&r);
    ASSERT_EQ(parse(&r, RLX_API_GENERATE, "{\"input_ids\":[4,5],\"session_id\":\"s1\"}", &e), 0);
    ASSERT_EQ(r.prompts[0].n_ids, 2);
    ASSERT_STR_EQ(r.base->session_id, "s1");
    ASSERT_EQ(r.base->max_tokens, 0);
    rlx_api_request_free(&r);
}

TEST(stop_as_string)
{
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT_EQ(parse(&r, RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":\"\\n\"}", &e), 0);
    ASSERT_EQ(r.base->n_stop, 1);
    ASSERT_STR_EQ(r.base->stop[0], "\n");
    rlx_api_request_free(&r);
}

TEST(chat_messages_and_logprobs)
{
    rlx_api_request r;
    rlx_api_error e = {0};
    const char *body = "{\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hel\"},{\"type\":\"text\",\"text\":\"lo\"}]}],"
        "\"logprobs\":true,\"top_logprobs\":3,\"max_completion_tokens\":5}";
    ASSERT_EQ(parse(&r, RLX_API_CHAT, body, &e), 0);
    ASSERT_EQ(cJSON_GetArraySize(r.messages), 2);
    const cJSON *c = cJSON_GetObjectItem(cJSON_GetArrayItem(r.messages, 1), "content");
    ASSERT(cJSON_IsString(c));
    ASSERT_STR_EQ(c->valuestring, "hel\nlo"); /* joined with "\n", as llama.cpp and vLLM join text parts */
    ASSERT_EQ(r.logprobs, 3);
    ASSERT_EQ(r.base->max_tokens, 5);
    cJSON *ctx = rlx_api_chat_context(&r, "<s>", "</s>", true);
    ASSERT(ctx != NULL);
    ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(ctx, "add_generation_prompt")));
    ASSERT_STR_EQ(cJSON_GetObjectItem(ctx, "bos_token")->valuestring, "<s>");
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(ctx, "messages")), 2);
    cJSON_Delete(ctx);
    rlx_api_request_free(&r);
}

TEST(bad_params_name_the_parameter)
{
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"temperature\":\"hot\"}", "temperature");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"temperature\":3}", "temperature");
    { /* a number out of range says so, also one that reads as infinity (it said "must be a number") */
        rlx_api_request r;
        rlx_api_error e = {0};
        ASSERT(parse(&r, RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"temperature\":1e400}", &e) < 0);
        rlx_api_request_free(&r);
        ASSERT_MSG(strstr(e.message, "must be between 0 and 2, got inf"), "%s", e.message);
        ASSERT(parse(&r, RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":5}]}]}",
                     &e) < 0);
        rlx_api_request_free(&r);
        ASSERT_MSG(strstr(e.message, "needs a string 'text'"), "%s", e.message);
    }
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"top_p\":1.5}", "top_p");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"top_k\":2.5}", "top_k");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"min_p\":-1}", "min_p");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"presence_penalty\":5}", "presence_penalty");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"frequency_penalty\":true}", "frequency_penalty");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"repetition_penalty\":0}", "repetition_penalty");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"seed\":\"1\"}", "seed");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":-1}", "max_tokens");
    EXPECT_BAD(RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", "max_tokens");
    EXPECT_BAD(RLX_API_GENERATE, "{\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens");
    EXPECT_BAD(RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_completion_tokens\":-3}",
               "max_completion_tokens");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"stop\":[1]}", "stop");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"stop\":5}", "stop");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"abc\":1}}", "logit_bias");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"5000\":1}}", "logit_bias");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"5\":101}}", "logit_bias");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":[1]}", "logit_bias");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\" \":1}}", "logit_bias");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"5 x\":1}}", "logit_bias");
    /* keys read as Python's int() reads them: blanks around and a sign, either side ("5 " was a 400
       where " 5" was taken) */
    {
        rlx_api_request rk;
        rlx_api_error ek = {0};
        ASSERT_EQ(parse(&rk, RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"5 \":1,\" 6\":2,\"+7\":3}}", &ek), 0);
        ASSERT_EQ(rk.base->sampling.n_logit_bias, 3);
        ASSERT_EQ(rk.base->sampling.logit_bias[0].token, 5);
        ASSERT_EQ(rk.base->sampling.logit_bias[1].token, 6);
        ASSERT_EQ(rk.base->sampling.logit_bias[2].token, 7);
        rlx_api_request_free(&rk);
    }
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"n\":0}", "n");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"n\":17}", "n");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"ignore_eos\":1}", "ignore_eos");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"user\":5}", "user");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"stream\":\"yes\"}", "stream");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"stream_options\":{\"include_usage\":1}}",
               "stream_options.include_usage");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logprobs\":21}", "logprobs");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"echo\":\"no\"}", "echo");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"model\":3}", "model");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":{}}", "prompt");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":[1,-2]}", "prompt");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":[1,1000]}", "prompt");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":[]}", "prompt");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"max_tokens\":3}", "prompt");
    EXPECT_BAD(RLX_API_GENERATE, "{\"max_tokens\":3}", "prompt");
    EXPECT_BAD(RLX_API_GENERATE, "{\"prompt\":\"x\",\"n\":2}", "n");
    EXPECT_BAD(RLX_API_CHAT, "{\"messages\":[]}", "messages");
    EXPECT_BAD(RLX_API_CHAT, "{\"messages\":[{\"content\":\"x\"}]}", "messages");
    EXPECT_BAD(RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages");
    EXPECT_BAD(RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":3}", "logprobs");
    EXPECT_BAD(RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":3}",
               "top_logprobs");
}

/* response_format json_schema (chat, completions) and the native json_schema field become a
 * grammar (GBNF from engine/json_schema.c); what cannot be honoured is a 400 naming the field. */
TEST(json_schema_constraint)
{
    static const struct { rlx_api_kind kind; const char *body; } ok[] = {
        {RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
                       "\"json_schema\":{\"name\":\"n\",\"strict\":true,\"schema\":{\"type\":\"integer\",\"minimum\":3}}}}"},
        {RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\"}}}"},
        {RLX_API_GENERATE, "{\"prompt\":\"x\",\"json_schema\":{\"enum\":[1,2]}}"},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(ok); i++) {
        rlx_api_request r;
        rlx_api_error e = {0};
        ASSERT_MSG(parse(&r, ok[i].kind, ok[i].body, &e) == 0, "%s: %s", ok[i].body, e.message);
        ASSERT(r.base->grammar && strstr(r.base->grammar, "root ::="));
        rlx_api_request_free(&r);
    }
    EXPECT_BAD(RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
                             "\"json_schema\":{\"name\":\"n\",\"schema\":{\"type\":\"string\",\"format\":\"uri-template\"}}}}",
               "response_format.json_schema");
    EXPECT_BAD(RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\"}}",
               "response_format.json_schema");
    EXPECT_BAD(RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
                             "\"json_schema\":{\"name\":1,\"schema\":{}}}}", "response_format.json_schema.name");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"grammar\":\"root ::= \\\"a\\\"\",\"response_format\":{\"type\":"
                                    "\"json_schema\",\"json_schema\":{\"schema\":{}}}}", "response_format");
    EXPECT_BAD(RLX_API_GENERATE, "{\"prompt\":\"x\",\"grammar\":\"root ::= \\\"a\\\"\",\"json_schema\":{}}", "json_schema");
    EXPECT_BAD(RLX_API_GENERATE, "{\"prompt\":\"x\",\"json_schema\":{\"type\":\"object\",\"dependentRequired\":{}}}", "json_schema");
    EXPECT_BAD(RLX_API_GENERATE, "{\"prompt\":\"x\",\"json_schema\":\"{}\"}", "json_schema");
    EXPECT_BAD(RLX_API_GENERATE, "{\"prompt\":\"x\",\"json_schema\":{\"anyOf\":[{\"$ref\":\"#\"}]}}", "json_schema");
}

/* a bad session id names its field (it was param null, the engine's refusal); "." and ".."
 * are refused: every client removes them from the /v1/sessions/{id} path */
TEST(bad_session_ids_name_the_field)
{
    EXPECT_BAD(RLX_API_GENERATE, "{\"prompt\":\"x\",\"session_id\":\"a b\"}", "session_id");
    EXPECT_BAD(RLX_API_GENERATE, "{\"prompt\":\"x\",\"session_id\":\"\"}", "session_id");
    EXPECT_BAD(RLX_API_GENERATE, "{\"prompt\":\"x\",\"session_id\":\"..\"}", "session_id");
    EXPECT_BAD(RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"session_id\":\".\"}", "session_id");
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT_EQ(parse(&r, RLX_API_GENERATE, "{\"prompt\":\"x\",\"session_id\":\"...\"}", &e), 0);
    rlx_api_request_free(&r);
    /* top_p 0 is OpenAI's and llama.cpp's "the most probable token only", not an error */
    ASSERT_EQ(parse(&r, RLX_API_GENERATE, "{\"prompt\":\"x\",\"top_p\":0}", &e), 0);
    rlx_error err = {0};
    ASSERT_MSG(rlx_sampling_params_validate(&r.base->sampling, 1000, &err) == 0, "%s", err.msg);
    rlx_api_request_free(&r);
}

TEST(bad_json_is_400_without_param)
{
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":", "");
    EXPECT_BAD(RLX_API_COMPLETIONS, "[1,2]", "");
}

/* C strings end at NUL: "a\u0000b" would become session "a" (or a cut prompt) */
TEST(nul_in_strings_refused)
{
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT(parse(&r, RLX_API_GENERATE, "{\"prompt\":\"x\",\"session_id\":\"a\\u0000b\"}", &e) < 0);
    rlx_api_request_free(&r);
    ASSERT_EQ(e.status, 400);
    ASSERT(strstr(e.message, "NUL") != NULL);
    ASSERT_STR_EQ(e.param, "session_id"); /* the field is named (it was null) */
    ASSERT(parse(&r, RLX_API_COMPLETIONS, "{\"prompt\":\"x\\u0000y\"}", &e) < 0);
    rlx_api_request_free(&r);
    ASSERT_STR_EQ(e.param, "prompt");
    ASSERT_STR_EQ(e.message, "'prompt' must not contain NUL characters (\\u0000).");
    ASSERT(parse(&r, RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"\\u0000\"}]}]}", &e) < 0);
    rlx_api_request_free(&r);
    ASSERT_STR_EQ(e.param, "messages");
    /* a NUL byte itself (raw, which JSON does not allow in a string): the same message, not
       "is not valid UTF-8 text" */
    static const char raw[] = "{\"prompt\":\"x\0y\",\"max_tokens\":2}";
    ASSERT(rlx_api_parse(&r, RLX_API_GENERATE, raw, sizeof raw - 1, 1000, &e) < 0);
    rlx_api_request_free(&r);
    ASSERT_MSG(strstr(e.message, "NUL"), "%s", e.message);
    ASSERT_STR_EQ(e.param, "prompt");
    /* an escaped backslash before "u0000" is plain text */
    ASSERT_EQ(parse(&r, RLX_API_GENERATE, "{\"prompt\":\"x\\\\u0000\",\"session_id\":\"a\"}", &e), 0);
    ASSERT_STR_EQ(r.prompts[0].text, "x\\u0000");
    rlx_api_request_free(&r);
}

TEST(nulls_are_absent)
{
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT_EQ(parse(&r, RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"temperature\":null,\"stop\":null,\"max_tokens\":null}", &e), 0);
    ASSERT_EQ(r.base->n_stop, 0);
    ASSERT_EQ(r.base->max_tokens, 16);
    rlx_api_request_free(&r);
}

/* a key given twice: the last value counts, as Python's json, JavaScript's JSON.parse and
 * llama-server read it (a gateway that checked the last one must not see another served) */
TEST(duplicate_keys_last_wins)
{
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT_EQ(parse(&r, RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":1,\"model\":\"a\",\"max_tokens\":3,\"model\":\"b\"}", &e), 0);
    ASSERT_EQ(r.base->max_tokens, 3);
    ASSERT_STR_EQ(r.model, "b");
    rlx_api_request_free(&r);
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":3,\"max_tokens\":-1}", "max_tokens");
}

/* content null without tool_calls: "" for an assistant's or a tool's turn (a replayed refusal),
 * a 400 for a user's */
TEST(null_content)
{
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT_EQ(parse(&r, RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                    "{\"role\":\"assistant\",\"content\":null,\"refusal\":\"no\"},{\"role\":\"tool\",\"tool_call_id\":\"c\"},"
                    "{\"role\":\"user\",\"content\":\"again\"}]}", &e), 0);
    ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(r.messages, 1), "content")->valuestring, "");
    ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(r.messages, 2), "content")->valuestring, "");
    rlx_api_request_free(&r);
    EXPECT_BAD(RLX_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":null}]}", "messages");
    EXPECT_BAD(RLX_API_CHAT, "{\"messages\":[{\"role\":\"system\"},{\"role\":\"user\",\"content\":\"x\"}]}", "messages");
}

TEST(tokenize_bodies)
{
    char *text, *model;
    bool add = true, parse_sp = false, pieces = false;
    rlx_api_error e = {0};
    const char *b = "{\"content\":\"hello\",\"add_special\":false}";
    ASSERT_EQ(rlx_api_parse_tokenize(b, strlen(b), &text, &add, &parse_sp, &pieces, &model, &e), 0);
    ASSERT_STR_EQ(text, "hello");
    ASSERT(!add && !pieces);
    free(text);
    b = "{\"content\":\"hello\",\"with_pieces\":true}";
    ASSERT_EQ(rlx_api_parse_tokenize(b, strlen(b), &text, &add, &parse_sp, &pieces, &model, &e), 0);
    ASSERT(pieces);
    free(text);
    b = "{\"content\":3}";
    ASSERT(rlx_api_parse_tokenize(b, strlen(b), &text, &add, &parse_sp, &pieces, &model, &e) < 0);
    ASSERT_STR_EQ(e.param, "content");
    int32_t *ids;
    size_t n;
    b = "{\"tokens\":[1,2,999]}";
    ASSERT_EQ(rlx_api_parse_detokenize(b, strlen(b), 1000, &ids, &n, &model, &e), 0);
    ASSERT_EQ(n, 3);
    ASSERT_EQ(ids[2], 999);
    free(ids);
    b = "{\"tokens\":[1,2,1000]}";
    ASSERT(rlx_api_parse_detokenize(b, strlen(b), 1000, &ids, &n, &model, &e) < 0);
    ASSERT_STR_EQ(e.param, "tokens");
}

/* JSON numbers that become ints are range-checked before the cast (1e10 or inf as an int32_t
 * is undefined behaviour): a 400 naming the parameter. */
TEST(token_ids_out_of_int_range)
{
    static const char *bad[] = {"1e10", "4294967297", "2147483648", "1e999", "-1e999", "-1", "1.5", "\"3\"", "true"};
    rlx_api_error e = {0};
    char body[128], *model = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(body, sizeof body, "{\"tokens\":[1,%s]}", bad[i]);
        for (int32_t vocab = 0; vocab <= 1000; vocab += 1000) { /* the route parses with 0 (vocab checked later) */
            memset(&e, 0, sizeof e);
            ASSERT_MSG(rlx_api_parse_detokenize(body, strlen(body), vocab, &ids, &n, &model, &e) < 0, "accepted %s", body);
            ASSERT_EQ(e.status, 400);
            ASSERT_STR_EQ(e.param, "tokens");
        }
        snprintf(body, sizeof body, "{\"input_ids\":[1,%s]}", bad[i]);
        rlx_api_request r;
        memset(&e, 0, sizeof e);
        ASSERT_MSG(rlx_api_parse(&r, RLX_API_GENERATE, body, strlen(body), 0, &e) < 0, "accepted %s", body);
        ASSERT_STR_EQ(e.param, "input_ids");
        ASSERT_MSG(!strstr(e.message, "-2147483648"), "%s", e.message);
        rlx_api_request_free(&r);
        snprintf(body, sizeof body, "{\"prompt\":[[1,%s]]}", bad[i]);
        memset(&e, 0, sizeof e);
        ASSERT_MSG(rlx_api_parse(&r, RLX_API_COMPLETIONS, body, strlen(body), 0, &e) < 0, "accepted %s", body);
        ASSERT_STR_EQ(e.param, "prompt");
        rlx_api_request_free(&r);
    }
    const char *ok = "{\"tokens\":[0,2147483647]}";
    ASSERT_EQ(rlx_api_parse_detokenize(ok, strlen(ok), 0, &ids, &n, &model, &e), 0);
    ASSERT_EQ(ids[1], INT32_MAX);
    free(ids);
}

TEST(tokenize_refuses_nul)
{
    char *text = NULL, *model = NULL;
    bool add = true, parse_sp = false, pieces = false;
    rlx_api_error e = {0};
    const char *b = "{\"content\":\"a\\u0000b\"}";
    ASSERT(rlx_api_parse_tokenize(b, strlen(b), &text, &add, &parse_sp, &pieces, &model, &e) < 0);
    ASSERT_EQ(e.status, 400);
    ASSERT(strstr(e.message, "NUL") != NULL);
    ASSERT(text == NULL);
}

/* Mutated bodies (bytes flipped, cut, spliced): parsing never crashes, and every rejection
 * is a 400 with a message. Deterministic (fixed xorshift seed) so a failure reproduces. */
TEST(mutated_bodies_fail_cleanly)
{
    static const char *seeds[] = {
        "{\"model\":\"m\",\"prompt\":[\"a\",[1,2]],\"temperature\":0.5,\"stop\":[\"x\"],\"logit_bias\":{\"5\":1},\"n\":2}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}],\"logprobs\":true,\"top_logprobs\":2}",
        "{\"input_ids\":[1,2,3],\"max_tokens\":4,\"stream\":true,\"stream_options\":{\"include_usage\":true},\"session_id\":\"s\"}",
    };
    const rlx_api_kind kinds[] = {RLX_API_COMPLETIONS, RLX_API_CHAT, RLX_API_GENERATE};
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char buf[512];
    int accepted = 0, rejected = 0;
    for (int iter = 0; iter < 20000; iter++) {
        int k = iter % 3;
        size_t n = strlen(seeds[k]);
        memcpy(buf, seeds[k], n);
        int edits = 1 + iter % 4;
        for (int e = 0; e < edits; e++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            size_t pos = (size_t)(x % n);
            switch ((x >> 32) % 4) {
            case 0: buf[pos] = (char)(x >> 40); break;                /* flip a byte */
            case 1: n = pos; break;                                    /* truncate */
            case 2: buf[pos] = "{}[]\",:0-9.en"[(x >> 24) % 14]; break; /* JSON punctuation */
            default: if (n + 1 < sizeof buf) { memmove(buf + pos + 1, buf + pos, n - pos); n++; } break;
            }
            if (n == 0) break;
        }
        rlx_api_request r;
        rlx_api_error err = {0};
        int rc = rlx_api_parse(&r, kinds[k], buf, n, 1000, &err);
        rlx_api_request_free(&r);
        if (rc == 0) { accepted++; continue; }
        rejected++;
        ASSERT_MSG(err.status == 400, "status %d for body %.*s", err.status, (int)n, buf);
        ASSERT_MSG(err.message[0], "empty message for body %.*s", (int)n, buf);
    }
    ASSERT(accepted > 0 && rejected > 0);
}

/* Other servers' sampling fields rlxd does not implement are refused when they would change the
 * output (they were accepted and ignored: a client asking for mirostat or min_tokens got plain
 * sampling without a word); their neutral values pass. */
/* llama-server's array form of logit_bias: [[id, bias], [id, false]] (it was a 400) */
/* /v1/generate: one prompt; prompt and input_ids together (the ids were silently ignored) or a
 * list of texts (it said "must hold integer token ids") get a 400 saying so */
TEST(generate_prompt_shapes)
{
    EXPECT_BAD(RLX_API_GENERATE, "{\"prompt\":\"x\",\"input_ids\":[1,2]}", "input_ids");
    EXPECT_BAD(RLX_API_GENERATE, "{\"prompt\":[\"x\",\"y\"]}", "prompt");
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT(parse(&r, RLX_API_GENERATE, "{\"prompt\":[\"x\",\"y\"]}", &e) < 0);
    rlx_api_request_free(&r);
    ASSERT_MSG(strstr(e.message, "answers one prompt"), "%s", e.message);
    ASSERT_EQ(parse(&r, RLX_API_GENERATE, "{\"input_ids\":[1,2]}", &e), 0);
    rlx_api_request_free(&r);
    ASSERT_EQ(parse(&r, RLX_API_GENERATE, "{\"prompt\":[1,2],\"input_ids\":null}", &e), 0);
    rlx_api_request_free(&r);
}

TEST(logit_bias_array_form)
{
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT_MSG(parse(&r, RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":[[5,2.5],[7,false],[9,-1]]}", &e) == 0, "%s", e.message);
    ASSERT_EQ(r.base->sampling.n_logit_bias, 3);
    ASSERT_EQ(r.base->sampling.logit_bias[1].token, 7);
    ASSERT(r.base->sampling.logit_bias[1].bias <= -100.0f); /* false: never */
    ASSERT_NEAR(r.base->sampling.logit_bias[2].bias, -1.0, 1e-6);
    rlx_api_request_free(&r);
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":[[5]]}", "logit_bias");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":[[\"hi\",1]]}", "logit_bias");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":[[1.5,1]]}", "logit_bias");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":[[-1,1]]}", "logit_bias");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":[[1,true]]}", "logit_bias");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":[[1,101]]}", "logit_bias");
    EXPECT_BAD(RLX_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"1\":false}}", "logit_bias");
}

TEST(unsupported_fields_refused_unless_neutral)
{
    static const char *const bad[][2] = {
        {"\"mirostat\":2", "mirostat"}, {"\"typical_p\":0.5", "typical_p"}, {"\"tfs_z\":0.9", "tfs_z"},
        {"\"top_n_sigma\":1.5", "top_n_sigma"}, {"\"xtc_probability\":0.5", "xtc_probability"},
        {"\"dry_multiplier\":0.8", "dry_multiplier"}, {"\"dynatemp_range\":0.5", "dynatemp_range"},
        {"\"min_tokens\":5", "min_tokens"}, {"\"use_beam_search\":true", "use_beam_search"},
        {"\"include_stop_str_in_output\":true", "include_stop_str_in_output"},
        {"\"skip_special_tokens\":false", "skip_special_tokens"}, {"\"stop_token_ids\":[2]", "stop_token_ids"},
        {"\"suffix\":\"end\"", "suffix"}, {"\"best_of\":3", "best_of"}, {"\"mirostat\":\"on\"", "mirostat"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char body[160];
        snprintf(body, sizeof body, "{\"prompt\":\"x\",%s}", bad[i][0]);
        EXPECT_BAD(RLX_API_COMPLETIONS, body, bad[i][1]);
    }
    const char *ok = "{\"prompt\":\"x\",\"mirostat\":0,\"typical_p\":1,\"tfs_z\":1.0,\"top_n_sigma\":-1,\"xtc_probability\":0,"
                     "\"dry_multiplier\":0,\"dynatemp_range\":0,\"min_tokens\":0,\"use_beam_search\":false,"
                     "\"include_stop_str_in_output\":false,\"skip_special_tokens\":true,\"stop_token_ids\":[],\"suffix\":\"\","
                     "\"best_of\":2,\"n\":2,\"xtc_threshold\":0.1}";
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT_MSG(parse(&r, RLX_API_COMPLETIONS, ok, &e) == 0, "%s", e.message);
    rlx_api_request_free(&r);
    const char *chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"typical_p\":0.9}";
    EXPECT_BAD(RLX_API_CHAT, chat, "typical_p");
}

TEST_MAIN(TEST_ENTRY(generate_prompt_shapes), TEST_ENTRY(logit_bias_array_form), TEST_ENTRY(unsupported_fields_refused_unless_neutral), TEST_ENTRY(mutated_bodies_fail_cleanly), TEST_ENTRY(nul_in_strings_refused), TEST_ENTRY(completions_defaults), TEST_ENTRY(sampling_params_parsed), TEST_ENTRY(prompt_shapes),
          TEST_ENTRY(stop_as_string), TEST_ENTRY(chat_messages_and_logprobs),
          TEST_ENTRY(bad_params_name_the_parameter), TEST_ENTRY(json_schema_constraint), TEST_ENTRY(bad_session_ids_name_the_field), TEST_ENTRY(bad_json_is_400_without_param),
          TEST_ENTRY(nulls_are_absent), TEST_ENTRY(tokenize_bodies), TEST_ENTRY(token_ids_out_of_int_range),
          TEST_ENTRY(tokenize_refuses_nul), TEST_ENTRY(duplicate_keys_last_wins), TEST_ENTRY(null_content))
