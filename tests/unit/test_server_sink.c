/* test_server_sink.c - the HTTP sink (server/sink_http.c, rlx_http_sink): for each response
 * shape (SSE for completions and chat, NDJSON for generate, a whole JSON body) the bytes it
 * queues on a job are exactly proto's formatters' in the order the wire needs them; errors are
 * a plain body before a stream began and in-band after; the job's queue takes pieces whole. */
#include "tests/rlx_test.h"
#include "server/serve.h"

#include <stdlib.h>

typedef struct fixture {
    rlx_srv srv;
    rlx_model_slot model;
    rlx_job job;
    rlx_choice ch;
    char text[64];
} fixture;

static void fx_init(fixture *f, rlx_api_kind kind, bool stream)
{
    memset(f, 0, sizeof *f);
    f->job.srv = &f->srv;
    f->job.model = &f->model;
    f->job.ops = &rlx_http_sink;
    f->job.req.kind = kind;
    f->job.req.stream = stream;
    f->job.req.n = 1;
    f->job.req.logprobs = -1;
    f->job.status = 200;
    f->job.choices = &f->ch;
    f->job.n_choices = 1;
    f->ch.job = &f->job;
    rlx_api_meta_init(&f->job.meta, kind, "tiny", 7, 1700000000);
}

/* The expected bytes: the formatters' outputs concatenated (each freed). */
typedef struct buf { char s[8192]; } buf;
static void add(buf *b, char *s)
{
    if (s) strncat(b->s, s, sizeof b->s - strlen(b->s) - 1);
    free(s);
}

static const char *out(const rlx_job *j)
{
    return j->out ? j->out + j->off : "";
}

TEST(sse_chat_stream)
{
    fixture f;
    fx_init(&f, RLX_API_CHAT, true);
    f.job.req.include_usage = true;
    f.job.meta.include_usage = true;
    f.job.started = true;
    rlx_http_sink.begin(&f.job);
    rlx_http_sink.piece(&f.job, &f.ch, 42, "Hi", 2, NULL, 0);
    rlx_http_sink.piece(&f.job, &f.ch, 43, "", 0, NULL, 0); /* held back text: no chunk */
    f.ch.finish = RLX_FINISH_STOP;
    rlx_http_sink.choice_end(&f.job, &f.ch, "!", 1, NULL, 0);
    f.job.total = (rlx_usage){.prompt_tokens = 3, .completion_tokens = 3};
    rlx_http_sink.finish(&f.job);
    buf b = {0};
    add(&b, rlx_api_sse_chunk(&f.job.meta, 0, "", 0, true, NULL, 0, RLX_FINISH_NONE));
    add(&b, rlx_api_sse_chunk(&f.job.meta, 0, "Hi", 2, false, NULL, 0, RLX_FINISH_NONE));
    add(&b, rlx_api_sse_chunk(&f.job.meta, 0, "!", 1, false, NULL, 0, RLX_FINISH_STOP));
    add(&b, rlx_api_sse_usage(&f.job.meta, &f.job.total));
    strcat(b.s, rlx_api_sse_done);
    ASSERT_STR_EQ(out(&f.job), b.s);
    ASSERT(!rlx_http_sink.whole(&f.job));
    free(f.job.out);
}

TEST(sse_completions_echo_waits_for_logprobs)
{
    fixture f;
    fx_init(&f, RLX_API_COMPLETIONS, true);
    f.job.req.logprobs = 0;
    f.job.req.echo = true; /* the echo waits by the request's echo, also for a prompt without text */
    strcpy(f.text, "Once");
    f.ch.text = f.text;
    f.ch.len = f.ch.echo_len = 4;
    rlx_http_sink.begin(&f.job);
    ASSERT(f.ch.echo_pending);
    ASSERT_STR_EQ(out(&f.job), ""); /* nothing before the prompt's logprobs */
    rlx_api_logprob lp = {.text = (char *)" upon", .text_len = 5, .logprob = -1.5f, .text_offset = 4};
    rlx_http_sink.piece(&f.job, &f.ch, 5, " upon", 5, &lp, 1);
    buf b = {0};
    add(&b, rlx_api_sse_chunk(&f.job.meta, 0, "Once", 4, false, NULL, 0, RLX_FINISH_NONE));
    add(&b, rlx_api_sse_chunk(&f.job.meta, 0, " upon", 5, false, &lp, 1, RLX_FINISH_NONE));
    ASSERT_STR_EQ(out(&f.job), b.s);
    ASSERT(!f.ch.echo_pending);
    free(f.job.out);
}

