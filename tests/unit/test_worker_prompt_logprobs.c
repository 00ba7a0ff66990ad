/* test_worker_prompt_logprobs.c - rlx_request.prompt_logprobs: one RLX_EV_PROMPT_TOKEN per
 * prompt token after the first, in order, before the first generated token; the logprob of a
 * prompt token equals the logprob the model gave it when generating it; prompts longer than
 * the logits rows of one step (max_outputs) take several steps; a plain request sharing the
 * steps is unchanged. Runs on stories260K from ../shared. */
#include "tests/rlx_test.h"
#include "engine/engine.h"

#include <pthread.h>

#define MAXEV 128

typedef struct rec {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int n_prompt_ev, n_tok;
    bool prompt_after_token;
    int32_t prompt_tok[MAXEV];
    float prompt_lp[MAXEV];
    int32_t prompt_top0[MAXEV];
    int32_t tok[MAXEV];
    float tok_lp[MAXEV];
    int error;
} rec;

static void on_event(void *user, const rlx_event *ev)
{
    rec *r = user;
    pthread_mutex_lock(&r->mu);
    if (ev->type == RLX_EV_PROMPT_TOKEN) {
        if (r->n_tok) r->prompt_after_token = true;
        if (r->n_prompt_ev < MAXEV) {
            r->prompt_tok[r->n_prompt_ev] = ev->token;
            r->prompt_lp[r->n_prompt_ev] = ev->logprob;
            r->prompt_top0[r->n_prompt_ev] = ev->n_top > 0 ? ev->top_ids[0] : -1;
        }
        r->n_prompt_ev++;
    } else if (ev->type == RLX_EV_TOKEN) {
        if (r->n_tok < MAXEV) {
            r->tok[r->n_tok] = ev->token;
            r->tok_lp[r->n_tok] = ev->logprob;
        }
        r->n_tok++;
    } else {
        r->error = ev->type == RLX_EV_ERROR ? ev->error_code : 0;
        r->done = true;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

static void rec_init(rec *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

static void rec_wait(rec *r)
{
    pthread_mutex_lock(&r->mu);
    while (!r->done) pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

static int submit(rlx_worker *w, uint64_t id, rec *r, const int32_t *ids, size_t n, int max_tokens, bool plp)
{
    rlx_request *q = rlx_request_new();
    q->id = id;
    q->prompt_ids = malloc(n * sizeof *ids);
    memcpy(q->prompt_ids, ids, n * sizeof *ids);
    q->n_prompt = n;
    q->max_tokens = max_tokens;
    q->ignore_eos = true;
    q->sampling.temperature = 0;
    q->top_logprobs = 3;
    q->prompt_logprobs = plp;
    q->on_event = on_event;
    q->user = r;
    rlx_error err = {0};
    return rlx_worker_submit(w, q, &err);
}

TEST(prompt_logprobs)
{
    const char *m = rlx_test_shared("models/stories260K.gguf");
    if (!m) SKIP("stories260K.gguf absent (reference data in ../shared)");
    /* 4 sequences: 4 logits rows per step, so a 20-token prompt takes several steps */
    rlx_worker_config cfg = {.model_path = m, .n_threads = 2, .max_seqs = 4, .max_batch_tokens = 64,
                             .kv_block = 16, .kv_blocks = 64};
    rlx_worker *w = NULL;
    rlx_error err = {0};
    ASSERT_MSG(rlx_worker_start(&w, &cfg, &err) == 0, "%s", err.msg);
    int32_t p[24] = {1};
    for (int i = 1; i < 20; i++) p[i] = 3 + (i * 37) % 500;
    /* the greedy continuation of p and its logprob */
    rec a;
    rec_init(&a);
    ASSERT_EQ(submit(w, 1, &a, p, 20, 4, false), 0);
    rec_wait(&a);
    ASSERT_EQ(a.error, 0);
    ASSERT_EQ(a.n_prompt_ev, 0);
    ASSERT_EQ(a.n_tok, 4);
    /* p + the first generated token, with prompt logprobs, beside a plain request */
    p[20] = a.tok[0];
    rec b, c;
    rec_init(&b);
    rec_init(&c);
    ASSERT_EQ(submit(w, 2, &b, p, 21, 3, true), 0);
    ASSERT_EQ(submit(w, 3, &c, p, 20, 4, false), 0);
    rec_wait(&b);
    rec_wait(&c);
    ASSERT_EQ(b.error, 0);
    ASSERT_EQ(b.n_prompt_ev, 20);
    ASSERT(!b.prompt_after_token);
    for (int i = 0; i < 20; i++) {
        ASSERT_EQ(b.prompt_tok[i], p[i + 1]);
        ASSERT(b.prompt_lp[i] <= 0);
    }
    ASSERT_NEAR(b.prompt_lp[19], a.tok_lp[0], 1e-3);
    ASSERT_EQ(b.prompt_top0[19], a.tok[0]); /* greedy: the generated token was the top one */
    ASSERT_EQ(b.n_tok, 3);
    ASSERT_EQ(b.tok[0], a.tok[1]);          /* generation goes on as without prompt logprobs */
    for (int i = 0; i < 4; i++) ASSERT_EQ(c.tok[i], a.tok[i]);
    rlx_worker_stop(w, false);
}

TEST_MAIN(TEST_ENTRY(prompt_logprobs))
