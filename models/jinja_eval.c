/* jinja_eval.c - walks the syntax tree: scopes, statements, expressions, macros and loops.
 * Semantics follow Jinja2's runtime: `for` bodies and macros get their own scope (a fresh one
 * per iteration), `if` does not; undefined names print as nothing but fail on attribute
 * access; `and`/`or` return operands; attribute lookup falls back to item lookup. */
#include "models/jinja_ast.h"

#include <math.h>
#include <stdio.h>

struct rj_scope {
    rj_scope *parent;
    rj_dict vars;
    bool captured;         /* a macro or caller closes over it (or a scope inside it) */
};

typedef struct rj_loop {
    rj_list *items;
    size_t i;
    const rj_node *node;   /* the S_FOR, for loop(...) in recursive loops */
    rj_scope *outer;       /* scope the loop started in */
    int depth;             /* loop.depth: 1 + recursion level */
    rj_value changed_last; /* loop.changed(): the arguments of the previous call (undefined: none yet) */
    bool escaped;          /* `loop` was read as a value (not loop.x, loop(...)): it may outlive the loop */
} rj_loop;

enum { CTL_NONE, CTL_BREAK, CTL_CONTINUE };

/* The arena frees nothing before the render ends, so a loop run once per item of another
 * (templates that scan every message for each message: Command R7B's tool-call ids, Command A,
 * DeepSeek V3.2) would allocate per run and per item - past the render's limit on a long agent
 * conversation jinja2 renders. A loop reuses the frame (its loop object and item scope) the
 * last loop at its nesting level left, unless something may still refer to it: a closure over
 * the scope, or `loop` read as a value. */
enum { RJ_FOR_FRAMES = 32 };
typedef struct rj_for_frame { rj_loop *loop; rj_scope *scope; } rj_for_frame;

struct rj_env {
    rj_rt *rt;
    rj_buf *out;
    rj_scope *scope;
    int ctl;
    int for_depth;         /* loops running */
    rj_for_frame frames[RJ_FOR_FRAMES];
};

rj_rt *rlx__j_env_rt(rj_env *env) { return env->rt; }

static rj_value eval(rj_env *E, const rj_node *n);
static void exec_body(rj_env *E, const rj_nodes *body);
static rj_value call_loop(rj_env *E, rj_loop *L, const rj_args *a);

static void enter(rj_env *E, const rj_node *n)
{
    if (++E->rt->depth > RJ_MAX_DEPTH) {
        E->rt->line = n->line;
        rlx__j_fail(E->rt, RLX_ERANGE, "evaluation nests deeper than %d levels (runaway recursion?)", RJ_MAX_DEPTH);
    }
    if ((++E->rt->ticks & 63) == 0 && E->rt->deadline > 0 && rlx_now() > E->rt->deadline) {
        E->rt->line = n->line;
        rlx__j_fail(E->rt, RLX_ERANGE, "the template ran longer than %.0f s (a loop that does not end?)", RJ_RENDER_SECONDS);
    }
}

static rj_scope *push_scope(rj_env *E, rj_scope *parent)
{
    rj_scope *s = rlx__j_alloc(E->rt, sizeof *s);
    s->parent = parent;
    return s;
}

/* The scope a closure keeps: it and its parents are never reused. */
static rj_scope *capture(rj_scope *s)
{
    for (rj_scope *x = s; x && !x->captured; x = x->parent) x->captured = true;
    return s;
}

/* A loop's scope for its next item: the last one emptied, unless a closure kept it. */
static rj_scope *item_scope(rj_env *E, rj_scope *last, rj_scope *outer)
{
    if (!last || last->captured) return push_scope(E, outer);
    last->parent = outer;
    last->vars.n = 0;
    if (last->vars.index) memset(last->vars.index, 0, last->vars.index_cap * sizeof *last->vars.index);
    return last;
}

static void scope_set(rj_env *E, rj_scope *s, const char *name, size_t n, rj_value v)
{
    rlx__j_dict_set(E->rt, &s->vars, rj_str(name, n), v);
}

static const struct { const char *name; int fn; } builtins[] = {
    {"range", FN_RANGE}, {"namespace", FN_NAMESPACE}, {"dict", FN_DICT},
    {"raise_exception", FN_RAISE}, {"strftime_now", FN_STRFTIME}, {"joiner", FN_JOINER}, {"cycler", FN_CYCLER},
};

