/* jinja_ast.h - private to the chat template interpreter: tokens, the syntax tree, and the
 * entry points of the lexer, parser and evaluator.
 *
 * Ownership: tokens and nodes are allocated in the template's parse arena (an rj_rt used only
 * for allocation and errors) and live as long as the rlx_chat_template; after parsing they are
 * never modified, so several threads may evaluate one tree at once. */
#ifndef RLX_JINJA_AST_H
#define RLX_JINJA_AST_H

#include "models/jinja_value.h"

typedef enum rj_tok_type {
    TK_EOF, TK_DATA, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP,
} rj_tok_type;

typedef struct rj_token {
    uint8_t type;
    int line;
    const char *p;   /* DATA/STRING: the (decoded) text; NAME/OP: the source text */
    size_t n;
    int64_t i;       /* TK_INT (INT64_MAX when it does not fit) */
    rj_value num;    /* TK_INT: the exact value, int or big int */
    double f;        /* TK_FLOAT */
} rj_token;

typedef struct rj_tokens { rj_token *v; size_t n, cap; } rj_tokens;

/* Splits normalized source into tokens with Jinja2's whitespace control applied
 * (trim_blocks, lstrip_blocks, {%- -%}, comments and raw blocks removed or turned into data). */
void rlx__j_lex(rj_rt *rt, const char *src, size_t len, rj_tokens *out);

typedef enum rj_kind {
    /* expressions */
    N_CONST, N_NAME, N_LIST, N_TUPLE, N_DICT, N_PAIR, N_KWARG, N_ATTR, N_SUBSCRIPT, N_SLICE,
    N_CALL, N_FILTER, N_TEST, N_NOT, N_NEG, N_POS, N_BINOP, N_COMPARE, N_AND, N_OR, N_COND,
    /* statements */
    S_DATA, S_PRINT, S_IF, S_FOR, S_SET, S_SET_BLOCK, S_MACRO, S_CALL_BLOCK, S_FILTER_BLOCK,
    S_BREAK, S_CONTINUE, S_WITH, S_GENERATION,
} rj_kind;

/* S_MACRO flags in rj_node.op: the body reads `kwargs` / `varargs` (extra arguments land there) or `caller` */
enum { RJ_MACRO_KWARGS = 1, RJ_MACRO_VARARGS = 2, RJ_MACRO_CALLER = 4 };

/* binary operators and comparisons (rj_node.op) */
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
       OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN };

typedef struct rj_node rj_node;
typedef struct rj_nodes { rj_node **v; size_t n, cap; } rj_nodes;

struct rj_node {
    uint8_t kind;
    uint8_t op;        /* N_BINOP/N_COMPARE operator */
    bool neg;          /* N_TEST: `is not` */
    int line;
    rj_value val;      /* N_CONST; S_DATA text */
    const char *name;  /* N_NAME, N_ATTR, N_KWARG, N_FILTER, N_TEST, S_MACRO; S_SET: attribute of a namespace */
    size_t nlen;
    rj_node *a, *b, *c;/* operands: see the parser for each kind */
    rj_nodes args;     /* items, call arguments (N_KWARG for keywords), dict pairs, macro parameters */
    rj_nodes body;     /* statements */
    rj_nodes else_body;
};

/* Parses the token stream into a statement list. Fails through rlx__j_fail (RLX_EFORMAT for
 * syntax errors, RLX_EUNSUPPORTED for Jinja constructs outside the supported subset). */
rj_nodes rlx__j_parse(rj_rt *rt, const rj_tokens *toks);

/* Load-time check of the filter, test and method names a parsed template uses (jinja_check.c). */
void rlx__j_check(rj_rt *rt, const rj_nodes *root);

/* ---- evaluator internals shared by jinja_eval.c, jinja_filters.c and jinja_methods.c ---- */

typedef struct rj_scope rj_scope;
typedef struct rj_env rj_env;

/* One evaluated call argument list: positional values and keyword name/value pairs. */
typedef struct rj_args {
    rj_value *pos;
    size_t npos;
    const char **kwn;
    size_t *kwl;
    rj_value *kwv;
    size_t nkw;
} rj_args;

/* keyword or positional argument `name` at position `idx` (-1: keyword only); NULL if absent */
const rj_value *rlx__j_arg(const rj_args *a, int idx, const char *name);

/* A macro value (or `caller`): its definition and the scope it closes over. */
typedef struct rj_macro_val {
    const rj_node *def;    /* S_MACRO or S_CALL_BLOCK (for `caller`) */
    rj_scope *closure;     /* scope the macro was defined in (live: later top-level sets are seen) */
} rj_macro_val;

/* Jinja2's environment.getattr / getitem in the immutable sandbox: attribute first for
 * obj.name (so d.items is the method even when d has a key 'items'), item first for obj[key];
 * Python methods come back as RJ_METHOD, mutating ones as an undefined that says why. */
rj_value rlx__j_getattr(rj_env *env, rj_value obj, const char *name, size_t n);
rj_value rlx__j_getitem(rj_env *env, rj_value obj, rj_value key);
/* Python's getattr alone (no item fallback): *found tells whether obj has the attribute */
rj_value rlx__j_pyattr(rj_env *env, rj_value obj, const char *name, size_t n, bool *found);

