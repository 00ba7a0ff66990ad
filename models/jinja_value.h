/* jinja_value.h - private to the chat template interpreter: the runtime (arena + error exit),
 * Python-like values, and their conversions (str/repr, tojson, truthiness, comparisons).
 *
 * Ownership: every value, string and container made while rendering lives in the runtime's
 * arena and is freed at once when the render ends; nothing here calls free() on a value.
 * Strings are UTF-8 with an explicit length (not NUL-terminated). Errors leave through
 * rlx__j_fail(), which longjmps back to the render entry point, so helpers never return error
 * codes; the arena guarantees nothing leaks on that path. */
#ifndef RLX_JINJA_VALUE_H
#define RLX_JINJA_VALUE_H

#include "backends/rlx.h"

#include <cjson/cJSON.h>
#include <setjmp.h>
#include <string.h>

typedef struct rj_chunk rj_chunk;

typedef struct rj_rt {
    rj_chunk *chunks;      /* arena: newest first */
    size_t used;           /* bytes handed out, bounded by limit */
    size_t limit;
    jmp_buf jb;            /* where rlx__j_fail() lands */
    int code;              /* the RLX_E* code of that failure */
    rlx_error *err;
    int depth;             /* nesting of expression/statement/macro evaluation */
    const char *now_iso;   /* strftime_now's clock; NULL: the current time */
    int line;              /* template line being evaluated, for messages */
    double deadline;       /* rlx_now() past which a render fails (0: none) */
    unsigned ticks;        /* evaluations, to read the clock every 64 */
    struct { const char *p; size_t n; } undef_seen[4]; /* recent undefineds' messages, shared */
    unsigned undef_next;
} rj_rt;

/* A render may take this long (the arena bounds its memory, this its time: a template looping
 * over a big string never allocates past the limit but may never end either). */
#define RJ_RENDER_SECONDS 10.0

enum { RJ_MAX_DEPTH = 600 };