static rj_value lookup(rj_env *E, const char *name, size_t n)
{
    for (rj_scope *s = E->scope; s; s = s->parent) {
        rj_value *v = rlx__j_dict_gets(&s->vars, name, n);
        if (v) return *v;
    }
    for (size_t i = 0; i < RLX_ARRAY_LEN(builtins); i++)
        if (strlen(builtins[i].name) == n && !memcmp(builtins[i].name, name, n)) {
            rj_value f = {0};
            f.type = RJ_FUNC;
            f.fn = builtins[i].fn;
            return f;
        }
    return rlx__j_undef_named(E->rt, "'%.*s' is undefined", (int)RLX_MIN(n, (size_t)100), name);
}

_Noreturn static void fail_undefined(rj_env *E, rj_value u) { rlx__j_fail_undefined(E->rt, u); }

/* ---- attribute and item access ---- */

static rj_value loop_attr(rj_env *E, rj_loop *L, const char *a, size_t n)
{
    size_t len = L->items->n;
#define IS(s) (n == strlen(s) && !memcmp(a, s, n))
    if (IS("index")) return rj_int((int64_t)L->i + 1);
    if (IS("index0")) return rj_int((int64_t)L->i);
    if (IS("revindex")) return rj_int((int64_t)(len - L->i));
    if (IS("revindex0")) return rj_int((int64_t)(len - L->i - 1));
    if (IS("first")) return rj_bool(L->i == 0);
    if (IS("last")) return rj_bool(L->i + 1 == len);
    if (IS("length")) return rj_int((int64_t)len);
    if (IS("depth")) return rj_int(L->depth);
    if (IS("depth0")) return rj_int(L->depth - 1);
    if (IS("previtem")) return L->i > 0 ? L->items->v[L->i - 1] : rlx__j_undef_named(E->rt, "there is no previous item");
    if (IS("nextitem")) return L->i + 1 < len ? L->items->v[L->i + 1] : rlx__j_undef_named(E->rt, "there is no next item");
#undef IS
    return rlx__j_undef_named(E->rt, "'LoopContext' has no attribute '%.*s'", (int)RLX_MIN(n, (size_t)100), a);
}

static rj_value no_attr(rj_env *E, rj_value obj, const char *a, size_t n)
{
    return rlx__j_undef_named(E->rt, "'%s object' has no attribute '%.*s'", rlx__j_type_name(obj), (int)RLX_MIN(n, (size_t)100), a);
}

static rj_value macro_attr(rj_env *E, rj_value m, const char *a, size_t n, bool *found)
{
    const rj_node *def = m.m->def;
#define IS(s) (n == strlen(s) && !memcmp(a, s, n))
    if (IS("name")) return def->name ? rj_str(def->name, def->nlen) : rj_cstr("caller");
    if (IS("arguments")) {
        rj_value t = rlx__j_new_list(E->rt, def->args.n);
        t.tuple = 1;
        for (size_t i = 0; i < def->args.n; i++) rlx__j_list_push(E->rt, t.l, rj_str(def->args.v[i]->name, def->args.v[i]->nlen));
        return t;
    }
    if (IS("catch_kwargs")) return rj_bool(def->op & RJ_MACRO_KWARGS);
    if (IS("catch_varargs")) return rj_bool(def->op & RJ_MACRO_VARARGS);
    if (IS("caller")) return rj_bool(def->op & RJ_MACRO_CALLER);
#undef IS
    *found = false;
    return rj_undef();
}

/* a Python method of obj: bound, or an undefined that fails when called if it would mutate */
static rj_value method_ref(rj_env *E, rj_value obj, const char *a, size_t n)
{
    if (rlx__j_is_unsafe_method(obj, a, n))
        return rlx__j_undef_named(E->rt, "access to attribute '%.*s' of '%s' object is unsafe (templates cannot modify values)",
                                  (int)RLX_MIN(n, (size_t)60), a, rlx__j_type_name(obj));
    rj_value m = {0};
    m.type = RJ_METHOD;
    m.meth = rlx__j_alloc(E->rt, sizeof *m.meth);
    m.meth->self = obj;
    m.meth->name = a;
    m.meth->n = n;
    return m;
}

