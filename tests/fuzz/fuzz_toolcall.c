/* fuzz_toolcall.c - libFuzzer target for the tool-call / reasoning parser (proto/toolcall.h).
 * The first byte picks the format (and whether the prompt opened reasoning), the second seeds
 * the split points, the rest is the model's output. Parsing it whole and in random pieces must
 * not crash and must give the same content, reasoning, calls and result; events must come in
 * order (arguments only inside a call). */
#include "proto/toolcall.h"
#include "tests/unit/test_toolcall_util.h"

#include <stdint.h>

static const char tools[] = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                            "\"properties\":{\"n\":{\"type\":\"integer\"},\"s\":{\"type\":\"string\"}}}}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    tc_check_utf8 = false; /* random bytes: deltas hold what they are given */
    tc_case c = {.format = (rlx_tc_format)((data[0] & 0x7f) % RLX_TC_N_FORMATS), .name = "fuzz"};
    if (data[0] & 0x80) c.prompt = c.format == RLX_TC_FUNCTIONARY_V32 ? ">>>" : "<think>\n";
    const char *text = (const char *)data + 2;
    size_t n = size - 2;
    tc_result whole, parts;
    tc_run_n(&c, tools, text, n, 0, 0, &whole);
    tc_run_n(&c, tools, text, n, 1 + data[1], data[1] % 7 == 0 ? 1 : 0, &parts);
    if (whole.order_errors) {
        fprintf(stderr, "events out of order or bad result (%d)\n", whole.order_errors);
        abort();
    }
    if (tc_same(&c, &whole, &parts, data[1])) abort();
    tc_result_free(&whole);
    tc_result_free(&parts);
    return 0;
}
