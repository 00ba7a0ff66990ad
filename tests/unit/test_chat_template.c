/* test_chat_template.c - the Jinja-subset interpreter against Python Jinja2's renderings of
 * real chat templates (the JSON files in ../shared/templates), plus semantics, error reporting and
 * adversarial inputs. Set RLX_TEMPLATE_VERBOSE=1 to print the first difference of a failure. */
#include "models/chat_template.h"
#include "tests/rlx_test.h"

#include <dirent.h>
#include <stdbool.h>

/* Templates we knowingly do not support, with the reason; parse or render must then fail
 * with RLX_EUNSUPPORTED. Empty: every shared template is expected to pass. */
static const struct { const char *file; const char *reason; } unsupported[] = {
    {NULL, NULL},
};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

static const char *unsupported_reason(const char *file)
{
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (unsupported[i].file && !strcmp(unsupported[i].file, file)) return unsupported[i].reason;
    return NULL;
}

static void show_diff(const char *got, const char *want)
{
    size_t i = 0;
    while (got[i] && got[i] == want[i]) i++;
    size_t from = i > 60 ? i - 60 : 0;
    fprintf(stderr, "      first difference at byte %zu\n      got:  \"%.160s\"\n      want: \"%.160s\"\n", i, got + from, want + from);
}

/* Runs every case of one file; returns the number of failed cases. */
static int run_file(const char *dir, const char *name, int *n_cases)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = slurp(path);
    cJSON *doc = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!doc) { fprintf(stderr, "  %s: cannot read or parse\n", name); return 1; }
    const cJSON *tmpl = cJSON_GetObjectItem(doc, "template"), *cases = cJSON_GetObjectItem(doc, "cases");
    const cJSON *now = cJSON_GetObjectItem(doc, "now");
    bool verbose = getenv("RLX_TEMPLATE_VERBOSE") != NULL;
    const char *why = unsupported_reason(name);
    rlx_chat_template *t = NULL;
    rlx_error err = {0};
    int failed = 0, total = 0;
    int rc = rlx_chat_template_parse(&t, tmpl->valuestring, strlen(tmpl->valuestring), &err);
    if (rc) {
        if (why && rc == RLX_EUNSUPPORTED) {
            fprintf(stderr, "  unsupported %s: %s (%s)\n", name, why, err.msg);
        } else {
            fprintf(stderr, "  FAIL %s: parse error: %s\n", name, err.msg);
            failed = 1;
        }
        cJSON_Delete(doc);
        *n_cases = 0;
        return failed;
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        total++;
        const cJSON *ctx = cJSON_GetObjectItem(c, "context"), *exp = cJSON_GetObjectItem(c, "expected");
        const cJSON *cname = cJSON_GetObjectItem(c, "case");
        const cJSON *want_err = cJSON_GetObjectItem(c, "error");
        char *out = NULL;
        rlx_error e = {0};
        int r = rlx_chat_template_render(t, ctx, cJSON_IsString(now) ? now->valuestring : NULL, &out, &e);
        const char *cn = cJSON_IsString(cname) ? cname->valuestring : "?";
        if (why) {
            if (r != RLX_EUNSUPPORTED) { failed++; fprintf(stderr, "  FAIL %s/%s: listed unsupported but rc=%d\n", name, cn, r); }
        } else if (cJSON_IsString(want_err)) {
            if (r == 0) {
                failed++;
                fprintf(stderr, "  FAIL %s/%s: rendered, but Jinja2 fails with: %s\n", name, cn, want_err->valuestring);
            }
        } else if (r != 0) {
            failed++;
            fprintf(stderr, "  FAIL %s/%s: %s\n", name, cn, e.msg);
        } else if (!cJSON_IsString(exp) || strcmp(out, exp->valuestring)) {
            failed++;
            fprintf(stderr, "  FAIL %s/%s: rendering differs\n", name, cn);
            if (verbose && cJSON_IsString(exp)) show_diff(out, exp->valuestring);
        }
        free(out);
    }
    rlx_chat_template_free(t);
    cJSON_Delete(doc);
    *n_cases = total;
    return failed;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

TEST(shared_templates)
{
    const char *readme = rlx_test_shared("templates/README.md");
    if (!readme) SKIP("../shared/templates is absent (set RLX_SHARED)");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", readme);
    *strrchr(dir, '/') = 0;
    DIR *d = opendir(dir);
    ASSERT(d != NULL);
    char *names[512];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 512) {
        size_t l = strlen(de->d_name);
        if (l > 5 && !strcmp(de->d_name + l - 5, ".json")) names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_str);
    int files_ok = 0, files_bad = 0, cases = 0;
    for (size_t i = 0; i < n; i++) {
        int nc = 0;
        int f = run_file(dir, names[i], &nc);
        cases += nc;
        fprintf(stderr, "  %-4s %s (%d/%d cases)\n", f ? "FAIL" : "ok", names[i], nc - f, nc);
        if (f) files_bad++; else files_ok++;
        free(names[i]);
    }
    fprintf(stderr, "  templates: %d passed, %d failed, %d cases\n", files_ok, files_bad, cases);
    ASSERT(n >= 1);
    ASSERT_EQ(files_bad, 0);
}

TEST_MAIN(TEST_ENTRY(shared_templates))
