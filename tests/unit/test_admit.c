/* test_admit.c - the admission rule (engine/admit.c): every reason at its boundary, the order
 * of the checks, the KV pool and session history limits, and the API errors proto maps the
 * refusals to (proto/parse.c rlx_api_error_from_admit). */
#include "tests/rlx_test.h"
#include "engine/engine.h"
#include "proto/proto.h"

static const rlx_admit_limits LIM = {.n_ctx = 64, .n_vocab = 100};

static rlx_admit check(const rlx_admit_limits *lim, rlx_admit_query q, int want_rc)
{
    rlx_admit a;
    int rc = rlx_admit_check(lim, &q, &a);
    if (rc != want_rc) { /* the helper returns a value: ASSERT's return cannot be used here */
        fprintf(stderr, "  rlx_admit_check: %d, expected %d (reason %d)\n", rc, want_rc, (int)a.reason);
        rlx_test_failed_ = 1;
    }
    return a;
}

TEST(admits_what_fits_exactly)
{
    int32_t ids[4] = {0, 1, 98, 99};
    /* 4 + 60 == 64: the last position is still free */
    rlx_admit a = check(&LIM, (rlx_admit_query){.ids = ids, .n_prompt = 4, .bound = RLX_ADMIT_EXACT, .max_tokens = 60}, 0);
    ASSERT_EQ(a.reason, RLX_ADMIT_OK);
    /* max_tokens <= 0: the rest of the context, at least one token */
    a = check(&LIM, (rlx_admit_query){.n_prompt = 63, .bound = RLX_ADMIT_EXACT, .max_tokens = 0}, 0);
    ASSERT_EQ(a.reason, RLX_ADMIT_OK);
    /* nothing known yet: a one-token prompt is assumed */
    a = check(&LIM, (rlx_admit_query){.bound = RLX_ADMIT_UNKNOWN, .max_tokens = 63}, 0);
    ASSERT_EQ(a.reason, RLX_ADMIT_OK);
}

TEST(prompt_empty)
{
    rlx_admit a = check(&LIM, (rlx_admit_query){.n_prompt = 0, .bound = RLX_ADMIT_EXACT}, RLX_EINVAL);
    ASSERT_EQ(a.reason, RLX_ADMIT_PROMPT_EMPTY);
    /* a session turn that adds no token to a history is not an empty sequence */
    a = check(&LIM, (rlx_admit_query){.n_prompt = 0, .bound = RLX_ADMIT_EXACT, .n_history = 5}, 0);
    /* unknown or estimated lengths are never "empty" */
    a = check(&LIM, (rlx_admit_query){.n_prompt = 0, .bound = RLX_ADMIT_UNKNOWN}, 0);
    a = check(&LIM, (rlx_admit_query){.n_prompt = 0, .bound = RLX_ADMIT_AT_LEAST}, 0);
}

TEST(token_id_range)
{
    int32_t hi[3] = {1, 100, 2}, lo[2] = {5, -1}, ok[2] = {0, 99};
    rlx_admit a = check(&LIM, (rlx_admit_query){.ids = hi, .n_prompt = 3, .bound = RLX_ADMIT_EXACT}, RLX_EINVAL);
    ASSERT_EQ(a.reason, RLX_ADMIT_TOKEN_ID);
    ASSERT_EQ(a.value, 100);
    ASSERT_EQ(a.index, 1);
    ASSERT_EQ(a.limit, 100);
    a = check(&LIM, (rlx_admit_query){.ids = lo, .n_prompt = 2, .bound = RLX_ADMIT_EXACT}, RLX_EINVAL);
    ASSERT_EQ(a.value, -1);
    ASSERT_EQ(a.index, 1);
    check(&LIM, (rlx_admit_query){.ids = ok, .n_prompt = 2, .bound = RLX_ADMIT_EXACT}, 0);
    /* n_vocab <= 0: ids unchecked */
    rlx_admit_limits nv = {.n_ctx = 64};
    check(&nv, (rlx_admit_query){.ids = hi, .n_prompt = 3, .bound = RLX_ADMIT_EXACT}, 0);
    /* the list-only check (/detokenize): an empty list is fine */
    ASSERT_EQ(rlx_admit_tokens(100, NULL, 0, &a), 0);
    ASSERT_EQ(rlx_admit_tokens(100, ok, 2, &a), 0);
    ASSERT_EQ(rlx_admit_tokens(100, hi, 3, &a), RLX_EINVAL);
    ASSERT_EQ(a.reason, RLX_ADMIT_TOKEN_ID);
    ASSERT_EQ(a.value, 100);
}

