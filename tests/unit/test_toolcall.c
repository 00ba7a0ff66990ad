/* test_toolcall.c - the tool-call / reasoning output parser (proto/toolcall.h) on recorded
 * model-style outputs of every format: single, parallel, after content, after reasoning,
 * unicode and escapes, malformed and cut-off calls. Each output is parsed whole, then streamed
 * in random pieces (many seeds) and byte by byte: the calls, content and reasoning must be the
 * same, deltas never split UTF-8, and content holds no tag text. Template detection is checked
 * on every template of ../shared/templates (test_toolcall_detect.c). */
#include "proto/toolcall.h"
#include "proto/proto.h"
#include "tests/rlx_test.h"
#include "tests/unit/test_toolcall_util.h"

#include <ctype.h>

#define DSB "<\xef\xbd\x9c" "tool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DSE "<\xef\xbd\x9c" "tool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DCB "<\xef\xbd\x9c" "tool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DCE "<\xef\xbd\x9c" "tool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DSP "<\xef\xbd\x9c" "tool\xe2\x96\x81" "sep\xef\xbd\x9c>"

#define W "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
#define WA "{\"city\":\"Paris\"}"
#define TOOLS "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\"," \
              "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"},\"code\":{\"type\":\"string\"}," \
              "\"opts\":{\"type\":\"object\"},\"hot\":{\"type\":[\"boolean\",\"null\"]}}}}}]"

