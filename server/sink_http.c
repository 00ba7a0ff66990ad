/* sink_http.c - the HTTP front end's sink (rlx_sink_ops): a job's response as a whole JSON body,
 * an SSE stream (completions and chat: chunks, the usage chunk, [DONE]; chat with tools: the
 * tool-call parser's content, reasoning and call deltas) or an NDJSON stream
 * (native generate: a line per token, then the response object); embeddings and rerank as
 * one JSON body. Formats with proto's
 * formatters into the job's output queue; http.c sends it. Loop thread only. */
#include "server/serve.h"

#include <stdlib.h>
#include <string.h>

/* The opening chunks: chat's role, or completions' echoed prompt (held back until its
 * logprobs are in, with echo + logprobs). */
static void http_begin(rlx_job *j)
{
    for (size_t i = 0; i < j->n_choices; i++) {
        rlx_choice *ch = &j->choices[i];
        if (j->req.kind == RLX_API_CHAT) /* the opening chunk carries the role */
            rlx_job_out_take(j, rlx_api_sse_chunk(&j->meta, (int)i, "", 0, true, NULL, 0, RLX_FINISH_NONE));
        else if (j->req.echo && j->req.kind == RLX_API_COMPLETIONS && j->req.logprobs >= 0)
            ch->echo_pending = true; /* echo: the prompt goes first, once its logprobs are in (also a
                                        prompt with no text, "" or control tokens: its entries) */
        else if (ch->len && j->req.kind == RLX_API_COMPLETIONS) /* echo: the prompt comes first */
            rlx_job_out_take(j, rlx_api_sse_chunk(&j->meta, (int)i, ch->text, ch->len, false, NULL, 0, RLX_FINISH_NONE));
    }
}

/* The echoed prompt with its logprobs, once they are in: before the first token, or before the
 * end when none comes (max_tokens 0: the prompt scored). */
static void echo_out(rlx_job *j, rlx_choice *ch)
{
    if (!ch->echo_pending) return;
    ch->echo_pending = false;
    rlx_job_out_take(j, rlx_api_sse_chunk(&j->meta, ch->index, ch->text, ch->echo_len, false, ch->lps, ch->n_prompt_lps,
                                          RLX_FINISH_NONE));
}

static void http_piece(rlx_job *j, rlx_choice *ch, int32_t token, const char *text, size_t n, const rlx_api_logprob *lps,
                       size_t n_lps)
{
    if (j->req.kind == RLX_API_GENERATE) {
        if (token >= 0) rlx_job_out_take(j, rlx_api_ndjson_token(token, text, n));
        return;
    }
    echo_out(j, ch);
    if (!n && !n_lps) return;
    rlx_job_out_take(j, rlx_api_sse_chunk(&j->meta, ch->index, text, n, false, lps, n_lps, RLX_FINISH_NONE));
}

/* Chat with tools: content, reasoning and calls as their own deltas. */
static void http_tool_event(rlx_job *j, rlx_choice *ch, const rlx_tc_event *ev, const rlx_api_logprob *lps, size_t n_lps)
{
    rlx_job_out_take(j, rlx_api_sse_tool_event(&j->meta, ch->index, ev, lps, n_lps));
}

/* SSE: the choice's last text with its finish_reason (NDJSON ends with the response object). */
static void http_choice_end(rlx_job *j, rlx_choice *ch, const char *text, size_t n, const rlx_api_logprob *lps,
                            size_t n_lps)
{
    echo_out(j, ch);
    if (ch->tc)
        rlx_job_out_take(j, rlx_api_sse_tool_end(&j->meta, ch->index, ch->finish, ch->tout.n_calls > 0 && !ch->calls_cut,
                                                 lps, n_lps));
    else if (j->req.kind != RLX_API_GENERATE)
        rlx_job_out_take(j, rlx_api_sse_chunk(&j->meta, ch->index, text, n, false, lps, n_lps, ch->finish));
}

static void http_finish(rlx_job *j)
{
    if (rlx_api_kind_embeds(j->req.kind)) {
        rlx_api_embd_result res;
        rlx_embed_result(j, &res);
        char *body = rlx_api_embed_response(&j->req, j->model->cfg->name, &res, &j->total);
        if (!body) j->out_lost = true;
        else rlx_job_out_take(j, body);
    } else if (j->req.stream && j->req.kind == RLX_API_GENERATE) {
        const rlx_choice *ch = &j->choices[0];
        /* the final line is the unstreamed response: logprobs too (they were left out) */
        rlx_api_choice c = {.text = ch->text, .text_len = ch->len, .tokens = ch->tokens, .n_tokens = ch->n_tokens,
                            .logprobs = j->req.logprobs >= 0 ? ch->lps : NULL, .n_logprobs = ch->n_lps,
                            .finish = ch->finish};
        rlx_job_out_take(j, rlx_api_response_json(&j->meta, &c, 1, &j->total, &ch->timings));
        rlx_job_out_put(j, "\n", 1);
    } else if (j->req.stream) {
        if (j->req.include_usage) rlx_job_out_take(j, rlx_api_sse_usage(&j->meta, &j->total));
        rlx_job_out_put(j, rlx_api_sse_done, strlen(rlx_api_sse_done));
    } else {
        rlx_api_choice *cs = rlx_job_api_choices(j);
        if (!cs) {
            j->out_lost = true;
            return;
        }
        rlx_job_out_take(j, rlx_api_response_json(&j->meta, cs, j->n_choices, &j->total, &j->choices[0].timings));
        free(cs);
    }
}

/* Before the first byte an error is a plain HTTP error, after it an in-band event. */
static void http_fail(rlx_job *j)
{
    if (j->req.stream && j->started && j->req.kind == RLX_API_GENERATE) {
        rlx_job_out_take(j, rlx_api_error_json(&j->err));
        rlx_job_out_put(j, "\n", 1);
    } else if (j->req.stream && j->started) {
        rlx_job_out_take(j, rlx_api_sse_error(&j->err));
        rlx_job_out_put(j, rlx_api_sse_done, strlen(rlx_api_sse_done));
    } else {
        j->status = j->err.status;
        rlx_job_out_take(j, rlx_api_error_json(&j->err));
    }
}

static bool http_whole(const rlx_job *j)
{
    return !j->req.stream;
}

const rlx_sink_ops rlx_http_sink = {
    .begin = http_begin,
    .piece = http_piece,
    .tool_event = http_tool_event,
    .choice_end = http_choice_end,
    .finish = http_finish,
    .fail = http_fail,
    .whole = http_whole,
    .notify = rlx_conn_job_notify,
};
