/* toolcall.c - the incremental tool-call / reasoning parser (proto/toolcall.h): the text modes,
 * marker search with hold-back, event emission and the name-then-arguments bodies (JSON call
 * objects and lists: toolcall_obj.c). The XML body
 * (Qwen3-Coder), python code and gpt-oss harmony headers are in toolcall_modes.c. */
#include "proto/toolcall_p.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool rlx__tc_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* ---- emission ------------------------------------------------------------------------ */

static int send(rlx_tc_parser *p, rlx_tc_event *ev)
{
    if (p->stop) return p->stop;
    if (ev->kind != RLX_TC_CONTENT && ev->kind != RLX_TC_REASONING) {
        ev->index = p->n_calls - 1;
        ev->id = p->id;
        ev->name = p->name.p ? p->name.p : "";
    }
    int rc = p->sink ? p->sink(p->user, ev) : 0;
    if (rc) p->stop = rc;
    return rc;
}

/* Text of channel ch (0 content, 1 reasoning, 2 arguments); an unfinished UTF-8 sequence at
 * the end waits for its next bytes (flush: sent as it is). */
void rlx__tc_text(rlx_tc_parser *p, int ch, const char *s, size_t n, bool flush)
{
    rlx__tc_buf *c = &p->carry[ch];
    if (!n && !c->len) return;
    if (rlx__tc_buf_add(c, s, n)) { p->oom = true; return; }
    size_t keep = flush ? 0 : rlx__tc_utf8_tail(c->p, c->len);
    if (c->len > keep) {
        static const rlx_tc_event_kind kinds[3] = {RLX_TC_CONTENT, RLX_TC_REASONING, RLX_TC_CALL_ARGS};
        rlx_tc_event ev = {.kind = kinds[ch], .index = -1, .text = c->p, .len = c->len - keep};
        send(p, &ev);
    }
    memmove(c->p, c->p + c->len - keep, keep);
    c->len = keep;
}

static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void rlx__tc_begin(rlx_tc_parser *p)
{
    p->n_calls++;
    p->begun = true;
    if (p->sp->format == RLX_TC_MISTRAL) { /* Mistral's templates demand 9 alphanumerics (as vLLM makes) */
        for (int i = 0; i < 9; i++) p->id[i] = alnum[next_rand(&p->rng) % 62];
        p->id[9] = 0;
    } else {
        memcpy(p->id, "call_", 5);
        for (int i = 0; i < 24; i++) p->id[5 + i] = alnum[next_rand(&p->rng) % 62];
        p->id[29] = 0;
    }
    rlx_tc_event ev = {.kind = RLX_TC_CALL_BEGIN};
    send(p, &ev);
}

void rlx__tc_end(rlx_tc_parser *p)
{
    rlx__tc_text(p, 2, "", 0, true);
    rlx_tc_event ev = {.kind = RLX_TC_CALL_END};
    send(p, &ev);
    p->begun = false;
    p->name.len = 0;
    if (p->name.p) p->name.p[0] = 0;
}

void rlx__tc_broken(rlx_tc_parser *p, const char *why)
{
    if (!p->n_broken++)
        snprintf(p->broken, sizeof p->broken, "tool call %d (%s) %s", p->n_calls - 1, p->name.p ? p->name.p : "", why);
    rlx__tc_end(p);
    p->mode = M_TEXT;
    p->in_obj = p->in_arr = false;
}

/* Not a call after all: its text from the start marker up to `upto` is content. */
void rlx__tc_fallback(rlx_tc_parser *p, size_t upto)
{
    rlx__tc_text(p, 0, p->in.p + p->raw, upto - p->raw, false);
    p->pos = upto;
    p->mode = M_TEXT;
    p->in_obj = p->in_arr = false;
    p->at_start = false;
    p->name.len = 0;
}

int rlx__tc_set_name(rlx_tc_parser *p, const char *s, size_t n)
{
    while (n && rlx__tc_space(*s)) s++, n--;
    while (n && rlx__tc_space(s[n - 1])) n--;
    p->name.len = 0;
    if (!n || n > 256 || memchr(s, '\n', n) || memchr(s, '<', n)) return -1;
    if (rlx__tc_buf_add(&p->name, s, n)) { p->oom = true; return -1; }
    return 0;
}

