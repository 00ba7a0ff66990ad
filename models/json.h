/* json.h - JSON text -> cJSON read the way Python's json module reads it, keeping what cJSON's
 * own parser drops, so that chat templates see the values transformers would see:
 *
 *   - every number node carries its literal text in valuestring ("1.0", "-0.0",
 *     "12345678901234567890", "1e-07"); valuedouble/valueint are filled as cJSON fills them, so
 *     code that ignores the literal works unchanged. A literal with a fraction or an exponent is
 *     a float in Python, any other an exact (arbitrary precision) int. NaN, Infinity and
 *     -Infinity are accepted as Python accepts them.
 *   - a string holding U+0000 cannot be NUL-terminated: its NULs are stored as the two bytes
 *     C0 80 (as Java's modified UTF-8 does) and the node's valueint is RLX_JSON_STR_NUL, so the
 *     exact bytes can be recovered (the chat template context does); other consumers see C0 80
 *     rather than a truncated string.
 *   - a duplicate key's later value replaces the earlier one where that one stood, as a Python
 *     dict does (request fields, templates and tools all see the last; cJSON's lookups would
 *     find the first).
 * Lone UTF-16 surrogates in \u escapes are kept as their 3-byte (WTF-8) form, as Python keeps
 * them in its str. Raw control characters in strings are accepted (cJSON accepts them too).
 *
 * Ownership: the returned tree belongs to the caller (cJSON_Delete); cJSON_Duplicate keeps the
 * literals and the NUL marks. */
#ifndef RLX_JSON_H
#define RLX_JSON_H

#include "backends/rlx.h"
#include <cjson/cJSON.h>

#define RLX_JSON_STR_NUL 0x4e554c /* valueint of a string node whose NULs are stored as C0 80 */

/* Parses len bytes of JSON (the whole text must be one value plus whitespace). Fails with
 * RLX_EINVAL and a message naming line and column, RLX_ERANGE past 1000 nesting levels, or
 * RLX_ENOMEM. */
int rlx_json_parse(const char *text, size_t len, cJSON **out, rlx_error *err);

#endif