TEST(max_tokens_alone)
{
    /* 63 leaves one position for the prompt; 64 leaves none */
    check(&LIM, (rlx_admit_query){.bound = RLX_ADMIT_UNKNOWN, .max_tokens = 63}, 0);
    rlx_admit a = check(&LIM, (rlx_admit_query){.bound = RLX_ADMIT_UNKNOWN, .max_tokens = 64}, RLX_ETOOLONG);
    ASSERT_EQ(a.reason, RLX_ADMIT_MAX_TOKENS);
    ASSERT_EQ(a.value, 64);
    ASSERT_EQ(a.limit, 64);
    /* against the context, even when the KV pool is smaller */
    rlx_admit_limits pool = {.n_ctx = 64, .n_vocab = 100, .kv_tokens = 32};
    a = check(&pool, (rlx_admit_query){.bound = RLX_ADMIT_UNKNOWN, .max_tokens = 64}, RLX_ETOOLONG);
    ASSERT_EQ(a.reason, RLX_ADMIT_MAX_TOKENS);
    /* n_ctx <= 0: unchecked */
    rlx_admit_limits none = {.n_vocab = 100};
    check(&none, (rlx_admit_query){.bound = RLX_ADMIT_EXACT, .n_prompt = 5000, .max_tokens = 100000}, 0);
}

TEST(logit_bias_keys)
{
    rlx_logit_bias b[3] = {{1, 0.5f}, {99, 1}, {100, -1}};
    rlx_admit a = check(&LIM, (rlx_admit_query){.bound = RLX_ADMIT_UNKNOWN, .bias = b, .n_bias = 3}, RLX_EINVAL);
    ASSERT_EQ(a.reason, RLX_ADMIT_BIAS_ID);
    ASSERT_EQ(a.value, 100);
    ASSERT_EQ(a.index, 2);
    check(&LIM, (rlx_admit_query){.bound = RLX_ADMIT_UNKNOWN, .bias = b, .n_bias = 2}, 0);
}

TEST(order_of_checks)
{
    /* ids before max_tokens, max_tokens before logit_bias, logit_bias before the context */
    int32_t bad[1] = {500};
    rlx_logit_bias b[1] = {{500, 1}};
    rlx_admit a = check(&LIM, (rlx_admit_query){.ids = bad, .n_prompt = 1, .bound = RLX_ADMIT_EXACT, .max_tokens = 99,
                                                .bias = b, .n_bias = 1}, RLX_EINVAL);
    ASSERT_EQ(a.reason, RLX_ADMIT_TOKEN_ID);
    a = check(&LIM, (rlx_admit_query){.bound = RLX_ADMIT_UNKNOWN, .max_tokens = 99, .bias = b, .n_bias = 1}, RLX_ETOOLONG);
    ASSERT_EQ(a.reason, RLX_ADMIT_MAX_TOKENS);
    a = check(&LIM, (rlx_admit_query){.n_prompt = 70, .bound = RLX_ADMIT_EXACT, .bias = b, .n_bias = 1}, RLX_EINVAL);
    ASSERT_EQ(a.reason, RLX_ADMIT_BIAS_ID);
}

