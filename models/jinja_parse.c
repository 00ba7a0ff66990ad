/* jinja_parse.c - tokens -> syntax tree, following Jinja2's own grammar (jinja2/parser.py)
 * closely so that precedence and the odd corners (filters binding tighter than unary minus,
 * tests with a bare argument, implicit tuples) match. Constructs outside the supported subset
 * fail with RLX_EUNSUPPORTED and their line. */
#include "models/jinja_ast.h"

#include <stdio.h>

typedef struct parser {
    rj_rt *rt;
    const rj_token *t;
    size_t pos, n;
    int depth;
    int loops;  /* enclosing for-loop bodies (a macro body starts afresh): where break/continue may go */
} parser;

enum { MAX_PARSE_DEPTH = 200 };

static const rj_token *cur(parser *P) { return &P->t[P->pos < P->n ? P->pos : P->n - 1]; }
static const rj_token *peek(parser *P, size_t k) { size_t i = P->pos + k; return &P->t[i < P->n ? i : P->n - 1]; }
static void next(parser *P) { if (P->pos + 1 < P->n) P->pos++; }
static bool tok_is(const rj_token *t, int type, const char *s)
{
    return t->type == type && (!s || (t->n == strlen(s) && !memcmp(t->p, s, t->n)));
}
static bool is_op(parser *P, const char *s) { return tok_is(cur(P), TK_OP, s); }
static bool is_name(parser *P, const char *s) { return tok_is(cur(P), TK_NAME, s); }

static const char *describe(const rj_token *t, char *buf, size_t cap)
{
    switch (t->type) {
    case TK_EOF: return "end of template";
    case TK_DATA: return "template data";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "'}}'";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "'%}'";
    case TK_STRING: return "a string";
    default: snprintf(buf, cap, "'%.*s'", (int)RLX_MIN(t->n, (size_t)40), t->p); return buf;
    }
}

_Noreturn static void fail_at(parser *P, int code, const char *what)
{
    char b[64];
    P->rt->line = cur(P)->line;
    rlx__j_fail(P->rt, code, "%s (found %s)", what, describe(cur(P), b, sizeof b));
}

static void expect_op(parser *P, const char *s)
{
    if (!is_op(P, s)) {
        char msg[64];
        snprintf(msg, sizeof msg, "expected '%s'", s);
        fail_at(P, RLX_EFORMAT, msg);
    }
    next(P);
}

static void expect_type(parser *P, int type, const char *what)
{
    if (cur(P)->type != type) fail_at(P, RLX_EFORMAT, what);
    next(P);
}

static rj_node *node(parser *P, int kind)
{
    rj_node *n = rlx__j_alloc(P->rt, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = cur(P)->line;
    return n;
}

static void add(parser *P, rj_nodes *l, rj_node *n)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        rj_node **nv = rlx__j_alloc(P->rt, cap * sizeof *nv);
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = n;
}

static void enter(parser *P)
{
    if (++P->depth > MAX_PARSE_DEPTH) fail_at(P, RLX_ERANGE, "the template nests too deeply");
}

static rj_node *parse_expression(parser *P, bool with_condexpr);
static rj_node *parse_tuple(parser *P, bool simplified, bool with_condexpr, const char *extra_end, bool explicit_paren);
static rj_node *parse_unary(parser *P, bool with_filter);
static rj_node *parse_primary(parser *P);
static rj_node *parse_postfix(parser *P, rj_node *n);
static rj_node *parse_filter(parser *P, rj_node *n, bool start_inline);