/* Whether in[i..len) starts with m: 1 yes, 0 no, -1 maybe (a proper prefix of m, more to come). */
int rlx__tc_starts(const rlx_tc_parser *p, size_t i, const char *m)
{
    size_t n = p->in.len - i, ml = strlen(m);
    if (n >= ml) return !memcmp(p->in.p + i, m, ml);
    return memcmp(p->in.p + i, m, n) ? 0 : -1;
}

size_t rlx__tc_skip_ws(const rlx_tc_parser *p, size_t i)
{
    while (i < p->in.len && rlx__tc_space(p->in.p[i])) i++;
    return i;
}

const char *rlx__tc_find(const char *s, size_t n, const char *m)
{
    size_t ml = strlen(m);
    if (ml > n) return NULL;
    for (size_t i = 0; i + ml <= n; i++)
        if (s[i] == m[0] && !memcmp(s + i, m, ml)) return s + i;
    return NULL;
}

/* ---- content and reasoning --------------------------------------------------------- */

enum { ACT_REASON, ACT_START, ACT_DROP, ACT_HEADER };

static bool step_text(rlx_tc_parser *p)
{
    const rlx__tc_spec *sp = p->sp;
    if (p->pos >= p->in.len) return false;
    if (p->at_start && sp->json_at_start && !p->reasoning_only) {
        size_t i = rlx__tc_skip_ws(p, p->pos);
        if (i == p->in.len && !p->final) return false;
        p->at_start = false;
        if (i < p->in.len && p->in.p[i] == '{') {
            p->raw = p->pos;
            p->vstart = p->scan = i;
            memset(&p->js, 0, sizeof p->js);
            p->obj_whole = false;
            p->mode = M_TENT;
        }
        return true;
    }
    if (p->ws_skip) {
        size_t i = rlx__tc_skip_ws(p, p->pos);
        bool moved = i != p->pos;
        p->pos = i;
        if (i == p->in.len) return moved;
        p->ws_skip = false;
    }
    const char *s = p->in.p + p->pos;
    size_t n = p->in.len - p->pos;
    const char *marks[16];
    int acts[16], which[16], nm = 0;
    if (p->info.thinks && p->info.format != RLX_TC_GPT_OSS && p->info.reasoning_open)
        marks[nm] = p->info.reasoning_open, acts[nm] = ACT_REASON, which[nm++] = 0;
    for (int i = 0; i < 3 && sp->starts[i].marker && !p->reasoning_only; i++)
        marks[nm] = sp->starts[i].marker, acts[nm] = ACT_START, which[nm++] = i;
    for (int i = 0; i < 6 && sp->drops[i] && !p->reasoning_only; i++) marks[nm] = sp->drops[i], acts[nm] = ACT_DROP, which[nm++] = i;
    if (sp->format == RLX_TC_GPT_OSS) {
        marks[nm] = "<|channel|>", acts[nm] = ACT_HEADER, which[nm++] = 0;
        marks[nm] = "<|start|>", acts[nm] = ACT_HEADER, which[nm++] = 0;
    }
    const char *best = NULL;
    int bi = -1;
    for (int k = 0; k < nm; k++) {
        const char *at = rlx__tc_find(s, n, marks[k]);
        if (at && (!best || at < best || (at == best && strlen(marks[k]) > strlen(marks[bi])))) best = at, bi = k;
    }
    if (!best) {
        size_t hold = 0;
        for (int k = 0; k < nm && !p->final; k++) {
            size_t h = rlx__tc_partial(s, n, marks[k]);
            if (h > hold) hold = h;
        }
        if (n == hold) return false;
        rlx__tc_text(p, 0, s, n - hold, false);
        p->pos += n - hold;
        p->drop_pending = false;
        return true;
    }
    size_t at = (size_t)(best - s), ml = strlen(marks[bi]);
    rlx__tc_text(p, 0, s, at, false);
    /* a call opening right after a section's dropped opening: if it turns out no call (cut
       short, malformed), its text from the section's marker on is the content */
    const bool joined = acts[bi] == ACT_START && p->drop_pending && at == 0;
    p->raw = p->pos + at;
    p->pos += at + ml;
    p->mlen = ml;
    if (joined) {
        p->mlen = p->pos - p->drop_at;
        p->raw = p->drop_at;
    }
    p->drop_pending = acts[bi] == ACT_DROP;
    if (p->drop_pending) p->drop_at = p->raw;
    switch (acts[bi]) {
    case ACT_REASON:
        p->mode = M_REASON;
        p->reason_ws = true;
        p->rclose = p->info.reasoning_close;
        break;
    case ACT_START:
        p->st = &sp->starts[which[bi]];
        p->name_end = p->st->name_end;
        p->name.len = 0;
        p->mode = p->st->body == RLX__TC_NAME ? M_NAME : p->st->body == RLX__TC_XML ? M_XML_FN : M_BODY;
        break;
    case ACT_HEADER:
        p->mode = M_HHEAD;
        break;
    default:
        break;
    }
    return true;
}

