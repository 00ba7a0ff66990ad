/* test_toolcall_detect.c - which tool-call / reasoning format each chat template of
 * ../shared/templates gets (proto/toolcall.h, rlx_tc_detect), the triggers it exposes, whether a
 * prompt leaves the output inside reasoning, and that each template's own rendering of a tool
 * call parses back to it (RLX_TC_VERBOSE=1 shows why a template is not applicable). */
#include "models/chat_template.h"
#include "proto/toolcall.h"
#include "tests/rlx_test.h"
#include "server/cli.h"
#include "tests/unit/test_toolcall_util.h"

#include <dirent.h>

static const struct { const char *file; rlx_tc_format format; bool thinks; } want[] = {
    {"Apertus-8B-Instruct.json", RLX_TC_GENERIC, false},
    {"Apriel-1.6-15b-Thinker-fixed.json", RLX_TC_APRIEL, true},
    {"Bielik-11B-v3.0-Instruct.json", RLX_TC_HERMES, true},
    {"Cohere2MoE.json", RLX_TC_GENERIC, false},
    {"CohereForAI-c4ai-command-r-plus-tool_use.json", RLX_TC_GENERIC, false},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.json", RLX_TC_GENERIC, false},
    {"GLM-4.7-Flash.json", RLX_TC_GENERIC, true},
    {"GigaChat3-10B-A1.8B.json", RLX_TC_GENERIC, false},
    {"GigaChat3.1-10B-A1.8B.json", RLX_TC_GENERIC, false},
    {"Kimi-K2-Instruct.json", RLX_TC_KIMI_K2, false},
    {"Kimi-K2-Thinking.json", RLX_TC_KIMI_K2, true},
    {"Kimi-K3.json", RLX_TC_GENERIC, false},
    {"LFM2.5-Instruct.json", RLX_TC_GENERIC, true},
    {"MiMo-VL.json", RLX_TC_HERMES, false},
    {"MiniMax-M2.json", RLX_TC_GENERIC, true},
    {"MiniMax-M3.json", RLX_TC_GENERIC, false},
    {"Mistral-Small-3.2-24B-Instruct-2506.json", RLX_TC_MISTRAL, false},
    {"NVIDIA-Nemotron-Nano-v2.json", RLX_TC_GENERIC, true},
    {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.json", RLX_TC_HERMES, false},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.json", RLX_TC_HERMES, false},
    {"Qwen-Qwen2.5-7B-Instruct.json", RLX_TC_HERMES, false},
    {"Qwen-Qwen3-0.6B.json", RLX_TC_HERMES, true},
    {"Qwen3-Coder.json", RLX_TC_QWEN3_CODER, false},
    {"Reka-Edge.json", RLX_TC_HERMES, true},
    {"StepFun3.5-Flash.json", RLX_TC_QWEN3_CODER, true},
    {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.json", RLX_TC_DEEPSEEK, true},
    {"deepseek-ai-DeepSeek-V3.1.json", RLX_TC_DEEPSEEK, true},
    {"deepseek-ai-DeepSeek-V3.2.json", RLX_TC_GENERIC, true},
    {"deepseek-ai-DeepSeek-V4-Flash-0731.json", RLX_TC_GENERIC, true},
    {"fireworks-ai-llama-3-firefunction-v2.json", RLX_TC_FIREFUNCTION, false},
    {"google-gemma-2-2b-it.json", RLX_TC_GENERIC, false},
    {"google-gemma-4-31B-it-interleaved.json", RLX_TC_GENERIC, false},
    {"ibm-granite-granite-3.3-2B-Instruct.json", RLX_TC_GRANITE, true},
    {"ibm-granite-granite-4.0.json", RLX_TC_HERMES, false},
    {"ibm-granite-granite-4.1.json", RLX_TC_HERMES, false},
    {"llama-cpp-rwkv-world.json", RLX_TC_GENERIC, true},
    {"meetkai-functionary-medium-v3.1.json", RLX_TC_FUNCTIONARY_V31, false},
    {"meetkai-functionary-medium-v3.2.json", RLX_TC_FUNCTIONARY_V32, false},
    {"meta-llama-Llama-3.2-3B-Instruct.json", RLX_TC_LLAMA3, false},
    {"meta-llama-Llama-3.3-70B-Instruct.json", RLX_TC_LLAMA3, false},
    {"microsoft-Phi-3.5-mini-instruct.json", RLX_TC_GENERIC, false},
    {"mistralai-Mistral-Nemo-Instruct-2407.json", RLX_TC_MISTRAL, false},
    {"moonshotai-Kimi-K2.json", RLX_TC_KIMI_K2, false},
    {"muse-glimmer.json", RLX_TC_GENERIC, false},
    {"openbmb-MiniCPM5-1B.json", RLX_TC_GENERIC, true},
    {"tencent-Hy3.json", RLX_TC_GENERIC, false},
    {"unsloth-Apriel-1.5.json", RLX_TC_APRIEL, false},
    {"unsloth-mistral-Devstral-Small-2507.json", RLX_TC_MISTRAL, false},
};

/* the project's file reader (server/cli.h) */
static char *slurp(const char *path)
{
    size_t n;
    return rlx_read_file(path, &n);
}

TEST(every_shared_template)
{
    const char *readme = rlx_test_shared("templates/README.md");
    if (!readme) SKIP("../shared/templates is absent (set RLX_SHARED)");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", readme);
    *strrchr(dir, '/') = 0;
    int seen = 0, bad = 0, listed = 0;
    DIR *d = opendir(dir);
    ASSERT(d != NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l <= 5 || strcmp(de->d_name + l - 5, ".json")) continue;
        seen++;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        char *text = slurp(path);
        cJSON *doc = text ? cJSON_Parse(text) : NULL;
        free(text);
        const cJSON *src = cJSON_GetObjectItem(doc, "template");
        ASSERT(cJSON_IsString(src));
        rlx_tc_info info;
        rlx_tc_detect(src->valuestring, strlen(src->valuestring), &info);
        cJSON_Delete(doc);
        size_t i = 0;
        while (i < sizeof want / sizeof want[0] && strcmp(want[i].file, de->d_name)) i++;
        if (i == sizeof want / sizeof want[0]) {
            fprintf(stderr, "  %s: not in the table (detected %s)\n", de->d_name, info.name);
            bad++;
            continue;
        }
        listed++;
        if (info.format != want[i].format || info.thinks != want[i].thinks) {
            fprintf(stderr, "  %s: %s thinks=%d, want %s thinks=%d\n", de->d_name, info.name, info.thinks,
                    rlx_tc_format_name(want[i].format), want[i].thinks);
            bad++;
        }
        /* what a lazy grammar waits for: the format's start markers */
        ASSERT(info.n_triggers >= 1 || info.call_at_start);
        ASSERT_EQ(info.call_at_start, info.format == RLX_TC_GENERIC || info.format == RLX_TC_LLAMA3);
        if (info.thinks) ASSERT(info.reasoning_open && info.reasoning_close);
    }
    closedir(d);
    fprintf(stderr, "  %d templates, %d as expected\n", seen, listed - bad);
    ASSERT(seen >= 1);
    ASSERT_EQ(bad, 0);
}