static void parse_call_args(parser *P, rj_node *call)
{
    expect_op(P, "(");
    while (!is_op(P, ")")) {
        if (call->args.n) {
            expect_op(P, ",");
            if (is_op(P, ")")) break;
        }
        if (is_op(P, "*") || is_op(P, "**")) fail_at(P, RLX_EUNSUPPORTED, "*args / **kwargs in a call are not supported");
        if (cur(P)->type == TK_NAME && tok_is(peek(P, 1), TK_OP, "=")) {
            rj_node *kw = node(P, N_KWARG);
            kw->name = cur(P)->p;
            kw->nlen = cur(P)->n;
            next(P);
            next(P);
            kw->a = parse_expression(P, true);
            add(P, &call->args, kw);
        } else {
            add(P, &call->args, parse_expression(P, true));
        }
    }
    next(P);
}

static void dotted_name(parser *P, rj_node *n)
{
    if (cur(P)->type != TK_NAME) fail_at(P, RLX_EFORMAT, "expected a name");
    n->name = cur(P)->p;
    n->nlen = cur(P)->n;
    next(P);
    if (is_op(P, ".")) fail_at(P, RLX_EUNSUPPORTED, "dotted filter or test names are not supported");
}

static rj_node *parse_filter(parser *P, rj_node *n, bool start_inline)
{
    while (is_op(P, "|") || start_inline) {
        if (!start_inline) next(P);
        rj_node *f = node(P, N_FILTER);
        dotted_name(P, f);
        f->a = n;
        if (is_op(P, "(")) parse_call_args(P, f);
        n = f;
        start_inline = false;
    }
    return n;
}

static rj_node *parse_test(parser *P, rj_node *n)
{
    next(P); /* is */
    rj_node *t = node(P, N_TEST);
    if (is_name(P, "not")) { t->neg = true; next(P); }
    dotted_name(P, t);
    t->a = n;
    const rj_token *c = cur(P);
    if (is_op(P, "(")) {
        parse_call_args(P, t);
    } else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT || c->type == TK_FLOAT ||
                is_op(P, "[") || is_op(P, "{")) &&
               !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and")) {
        if (is_name(P, "is")) fail_at(P, RLX_EFORMAT, "tests cannot be chained with 'is'");
        add(P, &t->args, parse_postfix(P, parse_primary(P)));
    }
    return t;
}

static rj_node *parse_call(parser *P, rj_node *callee)
{
    rj_node *c = node(P, N_CALL);
    c->a = callee;
    parse_call_args(P, c);
    return c;
}

static rj_node *parse_filter_expr(parser *P, rj_node *n)
{
    for (;;) {
        if (is_op(P, "|")) n = parse_filter(P, n, false);
        else if (is_name(P, "is")) n = parse_test(P, n);
        else if (is_op(P, "(")) n = parse_call(P, n);
        else return n;
    }
}

static rj_node *parse_subscribed(parser *P)
{
    rj_node *parts[3] = {NULL, NULL, NULL};
    rj_node *s = node(P, N_SLICE);
    if (is_op(P, ":")) {
        next(P);
    } else {
        rj_node *e = parse_expression(P, true);
        if (!is_op(P, ":")) return e;
        next(P);
        parts[0] = e;
    }
    if (!is_op(P, ":") && !is_op(P, "]") && !is_op(P, ",")) parts[1] = parse_expression(P, true);
    if (is_op(P, ":")) {
        next(P);
        if (!is_op(P, "]") && !is_op(P, ",")) parts[2] = parse_expression(P, true);
    }
    s->a = parts[0];
    s->b = parts[1];
    s->c = parts[2];
    return s;
}

