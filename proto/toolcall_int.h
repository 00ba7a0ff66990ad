/* toolcall_int.h - internals of proto/toolcall.c shared by its files: the per-format table
 * (toolcall_detect.c) and the incremental JSON scanner and text helpers (toolcall_json.c).
 * Everything here is pure (no allocation except where the comment says so). */
#ifndef RLX_TOOLCALL_INT_H
#define RLX_TOOLCALL_INT_H

#include "proto/toolcall.h"

/* Qwen3-Coder's XML calls: whether a parameter of this schema is written as raw text (a string
 * type, or none) rather than JSON; a local $ref (#/$defs/X, #/definitions/X of the tool's
 * parameters) is decided by its target. The grammar and the parser read values alike. */
bool rlx__tc_param_is_text(const cJSON *schema, const cJSON *params);

/* How the text after a call's start marker reads. */
typedef enum rlx__tc_body {
    RLX__TC_HYBRID,  /* a JSON object or array of {"name","arguments"} objects, or name + name_end + JSON args */
    RLX__TC_NAME,    /* name + name_end + JSON args */
    RLX__TC_XML,     /* <function=N><parameter=P>v</parameter>...</function> */
    RLX__TC_PYTAG,   /* a JSON call object, or python code (call "python" {"code": ...}) */
} rlx__tc_body;

typedef struct rlx__tc_start {
    const char *marker;
    rlx__tc_body body;
    const char *name_end;  /* NAME/HYBRID: what ends the name (NULL: the body must be JSON) */
} rlx__tc_start;

typedef struct rlx__tc_spec {
    rlx_tc_format format;
    const char *name;
    bool thinks;
    rlx__tc_start starts[3];
    const char *drops[6];  /* markers removed from content */
    const char *tails[3];  /* optional markers consumed, in order, after a call */
    const char *code_end[3]; /* PYTAG code ends at these */
    bool json_at_start;    /* the whole output may be one JSON call object */
} rlx__tc_spec;

const rlx__tc_spec *rlx__tc_spec_of(rlx_tc_format f);

/* Incremental scanner of one JSON value, byte by byte. It checks bracket nesting and string
 * syntax only (the caller validates with a real parser where it needs to). */
typedef struct rlx__jscan {
    int depth;
    bool started, in_str, esc, scalar, done, bad;
    char stack[128];       /* '{' or '[' per open level */
} rlx__jscan;

typedef enum { RLX__JS_SKIP, RLX__JS_KEEP, RLX__JS_END_BEFORE } rlx__js_res;
/* Feeds c: SKIP (whitespace outside strings: not part of the compact text), KEEP (part of it;
 * s->done when it completed the value), END_BEFORE (a scalar ended before c, c not consumed).
 * Sets s->bad (and returns SKIP) on a byte no JSON value can have there. */
rlx__js_res rlx__jscan_feed(rlx__jscan *s, unsigned char c);

/* Growable byte buffer. */
typedef struct rlx__tc_buf { char *p; size_t len, cap; } rlx__tc_buf;
int rlx__tc_buf_add(rlx__tc_buf *b, const void *s, size_t n);   /* 0 or RLX_ENOMEM; s NULL: n bytes reserved, unwritten */
int rlx__tc_buf_str(rlx__tc_buf *b, const char *s);
/* Appends s as a JSON string literal (quotes, escapes). */
int rlx__tc_buf_json_str(rlx__tc_buf *b, const char *s, size_t n);
/* Appends control character c (< 0x20) escaped as JSON writes it inside a string. */
int rlx__tc_ctl_escape(rlx__tc_buf *b, unsigned char c);
/* Appends the compact form of the JSON text s (whitespace outside strings dropped; a raw
 * control character inside a string, which JSON parsers refuse, escaped). */
int rlx__tc_buf_minify(rlx__tc_buf *b, const char *s, size_t n);
/* Whether s[0..n) is one JSON value as RFC 8259 writes it (the numbers of its grammar, true,
 * false, null; no NaN or Infinity), as a client's JSON.parse of the arguments takes it. */
bool rlx__tc_json_strict(const char *s, size_t n);

/* End of the JSON value starting at s[i] (after whitespace), or 0 when there is none or it is
 * malformed (brackets); a scalar may run to n. */
size_t rlx__tc_value_end(const char *s, size_t n, size_t i);
/* In a complete JSON object text, the span [*a, *b) of the value of key (first match), or
 * false. */
bool rlx__tc_obj_field(const char *s, size_t n, const char *key, size_t *a, size_t *b);

/* The head of a call object whose arguments can stream: '{' "name" ':' a JSON string (at most
 * name_max bytes, quotes included) ',' ("arguments" | "parameters") ':' '{', whitespace between.
 * 1: s[0..n) holds one; [*na, *nb) is the name's string (quotes included) and *args the
 * offset of the arguments' '{'. 0: s[0..n) is a proper prefix of one. -1: it is not one (the
 * object is read whole when it closes). */
int rlx__tc_obj_head(const char *s, size_t n, size_t name_max, size_t *na, size_t *nb, size_t *args);

/* Length of the longest proper prefix of marker that s[0..n) ends with. */
size_t rlx__tc_partial(const char *s, size_t n, const char *marker);
/* Number of bytes at the end of s[0..n) that begin an unfinished UTF-8 sequence. */
size_t rlx__tc_utf8_tail(const char *s, size_t n);

#endif
