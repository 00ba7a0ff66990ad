/* test_toolcall_util.h - helpers of test_toolcall.c: run a parser over a text split into pieces
 * and collect what it reports, checking the event order as it goes. */
#ifndef TEST_TOOLCALL_UTIL_H
#define TEST_TOOLCALL_UTIL_H

#include "proto/proto.h"
#include "proto/toolcall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TC_MAX_CALLS 16 /* calls kept; later ones are only counted */

typedef struct tc_case {
    rlx_tc_format format;
    const char *name, *prompt, *text;
    const char *content, *reasoning;
    int n_calls;
    const char *names[TC_MAX_CALLS], *args[TC_MAX_CALLS];
    int rc;
    bool clean;                 /* content must hold no tag text */
} tc_case;

typedef struct tc_result {
    char *content, *reasoning;
    size_t content_len, reasoning_len;
    int n_calls, n_seen;        /* calls kept, calls reported */
    char *names[TC_MAX_CALLS], *args[TC_MAX_CALLS], ids[TC_MAX_CALLS][40];
    size_t args_len[TC_MAX_CALLS];
    int rc;
    int order_errors;           /* events out of order, deltas splitting UTF-8 */
    bool open;
} tc_result;

static inline void tc_append(char **s, size_t *n, const char *t, size_t k)
{
    *s = realloc(*s, *n + k + 1);
    memcpy(*s + *n, t, k);
    *n += k;
    (*s)[*n] = 0;
}

/* Whether a delta ends inside a UTF-8 sequence or starts with a continuation byte. */
static bool tc_check_utf8 = true; /* off for random bytes (the fuzzer) */

static inline bool tc_splits_utf8(const char *t, size_t n)
{
    if (!n) return true; /* empty deltas are not sent */
    if (!tc_check_utf8) return false;
    if (((unsigned char)t[0] & 0xc0) == 0x80) return true;
    return !rlx_api_utf8_valid(t, n);
}

static inline int tc_sink(void *user, const rlx_tc_event *ev)
{
    tc_result *r = user;
    switch (ev->kind) {
    case RLX_TC_CONTENT:
        if (r->open || tc_splits_utf8(ev->text, ev->len)) r->order_errors++;
        tc_append(&r->content, &r->content_len, ev->text, ev->len);
        break;
    case RLX_TC_REASONING:
        if (r->open || tc_splits_utf8(ev->text, ev->len)) r->order_errors++;
        tc_append(&r->reasoning, &r->reasoning_len, ev->text, ev->len);
        break;
    case RLX_TC_CALL_BEGIN:
        if (r->open || ev->index != r->n_seen++) { r->order_errors++; break; }
        r->open = true;
        if (r->n_calls >= TC_MAX_CALLS) break;
        r->names[r->n_calls] = strdup(ev->name);
        r->args[r->n_calls] = strdup("");
        snprintf(r->ids[r->n_calls], sizeof r->ids[0], "%s", ev->id);
        r->n_calls++;
        break;
    case RLX_TC_CALL_ARGS:
        if (!r->open || ev->index != r->n_seen - 1 || tc_splits_utf8(ev->text, ev->len)) { r->order_errors++; break; }
        if (ev->index >= TC_MAX_CALLS) break;
        tc_append(&r->args[ev->index], &r->args_len[ev->index], ev->text, ev->len);
        break;
    case RLX_TC_CALL_END:
        if (!r->open || ev->index != r->n_seen - 1 || (ev->index < TC_MAX_CALLS && strcmp(ev->id, r->ids[ev->index])))
            r->order_errors++;
        r->open = false;
        break;
    }
    return 0;
}

static inline int tc_stop_sink(void *user, const rlx_tc_event *ev)
{
    (void)user, (void)ev;
    return 7;
}

/* Parses text fed in pieces: seed 0 whole, else random lengths 1..12 (bytes != 0: all of that
 * size). The parser's ids are seeded with 42. */
static inline void tc_run_with(const tc_case *c, const rlx_tc_info *given, const char *tools_json, const char *text, size_t n,
                               uint64_t seed, size_t bytes, tc_result *r)
{
    memset(r, 0, sizeof *r);
    r->content = strdup("");
    r->reasoning = strdup("");
    rlx_tc_info info;
    if (given) {
        info = *given;
    } else {
        rlx_tc_info_of(c->format, &info);
        if (c->prompt) { /* the thinking variants of formats */
            info.thinks = true;
            if (!info.reasoning_open) info.reasoning_open = "<think>", info.reasoning_close = "</think>";
        }
    }
    cJSON *tools = tools_json ? cJSON_Parse(tools_json) : NULL;
    rlx_tc_opts o = {.tools = tools, .prompt = c->prompt, .seeded = true, .seed = 42};
    rlx_tc_parser *p = rlx_tc_parser_new(&info, &o);
    cJSON_Delete(tools);
    size_t at = 0;
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    while (at < n) {
        size_t k = n - at;
        if (seed) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            k = bytes ? bytes : 1 + s % 12;
            if (k > n - at) k = n - at;
        }
        if (rlx_tc_feed(p, text + at, k, tc_sink, r)) r->order_errors++;
        at += k;
    }
    rlx_error err = {0};
    r->rc = rlx_tc_finish(p, tc_sink, r, &err);
    if (r->rc && !err.msg[0]) r->order_errors++;
    if (r->open) r->order_errors++;
    rlx_tc_parser_free(p);
}

