/* toolcall_p.h - the parser state of proto/toolcall.c, shared with toolcall_obj.c (JSON call
 * objects and lists) and toolcall_modes.c (the XML body, python code, gpt-oss headers). One
 * parser, one thread at a time. */
#ifndef RLX_TOOLCALL_P_H
#define RLX_TOOLCALL_P_H

#include "proto/toolcall_int.h"

#include <stdio.h>

enum rlx__tc_mode {
    M_TEXT,      /* content, watching for markers */
    M_REASON,    /* reasoning until rclose */
    M_TENT,      /* the output opened with '{': maybe a whole-output JSON call (Llama 3, generic) */
    M_BODY,      /* after a HYBRID/PYTAG start marker */
    M_NAME,      /* a function name until name_end */
    M_ARGS_PRE,  /* before the arguments object */
    M_ARGS,      /* streaming the arguments */
    M_OBJ,       /* a JSON call object or array */
    M_OBJ_REST,  /* a call object after its streamed arguments, up to its closing brace */
    M_ARR,       /* a JSON array of call objects after a start marker, between its elements */
    M_TAIL,      /* optional closing markers */
    M_XML_FN,    /* <function=NAME> */
    M_XML_PARAMS, /* <parameter=P>v</parameter> ... </function> */
    M_PY,        /* python code after <|python_tag|> */
    M_HHEAD,     /* gpt-oss: a message header until <|message|> */
};

struct rlx_tc_parser {
    const rlx__tc_spec *sp;
    rlx_tc_info info;
    cJSON *tools;             /* owned copy */
    rlx__tc_buf in;           /* text not yet dropped; offsets below index it */
    size_t pos;               /* consumed up to here */
    size_t raw, mlen;         /* the current call's start marker: offset and length */
    bool drop_pending;        /* a dropped marker (a section's opening) was the last thing read: */
    size_t drop_at;           /* its offset; a call starting right after it falls back to text
                                 from there, the marker included */
    size_t vstart, scan;      /* M_OBJ/M_TENT: the value's start, scanned up to */
    enum rlx__tc_mode mode;
    bool final, oom;
    bool ws_skip;             /* content's leading whitespace is dropped (after reasoning, calls) */
    bool at_start;            /* json_at_start formats: nothing but whitespace seen */
    bool reason_ws;           /* reasoning's leading whitespace is dropped */
    bool begun;               /* CALL_BEGIN sent for the current call */
    bool obj_whole;           /* M_OBJ: the object's head is not name-then-arguments: read whole */
    bool in_obj;              /* M_ARGS: the arguments of a call object (M_OBJ_REST follows) */
    bool in_arr;              /* the call object is an element of an array (M_ARR follows) */
    bool rest_fresh;          /* M_OBJ_REST: nothing but whitespace read after the arguments */
    bool arr_expect;          /* M_ARR: an element comes next (after '[' or ',') */
    int arr_calls;            /* calls the current array reported */
    bool reasoning_only;      /* rlx_tc_opts.reasoning_only: no call is looked for */
    bool reopen;              /* the prompt opened the reasoning: an open tag the output writes
                                 again first is no reasoning text (DeepSeek-R1's models do) */
    const char *rclose;       /* end of reasoning */
    const rlx__tc_start *st;  /* start marker of the current call */
    const char *name_end;
    rlx__jscan js;
    rlx__tc_buf name, out, pname;
    rlx__tc_buf args;         /* M_ARGS: the streamed arguments so far, checked whole at their end */
    int n_calls, n_params, tail_i;
    char id[32];
    rlx__tc_buf carry[3];     /* content, reasoning, arguments: unfinished UTF-8 */
    int n_broken;
    char broken[192];
    uint64_t rng;
    rlx_tc_sink sink;
    void *user;
    int stop;
};

bool rlx__tc_space(char c);
void rlx__tc_text(rlx_tc_parser *p, int ch, const char *s, size_t n, bool flush);
void rlx__tc_begin(rlx_tc_parser *p);
void rlx__tc_end(rlx_tc_parser *p);
void rlx__tc_broken(rlx_tc_parser *p, const char *why);
void rlx__tc_fallback(rlx_tc_parser *p, size_t upto);
int rlx__tc_set_name(rlx_tc_parser *p, const char *s, size_t n);
int rlx__tc_starts(const rlx_tc_parser *p, size_t i, const char *m);
size_t rlx__tc_skip_ws(const rlx_tc_parser *p, size_t i);
const char *rlx__tc_find(const char *s, size_t n, const char *m);
/* A function name's longest (bytes): past it, the text was not a call. */
enum { RLX__TC_NAME_MAX = 300 };
/* Steps of the JSON call bodies in toolcall_obj.c: M_BODY, M_OBJ / M_TENT, M_OBJ_REST, M_ARR. */
bool rlx__tc_step_body(rlx_tc_parser *p);
bool rlx__tc_step_obj(rlx_tc_parser *p);
bool rlx__tc_step_obj_rest(rlx_tc_parser *p);
bool rlx__tc_step_arr(rlx_tc_parser *p);
/* Steps of the modes in toolcall_modes.c (M_XML_FN, M_XML_PARAMS, M_PY, M_HHEAD). */
bool rlx__tc_step_mode(rlx_tc_parser *p);

#endif
