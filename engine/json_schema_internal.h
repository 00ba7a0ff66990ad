/* json_schema_internal.h - what the schema compiler's files share (not a public API).
 *
 * json_schema.c walks the schema (types, enum/const, composition, $ref) and assembles the
 * grammar; json_schema_scalar.c compiles integers, numbers and strings (formats, bounds,
 * lengths, pattern); json_schema_obj.c objects and arrays (json_schema_walk.h is the walk's
 * shared state); json_schema_prim.c holds the text helpers (growable buffers, GBNF and JSON string
 * escaping, code point sets as JSON string content), the fixed primitive rules and the integer
 * digit-range rules; json_schema_regex.c translates `pattern`. Everything here runs inside one
 * rlx_json_schema_to_gbnf call on the caller's thread. */
#ifndef RLX_JSON_SCHEMA_INTERNAL_H
#define RLX_JSON_SCHEMA_INTERNAL_H

#include "engine/json_schema.h"

#include <stdbool.h>
#include <stdint.h>

/* A growable NUL-terminated text; `oom` sticks once an allocation failed. */
typedef struct rlx__sb { char *p; size_t n, cap; bool oom; } rlx__sb;

void rlx__sb_put(rlx__sb *b, const char *s, size_t n);
void rlx__sb_puts(rlx__sb *b, const char *s);
void rlx__sb_printf(rlx__sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Returns the text (caller frees; "" when empty) and resets b; NULL if an allocation failed. */
char *rlx__sb_take(rlx__sb *b);

/* A GBNF string literal ("...") matching exactly these bytes (UTF-8 passed through). */
void rlx__gbnf_literal(rlx__sb *b, const char *s, size_t n);
/* GBNF matching exactly one of the n texts (malloc'ed, non-empty; the call sorts them and frees
 * and NULLs duplicates, the caller frees the rest), shared prefixes written once so that a
 * parse holds few stacks however many texts there are. False (nothing written) if none. */
bool rlx__gbnf_alternatives(rlx__sb *b, char **texts, size_t n);
/* The JSON text of a string (quotes included; " \ and control characters escaped). */
void rlx__json_string(rlx__sb *b, const char *s, size_t n);

/* A set of code points as sorted, disjoint, non-adjacent inclusive ranges. */
typedef struct rlx__cpset { uint32_t (*r)[2]; size_t n, cap; bool oom; } rlx__cpset;
void rlx__cpset_add(rlx__cpset *s, uint32_t lo, uint32_t hi);
void rlx__cpset_add_set(rlx__cpset *s, const rlx__cpset *o);
/* Replaces s by its complement over U+0000..U+10FFFF (surrogates excluded). */
void rlx__cpset_negate(rlx__cpset *s);
bool rlx__cpset_has(const rlx__cpset *s, uint32_t c);
void rlx__cpset_free(rlx__cpset *s);
/* A GBNF group matching one JSON-string character that decodes to a code point of s: the raw
 * character where JSON allows it, an escape (\" \\ \n \t \r \b \f \u00XX) for the others.
 * Returns false (nothing written) when s is empty. */
bool rlx__cpset_gbnf(rlx__sb *b, const rlx__cpset *s);

/* The fixed rules every generated grammar ends with: ws, value, object, array, string, char,
 * number, integer, boolean, null, date, time, date-time, uuid (and their helpers). */
extern const char rlx__json_schema_prims[];
/* Appends to b the rules of rlx__json_schema_prims that GBNF text gbnf (n bytes) refers to,
 * directly or through one another, in their order there: a grammar compiles only what it uses. */
void rlx__json_schema_prims_for(rlx__sb *b, const char *gbnf, size_t n);

/* GBNF (an alternation, parenthesised) for the integers in [lo, hi]; has_lo/has_hi false means
 * unbounded on that side. |bounds| must be <= RLX__INT_BOUND. False when the range is empty. */
#define RLX__INT_BOUND 9007199254740991LL /* 2^53 - 1: exact in a double */
bool rlx__int_range(rlx__sb *b, bool has_lo, long long lo, bool has_hi, long long hi);

/* GBNF for the numbers v (type number) between integer bounds, each inclusive or exclusive
 * (has_lo/has_hi false: unbounded), |bounds| <= RLX__NUM_BOUND: an integer part and at most 5
 * fraction digits, no exponent, so that no text of it has over 15 significant digits and its
 * double lies on the same side of every bound as the decimal does. False when no number fits. */
#define RLX__NUM_BOUND 1000000000LL
bool rlx__num_range(rlx__sb *b, bool has_lo, long long lo, bool lo_excl, bool has_hi, long long hi, bool hi_excl);

/* Translates an ECMA-262 regex (a JSON Schema `pattern`) to a GBNF expression over JSON string
 * content (without the quotes). Returns malloc'd text, or NULL with err set (RLX_EINVAL naming
 * the construct, RLX_ERANGE for a limit, RLX_ENOMEM). */
char *rlx__regex_to_gbnf(const char *re, rlx_error *err);
/* ^A Q$ with A one character and Q a quantifier or none: A's GBNF (malloc'ed) and Q's counts
 * (qmax -1: unbounded); 1 for that form, 0 for another, -1 refused (err set). */
int rlx__regex_one_repeated_char(const char *re, char **atom_gbnf, int *qmin, int *qmax, rlx_error *err);

#endif
