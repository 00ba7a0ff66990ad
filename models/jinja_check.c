/* jinja_check.c - after parsing, the names a template uses. A template the interpreter cannot
 * handle fails at load, naming what it lacks: a Jinja2 filter or test it does not implement, or
 * a method call x.name(...) it cannot run. A filter or test name Jinja2 itself does not know is
 * what Jinja2's compiler decides: an error at load. Inside an `if` or an inline if (a "soft"
 * frame, reset by loops, macros and blocks) each of these fails only if the branch runs, as
 * Jinja2 fails there: a template whose rare branch (another type's method, an image part) uses
 * something missing renders every other conversation as Jinja2 does. */
#include "models/jinja_ast.h"

/* Jinja2 3.1's builtin filters this interpreter leaves out */
static const char *const k_jinja_filters_missing[] = {"pprint", "random", "urlize", "xmlattr", NULL};

static bool listed(const char *const *t, const char *name, size_t n)
{
    for (; *t; t++)
        if (strlen(*t) == n && !memcmp(*t, name, n)) return true;
    return false;
}

_Noreturn static void unsupported(rj_rt *rt, int line, const char *what, const char *name, size_t n)
{
    rt->line = line;
    rlx__j_fail(rt, RLX_EUNSUPPORTED, "the %s '%.*s' is not supported", what, (int)RLX_MIN(n, (size_t)60), name);
}

/* late: a name Jinja2 looks up when it runs (map('name'), select('name')), not at compile */
static void check_name(rj_rt *rt, int line, bool test, const char *name, size_t n, bool soft, bool late)
{
    if (test ? rlx__j_has_test(name, n) : rlx__j_has_filter(name, n)) return;
    /* one the interpreter lacks fails only if its branch runs, as Jinja2 fails there */
    if (!soft && !test && listed(k_jinja_filters_missing, name, n)) unsupported(rt, line, "filter", name, n);
    if (soft || late) return;
    rt->line = line;
    rlx__j_fail(rt, RLX_EFORMAT, "no %s named '%.*s'", test ? "test" : "filter", (int)RLX_MIN(n, (size_t)60), name);
}

/* the constant string at positional argument i of a call, if it is one */
static const rj_node *const_str_arg(const rj_node *call, size_t i)
{
    size_t k = 0;
    for (size_t j = 0; j < call->args.n; j++) {
        const rj_node *a = call->args.v[j];
        if (a->kind == N_KWARG) continue;
        if (k++ == i) return a->kind == N_CONST && a->val.type == RJ_STR ? a : NULL;
    }
    return NULL;
}

static bool name_eq(const rj_node *n, const char *s) { return n->nlen == strlen(s) && !memcmp(n->name, s, n->nlen); }

static void walk_expr(rj_rt *rt, const rj_node *n, bool soft);
static void walk_body(rj_rt *rt, const rj_nodes *b, bool soft);

static void walk_nodes(rj_rt *rt, const rj_nodes *l, bool soft)
{
    for (size_t i = 0; i < l->n; i++) walk_expr(rt, l->v[i], soft);
}

