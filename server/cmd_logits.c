/* cmd_logits.c - `rlxd logits`: runs a token sequence through the model in one batch (or in
 * batches of --ubatch positions, each position's logits kept) and prints the top-K logits of
 * every position and the full logits of the last, as JSON. */
#include "engine/runner.h"
#include "engine/sample.h"
#include "server/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* JSON has no NaN or infinity: such a logit (weights holding them) is null */
static void print_logit(float v)
{
    if (isfinite(v)) printf("%.9g", v);
    else fputs("null", stdout);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: rlxd logits -m FILE --tokens 1,2,3 [--top K] [--ubatch N] [--kv-type f16|f32|q8_0] [-t THREADS] [--backend cpu|vulkan|cuda] [--device N]\n");
}

static int parse_tokens(const char *s, int32_t **out, int *n)
{
    int cap = 64;
    *n = 0;
    *out = malloc((size_t)cap * sizeof **out);
    while (*out && *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX || (*end && *end != ',')) return -1;
        if (*n == cap) {
            int32_t *t = realloc(*out, (size_t)(cap *= 2) * sizeof *t);
            if (!t) return -1;
            *out = t;
        }
        (*out)[(*n)++] = (int32_t)v;
        s = *end ? end + 1 : end;
    }
    return *out && *n > 0 ? 0 : -1;
}

