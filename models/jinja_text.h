/* jinja_text.h - private to the chat template interpreter: Unicode-aware string helpers with
 * Python's str semantics (case mapping, whitespace, stripping, splitting, printf-style
 * formatting), shared by the filters and the string methods. All results live in the arena. */
#ifndef RLX_JINJA_TEXT_H
#define RLX_JINJA_TEXT_H

#include "models/jinja_ast.h"

/* case mapping with Python's full mappings (jinja_case.c): str.lower/upper/title/capitalize/
 * swapcase/casefold, and Jinja2's title filter */
enum { CASE_LOWER, CASE_UPPER, CASE_TITLE_PY, CASE_CAPITALIZE, CASE_TITLE_JINJA, CASE_SWAP, CASE_FOLD };
rj_value rlx__j_case(rj_rt *rt, rj_value s, int mode);
/* str.islower(), ... with Python's Unicode character properties */
enum { STR_ISLOWER, STR_ISUPPER, STR_ISTITLE, STR_ISALPHA, STR_ISDIGIT, STR_ISDECIMAL, STR_ISNUMERIC, STR_ISALNUM,
       STR_ISSPACE, STR_ISASCII, STR_ISPRINTABLE, STR_ISIDENTIFIER };
bool rlx__j_str_is(rj_value s, int what);
/* str.center / ljust / rjust / zfill (how: 'c', 'l', 'r', 'z') to width with fill (NULL: space) */
rj_value rlx__j_pad(rj_rt *rt, rj_value s, char how, rj_value width, const rj_value *fill);
bool rlx__j_is_space_cp(int32_t cp);
/* which: 1 left, 2 right, 3 both; chars NULL: whitespace */
rj_value rlx__j_strip(rj_rt *rt, rj_value s, const rj_value *chars, int which);
/* sep NULL: split on runs of whitespace; maxsplit < 0: no limit */
rj_value rlx__j_split(rj_rt *rt, rj_value s, const rj_value *sep, int64_t maxsplit);
rj_value rlx__j_replace(rj_rt *rt, rj_value s, rj_value old, rj_value new_, int64_t count);
/* Python's `fmt % args` (args: a tuple/list of positional values, or a dict for %(name)s);
 * jinja_format.c */
rj_value rlx__j_percent_format(rj_rt *rt, rj_value fmt, const rj_value *args, size_t nargs, const rj_value *mapping);
/* str.format(*args, **kwargs) */
rj_value rlx__j_str_format(rj_rt *rt, rj_value fmt, const rj_args *a);
/* Python's splitlines(): lines without their terminators */
rj_value rlx__j_splitlines(rj_rt *rt, rj_value s);

#endif