static const tc_case cases[] = {
    /* Hermes / Qwen2.5 / Qwen3 */
    {RLX_TC_HERMES, "single", NULL, "<tool_call>\n" W "\n</tool_call>", "", "", 1, {"get_weather"}, {WA}, 0, true},
    {RLX_TC_HERMES, "parallel", NULL, "<tool_call>\n" W "\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
     "", "", 2, {"get_weather", "now"}, {WA, "{}"}, 0, true},
    {RLX_TC_HERMES, "after content", NULL, "Let me check.\n<tool_call>\n" W "\n</tool_call>", "Let me check.\n", "", 1,
     {"get_weather"}, {WA}, 0, true},
    {RLX_TC_HERMES, "content only", NULL, "The weather is <b>nice</b> < 3 <tool", "The weather is <b>nice</b> < 3 <tool", "", 0, {0}, {0}, 0, false},
    {RLX_TC_HERMES, "unicode", NULL, "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"caf\\u00e9 \\\"\xe6\x9d\xb1\xe4\xba\xac\\\" \xf0\x9f\x98\x80\\n\", \"n\": [1, 2.50]}}</tool_call>",
     "", "", 1, {"search"}, {"{\"q\":\"caf\\u00e9 \\\"\xe6\x9d\xb1\xe4\xba\xac\\\" \xf0\x9f\x98\x80\\n\",\"n\":[1,2.50]}"}, 0, true},
    {RLX_TC_HERMES, "arguments first", NULL, "<tool_call>{\"arguments\": {\"a\": 1}, \"name\": \"f\"}</tool_call> done",
     "done", "", 1, {"f"}, {"{\"a\":1}"}, 0, true},
    {RLX_TC_HERMES, "arguments as string", NULL, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>",
     "", "", 1, {"f"}, {"{\"a\":1}"}, 0, true},
    {RLX_TC_HERMES, "malformed", NULL, "<tool_call>\nnot json\n</tool_call>", "<tool_call>\nnot json\n</tool_call>", "", 0, {0}, {0}, 0, false},
    {RLX_TC_HERMES, "no name", NULL, "<tool_call>{\"x\": 1}</tool_call>", "<tool_call>{\"x\": 1}</tool_call>", "", 0, {0}, {0}, 0, false},
    {RLX_TC_HERMES, "unterminated", NULL, "Sure <tool_call>\n{\"name\": \"f\", \"argu", "Sure <tool_call>\n{\"name\": \"f\", \"argu", "", 0, {0}, {0}, 0, false},
    {RLX_TC_HERMES, "qwen3 think", "", "<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n" W "\n</tool_call>",
     "", "The user wants the weather.", 1, {"get_weather"}, {WA}, 0, true},
    {RLX_TC_HERMES, "prompt opens think", "<|im_start|>assistant\n<think>\n", "Paris, then.\n</think>\n\nCalling.\n<tool_call>\n" W "\n</tool_call>",
     "Calling.\n", "Paris, then.", 1, {"get_weather"}, {WA}, 0, true},
    {RLX_TC_HERMES, "think cut off", "", "<think>\nhmm \xc3\xa9t\xc3\xa9", "", "hmm \xc3\xa9t\xc3\xa9", 0, {0}, {0}, 0, true},
    /* Qwen3-Coder / Qwen3.5 XML */
    {RLX_TC_QWEN3_CODER, "single typed", NULL,
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
     "", "", 1, {"get_weather"}, {"{\"city\":\"Paris\",\"days\":3}"}, 0, true},
    {RLX_TC_QWEN3_CODER, "string stays string", NULL,
     "I'll look.\n<tool_call>\n<function=get_weather>\n<parameter=code>\n123\n</parameter>\n<parameter=opts>\n{\"a\": [1, true]}\n</parameter>\n"
     "<parameter=hot>\nfalse\n</parameter>\n<parameter=other>\nsay \"hi\"\n\xe4\xbd\xa0\xe5\xa5\xbd\n</parameter>\n</function>\n</tool_call>",
     "I'll look.\n", "", 1, {"get_weather"}, {"{\"code\":\"123\",\"opts\":{\"a\":[1,true]},\"hot\":false,\"other\":\"say \\\"hi\\\"\\n\xe4\xbd\xa0\xe5\xa5\xbd\"}"}, 0, true},
    {RLX_TC_QWEN3_CODER, "parallel", NULL,
     "<tool_call>\n<function=now>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=days>\nsoon\n</parameter>\n</function>\n</tool_call>",
     "", "", 2, {"now", "get_weather"}, {"{}", "{\"days\":\"soon\"}"}, 0, true},
    {RLX_TC_QWEN3_CODER, "cut off", NULL, "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
     "", "", 1, {"get_weather"}, {""}, RLX_EFORMAT, true},
    /* Llama 3.x */
    {RLX_TC_LLAMA3, "json", NULL, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", "", 1, {"get_weather"}, {WA}, 0, true},
    {RLX_TC_LLAMA3, "python_tag json", NULL, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eom_id|>",
     "", "", 1, {"get_weather"}, {WA}, 0, true},
    {RLX_TC_LLAMA3, "python_tag code", NULL, "<|python_tag|>print(\"hi\")\n<|eom_id|>", "", "", 1, {"python"}, {"{\"code\":\"print(\\\"hi\\\")\"}"}, 0, true},
    {RLX_TC_LLAMA3, "json name not a name", NULL, "{\"name\": \"<b>\", \"parameters\": {}} as JSON", "{\"name\": \"<b>\", \"parameters\": {}} as JSON",
     "", 0, {0}, {0}, 0, true},
    {RLX_TC_LLAMA3, "json cut off", NULL, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Pa", "", "", 1, {"get_weather"},
     {"{\"city\":\"Pa"}, RLX_EFORMAT, true},
    {RLX_TC_LLAMA3, "json not a call", NULL, "{\"a\": 1} is JSON", "{\"a\": 1} is JSON", "", 0, {0}, {0}, 0, true},
    {RLX_TC_LLAMA3, "text", NULL, "  Hello <|eot_id|>", "  Hello ", "", 0, {0}, {0}, 0, true},
    /* Mistral */
    {RLX_TC_MISTRAL, "json array", NULL, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"now\", \"arguments\": {}}]</s>",
     "", "", 2, {"get_weather", "now"}, {WA, "{}"}, 0, true},
    {RLX_TC_MISTRAL, "args", NULL, "Checking.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]now[ARGS]{}",
     "Checking.", "", 2, {"get_weather", "now"}, {WA, "{}"}, 0, true},
    {RLX_TC_MISTRAL, "args cut off", NULL, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Pa", "", "", 1, {"get_weather"}, {"{\"city\":\"Pa"}, RLX_EFORMAT, true},
    /* DeepSeek R1 / V3.1 */
    {RLX_TC_DEEPSEEK, "r1", "", "<think>\nweather\n</think>\n\n" DSB DCB "function" DSP "get_weather\n```json\n{\"city\": \"Paris\"}\n```" DCE DSE,
     "", "weather", 1, {"get_weather"}, {WA}, 0, true},
    {RLX_TC_DEEPSEEK, "v3.1 parallel", NULL, "Sure." DSB DCB "get_weather" DSP "{\"city\": \"Paris\"}" DCE DCB "now" DSP "{}" DCE DSE,
     "Sure.", "", 2, {"get_weather", "now"}, {WA, "{}"}, 0, true},
    /* Functionary */
    {RLX_TC_FUNCTIONARY_V31, "v3.1", NULL, "Looking.<function=get_weather>{\"city\": \"Paris\"}</function><function=now>{}</function><|eom_id|>",
     "Looking.", "", 2, {"get_weather", "now"}, {WA, "{}"}, 0, true},
    {RLX_TC_FUNCTIONARY_V31, "v3.1 python", NULL, "<|python_tag|>x = 1<|eom_id|>", "", "", 1, {"python"}, {"{\"code\":\"x = 1\"}"}, 0, true},
    {RLX_TC_FUNCTIONARY_V32, "v3.2", "<|start_header_id|>assistant<|end_header_id|>\n\n>>>", "get_weather\n{\"city\": \"Paris\"}>>>now\n{}",
     "", "", 2, {"get_weather", "now"}, {WA, "{}"}, 0, true},
    {RLX_TC_FUNCTIONARY_V32, "v3.2 all", ">>>", "all\nLet me check.\n>>>get_weather\n{\"city\": \"Paris\"}", "Let me check.\n", "", 1,
     {"get_weather"}, {WA}, 0, true},
    /* Granite, Firefunction, Kimi */
    {RLX_TC_GRANITE, "granite", NULL, "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]", "", "", 1, {"get_weather"}, {WA}, 0, true},
    {RLX_TC_FIREFUNCTION, "firefunction", NULL, " functools[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]", "", "", 1, {"get_weather"}, {WA}, 0, true},
    {RLX_TC_KIMI_K2, "kimi", NULL, "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}"
     "<|tool_call_end|><|tool_calls_section_end|>", "", "", 1, {"get_weather"}, {WA}, 0, true},
    {RLX_TC_APRIEL, "apriel", NULL, "Calling.\n<tool_calls>[" W ", {\"name\": \"now\", \"arguments\": {}}]</tool_calls>", "Calling.\n", "", 2,
     {"get_weather", "now"}, {WA, "{}"}, 0, true},
    /* gpt-oss harmony */
    {RLX_TC_GPT_OSS, "harmony call", NULL, "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>", "", "Need the weather.", 1, {"get_weather"}, {WA}, 0, true},
    {RLX_TC_GPT_OSS, "harmony final", NULL, "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Hi \xf0\x9f\x98\x80!<|return|>",
     "Hi \xf0\x9f\x98\x80!", "Easy.", 0, {0}, {0}, 0, true},
    /* more of every format: unicode and escapes in streamed arguments, malformed calls */
#define UA "{\"q\": \"caf\\u00e9 \\\"\xe6\x9d\xb1\xe4\xba\xac\\\" \xf0\x9f\x98\x80\\n\", \"n\": [1, 2.50]}"
#define UA_OUT "{\"q\":\"caf\\u00e9 \\\"\xe6\x9d\xb1\xe4\xba\xac\\\" \xf0\x9f\x98\x80\\n\",\"n\":[1,2.50]}"
    {RLX_TC_MISTRAL, "args unicode", NULL, "[TOOL_CALLS]search[ARGS]" UA, "", "", 1, {"search"}, {UA_OUT}, 0, true},
    {RLX_TC_MISTRAL, "malformed", NULL, "[TOOL_CALLS]not a call", "[TOOL_CALLS]not a call", "", 0, {0}, {0}, 0, false},
    {RLX_TC_DEEPSEEK, "unicode", NULL, DSB DCB "search" DSP UA DCE DSE, "", "", 1, {"search"}, {UA_OUT}, 0, true},
    {RLX_TC_DEEPSEEK, "malformed", NULL, DCB "search" DSP "no json" DCE, DCB "search" DSP "no json" DCE, "", 0, {0}, {0}, 0, false},
    {RLX_TC_FUNCTIONARY_V31, "unicode", NULL, "<function=search>" UA "</function>", "", "", 1, {"search"}, {UA_OUT}, 0, true},
    {RLX_TC_FUNCTIONARY_V31, "bad json", NULL, "<function=f>{\"a\": ]}</function>", "]}</function>", "", 1, {"f"}, {"{\"a\":"}, RLX_EFORMAT, false},
    {RLX_TC_FUNCTIONARY_V32, "v3.2 unicode", ">>>", "search\n" UA, "", "", 1, {"search"}, {UA_OUT}, 0, true},
    {RLX_TC_GRANITE, "granite parallel think", "", "<think>plan</think><response>Sure.</response><|tool_call|>[" W ", {\"name\": \"now\", \"arguments\": {}}]",
     "Sure.", "plan", 2, {"get_weather", "now"}, {WA, "{}"}, 0, true},
    /* an array of calls streams element by element: one that is not a call after a call was
       reported breaks the list (the whole array was text when the list was read whole) */
    {RLX_TC_GRANITE, "granite bad second name", NULL, "<|tool_call|>[" W ", {\"name\": \"a<b\", \"arguments\": {}}]",
     "{\"name\": \"a<b\", \"arguments\": {}}]", "", 1, {"get_weather"}, {WA}, RLX_EFORMAT, false},
    {RLX_TC_GRANITE, "granite bad first element", NULL, "<|tool_call|>[{\"name\": \"a<b\", \"arguments\": {}}, " W "]",
     "<|tool_call|>[{\"name\": \"a<b\", \"arguments\": {}}, " W "]", "", 0, {0}, {0}, 0, false},
    {RLX_TC_GRANITE, "granite empty list", NULL, "<|tool_call|>[]", "<|tool_call|>[]", "", 0, {0}, {0}, 0, false},
    {RLX_TC_GRANITE, "granite elements in any key order", NULL,
     "<|tool_call|>[{\"arguments\": {\"city\": \"Paris\"}, \"name\": \"get_weather\"}, {\"name\": \"now\", \"arguments\": {}, \"x\": [1]}]",
     "", "", 2, {"get_weather", "now"}, {WA, "{}"}, 0, true},
    {RLX_TC_GRANITE, "granite bracket forgotten", NULL, "<|tool_call|>[" W "", "", "", 1, {"get_weather"}, {WA}, 0, true},
    {RLX_TC_APRIEL, "apriel bracket forgotten", NULL, "<tool_calls>[" W ", " W "</tool_calls>Done", "Done", "", 2,
     {"get_weather", "get_weather"}, {WA, WA}, 0, true},
    {RLX_TC_MISTRAL, "mistral list cut after a call", NULL, "[TOOL_CALLS][" W ", {\"name\": \"now\", \"argu", "", "", 1, {"get_weather"},
     {WA}, RLX_EFORMAT, true},
    {RLX_TC_MISTRAL, "mistral bad arguments in the list", NULL, "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {\"a\": 01}}, " W "]", "", "",
     2, {"now", "get_weather"}, {"{\"a\":01}", WA}, RLX_EFORMAT, true},
    {RLX_TC_GRANITE, "granite malformed", NULL, "<|tool_call|>[1, 2]", "<|tool_call|>[1, 2]", "", 0, {0}, {0}, 0, false},
    /* cut before the call's name is whole: the raw text, section marker and all, is the content */
    {RLX_TC_KIMI_K2, "kimi cut in the header", NULL, "ok<|tool_calls_section_begin|><|tool_call_begin|>functions.plot:4<|tool_call_argument",
     "ok<|tool_calls_section_begin|><|tool_call_begin|>functions.plot:4<|tool_call_argument", "", 0, {0}, {0}, 0, false},
    {RLX_TC_KIMI_K2, "kimi think parallel", "", "<think>x</think>ok<|tool_calls_section_begin|><|tool_call_begin|>functions.search:0<|tool_call_argument_begin|>" UA
     "<|tool_call_end|><|tool_call_begin|>functions.now:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
     "ok", "x", 2, {"search", "now"}, {UA_OUT, "{}"}, 0, true},
    {RLX_TC_GPT_OSS, "harmony unicode", NULL, "<|channel|>commentary to=functions.search <|constrain|>json<|message|>" UA "<|call|>", "", "", 1,
     {"search"}, {UA_OUT}, 0, true},
    {RLX_TC_GPT_OSS, "harmony cut off", NULL, "<|channel|>commentary to=functions.f<|message|>{\"a\": 1", "", "", 1, {"f"}, {"{\"a\":1"}, RLX_EFORMAT, true},
    {RLX_TC_GPT_OSS, "harmony preamble", NULL, "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary to=functions.now<|message|>{}<|call|>",
     "Checking.", "", 1, {"now"}, {"{}"}, 0, true},
    /* the prompt ends in the harmony header: the output may go on with the recipient (before:
       no call, the header's text as content); a built-in tool's call in the analysis channel
       ends at <|call|>, which stays out of the reasoning */
    {RLX_TC_GPT_OSS, "harmony recipient first", "<|start|>user<|message|>Hi<|end|><|start|>assistant",
     " to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>", "", "", 1,
     {"get_weather"}, {WA}, 0, true},
    {RLX_TC_GPT_OSS, "harmony channel first", "<|start|>assistant",
     "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.", "Sunny.",
     "Need weather.", 0, {0}, {0}, 0, true},
    {RLX_TC_GPT_OSS, "harmony built-in tool", NULL,
     "<|channel|>analysis<|message|>I need the weather.<|end|><|start|>assistant to=python<|channel|>analysis code<|message|>print(1)<|call|>",
     "", "I need the weather.print(1)", 0, {0}, {0}, 0, true},
    {RLX_TC_APRIEL, "apriel malformed", NULL, "<tool_calls>[oops]</tool_calls>", "<tool_calls>[oops]</tool_calls>", "", 0, {0}, {0}, 0, false},
    {RLX_TC_LLAMA3, "llama3 unicode", NULL, "{\"name\": \"search\", \"parameters\": " UA "}", "", "", 1, {"search"}, {UA_OUT}, 0, true},
    /* arguments a client's JSON.parse refuses (RFC 8259: no tru, 01, 1., 0x10, NaN) are never
       a call's arguments: whole-object formats leave the text as content, streamed ones break
       the call (found against llama.cpp's parsers, which refuse them; before, each was a call).
       A call object that opens with its name streams its arguments: broken, its brace and
       closing tag are no content */
    {RLX_TC_HERMES, "leading zero", NULL, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": 01}}\n</tool_call>",
     "", "", 1, {"get_weather"}, {"{\"days\":01}"}, RLX_EFORMAT, true},
    {RLX_TC_HERMES, "trailing dot", NULL, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1.}}</tool_call>",
     "", "", 1, {"f"}, {"{\"x\":1.}"}, RLX_EFORMAT, true},
    {RLX_TC_HERMES, "NaN", NULL, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": NaN}}</tool_call>",
     "", "", 1, {"f"}, {"{\"x\":NaN}"}, RLX_EFORMAT, true},
    {RLX_TC_HERMES, "arguments first, not JSON", NULL, "<tool_call>{\"arguments\": {\"x\": 01}, \"name\": \"f\"}</tool_call>",
     "<tool_call>{\"arguments\": {\"x\": 01}, \"name\": \"f\"}</tool_call>", "", 0, {0}, {0}, 0, false},
    /* the object's members after the arguments are read past (brackets and braces in strings
       included), as a whole object's are; "parameters" is the arguments too */
    {RLX_TC_HERMES, "members after the arguments", NULL,
     "<tool_call>\n{ \"name\" :\n\"get_weather\" , \"arguments\"\t: {\"city\": \"P]}\", \"days\": [1, {\"a\": null}]}, \"id\": {\"x\": \"}\"},"
     " \"name\": \"other\"}\n</tool_call>\nDone.", "Done.", "", 1, {"get_weather"}, {"{\"city\":\"P]}\",\"days\":[1,{\"a\":null}]}"}, 0, true},
    {RLX_TC_HERMES, "parameters", NULL, "<tool_call>{\"name\": \"f\", \"parameters\": {\"a\": 1}}</tool_call>", "", "", 1, {"f"},
     {"{\"a\":1}"}, 0, true},
    /* a model that forgets the object's closing brace meant the call it wrote */
    {RLX_TC_HERMES, "brace forgotten", NULL, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}\n</tool_call>\nOK",
     "OK", "", 1, {"get_weather"}, {WA}, 0, true},
    {RLX_TC_HERMES, "object left open", NULL, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}", "", "", 1, {"f"},
     {"{\"a\":1}"}, 0, true},
    {RLX_TC_HERMES, "cut off in the arguments", NULL, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"Par", "", "", 1, {"f"},
     {"{\"a\":\"Par"}, RLX_EFORMAT, true},
    /* raw control characters in an argument string are escaped (JSON parsers refuse them; it
       was finish_reason tool_calls with arguments JSON.parse throws on) */
    {RLX_TC_HERMES, "raw control characters", NULL, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": \"x\ty\nz\x01\"}}\n</tool_call>", "", "", 1,
     {"add"}, {"{\"a\":\"x\\ty\\nz\\u0001\"}"}, 0, true},
    {RLX_TC_HERMES, "raw control characters, read whole", NULL, "<tool_call>{\"arguments\": {\"a\": \"x\ty\"}, \"name\": \"add\"}</tool_call>", "",
     "", 1, {"add"}, {"{\"a\":\"x\\ty\"}"}, 0, true},
    /* the closing tag before the arguments close: broken there, the text after it is content
       (it was taken into the arguments, then "cut off") */
    {RLX_TC_HERMES, "tag before the arguments close", NULL,
     "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2\n</tool_call>\nThe end.", "The end.", "", 1, {"add"},
     {"{\"a\":1,\"b\":2"}, RLX_EFORMAT, true},
    /* a brace forgotten before the list's next call, or before text: neither is a member */
    {RLX_TC_MISTRAL, "mistral brace forgotten before the next call", NULL,
     "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}, {\"name\": \"add\", \"arguments\": {\"a\": 3, \"b\": 4}}]",
     "", "", 2, {"add", "add"}, {"{\"a\":1,\"b\":2}", "{\"a\":3,\"b\":4}"}, 0, true},
    {RLX_TC_LLAMA3, "llama3 brace forgotten before text", NULL, "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2} Done.", "Done.",
     "", 1, {"add"}, {"{\"a\":1,\"b\":2}"}, 0, true},
    {RLX_TC_HERMES, "name not a name", NULL, "<tool_call>{\"name\": \"a\\nb\", \"arguments\": {}}</tool_call>",
     "<tool_call>{\"name\": \"a\\nb\", \"arguments\": {}}</tool_call>", "", 0, {0}, {0}, 0, false},
    /* a number too big for a double is still a JSON number (JSON.parse and Python take 1e400):
       a call (it was left as content) */
    {RLX_TC_HERMES, "huge exponent", NULL, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1e400}}</tool_call>", "", "", 1,
     {"f"}, {"{\"x\":1e400}"}, 0, true},
    {RLX_TC_HERMES, "arguments null", NULL, "<tool_call>{\"name\": \"now\", \"arguments\": null}</tool_call>", "", "", 1, {"now"}, {"{}"}, 0, true},
    {RLX_TC_HERMES, "arguments array", NULL, "<tool_call>{\"name\": \"f\", \"arguments\": [1, 2]}</tool_call>",
     "<tool_call>{\"name\": \"f\", \"arguments\": [1, 2]}</tool_call>", "", 0, {0}, {0}, 0, false},
    {RLX_TC_KIMI_K2, "kimi bad literal", NULL, "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
     "{\"city\": \"P\", \"days\": tru}<|tool_call_end|><|tool_calls_section_end|>", "<|tool_call_end|>", "", 1, {"get_weather"}, {"{\"city\":\"P\",\"days\":tru}"},
     RLX_EFORMAT, false},
    {RLX_TC_FUNCTIONARY_V31, "hex number", NULL, "<function=get_weather>{\"days\": 0x10}</function>", "</function>", "", 1, {"get_weather"},
     {"{\"days\":0x10}"},
     RLX_EFORMAT, false},
    {RLX_TC_QWEN3_CODER, "number not JSON stays text", NULL,
     "<tool_call>\n<function=get_weather>\n<parameter=days>\n01\n</parameter>\n<parameter=opts>\n{\"a\": 1.}\n</parameter>\n</function>\n</tool_call>",
     "", "", 1, {"get_weather"}, {"{\"days\":\"01\",\"opts\":\"{\\\"a\\\": 1.}\"}"}, 0, true},
    /* a value holding the text </parameter> (code): it ends only before the next tag, as
       llama.cpp reads it (before: the call broke there, a 500) */
    {RLX_TC_QWEN3_CODER, "closing tag inside a value", NULL,
     "<tool_call>\n<function=get_weather>\n<parameter=code>\necho \"</parameter>\" and </function>\nif a</parameter>b: pass\n</parameter>\n"
     "<parameter=days>\n-2\n</parameter>\n</function>\n</tool_call>", "", "", 1, {"get_weather"},
     {"{\"code\":\"echo \\\"</parameter>\\\" and </function>\\nif a</parameter>b: pass\",\"days\":-2}"}, 0, true},
    /* generic */
    {RLX_TC_GENERIC, "generic calls", NULL, "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"1\"}, {\"name\": \"now\", \"arguments\": {}}]}",
     "", "", 2, {"get_weather", "now"}, {WA, "{}"}, 0, true},
    {RLX_TC_GENERIC, "generic one", NULL, "{\"tool_call\": " W "}", "", "", 1, {"get_weather"}, {WA}, 0, true},
    {RLX_TC_GENERIC, "generic response", NULL, "{\"response\": \"Hello \\u00e9\"}", "Hello \xc3\xa9", "", 0, {0}, {0}, 0, true},
    {RLX_TC_GENERIC, "empty", NULL, "", "", "", 0, {0}, {0}, 0, true},
    {RLX_TC_FUNCTIONARY_V32, "empty after >>>", ">>>", "", "", "", 0, {0}, {0}, 0, true},
    {RLX_TC_HERMES, "only whitespace", "", "<think>\n</think>\n\n", "", "", 0, {0}, {0}, 0, true},
    {RLX_TC_GENERIC, "generic text", NULL, "Hello", "Hello", "", 0, {0}, {0}, 0, true},
    {RLX_TC_GENERIC, "generic broken", NULL, "{\"tool_calls\": [{\"name\": ", "{\"tool_calls\": [{\"name\": ", "", 0, {0}, {0}, 0, false},
};

