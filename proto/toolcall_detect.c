/* toolcall_detect.c - which tool-call / reasoning format a chat template asks for, read from
 * its source the way llama.cpp's common/chat.cpp tells them apart, and the table of how each
 * format's output reads (proto/toolcall_int.h). */
#include "proto/toolcall_int.h"

#include <string.h>

#define DS_CALLS_BEGIN "<\xef\xbd\x9c" "tool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9c" "tool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALL_BEGIN "<\xef\xbd\x9c" "tool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9c" "tool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9c" "tool\xe2\x96\x81" "sep\xef\xbd\x9c>"
#define DS_EOS "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>"

static const rlx__tc_spec specs[RLX_TC_N_FORMATS] = {
    [RLX_TC_GENERIC] = {RLX_TC_GENERIC, "generic", false, {{0}}, {0}, {0}, {0}, true},
    [RLX_TC_HERMES] = {RLX_TC_HERMES, "hermes", false, {{"<tool_call>", RLX__TC_HYBRID, NULL}},
                       {0}, {"</tool_call>"}, {0}, false},
    [RLX_TC_QWEN3_CODER] = {RLX_TC_QWEN3_CODER, "qwen3-coder", false, {{"<tool_call>", RLX__TC_XML, NULL}},
                            {0}, {"</tool_call>"}, {0}, false},
    [RLX_TC_LLAMA3] = {RLX_TC_LLAMA3, "llama3", false, {{"<|python_tag|>", RLX__TC_PYTAG, NULL}},
                       {"<|eom_id|>", "<|eot_id|>"}, {"<|eom_id|>"}, {"<|eom_id|>", "<|eot_id|>"}, true},
    [RLX_TC_MISTRAL] = {RLX_TC_MISTRAL, "mistral", false, {{"[TOOL_CALLS]", RLX__TC_HYBRID, "[ARGS]"}},
                        {"</s>"}, {0}, {0}, false},
    [RLX_TC_DEEPSEEK] = {RLX_TC_DEEPSEEK, "deepseek", false, {{DS_CALL_BEGIN, RLX__TC_NAME, DS_SEP}},
                         {DS_CALLS_BEGIN, DS_CALLS_END, DS_EOS}, {"```", DS_CALL_END}, {0}, false},
    [RLX_TC_FUNCTIONARY_V31] = {RLX_TC_FUNCTIONARY_V31, "functionary-v3.1", false,
                                {{"<function=", RLX__TC_NAME, ">"}, {"<|python_tag|>", RLX__TC_PYTAG, NULL}},
                                {"<|eom_id|>", "<|eot_id|>"}, {"</function>"}, {"<|eom_id|>", "<|eot_id|>"}, false},
    [RLX_TC_FUNCTIONARY_V32] = {RLX_TC_FUNCTIONARY_V32, "functionary-v3.2", false, {{">>>", RLX__TC_NAME, "\n"}},
                                {"<|eot_id|>"}, {0}, {0}, false},
    [RLX_TC_GRANITE] = {RLX_TC_GRANITE, "granite", false, {{"<|tool_call|>", RLX__TC_HYBRID, NULL}},
                        {"<response>", "</response>"}, {0}, {0}, false},
    [RLX_TC_FIREFUNCTION] = {RLX_TC_FIREFUNCTION, "firefunction-v2", false, {{" functools", RLX__TC_HYBRID, NULL}},
                             {0}, {0}, {0}, false},
    [RLX_TC_KIMI_K2] = {RLX_TC_KIMI_K2, "kimi-k2", false,
                        {{"<|tool_call_begin|>", RLX__TC_NAME, "<|tool_call_argument_begin|>"}},
                        {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|im_end|>"},
                        {"<|tool_call_end|>"}, {0}, false},
    /* harmony is parsed by its own channel logic in toolcall.c; these are its markers */
    [RLX_TC_GPT_OSS] = {RLX_TC_GPT_OSS, "gpt-oss", true, {{0}},
                        {"<|end|>", "<|return|>", "<|call|>"}, {"<|call|>"}, {0}, false},
    [RLX_TC_APRIEL] = {RLX_TC_APRIEL, "apriel", false, {{"<tool_calls>", RLX__TC_HYBRID, NULL}},
                       {0}, {"</tool_calls>"}, {0}, false},
};

const rlx__tc_spec *rlx__tc_spec_of(rlx_tc_format f)
{
    return (unsigned)f < RLX_TC_N_FORMATS ? &specs[f] : &specs[RLX_TC_GENERIC];
}

const char *rlx_tc_format_name(rlx_tc_format f) { return rlx__tc_spec_of(f)->name; }

void rlx_tc_info_of(rlx_tc_format f, rlx_tc_info *out)
{
    const rlx__tc_spec *s = rlx__tc_spec_of(f);
    memset(out, 0, sizeof *out);
    out->format = s->format;
    out->name = s->name;
    out->call_at_start = s->json_at_start;
    for (int i = 0; i < 3 && s->starts[i].marker && out->n_triggers < RLX_TC_MAX_TRIGGERS; i++)
        out->triggers[out->n_triggers++] = s->starts[i].marker;
    if (f == RLX_TC_DEEPSEEK) out->triggers[out->n_triggers++] = DS_CALLS_BEGIN;
    if (f == RLX_TC_KIMI_K2) out->triggers[out->n_triggers++] = "<|tool_calls_section_begin|>";
    if (f == RLX_TC_GPT_OSS) {
        out->triggers[out->n_triggers++] = " to=functions.";
        out->thinks = true;
        out->reasoning_open = "<|channel|>analysis<|message|>";
        out->reasoning_close = "<|end|>";
    }
}

static bool has(const char *src, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    if (n > len) return false;
    for (size_t i = 0; i + n <= len; i++)
        if (src[i] == needle[0] && !memcmp(src + i, needle, n)) return true;
    return false;
}

void rlx_tc_detect(const char *src, size_t len, rlx_tc_info *out)
{
    rlx_tc_format f = RLX_TC_GENERIC;
    if (!src) len = 0;
    if (has(src, len, "<|channel|>")) f = RLX_TC_GPT_OSS;
    else if (has(src, len, "<function=") && has(src, len, "<parameter=")) f = RLX_TC_QWEN3_CODER;
    else if (has(src, len, DS_CALL_BEGIN) || has(src, len, DS_CALLS_BEGIN)) f = RLX_TC_DEEPSEEK;
    else if (has(src, len, "<|tool_call_begin|>") || has(src, len, "<|tool_calls_section_begin|>")) f = RLX_TC_KIMI_K2;
    else if (has(src, len, ">>>all")) f = RLX_TC_FUNCTIONARY_V32;
    else if (has(src, len, "<function=") && has(src, len, "ipython")) f = RLX_TC_FUNCTIONARY_V31;
    else if (has(src, len, " functools[")) f = RLX_TC_FIREFUNCTION;
    else if (has(src, len, "[TOOL_CALLS]")) f = RLX_TC_MISTRAL;
    else if (has(src, len, "<|tool_call|>")) f = RLX_TC_GRANITE;
    else if (has(src, len, "<tool_calls>[")) f = RLX_TC_APRIEL;
    /* MiniMax M3 prefixes its tags with a namespace token: not Hermes, not a format of ours */
    else if (has(src, len, "]<]minimax[>[")) f = RLX_TC_GENERIC;
    /* GLM writes <tool_call>NAME<arg_key>..: not Hermes JSON, and not a format of ours */
    else if (has(src, len, "<tool_call>") && !has(src, len, "<arg_key>")) f = RLX_TC_HERMES;
    else if (has(src, len, "<|start_header_id|>ipython<|end_header_id|>") || has(src, len, "ipython")) f = RLX_TC_LLAMA3;
    rlx_tc_info_of(f, out);
    if (f != RLX_TC_GPT_OSS && has(src, len, "</think>")) {
        out->thinks = true;
        out->reasoning_open = "<think>";
        out->reasoning_close = "</think>";
    } else if (has(src, len, "[BEGIN FINAL RESPONSE]") && has(src, len, "Here are my reasoning steps:")) {
        /* Apriel 1.6 Thinker: the prompt opens the reasoning with this line; the model ends it with
           the marker, then answers (llama.cpp's format reads it so) */
        out->thinks = true;
        out->reasoning_open = "Here are my reasoning steps:";
        out->reasoning_close = "[BEGIN FINAL RESPONSE]";
    }
}

bool rlx_tc_prompt_opens_reasoning(const rlx_tc_info *info, const char *prompt)
{
    if (!info->thinks || !prompt || !info->reasoning_open) return false;
    size_t n = strlen(prompt), o = strlen(info->reasoning_open);
    while (n && (prompt[n - 1] == '\n' || prompt[n - 1] == ' ' || prompt[n - 1] == '\r')) n--;
    return n >= o && !memcmp(prompt + n - o, info->reasoning_open, o);
}

bool rlx_tc_prompt_closes_reasoning(const rlx_tc_info *info, const char *prompt)
{
    if (!info->thinks || !prompt || !info->reasoning_close || !info->reasoning_close[0]) return false;
    size_t n = strlen(prompt), c = strlen(info->reasoning_close);
    while (n && (prompt[n - 1] == '\n' || prompt[n - 1] == ' ' || prompt[n - 1] == '\r')) n--;
    return n >= c && !memcmp(prompt + n - c, info->reasoning_close, c);
}

int rlx_tc_marker_texts(const rlx_tc_info *info, const char **out, int max)
{
    const rlx__tc_spec *s = rlx__tc_spec_of(info->format);
    static const char *const harmony[] = {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>",
                                          "<|call|>", "<|return|>"};
    const char *all[40];
    int n = 0;
    for (int i = 0; i < 3 && s->starts[i].marker; i++) {
        all[n++] = s->starts[i].marker;
        if (s->starts[i].name_end) all[n++] = s->starts[i].name_end;
    }
    for (int i = 0; i < 6 && s->drops[i]; i++) all[n++] = s->drops[i];
    for (int i = 0; i < 3 && s->tails[i]; i++) all[n++] = s->tails[i];
    for (int i = 0; i < info->n_triggers; i++) all[n++] = info->triggers[i];
    if (info->format == RLX_TC_MISTRAL) all[n++] = "[CALL_ID]";
    if (info->format == RLX_TC_KIMI_K2) all[n++] = "<|tool_call_argument_begin|>";
    if (info->format == RLX_TC_GPT_OSS)
        for (size_t i = 0; i < sizeof harmony / sizeof *harmony; i++) all[n++] = harmony[i];
    if (info->thinks && info->reasoning_open) all[n++] = info->reasoning_open, all[n++] = info->reasoning_close;
    int k = 0;
    for (int i = 0; i < n && k < max; i++) {
        bool dup = false;
        for (int j = 0; j < k; j++) dup = dup || !strcmp(out[j], all[i]);
        if (!dup) out[k++] = all[i];
    }
    return k;
}