static bool step_reason(rlx_tc_parser *p)
{
    if (p->reason_ws) {
        size_t i = rlx__tc_skip_ws(p, p->pos);
        bool moved = i != p->pos;
        p->pos = i;
        if (i == p->in.len) return moved;
        p->reason_ws = false;
    }
    if (p->reopen) { /* "<think>" again after the prompt's: dropped, as vLLM drops it */
        const char *o = p->info.reasoning_open;
        size_t ol = o ? strlen(o) : 0, n = p->in.len - p->pos;
        if (ol && n >= ol && !memcmp(p->in.p + p->pos, o, ol)) {
            p->pos += ol;
            p->reason_ws = true;
            p->reopen = false;
            return true;
        }
        if (ol && n < ol && !p->final && !memcmp(p->in.p + p->pos, o, n)) return false; /* maybe it comes */
        p->reopen = false;
    }
    const char *s = p->in.p + p->pos;
    size_t n = p->in.len - p->pos;
    const char *at = rlx__tc_find(s, n, p->rclose);
    size_t k = at ? (size_t)(at - s) : n - (p->final ? 0 : rlx__tc_partial(s, n, p->rclose));
    size_t e = k;
    while (e && rlx__tc_space(s[e - 1])) e--;  /* trailing whitespace waits for more text */
    if (at || p->final) {
        rlx__tc_text(p, 1, s, e, false);
        p->pos = at ? p->pos + k + strlen(p->rclose) : p->in.len;
        p->mode = M_TEXT;
        p->ws_skip = p->at_start = true;
        return true;
    }
    if (!e) return false;
    rlx__tc_text(p, 1, s, e, false);
    p->pos += e;
    return true;
}


static bool step_name(rlx_tc_parser *p)
{
    const char *s = p->in.p + p->pos;
    size_t n = p->in.len - p->pos;
    const char *at = rlx__tc_find(s, n, p->name_end);
    size_t k = at ? (size_t)(at - s) : 0, el = strlen(p->name_end);
    /* a name runs at most RLX__TC_NAME_MAX bytes, whatever the split points: past that, not a call */
    if (at ? k > RLX__TC_NAME_MAX : p->final || n > RLX__TC_NAME_MAX + el) {
        rlx__tc_fallback(p, p->raw + p->mlen);
        return true;
    }
    if (!at) return false;
    const char *nm = s;
    if (p->sp->format == RLX_TC_DEEPSEEK && k == 8 && !memcmp(s, "function", 8)) {
        p->pos += k + el; /* R1: function<sep>NAME\n```json */
        p->name_end = "\n";
        return true;
    }
    if (p->sp->format == RLX_TC_KIMI_K2) { /* functions.NAME:0 */
        if (k > 10 && !memcmp(nm, "functions.", 10)) nm += 10, k -= 10;
        const char *colon = memchr(nm, ':', k);
        if (colon) k = (size_t)(colon - nm);
    }
    if (p->sp->format == RLX_TC_MISTRAL) { /* NAME[CALL_ID]id[ARGS] */
        const char *cid = rlx__tc_find(nm, k, "[CALL_ID]");
        if (cid) k = (size_t)(cid - nm);
    }
    if (p->sp->format == RLX_TC_FUNCTIONARY_V32 && k == 3 && !memcmp(nm, "all", 3)) {
        p->pos += (size_t)(at - s) + el; /* >>>all\n: text for the user */
        p->mode = M_TEXT;
        return true;
    }
    if (rlx__tc_set_name(p, nm, k)) {
        rlx__tc_fallback(p, p->raw + p->mlen);
        return true;
    }
    p->pos += (size_t)(at - s) + el;
    p->mode = M_ARGS_PRE;
    return true;
}