TEST(formats_whole_and_streamed)
{
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const tc_case *c = &cases[i];
        tc_result whole;
        tc_run(c, TOOLS, c->text, 0, 0, &whole);
        int bad = tc_check(c, &whole);
        for (uint64_t seed = 1; seed <= 200 && !bad; seed++) {
            tc_result r;
            tc_run(c, TOOLS, c->text, seed, seed % 5 == 0 ? 1 : 0, &r);
            bad = tc_same(c, &whole, &r, seed);
            tc_result_free(&r);
        }
        tc_result_free(&whole);
        failed += bad != 0;
    }
    ASSERT_EQ(failed, 0);
}

TEST(ids_unique_and_seeded)
{
    static const tc_case c = {RLX_TC_HERMES, "ids", NULL, "<tool_call>" W "</tool_call><tool_call>" W "</tool_call>", "", "", 2,
                              {"get_weather", "get_weather"}, {WA, WA}, 0, true};
    tc_result a, b;
    tc_run(&c, NULL, c.text, 0, 0, &a);
    tc_run(&c, NULL, c.text, 0, 0, &b);
    ASSERT_EQ(a.n_calls, 2);
    ASSERT(!strncmp(a.ids[0], "call_", 5) && strlen(a.ids[0]) == 29);
    ASSERT(strcmp(a.ids[0], a.ids[1]));
    ASSERT_STR_EQ(a.ids[0], b.ids[0]); /* the same seed gives the same ids */
    tc_result_free(&a);
    tc_result_free(&b);
    /* Mistral's templates refuse any id but 9 alphanumerics */
    static const tc_case m = {RLX_TC_MISTRAL, "mistral ids", NULL, "[TOOL_CALLS][" W "," W "]", "", "", 2,
                              {"get_weather", "get_weather"}, {WA, WA}, 0, true};
    tc_run(&m, NULL, m.text, 0, 0, &a);
    ASSERT_EQ(a.n_calls, 2);
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(strlen(a.ids[i]), 9);
        for (int k = 0; k < 9; k++) ASSERT(isalnum((unsigned char)a.ids[i][k]));
    }
    ASSERT(strcmp(a.ids[0], a.ids[1]));
    tc_result_free(&a);
}