/* Python's getattr(obj, name) alone: methods and the attributes of template objects */
rj_value rlx__j_pyattr(rj_env *E, rj_value obj, const char *a, size_t n, bool *found)
{
    *found = true;
    if (n && a[0] == '_') { *found = false; return rj_undef(); } /* the sandbox hides private attributes */
    if (rlx__j_is_py_method(obj, a, n)) return method_ref(E, obj, a, n);
    switch (obj.type) {
    case RJ_LOOP: return loop_attr(E, obj.loop, a, n);
    case RJ_MACRO: return macro_attr(E, obj, a, n, found);
    case RJ_OBJ:
        if (obj.obj->is_cycler && n == 7 && !memcmp(a, "current", 7)) return obj.obj->items->v[obj.obj->pos];
        break;
    case RJ_NS: {
        rj_value *v = rlx__j_dict_gets(obj.d, a, n);
        if (v) return *v;
        break;
    }
    case RJ_LIST:
        if (obj.tuple == 2 && n == 7 && !memcmp(a, "grouper", 7)) return obj.l->v[0];
        if (obj.tuple == 2 && n == 4 && !memcmp(a, "list", 4)) return obj.l->v[1];
        break;
    default: break;
    }
    *found = false;
    return rj_undef();
}

rj_value rlx__j_getattr(rj_env *E, rj_value obj, const char *a, size_t n)
{
    if (obj.type == RJ_UNDEF) fail_undefined(E, obj);
    bool found;
    rj_value v = rlx__j_pyattr(E, obj, a, n, &found);
    if (found) return v;
    if (obj.type == RJ_DICT) { /* then obj[name] */
        rj_value *got = rlx__j_dict_gets(obj.d, a, n);
        if (got) return *got;
    }
    return no_attr(E, obj, a, n);
}

static int64_t norm_index(int64_t i, size_t len) { return i < 0 ? i + (int64_t)len : i; }

rj_value rlx__j_getitem(rj_env *E, rj_value obj, rj_value key)
{
    switch (obj.type) {
    case RJ_UNDEF: fail_undefined(E, obj);
    case RJ_LIST:
        if ((key.type == RJ_INT || key.type == RJ_BOOL) && (!obj.view || obj.view == RJ_VIEW_RANGE)) {
            int64_t i = norm_index(key.type == RJ_INT ? key.i : key.b, obj.l->n);
            if (i >= 0 && (size_t)i < obj.l->n) return obj.l->v[i];
            return rlx__j_undef_named(E->rt, "%s index out of range", obj.tuple ? "tuple" : obj.view ? "range object" : "list");
        }
        break;
    case RJ_STR:
        if (key.type == RJ_INT || key.type == RJ_BOOL) {
            size_t len = rlx__j_utf8_len(obj.s.p, obj.s.n);
            int64_t i = norm_index(key.type == RJ_INT ? key.i : key.b, len);
            if (i >= 0 && (size_t)i < len) {
                size_t x = rlx__j_utf8_off(obj.s.p, obj.s.n, (size_t)i), y = rlx__j_utf8_off(obj.s.p, obj.s.n, (size_t)i + 1);
                return rj_str(obj.s.p + x, y - x);
            }
            return rlx__j_undef_named(E->rt, "string index out of range");
        }
        break;
    case RJ_DICT: {
        rj_value *v = rlx__j_dict_get(obj.d, key);
        if (v) return *v;
        break;
    }
    default: break;
    }
    if (key.type == RJ_STR) { /* then getattr(obj, key) */
        bool found;
        rj_value v = rlx__j_pyattr(E, obj, key.s.p, key.s.n, &found);
        if (found) return v;
    }
    rj_buf b = {0};
    rlx__j_repr(E->rt, &b, key);
    /* Undefined's message: a string name is an attribute, anything else an element */
    return rlx__j_undef_named(E->rt, "'%s object' has no %s %.*s", rlx__j_type_name(obj), key.type == RJ_STR ? "attribute" : "element",
                              (int)RLX_MIN(b.n, (size_t)100), b.p);
}

/* ---- calls ---- */

const rj_value *rlx__j_arg(const rj_args *a, int idx, const char *name)
{
    if (idx >= 0 && (size_t)idx < a->npos) return &a->pos[idx];
    if (name)
        for (size_t i = 0; i < a->nkw; i++)
            if (a->kwl[i] == strlen(name) && !memcmp(a->kwn[i], name, a->kwl[i])) return &a->kwv[i];
    return NULL;
}

