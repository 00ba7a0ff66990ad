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
/* Python's `fmt % args` (jinja_format.c): args the items of a tuple, or (single) the lone
 * non-tuple operand, which serves %(name)s when it is a dict; a Markup fmt escapes them */
rj_value rlx__j_percent_format(rj_rt *rt, rj_value fmt, const rj_value *args, size_t nargs, bool single);
/* str.format(*args, **kwargs) as the sandbox's string.Formatter: kwargs a dict, or NULL for
 * none; format_map passes its argument there */
rj_value rlx__j_str_format(rj_env *E, rj_value fmt, const rj_value *args, size_t nargs, const rj_value *kwargs);
/* an HTML5 named character reference (jinja_entities.c): the name as written after '&' (with
 * its ';', or one of the legacy names without), and its one or two code points (cp2 0: one) */
typedef struct rj_entity { const char *name; uint32_t cp1, cp2; } rj_entity;
const rj_entity *rlx__j_entity(const char *name, size_t n); /* NULL: not a name */
/* Python's splitlines(): lines without their terminators */
rj_value rlx__j_splitlines(rj_rt *rt, rj_value s, bool keepends);

#endif