/* A template case file of ../shared/templates and the format its template asks for. */
static cJSON *load_template(const char *path, rlx_tc_info *info)
{
    char *text = slurp(path);
    cJSON *doc = text ? cJSON_Parse(text) : NULL;
    free(text);
    const char *src = cJSON_GetObjectItem(doc, "template")->valuestring;
    rlx_tc_detect(src, strlen(src), info);
    return doc;
}

/* The template's own rendering of an assistant tool call, parsed back in the detected format:
 * the text the template appends for [user, assistant with a call] beyond its generation prompt
 * for [user] must give that call. Returns 1 when it does, 0 when not, -1 when not applicable. */
static int round_trip(const rlx_chat_template *t, const cJSON *ctx, const rlx_tc_info *info, const char *file)
{
    cJSON *a = cJSON_Duplicate(ctx, true), *b = cJSON_Duplicate(ctx, true);
    cJSON *ma = cJSON_GetObjectItem(a, "messages"), *mb = cJSON_GetObjectItem(b, "messages");
    int j = 0; /* the assistant message with the call: a ends with it, b just before it */
    while (j < cJSON_GetArraySize(ma) && !cJSON_GetObjectItem(cJSON_GetArrayItem(ma, j), "tool_calls")) j++;
    while (cJSON_GetArraySize(ma) > j + 1) cJSON_DeleteItemFromArray(ma, j + 1);
    while (cJSON_GetArraySize(mb) > j) cJSON_DeleteItemFromArray(mb, j);
    cJSON_ReplaceItemInObject(a, "add_generation_prompt", cJSON_CreateFalse());
    cJSON_ReplaceItemInObject(b, "add_generation_prompt", cJSON_CreateTrue());
    char *ra = NULL, *rb = NULL;
    rlx_error err = {0};
    int rc = -1;
    size_t k = 0;
    if (!rlx_chat_template_render(t, a, "2024-07-01T12:00:00", &ra, &err) && !rlx_chat_template_render(t, b, "2024-07-01T12:00:00", &rb, &err)) {
        while (ra[k] && ra[k] == rb[k]) k++; /* the common prefix (some templates place the tools by the last message) */
        rb[k] = 0;
    }
    if (getenv("RLX_TC_VERBOSE")) fprintf(stderr, "  %s: %s [%.300s]\n", file, err.msg, ra ? ra + k : "");
    if (ra && rb && strstr(ra + k, "get_weather")) { /* Granite 3.3 drops past calls */
        const char *out = ra + k;
        tc_case c = {info->format, file, info->format == RLX_TC_FUNCTIONARY_V32 ? rb : NULL, out, "", "", 1, {"get_weather"}, {"{\"city\":\"Paris\"}"}, 0, false};
        tc_result r;
        tc_run_n(&c, NULL, out, strlen(out), 0, 0, &r);
        rc = r.n_calls == 1 && !strcmp(r.names[0], "get_weather") && !strcmp(r.args[0], "{\"city\":\"Paris\"}");
        if (!rc) fprintf(stderr, "  %s (%s): %d calls from \"%.200s\"\n", file, info->name, r.n_calls, out);
        tc_result_free(&r);
    }
    free(ra);
    free(rb);
    cJSON_Delete(a);
    cJSON_Delete(b);
    return rc;
}