int rlx_cmd_logits(int argc, char **argv)
{
    const char *model = NULL, *tokens = NULL;
    const char *backend_name = NULL;
    long top = 5, threads = 0, device = 0, ubatch = 0;
    int kv_type = RLX_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!(model = rlx_arg_value("logits", argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--tokens")) { if (!(tokens = rlx_arg_value("logits", argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--top")) { if (!(v = rlx_arg_value("logits", argc, argv, &i)) || !rlx_arg_long("logits", a, v, 0, 100, &top)) return 2; }
        else if (!strcmp(a, "--ubatch")) { if (!(v = rlx_arg_value("logits", argc, argv, &i)) || !rlx_arg_long("logits", a, v, 1, INT32_MAX, &ubatch)) return 2; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!(v = rlx_arg_value("logits", argc, argv, &i)) || !rlx_arg_long("logits", a, v, 0, 1024, &threads)) return 2; }
        else if (!strcmp(a, "--backend")) { if (!(v = rlx_arg_value("logits", argc, argv, &i))) return 2; backend_name = v; }
        else if (!strcmp(a, "--device")) { if (!(v = rlx_arg_value("logits", argc, argv, &i)) || !rlx_arg_long("logits", a, v, 0, 64, &device)) return 2; }
        else if (!strcmp(a, "--kv-type")) {
            if (!(v = rlx_arg_value("logits", argc, argv, &i))) return 2;
            if ((kv_type = rlx_arg_kv_type(v)) < 0) { fprintf(stderr, "rlxd logits: --kv-type must be f16, f32 or q8_0\n"); return 2; }
        } else { fprintf(stderr, "rlxd logits: unknown option '%s'\n", a); usage(stderr); return 2; }
    }
    if (!model || !tokens) { usage(stderr); return 2; }
    int32_t *ids = NULL;
    int n = 0;
    if (parse_tokens(tokens, &ids, &n)) {
        fprintf(stderr, "rlxd logits: --tokens expects comma-separated non-negative ids, got '%s'\n", tokens);
        free(ids);
        return 2;
    }
    if (!rlx__cli_model_path_ok("logits", model)) {
        free(ids);
        return 1;
    }
    /* a batch of every position by default (the numbers parity tests compare); --ubatch runs
     * them in batches of that many, for a device whose buffers cannot hold n rows of logits */
    const int chunk = ubatch && ubatch < n ? (int)ubatch : n;
    rlx_runner_config cfg = {.model_path = model, .kv_type = kv_type, .kv_type_set = true,
                             .max_batch_tokens = chunk, .max_outputs = chunk, .n_ctx = n,
                             .tokens_hint = "--ubatch (positions per batch)", .outputs_hint = "--ubatch (positions per batch)",
                             .backend = {.name = backend_name, .n_threads = (int)threads, .device = (int)device}};
    rlx_runner *r = NULL;
    rlx_error err = {0};
    if (rlx_runner_open(&r, &cfg, &err)) { fprintf(stderr, "rlxd logits: %s\n", err.msg); free(ids); return 1; }
    if (rlx_runner_embeds(r)) {
        fprintf(stderr, "rlxd %s: %s is an embedding model (it outputs hidden states, not logits); serve it for "
                "/v1/embeddings (bench/embed.sh measures it)\n", "logits", model);
        rlx_runner_close(r);
        free(ids);
        return 1;
    }
    int rc = 1;
    int32_t *pos = malloc((size_t)n * sizeof *pos), *seq = calloc((size_t)n, sizeof *seq);
    rlx_mem_seq ms;
    rlx_mem_seq_init(&ms);
    uint8_t *outf = malloc((size_t)n);
    int32_t *topi = malloc((size_t)n * (size_t)(top ? top : 1) * sizeof *topi);
    float *topv = malloc((size_t)(top ? top : 1) * sizeof *topv);
    float *topl = malloc((size_t)n * (size_t)(top ? top : 1) * sizeof *topl), *last = malloc((size_t)r->n_vocab * sizeof *last);
    if (!pos || !seq || !outf || !topi || !topv || !topl || !last || rlx_memory_grow(&r->mem, &ms, n)) {
        fprintf(stderr, "rlxd logits: out of memory\n");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (ids[i] >= r->n_vocab) { fprintf(stderr, "rlxd logits: token %d is outside the vocabulary (%d)\n", ids[i], r->n_vocab); goto done; }
        pos[i] = i;
        outf[i] = 1;
    }
    rlx_batch_seq bs = {ms.blocks, ms.n_blocks, ms.slot};
    for (int at = 0; at < n; at += chunk) { /* each batch's rows read before the next overwrites them */
        const int m = RLX_MIN(chunk, n - at);
        rlx_batch b = {m, ids + at, pos + at, seq + at, outf + at, m, 1, &bs, NULL};
        if (rlx_runner_forward(r, &b, &err)) { fprintf(stderr, "rlxd logits: %s\n", err.msg); goto done; }
        for (int i = 0; i < m; i++) {
            const float *lg = r->logits + (size_t)i * r->n_vocab;
            int32_t *ti = topi + (size_t)(at + i) * (size_t)top;
            if (top) rlx_logprobs(lg, r->n_vocab, 0, (int)top, ti, topv);
            for (long k = 0; k < top; k++) topl[(size_t)(at + i) * (size_t)top + (size_t)k] = lg[ti[k]];
        }
        if (at + m == n) memcpy(last, r->logits + (size_t)(m - 1) * r->n_vocab, (size_t)r->n_vocab * sizeof *last);
    }
    printf("{\"n_vocab\":%d,\"positions\":[", r->n_vocab);
    for (int i = 0; i < n; i++) {
        printf("%s{\"top\":[", i ? "," : "");
        for (long k = 0; k < top; k++) {
            printf("%s[%d,", k ? "," : "", topi[(size_t)i * (size_t)top + (size_t)k]);
            print_logit(topl[(size_t)i * (size_t)top + (size_t)k]);
            putchar(']');
        }
        printf("]}");
    }
    printf("],\"last\":[");
    for (int v = 0; v < r->n_vocab; v++) {
        if (v) putchar(',');
        print_logit(last[v]);
    }
    printf("]}\n");
    rc = 0;
done:
    rlx_memory_release(&r->mem, &ms);
    rlx_mem_seq_free(&ms);
    free(pos); free(seq); free(outf); free(topi); free(topv); free(topl); free(last); free(ids);
    rlx_runner_close(r);
    return rc;
}