static void eval_args(rj_env *E, const rj_nodes *nodes, rj_args *out, size_t extra_kw)
{
    size_t npos = 0, nkw = 0;
    for (size_t i = 0; i < nodes->n; i++) nodes->v[i]->kind == N_KWARG ? nkw++ : npos++;
    out->pos = rlx__j_alloc(E->rt, (npos + 1) * sizeof(rj_value));
    out->kwn = rlx__j_alloc(E->rt, (nkw + extra_kw + 1) * sizeof(char *));
    out->kwl = rlx__j_alloc(E->rt, (nkw + extra_kw + 1) * sizeof(size_t));
    out->kwv = rlx__j_alloc(E->rt, (nkw + extra_kw + 1) * sizeof(rj_value));
    out->npos = out->nkw = 0;
    for (size_t i = 0; i < nodes->n; i++) {
        const rj_node *a = nodes->v[i];
        if (a->kind == N_KWARG) {
            out->kwn[out->nkw] = a->name;
            out->kwl[out->nkw] = a->nlen;
            out->kwv[out->nkw++] = eval(E, a->a);
        } else {
            out->pos[out->npos++] = eval(E, a);
        }
    }
}

static rj_value call_macro(rj_env *E, rj_macro_val *m, const rj_args *a)
{
    const rj_node *def = m->def;
    rj_scope *s = push_scope(E, m->closure);
    rj_scope *saved_scope = E->scope;
    E->scope = s;
    size_t np = def->args.n;
    int mn = def->name ? (int)def->nlen : 6;
    const char *mname = def->name ? def->name : "caller";
    bool catch_kwargs = def->op & RJ_MACRO_KWARGS, catch_varargs = def->op & RJ_MACRO_VARARGS;
    rj_value kwargs = rlx__j_new_dict(E->rt, 0), varargs = rlx__j_new_list(E->rt, 0);
    varargs.tuple = 1;
    if (a->npos > np) {
        if (!catch_varargs)
            rlx__j_fail(E->rt, RLX_EINVAL, "macro '%.*s' takes %zu argument(s) but was given %zu", mn, mname, np, a->npos);
        for (size_t i = np; i < a->npos; i++) rlx__j_list_push(E->rt, varargs.l, a->pos[i]);
    }
    for (size_t k = 0; k < a->nkw; k++) {
        if (a->kwl[k] == 6 && !memcmp(a->kwn[k], "caller", 6)) { scope_set(E, s, "caller", 6, a->kwv[k]); continue; }
        size_t j;
        for (j = 0; j < np; j++)
            if (def->args.v[j]->nlen == a->kwl[k] && !memcmp(def->args.v[j]->name, a->kwn[k], a->kwl[k])) break;
        if (j == np) {
            if (!catch_kwargs)
                rlx__j_fail(E->rt, RLX_EINVAL, "macro '%.*s' takes no keyword argument '%.*s'", mn, mname, (int)a->kwl[k], a->kwn[k]);
            rlx__j_dict_set(E->rt, kwargs.d, rj_str(a->kwn[k], a->kwl[k]), a->kwv[k]);
            continue;
        }
        if (j < a->npos)
            rlx__j_fail(E->rt, RLX_EINVAL, "macro '%.*s' got multiple values for argument '%.*s'", mn, mname, (int)a->kwl[k], a->kwn[k]);
    }
    if (catch_kwargs) scope_set(E, s, "kwargs", 6, kwargs);
    if (catch_varargs) scope_set(E, s, "varargs", 7, varargs);
    for (size_t j = 0; j < np; j++) {
        const rj_node *p = def->args.v[j];
        const rj_value *v = rlx__j_arg(a, (int)j, NULL);
        if (!v)
            for (size_t k = 0; k < a->nkw; k++)
                if (a->kwl[k] == p->nlen && !memcmp(a->kwn[k], p->name, p->nlen)) { v = &a->kwv[k]; break; }
        rj_value val;
        if (v) val = *v;
        else if (p->kind == N_KWARG) val = eval(E, p->a);
        else val = rlx__j_undef_named(E->rt, "parameter '%.*s' was not provided", (int)p->nlen, p->name);
        scope_set(E, s, p->name, p->nlen, val);
    }
    rj_buf out = {0}, *saved_out = E->out;
    rlx__j_buf_put(E->rt, &out, "", 0);
    E->out = &out;
    int saved_ctl = E->ctl;
    E->ctl = CTL_NONE;
    exec_body(E, &def->body);
    E->ctl = saved_ctl;
    E->out = saved_out;
    E->scope = saved_scope;
    return rj_str(out.p, out.n);
}