TEST(prompt_too_long)
{
    /* 63 prompt tokens leave one to generate; 64 none */
    check(&LIM, (rlx_admit_query){.n_prompt = 63, .bound = RLX_ADMIT_EXACT, .max_tokens = 1}, 0);
    rlx_admit a = check(&LIM, (rlx_admit_query){.n_prompt = 64, .bound = RLX_ADMIT_EXACT, .max_tokens = 1}, RLX_ETOOLONG);
    ASSERT_EQ(a.reason, RLX_ADMIT_PROMPT_LONG);
    ASSERT_EQ(a.value, 64);
    ASSERT_EQ(a.limit, 64);
    ASSERT(!a.kv_pool);
    /* an estimate from bytes: at least 64 */
    a = check(&LIM, (rlx_admit_query){.n_prompt = 64, .bound = RLX_ADMIT_AT_LEAST, .prompt_bytes = 256}, RLX_ETOOLONG);
    ASSERT_EQ(a.reason, RLX_ADMIT_PROMPT_LONG);
    check(&LIM, (rlx_admit_query){.n_prompt = 63, .bound = RLX_ADMIT_AT_LEAST, .prompt_bytes = 252}, 0);
    /* tokenizing stopped at a cap: more than 63 is at least 64 */
    a = check(&LIM, (rlx_admit_query){.n_prompt = 63, .bound = RLX_ADMIT_MORE_THAN}, RLX_ETOOLONG);
    ASSERT_EQ(a.reason, RLX_ADMIT_PROMPT_LONG);
    ASSERT_EQ(a.value, 64);
    check(&LIM, (rlx_admit_query){.n_prompt = 62, .bound = RLX_ADMIT_MORE_THAN}, 0);
}

TEST(context_with_pool_and_history)
{
    rlx_admit a = check(&LIM, (rlx_admit_query){.n_prompt = 10, .bound = RLX_ADMIT_EXACT, .max_tokens = 55}, RLX_ETOOLONG);
    ASSERT_EQ(a.reason, RLX_ADMIT_CONTEXT);
    ASSERT_EQ(a.value, 55);
    ASSERT_EQ(a.limit, 64);
    /* the KV pool's 48 tokens are the limit when smaller than the context */
    rlx_admit_limits pool = {.n_ctx = 64, .n_vocab = 100, .kv_tokens = 48};
    check(&pool, (rlx_admit_query){.n_prompt = 10, .bound = RLX_ADMIT_EXACT, .max_tokens = 38}, 0);
    a = check(&pool, (rlx_admit_query){.n_prompt = 10, .bound = RLX_ADMIT_EXACT, .max_tokens = 39}, RLX_ETOOLONG);
    ASSERT_EQ(a.reason, RLX_ADMIT_CONTEXT);
    ASSERT_EQ(a.limit, 48);
    ASSERT(a.kv_pool);
    /* a pool larger than the context does not raise the limit */
    rlx_admit_limits big = {.n_ctx = 64, .n_vocab = 100, .kv_tokens = 1024};
    a = check(&big, (rlx_admit_query){.n_prompt = 10, .bound = RLX_ADMIT_EXACT, .max_tokens = 55}, RLX_ETOOLONG);
    ASSERT(!a.kv_pool);
    /* the history counts before the prompt: 40 + 20 + 4 == 64 fits, one more does not */
    check(&LIM, (rlx_admit_query){.n_prompt = 20, .bound = RLX_ADMIT_EXACT, .n_history = 40, .max_tokens = 4}, 0);
    a = check(&LIM, (rlx_admit_query){.n_prompt = 20, .bound = RLX_ADMIT_EXACT, .n_history = 40, .max_tokens = 5},
              RLX_ETOOLONG);
    ASSERT_EQ(a.reason, RLX_ADMIT_CONTEXT);
    ASSERT_EQ(a.n_history, 40);
}