static rj_node *parse_postfix(parser *P, rj_node *n)
{
    for (;;) {
        if (is_op(P, ".")) {
            next(P);
            const rj_token *t = cur(P);
            if (t->type == TK_NAME) {
                rj_node *a = node(P, N_ATTR);
                a->a = n;
                a->name = t->p;
                a->nlen = t->n;
                next(P);
                n = a;
            } else if (t->type == TK_INT) {
                rj_node *s = node(P, N_SUBSCRIPT);
                s->a = n;
                s->b = node(P, N_CONST);
                s->b->val = rj_int(t->i);
                next(P);
                n = s;
            } else fail_at(P, RLX_EFORMAT, "expected an attribute name after '.'");
        } else if (is_op(P, "[")) {
            next(P);
            rj_node *s = node(P, N_SUBSCRIPT);
            s->a = n;
            rj_node *tup = node(P, N_TUPLE);
            while (!is_op(P, "]")) {
                if (tup->args.n) expect_op(P, ",");
                if (is_op(P, "]")) break;
                add(P, &tup->args, parse_subscribed(P));
            }
            next(P);
            s->b = tup->args.n == 1 ? tup->args.v[0] : tup; /* a[] looks up the empty tuple, as in Jinja2 */
            n = s;
        } else if (is_op(P, "(")) {
            n = parse_call(P, n);
        } else return n;
    }
}

static rj_node *parse_primary(parser *P)
{
    enter(P);
    const rj_token *t = cur(P);
    rj_node *n;
    if (t->type == TK_NAME) {
        n = node(P, N_CONST);
        if (tok_is(t, TK_NAME, "true") || tok_is(t, TK_NAME, "True")) n->val = rj_bool(true);
        else if (tok_is(t, TK_NAME, "false") || tok_is(t, TK_NAME, "False")) n->val = rj_bool(false);
        else if (tok_is(t, TK_NAME, "none") || tok_is(t, TK_NAME, "None")) n->val = rj_none();
        else {
            n->kind = N_NAME;
            n->name = t->p;
            n->nlen = t->n;
        }
        next(P);
    } else if (t->type == TK_STRING) {
        n = node(P, N_CONST);
        rj_buf b = {0};
        rlx__j_buf_put(P->rt, &b, "", 0);
        while (cur(P)->type == TK_STRING) { /* adjacent literals concatenate */
            rlx__j_buf_put(P->rt, &b, cur(P)->p, cur(P)->n);
            next(P);
        }
        n->val = rj_str(b.p, b.n);
    } else if (t->type == TK_INT || t->type == TK_FLOAT) {
        n = node(P, N_CONST);
        n->val = t->type == TK_INT ? t->num : rj_float(t->f);
        next(P);
    } else if (is_op(P, "(")) {
        next(P);
        n = parse_tuple(P, false, true, NULL, true);
        expect_op(P, ")");
    } else if (is_op(P, "[")) {
        n = node(P, N_LIST);
        next(P);
        while (!is_op(P, "]")) {
            if (n->args.n) expect_op(P, ",");
            if (is_op(P, "]")) break;
            add(P, &n->args, parse_expression(P, true));
        }
        next(P);
    } else if (is_op(P, "{")) {
        n = node(P, N_DICT);
        next(P);
        while (!is_op(P, "}")) {
            if (n->args.n) expect_op(P, ",");
            if (is_op(P, "}")) break;
            rj_node *pair = node(P, N_PAIR);
            pair->a = parse_expression(P, true);
            expect_op(P, ":");
            pair->b = parse_expression(P, true);
            add(P, &n->args, pair);
        }
        next(P);
    } else {
        fail_at(P, RLX_EFORMAT, "unexpected token in an expression");
    }
    P->depth--;
    return n;
}

static rj_node *parse_unary(parser *P, bool with_filter)
{
    enter(P);
    rj_node *n;
    if (is_op(P, "-") || is_op(P, "+")) {
        n = node(P, is_op(P, "-") ? N_NEG : N_POS);
        next(P);
        n->a = parse_unary(P, false);
    } else {
        n = parse_primary(P);
    }
    n = parse_postfix(P, n);
    if (with_filter) n = parse_filter_expr(P, n);
    P->depth--;
    return n;
}

static rj_node *binop(parser *P, int op, rj_node *l, rj_node *r, int kind)
{
    rj_node *b = node(P, kind);
    b->op = (uint8_t)op;
    b->a = l;
    b->b = r;
    return b;
}