/* RJ_GEN: a single-use iterator, as Jinja2's filters return generators. Eager ones hold their
 * items (reversed(), batch, slice, unique, dict|items); lazy ones (map, select, reject,
 * selectattr, rejectattr) compute each item when it is taken, from a source that may itself
 * be lazy, so errors surface when Python's would. */
enum { RJ_GEN_EAGER, RJ_GEN_MAP, RJ_GEN_SELECT, RJ_GEN_REJECT, RJ_GEN_SELECTATTR, RJ_GEN_REJECTATTR };
typedef struct rj_gen {
    const char *type_name; /* Python's: "generator", "list_reverseiterator", ... */
    int kind;              /* RJ_GEN_* */
    rj_list *items;        /* eager: the items; lazy: the source's items once started (NULL: source is a generator) */
    size_t pos;            /* next index into items */
    bool started, done;
    rj_env *env;           /* lazy: applies the filters and tests */
    rj_value src;          /* lazy: what the filter was applied to */
    rj_args args;          /* lazy: the filter's arguments */
} rj_gen;
bool rlx__j_gen_next(rj_rt *rt, rj_gen *g, rj_value *out);
rj_value rlx__j_gen_of(rj_rt *rt, rj_list *items, const char *type_name);

/* Python's method names by receiver type, for bound-method lookup and the load-time check of
 * `x.name(...)` calls: true when `name` is a method the interpreter implements for some type. */
bool rlx__j_is_py_method(rj_value self, const char *name, size_t n);    /* Python has it */
bool rlx__j_is_unsafe_method(rj_value self, const char *name, size_t n); /* it mutates */
bool rlx__j_has_method(const char *name, size_t n);                     /* implemented for some type */

/* Filters and tests take the subject plus arguments. env is needed by map/select (which apply
 * other filters/tests). Unknown names fail with RLX_EUNSUPPORTED (the parser rejects them
 * already, where the name is written in the template). */
rj_value rlx__j_filter(rj_env *env, const char *name, size_t nlen, rj_value v, const rj_args *a);
bool rlx__j_test(rj_env *env, const char *name, size_t nlen, rj_value v, const rj_args *a);
bool rlx__j_has_filter(const char *name, size_t nlen);
bool rlx__j_has_test(const char *name, size_t nlen);

/* filters over iterables (jinja_iter.c) */
rj_value rlx__j_attr_getter(rj_env *env, rj_value item, rj_value attr); /* make_attrgetter: "a.0.b", or an int */
/* make_attrgetter with ignore_case unless case_sensitive, and a default (attr NULL: the item) */
rj_value rlx__j_attr_key(rj_env *env, rj_value item, const rj_value *attr, const rj_value *dflt, bool case_sensitive);
/* make_multi_attrgetter: "a.b,c" gives the list [item.a.b, item.c] */
rj_value rlx__j_multi_attr_key(rj_env *env, rj_value item, const rj_value *attr, bool case_sensitive);
rj_value rlx__j_f_map(rj_env *env, rj_value v, const rj_args *a);
rj_value rlx__j_f_select(rj_env *env, rj_value v, const rj_args *a, int kind);
rj_value rlx__j_f_batch(rj_env *env, rj_value v, const rj_args *a);
rj_value rlx__j_f_slice(rj_env *env, rj_value v, const rj_args *a);
rj_value rlx__j_f_unique(rj_env *env, rj_value v, const rj_args *a);
rj_value rlx__j_f_items(rj_env *env, rj_value v, const rj_args *a);
rj_value rlx__j_f_reverse(rj_env *env, rj_value v, const rj_args *a);
rj_value rlx__j_f_wordwrap(rj_env *env, rj_value v, const rj_args *a);
/* striptags and urlencode (jinja_html.c) */
rj_value rlx__j_f_striptags(rj_env *env, rj_value v, const rj_args *a);
rj_value rlx__j_f_urlencode(rj_env *env, rj_value v, const rj_args *a);

/* obj.name(args) for strings, dicts and lists; fails for unknown or unsafe methods. */
rj_value rlx__j_method(rj_env *env, rj_value obj, const char *name, size_t nlen, const rj_args *a);
/* builtin globals */
enum { FN_RANGE, FN_NAMESPACE, FN_DICT, FN_RAISE, FN_STRFTIME, FN_JOINER, FN_CYCLER };
rj_value rlx__j_call_builtin(rj_env *env, int fn, const rj_args *a);
/* Calls any callable value (macro or builtin). */
rj_value rlx__j_call_value(rj_env *env, rj_value f, const rj_args *a);

rj_rt *rlx__j_env_rt(rj_env *env);

/* operators (jinja_ops.c) */
_Noreturn void rlx__j_fail_undefined(rj_rt *rt, rj_value u);
rj_value rlx__j_binop(rj_env *env, int op, rj_value a, rj_value b); /* OP_ADD .. OP_POW */
rj_value rlx__j_concat(rj_rt *rt, rj_value a, rj_value b);        /* two strings, or two lists */
bool rlx__j_contains(rj_rt *rt, rj_value needle, rj_value hay);
rj_value rlx__j_slice(rj_rt *rt, rj_value obj, rj_value lo, rj_value hi, rj_value step);

/* Renders a statement list into out with the given context. */
void rlx__j_render(rj_rt *rt, const rj_nodes *root, rj_value ctx, rj_buf *out);

#endif