/* the first call's id for a seed and a prompt */
static void first_id(const char *prompt, uint64_t seed, char *out, size_t n)
{
    rlx_tc_info info;
    rlx_tc_info_of(RLX_TC_HERMES, &info);
    rlx_tc_opts o = {.prompt = prompt, .seeded = true, .seed = seed};
    rlx_tc_parser *p = rlx_tc_parser_new(&info, &o);
    tc_result r;
    memset(&r, 0, sizeof r);
    r.content = strdup("");
    r.reasoning = strdup("");
    const char *t = "<tool_call>" W "</tool_call>";
    rlx_error err = {0};
    if (!p || rlx_tc_feed(p, t, strlen(t), tc_sink, &r) || rlx_tc_finish(p, tc_sink, &r, &err)) r.n_calls = 0;
    rlx_tc_parser_free(p);
    snprintf(out, n, "%s", r.n_calls == 1 ? r.ids[0] : "");
    tc_result_free(&r);
}

/* An agent that sends the same seed on every turn: each turn (a longer prompt) gets new ids,
 * and the same turn again the same ones. */
TEST(seeded_ids_differ_between_turns)
{
    char a[40], b[40], c[40];
    first_id("<|im_start|>user\nWeather in Oslo?<|im_end|>\n<|im_start|>assistant\n", 7, a, sizeof a);
    first_id("<|im_start|>user\nWeather in Oslo?<|im_end|>\n<|im_start|>assistant\n<tool_call>...</tool_call><|im_end|>\n"
             "<|im_start|>user\n<tool_response>\n{\"t\":3}\n</tool_response><|im_end|>\n<|im_start|>assistant\n", 7, b, sizeof b);
    first_id("<|im_start|>user\nWeather in Oslo?<|im_end|>\n<|im_start|>assistant\n", 7, c, sizeof c);
    ASSERT(a[0] && b[0]);
    ASSERT_MSG(strcmp(a, b), "turns 1 and 2 both got %s", a);
    ASSERT_STR_EQ(a, c);
}