static rj_node *parse_pow(parser *P)
{
    rj_node *l = parse_unary(P, true);
    while (is_op(P, "**")) {
        next(P);
        l = binop(P, OP_POW, l, parse_unary(P, true), N_BINOP);
    }
    return l;
}

static rj_node *parse_math2(parser *P)
{
    rj_node *l = parse_pow(P);
    for (;;) {
        int op;
        if (is_op(P, "*")) op = OP_MUL;
        else if (is_op(P, "/")) op = OP_DIV;
        else if (is_op(P, "//")) op = OP_FLOORDIV;
        else if (is_op(P, "%")) op = OP_MOD;
        else return l;
        next(P);
        l = binop(P, op, l, parse_pow(P), N_BINOP);
    }
}

static rj_node *parse_concat(parser *P)
{
    rj_node *l = parse_math2(P);
    while (is_op(P, "~")) {
        next(P);
        l = binop(P, OP_CONCAT, l, parse_math2(P), N_BINOP);
    }
    return l;
}

static rj_node *parse_math1(parser *P)
{
    rj_node *l = parse_concat(P);
    for (;;) {
        int op;
        if (is_op(P, "+")) op = OP_ADD;
        else if (is_op(P, "-")) op = OP_SUB;
        else return l;
        next(P);
        l = binop(P, op, l, parse_concat(P), N_BINOP);
    }
}

static rj_node *parse_compare(parser *P)
{
    rj_node *first = parse_math1(P), *left = first, *result = NULL;
    for (;;) {
        int op;
        if (is_op(P, "==")) op = OP_EQ;
        else if (is_op(P, "!=")) op = OP_NE;
        else if (is_op(P, "<")) op = OP_LT;
        else if (is_op(P, "<=")) op = OP_LE;
        else if (is_op(P, ">")) op = OP_GT;
        else if (is_op(P, ">=")) op = OP_GE;
        else if (is_name(P, "in")) op = OP_IN;
        else if (is_name(P, "not") && tok_is(peek(P, 1), TK_NAME, "in")) { op = OP_NOTIN; next(P); }
        else break;
        next(P);
        rj_node *right = parse_math1(P);
        rj_node *cmp = binop(P, op, left, right, N_COMPARE);
        /* a < b < c  ==  a < b and b < c */
        result = result ? binop(P, 0, result, cmp, N_AND) : cmp;
        left = right;
    }
    return result ? result : first;
}

static rj_node *parse_not(parser *P)
{
    if (is_name(P, "not")) {
        enter(P);
        rj_node *n = node(P, N_NOT);
        next(P);
        n->a = parse_not(P);
        P->depth--;
        return n;
    }
    return parse_compare(P);
}

static rj_node *parse_and(parser *P)
{
    rj_node *l = parse_not(P);
    while (is_name(P, "and")) {
        next(P);
        l = binop(P, 0, l, parse_not(P), N_AND);
    }
    return l;
}

static rj_node *parse_or(parser *P)
{
    rj_node *l = parse_and(P);
    while (is_name(P, "or")) {
        next(P);
        l = binop(P, 0, l, parse_and(P), N_OR);
    }
    return l;
}

static rj_node *parse_condexpr(parser *P)
{
    rj_node *e1 = parse_or(P);
    while (is_name(P, "if")) {
        next(P);
        rj_node *c = node(P, N_COND);
        c->a = parse_or(P); /* condition */
        c->b = e1;          /* value when true */
        if (is_name(P, "else")) {
            next(P);
            c->c = parse_condexpr(P);
        }
        e1 = c;
    }
    return e1;
}

static rj_node *parse_expression(parser *P, bool with_condexpr)
{
    enter(P);
    rj_node *n = with_condexpr ? parse_condexpr(P) : parse_or(P);
    P->depth--;
    return n;
}

