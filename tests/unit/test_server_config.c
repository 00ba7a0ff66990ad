/* test_server_config.c - `rlxd serve` settings: flags > RLXD_* env > INI > defaults. */
#include "tests/rlx_test.h"
#include "server/config.h"
#include "backends/dtype.h"

#include <ctype.h>
#include <unistd.h>

static void env_name(const char *setting, char *buf, size_t cap)
{
    size_t i = (size_t)snprintf(buf, cap, "RLXD_");
    for (const char *p = setting; *p && i + 1 < cap; p++) buf[i++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    buf[i] = 0;
}

static void clear_env(void)
{
    unsetenv("RLXD_MODEL");
    unsetenv("RLXD_CONFIG");
    size_t n;
    const char *const *names = rlx_serve_setting_names(&n);
    char env[64];
    for (size_t i = 0; i < n; i++) {
        env_name(names[i], env, sizeof env);
        unsetenv(env);
    }
}

static const char *write_tmp(const char *text)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/rlxd_cfg_%d.ini", (int)getpid());
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

TEST(defaults_and_model_names)
{
    clear_env();
    char *argv[] = {"serve", "-m", "/x/tiny.gguf", "--model", "/y/other.gguf:chat"};
    rlx_serve_config c;
    rlx_error err = {0};
    ASSERT_EQ(rlx_serve_config_load(&c, 5, argv, &err), 0);
    ASSERT_STR_EQ(c.host, "127.0.0.1");
    ASSERT_EQ(c.port, 8080);
    ASSERT_EQ(c.n_models, 2);
    ASSERT_STR_EQ(c.models[0].name, "tiny");
    ASSERT_STR_EQ(c.models[0].path, "/x/tiny.gguf");
    ASSERT_STR_EQ(c.models[1].name, "chat");
    ASSERT_EQ(c.max_seqs, 16);
    ASSERT_EQ(c.kv_type, RLX_F16);
    ASSERT_EQ(c.kv_block, 16);
    ASSERT(c.api_key == NULL);
    ASSERT(!c.stdio && !c.log_json);
    rlx_serve_config_free(&c);
    /* a path past 1023 bytes was cut there: another file served under the cut name, ':wanted'
       lost; now kept whole (up to PATH_MAX) or refused */
    static char longp[1100], huge[5000];
    memset(longp, 'm', sizeof longp - 1);
    longp[0] = '/';
    memcpy(longp + sizeof longp - 13, ".gguf:wanted", 12);
    char *argv2[] = {"serve", "-m", longp};
    ASSERT_EQ(rlx_serve_config_load(&c, 3, argv2, &err), 0);
    ASSERT_STR_EQ(c.models[0].name, "wanted");
    ASSERT_EQ(strlen(c.models[0].path), sizeof longp - 1 - 7);
    rlx_serve_config_free(&c);
    memset(huge, 'm', sizeof huge - 1);
    char *argv3[] = {"serve", "-m", huge};
    ASSERT(rlx_serve_config_load(&c, 3, argv3, &err) != 0);
    rlx_serve_config_free(&c);
    ASSERT_MSG(strstr(err.msg, "bytes long"), "%s", err.msg);
}

TEST(precedence_flags_env_ini)
{
    clear_env();
    char tmpl[64];
    snprintf(tmpl, sizeof tmpl, "/tmp/rlxd_cfg_%d.jinja", (int)getpid());
    FILE *tf = fopen(tmpl, "w");
    fputs("{{ messages }}", tf);
    fclose(tf);
    char text[512];
    snprintf(text, sizeof text, "[server]\nhost = 0.0.0.0\nport = 9000\nmax_seqs = 4\nlog-format = json\nkv_block = 8\n"
             "[model.small]\npath = /m/small.gguf\nctx = 256\nchat-template = %s\n", tmpl);
    const char *ini = write_tmp(text);
    setenv("RLXD_PORT", "9100", 1);
    setenv("RLXD_MAX_SEQS", "5", 1);
    char cfgflag[128];
    snprintf(cfgflag, sizeof cfgflag, "--config=%s", ini);
    char *argv[] = {"serve", cfgflag, "--max-seqs", "6", "--kv-type", "q8_0", "--stdio"};
    rlx_serve_config c;
    rlx_error err = {0};
    int rc = rlx_serve_config_load(&c, 7, argv, &err);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    ASSERT_STR_EQ(c.host, "0.0.0.0");     /* INI */
    ASSERT_EQ(c.port, 9100);              /* env over INI */
    ASSERT_EQ(c.max_seqs, 6);             /* flag over env */
    ASSERT(c.log_json);
    ASSERT(c.stdio);
    ASSERT_EQ(c.kv_type, RLX_Q8_0);
    ASSERT_EQ(c.kv_block, 8);             /* INI */
    const rlx_profile *pf = rlx_serve_config_profile(&c, "small"); /* per model */
    ASSERT(pf && (pf->set & RLX_PF_CHAT_TEMPLATE) && (pf->set & RLX_PF_CTX));
    ASSERT_STR_EQ(pf->chat_template, tmpl);
    ASSERT(c.chat_template == NULL);
    ASSERT_EQ(c.n_models, 1);
    ASSERT_STR_EQ(c.models[0].name, "small");
    ASSERT_EQ(pf->ctx, 256);
    rlx_serve_config_free(&c);
    /* models from the environment replace the INI ones; flags replace both */
    setenv("RLXD_MODEL", "/e/a.gguf,/e/b.gguf:bee", 1);
    ASSERT_EQ(rlx_serve_config_load(&c, 2, argv, &err), 0);
    ASSERT_EQ(c.n_models, 2);
    ASSERT_STR_EQ(c.models[1].name, "bee");
    rlx_serve_config_free(&c);
    setenv("RLXD_KV_BLOCK", "32", 1);
    ASSERT_EQ(rlx_serve_config_load(&c, 2, argv, &err), 0);
    ASSERT_EQ(c.kv_block, 32);            /* env over INI */
    rlx_serve_config_free(&c);
    unsetenv("RLXD_KV_BLOCK");
    char *argv2[] = {"serve", cfgflag, "-m", "/f/c.gguf"};
    ASSERT_EQ(rlx_serve_config_load(&c, 4, argv2, &err), 0);
    ASSERT_EQ(c.n_models, 1);
    ASSERT_STR_EQ(c.models[0].name, "c");
    rlx_serve_config_free(&c);
    unlink(ini);
    unlink(tmpl);
    clear_env();
}

TEST(api_key_file)
{
    clear_env();
    const char *path = write_tmp("s3cret\n");
    char *argv[] = {"serve", "-m", "a.gguf", "--api-key-file", (char *)path};
    rlx_serve_config c;
    rlx_error err = {0};
    ASSERT_EQ(rlx_serve_config_load(&c, 5, argv, &err), 0);
    ASSERT_STR_EQ(c.api_key, "s3cret");
    rlx_serve_config_free(&c);
    unlink(path);
    /* one key per line, as llama-server reads the file (a second line, spaces around a key, a
       BOM: the server started and answered 401 to every key); --api-key takes commas */
    static const struct { const char *text; const char *want; } files[] = {
        {"k1\nk2\n", "k1\nk2"}, {"  k1  \n", "k1"}, {"\xef\xbb\xbfk1\r\n\n\t k2\r\n", "k1\nk2"},
        {"\n \n", NULL}, {"k1\nk\x01 2\n", NULL}};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        path = write_tmp(files[i].text);
        char *av[] = {"serve", "-m", "a.gguf", "--api-key-file", (char *)path};
        int rc = rlx_serve_config_load(&c, 5, av, &err);
        if (files[i].want) {
            ASSERT_MSG(rc == 0, "file %zu: %s", i, err.msg);
            ASSERT_STR_EQ(c.api_key, files[i].want);
        } else {
            ASSERT_MSG(rc != 0, "file %zu accepted", i);
            ASSERT_MSG(strstr(err.msg, i == 3 ? "holds no key" : "line 2") != NULL, "%s", err.msg);
        }
        rlx_serve_config_free(&c);
        unlink(path);
    }
    char *ak[] = {"serve", "-m", "a.gguf", "--api-key", "a, b"};
    ASSERT_EQ(rlx_serve_config_load(&c, 5, ak, &err), 0);
    ASSERT_STR_EQ(c.api_key, "a\nb");
    rlx_serve_config_free(&c);
    char *ak2[] = {"serve", "-m", "a.gguf", "--api-key", "a,,b"};
    ASSERT(rlx_serve_config_load(&c, 5, ak2, &err) != 0);
    ASSERT_MSG(strstr(err.msg, "API key 2 of --api-key is empty"), "%s", err.msg);
    rlx_serve_config_free(&c);
    /* a FIFO or a device as the key file (or the config): an error at once, never a wait or an
       endless read */
    char *argv2[] = {"serve", "-m", "a.gguf", "--api-key-file", "/dev/zero"};
    ASSERT(rlx_serve_config_load(&c, 5, argv2, &err) != 0);
    rlx_serve_config_free(&c);
    ASSERT_MSG(strstr(err.msg, "not a regular file"), "%s", err.msg);
    char *argv3[] = {"serve", "-m", "a.gguf", "--config", "/dev/zero"};
    ASSERT(rlx_serve_config_load(&c, 5, argv3, &err) != 0);
    rlx_serve_config_free(&c);
    ASSERT_MSG(strstr(err.msg, "not a regular file"), "%s", err.msg);
    /* a config line past inih's buffer was cut, its rest read as a line of its own */
    char text[600];
    snprintf(text, sizeof text, "[server]\n; %0300d\nport = 9\n", 0);
    const char *ini = write_tmp(text);
    char flag[300];
    snprintf(flag, sizeof flag, "--config=%s", ini);
    char *argv4[] = {"serve", "-m", "a.gguf", flag};
    ASSERT(rlx_serve_config_load(&c, 4, argv4, &err) != 0);
    rlx_serve_config_free(&c);
    ASSERT_MSG(strstr(err.msg, ":2: a line longer than"), "%s", err.msg);
    /* a NUL byte in a line is named as such (it was "a line longer than 198 bytes") */
    FILE *nf = fopen(ini, "w");
    fwrite("[server]\nport = 9\0x\nthreads = 1\n", 1, 32, nf);
    fclose(nf);
    ASSERT(rlx_serve_config_load(&c, 4, argv4, &err) != 0);
    rlx_serve_config_free(&c);
    ASSERT_MSG(strstr(err.msg, ":2: the line holds a NUL byte"), "%s", err.msg);
    /* --config twice is an error (the second file was silently ignored) */
    write_tmp("[server]\nport = 9\n");
    char *argv5[] = {"serve", "-m", "a.gguf", flag, "--config", "/tmp/other.ini"};
    ASSERT(rlx_serve_config_load(&c, 6, argv5, &err) != 0);
    rlx_serve_config_free(&c);
    ASSERT_MSG(strstr(err.msg, "--config is given twice"), "%s", err.msg);
    unlink(ini);
}