TEST(engine_messages)
{
    rlx_error err = {0};
    rlx_admit_limits pool = {.n_ctx = 64, .n_vocab = 100, .kv_tokens = 48};
    rlx_admit_query q = {.n_prompt = 10, .bound = RLX_ADMIT_EXACT, .max_tokens = 39};
    rlx_admit a;
    ASSERT_EQ(rlx_admit_check(&pool, &q, &a), RLX_ETOOLONG);
    ASSERT_EQ(rlx_admit_error(&a, &err), RLX_ETOOLONG);
    ASSERT_STR_EQ(err.msg, "the prompt (10 tokens) plus max_tokens (39) exceeds the KV pool of 48 tokens");
    q.n_history = 30;
    q.max_tokens = 9; /* 30 + 10 + 9 > 48 */
    ASSERT_EQ(rlx_admit_check(&pool, &q, &a), RLX_ETOOLONG);
    rlx_admit_error(&a, &err);
    ASSERT_MSG(strstr(err.msg, "session history (30 tokens) plus this prompt (10 tokens)") != NULL, "%s", err.msg);
    int32_t bad[2] = {1, 700};
    q = (rlx_admit_query){.ids = bad, .n_prompt = 2, .bound = RLX_ADMIT_EXACT};
    ASSERT_EQ(rlx_admit_check(&LIM, &q, &a), RLX_EINVAL);
    ASSERT_EQ(rlx_admit_error(&a, &err), RLX_EINVAL);
    ASSERT_STR_EQ(err.msg, "prompt token 700 at index 1 is outside the vocabulary (100 tokens)");
    a = (rlx_admit){.reason = RLX_ADMIT_OK};
    ASSERT_EQ(rlx_admit_error(&a, &err), 0);
}

/* proto's mapping: status, type, param, code and the sentences the integration tests read */
static rlx_api_error api(rlx_admit_query q, const char *pp, int want_rc)
{
    rlx_admit a;
    rlx_api_error e = {0};
    rlx_admit_check(&LIM, &q, &a);
    int rc = rlx_api_error_from_admit(&e, &a, pp, "max_completion_tokens");
    if (rc != want_rc) {
        fprintf(stderr, "  rlx_api_error_from_admit: %d, expected %d\n", rc, want_rc);
        rlx_test_failed_ = 1;
    }
    return e;
}

TEST(api_errors)
{
    rlx_api_error e = api((rlx_admit_query){.bound = RLX_ADMIT_UNKNOWN, .max_tokens = 64}, "prompt", RLX_ETOOLONG);
    ASSERT_EQ(e.status, 400);
    ASSERT_STR_EQ(e.type, RLX_API_ERR_INVALID);
    ASSERT_STR_EQ(e.param, "max_completion_tokens");
    ASSERT(e.code == NULL);
    ASSERT_STR_EQ(e.message, "'max_completion_tokens' is 64 but the model's context holds 64 tokens in all "
                             "(prompt included).");
    rlx_logit_bias b[1] = {{100, 1}};
    e = api((rlx_admit_query){.bound = RLX_ADMIT_UNKNOWN, .bias = b, .n_bias = 1}, "prompt", RLX_EINVAL);
    ASSERT_STR_EQ(e.param, "logit_bias");
    ASSERT_STR_EQ(e.message, "'logit_bias' key 100 is not a token id of this model.");
    e = api((rlx_admit_query){.n_prompt = 0, .bound = RLX_ADMIT_EXACT}, "messages", RLX_EINVAL);
    ASSERT_STR_EQ(e.param, "messages");
    ASSERT_STR_EQ(e.message, "'messages' must not be empty.");
    int32_t bad[1] = {100};
    e = api((rlx_admit_query){.ids = bad, .n_prompt = 1, .bound = RLX_ADMIT_EXACT}, "input_ids", RLX_EINVAL);
    ASSERT_STR_EQ(e.param, "input_ids");
    ASSERT_STR_EQ(e.message, "Token id 100 is outside the vocabulary (0..99).");
    e = api((rlx_admit_query){.n_prompt = 64, .bound = RLX_ADMIT_EXACT}, "prompt", RLX_ETOOLONG);
    ASSERT_STR_EQ(e.param, "prompt");
    ASSERT_STR_EQ(e.code, "context_length_exceeded");
    ASSERT_STR_EQ(e.message, "The prompt ('prompt') is 64 tokens long but the model's context holds 64 tokens in all; "
                             "shorten it.");
    e = api((rlx_admit_query){.n_prompt = 70, .bound = RLX_ADMIT_AT_LEAST, .prompt_bytes = 280}, "prompt", RLX_ETOOLONG);
    ASSERT_STR_EQ(e.message, "The prompt ('prompt') is 280 bytes long, so at least 70 tokens for this model, but the "
                             "model's context holds 64 tokens in all; shorten it.");
    e = api((rlx_admit_query){.n_prompt = 64, .bound = RLX_ADMIT_MORE_THAN}, "prompt", RLX_ETOOLONG);
    ASSERT_STR_EQ(e.message, "The prompt ('prompt') is more than 64 tokens long but the model's context holds 64 tokens "
                             "in all; shorten it.");
    e = api((rlx_admit_query){.n_prompt = 10, .bound = RLX_ADMIT_EXACT, .max_tokens = 55}, "prompt", RLX_ETOOLONG);
    ASSERT_STR_EQ(e.param, "max_completion_tokens");
    ASSERT_STR_EQ(e.code, "context_length_exceeded");
    ASSERT_STR_EQ(e.message, "The prompt (10 tokens) plus 'max_completion_tokens' (55) exceeds the model's context of "
                             "64 tokens; lower 'max_completion_tokens' to at most 54.");
    /* a plain list of ids (/detokenize) */
    rlx_admit a;
    ASSERT_EQ(rlx_admit_tokens(100, bad, 1, &a), RLX_EINVAL);
    ASSERT_EQ(rlx_api_error_from_admit(&e, &a, "tokens", NULL), RLX_EINVAL);
    ASSERT_STR_EQ(e.param, "tokens");
    ASSERT_STR_EQ(e.message, "'tokens' must hold token ids between 0 and 99.");
    rlx_admit ok = {.reason = RLX_ADMIT_OK};
    ASSERT_EQ(rlx_api_error_from_admit(&e, &ok, "prompt", "max_tokens"), 0);
}

