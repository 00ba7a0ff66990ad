/* test_profile.c - per-model compile profiles (server/profile.h): keys and their validation
 * with file:line, <model>.rlx.ini or .rlx.toml beside the weights, [model.NAME] over the file, the worker
 * settings, request fields over the profile's sampling defaults, and the config's sections. */
#include "tests/rlx_test.h"
#include "server/config.h"
#include "server/profile.h"
#include "backends/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static void put(const char *name, const char *text, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

TEST(keys_and_errors)
{
    rlx_profile p = {0};
    rlx_error err = {0};
    ASSERT_EQ(rlx_profile_set(&p, "ctx", "128", "f:1", NULL, &err), 0);
    ASSERT_EQ(rlx_profile_set(&p, "kv_type", "q8_0", "f:2", NULL, &err), 0);
    ASSERT_EQ(rlx_profile_set(&p, "Temperature", "0.25", "f:3", NULL, &err), 0);
    ASSERT_EQ(rlx_profile_set(&p, "top-k", "-1", "f:4", NULL, &err), 0);
    ASSERT_EQ(rlx_profile_set(&p, "repetition_penalty", "1.1", "f:5", NULL, &err), 0);
    ASSERT_EQ(rlx_profile_set(&p, "backend", "cpu", "f:6", NULL, &err), 0);
    ASSERT_EQ(p.ctx, 128);
    ASSERT_EQ(p.kv_type, RLX_Q8_0);
    ASSERT_NEAR(p.temperature, 0.25, 1e-6);
    ASSERT_EQ(p.top_k, 0); /* -1: off, as the API */
    ASSERT_NEAR(p.repeat_penalty, 1.1, 1e-6);
    ASSERT_STR_EQ(p.backend, "cpu");
    ASSERT_EQ(p.set, RLX_PF_CTX | RLX_PF_KV_TYPE | RLX_PF_TEMPERATURE | RLX_PF_TOP_K | RLX_PF_REPEAT_PENALTY | RLX_PF_BACKEND);
    struct { const char *k, *v, *needle; } bad[] = {
        {"bogus", "1", "unknown key 'bogus'"},
        {"temperature", "3", "'temperature' must be a number between 0 and 2"},
        {"temperature", "warm", "got 'warm'"},
        {"ctx", "-5", "'ctx' must be an integer"},
        {"max-seqs", "0", "'max-seqs'"},
        {"kv-type", "q4", "f16, f32 or q8_0"},
        {"backend", "metal", "cpu, vulkan or cuda"},
        {"chat-template", "/nonexistent/x.jinja", "not a readable file"},
        {"draft-model", "/nonexistent/d.gguf", "not a readable file"},
        {"top-p", "nan", "'top-p'"},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(bad); i++) {
        rlx_profile q = {0};
        err = (rlx_error){0};
        ASSERT_EQ(rlx_profile_set(&q, bad[i].k, bad[i].v, "where.ini:7", NULL, &err), RLX_EINVAL);
        ASSERT_MSG(strstr(err.msg, bad[i].needle) && strstr(err.msg, "where.ini:7"), "%s=%s: %s", bad[i].k, bad[i].v,
                   err.msg);
        ASSERT_EQ(q.set, 0);
        rlx_profile_free(&q);
    }
    rlx_profile_free(&p);
}