/* M_ARGS_PRE: whitespace and an optional ```json fence, then the arguments object. */
static bool step_args_pre(rlx_tc_parser *p)
{
    size_t i = p->pos;
    for (;;) {
        i = rlx__tc_skip_ws(p, i);
        int f = i < p->in.len ? rlx__tc_starts(p, i, "```json") : -1;
        int g = i < p->in.len ? rlx__tc_starts(p, i, "```") : -1;
        if (f == 1) { i += 7; continue; }
        if (g == 1 && f == 0) { i += 3; continue; }
        if (i == p->in.len || f == -1) {
            if (p->final) rlx__tc_fallback(p, p->raw + p->mlen);
            return p->final;
        }
        break;
    }
    if (p->in.p[i] != '{') {
        rlx__tc_fallback(p, p->raw + p->mlen);
        return true;
    }
    rlx__tc_begin(p);
    memset(&p->js, 0, sizeof p->js);
    p->args.len = 0;
    p->pos = i;
    p->mode = M_ARGS;
    return true;
}

/* M_ARGS: the arguments stream as they come, whitespace outside strings dropped. */
static bool step_args(rlx_tc_parser *p)
{
    size_t i = p->pos, from = i;
    const char *tail = p->sp->tails[0];
    bool tag = false; /* the format's closing tag before the arguments closed */
    p->out.len = 0;
    for (; i < p->in.len; i++) {
        const unsigned char c = (unsigned char)p->in.p[i];
        if (tail && !p->js.in_str && p->js.depth > 0) {
            int t = rlx__tc_starts(p, i, tail);
            if (t == 1) { tag = true; break; }
            if (t == -1 && !p->final) break; /* maybe the tag: wait for it */
        }
        if (p->js.in_str && c < 0x20) { /* a raw control character: escaped, as JSON writes it */
            if (rlx__tc_buf_add(&p->out, p->in.p + from, i - from) || rlx__tc_ctl_escape(&p->out, c)) p->oom = true;
            from = i + 1;
            rlx__jscan_feed(&p->js, c);
            continue;
        }
        rlx__js_res r = rlx__jscan_feed(&p->js, c);
        if (p->js.bad) break;
        if (r == RLX__JS_SKIP) {
            if (rlx__tc_buf_add(&p->out, p->in.p + from, i - from)) p->oom = true;
            from = i + 1;
        }
        if (p->js.done) { i++; break; }
    }
    if (rlx__tc_buf_add(&p->out, p->in.p + from, i - from)) p->oom = true;
    if (rlx__tc_buf_add(&p->args, p->out.p, p->out.len)) p->oom = true;
    bool progressed = i != p->pos;
    rlx__tc_text(p, 2, p->out.p, p->out.len, false);
    p->pos = i;
    if (p->js.done) {
        const bool obj = p->in_obj, arr = p->in_arr;
        if (!p->oom && !rlx__tc_json_strict(p->args.p, p->args.len)) {
            /* the scanner follows brackets and strings only: a literal or number JSON does not
               have (tru, 01, 1., 0x10) ends the call as broken, not as a call with bad arguments */
            rlx__tc_broken(p, "has arguments that are not valid JSON");
            p->in_arr = arr; /* a list goes on with its next call */
        } else {
            rlx__tc_end(p);
            p->mode = M_TAIL;
            p->tail_i = 0;
        }
        p->in_obj = false;
        if (obj) { /* the call object's other members and its brace follow: not content */
            memset(&p->js, 0, sizeof p->js);
            p->js.started = true;
            p->js.stack[0] = '{';
            p->js.depth = 1;
            p->rest_fresh = true;
            p->mode = M_OBJ_REST;
        }
        return true;
    }
    if (tag) { /* the closing tag came first: the call is broken, and the tag still ends it */
        rlx__tc_broken(p, "ends before its arguments close");
        p->mode = M_TAIL;
        p->tail_i = 0;
        return true;
    }
    if (p->js.bad) { /* the offending byte and what follows are content again */
        rlx__tc_broken(p, "has arguments that are not valid JSON");
        return true;
    }
    if (p->final) {
        p->pos = p->in.len;
        rlx__tc_broken(p, "was cut off");
        return true;
    }
    return progressed;
}