TEST(ndjson_generate_stream)
{
    fixture f;
    fx_init(&f, RLX_API_GENERATE, true);
    f.job.started = true;
    rlx_http_sink.begin(&f.job);
    rlx_http_sink.piece(&f.job, &f.ch, 9, "a", 1, NULL, 0);
    rlx_http_sink.piece(&f.job, &f.ch, -1, "", 0, NULL, 0); /* no token: no line */
    strcpy(f.text, "ab");
    f.ch.text = f.text;
    f.ch.len = 2;
    int32_t toks[2] = {9, 10};
    f.ch.tokens = toks;
    f.ch.n_tokens = 2;
    f.ch.finish = RLX_FINISH_LENGTH;
    rlx_http_sink.choice_end(&f.job, &f.ch, "b", 1, NULL, 0); /* NDJSON: the final object says it all */
    rlx_http_sink.finish(&f.job);
    buf b = {0};
    add(&b, rlx_api_ndjson_token(9, "a", 1));
    rlx_api_choice c = {.text = "ab", .text_len = 2, .tokens = toks, .n_tokens = 2, .finish = RLX_FINISH_LENGTH};
    add(&b, rlx_api_response_json(&f.job.meta, &c, 1, &f.job.total, &f.ch.timings));
    strcat(b.s, "\n");
    ASSERT_STR_EQ(out(&f.job), b.s);
    free(f.job.out);
}

TEST(whole_body_and_errors)
{
    fixture f;
    fx_init(&f, RLX_API_COMPLETIONS, false);
    strcpy(f.text, "done");
    f.ch.text = f.text;
    f.ch.len = 4;
    f.ch.finish = RLX_FINISH_STOP;
    rlx_http_sink.finish(&f.job);
    rlx_api_choice c = {.text = "done", .text_len = 4, .finish = RLX_FINISH_STOP};
    buf b = {0};
    add(&b, rlx_api_response_json(&f.job.meta, &c, 1, &f.job.total, &f.ch.timings));
    ASSERT_STR_EQ(out(&f.job), b.s);
    ASSERT(rlx_http_sink.whole(&f.job));
    free(f.job.out);

    /* failed before a stream began: a plain error body with its status */
    fx_init(&f, RLX_API_CHAT, true);
    rlx_api_errorf(&f.job.err, 400, RLX_API_ERR_INVALID, "messages", "bad");
    rlx_http_sink.fail(&f.job);
    ASSERT_EQ(f.job.status, 400);
    b = (buf){0};
    add(&b, rlx_api_error_json(&f.job.err));
    ASSERT_STR_EQ(out(&f.job), b.s);
    free(f.job.out);

    /* after it: in-band, SSE then [DONE] */
    fx_init(&f, RLX_API_CHAT, true);
    f.job.started = true;
    rlx_api_error_shutdown(&f.job.err);
    rlx_http_sink.fail(&f.job);
    ASSERT_EQ(f.job.status, 200);
    b = (buf){0};
    add(&b, rlx_api_sse_error(&f.job.err));
    strcat(b.s, rlx_api_sse_done);
    ASSERT_STR_EQ(out(&f.job), b.s);
    free(f.job.out);

    /* NDJSON: the error object as the last line */
    fx_init(&f, RLX_API_GENERATE, true);
    f.job.started = true;
    rlx_api_error_shutdown(&f.job.err);
    rlx_http_sink.fail(&f.job);
    b = (buf){0};
    add(&b, rlx_api_error_json(&f.job.err));
    strcat(b.s, "\n");
    ASSERT_STR_EQ(out(&f.job), b.s);
    free(f.job.out);
}

/* A formatter that ran out of memory (NULL) loses the piece: the job fails with a 500 and
 * takes nothing more, so a stream never has a gap. */
TEST(lost_piece_fails_the_job)
{
    fixture f;
    fx_init(&f, RLX_API_CHAT, true);
    rlx_job_out_put(&f.job, "a", 1);
    rlx_job_out_take(&f.job, NULL);
    ASSERT(f.job.out_lost);
    ASSERT(f.job.failed);
    ASSERT_EQ(f.job.err.status, 500);
    rlx_job_out_put(&f.job, "b", 1);
    ASSERT_STR_EQ(out(&f.job), "a");
    free(f.job.out);
}

TEST_MAIN(TEST_ENTRY(sse_chat_stream), TEST_ENTRY(sse_completions_echo_waits_for_logprobs),
          TEST_ENTRY(ndjson_generate_stream), TEST_ENTRY(whole_body_and_errors), TEST_ENTRY(lost_piece_fails_the_job))