TEST(file_beside_the_weights)
{
    char buf[256];
    rlx_profile_file_for("/m/qwen.gguf", ".rlx.ini", buf, sizeof buf);
    ASSERT_STR_EQ(buf, "/m/qwen.rlx.ini");
    rlx_profile_file_for("/m/big-00001-of-00003.gguf", ".rlx.ini", buf, sizeof buf);
    ASSERT_STR_EQ(buf, "/m/big.rlx.ini");
    rlx_profile_file_for("/m/noext", ".rlx.ini", buf, sizeof buf);
    ASSERT_STR_EQ(buf, "/m/noext.rlx.ini");

    char path[128], tmpl[128];
    { /* a line past inih's buffer: its rest was read as a line of its own ("syntax error") */
        char longl[600];
        snprintf(longl, sizeof longl, "# %0300d\nctx = 64\n", 0);
        put("long.rlx.ini", longl, path, sizeof path);
        rlx_profile lp = {0};
        rlx_error lerr = {0};
        ASSERT(rlx_profile_load_file(&lp, path, &lerr) != 0);
        ASSERT_MSG(strstr(lerr.msg, "long.rlx.ini:1: a line longer than"), "%s", lerr.msg);
        rlx_profile_free(&lp);
    }
    put("t.jinja", "{{ x }}", tmpl, sizeof tmpl);
    put("m.rlx.ini", "# comment\nctx = 64\n[profile]\ntemperature = 0\nchat-template = t.jinja\n", path, sizeof path);
    rlx_profile p = {0};
    rlx_error err = {0};
    ASSERT_MSG(rlx_profile_load_file(&p, path, &err) == 0, "%s", err.msg);
    ASSERT_EQ(p.ctx, 64);
    ASSERT_EQ(p.temperature, 0);
    ASSERT_STR_EQ(p.chat_template, tmpl); /* relative to the profile's folder */
    ASSERT_STR_EQ(p.sources, path);
    rlx_profile_free(&p);

    /* errors name file:line */
    put("bad.rlx.ini", "ctx = 64\n\ntop-p = 2\n", path, sizeof path);
    ASSERT_EQ(rlx_profile_load_file(&p, path, &err), RLX_EINVAL);
    char want[160];
    snprintf(want, sizeof want, "%s:3: 'top-p'", path);
    ASSERT_MSG(strstr(err.msg, want), "%s", err.msg);
    ASSERT_EQ(p.set, 0); /* nothing of a bad file is kept */
    put("bad2.rlx.ini", "ctx = 64\nspeed = fast\n", path, sizeof path);
    ASSERT_EQ(rlx_profile_load_file(&p, path, &err), RLX_EINVAL);
    snprintf(want, sizeof want, "%s:2: unknown key 'speed'", path);
    ASSERT_MSG(strstr(err.msg, want), "%s", err.msg);
    put("bad3.rlx.ini", "[gpu]\nctx = 64\n", path, sizeof path);
    ASSERT_EQ(rlx_profile_load_file(&p, path, &err), RLX_EINVAL);
    ASSERT_MSG(strstr(err.msg, ":2: unknown section [gpu]"), "%s", err.msg);
    put("bad4.rlx.ini", "ctx = 64\nthis is not ini\n", path, sizeof path);
    ASSERT_EQ(rlx_profile_load_file(&p, path, &err), RLX_EINVAL);
    ASSERT_MSG(strstr(err.msg, ":2: syntax error"), "%s", err.msg);
    snprintf(path, sizeof path, "%s/absent.rlx.ini", dir);
    ASSERT_EQ(rlx_profile_load_file(&p, path, &err), RLX_ENOTFOUND);
    rlx_profile_free(&p);
}

