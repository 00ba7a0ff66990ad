/* json_schema_walk.h - the walk's state and the functions json_schema.c (types, enum,
 * composition, $ref), json_schema_scalar.c (formats, integers, numbers, strings) and
 * json_schema_obj.c (objects, arrays) share. Not a
 * public API; one rlx__js lives for one rlx_json_schema_to_gbnf call on the caller's thread.
 *
 * Every visit returns a malloc'd GBNF atom (a rule name or a literal) or NULL after
 * rlx__js_fail, which records the first error with the JSON pointer of the schema at fault. */
#ifndef RLX_JSON_SCHEMA_WALK_H
#define RLX_JSON_SCHEMA_WALK_H

#include "engine/json_schema_internal.h"
#include "engine/grammar.h"

enum { KW_UNKNOWN, KW_ANNOT, KW_DEFS, KW_TYPE, KW_ENUM, KW_COMB, KW_OBJ, KW_ARR, KW_STR, KW_NUM };
enum { T_NULL = 1, T_BOOL = 2, T_INT = 4, T_NUM = 8, T_STR = 16, T_ARR = 32, T_OBJ = 64, T_ALL = 127 };

typedef struct rlx__js {
    const cJSON *root;
    rlx_error *err;
    bool failed;
    int depth;                                          /* schemas being visited */
    char path[512];                                     /* JSON pointer of the current schema */
    rlx__sb rules;                                      /* "name ::= body" lines so far */
    size_t n_rules;
    struct { char *body, *name; } *dd;                  /* rules by body, to share equal ones */
    size_t n_dd, cap_dd;
    struct { char *ref, *name; } *refs;                 /* $ref targets already named */
    size_t n_refs, cap_refs;
} rlx__js;

bool rlx__js_fail(rlx__js *j, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
size_t rlx__js_push(rlx__js *j, const char *seg);      /* appends /seg to the path; returns the old length */
void rlx__js_pop(rlx__js *j, size_t at);
char *rlx__js_name(rlx__js *j, const char *hint);      /* a fresh rule name */
void rlx__js_define(rlx__js *j, const char *name, const char *body);
char *rlx__js_rule(rlx__js *j, const char *hint, char *body); /* takes body; returns its rule's name */
char *rlx__js_take(rlx__js *j, rlx__sb *b);
int rlx__js_family(const char *key);
unsigned rlx__js_value_type(const cJSON *v);
const cJSON *rlx__js_resolve(rlx__js *j, const char *ref);
bool rlx__js_counts(rlx__js *j, const cJSON *s, const char *kmin, const char *kmax, long long *mn, long long *mx);
/* The rule for the multiples of k (> 1) within integer bounds (json_schema_prim.c says which
 * cases it writes); NULL and a failure naming multipleOf for the others. */
char *rlx__js_multiples(rlx__js *j, long long k, bool has_lo, long long lo, bool has_hi, long long hi);
char *rlx__js_visit(rlx__js *j, const cJSON *s, const char *hint);
/* json_schema_scalar.c: a number format's NF_* (NF_NONE for any other name), and the visits of
 * one integer, number or string schema */
enum { NF_NONE, NF_INT32, NF_INT64, NF_FLOAT, NF_DOUBLE };
int rlx__js_numeric_format(const char *name);
char *rlx__js_integer(rlx__js *j, const cJSON *s);
char *rlx__js_number(rlx__js *j, const cJSON *s);
char *rlx__js_string(rlx__js *j, const cJSON *s);
char *rlx__js_object(rlx__js *j, const cJSON *s, const char *hint);
char *rlx__js_array(rlx__js *j, const cJSON *s, const char *hint);

#endif