/* Each bad setting fails and the message names it. */
TEST(bad_settings_are_named)
{
    clear_env();
    struct { int argc; char *argv[6]; const char *needle; } cases[] = {
        {3, {"serve", "--port", "70000"}, "port"},
        {4, {"serve", "-m", "a.gguf", "--bogus"}, "--bogus"},
        {5, {"serve", "-m", "a.gguf", "--log-format", "xml"}, "log-format"},
        {5, {"serve", "-m", "a.gguf", "--kv-type", "q4"}, "kv-type"},
        {5, {"serve", "-m", "a.gguf", "--draft-p-min", "1.5"}, "draft-p-min"},
        {5, {"serve", "-m", "a.gguf", "--grammar-aside", "maybe"}, "'grammar-aside' must be auto, on or off"},
        {5, {"serve", "-m", "a.gguf", "-m", "b/a.gguf"}, "two models"},
        {1, {"serve"}, "no model"},
        {4, {"serve", "-m", "a.gguf", "--threads"}, "needs a value"},
        {5, {"serve", "-m", "a.gguf", "--max-seqs", "x"}, "max-seqs"},
        {5, {"serve", "-m", "a.gguf", "--kv-block", "0"}, "kv-block"},
        {5, {"serve", "-m", "a.gguf", "--api-key", ""}, "API key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rlx_serve_config c;
        rlx_error err = {0};
        int rc = rlx_serve_config_load(&c, cases[i].argc, cases[i].argv, &err);
        rlx_serve_config_free(&c);
        ASSERT_MSG(rc == RLX_EINVAL, "case %zu accepted", i);
        ASSERT_MSG(strstr(err.msg, cases[i].needle), "case %zu: '%s' lacks '%s'", i, err.msg, cases[i].needle);
    }
    setenv("RLXD_PORT", "abc", 1);
    char *argv[] = {"serve", "-m", "a.gguf"};
    rlx_serve_config c;
    rlx_error err = {0};
    ASSERT_EQ(rlx_serve_config_load(&c, 3, argv, &err), RLX_EINVAL);
    rlx_serve_config_free(&c);
    ASSERT(strstr(err.msg, "RLXD_PORT") != NULL);
    clear_env();
    const char *ini = write_tmp("[server]\nnope = 1\n");
    char flag[128];
    snprintf(flag, sizeof flag, "--config=%s", ini);
    char *argv2[] = {"serve", flag, "-m", "a.gguf"};
    ASSERT_EQ(rlx_serve_config_load(&c, 4, argv2, &err), RLX_EINVAL);
    rlx_serve_config_free(&c);
    ASSERT(strstr(err.msg, "nope") != NULL);
    unlink(ini);
}

TEST(shipped_config_parses)
{
    clear_env();
    const char *src = getenv("RLX_SRC");
    if (!src) SKIP("RLX_SRC not set (run through ctest)");
    char flag[1024];
    snprintf(flag, sizeof flag, "--config=%s/config/rlxd.ini", src);
    char *argv[] = {"serve", flag, "-m", "x.gguf"};
    rlx_serve_config c;
    rlx_error err = {0};
    int rc = rlx_serve_config_load(&c, 4, argv, &err);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    ASSERT_EQ(c.port, 8080);
    rlx_serve_config_free(&c);
}

static const char *write_file(const char *tag, const char *text)
{
    static char paths[4][64];
    static int next;
    char *path = paths[next++ & 3];
    snprintf(path, sizeof paths[0], "/tmp/rlxd_cfg_%d_%s", (int)getpid(), tag);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

/* Every setting, layer by layer: the default, then INI over it, the environment over the INI,
 * and a flag over the environment. The table must name every setting the parser knows. */
TEST(every_setting_follows_the_layer_order)
{
    clear_env();
    char kf[3][64]; /* own copies: write_file reuses its buffers */
    snprintf(kf[0], sizeof kf[0], "%s", write_file("k1", "key-ini\n"));
    snprintf(kf[1], sizeof kf[1], "%s", write_file("k2", "key-env\n"));
    snprintf(kf[2], sizeof kf[2], "%s", write_file("k3", "key-flag\n"));
    struct { const char *name, *def, *ini, *env, *flag; } t[] = {
        {"host", "127.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.3"},
        {"port", "8080", "9001", "9002", "9003"},
        {"threads", "0", "1", "2", "3"},
        {"ctx", "0", "128", "256", "384"},
        {"api-key", "", "k-ini", "k-env", "k-flag"},
        {"api-key-file", "", kf[0], kf[1], kf[2]},
        {"stdio", "false", "true", "false", "true"},
        {"log-format", "text", "json", "text", "json"},
        {"max-seqs", "16", "2", "3", "4"},
        {"max-batch-tokens", "512", "64", "65", "66"},
        {"draft-max", "8", "0", "4", "16"},
        {"draft-model", "", "/m/d1.gguf", "/m/d2.gguf", "/m/d3.gguf"},
        {"draft-p-min", "0.75", "0.5", "0", "1"},
        {"grammar-aside", "auto", "on", "off", "on"},
        {"kv-mem", "0", "10", "11", "12"},
        {"state-cache-mb", "256", "0", "1", "64"},
        {"kv-type", "f16", "f32", "q8_0", "f32"},
        {"kv-block", "16", "8", "32", "64"},
        {"db", "", "/tmp/a.db", "/tmp/b.db", "/tmp/c.db"},
        {"chat-template", "", "/tmp/a.jinja", "/tmp/b.jinja", "/tmp/c.jinja"},
        {"session-ttl", "0", "5", "6", "7"},
        {"max-sessions", "1024", "8", "9", "10"},
        {"backend", "", "vulkan", "cuda", "cpu"},
        {"device", "0", "1", "2", "3"},
        {"max-body", "4194304", "2048", "4096", "8192"},
        {"max-connections", "512", "5", "6", "7"},
        {"request-timeout", "30", "1", "2", "3"},
        {"max-pending-bytes", "4194304", "4096", "8192", "16384"},
        {"max-queue", "256", "1", "2", "3"},
        {"grace-seconds", "30", "1", "2", "3"},
        {"stop-timeout", "10", "0", "2", "3"},
        {"models-dir", "", "/a", "/b", "/c"},
        {"max-loaded", "0", "1", "2", "3"},
        {"max-loaded-mem", "0", "100", "200", "300"},
        {"keep-alive", "-1", "30", "60", "0"},
        {"cors-origins", "", "*", "http://a.example", "https://b.example:8443,http://localhost:3000"},
        {"cache-dir", "", "/a", "/b", "/c"},
    };
    size_t n_names;
    const char *const *names = rlx_serve_setting_names(&n_names);
    for (size_t k = 0; k < n_names; k++) {
        bool found = false;
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) found |= !strcmp(t[i].name, names[k]);
        ASSERT_MSG(found, "setting '%s' is missing from this test's table", names[k]);
    }
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char ini_text[256], cfgflag[128], flag[256], env[64], got[256];
        snprintf(ini_text, sizeof ini_text, "[server]\n%s = %s\n", t[i].name, t[i].ini);
        const char *ini = write_file("ini", ini_text);
        snprintf(cfgflag, sizeof cfgflag, "--config=%s", ini);
        snprintf(flag, sizeof flag, "--%s=%s", t[i].name, t[i].flag);
        env_name(t[i].name, env, sizeof env);
        for (int layers = 0; layers < 4; layers++) {
            char *argv[5] = {"serve", "-m", "a.gguf"};
            int argc = 3;
            if (layers >= 1) argv[argc++] = cfgflag;
            if (layers >= 3) argv[argc++] = flag;
            if (layers >= 2) setenv(env, t[i].env, 1);
            else unsetenv(env);
            const char *want = layers == 0 ? t[i].def : layers == 1 ? t[i].ini : layers == 2 ? t[i].env : t[i].flag;
            rlx_serve_config c;
            rlx_error err = {0};
            int rc = rlx_serve_config_load(&c, argc, argv, &err);
            ASSERT_MSG(rc == 0, "%s with %d layer(s): %s", t[i].name, layers, err.msg);
            ASSERT_EQ(rlx_serve_config_get(&c, t[i].name, got, sizeof got), 0);
            ASSERT_MSG(!strcmp(got, want), "%s with %d layer(s): got '%s', want '%s'", t[i].name, layers, got, want);
            if (!strcmp(t[i].name, "api-key-file") && layers > 0) {
                char key[32];
                snprintf(key, sizeof key, "key-%s", layers == 1 ? "ini" : layers == 2 ? "env" : "flag");
                ASSERT_STR_EQ(c.api_key, key);
            }
            rlx_serve_config_free(&c);
        }
        unsetenv(env);
        unlink(ini);
    }
    for (int k = 0; k < 3; k++) unlink(kf[k]);
}