TEST(stop_from_sink)
{
    rlx_tc_info info;
    rlx_tc_info_of(RLX_TC_HERMES, &info);
    rlx_tc_parser *p = rlx_tc_parser_new(&info, NULL);
    ASSERT_EQ(rlx_tc_feed(p, "abc", 3, tc_stop_sink, NULL), 7);
    rlx_tc_parser_free(p);
}

/* rlx_tc_broken: NULL until the model breaks a call in the text fed (then it names the call,
 * whatever comes after), and NULL for a call the end cuts (rlx_tc_finish's to report) */
TEST(broken_reported_at_the_break)
{
    rlx_tc_info info;
    rlx_tc_info_of(RLX_TC_QWEN3_CODER, &info);
    tc_result r;
    memset(&r, 0, sizeof r);
    rlx_tc_parser *p = rlx_tc_parser_new(&info, NULL);
    const char *a = "<tool_call>\n<function=get_weather>\n";
    ASSERT_EQ(rlx_tc_feed(p, a, strlen(a), tc_sink, &r), 0);
    ASSERT(rlx_tc_broken(p) == NULL);
    a = "sunny\n</function>\n</tool_call>\nmore";
    ASSERT_EQ(rlx_tc_feed(p, a, strlen(a), tc_sink, &r), 0);
    ASSERT(rlx_tc_broken(p) && strstr(rlx_tc_broken(p), "get_weather") && strstr(rlx_tc_broken(p), "<parameter="));
    rlx_error err = {0};
    ASSERT_EQ(rlx_tc_finish(p, tc_sink, &r, &err), RLX_EFORMAT);
    rlx_tc_parser_free(p);
    tc_result_free(&r);
    memset(&r, 0, sizeof r);
    rlx_tc_info_of(RLX_TC_HERMES, &info);
    p = rlx_tc_parser_new(&info, NULL);
    a = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1";
    ASSERT_EQ(rlx_tc_feed(p, a, strlen(a), tc_sink, &r), 0);
    ASSERT(rlx_tc_broken(p) == NULL);
    ASSERT_EQ(rlx_tc_finish(p, tc_sink, &r, &err), RLX_EFORMAT); /* cut off */
    ASSERT(rlx_tc_broken(p) == NULL);
    rlx_tc_parser_free(p);
    tc_result_free(&r);
}