rj_value rlx__j_call_value(rj_env *E, rj_value f, const rj_args *a)
{
    if (f.type == RJ_MACRO) return call_macro(E, f.m, a);
    if (f.type == RJ_FUNC) return rlx__j_call_builtin(E, f.fn, a);
    if (f.type == RJ_LOOP) return call_loop(E, f.loop, a);
    if (f.type == RJ_METHOD) return rlx__j_method(E, f.meth->self, f.meth->name, f.meth->n, a);
    if (f.type == RJ_OBJ && !f.obj->is_cycler) { /* joiner() */
        bool first = !f.obj->used;
        f.obj->used = true;
        return first ? rj_str("", 0) : f.obj->sep;
    }
    if (f.type == RJ_UNDEF) fail_undefined(E, f);
    rlx__j_fail(E->rt, RLX_EINVAL, "'%s' object is not callable", rlx__j_type_name(f));
}

/* The object of x.attr or x(...): a name is looked up without counting as `loop` read as a
 * value (loop.index, loop.cycle(...), loop(...) leave the loop object where it is). */
static rj_value eval_base(rj_env *E, const rj_node *n)
{
    if (n->kind != N_NAME) return eval(E, n);
    enter(E, n);
    rj_value r = lookup(E, n->name, n->nlen);
    E->rt->depth--;
    return r;
}

static rj_value eval_call(rj_env *E, const rj_node *n, const rj_node *caller_block)
{
    rj_args args;
    eval_args(E, &n->args, &args, 1);
    if (caller_block) {
        rj_value c = {0};
        c.type = RJ_MACRO;
        c.m = rlx__j_alloc(E->rt, sizeof *c.m);
        c.m->def = caller_block;
        c.m->closure = capture(E->scope);
        args.kwn[args.nkw] = "caller";
        args.kwl[args.nkw] = 6;
        args.kwv[args.nkw++] = c;
    }
    const rj_node *f = n->a;
    if (f->kind == N_ATTR) {
        rj_value obj = eval_base(E, f->a);
        E->rt->line = n->line;
        if (obj.type == RJ_LOOP && f->nlen == 5 && !memcmp(f->name, "cycle", 5)) {
            if (!args.npos) rlx__j_fail(E->rt, RLX_EINVAL, "loop.cycle() needs at least one value");
            return args.pos[obj.loop->i % args.npos];
        }
        if (obj.type == RJ_LOOP && f->nlen == 7 && !memcmp(f->name, "changed", 7)) {
            rj_value now = rlx__j_new_list(E->rt, args.npos);
            for (size_t i = 0; i < args.npos; i++) rlx__j_list_push(E->rt, now.l, args.pos[i]);
            bool changed = !rlx__j_equal(now, obj.loop->changed_last);
            obj.loop->changed_last = now;
            return rj_bool(changed);
        }
        return rlx__j_call_value(E, rlx__j_getattr(E, obj, f->name, f->nlen), &args);
    }
    rj_value callee = eval_base(E, f);
    E->rt->line = n->line;
    return rlx__j_call_value(E, callee, &args);
}

/* Applies a filter chain whose innermost subject is NULL (block set / filter blocks) to v. */
static rj_value apply_filters(rj_env *E, const rj_node *f, rj_value v)
{
    if (!f) return v;
    v = apply_filters(E, f->a, v);
    rj_args args;
    eval_args(E, &f->args, &args, 0);
    E->rt->line = f->line;
    return rlx__j_filter(E, f->name, f->nlen, v, &args);
}

