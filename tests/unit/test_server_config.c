/* test_server_config.c - `rlxd serve` settings: flags > RLXD_* env > INI > defaults. */
#include "tests/rlx_test.h"
#include "server/config.h"
#include "backends/dtype.h"

#include <unistd.h>

static void clear_env(void)
{
    const char *vars[] = {"RLXD_HOST", "RLXD_PORT", "RLXD_MODEL", "RLXD_CONFIG", "RLXD_API_KEY", "RLXD_MAX_SEQS",
                          "RLXD_LOG_FORMAT", "RLXD_STDIO", "RLXD_KV_TYPE", "RLXD_KV_BLOCK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
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
}

TEST(precedence_flags_env_ini)
{
    clear_env();
    const char *ini = write_tmp("[server]\nhost = 0.0.0.0\nport = 9000\nmax_seqs = 4\nlog-format = json\nkv_block = 8\n"
                                "[model.small]\npath = /m/small.gguf\nctx = 256\n");
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
    ASSERT_EQ(c.n_models, 1);
    ASSERT_STR_EQ(c.models[0].name, "small");
    ASSERT_EQ(c.models[0].ctx, 256);
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

TEST_MAIN(TEST_ENTRY(defaults_and_model_names), TEST_ENTRY(precedence_flags_env_ini), TEST_ENTRY(api_key_file),
          TEST_ENTRY(bad_settings_are_named), TEST_ENTRY(shipped_config_parses))
