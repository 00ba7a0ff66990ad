/* admit.c - the admission rule (see engine.h, "admission"): one decision, in one order, for
 * every place that learns a part of a request, with the numbers behind a refusal so that each
 * caller can word it. */
#include "engine/engine.h"

static int refuse(rlx_admit *a, rlx_admit_reason r, int64_t value, size_t index, int64_t limit)
{
    a->reason = r;
    a->value = value;
    a->index = index;
    a->limit = limit;
    return r == RLX_ADMIT_PROMPT_EMPTY || r == RLX_ADMIT_TOKEN_ID || r == RLX_ADMIT_BIAS_ID ? RLX_EINVAL : RLX_ETOOLONG;
}

static int check_ids(int32_t n_vocab, const int32_t *ids, size_t n, rlx_admit *a)
{
    for (size_t i = 0; n_vocab > 0 && ids && i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab) return refuse(a, RLX_ADMIT_TOKEN_ID, ids[i], i, n_vocab);
    return 0;
}

int rlx_admit_tokens(int32_t n_vocab, const int32_t *ids, size_t n, rlx_admit *a)
{
    *a = (rlx_admit){.reason = RLX_ADMIT_OK, .n_prompt = n, .bound = RLX_ADMIT_EXACT};
    return check_ids(n_vocab, ids, n, a);
}

int rlx_admit_check(const rlx_admit_limits *lim, const rlx_admit_query *q, rlx_admit *a)
{
    *a = (rlx_admit){.reason = RLX_ADMIT_OK, .n_ctx = lim->n_ctx, .n_prompt = q->n_prompt, .bound = q->bound,
                     .prompt_bytes = q->prompt_bytes, .n_history = q->n_history, .max_tokens = q->scored ? 0 : q->max_tokens, .embed = q->embed};
    int rc;
    if (q->bound == RLX_ADMIT_EXACT && q->n_prompt == 0 && q->n_history <= 0) return refuse(a, RLX_ADMIT_PROMPT_EMPTY, 0, 0, 1);
    if ((rc = check_ids(lim->n_vocab, q->ids, q->n_prompt, a))) return rc;
    if (lim->n_ctx > 0 && q->max_tokens >= lim->n_ctx)
        return refuse(a, RLX_ADMIT_MAX_TOKENS, q->max_tokens, 0, lim->n_ctx);
    for (size_t i = 0; lim->n_vocab > 0 && q->bias && i < q->n_bias; i++)
        if (q->bias[i].token < 0 || q->bias[i].token >= lim->n_vocab)
            return refuse(a, RLX_ADMIT_BIAS_ID, q->bias[i].token, i, lim->n_vocab);
    if (lim->n_ctx <= 0) return 0;
    int64_t limit = lim->n_ctx;
    if (lim->kv_tokens > 0 && lim->kv_tokens < limit) {
        limit = lim->kv_tokens;
        a->kv_pool = true;
    }
    /* the fewest tokens the prompt can be */
    int64_t prompt = q->bound == RLX_ADMIT_UNKNOWN ? 1 : (int64_t)q->n_prompt + (q->bound == RLX_ADMIT_MORE_THAN);
    int64_t used = RLX_MAX(q->n_history, 0) + prompt;
    if (q->embed || q->scored) return used > limit ? refuse(a, RLX_ADMIT_PROMPT_LONG, prompt, 0, limit) : 0;
    if (used >= limit) return refuse(a, RLX_ADMIT_PROMPT_LONG, prompt, 0, limit);
    if (used + RLX_MAX(q->max_tokens, 1) > limit) return refuse(a, RLX_ADMIT_CONTEXT, q->max_tokens, 0, limit);
    return 0;
}

int rlx_admit_error(const rlx_admit *a, rlx_error *err)
{
    const char *what = a->kv_pool ? "the KV pool" : "the context";
    long long prompt = a->bound == RLX_ADMIT_UNKNOWN ? 0 : (long long)a->n_prompt;
    switch (a->reason) {
    case RLX_ADMIT_OK:
        return 0;
    case RLX_ADMIT_PROMPT_EMPTY:
        return rlx_errorf(err, RLX_EINVAL, "the prompt is empty");
    case RLX_ADMIT_TOKEN_ID:
        return rlx_errorf(err, RLX_EINVAL, "prompt token %lld at index %zu is outside the vocabulary (%lld tokens)",
                          (long long)a->value, a->index, (long long)a->limit);
    case RLX_ADMIT_BIAS_ID:
        return rlx_errorf(err, RLX_EINVAL, "logit_bias token %lld is outside the vocabulary (%lld tokens)",
                          (long long)a->value, (long long)a->limit);
    case RLX_ADMIT_MAX_TOKENS:
        return rlx_errorf(err, RLX_ETOOLONG, "max_tokens (%lld) leaves no room for a prompt in the context of %lld "
                          "tokens", (long long)a->value, (long long)a->limit);
    case RLX_ADMIT_PROMPT_LONG:
    case RLX_ADMIT_CONTEXT:
        if (a->embed)
            return rlx_errorf(err, RLX_ETOOLONG, "the input (%s%lld tokens) exceeds %s of %lld tokens",
                              a->bound == RLX_ADMIT_EXACT ? "" : "at least ", prompt, what, (long long)a->limit);
        if (a->n_history > 0)
            return rlx_errorf(err, RLX_ETOOLONG, "the session history (%lld tokens) plus this prompt (%lld tokens) "
                              "and max_tokens (%d) exceed %s of %lld tokens; delete the session or start a new one",
                              (long long)a->n_history, prompt, a->max_tokens, what, (long long)a->limit);
        return rlx_errorf(err, RLX_ETOOLONG, "the prompt (%lld tokens) plus max_tokens (%d) exceeds %s of %lld tokens",
                          prompt, a->max_tokens, what, (long long)a->limit);
    }
    return rlx_errorf(err, RLX_EINVAL, "the request was refused");
}