static void walk_expr(rj_rt *rt, const rj_node *n, bool soft)
{
    if (!n) return;
    if (++rt->depth > RJ_MAX_DEPTH) rlx__j_fail(rt, RLX_ERANGE, "the template nests too deeply");
    if (n->kind == N_COND) soft = true;
    /* f(a=1, a=2): Python's compiler refuses the whole template, whatever frame it is in */
    if (n->kind == N_CALL || n->kind == N_FILTER || n->kind == N_TEST)
        for (size_t i = 0; i < n->args.n; i++)
            for (size_t j = 0; j < i && n->args.v[i]->kind == N_KWARG; j++)
                if (n->args.v[j]->kind == N_KWARG && n->args.v[j]->nlen == n->args.v[i]->nlen &&
                    !memcmp(n->args.v[j]->name, n->args.v[i]->name, n->args.v[i]->nlen)) {
                    rt->line = n->line;
                    rlx__j_fail(rt, RLX_EFORMAT, "keyword argument repeated: %.*s", (int)RLX_MIN(n->args.v[i]->nlen, (size_t)60),
                                n->args.v[i]->name);
                }
    if (n->kind == N_FILTER || n->kind == N_TEST) {
        check_name(rt, n->line, n->kind == N_TEST, n->name, n->nlen, soft, false);
        /* map('upper'), select('odd'), selectattr('x', 'defined') name a filter or test too */
        const rj_node *named = NULL;
        bool test = true;
        if (n->kind == N_FILTER && name_eq(n, "map")) { named = const_str_arg(n, 0); test = false; }
        else if (n->kind == N_FILTER && (name_eq(n, "select") || name_eq(n, "reject"))) named = const_str_arg(n, 0);
        else if (n->kind == N_FILTER && (name_eq(n, "selectattr") || name_eq(n, "rejectattr"))) named = const_str_arg(n, 1);
        if (named) check_name(rt, named->line, test, named->val.s.p, named->val.s.n, soft, true);
    }
    /* x.name(...): a method the interpreter runs (or refuses as the sandbox does), or the loop's own;
       in an `if` branch only when the branch runs (Jinja2 looks methods up then, and a branch
       for another type's method, `s.x() if s is mapping`, never runs for the others) */
    if (n->kind == N_CALL && n->a->kind == N_ATTR && !soft && !rlx__j_has_method(n->a->name, n->a->nlen) &&
        !name_eq(n->a, "cycle") && !name_eq(n->a, "changed"))
        unsupported(rt, n->line, "method", n->a->name, n->a->nlen);
    if (n->kind == N_KWARG || n->kind == N_PAIR || n->kind < S_DATA) {
        walk_expr(rt, n->a, soft);
        walk_expr(rt, n->b, soft);
        walk_expr(rt, n->c, soft);
        walk_nodes(rt, &n->args, soft);
    }
    rt->depth--;
}

static void walk_stmt(rj_rt *rt, const rj_node *n, bool soft)
{
    if (++rt->depth > RJ_MAX_DEPTH) rlx__j_fail(rt, RLX_ERANGE, "the template nests too deeply");
    switch (n->kind) {
    case S_PRINT: case S_SET: walk_expr(rt, n->a, soft); walk_expr(rt, n->b, soft); break;
    case S_IF:
        walk_expr(rt, n->a, true);
        walk_body(rt, &n->body, true);
        walk_body(rt, &n->else_body, true);
        break;
    case S_FOR: /* the iterable is read in the enclosing frame; the rest in inner ones */
        walk_expr(rt, n->b, soft);
        walk_expr(rt, n->c, false);
        walk_body(rt, &n->body, false);
        walk_body(rt, &n->else_body, false);
        break;
    case S_SET_BLOCK: case S_FILTER_BLOCK:
        walk_expr(rt, n->c, false);
        walk_body(rt, &n->body, false);
        break;
    case S_MACRO:
        walk_nodes(rt, &n->args, false);
        walk_body(rt, &n->body, false);
        break;
    case S_CALL_BLOCK:
        walk_expr(rt, n->a, soft);
        walk_nodes(rt, &n->args, false);
        walk_body(rt, &n->body, false);
        break;
    case S_WITH:
        for (size_t i = 0; i < n->args.n; i++) walk_expr(rt, n->args.v[i]->b, soft);
        walk_body(rt, &n->body, false);
        break;
    case S_GENERATION: walk_body(rt, &n->body, false); break;
    default: break;
    }
    rt->depth--;
}

static void walk_body(rj_rt *rt, const rj_nodes *b, bool soft)
{
    for (size_t i = 0; i < b->n; i++) walk_stmt(rt, b->v[i], soft);
}

void rlx__j_check(rj_rt *rt, const rj_nodes *root)
{
    rt->depth = 0;
    walk_body(rt, root, false);
}