static bool tuple_end(parser *P, const char *extra_end)
{
    int t = cur(P)->type;
    if (t == TK_VAR_END || t == TK_BLOCK_END || t == TK_EOF || is_op(P, ")")) return true;
    return extra_end && is_name(P, extra_end);
}

static rj_node *parse_tuple(parser *P, bool simplified, bool with_condexpr, const char *extra_end, bool explicit_paren)
{
    rj_node *tup = node(P, N_TUPLE);
    bool is_tuple = false;
    for (;;) {
        if (tup->args.n) expect_op(P, ",");
        if (tuple_end(P, extra_end)) break;
        rj_node *e = simplified ? parse_primary(P) : parse_expression(P, with_condexpr);
        add(P, &tup->args, e);
        if (is_op(P, ",")) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (tup->args.n) return tup->args.v[0];
        if (!explicit_paren) fail_at(P, RLX_EFORMAT, "expected an expression");
    }
    return tup;
}

/* ---- statements ---- */

static void parse_body(parser *P, rj_nodes *out, const char *const *ends);

static void end_block(parser *P) { expect_type(P, TK_BLOCK_END, "expected '%}' to end the tag"); }

static rj_node *parse_assign_target(parser *P, bool with_namespace, const char *extra_end)
{
    if (with_namespace && cur(P)->type == TK_NAME && tok_is(peek(P, 1), TK_OP, ".") && peek(P, 2)->type == TK_NAME) {
        rj_node *a = node(P, N_ATTR);
        a->a = node(P, N_NAME);
        a->a->name = cur(P)->p;
        a->a->nlen = cur(P)->n;
        a->name = peek(P, 2)->p;
        a->nlen = peek(P, 2)->n;
        next(P); next(P); next(P);
        return a;
    }
    rj_node *t = parse_tuple(P, true, true, extra_end, false);
    if (t->kind == N_NAME) return t;
    if (t->kind == N_TUPLE) {
        for (size_t i = 0; i < t->args.n; i++)
            if (t->args.v[i]->kind != N_NAME) { P->rt->line = t->line; rlx__j_fail(P->rt, RLX_EFORMAT, "can only assign to names"); }
        return t;
    }
    P->rt->line = t->line;
    rlx__j_fail(P->rt, RLX_EFORMAT, "cannot assign to this expression");
}

static void parse_params(parser *P, rj_nodes *params)
{
    expect_op(P, "(");
    while (!is_op(P, ")")) {
        if (params->n) expect_op(P, ",");
        if (is_op(P, ")")) break;
        if (cur(P)->type != TK_NAME) fail_at(P, RLX_EFORMAT, "expected a parameter name");
        rj_node *p = node(P, N_NAME);
        p->name = cur(P)->p;
        p->nlen = cur(P)->n;
        next(P);
        if (is_op(P, "=")) {
            next(P);
            p->kind = N_KWARG;
            p->a = parse_expression(P, true);
        }
        add(P, params, p);
    }
    next(P);
}

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_FOR[] = {"else", "endfor", NULL};
static const char *const END_SET[] = {"endset", NULL};
static const char *const END_MACRO[] = {"endmacro", NULL};
static const char *const END_CALL[] = {"endcall", NULL};
static const char *const END_FILTER[] = {"endfilter", NULL};

static void expect_end(parser *P, const char *word)
{
    if (!is_name(P, word)) {
        char msg[64];
        snprintf(msg, sizeof msg, "expected '%s'", word);
        fail_at(P, RLX_EFORMAT, msg);
    }
    next(P);
    end_block(P);
}

static rj_node *parse_if(parser *P)
{
    rj_node *n = node(P, S_IF);
    next(P);
    n->a = parse_tuple(P, false, false, NULL, false);
    end_block(P);
    parse_body(P, &n->body, END_IF);
    if (is_name(P, "elif")) {
        add(P, &n->else_body, parse_if(P));
        return n;
    }
    if (is_name(P, "else")) {
        next(P);
        end_block(P);
        parse_body(P, &n->else_body, (const char *const[]){"endif", NULL});
    }
    expect_end(P, "endif");
    return n;
}

