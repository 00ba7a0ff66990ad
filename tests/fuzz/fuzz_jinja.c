/* fuzz_jinja.c - libFuzzer target for the Jinja engine (models/chat_template.h): the input is a
 * template's source, parsed and, when it parses, rendered with a fixed chat context (messages
 * with a system prompt, tool calls and a tool answer, tools, add_generation_prompt, bos/eos
 * and a fixed time). Parse and render must either succeed or fail with a message. */
#include "models/chat_template.h"
#include "models/json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *g_ctx;

static const char ctx_json[] =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"You are helpful.\"},"
    "{\"role\":\"user\",\"content\":\"Hi \\u00e9\\ud83d\\ude00 <b>\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
    "\"function\":{\"name\":\"get\",\"arguments\":{\"x\":1.0,\"y\":[1,2]}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"},"
    "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]},"
    "{\"role\":\"user\",\"content\":\"again\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get\",\"description\":\"d\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"}}}}}],"
    "\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\","
    "\"enable_thinking\":false,\"n\":12345678901234567890,\"f\":-0.0}";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    rlx_error err = {0};
    if (rlx_json_parse(ctx_json, sizeof ctx_json - 1, &g_ctx, &err)) {
        fprintf(stderr, "context: %s\n", err.msg);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rlx_chat_template *t = NULL;
    rlx_error err = {0};
    if (rlx_chat_template_parse(&t, (const char *)data, size, &err)) {
        if (!err.msg[0]) abort();
        return 0;
    }
    char *out = NULL;
    size_t len = 0;
    memset(&err, 0, sizeof err);
    int rc = rlx_chat_template_render_len(t, g_ctx, "2024-07-01T12:00:00", &out, &len, &err);
    if (rc && !err.msg[0]) abort();
    if (!rc && (!out || strlen(out) > len)) abort();
    free(out);
    rlx_chat_template_free(t);
    return 0;
}