static rj_value eval(rj_env *E, const rj_node *n)
{
    enter(E, n);
    rj_value r;
    switch (n->kind) {
    case N_CONST: r = n->val; break;
    case N_NAME:
        r = lookup(E, n->name, n->nlen);
        if (r.type == RJ_LOOP) r.loop->escaped = true;
        break;
    case N_LIST: case N_TUPLE:
        r = rlx__j_new_list(E->rt, n->args.n);
        r.tuple = n->kind == N_TUPLE;
        for (size_t i = 0; i < n->args.n; i++) rlx__j_list_push(E->rt, r.l, eval(E, n->args.v[i]));
        break;
    case N_DICT:
        r = rlx__j_new_dict(E->rt, n->args.n);
        for (size_t i = 0; i < n->args.n; i++) {
            rj_value k = eval(E, n->args.v[i]->a);
            rlx__j_dict_set(E->rt, r.d, k, eval(E, n->args.v[i]->b));
        }
        break;
    case N_ATTR: {
        rj_value obj = eval_base(E, n->a);
        E->rt->line = n->line;
        r = rlx__j_getattr(E, obj, n->name, n->nlen);
        break;
    }
    case N_SUBSCRIPT: {
        rj_value obj = eval(E, n->a);
        if (n->b->kind == N_SLICE) {
            const rj_node *s = n->b;
            rj_value lo = s->a ? eval(E, s->a) : rj_none(), hi = s->b ? eval(E, s->b) : rj_none(),
                     st = s->c ? eval(E, s->c) : rj_none();
            E->rt->line = n->line;
            r = rlx__j_slice(E->rt, obj, lo, hi, st);
        } else {
            rj_value k = eval(E, n->b);
            E->rt->line = n->line;
            r = rlx__j_getitem(E, obj, k);
        }
        break;
    }
    case N_CALL: r = eval_call(E, n, NULL); break;
    case N_FILTER: {
        rj_value v = eval(E, n->a);
        rj_args args;
        eval_args(E, &n->args, &args, 0);
        E->rt->line = n->line;
        r = rlx__j_filter(E, n->name, n->nlen, v, &args);
        break;
    }
    case N_TEST: {
        rj_value v = eval(E, n->a);
        rj_args args;
        eval_args(E, &n->args, &args, 0);
        E->rt->line = n->line;
        r = rj_bool(rlx__j_test(E, n->name, n->nlen, v, &args) != n->neg);
        break;
    }
    case N_NOT: r = rj_bool(!rlx__j_truthy(eval(E, n->a))); break;
    case N_NEG: case N_POS: {
        rj_value v = eval(E, n->a);
        E->rt->line = n->line;
        if (rlx__j_is_int(v)) r = n->kind == N_NEG ? rlx__j_int_neg(E->rt, v) : v.type == RJ_BOOL ? rj_int(v.b) : v;
        else if (v.type == RJ_FLOAT) r = rj_float(n->kind == N_NEG ? -v.f : v.f);
        else if (v.type == RJ_UNDEF) fail_undefined(E, v);
        else rlx__j_fail(E->rt, RLX_EINVAL, "bad operand type for unary %s: '%s'", n->kind == N_NEG ? "-" : "+", rlx__j_type_name(v));
        break;
    }
    case N_BINOP: {
        rj_value a = eval(E, n->a), b = eval(E, n->b);
        E->rt->line = n->line;
        if (n->op == OP_CONCAT) {
            rj_value sa = rlx__j_to_str(E->rt, a), sb = rlx__j_to_str(E->rt, b);
            r = rlx__j_concat(E->rt, sa, sb);
        } else {
            r = rlx__j_binop(E, n->op, a, b);
        }
        break;
    }
    case N_COMPARE: {
        rj_value a = eval(E, n->a), b = eval(E, n->b);
        E->rt->line = n->line;
        switch (n->op) {
        case OP_EQ: r = rj_bool(rlx__j_equal(a, b)); break;
        case OP_NE: r = rj_bool(!rlx__j_equal(a, b)); break;
        case OP_IN: r = rj_bool(rlx__j_contains(E->rt, a, b)); break;
        case OP_NOTIN: r = rj_bool(!rlx__j_contains(E->rt, a, b)); break;
        default: {
            if (a.type == RJ_UNDEF) fail_undefined(E, a);
            if (b.type == RJ_UNDEF) fail_undefined(E, b);
            int c = rlx__j_compare(E->rt, a, b);
            r = rj_bool(n->op == OP_LT ? c < 0 : n->op == OP_LE ? c <= 0 : n->op == OP_GT ? c > 0 : c >= 0);
        }
        }
        break;
    }
    case N_AND: {
        rj_value a = eval(E, n->a);
        r = rlx__j_truthy(a) ? eval(E, n->b) : a;
        break;
    }
    case N_OR: {
        rj_value a = eval(E, n->a);
        r = rlx__j_truthy(a) ? a : eval(E, n->b);
        break;
    }
    case N_COND:
        if (rlx__j_truthy(eval(E, n->a))) r = eval(E, n->b);
        else r = n->c ? eval(E, n->c) : rlx__j_undef_named(E->rt, "the inline if expression evaluated to false and has no else");
        break;
    default:
        E->rt->line = n->line;
        rlx__j_fail(E->rt, RLX_EFORMAT, "this expression cannot be evaluated here");
    }
    E->rt->depth--;
    return r;
}