/* A parser of format f (no tools, no prompt) and an empty result for its events. */
static rlx_tc_parser *fresh_parser(rlx_tc_format f, tc_result *r)
{
    rlx_tc_info info;
    rlx_tc_info_of(f, &info);
    memset(r, 0, sizeof *r);
    r->content = strdup("");
    r->reasoning = strdup("");
    return rlx_tc_parser_new(&info, NULL);
}

/* Text streams as it comes: only what may still be a tag waits. */
TEST(holds_back_only_tag_prefixes)
{
    rlx_tc_info info;
    rlx_tc_info_of(RLX_TC_HERMES, &info);
    rlx_tc_parser *p = rlx_tc_parser_new(&info, NULL);
    tc_result r;
    const char *a;
    memset(&r, 0, sizeof r);
    r.content = strdup("");
    r.reasoning = strdup("");
    ASSERT_EQ(rlx_tc_position(p), RLX_TC_IN_CONTENT);
    ASSERT_EQ(rlx_tc_feed(p, "Hello <tool", strlen("Hello <tool"), tc_sink, &r), 0);
    ASSERT_STR_EQ(r.content, "Hello ");
    ASSERT_EQ(rlx_tc_position(p), RLX_TC_IN_CONTENT);
    ASSERT_EQ(rlx_tc_feed(p, "s> are \xc3", strlen("s> are \xc3"), tc_sink, &r), 0);
    ASSERT_STR_EQ(r.content, "Hello <tools> are "); /* the lone lead byte waits for its sequence */
    a = "\xa9<tool_call>{\"name\": \"f\", \"arguments\": {}}";
    ASSERT_EQ(rlx_tc_feed(p, a, strlen(a), tc_sink, &r), 0);
    ASSERT_STR_EQ(r.content, "Hello <tools> are \xc3\xa9");
    ASSERT_EQ(r.n_calls, 1);
    ASSERT_EQ(rlx_tc_finish(p, tc_sink, &r, NULL), 0);
    ASSERT_EQ(r.order_errors, 0);
    rlx_tc_parser_free(p);
    tc_result_free(&r);

    /* Llama 3's whole-output call streams its arguments too */
    p = fresh_parser(RLX_TC_LLAMA3, &r);
    a = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Par";
    ASSERT_EQ(rlx_tc_feed(p, a, strlen(a), tc_sink, &r), 0);
    ASSERT_EQ(r.n_calls, 1);
    ASSERT_STR_EQ(r.args[0], "{\"city\":\"Par");
    ASSERT_EQ(rlx_tc_feed(p, "is\"}}", 5, tc_sink, &r), 0);
    ASSERT_EQ(rlx_tc_finish(p, tc_sink, &r, NULL), 0);
    ASSERT_STR_EQ(r.args[0], WA);
    ASSERT_STR_EQ(r.content, "");
    rlx_tc_parser_free(p);
    tc_result_free(&r);

    /* a call object that opens with its name streams its arguments as they come; one whose
       keys come in another order is reported once it closes */
    p = fresh_parser(RLX_TC_HERMES, &r);
    a = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\"";
    ASSERT_EQ(rlx_tc_feed(p, a, strlen(a), tc_sink, &r), 0);
    ASSERT_EQ(r.n_calls, 0);
    a = ": {\"city\": \"Par";
    ASSERT_EQ(rlx_tc_feed(p, a, strlen(a), tc_sink, &r), 0);
    ASSERT_EQ(r.n_calls, 1);
    ASSERT(r.open);
    ASSERT_STR_EQ(r.names[0], "get_weather");
    ASSERT_STR_EQ(r.args[0], "{\"city\":\"Par");
    ASSERT_EQ(rlx_tc_feed(p, "is\"}", 4, tc_sink, &r), 0);
    ASSERT(!r.open);
    ASSERT_STR_EQ(r.args[0], "{\"city\":\"Paris\"}");
    ASSERT_EQ(rlx_tc_position(p), RLX_TC_IN_CALL); /* the object's brace and tag are still to come */
    a = "}\n</tool_call><tool_call>{\"arguments\": {\"a\": 1}, ";
    ASSERT_EQ(rlx_tc_feed(p, a, strlen(a), tc_sink, &r), 0);
    ASSERT_EQ(r.n_calls, 1);
    ASSERT_EQ(rlx_tc_feed(p, "\"name\": \"f\"}", 13, tc_sink, &r), 0);
    ASSERT_EQ(r.n_calls, 2);
    ASSERT_STR_EQ(r.args[1], "{\"a\":1}");
    ASSERT_EQ(rlx_tc_finish(p, tc_sink, &r, NULL), 0);
    ASSERT_STR_EQ(r.content, "");
    ASSERT_EQ(r.order_errors, 0);
    rlx_tc_parser_free(p);
    tc_result_free(&r);

    /* name-then-arguments formats stream the arguments as they come */
    p = fresh_parser(RLX_TC_MISTRAL, &r);
    a = "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Par";
    ASSERT_EQ(rlx_tc_feed(p, "[TOOL_CALLS]", 12, tc_sink, &r), 0);
    ASSERT_EQ(rlx_tc_position(p), RLX_TC_IN_CALL);
    ASSERT_EQ(rlx_tc_feed(p, a + 12, strlen(a) - 12, tc_sink, &r), 0);
    ASSERT_EQ(r.n_calls, 1);
    ASSERT(r.open);
    ASSERT_STR_EQ(r.args[0], "{\"city\":\"Par");
    ASSERT_EQ(rlx_tc_feed(p, "is\"}", 4, tc_sink, &r), 0);
    ASSERT(!r.open);
    ASSERT_STR_EQ(r.args[0], "{\"city\":\"Paris\"}");
    ASSERT_EQ(rlx_tc_position(p), RLX_TC_IN_CONTENT);
    ASSERT_EQ(rlx_tc_finish(p, tc_sink, &r, NULL), 0);
    rlx_tc_parser_free(p);
    tc_result_free(&r);

    /* the XML format streams parameter by parameter */
    p = fresh_parser(RLX_TC_QWEN3_CODER, &r);
    a = "<tool_call>\n<function=f>\n<parameter=x>\nhi\n</parameter>\n<parameter=y>\n";
    ASSERT_EQ(rlx_tc_feed(p, a, strlen(a), tc_sink, &r), 0);
    ASSERT_STR_EQ(r.args[0], "{\"x\":\"hi\"");
    ASSERT_EQ(rlx_tc_finish(p, tc_sink, &r, NULL), RLX_EFORMAT); /* cut off inside the call */
    ASSERT_STR_EQ(r.content, "");
    ASSERT(!r.open);
    rlx_tc_parser_free(p);
    tc_result_free(&r);
}