/* <model>.rlx.toml: the same keys with TOML's syntax and types; errors name file:line */
TEST(toml_file_beside_the_weights)
{
    char buf[256];
    rlx_profile_file_for("/m/big-00002-of-00003.gguf", ".rlx.toml", buf, sizeof buf);
    ASSERT_STR_EQ(buf, "/m/big.rlx.toml");

    char path[128], tmpl[128], model[128];
    put("t2.jinja", "{{ y }}", tmpl, sizeof tmpl);
    put("tm.rlx.toml",
        "# tm.gguf\nctx = 2_048\nkv_type = \"q8_0\"\n\n[profile]\ntemperature = 0   # greedy\n"
        "top_p = 0.9\n\"max-tokens\" = 0x20\nchat_template = 't2.jinja'\nbackend = \"cpu\"\n",
        path, sizeof path);
    snprintf(model, sizeof model, "%s/tm.gguf", dir);
    rlx_profile p = {0};
    rlx_error err = {0};
    ASSERT_MSG(rlx_profile_load_beside(&p, model, &err) == 0, "%s", err.msg);
    ASSERT_EQ(p.ctx, 2048);
    ASSERT_EQ(p.kv_type, RLX_Q8_0);
    ASSERT_EQ(p.temperature, 0);
    ASSERT_NEAR(p.top_p, 0.9, 1e-6);
    ASSERT_EQ(p.max_tokens, 32);
    ASSERT_STR_EQ(p.chat_template, tmpl);
    ASSERT_STR_EQ(p.backend, "cpu");
    ASSERT_STR_EQ(p.sources, path);
    rlx_profile_free(&p);

    /* TOML's types against the key's, then the key's own checks; nothing of a bad file kept */
    struct { const char *text, *needle; } bad[] = {
        {"ctx = \"64\"\n", ":1: 'ctx' takes an integer, not a string (64)"},
        {"ctx = 64.0\n", ":1: 'ctx' takes an integer, not a float"},
        {"ctx = 64\nbackend = cpu\n", ":2: expected a value"},
        {"ctx = 64\n\nbackend = 1\n", ":3: 'backend' takes a string in quotes, not an integer"},
        {"temperature = true\n", ":1: 'temperature' takes a number, not a boolean"},
        {"temperature = inf\n", ":1: 'temperature' must be a number between 0 and 2"},
        {"top_p = 2\n", ":1: 'top-p' must be a number"},
        {"speed = 1\n", ":1: unknown key 'speed'"},
        {"[gpu]\nctx = 64\n", ":2: unknown table [gpu]"},
        {"ctx = 64\nctx = 32\n", ":2: the key 'ctx' is given twice"},
        {"max_tokens = 4\n\"max-tokens\" = 5\n", ":2: 'max-tokens' is given twice"},
        {"ctx = [64]\n", ":1: arrays are not supported"},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(bad); i++) {
        put("tm.rlx.toml", bad[i].text, path, sizeof path);
        err = (rlx_error){0};
        ASSERT_MSG(rlx_profile_load_beside(&p, model, &err) == RLX_EINVAL, "accepted %s", bad[i].text);
        ASSERT_MSG(strstr(err.msg, path) && strstr(err.msg, bad[i].needle), "%s -> %s", bad[i].text, err.msg);
        ASSERT_EQ(p.set, 0);
    }
    /* both files: refused, naming both; neither: not found */
    char ini[128];
    put("tm.rlx.toml", "ctx = 64\n", path, sizeof path);
    put("tm.rlx.ini", "ctx = 32\n", ini, sizeof ini);
    ASSERT_EQ(rlx_profile_load_beside(&p, model, &err), RLX_EINVAL);
    ASSERT_MSG(strstr(err.msg, path) && strstr(err.msg, ini) && strstr(err.msg, "one profile file"), "%s", err.msg);
    ASSERT_EQ(p.set, 0);
    ASSERT_EQ(remove(path), 0);
    ASSERT_MSG(rlx_profile_load_beside(&p, model, &err) == 0, "%s", err.msg); /* the .ini alone */
    ASSERT_EQ(p.ctx, 32);
    rlx_profile_free(&p);
    ASSERT_EQ(remove(ini), 0);
    ASSERT_EQ(rlx_profile_load_beside(&p, model, &err), RLX_ENOTFOUND);
}

TEST(merge_and_apply)
{
    rlx_profile file = {0}, ini = {0};
    rlx_error err = {0};
    ASSERT_EQ(rlx_profile_set(&file, "ctx", "64", "a.rlx.ini:1", NULL, &err), 0);
    ASSERT_EQ(rlx_profile_set(&file, "temperature", "0.5", "a.rlx.ini:2", NULL, &err), 0);
    ASSERT_EQ(rlx_profile_set(&file, "max-seqs", "2", "a.rlx.ini:3", NULL, &err), 0);
    ASSERT_EQ(rlx_profile_set(&ini, "temperature", "0", "config c.ini:9", NULL, &err), 0);
    ASSERT_EQ(rlx_profile_set(&ini, "max-tokens", "7", "config c.ini:10", NULL, &err), 0);
    ASSERT_EQ(rlx_profile_set(&ini, "threads", "3", "config c.ini:11", NULL, &err), 0);
    ASSERT_EQ(rlx_profile_set(&ini, "draft_model", "/proc/self/exe", "config c.ini:12", NULL, &err), 0);
    ASSERT_EQ(rlx_profile_merge(&file, &ini, &err), 0); /* the INI section over the file */
    ASSERT_EQ(file.ctx, 64);
    ASSERT_EQ(file.temperature, 0);
    ASSERT_EQ(file.max_tokens, 7);
    ASSERT_STR_EQ(file.sources, "a.rlx.ini; config c.ini");

    /* the worker: the profile over the server-wide values, the rest kept */
    rlx_worker_config wc = {.n_ctx = 512, .max_seqs = 16, .max_batch_tokens = 512, .n_threads = 8, .kv_type = RLX_F16,
                            .kv_type_set = true};
    rlx_profile_apply_worker(&file, &wc);
    ASSERT_EQ(wc.n_ctx, 64);
    ASSERT_EQ(wc.max_seqs, 2);
    ASSERT_EQ(wc.max_batch_tokens, 512);
    ASSERT_EQ(wc.n_threads, 3);
    ASSERT_EQ(wc.kv_type, RLX_F16);
    ASSERT_STR_EQ(wc.draft_model, "/proc/self/exe");

    /* a request: what its body gives wins, the rest takes the profile's defaults */
    const char *body = "{\"prompt\":\"x\",\"top_p\":0.5}";
    rlx_api_request r;
    rlx_api_error e;
    ASSERT_EQ(rlx_api_parse(&r, RLX_API_COMPLETIONS, body, strlen(body), 0, &e), 0);
    ASSERT_EQ(r.given, RLX_API_GIVEN_TOP_P);
    rlx_profile_apply_request(&file, &r);
    ASSERT_EQ(r.base->sampling.temperature, 0);
    ASSERT_EQ(r.base->max_tokens, 7);
    ASSERT_NEAR(r.base->sampling.top_p, 0.5, 1e-6);
    rlx_api_request_free(&r);
    body = "{\"prompt\":\"x\",\"temperature\":1.5,\"max_tokens\":2}";
    ASSERT_EQ(rlx_api_parse(&r, RLX_API_COMPLETIONS, body, strlen(body), 0, &e), 0);
    ASSERT_EQ(r.given, RLX_API_GIVEN_TEMPERATURE | RLX_API_GIVEN_MAX_TOKENS);
    rlx_profile_apply_request(&file, &r);
    ASSERT_NEAR(r.base->sampling.temperature, 1.5, 1e-6);
    ASSERT_EQ(r.base->max_tokens, 2);
    rlx_api_request_free(&r);

    cJSON *j = rlx_profile_json(&file);
    char *s = cJSON_PrintUnformatted(j);
    ASSERT_MSG(strstr(s, "\"ctx\":64") && strstr(s, "\"temperature\":0") && strstr(s, "\"max-tokens\":7"), "%s", s);
    free(s);
    cJSON_Delete(j);
    rlx_profile_free(&file);
    rlx_profile_free(&ini);
}