/* --api-key and --api-key-file are one setting in two forms: a higher layer's form wins over
 * a lower layer's other form, and both in one layer is an error. */
TEST(api_key_forms)
{
    clear_env();
    const char *kf = write_file("key", "from-file\n");
    const char *ini = write_file("ini2", "[server]\napi_key = from-ini\n");
    char cfgflag[128], fileflag[128];
    snprintf(cfgflag, sizeof cfgflag, "--config=%s", ini);
    snprintf(fileflag, sizeof fileflag, "--api-key-file=%s", kf);
    rlx_serve_config c;
    rlx_error err = {0};
    char *a1[] = {"serve", "-m", "a.gguf", cfgflag, fileflag};
    ASSERT_EQ(rlx_serve_config_load(&c, 5, a1, &err), 0);
    ASSERT_STR_EQ(c.api_key, "from-file"); /* the flag's file beats the INI key */
    rlx_serve_config_free(&c);
    char *a2[] = {"serve", "-m", "a.gguf", "--api-key=x", fileflag};
    ASSERT_EQ(rlx_serve_config_load(&c, 5, a2, &err), RLX_EINVAL);
    ASSERT(strstr(err.msg, "not both") != NULL);
    rlx_serve_config_free(&c);
    setenv("RLXD_API_KEY", "from-env", 1);
    setenv("RLXD_API_KEY_FILE", kf, 1);
    char *a3[] = {"serve", "-m", "a.gguf"};
    ASSERT_EQ(rlx_serve_config_load(&c, 3, a3, &err), RLX_EINVAL);
    rlx_serve_config_free(&c);
    unsetenv("RLXD_API_KEY_FILE");
    const char *ini2 = write_file("ini3", "");
    FILE *f = fopen(ini2, "w");
    fprintf(f, "[server]\napi-key-file = %s\n", kf);
    fclose(f);
    snprintf(cfgflag, sizeof cfgflag, "--config=%s", ini2);
    char *a4[] = {"serve", "-m", "a.gguf", cfgflag};
    ASSERT_EQ(rlx_serve_config_load(&c, 4, a4, &err), 0);
    ASSERT_STR_EQ(c.api_key, "from-env"); /* the environment's key beats the INI file */
    ASSERT(c.api_key_file == NULL);
    rlx_serve_config_free(&c);
    clear_env();
    unlink(kf);
    unlink(ini);
    unlink(ini2);
}

TEST_MAIN(TEST_ENTRY(defaults_and_model_names), TEST_ENTRY(precedence_flags_env_ini), TEST_ENTRY(api_key_file),
          TEST_ENTRY(every_setting_follows_the_layer_order), TEST_ENTRY(api_key_forms),
          TEST_ENTRY(bad_settings_are_named), TEST_ENTRY(shipped_config_parses))
