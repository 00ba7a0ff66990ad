/* toml_flat.h - a reader of flat TOML files: the `<model>.rlx.toml` compile profiles
 * (server/profile.h). Debian 12 packages no C TOML library, so this reads the part of TOML 1.0
 * that a profile uses and refuses the rest by name, never guessing:
 * - comments (`#` to the end of a line, also after a value), blank lines, LF or CRLF;
 * - table headers `[name]` (bare or quoted name; a dotted name or `[[array]]` is refused);
 * - `key = value` with a bare key (A-Z a-z 0-9 _ -) or a quoted one ("..." or '...'); a
 *   dotted key is refused, so is a key given twice in one table and a table opened twice;
 * - values: basic strings "..." (escapes \b \t \n \f \r \" \\ \uXXXX \UXXXXXXXX; control
 *   characters, surrogates and U+0000 refused), literal strings '...', integers (decimal with
 *   `_` between digits, 0x / 0o / 0b), floats (fraction and/or exponent, inf, nan, signs) and
 *   booleans. Multi-line strings, arrays, inline tables and dates are refused by name.
 * Integers come back in decimal, floats as written less the underscores, strings decoded
 * (UTF-8). Errors are RLX_EINVAL naming path:line and what was wrong.
 *
 * Pure parsing, any thread; the callback's strings live until it returns. */
#ifndef RLX_TOML_FLAT_H
#define RLX_TOML_FLAT_H

#include "backends/rlx.h"

#include <stdio.h>

typedef enum { RLX_TOML_STRING, RLX_TOML_INT, RLX_TOML_FLOAT, RLX_TOML_BOOL } rlx_toml_kind;

/* Called per key: table is "" at the top; src is "path:line". Return 0 to go on, or an RLX_E*
 * code (with err set) to stop the read with it. */
typedef int (*rlx_toml_key_fn)(void *user, const char *table, const char *key, rlx_toml_kind kind, const char *value,
                               const char *src, rlx_error *err);

/* Reads f (named path in errors) to its end. 0, the callback's code, RLX_EINVAL on a syntax
 * error or RLX_ENOMEM. */
int rlx_toml_flat_read(FILE *f, const char *path, rlx_toml_key_fn fn, void *user, rlx_error *err);

const char *rlx_toml_kind_name(rlx_toml_kind k);

#endif
