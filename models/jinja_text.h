/* jinja_text.h - private to the chat template interpreter: Unicode-aware string helpers with
 * Python's str semantics (case mapping, whitespace, stripping, splitting, printf-style
 * formatting), shared by the filters and the string methods. All results live in the arena. */
#ifndef RLX_JINJA_TEXT_H
#define RLX_JINJA_TEXT_H

#include "models/jinja_ast.h"

enum { CASE_LOWER, CASE_UPPER, CASE_TITLE_PY, CASE_CAPITALIZE, CASE_TITLE_JINJA };
rj_value rlx__j_case(rj_rt *rt, rj_value s, int mode);
bool rlx__j_is_space_cp(int32_t cp);
/* which: 1 left, 2 right, 3 both; chars NULL: whitespace */
rj_value rlx__j_strip(rj_rt *rt, rj_value s, const rj_value *chars, int which);
/* sep NULL: split on runs of whitespace; maxsplit < 0: no limit */
rj_value rlx__j_split(rj_rt *rt, rj_value s, const rj_value *sep, int64_t maxsplit);
rj_value rlx__j_replace(rj_rt *rt, rj_value s, rj_value old, rj_value new_, int64_t count);
/* Python's `fmt % args` (args: a tuple/list of positional values, or a dict for %(name)s). */
rj_value rlx__j_percent_format(rj_rt *rt, rj_value fmt, const rj_value *args, size_t nargs, const rj_value *mapping);
/* str.format(*args, **kwargs) */
rj_value rlx__j_str_format(rj_rt *rt, rj_value fmt, const rj_args *a);
/* Python's splitlines(): lines without their terminators */
rj_value rlx__j_splitlines(rj_rt *rt, rj_value s);

#endif