/* ---- statements ---- */

static void assign(rj_env *E, const rj_node *target, rj_value v)
{
    if (target->kind == N_NAME) {
        scope_set(E, E->scope, target->name, target->nlen, v);
        return;
    }
    if (target->kind == N_ATTR) {
        rj_value ns = lookup(E, target->a->name, target->a->nlen);
        if (ns.type != RJ_NS)
            rlx__j_fail(E->rt, RLX_EINVAL, "cannot assign attribute on non-namespace object '%.*s'", (int)target->a->nlen, target->a->name);
        rlx__j_dict_set(E->rt, ns.d, rj_str(target->name, target->nlen), v);
        return;
    }
    /* tuple unpacking */
    rj_list *items = rlx__j_iter(E->rt, v);
    if (items->n != target->args.n)
        rlx__j_fail(E->rt, RLX_EINVAL, "cannot unpack %zu value(s) into %zu name(s)", items->n, target->args.n);
    for (size_t i = 0; i < items->n; i++) assign(E, target->args.v[i], items->v[i]);
}

/* Block set and filter bodies render in a scope of their own, as in jinja2. */
static rj_value render_to_string(rj_env *E, const rj_nodes *body)
{
    rj_buf out = {0}, *saved = E->out;
    rj_scope *outer = E->scope;
    rlx__j_buf_put(E->rt, &out, "", 0);
    E->out = &out;
    E->scope = push_scope(E, outer);
    exec_body(E, body);
    E->scope = outer;
    E->out = saved;
    return rj_str(out.p, out.n);
}

static void exec_for_seq(rj_env *E, const rj_node *n, rj_value seq, rj_scope *outer, int depth)
{
    E->rt->line = n->line;
    if (seq.type == RJ_NONE || seq.type == RJ_INT || seq.type == RJ_FLOAT || seq.type == RJ_BOOL)
        rlx__j_fail(E->rt, RLX_EINVAL, "'%s' object is not iterable", rlx__j_type_name(seq));
    rj_list *items = rlx__j_iter(E->rt, seq);
    rj_for_frame *fr = E->for_depth < RJ_FOR_FRAMES ? &E->frames[E->for_depth] : NULL;
    /* the level's last frame, what of it nothing may still refer to */
    rj_scope *s = fr && fr->scope && !fr->scope->captured ? fr->scope : NULL;
    rj_loop *L = fr && fr->loop && !fr->loop->escaped ? fr->loop : NULL;
    E->for_depth++; /* loops in the condition's and the body's macros take the next level's frames */
    if (n->c) { /* `for x in xs if cond`: filter first, so loop.* counts the kept items */
        rj_value kept = rlx__j_new_list(E->rt, items->n);
        for (size_t i = 0; i < items->n; i++) {
            E->scope = s = item_scope(E, s, outer);
            assign(E, n->a, items->v[i]);
            bool keep = rlx__j_truthy(eval(E, n->c));
            E->scope = outer;
            if (keep) rlx__j_list_push(E->rt, kept.l, items->v[i]);
        }
        items = kept.l;
    }
    if (items->n == 0) {
        E->for_depth--;
        if (fr) *fr = (rj_for_frame){L, s};
        exec_body(E, &n->else_body);
        return;
    }
    if (!L) L = rlx__j_alloc(E->rt, sizeof *L);
    memset(L, 0, sizeof *L);
    L->items = items;
    L->node = n;
    L->outer = outer;
    L->depth = depth;
    rj_value lv = {0};
    lv.type = RJ_LOOP;
    lv.loop = L;
    for (size_t i = 0; i < items->n; i++) {
        L->i = i;
        E->scope = s = item_scope(E, s, outer);
        scope_set(E, E->scope, "loop", 4, lv);
        assign(E, n->a, items->v[i]);
        exec_body(E, &n->body);
        E->scope = outer;
        if (E->ctl == CTL_BREAK) { E->ctl = CTL_NONE; break; }
        E->ctl = CTL_NONE;
    }
    E->for_depth--;
    if (fr) *fr = (rj_for_frame){L, s};
}

static void exec_for(rj_env *E, const rj_node *n)
{
    rj_value seq = eval(E, n->b);
    exec_for_seq(E, n, seq, E->scope, 1);
}