/* Regression (found by fuzz_toolcall): a name longer than the limit was a call when its end
 * arrived in the same piece and content when it arrived later. Now it is content either way. */
TEST(long_name_same_whole_and_streamed)
{
    char text[512] = "<|tool_call_begin|>functions.f:";
    size_t n = strlen(text);
    memset(text + n, 'b', 290);
    strcpy(text + n + 290, "<|tool_call_argument_begin|>{}<|tool_call_end|>");
    tc_case c = {RLX_TC_KIMI_K2, "long name", NULL, text, text, "", 0, {0}, {0}, 0, false};
    tc_result whole;
    tc_run(&c, NULL, text, 0, 0, &whole);
    ASSERT_EQ(tc_check(&c, &whole), 0);
    for (uint64_t seed = 1; seed <= 50; seed++) {
        tc_result r;
        tc_run(&c, NULL, text, seed, 0, &r);
        ASSERT_EQ(tc_same(&c, &whole, &r, seed), 0);
        tc_result_free(&r);
    }
    tc_result_free(&whole);
}

/* A prompt that opens <think> starts the output in reasoning; the position follows it. */
TEST(position_follows_reasoning)
{
    const char *src = "{{ '<tool_call>' }}{% if t %}<think>\n\n</think>{% endif %}";
    rlx_tc_info info;
    rlx_tc_detect(src, strlen(src), &info);
    rlx_tc_opts o = {.prompt = "<|im_start|>assistant\n<think>\n"};
    rlx_tc_parser *p = rlx_tc_parser_new(&info, &o);
    tc_result r;
    memset(&r, 0, sizeof r);
    r.content = strdup("");
    r.reasoning = strdup("");
    ASSERT_EQ(rlx_tc_position(p), RLX_TC_IN_REASONING);
    ASSERT_EQ(rlx_tc_feed(p, "Hmm.\n</thi", 10, tc_sink, &r), 0);
    ASSERT_EQ(rlx_tc_position(p), RLX_TC_IN_REASONING);
    ASSERT_STR_EQ(r.reasoning, "Hmm.");
    ASSERT_EQ(rlx_tc_feed(p, "nk>\n\nOk", 7, tc_sink, &r), 0);
    ASSERT_EQ(rlx_tc_position(p), RLX_TC_IN_CONTENT);
    ASSERT_EQ(rlx_tc_finish(p, tc_sink, &r, NULL), 0);
    ASSERT_STR_EQ(r.content, "Ok");
    ASSERT_EQ(rlx_tc_feed(p, "x", 1, tc_sink, &r), RLX_EINVAL); /* finished */
    rlx_tc_parser_free(p);
    tc_result_free(&r);
}

