/* cmd_bench.c - `rlxd bench`: engine speed in the manner of llama-bench. Prompt processing
 * (one batch of -p tokens, fresh cache), generation at batch 1 (-n tokens, one per step) and
 * aggregate generation with several sequences decoding in one batch. Each figure is the
 * median over repetitions after one warm-up run. */
#include "backends/quant.h"
#include "engine/runner.h"
#include "engine/sample.h"
#include "server/cli.h"
#include "backends/cpu/threadpool.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEQS_LIST 8

static void usage(FILE *f)
{
    fprintf(f, "usage: rlxd bench -m FILE [-p 128] [-n 32] [--seqs 1,4,16] [-r REPS] [-t THREADS] [--backend cpu|vulkan|cuda] [--device N] [--kv-type f16|f32|q8_0] [--json]\n"
               "       rlxd bench --grammar FILE -m FILE [-n 128] [-r 3] [-t THREADS] [--prompt TEXT] [--json]\n"
               "       rlxd bench --spec -m FILE [-n 128] [-r 3] [-t THREADS] [--draft-max 8] [--prompt-file F] [--json]\n");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct stat { double median, min, max; } stat;

static stat summarize(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    stat s = {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
    return s;
}


/* One prompt of p tokens for each of n_seqs sequences (prefill, then `gen` decode steps with all
 * sequences in one batch). Returns seconds spent in prefill and in decode. */
static int run_once(rlx_runner *r, int n_seqs, int p, int gen, double *t_pp, double *t_tg, rlx_error *err)
{
    rlx_mem_seq ms[64];
    for (int s = 0; s < 64; s++) rlx_mem_seq_init(&ms[s]);
    int rc = 0;
    int32_t T = r->max_batch_tokens;
    int32_t *tok = malloc((size_t)T * sizeof *tok), *pos = malloc((size_t)T * sizeof *pos), *seq = malloc((size_t)T * sizeof *seq);
    uint8_t *out = malloc((size_t)T);
    rlx_batch_seq bs[64];
    if (!tok || !pos || !seq || !out) { rc = rlx_errorf(err, RLX_ENOMEM, "out of memory"); goto done; }
    for (int s = 0; s < n_seqs; s++)
        if (rlx_memory_grow(&r->mem, &ms[s], p + gen)) {
            rc = rlx_errorf(err, RLX_EFULL, "the model's memory is too small for %d x %d tokens", n_seqs, p + gen);
            goto done;
        }
    for (int s = 0; s < n_seqs; s++) bs[s] = (rlx_batch_seq){ms[s].blocks, ms[s].n_blocks, ms[s].slot};
    uint64_t x = 88172645463325252ULL;
    double t0 = rlx_now();
    for (int s = 0; s < n_seqs; s++)
        for (int off = 0; off < p; off += T) {
            int n = RLX_MIN(p - off, T);
            for (int i = 0; i < n; i++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                tok[i] = (int32_t)(x % (uint64_t)r->n_vocab);
                pos[i] = off + i;
                seq[i] = s;
                out[i] = off + i == p - 1;
            }
            rlx_batch b = {n, tok, pos, seq, out, off + n == p, n_seqs, bs, NULL};
            if ((rc = rlx_runner_forward(r, &b, err))) goto done;
        }
    double t1 = rlx_now();
    for (int g = 0; g < gen; g++) {
        for (int s = 0; s < n_seqs; s++) {
            tok[s] = rlx_argmax(r->logits + (size_t)(g ? s : 0) * r->n_vocab, r->n_vocab);
            pos[s] = p + g;
            seq[s] = s;
            out[s] = 1;
        }
        rlx_batch b = {n_seqs, tok, pos, seq, out, n_seqs, n_seqs, bs, NULL};
        if ((rc = rlx_runner_forward(r, &b, err))) goto done;
    }
    double t2 = rlx_now();
    *t_pp = t1 - t0;
    *t_tg = t2 - t1;
done:
    for (int s = 0; s < n_seqs; s++) {
        rlx_memory_release(&r->mem, &ms[s]);
        rlx_mem_seq_free(&ms[s]);
    }
    free(tok); free(pos); free(seq); free(out);
    return rc;
}

int rlx_cmd_bench(int argc, char **argv)
{
    const char *model = NULL, *v;
    const char *backend_name = NULL;
    long device = 0;
    long p = 128, n = 32, reps = 3, threads = 0;
    int seqs[MAX_SEQS_LIST] = {1, 4, 16}, n_seqs_list = 3, kv_type = RLX_F16;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--grammar")) return rlx__cmd_bench_grammar(argc, argv);
        if (!strcmp(argv[i], "--spec")) return rlx__bench_spec(argc, argv);
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define NEXT() if (!(v = rlx_arg_value("bench", argc, argv, &i))) return 2
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEXT(); model = v; }
        else if (!strcmp(a, "-p")) { NEXT(); if (!rlx_arg_long("bench", a, v, 1, 65536, &p)) return 2; }
        else if (!strcmp(a, "-n")) { NEXT(); if (!rlx_arg_long("bench", a, v, 1, 65536, &n)) return 2; }
        else if (!strcmp(a, "-r")) { NEXT(); if (!rlx_arg_long("bench", a, v, 1, 100, &reps)) return 2; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { NEXT(); if (!rlx_arg_long("bench", a, v, 0, 1024, &threads)) return 2; }
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--backend")) { if (!(v = rlx_arg_value("bench", argc, argv, &i))) return 2; backend_name = v; }
        else if (!strcmp(a, "--device")) { if (!(v = rlx_arg_value("bench", argc, argv, &i)) || !rlx_arg_long("bench", a, v, 0, 64, &device)) return 2; }
        else if (!strcmp(a, "--kv-type")) {
            NEXT();
            if ((kv_type = rlx_arg_kv_type(v)) < 0) { fprintf(stderr, "rlxd bench: --kv-type must be f16, f32 or q8_0\n"); return 2; }
        } else if (!strcmp(a, "--seqs")) {
            NEXT();
            n_seqs_list = 0;
            for (char *s = (char *)v; *s;) {
                char *end;
                long x = strtol(s, &end, 10);
                if (end == s || x < 1 || x > 64 || n_seqs_list == MAX_SEQS_LIST || (*end && *end != ',')) {
                    fprintf(stderr, "rlxd bench: --seqs expects up to %d comma-separated counts in [1, 64]\n", MAX_SEQS_LIST);
                    return 2;
                }
                seqs[n_seqs_list++] = (int)x;
                s = *end ? end + 1 : end;
            }
        } else { fprintf(stderr, "rlxd bench: unknown option '%s'\n", a); usage(stderr); return 2; }
#undef NEXT
    }
    if (!model) { usage(stderr); return 2; }
    if (!rlx__cli_model_path_ok("bench", model)) return 1;
    int max_seqs = 1;
    for (int i = 0; i < n_seqs_list; i++) max_seqs = RLX_MAX(max_seqs, seqs[i]);
    /* the batched rows run a 16-token prompt whatever -p is: the context holds the longer one (-p 4
       -n 12 failed, "the model's memory is too small for 1 x 28 tokens") */
    rlx_runner_config cfg = {.model_path = model, .kv_type = kv_type, .kv_type_set = true, .n_ctx = (int32_t)(RLX_MAX(p, 16) + n),
                             .max_seqs = max_seqs, .max_batch_tokens = (int32_t)RLX_MAX(RLX_MIN(p, 512), max_seqs),
                             .max_outputs = max_seqs, .backend = {.name = backend_name, .n_threads = (int)threads, .device = (int)device}};
    rlx_runner *r = NULL;
    rlx_error err = {0};
    if (rlx_runner_open(&r, &cfg, &err)) { fprintf(stderr, "rlxd bench: %s\n", err.msg); return 1; }
    if (rlx_runner_embeds(r)) {
        fprintf(stderr, "rlxd %s: %s is an embedding model (it outputs hidden states, not logits); serve it for "
                "/v1/embeddings (bench/embed.sh measures it)\n", "bench", model);
        rlx_runner_close(r);
        return 1;
    }
    double pp[100], tg[100], tp, tt;
    /* batch 1: pp and tg */
    for (int k = -1; k < reps; k++) {
        if (run_once(r, 1, (int)p, (int)n, &tp, &tt, &err)) { fprintf(stderr, "rlxd bench: %s\n", err.msg); rlx_runner_close(r); return 1; }
        if (k >= 0) { pp[k] = (double)p / tp; tg[k] = (double)n / tt; }
    }
    stat spp = summarize(pp, (int)reps), stg = summarize(tg, (int)reps);
    stat sseq[MAX_SEQS_LIST];
    for (int i = 0; i < n_seqs_list; i++) {
        double agg[100];
        for (int k = -1; k < reps; k++) {
            /* short prompts: this measures batched decoding */
            if (run_once(r, seqs[i], 16, (int)n, &tp, &tt, &err)) { fprintf(stderr, "rlxd bench: %s\n", err.msg); rlx_runner_close(r); return 1; }
            if (k >= 0) agg[k] = (double)seqs[i] * (double)n / tt;
        }
        sseq[i] = summarize(agg, (int)reps);
    }
    const char *base = strrchr(model, '/');
    base = base ? base + 1 : model;
    if (json) {
        /* the name as a JSON string (a file named we"ird\name broke the line), the threads used */
        char *name = rlx_json_string(base);
        long used = threads > 0 ? threads : (!backend_name || !strcmp(backend_name, "cpu")) ? rlx_cpu_count() : 0;
        printf("{\"model\":%s,\"weight_bytes\":%zu,\"threads\":%ld,\"cpu_path\":\"%s\",\"pp\":%ld,\"tg\":%ld,"
               "\"pp_tps\":%.2f,\"pp_tps_min\":%.2f,\"pp_tps_max\":%.2f,\"tg_tps\":%.2f,\"tg_tps_min\":%.2f,\"tg_tps_max\":%.2f,\"tg_tps_by_seqs\":{",
               name ? name : "null", r->weight_bytes, used, rlx_cpu_path(), p, n, spp.median, spp.min, spp.max, stg.median,
               stg.min, stg.max);
        free(name);
        for (int i = 0; i < n_seqs_list; i++) printf("%s\"%d\":%.2f", i ? "," : "", seqs[i], sseq[i].median);
        printf("}}\n");
    } else {
        printf("| model | weights MiB | test | tok/s (median) | min | max |\n|---|---|---|---|---|---|\n");
        printf("| %s | %.1f | pp%ld | %.2f | %.2f | %.2f |\n", base, (double)r->weight_bytes / 1048576.0, p, spp.median, spp.min, spp.max);
        printf("| %s | %.1f | tg%ld | %.2f | %.2f | %.2f |\n", base, (double)r->weight_bytes / 1048576.0, n, stg.median, stg.min, stg.max);
        for (int i = 0; i < n_seqs_list; i++)
            printf("| %s | %.1f | tg%ld x%d seqs | %.2f | %.2f | %.2f |\n", base, (double)r->weight_bytes / 1048576.0, n, seqs[i],
                   sseq[i].median, sseq[i].min, sseq[i].max);
    }
    rlx_runner_close(r);
    return 0;
}
