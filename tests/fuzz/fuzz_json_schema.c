/* fuzz_json_schema.c - libFuzzer target for the JSON Schema compiler (engine/json_schema.h).
 * The input is a schema's JSON text; when it parses, the compiler must either refuse it with a
 * message or produce GBNF that the grammar compiler takes (or refuses with a message, e.g. a
 * left-recursive $ref). A pseudo-random walk through the grammar over JSON-ish pieces then
 * checks the oracle: whenever the grammar says the text is complete, cJSON parses it. */
#include "engine/grammar.h"
#include "engine/json_schema.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const pieces[] = {
    "{", "}", "[", "]", "\"", ":", ",", " ", "\n", "\t", "0", "1", "7", "9", "-", "+", ".", "e", "E", "a", "k",
    "true", "false", "null", "\\", "\\n", "\\u00e9", "\\ud83d\\ude00", "u", "d", "\xc3\xa9", "\xe4\xb8\xad",
    "\xf0\x9f\x98\x80", "T", "Z", "x", "\"a\"", "\":", "},", "2024-02-29", "12:30:00Z", "v", "kids", "id",
};
enum { NV = sizeof pieces / sizeof pieces[0] };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *schema = cJSON_ParseWithLength((const char *)data, size);
    if (!schema) return 0;
    rlx_error err = {0};
    char *gbnf = rlx_json_schema_to_gbnf(schema, &err);
    cJSON_Delete(schema);
    if (!gbnf) {
        if (!err.msg[0]) abort(); /* every refusal says why */
        return 0;
    }
    rlx_grammar *g = rlx_grammar_compile(gbnf, strlen(gbnf), NULL, &err);
    free(gbnf);
    if (!g) {
        if (!err.msg[0]) abort();
        return 0;
    }
    rlx_grammar_state *s = rlx_grammar_state_new(g, &err);
    char text[4096];
    size_t n = 0;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 16777619u;
    for (int step = 0; s && step < 96; step++) {
        if (rlx_grammar_can_end(s)) {
            cJSON *v = cJSON_ParseWithLength(text, n);
            if (!v) abort(); /* the grammar let through text that is not JSON */
            cJSON_Delete(v);
        }
        h = h * 1103515245u + 12345u;
        int t = (int)(h % NV), tries = 0;
        size_t len = strlen(pieces[t]);
        while (tries < NV && (n + len >= sizeof text || !rlx_grammar_allows(s, pieces[t], len))) {
            t = (t + 1) % NV;
            len = strlen(pieces[t]);
            tries++;
        }
        if (tries == NV || rlx_grammar_accept(s, pieces[t], len)) break;
        memcpy(text + n, pieces[t], len);
        n += len;
    }
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);
    return 0;
}