static inline void tc_run_n(const tc_case *c, const char *tools_json, const char *text, size_t n, uint64_t seed, size_t bytes,
                            tc_result *r)
{
    tc_run_with(c, NULL, tools_json, text, n, seed, bytes, r);
}

static inline void tc_run(const tc_case *c, const char *tools_json, const char *text, uint64_t seed, size_t bytes, tc_result *r)
{
    tc_run_n(c, tools_json, text, strlen(text), seed, bytes, r);
}

/* With a detected format (its reasoning markers), in random pieces (seed 0: whole). */
static inline void tc_run_info(const tc_case *c, const rlx_tc_info *info, const char *text, uint64_t seed, tc_result *r)
{
    tc_run_with(c, info, NULL, text, strlen(text), seed, 0, r);
}

static inline void tc_result_free(tc_result *r)
{
    free(r->content);
    free(r->reasoning);
    for (int i = 0; i < r->n_calls; i++) free(r->names[i]), free(r->args[i]);
}

static const char *const tc_tags[] = {"<tool_call", "</tool_call", "[TOOL_CALLS]", "[ARGS]", "<|", "<\xef\xbd\x9c", "<function",
                                      "</function", ">>>", "<think", "</think", "functools", "<parameter", NULL};

/* The whole-text result against the case's expectations. */
static inline int tc_check(const tc_case *c, const tc_result *r)
{
    int bad = 0;
#define TC_EXPECT(cond, ...) do { if (!(cond)) { fprintf(stderr, "  %s/%s: ", rlx_tc_format_name(c->format), c->name); \
    fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); bad++; } } while (0)
    TC_EXPECT(!strcmp(r->content, c->content), "content \"%s\", want \"%s\"", r->content, c->content);
    TC_EXPECT(!strcmp(r->reasoning, c->reasoning), "reasoning \"%s\", want \"%s\"", r->reasoning, c->reasoning);
    TC_EXPECT(r->n_calls == c->n_calls, "%d calls, want %d", r->n_calls, c->n_calls);
    TC_EXPECT(r->rc == c->rc, "rc %d, want %d", r->rc, c->rc);
    TC_EXPECT(!r->order_errors, "%d events out of order or splitting UTF-8", r->order_errors);
    for (int i = 0; i < r->n_calls && i < c->n_calls; i++) {
        TC_EXPECT(!strcmp(r->names[i], c->names[i]), "call %d name \"%s\", want \"%s\"", i, r->names[i], c->names[i]);
        TC_EXPECT(!strcmp(r->args[i], c->args[i]), "call %d args '%s', want '%s'", i, r->args[i], c->args[i]);
        if (!c->rc) {
            cJSON *j = cJSON_Parse(r->args[i]);
            TC_EXPECT(cJSON_IsObject(j), "call %d args are not a JSON object", i);
            cJSON_Delete(j);
        }
    }
    for (int k = 0; c->clean && tc_tags[k]; k++)
        TC_EXPECT(!strstr(r->content, tc_tags[k]), "content holds tag text %s", tc_tags[k]);
    return bad;
}

/* A streamed result against the whole one. */
static inline int tc_same(const tc_case *c, const tc_result *w, const tc_result *r, uint64_t seed)
{
    int bad = 0;
    TC_EXPECT(!strcmp(w->content, r->content), "seed %llu: content \"%s\", whole \"%s\"", (unsigned long long)seed, r->content, w->content);
    TC_EXPECT(!strcmp(w->reasoning, r->reasoning), "seed %llu: reasoning \"%s\", whole \"%s\"", (unsigned long long)seed,
              r->reasoning, w->reasoning);
    TC_EXPECT(w->n_seen == r->n_seen && w->n_calls == r->n_calls && w->rc == r->rc && !r->order_errors, "seed %llu: %d calls rc %d (%d order errors), whole %d rc %d",
              (unsigned long long)seed, r->n_calls, r->rc, r->order_errors, w->n_calls, w->rc);
    for (int i = 0; !bad && i < r->n_calls; i++) {
        TC_EXPECT(!strcmp(w->names[i], r->names[i]) && !strcmp(w->args[i], r->args[i]) && !strcmp(w->ids[i], r->ids[i]),
                  "seed %llu: call %d %s '%s', whole %s '%s'", (unsigned long long)seed, i, r->names[i], r->args[i], w->names[i], w->args[i]);
    }
    return bad;
}

#endif
