/* choice.c - one choice of a job as it grows (jobs.c holds the job): its text, its logprob
 * entries (offsets in the returned text, released as the text is, so that a stop string's are
 * never sent) and its tool-call / reasoning parser (proto/toolcall.h), whose events become the
 * choice's parsed output (rlx_api_tool_out). Loop thread only. */
#include "server/serve.h"

#include <stdlib.h>
#include <string.h>

int rlx__grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return RLX_ENOMEM;
    *p = np;
    *cap = nc;
    return 0;
}

bool rlx__choice_text_append(rlx_choice *ch, const char *s, size_t n)
{
    if (rlx__grow((void **)&ch->text, &ch->cap, ch->len + n + 1, 1)) {
        rlx__job_oom(ch->job);
        return false;
    }
    memcpy(ch->text + ch->len, s, n);
    ch->len += n;
    ch->text[ch->len] = 0;
    return true;
}

/* The token's bytes (*len of them, NULs included) with a terminating NUL, malloc'ed */
static char *token_text(const rlx_tokenizer *tok, int32_t id, size_t *len)
{
    char buf[256];
    size_t n = rlx_token_to_bytes(tok, id, true, buf, sizeof buf - 1);
    if (n > sizeof buf - 1) n = sizeof buf - 1;
    buf[n] = 0;
    char *t = malloc(n + 1);
    if (t) memcpy(t, buf, n + 1);
    *len = t ? n : 0;
    return t;
}

/* Bytes a prompt token adds to the echoed text: its piece without special tokens (a BOS adds
 * none), the first non-empty one as the detokenizer writes it (SentencePiece's prefix space
 * dropped); *begun says a piece with text was seen. */
static size_t prompt_piece_len(rlx_job *j, int32_t token, bool *begun)
{
    const rlx_tokenizer *tok = j->model->tok;
    char buf[256];
    size_t n = rlx_token_to_bytes(tok, token, false, buf, sizeof buf);
    if (n && !*begun) {
        *begun = true;
        char *d = rlx_detokenize(tok, &token, 1, false);
        if (d) n = strlen(d);
        else rlx__job_oom(j); /* the offsets would be off by the dropped space: fail, never mislead */
        free(d);
    }
    return n;
}

/* Appends the logprob entry of a token (generated or of the prompt) at *offset of the text;
 * ev NULL: an entry without logprob (a prompt's first token). Prompt entries (offset is
 * prompt_lp_offset) advance through the echoed text as it is, so text_offset indexes it.
 * text_offset counts characters, as OpenAI's and vLLM's do (Python's string indices). */
rlx_api_logprob *rlx__choice_add_logprob(rlx_job *j, rlx_choice *ch, int32_t token, const rlx_event *ev, size_t *offset)
{
    if (rlx__grow((void **)&ch->lps, &ch->cap_lps, ch->n_lps + 1, sizeof *ch->lps)) {
        rlx__job_oom(j);
        return NULL;
    }
    rlx_api_logprob *lp = &ch->lps[ch->n_lps++];
    memset(lp, 0, sizeof *lp);
    lp->text = token_text(j->model->tok, token, &lp->text_len);
    bool ok = lp->text != NULL;
    lp->none = !ev;
    lp->logprob = ev ? ev->logprob : 0;
    lp->n_top = ev ? RLX_MIN(ev->n_top, j->req.logprobs) : 0;
    for (int k = 0; k < lp->n_top; k++) {
        lp->top_text[k] = token_text(j->model->tok, ev->top_ids[k], &lp->top_len[k]);
        lp->top_logprob[k] = ev->top_logprobs[k];
        ok = ok && lp->top_text[k];
    }
    if (!ok) rlx__job_oom(j);
    if (offset == &ch->prompt_lp_offset) { /* never past the echoed text, whatever its bytes */
        const size_t at = RLX_MIN(*offset, ch->echo_len);
        ch->prompt_chars += rlx_api_utf8_chars(ch->text + ch->prompt_counted, at - ch->prompt_counted);
        ch->prompt_counted = at;
        lp->text_offset = ch->prompt_chars;
        *offset += prompt_piece_len(j, token, &ch->prompt_text_begun);
    } else {
        /* the entry shows the token as it is (a control token's text too); its offsets advance
           by what the token adds to the output, which leaves an unrendered control token out
           (counting its text held back every later entry: "<|image_pad|>" lost the rest) */
        size_t piece = ev ? ev->piece_len : lp->text_len;
        lp->text_offset = ch->lp_chars;
        lp->byte_offset = *offset;
        *offset += piece;
        if (piece) ch->lp_chars += rlx_api_utf8_chars(lp->text, lp->text_len); /* piece: 0 or all of text */
    }
    return lp;
}

/* ---- tool calls: a choice's text through its parser ----------------------------------------- */

/* The model ended (or broke) a call so that its output is no answer: the job fails (500, or a
 * stream's error event) and its generation stops. */
static void calls_failed(rlx_job *j, const char *why)
{
    j->failed = true;
    rlx_api_errorf(&j->err, 500, RLX_API_ERR_SERVER, NULL, "The model's tool call could not be parsed: %s", why);
    rlx__job_cancel_open(j);
}