/* reasoning_only (a chat without tools): the reasoning block is split from the content, and a
 * call's markup stays content (no tools were offered), also when the prompt opens reasoning. */
TEST(reasoning_only_splits_reasoning_not_calls)
{
    const char *src = "{{ '<tool_call>' }}{% if t %}<think>\n\n</think>{% endif %}";
    rlx_tc_info info;
    rlx_tc_detect(src, strlen(src), &info);
    ASSERT(info.thinks);
    static const char out[] = "<think>\nPlan.\n</think>\n\nHi <tool_call>\n" W "\n</tool_call>";
    for (int opened = 0; opened < 2; opened++) {
        rlx_tc_opts o = {.reasoning_only = true, .prompt = opened ? "<|im_start|>assistant\n<think>\n" : NULL};
        rlx_tc_parser *p = rlx_tc_parser_new(&info, &o);
        tc_result r;
        memset(&r, 0, sizeof r);
        r.content = strdup("");
        r.reasoning = strdup("");
        const char *text = opened ? out + strlen("<think>\n") : out;
        for (const char *c = text; *c; c++) ASSERT_EQ(rlx_tc_feed(p, c, 1, tc_sink, &r), 0); /* byte by byte */
        ASSERT_EQ(rlx_tc_finish(p, tc_sink, &r, NULL), 0);
        ASSERT_STR_EQ(r.reasoning, "Plan.");
        ASSERT_STR_EQ(r.content, "Hi <tool_call>\n" W "\n</tool_call>");
        ASSERT_EQ(r.n_calls, 0);
        rlx_tc_parser_free(p);
        tc_result_free(&r);
    }
    /* a prompt that opened the block, and an output that opens it again (DeepSeek-R1's models):
       the second tag is no reasoning text (it was kept: "<think>abc"); a text that only looks
       like the tag's start stays */
    static const char *const outs[][3] = {{"<think>\nabc</think>hello", "abc", "hello"},
                                          {"<thin>abc</think>x", "<thin>abc", "x"}};
    for (size_t k = 0; k < 2; k++)
        for (int whole = 0; whole < 2; whole++) {
            rlx_tc_opts o = {.reasoning_only = true, .prompt = "<|im_start|>assistant\n<think>\n"};
            rlx_tc_parser *p = rlx_tc_parser_new(&info, &o);
            tc_result r;
            memset(&r, 0, sizeof r);
            r.content = strdup("");
            r.reasoning = strdup("");
            const char *t = outs[k][0];
            if (whole) ASSERT_EQ(rlx_tc_feed(p, t, strlen(t), tc_sink, &r), 0);
            else
                for (const char *c = t; *c; c++) ASSERT_EQ(rlx_tc_feed(p, c, 1, tc_sink, &r), 0);
            ASSERT_EQ(rlx_tc_finish(p, tc_sink, &r, NULL), 0);
            ASSERT_STR_EQ(r.reasoning, outs[k][1]);
            ASSERT_STR_EQ(r.content, outs[k][2]);
            rlx_tc_parser_free(p);
            tc_result_free(&r);
        }
}

TEST_MAIN(TEST_ENTRY(formats_whole_and_streamed), TEST_ENTRY(ids_unique_and_seeded), TEST_ENTRY(seeded_ids_differ_between_turns), TEST_ENTRY(stop_from_sink), TEST_ENTRY(broken_reported_at_the_break),
          TEST_ENTRY(holds_back_only_tag_prefixes), TEST_ENTRY(position_follows_reasoning), TEST_ENTRY(reasoning_only_splits_reasoning_not_calls),
          TEST_ENTRY(long_name_same_whole_and_streamed))