/* [model.NAME] sections: any profile key, with or without path (a --models-dir model); errors
 * name the config file and line. */
TEST(config_sections)
{
    unsetenv("RLXD_MODEL");
    unsetenv("RLXD_CONFIG");
    char ini[128], flag[160];
    put("c.ini", "[server]\nmodels-dir = /m\n\n[model.sub/x]\ntemperature = 0.2\nkv-type = f32\n", ini, sizeof ini);
    snprintf(flag, sizeof flag, "--config=%s", ini);
    char *argv[] = {"serve", flag};
    rlx_serve_config c;
    rlx_error err = {0};
    ASSERT_MSG(rlx_serve_config_load(&c, 2, argv, &err) == 0, "%s", err.msg);
    ASSERT_EQ(c.n_models, 0);
    const rlx_profile *p = rlx_serve_config_profile(&c, "sub/x");
    ASSERT(p != NULL);
    ASSERT_NEAR(p->temperature, 0.2, 1e-6);
    ASSERT_EQ(p->kv_type, RLX_F32);
    ASSERT(rlx_serve_config_profile(&c, "other") == NULL);
    rlx_serve_config_free(&c);

    put("c.ini", "[server]\nmodels-dir = /m\n[model.a]\npath = /m/a.gguf\n\nmin-p = 7\n", ini, sizeof ini);
    ASSERT_EQ(rlx_serve_config_load(&c, 2, argv, &err), RLX_EINVAL);
    char want[200];
    snprintf(want, sizeof want, "config %s:6: 'min-p'", ini);
    ASSERT_MSG(strstr(err.msg, want), "%s", err.msg);
    rlx_serve_config_free(&c);
    put("c.ini", "[server]\nmodels-dir = /m\nwhat = 1\n", ini, sizeof ini);
    ASSERT_EQ(rlx_serve_config_load(&c, 2, argv, &err), RLX_EINVAL);
    snprintf(want, sizeof want, "config %s:3: unknown key 'what'", ini);
    ASSERT_MSG(strstr(err.msg, want), "%s", err.msg);
    rlx_serve_config_free(&c);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/rlx_profile_%d", (int)getpid());
    char cmd[128];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    if (system(cmd)) return 1;
    static const rlx_test_case cases[] = {TEST_ENTRY(keys_and_errors), TEST_ENTRY(file_beside_the_weights),
                                          TEST_ENTRY(toml_file_beside_the_weights),
                                          TEST_ENTRY(merge_and_apply), TEST_ENTRY(config_sections)};
    int rc = rlx_test_run(cases, RLX_ARRAY_LEN(cases));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    return rc;
}
