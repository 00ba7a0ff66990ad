/* cmd_pull.c - `rlxd pull hf:OWNER/REPO[:QUANT] | hf:OWNER/REPO/FILE.gguf`: downloads a model
 * from Hugging Face (or HF_ENDPOINT) into --models-dir or the cache folder (server/pull.h) and
 * prints its local path on stdout. */
#include "server/cli.h"
#include "server/pull.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: rlxd pull hf:OWNER/REPO[:QUANT] | hf:OWNER/REPO/FILE.gguf [options]\n"
    "  --models-dir DIR   where the files go: DIR/OWNER--REPO/ (default: $XDG_CACHE_HOME/rlxd/models,\n"
    "                     else ~/.cache/rlxd/models, where `serve -m hf:...` looks)\n"
    "  --token TOKEN      Hugging Face token for gated or private repositories (default: $HF_TOKEN)\n"
    "  --endpoint URL     the server (default: $HF_ENDPOINT, else https://huggingface.co)\n"
    "  --retries N        resumes after a cut connection, per file (3)\n"
    "  -q, --quiet        no progress output\n"
    "Without :QUANT the first of Q4_K_M Q5_K_M Q8_0 Q6_K Q4_K_S Q5_K_S Q4_0 F16 BF16 F32 found is\n"
    "taken; a split model's parts are downloaded together. The sha256 the server states (ETag)\n"
    "is checked; without one the file must be a whole GGUF file. A file in a repository folder\n"
    "is saved as FOLDER%2FNAME. The local path of the model (its first part) is printed on stdout.\n";

int rlx_cmd_pull(int argc, char **argv)
{
    const char *ref = NULL;
    rlx_pull_opts o = {.retries = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--models-dir") || !strcmp(a, "--token") || !strcmp(a, "--endpoint")) {
            const char *v = rlx_arg_value("pull", argc, argv, &i);
            if (!v) return 2;
            if (!strcmp(a, "--models-dir")) o.dest = v;
            else if (!strcmp(a, "--token")) o.token = v;
            else o.endpoint = v;
        } else if (!strcmp(a, "--retries")) {
            const char *v = rlx_arg_value("pull", argc, argv, &i);
            long n;
            if (!v || !rlx_arg_long("pull", a, v, 0, 100, &n)) return 2;
            o.retries = (int)n;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o.quiet = true;
        } else if (a[0] == '-') {
            fprintf(stderr, "rlxd pull: unknown option '%s'\n\n%s", a, usage);
            return 2;
        } else if (ref) {
            fprintf(stderr, "rlxd pull: one model reference at a time (got '%s' and '%s')\n", ref, a);
            return 2;
        } else {
            ref = a;
        }
    }
    if (!ref) {
        fputs(usage, stderr);
        return 2;
    }
    rlx_hf_ref r;
    rlx_error err = {0};
    if (rlx_hf_ref_parse(ref, false, &r, &err)) {
        fprintf(stderr, "rlxd pull: %s\n", err.msg);
        return 2;
    }
    if (o.dest && !o.dest[0]) {
        fprintf(stderr, "rlxd pull: --models-dir must not be empty\n");
        return 2;
    }
    if (o.endpoint && !o.endpoint[0]) { /* it fell back to huggingface.co unsaid */
        fprintf(stderr, "rlxd pull: --endpoint must not be empty (omit it for $HF_ENDPOINT or https://huggingface.co)\n");
        return 2;
    }
    char path[4096];
    if (rlx_pull(&r, &o, path, sizeof path, &err)) {
        fprintf(stderr, "rlxd pull: %s\n", err.msg);
        return 1;
    }
    printf("%s\n", path);
    return 0;
}