/* M_TAIL: the format's closing markers, each optional, then content again. */
static bool step_tail(rlx_tc_parser *p)
{
    const char *const *t = p->sp->tails;
    size_t i = rlx__tc_skip_ws(p, p->pos);
    while (p->tail_i < 3 && t[p->tail_i]) {
        if (i == p->in.len && !p->final) return false;
        int r = i == p->in.len ? 0 : rlx__tc_starts(p, i, t[p->tail_i]);
        if (r == -1 && !p->final) return false;
        if (r == -1) { i = p->in.len; break; }  /* a cut-off closing tag: dropped */
        if (r == 1) i = rlx__tc_skip_ws(p, i + strlen(t[p->tail_i]));
        p->pos = i;
        p->tail_i++;
    }
    p->pos = i;
    p->mode = M_TEXT;
    p->ws_skip = true;
    return true;
}

/* ---- driver -------------------------------------------------------------------------- */

static bool step(rlx_tc_parser *p)
{
    switch (p->mode) {
    case M_TEXT: return step_text(p);
    case M_REASON: return step_reason(p);
    case M_TENT:
    case M_OBJ: return rlx__tc_step_obj(p);
    case M_OBJ_REST: return rlx__tc_step_obj_rest(p);
    case M_ARR: return rlx__tc_step_arr(p);
    case M_BODY: return rlx__tc_step_body(p);
    case M_NAME: return step_name(p);
    case M_ARGS_PRE: return step_args_pre(p);
    case M_ARGS: return step_args(p);
    case M_TAIL: return step_tail(p);
    default: return rlx__tc_step_mode(p);
    }
}

static int run(rlx_tc_parser *p)
{
    while (!p->stop && !p->oom && step(p)) {}
    if (p->oom) return RLX_ENOMEM;
    if (p->stop) return p->stop;
    /* drop what is consumed; a call not yet reported keeps its text from the start marker */
    bool keep_raw = p->mode != M_TEXT && p->mode != M_REASON && p->mode != M_ARGS && p->mode != M_TAIL
                    && p->mode != M_XML_PARAMS && p->mode != M_OBJ_REST;
    size_t k = keep_raw && p->raw < p->pos ? p->raw : p->pos;
    if (p->drop_pending && p->drop_at < k) k = p->drop_at; /* a call may still open after it */
    if (k && (k > 4096 || k == p->in.len)) {
        memmove(p->in.p, p->in.p + k, p->in.len - k);
        p->in.len -= k;
        p->pos -= k;
        p->raw = p->raw >= k ? p->raw - k : 0;
        p->drop_at = p->drop_at >= k ? p->drop_at - k : 0;
        p->vstart = p->vstart >= k ? p->vstart - k : 0;
        p->scan = p->scan >= k ? p->scan - k : 0;
    }
    return 0;
}

uint64_t rlx_tc_prompt_hash(const char *prompt)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *c = (const unsigned char *)(prompt ? prompt : ""); *c; c++) h = (h ^ *c) * 0x100000001b3ull;
    return h ? h : 1;
}