static int on_tc_event(void *user, const rlx_tc_event *ev)
{
    rlx_choice *ch = user;
    rlx_job *j = ch->job;
    const char *broken = rlx_tc_broken(ch->tc);
    if (broken) { /* at the break, not after the text the model writes next (it was streamed) */
        if (!j->failed) calls_failed(j, broken);
        return RLX_ECANCELED; /* the parser takes no more */
    }
    if (rlx_api_tool_out_add(&ch->tout, ev)) {
        rlx__job_oom(j);
        return RLX_ENOMEM;
    }
    if (j->req.stream && !j->client_gone && !j->failed) {
        /* the entries released so far ride with the event's chunk (an empty text or a call's
           end makes none: they wait for the next) */
        const bool chunk = ev->kind == RLX_TC_CALL_BEGIN || (ev->kind != RLX_TC_CALL_END && ev->len);
        ch->lp_held = RLX_MAX(ch->lp_held, ch->n_prompt_lps);
        const size_t n = chunk ? ch->lp_sent - ch->lp_held : 0;
        j->ops->tool_event(j, ch, ev, n ? ch->lps + ch->lp_held : NULL, n);
        ch->lp_held += n;
    }
    return 0;
}

void rlx__choice_tc_feed(rlx_choice *ch, const char *s, size_t n)
{
    if (n && !ch->job->failed && rlx_tc_feed(ch->tc, s, n, on_tc_event, ch) == RLX_ENOMEM) rlx__job_oom(ch->job);
}

/* The output ended: what the parser held back; a call the model broke is an error unless the
 * client cut the output - max_tokens or one of its stop strings - which finish_reason ("length",
 * "stop", never "tool_calls") says. */
void rlx__choice_tc_finish(rlx_job *j, rlx_choice *ch)
{
    rlx_error err = {0};
    int rc = j->failed ? 0 : rlx_tc_finish(ch->tc, on_tc_event, ch, &err);
    if (rc == RLX_ENOMEM) rlx__job_oom(j);
    else if (rc && (ch->finish == RLX_FINISH_LENGTH || ch->stop_string)) ch->calls_cut = true;
    else if (rc && !j->failed) calls_failed(j, err.msg); /* the model itself ended inside a call */
}

/* Chat with tools and a sink that takes them: one parser per choice, in the model's format. */
int rlx__job_tc_start(rlx_job *j, rlx_api_error *e)
{
    if (j->req.kind != RLX_API_CHAT || !j->ops->tool_event) return 0;
    /* without tools (or with tool_choice "none") a thinking template's reasoning is still split
       into reasoning_content, as llama-server splits it (reasoning_format "none": left as text) */
    bool calls = j->req.tool_choice != RLX_TOOL_CHOICE_NONE;
    if (!calls && (!j->model->tc.thinks || j->req.reasoning_raw)) return 0;
    for (size_t i = 0; i < j->n_choices; i++) {
        rlx_tc_opts o = {.tools = calls ? j->req.tools : NULL, .prompt = j->prompt_tail, .prompt_hash = j->prompt_hash, .seeded = j->req.base->sampling.has_seed,
                         .seed = j->req.base->sampling.seed + i, .reasoning_only = !calls,
                         .in_reasoning = j->continues_reasoning, .reasoning_raw = j->req.reasoning_raw};
        if (!(j->choices[i].tc = rlx_tc_parser_new(&j->model->tc, &o)))
            return rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
    }
    return 0;
}

/* The generated logprob entries whose token's text has been released whole (it ends within
 * the text so far), not yet sent: lps[*from, *from + return). A token whose text is held back,
 * even in part (a possible stop string), waits; at the end (final), the entries of text that
 * never came whole, a stop string's, are dropped - also the token in which the stop string
 * begins, as llama-server drops it - so the logprobs describe the returned text, streamed or
 * not (a token that adds no text - an unrendered control token, the end-of-generation token -
 * stays also at the very end: a token's piece counts the bytes it adds, held back or not). */
size_t rlx__choice_lps_released(rlx_choice *ch, bool final, size_t *from)
{
    size_t i = RLX_MAX(ch->lp_sent, ch->n_prompt_lps);
    *from = i;
    size_t end = i;
    while (end < ch->n_lps) {
        const size_t at = ch->lps[end].byte_offset,
                     piece = (end + 1 < ch->n_lps ? ch->lps[end + 1].byte_offset : ch->lp_offset) - at;
        if (!(piece ? at + piece <= ch->len : at < ch->len || (final && at == ch->len))) break;
        end++;
    }
    if (final) {
        for (size_t k = end; k < ch->n_lps; k++) rlx_api_logprob_clear(&ch->lps[k]);
        ch->n_lps = end;
    }
    ch->lp_sent = end;
    return end - i;
}

void rlx__choice_token(rlx_job *j, rlx_choice *ch, const rlx_event *ev)
{
    if (!rlx__grow((void **)&ch->tokens, &ch->cap_tokens, ch->n_tokens + 1, sizeof *ch->tokens))
        ch->tokens[ch->n_tokens++] = ev->token;
    else
        rlx__job_oom(j);
    if (j->req.logprobs >= 0) rlx__choice_add_logprob(j, ch, ev->token, ev, &ch->lp_offset);
    const char *out = ev->text ? ev->text : "";
    size_t n = ev->text_len;
    rlx__choice_text_append(ch, out, n);
    size_t from = 0, k = rlx__choice_lps_released(ch, false, &from);
    if (ch->tc) k = 0; /* the entries go with the parser's next chunk (on_tc_event) */
    if (j->req.stream && !j->client_gone) j->ops->piece(j, ch, ev->token, out, ch->tc ? 0 : n, ch->lps + from, k);
    if (ch->tc) rlx__choice_tc_feed(ch, out, n);
}