static rj_node *parse_statement(parser *P)
{
    const rj_token *t = cur(P);
    if (t->type != TK_NAME) fail_at(P, RLX_EFORMAT, "expected a statement name after '{%'");
    int line = t->line;
    P->rt->line = line;
    if (tok_is(t, TK_NAME, "if")) return parse_if(P);
    rj_node *n;
    if (tok_is(t, TK_NAME, "for")) {
        n = node(P, S_FOR);
        next(P);
        n->a = parse_assign_target(P, false, "in");
        if (!is_name(P, "in")) fail_at(P, RLX_EFORMAT, "expected 'in' in a for loop");
        next(P);
        n->b = parse_tuple(P, false, false, "recursive", false);
        if (is_name(P, "if")) {
            next(P);
            n->c = parse_expression(P, true);
        }
        if (is_name(P, "recursive")) { /* loop(children) inside the body renders it again one level down */
            n->op = 1;
            next(P);
        }
        end_block(P);
        P->loops++;
        parse_body(P, &n->body, END_FOR);
        P->loops--;
        if (is_name(P, "else")) {
            next(P);
            end_block(P);
            parse_body(P, &n->else_body, (const char *const[]){"endfor", NULL});
        }
        expect_end(P, "endfor");
    } else if (tok_is(t, TK_NAME, "set")) {
        next(P);
        rj_node *target = parse_assign_target(P, true, NULL);
        if (is_op(P, "=")) {
            next(P);
            n = node(P, S_SET);
            n->a = target;
            n->b = parse_tuple(P, false, true, NULL, false);
            end_block(P);
        } else {
            n = node(P, S_SET_BLOCK);
            n->a = target;
            n->c = parse_filter(P, NULL, false);
            end_block(P);
            parse_body(P, &n->body, END_SET);
            expect_end(P, "endset");
        }
    } else if (tok_is(t, TK_NAME, "macro")) {
        n = node(P, S_MACRO);
        next(P);
        if (cur(P)->type != TK_NAME) fail_at(P, RLX_EFORMAT, "expected a macro name");
        n->name = cur(P)->p;
        n->nlen = cur(P)->n;
        next(P);
        parse_params(P, &n->args);
        end_block(P);
        size_t body_start = P->pos;
        int saved_loops = P->loops;
        P->loops = 0;
        parse_body(P, &n->body, END_MACRO);
        P->loops = saved_loops;
        for (size_t i = body_start; i < P->pos; i++) { /* jinja2 passes extras only to macros that use them */
            if (tok_is(&P->t[i], TK_NAME, "kwargs")) n->op |= RJ_MACRO_KWARGS;
            if (tok_is(&P->t[i], TK_NAME, "varargs")) n->op |= RJ_MACRO_VARARGS;
            if (tok_is(&P->t[i], TK_NAME, "caller")) n->op |= RJ_MACRO_CALLER;
        }
        next(P);
        if (cur(P)->type == TK_NAME) next(P); /* {% endmacro name %} */
        end_block(P);
    } else if (tok_is(t, TK_NAME, "call")) {
        n = node(P, S_CALL_BLOCK);
        next(P);
        if (is_op(P, "(")) parse_params(P, &n->args);
        n->a = parse_expression(P, true);
        if (n->a->kind != N_CALL) { P->rt->line = line; rlx__j_fail(P->rt, RLX_EFORMAT, "{%% call %%} needs a macro call"); }
        end_block(P);
        int saved_loops = P->loops;
        P->loops = 0; /* the body is the `caller` macro */
        parse_body(P, &n->body, END_CALL);
        P->loops = saved_loops;
        expect_end(P, "endcall");
    } else if (tok_is(t, TK_NAME, "filter")) {
        n = node(P, S_FILTER_BLOCK);
        next(P);
        n->c = parse_filter(P, NULL, true);
        end_block(P);
        parse_body(P, &n->body, END_FILTER);
        expect_end(P, "endfilter");
    } else if (tok_is(t, TK_NAME, "with")) {
        n = node(P, S_WITH);
        next(P);
        while (cur(P)->type != TK_BLOCK_END) {
            if (n->args.n) expect_op(P, ",");
            rj_node *pair = node(P, N_PAIR);
            pair->a = parse_assign_target(P, false, NULL);
            expect_op(P, "=");
            pair->b = parse_expression(P, true);
            add(P, &n->args, pair);
        }
        end_block(P);
        parse_body(P, &n->body, (const char *const[]){"endwith", NULL});
        expect_end(P, "endwith");
    } else if (tok_is(t, TK_NAME, "generation")) {
        /* transformers' AssistantTracker: a call block that renders its body unchanged */
        n = node(P, S_GENERATION);
        next(P);
        end_block(P);
        int saved_loops = P->loops;
        P->loops = 0;
        parse_body(P, &n->body, (const char *const[]){"endgeneration", NULL});
        P->loops = saved_loops;
        expect_end(P, "endgeneration");
    } else if (tok_is(t, TK_NAME, "break") || tok_is(t, TK_NAME, "continue")) {
        n = node(P, tok_is(t, TK_NAME, "break") ? S_BREAK : S_CONTINUE);
        if (P->loops == 0)
            rlx__j_fail(P->rt, RLX_EFORMAT, "'%s' outside of a for loop", n->kind == S_BREAK ? "break" : "continue");
        next(P);
        end_block(P);
    } else {
        static const char *const known[] = {"include", "import", "from", "extends", "block", "do",
                                            "autoescape", "trans", "pluralize", "raw", "print", NULL};
        for (int i = 0; known[i]; i++)
            if (tok_is(t, TK_NAME, known[i]))
                rlx__j_fail(P->rt, RLX_EUNSUPPORTED, "the '{%% %s %%}' statement is not supported", known[i]);
        rlx__j_fail(P->rt, RLX_EFORMAT, "unknown statement '%.*s' (or a stray end tag)", (int)RLX_MIN(t->n, (size_t)40), t->p);
    }
    return n;
}