TEST(template_renderings_parse_back)
{
    const char *readme = rlx_test_shared("templates/README.md");
    if (!readme) SKIP("../shared/templates is absent (set RLX_SHARED)");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", readme);
    *strrchr(dir, '/') = 0;
    int ok = 0, bad = 0, na = 0;
    DIR *d = opendir(dir);
    ASSERT(d != NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l <= 5 || strcmp(de->d_name + l - 5, ".json")) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        rlx_tc_info info;
        cJSON *doc = load_template(path, &info);
        const char *src = cJSON_GetObjectItem(doc, "template")->valuestring;
        rlx_chat_template *t = NULL;
        const cJSON *c;
        int got = -1;
        if (info.format != RLX_TC_GENERIC && !rlx_chat_template_parse(&t, src, strlen(src), NULL))
            cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases")) {
                const cJSON *ctx = cJSON_GetObjectItem(c, "context");
                bool calls = false;
                const cJSON *m;
                cJSON_ArrayForEach(m, cJSON_GetObjectItem(ctx, "messages")) calls = calls || cJSON_GetObjectItem(m, "tool_calls");
                if (got < 0 && calls) /* a rendering that fails (in Jinja2 too) is not applicable */
                    got = round_trip(t, ctx, &info, de->d_name);
            }
        rlx_chat_template_free(t);
        cJSON_Delete(doc);
        if (got < 0 && info.format != RLX_TC_GENERIC) fprintf(stderr, "  %s (%s): not applicable\n", de->d_name, info.name);
        if (got < 0) na++;
        else if (got) ok++;
        else bad++;
    }
    closedir(d);
    fprintf(stderr, "  %d templates give their call back, %d do not, %d not applicable (generic format or no prefix)\n", ok, bad, na);
    ASSERT(ok >= 1);
    ASSERT_EQ(bad, 0);
}