/* an embedding input generates nothing: it may fill the limit, and is refused only past it */
TEST(embedding_input)
{
    rlx_admit a = check(&LIM, (rlx_admit_query){.n_prompt = 64, .bound = RLX_ADMIT_EXACT, .embed = true}, 0);
    ASSERT_EQ(a.reason, RLX_ADMIT_OK);
    a = check(&LIM, (rlx_admit_query){.n_prompt = 65, .bound = RLX_ADMIT_EXACT, .embed = true}, RLX_ETOOLONG);
    ASSERT_EQ(a.reason, RLX_ADMIT_PROMPT_LONG);
    ASSERT(a.embed);
    rlx_error err = {0};
    ASSERT_EQ(rlx_admit_error(&a, &err), RLX_ETOOLONG);
    ASSERT_STR_EQ(err.msg, "the input (65 tokens) exceeds the context of 64 tokens");
    /* the pool's limit when smaller, and the other rules as for a prompt */
    rlx_admit_limits pool = {.n_ctx = 64, .n_vocab = 100, .kv_tokens = 32};
    a = check(&pool, (rlx_admit_query){.n_prompt = 33, .bound = RLX_ADMIT_EXACT, .embed = true}, RLX_ETOOLONG);
    ASSERT(a.kv_pool);
    check(&LIM, (rlx_admit_query){.n_prompt = 0, .bound = RLX_ADMIT_EXACT, .embed = true}, RLX_EINVAL);
    int32_t ids[2] = {1, 100};
    a = check(&LIM, (rlx_admit_query){.ids = ids, .n_prompt = 2, .bound = RLX_ADMIT_EXACT, .embed = true}, RLX_EINVAL);
    ASSERT_EQ(a.reason, RLX_ADMIT_TOKEN_ID);
}

TEST_MAIN(TEST_ENTRY(admits_what_fits_exactly), TEST_ENTRY(embedding_input), TEST_ENTRY(prompt_empty), TEST_ENTRY(token_id_range),
          TEST_ENTRY(max_tokens_alone), TEST_ENTRY(logit_bias_keys), TEST_ENTRY(order_of_checks),
          TEST_ENTRY(prompt_too_long), TEST_ENTRY(context_with_pool_and_history), TEST_ENTRY(engine_messages),
          TEST_ENTRY(api_errors))