rlx_tc_parser *rlx_tc_parser_new(const rlx_tc_info *info, const rlx_tc_opts *opts)
{
    rlx_tc_parser *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->info = *info;
    p->sp = rlx__tc_spec_of(info->format);
    p->at_start = true;
    p->reasoning_only = opts && opts->reasoning_only;
    if (opts && opts->reasoning_raw && info->format != RLX_TC_GPT_OSS)
        p->info.thinks = false; /* the reasoning block stays in the content, as text */
    if (rlx__tc_buf_add(&p->in, "", 0)) { free(p); return NULL; } /* in.p is never NULL */
    if (opts && opts->tools && !(p->tools = cJSON_Duplicate(opts->tools, true))) {
        free(p->in.p);
        free(p);
        return NULL;
    }
    static _Atomic uint64_t counter;
    const char *prompt = opts ? opts->prompt : NULL;
    if (opts && opts->seeded) {
        /* the seed and the prompt (FNV-1a): the same request gives the same ids, and an agent
         * that sends one seed on every turn still gets new ids as its history grows (ids from
         * the seed alone repeated the first turn's in every later one) */
        p->rng = opts->seed ^ (opts->prompt_hash ? opts->prompt_hash : rlx_tc_prompt_hash(prompt));
    } else {
        p->rng = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)p << 16) ^ (atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull);
    }
    if (opts && opts->in_reasoning && p->info.thinks && info->reasoning_close) {
        p->mode = M_REASON; /* the text goes on where the final message stopped: no whitespace dropped */
        p->rclose = info->reasoning_close;
    } else if (rlx_tc_prompt_opens_reasoning(&p->info, prompt)) {
        p->mode = M_REASON;
        p->reason_ws = true;
        p->reopen = true;
        p->rclose = info->reasoning_close;
    } else if (info->format == RLX_TC_FUNCTIONARY_V32 && prompt && !p->reasoning_only) {
        size_t n = strlen(prompt);
        if (n >= 3 && !memcmp(prompt + n - 3, ">>>", 3)) {
            p->st = &p->sp->starts[0];
            p->name_end = p->st->name_end;
            p->mode = M_NAME;
        }
    } else if (info->format == RLX_TC_GPT_OSS && prompt) {
        /* the prompt ends inside a harmony header (<|start|>assistant): the output goes on with
           it, a recipient (" to=functions.NAME<|channel|>commentary ...") or a channel, up to
           <|message|>; a text without one is content (the header's fallback) */
        static const char hdr[] = "<|start|>assistant";
        size_t n = strlen(prompt);
        if (n >= sizeof hdr - 1 && !memcmp(prompt + n - (sizeof hdr - 1), hdr, sizeof hdr - 1)) p->mode = M_HHEAD;
    }
    return p;
}

void rlx_tc_parser_free(rlx_tc_parser *p)
{
    if (!p) return;
    cJSON_Delete(p->tools);
    free(p->in.p);
    free(p->name.p);
    free(p->out.p);
    free(p->pname.p);
    free(p->args.p);
    for (int i = 0; i < 3; i++) free(p->carry[i].p);
    free(p);
}

rlx_tc_where rlx_tc_position(const rlx_tc_parser *p)
{
    switch (p->mode) {
    case M_TEXT:
    case M_TENT: /* maybe a call: the text decides when the value closes */
    case M_TAIL:
    case M_HHEAD: return RLX_TC_IN_CONTENT;
    case M_REASON: return RLX_TC_IN_REASONING;
    default: return RLX_TC_IN_CALL;
    }
}

const char *rlx_tc_broken(const rlx_tc_parser *p)
{
    return p->n_broken && !p->final ? p->broken : NULL;
}

int rlx_tc_feed(rlx_tc_parser *p, const char *text, size_t len, rlx_tc_sink sink, void *user)
{
    if (p->final) return RLX_EINVAL;
    p->sink = sink;
    p->user = user;
    if (rlx__tc_buf_add(&p->in, text, len)) return RLX_ENOMEM;
    return run(p);
}

int rlx_tc_finish(rlx_tc_parser *p, rlx_tc_sink sink, void *user, rlx_error *err)
{
    if (p->final) return RLX_EINVAL;
    p->sink = sink;
    p->user = user;
    p->final = true;
    int rc = run(p);
    if (rc) return rlx_errorf(err, rc, "tool-call parser: %s", rc == RLX_ENOMEM ? "out of memory" : "stopped");
    for (int ch = 0; ch < 3; ch++) rlx__tc_text(p, ch, "", 0, true);
    if (p->stop) return p->stop;
    if (p->n_broken)
        return rlx_errorf(err, RLX_EFORMAT, "%s%s", p->broken, p->n_broken > 1 ? " (and more)" : "");
    return 0;
}