/* loop(items) in a recursive loop: the same body over items, one level deeper, as a string */
static rj_value call_loop(rj_env *E, rj_loop *L, const rj_args *a)
{
    if (!L->node->op)
        rlx__j_fail(E->rt, RLX_EINVAL, "tried to call a non-recursive loop (add the 'recursive' modifier)");
    if (a->npos != 1 || a->nkw) rlx__j_fail(E->rt, RLX_EINVAL, "loop() takes exactly one iterable");
    rj_buf out = {0}, *saved_out = E->out;
    rj_scope *saved_scope = E->scope;
    int saved_ctl = E->ctl;
    rlx__j_buf_put(E->rt, &out, "", 0);
    E->out = &out;
    E->ctl = CTL_NONE;
    exec_for_seq(E, L->node, a->pos[0], L->outer, L->depth + 1);
    E->out = saved_out;
    E->scope = saved_scope;
    E->ctl = saved_ctl;
    return rj_str(out.p, out.n);
}

static void exec_stmt(rj_env *E, const rj_node *n)
{
    enter(E, n);
    E->rt->line = n->line;
    switch (n->kind) {
    case S_DATA: rlx__j_buf_put(E->rt, E->out, n->val.s.p, n->val.s.n); break;
    case S_PRINT: {
        rj_value v = eval(E, n->a);
        rlx__j_str(E->rt, E->out, v);
        break;
    }
    case S_IF:
        if (rlx__j_truthy(eval(E, n->a))) exec_body(E, &n->body);
        else exec_body(E, &n->else_body);
        break;
    case S_FOR: exec_for(E, n); break;
    case S_SET: {
        rj_value v = eval(E, n->b);
        E->rt->line = n->line;
        assign(E, n->a, v);
        break;
    }
    case S_SET_BLOCK: {
        rj_value v = apply_filters(E, n->c, render_to_string(E, &n->body));
        assign(E, n->a, v);
        break;
    }
    case S_GENERATION: { /* the body renders in its own scope, like the caller() of a call block */
        rj_value v = render_to_string(E, &n->body);
        rlx__j_buf_put(E->rt, E->out, v.s.p, v.s.n);
        break;
    }
    case S_FILTER_BLOCK: {
        rj_value v = apply_filters(E, n->c, render_to_string(E, &n->body));
        rlx__j_str(E->rt, E->out, v);
        break;
    }
    case S_MACRO: {
        rj_value m = {0};
        m.type = RJ_MACRO;
        m.m = rlx__j_alloc(E->rt, sizeof *m.m);
        m.m->def = n;
        m.m->closure = capture(E->scope);
        scope_set(E, E->scope, n->name, n->nlen, m);
        break;
    }
    case S_CALL_BLOCK: {
        rj_value v = eval_call(E, n->a, n);
        rlx__j_str(E->rt, E->out, v);
        break;
    }
    case S_WITH: {
        /* values are computed in the enclosing scope, then bound in a new one for the body */
        rj_value *vals = rlx__j_alloc(E->rt, (n->args.n + 1) * sizeof *vals);
        for (size_t i = 0; i < n->args.n; i++) vals[i] = eval(E, n->args.v[i]->b);
        rj_scope *outer = E->scope;
        E->scope = push_scope(E, outer);
        for (size_t i = 0; i < n->args.n; i++) assign(E, n->args.v[i]->a, vals[i]);
        exec_body(E, &n->body);
        E->scope = outer;
        break;
    }
    case S_BREAK: E->ctl = CTL_BREAK; break;
    case S_CONTINUE: E->ctl = CTL_CONTINUE; break;
    default: rlx__j_fail(E->rt, RLX_EFORMAT, "unexpected node in a statement list");
    }
    E->rt->depth--;
}

static void exec_body(rj_env *E, const rj_nodes *body)
{
    for (size_t i = 0; i < body->n && E->ctl == CTL_NONE; i++) exec_stmt(E, body->v[i]);
}

void rlx__j_render(rj_rt *rt, const rj_nodes *root, rj_value ctx, rj_buf *out)
{
    rj_env E = {.rt = rt, .out = out};
    E.scope = push_scope(&E, NULL);
    if (ctx.type == RJ_DICT)
        for (size_t i = 0; i < ctx.d->n; i++)
            if (ctx.d->k[i].type == RJ_STR) scope_set(&E, E.scope, ctx.d->k[i].s.p, ctx.d->k[i].s.n, ctx.d->v[i]);
    /* top-level sets shadow the context without touching it */
    E.scope = push_scope(&E, E.scope);
    exec_body(&E, root);
}
