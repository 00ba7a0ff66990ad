/* cmd_bench_spec.c - `rlxd bench --spec`: speculative decoding (engine/spec.h) against plain
 * decoding, through the engine's worker (the scheduler that drafts), one sequence at a time.
 * Two workers share the mapped weights: one never drafts, one drafts up to --draft-max (by prompt
 * lookup, or from --draft-model's greedy choices, engine/draft.h); their
 * requests alternate, so both see the same machine. Two workloads on the same prompt: greedy
 * decoding (which repeats what the prompt quotes, or loops, where the model does) and seeded
 * sampling at temperature 1 (text that does not repeat). Reports generation tok/s (first to
 * last token), the draft acceptance, the speedup, and whether the outputs were identical. */
#include "engine/engine.h"
#include "engine/spec.h"
#include "models/tokenizer.h"
#include "server/cli.h"

#include <pthread.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* a passage the prompt quotes twice, as a code edit or a RAG answer does */
static const char default_prompt[] =
    "Rewrite the following paragraph exactly, then continue it.\n\n"
    "The river left its banks in the spring of that year and the village moved up the hill, "
    "house by house, carrying doors and windows and the big iron stove from the school. "
    "Nobody remembered who had first suggested the hill, but everyone agreed later that it had "
    "been the right choice, because the water stayed until the end of summer.\n\n"
    "The river left its banks in the spring of that year and the village moved up the hill, "
    "house by house, carrying doors and windows and the big iron stove from the school.";

typedef struct run {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int error;
    char msg[256];
    int32_t *tokens;
    int n, cap;
    rlx_usage usage;
    rlx_timings timings;
} run;

