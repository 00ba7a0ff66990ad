/* cmd_check.c - `rlxd check FILE|DIR [--json]`: whether rlxd can serve each model
 * (models/model_files.h: SUPPORTED, KnownUnimplemented, MissingMetadata, Unknown). A folder is
 * scanned one level deep with split parts grouped. Exit 0 when every model is SUPPORTED, 1
 * otherwise (or when a folder holds no GGUF), 2 on usage errors. */
#include "server/cli.h"
#include "models/model_files.h"
#include "models/safetensors.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: rlxd check FILE|DIR [--json]\n"
               "Says for each GGUF model (a folder: its files and those of its subfolders, split parts as one\n"
               "model) whether rlxd can serve it: SUPPORTED, KnownUnimplemented (the architecture or tensor\n"
               "type rlxd lacks), MissingMetadata (the key) or Unknown (not GGUF, corrupt, unknown architecture).\n"
               "--json prints one JSON object per model and line. Exit 0 when all are SUPPORTED, else 1.\n");
}

/* Prints one verdict; returns false when the output cannot be written. */
static bool report(const char *name, const char *path, const rlx_check_result *r, bool json)
{
    if (!json) {
        printf("%-18s %s", rlx_check_status_name(r->status), path);
        if (r->status == RLX_CHECK_SUPPORTED) {
            printf(" (%s", r->arch);
            if (r->n_parts > 1) printf(", %u parts", r->n_parts);
            printf(")\n");
        } else {
            printf(": %s\n", r->reason);
        }
        return true;
    }
    cJSON *o = cJSON_CreateObject();
    if (!o) return false;
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "path", path);
    cJSON_AddStringToObject(o, "status", rlx_check_status_name(r->status));
    if (r->status == RLX_CHECK_SUPPORTED) cJSON_AddNullToObject(o, "reason");
    else cJSON_AddStringToObject(o, "reason", r->reason);
    if (r->arch[0]) cJSON_AddStringToObject(o, "architecture", r->arch);
    else cJSON_AddNullToObject(o, "architecture");
    if (r->status == RLX_CHECK_MISSING_METADATA) cJSON_AddStringToObject(o, "key", r->detail);
    if (r->status == RLX_CHECK_KNOWN_UNIMPLEMENTED && r->detail[0]) cJSON_AddStringToObject(o, "unimplemented", r->detail);
    cJSON_AddNumberToObject(o, "parts", r->n_parts);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) return false;
    puts(s);
    cJSON_free(s);
    return true;
}

int rlx_cmd_check(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "rlxd check: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (path) {
            fprintf(stderr, "rlxd check: one file or folder at a time ('%s' and '%s' given)\n", path, argv[i]);
            return 2;
        } else path = argv[i];
    }
    if (!path) { usage(stderr); return 2; }
    struct stat st;
    bool all_ok = true, out_ok = true;
    rlx_check_result r;
    if (!rlx_st_is_folder(path) && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        rlx_model_entry *es;
        size_t n;
        rlx_error err = {0};
        if (rlx_model_scan(path, &es, &n, &err)) {
            fprintf(stderr, "rlxd check: %s\n", err.msg);
            return 1;
        }
        if (!n) {
            fprintf(stderr, "rlxd check: %s holds no .gguf files nor Hugging Face model folders (nor do its subfolders)\n", path);
            all_ok = false;
        }
        for (size_t i = 0; i < n; i++) {
            rlx_model_check(es[i].path, &r);
            all_ok &= r.status == RLX_CHECK_SUPPORTED;
            out_ok &= report(es[i].name, es[i].path, &r, json);
        }
        rlx_model_scan_free(es, n);
    } else {
        rlx_model_check(path, &r);
        all_ok = r.status == RLX_CHECK_SUPPORTED;
        const char *base = strrchr(path, '/');
        out_ok = report(base ? base + 1 : path, path, &r, json);
    }
    if (fflush(stdout) || !out_ok) {
        fprintf(stderr, "rlxd check: cannot write the output\n");
        return 1;
    }
    return all_ok ? 0 : 1;
}