static void parse_body(parser *P, rj_nodes *out, const char *const *ends)
{
    enter(P);
    int start_line = cur(P)->line;
    for (;;) {
        const rj_token *t = cur(P);
        if (t->type == TK_EOF) {
            if (ends) {
                P->rt->line = start_line;
                rlx__j_fail(P->rt, RLX_EFORMAT, "block is never closed (expected '{%% %s %%}')", ends[0]);
            }
            break;
        }
        if (t->type == TK_DATA) {
            rj_node *d = node(P, S_DATA);
            d->val = rj_str(t->p, t->n);
            add(P, out, d);
            next(P);
        } else if (t->type == TK_VAR_BEGIN) {
            next(P);
            rj_node *pr = node(P, S_PRINT);
            pr->a = parse_tuple(P, false, true, NULL, false);
            expect_type(P, TK_VAR_END, "expected '}}' to end the expression");
            add(P, out, pr);
        } else if (t->type == TK_BLOCK_BEGIN) {
            next(P);
            if (ends)
                for (int i = 0; ends[i]; i++)
                    if (is_name(P, ends[i])) { P->depth--; return; }
            add(P, out, parse_statement(P));
        } else {
            fail_at(P, RLX_EFORMAT, "unexpected token");
        }
    }
    P->depth--;
}

rj_nodes rlx__j_parse(rj_rt *rt, const rj_tokens *toks)
{
    parser P = {.rt = rt, .t = toks->v, .n = toks->n};
    rj_nodes root = {0};
    parse_body(&P, &root, NULL);
    rlx__j_check(rt, &root);
    return root;
}
