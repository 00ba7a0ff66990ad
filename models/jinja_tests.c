/* jinja_tests.c - Jinja2's builtin tests (`x is defined`, `x is divisibleby 3`, ...). Test names
 * are checked when the template is parsed; an unknown name reaching here came from
 * select('name') and friends. */
#include "models/jinja_text.h"

static bool name_is(const char *a, const char *name, size_t n) { return strlen(a) == n && !memcmp(a, name, n); }

static const rj_value *targ(rj_env *E, const rj_args *a, const char *test)
{
    const rj_value *x = rlx__j_arg(a, 0, NULL);
    if (!x) rlx__j_fail(rlx__j_env_rt(E), RLX_EINVAL, "test '%s' needs an argument", test);
    return x;
}


bool rlx__j_test(rj_env *E, const char *name, size_t n, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
#define T(s) name_is(s, name, n)
    if (T("defined")) return v.type != RJ_UNDEF;
    if (T("undefined")) return v.type == RJ_UNDEF;
    if (T("none")) return v.type == RJ_NONE;
    if (T("string")) return v.type == RJ_STR;
    if (T("number")) return rlx__j_is_number(v);
    if (T("integer")) return v.type == RJ_INT || v.type == RJ_BIGINT;
    if (T("float")) return v.type == RJ_FLOAT;
    if (T("boolean")) return v.type == RJ_BOOL;
    if (T("true")) return v.type == RJ_BOOL && v.b;
    if (T("false")) return v.type == RJ_BOOL && !v.b;
    if (T("mapping")) return v.type == RJ_DICT;
    if (T("iterable"))
        return v.type == RJ_LIST || v.type == RJ_DICT || v.type == RJ_STR || v.type == RJ_UNDEF || v.type == RJ_LOOP || v.type == RJ_GEN;
    /* len() and __getitem__: dict views have no __getitem__ */
    if (T("sequence"))
        return (v.type == RJ_LIST && (!v.view || v.view == RJ_VIEW_RANGE)) || v.type == RJ_DICT || v.type == RJ_STR || v.type == RJ_UNDEF;
    if (T("callable"))
        return v.type == RJ_MACRO || v.type == RJ_FUNC || v.type == RJ_METHOD || v.type == RJ_LOOP || (v.type == RJ_OBJ && !v.obj->is_cycler);
    /* odd/even/divisibleby are `value % n == ...` in Python: floats take part too */
    if (T("odd")) return rlx__j_equal(rlx__j_binop(E, OP_MOD, v, rj_int(2)), rj_int(1));
    if (T("even")) return rlx__j_equal(rlx__j_binop(E, OP_MOD, v, rj_int(2)), rj_int(0));
    if (T("divisibleby")) return rlx__j_equal(rlx__j_binop(E, OP_MOD, v, *targ(E, a, "divisibleby")), rj_int(0));
    if (T("eq") || T("equalto") || T("==")) return rlx__j_equal(v, *targ(E, a, "eq"));
    if (T("ne") || T("!=")) return !rlx__j_equal(v, *targ(E, a, "ne"));
    if (T("sameas")) {
        rj_value o = *targ(E, a, "sameas");
        return o.type == v.type && rlx__j_equal(v, o);
    }
    if (T("lt") || T("lessthan") || T("<")) return rlx__j_compare(rt, v, *targ(E, a, "lt")) < 0;
    if (T("le") || T("<=")) return rlx__j_compare(rt, v, *targ(E, a, "le")) <= 0;
    if (T("gt") || T("greaterthan") || T(">")) return rlx__j_compare(rt, v, *targ(E, a, "gt")) > 0;
    if (T("ge") || T(">=")) return rlx__j_compare(rt, v, *targ(E, a, "ge")) >= 0;
    if (T("in")) return rlx__j_contains(rt, v, *targ(E, a, "in"));
    /* str(value).islower() */
    if (T("lower")) return rlx__j_str_is(rlx__j_to_str(rt, v), STR_ISLOWER);
    if (T("upper")) return rlx__j_str_is(rlx__j_to_str(rt, v), STR_ISUPPER);
    if (T("escaped")) return v.type == RJ_STR && v.safe; /* has __html__: a Markup string */
    if (T("filter")) return v.type == RJ_STR && rlx__j_has_filter(v.s.p, v.s.n);
    if (T("test")) return v.type == RJ_STR && rlx__j_has_test(v.s.p, v.s.n);
#undef T
    rlx__j_fail(rt, RLX_EUNSUPPORTED, "no test named '%.*s' (not supported)", (int)RLX_MIN(n, (size_t)60), name);
}

bool rlx__j_has_test(const char *name, size_t n)
{
    static const char *const names[] = {"defined", "undefined", "none", "string", "number", "integer", "float",
        "boolean", "true", "false", "mapping", "iterable", "sequence", "callable", "odd", "even", "divisibleby",
        "eq", "equalto", "==", "ne", "!=", "sameas", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in",
        "lower", "upper", "escaped", "filter", "test"};
    for (size_t i = 0; i < RLX_ARRAY_LEN(names); i++)
        if (name_is(names[i], name, n)) return true;
    return false;
}