TEST(synthetic_sources)
{
    rlx_tc_info info;
    rlx_tc_detect(NULL, 0, &info); /* the ChatML fallback */
    ASSERT_EQ(info.format, RLX_TC_GENERIC);
    ASSERT(!info.thinks && info.n_triggers == 0);
    const char *oss = "{{ '<|start|>assistant<|channel|>' + m.channel + '<|message|>' }}";
    rlx_tc_detect(oss, strlen(oss), &info);
    ASSERT_EQ(info.format, RLX_TC_GPT_OSS);
    ASSERT(info.thinks);
    ASSERT_STR_EQ(info.triggers[0], " to=functions.");
    const char *glm = "<tool_call>{{ tc.name }}<arg_key>{{ k }}</arg_key>";
    rlx_tc_detect(glm, strlen(glm), &info);
    ASSERT_EQ(info.format, RLX_TC_GENERIC);
    const char *hermes = "<tool_call>\n{{ tc | tojson }}\n</tool_call>{% if x %}<think>\n\n</think>{% endif %}";
    rlx_tc_detect(hermes, strlen(hermes), &info);
    ASSERT_EQ(info.format, RLX_TC_HERMES);
    ASSERT(info.thinks);
    ASSERT_STR_EQ(info.triggers[0], "<tool_call>");
    ASSERT(rlx_tc_prompt_opens_reasoning(&info, "<|im_start|>assistant\n<think>\n"));
    ASSERT(!rlx_tc_prompt_opens_reasoning(&info, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    ASSERT(!rlx_tc_prompt_opens_reasoning(&info, "<|im_start|>assistant\n"));
    ASSERT(!rlx_tc_prompt_opens_reasoning(&info, NULL));
    for (int f = 0; f < RLX_TC_N_FORMATS; f++) ASSERT(rlx_tc_format_name((rlx_tc_format)f)[0]);
}

/* Apriel 1.6 Thinker: its prompt opens the reasoning ("Here are my reasoning steps:"), the model
 * closes it with [BEGIN FINAL RESPONSE], then answers or calls (llama.cpp's test-chat expects
 * this split; before, all of it, marker included, was content) */
TEST(apriel_thinker_reasoning)
{
    const char *path = rlx_test_shared("templates/Apriel-1.6-15b-Thinker-fixed.json");
    if (!path) SKIP("../shared/templates is absent (set RLX_SHARED)");
    rlx_tc_info info;
    cJSON *doc = load_template(path, &info);
    ASSERT(info.thinks);
    const char *prompt = "<|begin_user|>\nHi\n<|begin_assistant|>\nHere are my reasoning steps:\n";
    ASSERT(rlx_tc_prompt_opens_reasoning(&info, prompt));
    static const struct { const char *out, *content, *reasoning; int calls; } cases[] = {
        {"I'm\nthinking\n[BEGIN FINAL RESPONSE]\nHello, world!", "Hello, world!", "I'm\nthinking", 0},
        {"Weather.\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]</tool_calls>",
         "", "Weather.", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tc_case c = {info.format, "apriel", prompt, cases[i].out, cases[i].content, cases[i].reasoning, cases[i].calls,
                     {"get_weather"}, {"{\"city\":\"Paris\"}"}, 0, true};
        for (uint64_t seed = 0; seed < 20; seed++) {
            tc_result r;
            tc_run_info(&c, &info, cases[i].out, seed, &r);
            ASSERT_EQ(tc_check(&c, &r), 0);
            tc_result_free(&r);
        }
    }
    cJSON_Delete(doc);
}

TEST_MAIN(TEST_ENTRY(apriel_thinker_reasoning), TEST_ENTRY(every_shared_template), TEST_ENTRY(template_renderings_parse_back), TEST_ENTRY(synthetic_sources))