static void on_event(void *user, const rlx_event *ev)
{
    run *r = user;
    pthread_mutex_lock(&r->mu);
    if (ev->type == RLX_EV_TOKEN && r->n < r->cap) r->tokens[r->n++] = ev->token;
    if (ev->type == RLX_EV_DONE || ev->type == RLX_EV_ERROR) {
        r->done = true;
        r->error = ev->type == RLX_EV_ERROR ? ev->error_code : 0;
        if (ev->error_msg) snprintf(r->msg, sizeof r->msg, "%s", ev->error_msg);
        r->usage = ev->usage;
        r->timings = ev->timings;
        pthread_cond_signal(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

/* one request; returns generation tok/s (tokens after the first over the time they took) */
static int generate(rlx_worker *w, const int32_t *ids, size_t n_ids, int n_gen, float temp, run *out, double *tps,
                    rlx_error *err)
{
    static uint64_t next_id;
    rlx_request *q = rlx_request_new();
    if (!q || !(q->prompt_ids = malloc(n_ids * sizeof *ids))) {
        rlx_request_free(q);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    }
    memcpy(q->prompt_ids, ids, n_ids * sizeof *ids);
    q->n_prompt = n_ids;
    q->id = ++next_id;
    q->max_tokens = n_gen;
    q->ignore_eos = true;
    q->sampling.temperature = temp;
    q->sampling.seed = 1234;
    q->sampling.has_seed = true;
    q->on_event = on_event;
    q->user = out;
    out->done = false;
    out->n = 0;
    int rc = rlx_worker_submit(w, q, err);
    if (rc) return rc;
    pthread_mutex_lock(&out->mu);
    while (!out->done) pthread_cond_wait(&out->cv, &out->mu);
    pthread_mutex_unlock(&out->mu);
    if (out->error) return rlx_errorf(err, out->error, "%s", out->msg);
    *tps = out->timings.gen_s > 0 ? (out->usage.completion_tokens - 1) / out->timings.gen_s : 0;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int rlx__bench_spec(int argc, char **argv)
{
    const char *model = NULL, *prompt_file = NULL, *draft_model = NULL, *v;
    long n = 128, reps = 3, threads = 0, draft_max = 8;
    float p_min = 0.75f;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define NEXT() if (!(v = rlx_arg_value("bench", argc, argv, &i))) return 2
        if (!strcmp(a, "--spec")) continue;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEXT(); model = v; }
        else if (!strcmp(a, "-n")) { NEXT(); if (!rlx_arg_long("bench", a, v, 2, 65536, &n)) return 2; }
        else if (!strcmp(a, "-r")) { NEXT(); if (!rlx_arg_long("bench", a, v, 1, 100, &reps)) return 2; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { NEXT(); if (!rlx_arg_long("bench", a, v, 0, 1024, &threads)) return 2; }
        else if (!strcmp(a, "--draft-max")) { NEXT(); if (!rlx_arg_long("bench", a, v, 1, RLX_SPEC_MAX_DRAFT, &draft_max)) return 2; }
        else if (!strcmp(a, "--prompt-file")) { NEXT(); prompt_file = v; }
        else if (!strcmp(a, "--draft-model")) { NEXT(); draft_model = v; }
        else if (!strcmp(a, "--draft-p-min")) { NEXT(); if (!rlx_arg_float("bench", a, v, 0, 1, &p_min)) return 2; }
        else if (!strcmp(a, "--json")) json = true;
        else {
            fprintf(stderr, "rlxd bench --spec: unknown option '%s'\n"
                            "usage: rlxd bench --spec -m FILE [-n 128] [-r 3] [-t THREADS] [--draft-max 8] [--draft-model FILE [--draft-p-min 0.75]] [--prompt-file F] [--json]\n", a);
            return 2;
        }
#undef NEXT
    }
    if (!model) { fprintf(stderr, "rlxd bench --spec: -m FILE is required\n"); return 2; }
    if (!rlx__cli_model_path_ok("bench", model) || (draft_model && !rlx__cli_model_path_ok("bench", draft_model))) return 1;
    size_t plen = sizeof default_prompt - 1;
    char *ptext = NULL;
    if (prompt_file && !(ptext = rlx_read_file(prompt_file, &plen))) {
        fprintf(stderr, "rlxd bench --spec: cannot read %s: %s\n", prompt_file, strerror(errno));
        return 1;
    }
    rlx_worker *w[2] = {0};
    rlx_error err = {0};
    int rc = 0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    run res[2];
    memset(res, 0, sizeof res);
    for (int k = 0; k < 2; k++) {
        pthread_mutex_init(&res[k].mu, NULL);
        pthread_cond_init(&res[k].cv, NULL);
    }
    for (int k = 0; k < 2; k++) {
        rlx_worker_config cfg = {.model_path = model, .n_threads = (int)threads, .max_seqs = 1, .max_batch_tokens = 512,
                                 .draft_max = k ? (int32_t)draft_max : -1, .draft_model = k ? draft_model : NULL,
                                 .draft_p_min = p_min > 0 ? p_min : -1};
        res[k].cap = (int)n;
        if (!(res[k].tokens = malloc((size_t)n * sizeof(int32_t)))) { rc = RLX_ENOMEM; goto done; }
        if ((rc = rlx_worker_start(&w[k], &cfg, &err))) goto done;
    }
    if ((rc = rlx_tokenize(rlx_worker_tokenizer(w[0]), ptext ? ptext : default_prompt, plen, true, false, &ids, &n_ids, &err)))
        goto done;
    static const char *const names[2] = {"greedy (repeats)", "sampled T=1 (no repeats)"};
    double tps[2][2][100];
    uint64_t drafted[2] = {0}, kept[2] = {0};
    bool same[2] = {true, true};
    for (int wl = 0; wl < 2; wl++) {
        const float temp = wl ? 1.0f : 0.0f;
        for (int r = -1; r < reps; r++) {
            rlx_worker_stats s0, s1;
            rlx_worker_get_stats(w[1], &s0);
            for (int k = 0; k < 2; k++) {
                double t = 0;
                if ((rc = generate(w[k], ids, n_ids, (int)n, temp, &res[k], &t, &err))) goto done;
                if (r >= 0) tps[wl][k][r] = t;
            }
            rlx_worker_get_stats(w[1], &s1);
            if (r >= 0) {
                drafted[wl] += s1.draft_tokens - s0.draft_tokens;
                kept[wl] += s1.draft_accepted - s0.draft_accepted;
            }
            same[wl] &= res[0].n == res[1].n && !memcmp(res[0].tokens, res[1].tokens, (size_t)res[0].n * sizeof(int32_t));
        }
    }
    const char *base = strrchr(model, '/');
    base = base ? base + 1 : model;
    if (!json) printf("| model | workload | plain tok/s | speculative tok/s | speedup | drafted | accepted | identical |\n|---|---|---|---|---|---|---|---|\n");
    else {
        char *name = rlx_json_string(base); /* escaped: a file name may hold quotes */
        printf("{\"model\":%s,\"prompt_tokens\":%zu,\"n\":%ld,\"draft_max\":%ld,\"workloads\":[", name ? name : "null", n_ids,
               n, draft_max);
        free(name);
    }
    for (int wl = 0; wl < 2; wl++) {
        double a = median(tps[wl][0], (int)reps), b = median(tps[wl][1], (int)reps);
        double acc = drafted[wl] ? (double)kept[wl] / (double)drafted[wl] : 0;
        if (json)
            printf("%s{\"workload\":\"%s\",\"plain_tps\":%.2f,\"spec_tps\":%.2f,\"speedup\":%.3f,\"drafted\":%llu,"
                   "\"accepted\":%llu,\"identical\":%s}", wl ? "," : "", wl ? "sampled" : "greedy", a, b, a > 0 ? b / a : 0,
                   (unsigned long long)drafted[wl], (unsigned long long)kept[wl], same[wl] ? "true" : "false");
        else
            printf("| %s | %s | %.2f | %.2f | %.2fx | %llu | %.0f%% | %s |\n", base, names[wl], a, b, a > 0 ? b / a : 0,
                   (unsigned long long)drafted[wl], 100 * acc, same[wl] ? "yes" : "NO");
    }
    if (json) printf("]}\n");
    if (!same[0] || !same[1]) rc = RLX_EINVAL, snprintf(err.msg, sizeof err.msg, "speculative output differed");
done:
    if (rc) fprintf(stderr, "rlxd bench --spec: %s\n", err.msg);
    for (int k = 0; k < 2; k++) {
        if (w[k]) rlx_worker_stop(w[k], false);
        free(res[k].tokens);
    }
    free(ids);
    free(ptext);
    return rc ? 1 : 0;
}