_Noreturn void rlx__j_fail(rj_rt *rt, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void *rlx__j_alloc(rj_rt *rt, size_t n);      /* zeroed, 16-byte aligned */
void rlx__j_arena_free(rj_rt *rt);
char *rlx__j_strdup(rj_rt *rt, const char *p, size_t n); /* NUL-terminated copy */

typedef enum rj_type {
    RJ_UNDEF, RJ_NONE, RJ_BOOL, RJ_INT, RJ_FLOAT, RJ_STR, RJ_LIST, RJ_DICT,
    RJ_NS,      /* namespace(): a dict whose attributes may be assigned */
    RJ_MACRO,   /* a template macro (or `caller`) */
    RJ_FUNC,    /* a builtin global: range, namespace, dict, raise_exception, ... */
    RJ_LOOP,    /* the `loop` variable of a for loop */
    RJ_OBJ,     /* a stateful global object: joiner() or cycler() */
    RJ_BIGINT,  /* an int outside int64 (v.big); RJ_INT never holds a value that fits here */
    RJ_METHOD,  /* a bound method looked up without a call: d.items, s.upper (v.meth) */
    RJ_GEN,     /* a single-use iterator: map/select/... results, reversed(), dict|items (v.gen) */
} rj_type;

/* RJ_LIST values that Python knows as other types: printed, serialised and indexed as those */
enum { RJ_VIEW_NONE, RJ_VIEW_KEYS, RJ_VIEW_VALUES, RJ_VIEW_ITEMS, RJ_VIEW_RANGE };

struct rj_list;
struct rj_dict;
struct rj_macro_val;
struct rj_loop;
struct rj_big;
struct rj_gen;
struct rj_meth;

typedef struct rj_value {
    uint8_t type;
    uint8_t tuple;          /* RJ_LIST only: a tuple, printed with parentheses */
    uint8_t safe;           /* RJ_STR only: markupsafe.Markup (|safe, |escape): `+` escapes plain operands */
    uint8_t view;           /* RJ_LIST only: RJ_VIEW_* (dict_keys, range, ...) */
    uint8_t grow;           /* RJ_STR only: made by ~ or +, its bytes follow an rj_grow header
                               (rlx__j_concat extends it in place) */
    union {
        bool b;
        int64_t i;
        double f;
        struct { const char *p; size_t n; } s; /* RJ_STR; RJ_UNDEF: why it is undefined (may be empty) */
        struct rj_list *l;
        struct rj_dict *d;  /* RJ_DICT, RJ_NS */
        struct rj_macro_val *m;
        int fn;
        struct rj_loop *loop;
        struct rj_obj *obj;
        struct rj_big *big;
        struct rj_meth *meth;
        struct rj_gen *gen;
    };
} rj_value;

typedef struct rj_list {
    size_t n, cap;
    rj_value *v;
    int64_t range[3];       /* RJ_VIEW_RANGE: start, stop, step as given to range() */
} rj_list;

/* RJ_BIGINT: sign and magnitude in 32-bit limbs, least significant first; n >= 1, d[n-1] != 0,
 * and the value lies outside int64 */
typedef struct rj_big { bool neg; size_t n; uint32_t d[]; } rj_big;

/* a bound method: self.name */
typedef struct rj_meth { rj_value self; const char *name; size_t n; } rj_meth;

/* joiner(sep): "" on the first call, sep afterwards; cycler(*items): next(), reset(), current */
typedef struct rj_obj {
    bool is_cycler;
    bool used;          /* joiner: called before */
    size_t pos;         /* cycler: index of current */
    rj_value sep;       /* joiner */
    rj_list *items;     /* cycler */
} rj_obj;
/* Ordered dict. Past a few entries it keeps an open-addressing index (slot -> entry + 1) so
 * that large contexts stay linear to load and look up. */
typedef struct rj_dict { size_t n, cap; rj_value *k, *v; uint32_t *index; size_t index_cap; } rj_dict;

/* A growable byte buffer in the arena. */
typedef struct rj_buf { char *p; size_t n, cap; } rj_buf;
void rlx__j_buf_put(rj_rt *rt, rj_buf *b, const char *s, size_t n);
static inline void rlx__j_buf_puts(rj_rt *rt, rj_buf *b, const char *s) { rlx__j_buf_put(rt, b, s, strlen(s)); }
void rlx__j_buf_printf(rj_rt *rt, rj_buf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* constructors */
static inline rj_value rj_undef(void) { rj_value v = {0}; v.type = RJ_UNDEF; return v; }
static inline rj_value rj_none(void) { rj_value v = {0}; v.type = RJ_NONE; return v; }
static inline rj_value rj_bool(bool b) { rj_value v = {0}; v.type = RJ_BOOL; v.b = b; return v; }
static inline rj_value rj_int(int64_t i) { rj_value v = {0}; v.type = RJ_INT; v.i = i; return v; }
static inline rj_value rj_float(double f) { rj_value v = {0}; v.type = RJ_FLOAT; v.f = f; return v; }
static inline rj_value rj_str(const char *p, size_t n) { rj_value v = {0}; v.type = RJ_STR; v.s.p = p; v.s.n = n; return v; }
static inline rj_value rj_cstr(const char *p) { return rj_str(p, strlen(p)); }
rj_value rlx__j_undef_named(rj_rt *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
rj_value rlx__j_new_list(rj_rt *rt, size_t cap);
rj_value rlx__j_new_dict(rj_rt *rt, size_t cap);
void rlx__j_list_push(rj_rt *rt, rj_list *l, rj_value v);
void rlx__j_dict_set(rj_rt *rt, rj_dict *d, rj_value k, rj_value v); /* replaces an equal key */
rj_value *rlx__j_dict_get(const rj_dict *d, rj_value k);          /* NULL if absent */
rj_value *rlx__j_dict_gets(const rj_dict *d, const char *key, size_t n);
/* A context value: numbers with their literal (models/json.h) keep Python's int/float types and
 * exact big ints; strings marked as holding NULs get them back. */
rj_value rlx__j_from_json(rj_rt *rt, const cJSON *j);

/* Stable merge sort of n values by keys (keys[i] belongs to v[i]; both are permuted);
 * cmp follows rlx__j_compare, reverse keeps equal keys in their original order. */
void rlx__j_sort(rj_rt *rt, rj_value *v, rj_value *keys, size_t n, bool reverse);

/* Python semantics */
bool rlx__j_truthy(rj_value v);
bool rlx__j_equal(rj_value a, rj_value b);
/* <0, 0, >0; fails like Python for unorderable types */
int rlx__j_compare(rj_rt *rt, rj_value a, rj_value b);
const char *rlx__j_type_name(rj_value v);
bool rlx__j_is_number(rj_value v); /* int, float or bool */
/* float -> int64 truncating toward zero, saturating where int64 ends (for counts and widths;
 * rlx__j_int_from_double gives Python's exact int()) */
static inline int64_t rj_trunc(double f)
{
    if (!(f == f)) return 0;
    if (f >= 9.2233720368547758e18) return INT64_MAX;
    if (f <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)f;
}
double rlx__j_num(rj_value v); /* int-like or float as a double (big ints rounded) */

/* ---- ints with Python's unbounded precision (jinja_int.c) ---- */
enum { RJ_INT_MAX_DIGITS = 4300 };  /* Python's default limit for printing an int */
enum { RJ_IADD, RJ_ISUB, RJ_IMUL, RJ_IFLOORDIV, RJ_IMOD };
bool rlx__j_is_int(rj_value v);     /* int, bool or big int */
rj_value rlx__j_int_parse(rj_rt *rt, const char *s, size_t n, int base); /* [+-]digits, '_' ignored */
rj_value rlx__j_int_op(rj_rt *rt, int op, rj_value a, rj_value b);      /* a, b int-like */
rj_value rlx__j_int_pow(rj_rt *rt, rj_value base, int64_t e);
double rlx__j_int_truediv(rj_rt *rt, rj_value a, rj_value b);         /* a / b correctly rounded */
rj_value rlx__j_int_neg(rj_rt *rt, rj_value a);
int rlx__j_int_cmp(rj_value a, rj_value b);
int rlx__j_int_cmp_float(rj_value a, double f);             /* 2: unordered (NaN) */
double rlx__j_int_to_double(rj_value v);                   /* correctly rounded; inf past DBL_MAX */
rj_value rlx__j_int_from_double(rj_rt *rt, double f);      /* Python's int(f) */
void rlx__j_int_str(rj_rt *rt, rj_buf *b, rj_value v);
void rlx__j_int_base(rj_rt *rt, rj_buf *b, rj_value v, int base, bool upper); /* digits of |v| */

/* str(v) appended to b; repr(v) appended to b */
void rlx__j_str(rj_rt *rt, rj_buf *b, rj_value v);
void rlx__j_repr(rj_rt *rt, rj_buf *b, rj_value v);
rj_value rlx__j_to_str(rj_rt *rt, rj_value v);   /* a string value: itself or str(v) */
void rlx__j_float_repr(char *out, size_t cap, double f); /* Python's repr(float) */

typedef struct rj_json_opts {
    const char *indent;    /* NULL: single line */
    const char *item_sep;  /* ", " or "," */
    const char *key_sep;   /* ": " */
    bool sort_keys;
    bool ensure_ascii;     /* escape non-ASCII as \uXXXX (transformers passes False by default) */
} rj_json_opts;
void rlx__j_tojson(rj_rt *rt, rj_buf *b, rj_value v, const rj_json_opts *o, int level);

/* HTML-escapes str(v) as markupsafe does; the result is marked safe. */
rj_value rlx__j_escape(rj_rt *rt, rj_value v);

/* UTF-8 helpers: the number of code points, and the byte offset of code point i (clamped). */
size_t rlx__j_utf8_len(const char *p, size_t n);
size_t rlx__j_utf8_off(const char *p, size_t n, size_t i);

/* Items to iterate over (list items, dict keys, string characters); fails for non-iterables. */
rj_list *rlx__j_iter(rj_rt *rt, rj_value v);

#endif
