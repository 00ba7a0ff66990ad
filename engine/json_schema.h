/* json_schema.h - JSON Schema -> GBNF (engine/grammar.h's dialect), for OpenAI's
 * response_format {"type":"json_schema"} and the native routes' `json_schema` field.
 *
 * Pure functions: the caller owns the cJSON tree (read only) and frees the returned text with
 * free(); no global state, so any thread may call it (the request parsers do, on the loop or a
 * threadpool thread). The produced grammar accepts only JSON texts that validate against the
 * schema (a subset of them: e.g. object properties come in the schema's order, optional ones
 * may be left out, whitespace is bounded), never one that does not.
 *
 * Keywords honoured: type (a name or an array of names), properties / required /
 * additionalProperties (false, true, a schema; when absent and properties are given, no
 * others are produced), items / prefixItems (and draft-07's items array with additionalItems),
 * minItems / maxItems, uniqueItems (false; true only where at most one item can be written),
 * minProperties / maxProperties where the object's shape decides them (a minimum the required
 * properties meet, or 1; a maximum nothing exceeds, or 0), enum / const (any JSON values),
 * anyOf, oneOf (only when its alternatives are disjoint by type or by const/enum values, also
 * behind $ref, so that exactly one matches), allOf of object schemas (merged; an allOf of one
 * member with only annotations beside it is that member, of any type), $ref to "#..."
 * JSON pointers with $defs / definitions (recursion allowed), minLength / maxLength, pattern
 * (an ECMA regex subset, see json_schema_regex.c), string formats date / time / date-time /
 * iso-time / iso-date-time / duration / uuid / byte / json-pointer / relative-json-pointer and
 * simple forms of email / hostname / ipv4 / ipv6 / uri / uri-reference (subsets of the RFCs'
 * and ajv-formats' "full" formats; a string format says nothing of numbers), number formats
 * int32 (bounds) / int64 / float (no power of ten over 22) / double, contentEncoding base64
 * (as format byte), OpenAPI 3.0's nullable (null beside the type; a type is needed), multipleOf
 * of a whole number (the multiples listed between two bounds, 256 at most, or by their last
 * digits for a divisor of 1000), integer minimum / maximum
 * / exclusiveMinimum / exclusiveMaximum (exact digit-range rules), the same on type number when
 * the bounds are integers within +-1e9 (numbers are then written with at most 5 fraction
 * digits and no exponent, so every double stays inside), patternProperties with one pattern
 * whose keys cannot spell a declared property, as the object's only extra properties.
 * Annotations (title, description, $schema, $id, $anchor, default, examples, $comment,
 * deprecated, readOnly, writeOnly, contentMediaType, OpenAPI's discriminator / example / x-
 * extensions, enumDescriptions, markdownDescription) are ignored. Anything else - an
 * unknown keyword (not, if/then/else, contains, propertyNames, ...), another multipleOf, a fractional
 * bound on a number, a second pattern, a remote $ref, an unsupported regex construct - is an
 * error whose message names it: nothing is silently skipped.
 *
 * Whitespace: at most one run per gap (after { [ , : and before } ]), either one space or a
 * newline and up to 20 spaces/tabs, so a model cannot loop on whitespace. The value has no
 * trailing whitespace: the grammar is complete when the value is.
 *
 * Limits (RLX_ERANGE with a message): schema nesting, generated rules, grammar size, repetition
 * counts (minLength, maxItems, regex {m,n}) over RLX_GRAMMAR_MAX_REPEAT. */
#ifndef RLX_JSON_SCHEMA_H
#define RLX_JSON_SCHEMA_H

#include "backends/rlx.h"
#include <cjson/cJSON.h>

#define RLX_JSON_SCHEMA_MAX_DEPTH 64          /* nested schemas being compiled at once */
#define RLX_JSON_SCHEMA_MAX_RULES 1024        /* rules the schema generates (primitives aside) */
#define RLX_JSON_SCHEMA_MAX_GBNF (256u << 10) /* bytes of produced grammar */

/* Compiles `schema` (an object or a boolean) to GBNF text whose start rule is "root".
 * Returns malloc'd NUL-terminated text, or NULL with err set: RLX_EINVAL for what the schema
 * asks that cannot be honoured (the message names the keyword and where it is, as a JSON
 * pointer), RLX_ERANGE for a limit, RLX_ENOMEM. */
char *rlx_json_schema_to_gbnf(const cJSON *schema, rlx_error *err);

#endif
