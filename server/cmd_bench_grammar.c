/* cmd_bench_grammar.c - `rlxd bench --grammar FILE -m MODEL`: what a grammar costs (issue 15).
 *
 * FILE is a JSON Schema (a file whose text parses as JSON) or GBNF. Figures:
 *   compile   schema -> GBNF, GBNF -> grammar and the start state: median and max over reps
 *   vocab     the model's token bytes and the byte trie (once per model in the daemon)
 *   mask      the full mask at every position of the first constrained output, p50 / p99 (the
 *             cost of a step whose drawn token is refused): the reference trie walk
 *             (rlx_grammar_mask); the per-position tables' mask (rlx_grammar_cache_fast_mask,
 *             checked equal to the walk's) with a fresh store, where the first use of a table
 *             builds it, and again once the tables are built; a fresh store whose tables were
 *             built ahead from the start state (rlx_grammar_cache_prepare, as the daemon does
 *             when a request's grammar is set up: its time and count reported); the exact-position cache
 *   step      what the sampler chain spends per token with and without the grammar stage
 *             (rlx_sampler_pick + accept), p50 / p99; their difference is the constraint's cost
 *   decode    batch-1 decode tok/s (forward + sampling, temperature 1) constrained and not, and
 *             the ratio; each repetition runs both, medians reported
 * A constrained output that ends (end of generation, or the grammar complete) starts again with
 * a fresh grammar state; the KV cache simply goes on. The sampler chain is the daemon's own.
 * --aside: the constrained runs hand their sampler to the daemon's helper beside each forward
 * pass (engine/gaside.h), which builds the next step's mask into the cache meanwhile, as a
 * worker with `--grammar-aside on` does; the step figures then show what is left in-line, and
 * the tables built ahead have the helper's longer budget (RLX_GRAMMAR_PREPARE_ASIDE_MS). */
#include "engine/gaside.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"
#include "engine/runner.h"
#include "engine/sample.h"
#include "models/tokenizer.h"
#include "server/cli.h"

#include <math.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* q-quantile (nearest rank) of v[0..n), sorting v */
static double quantile(double *v, size_t n, double q)
{
    if (!n) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)ceil(q * (double)n);
    return v[i ? i - 1 : 0];
}

typedef struct gbench {
    rlx_runner *r;
    rlx_tokenizer *tok;
    rlx_grammar_token_ids ids;
    char **texts;
    size_t *lens;
    rlx_grammar_vocab *vocab;
    uint8_t *mask;
    rlx_grammar_cache *cache; /* as the worker's, shared by every run; NULL with --no-cache */
    rlx__gaside *aside;       /* --aside: the helper beside the forward pass, else NULL */
    const char *gbnf;
    int32_t *prompt;
    size_t n_prompt;
    int32_t *table, nb, cap;
    float *raw, *work;
    /* per-step samples of the measured runs */
    double *step_c, *step_u;
    size_t n_step_c, n_step_u;
    int32_t *out;            /* the first constrained run's tokens, for the mask replay */
    size_t n_out;
    long restarts;
} gbench;

static rlx_sampler *new_chain(gbench *b, bool constrained, uint64_t seed, rlx_error *err)
{
    rlx_sampling_params p;
    rlx_sampling_params_default(&p);
    p.seed = seed;
    p.has_seed = true;
    rlx_sampler *s = rlx_sampler_new(&p, b->r->n_vocab);
    if (!s) {
        rlx_errorf(err, RLX_ENOMEM, "out of memory");
        return NULL;
    }
    if (!constrained) return s;
    rlx_grammar *g = rlx_grammar_compile_ids(b->gbnf, strlen(b->gbnf), NULL, &b->ids, err);
    rlx_grammar_tokens toks = {.vocab = b->vocab, .texts = (const char *const *)b->texts, .lens = b->lens,
                               .mask = b->mask, .is_eog = rlx_grammar_tokenizer_is_eog, .eog_ctx = b->tok, .cache = b->cache};
    rlx_sampler_stage *st = g ? rlx_grammar_stage_new(g, &toks, err) : NULL;
    if (!st || rlx_sampler_add_stage(s, st)) {
        if (st) rlx_errorf(err, RLX_ENOMEM, "out of memory");
        rlx_sampler_free(s);
        return NULL;
    }
    return s;
}

/* One run: the prompt, then n decode steps. Returns 0 and the decode seconds. */
static int run(gbench *b, bool constrained, int n, uint64_t seed, bool record, bool keep, double *secs, rlx_error *err)
{
    rlx_runner *r = b->r;
    int rc = 0;
    for (int32_t i = 0; i < b->nb; i++) rlx_kv_release(&r->kv, b->table[i]);
    b->nb = 0;
    if (rlx_runner_reserve(r, &b->table, &b->nb, &b->cap, (int32_t)b->n_prompt + n + 1))
        return rlx_errorf(err, RLX_EFULL, "KV cache too small for %zu tokens", b->n_prompt + (size_t)n + 1);
    rlx_batch_seq bs = {b->table, b->nb, -1};
    int32_t *pos = malloc(b->n_prompt * sizeof *pos), *seqv = calloc(b->n_prompt, sizeof *seqv);
    uint8_t *outv = calloc(b->n_prompt, 1);
    rlx_sampler *s = new_chain(b, constrained, seed, err);
    if (!pos || !seqv || !outv || !s) {
        rc = s ? rlx_errorf(err, RLX_ENOMEM, "out of memory") : (err->code ? err->code : RLX_ENOMEM);
        goto done;
    }
    for (size_t i = 0; i < b->n_prompt; i++) pos[i] = (int32_t)i;
    outv[b->n_prompt - 1] = 1;
    rlx_batch pb = {(int32_t)b->n_prompt, b->prompt, pos, seqv, outv, 1, 1, &bs, NULL};
    if ((rc = rlx_runner_forward(r, &pb, err))) goto done;
    for (size_t i = 0; i < b->n_prompt; i++)
        if ((rc = rlx_sampler_accept(s, b->prompt[i], false))) goto done;
    double t0 = rlx_now();
    for (int g = 0; g < n; g++) {
        memcpy(b->raw, r->logits, (size_t)r->n_vocab * sizeof *b->raw);
        memcpy(b->work, r->logits, (size_t)r->n_vocab * sizeof *b->work);
        int32_t t = -1;
        double ts = rlx_now();
        if ((rc = rlx_sampler_pick(s, b->work, constrained ? b->raw : NULL, &t, err))) goto done;
        if ((rc = rlx_sampler_accept(s, t, true))) {
            rlx_errorf(err, rc, "the sampler refused token %d", t);
            goto done;
        }
        double dt = rlx_now() - ts;
        if (record) {
            if (constrained) b->step_c[b->n_step_c++] = dt;
            else b->step_u[b->n_step_u++] = dt;
        }
        bool ended = constrained && (rlx_tokenizer_is_eog(b->tok, t) || rlx_sampler_must_end(s));
        if (keep) b->out[b->n_out++] = t;
        if (ended) { /* a complete value: a fresh state, as the next request would have */
            keep = false;
            if (record) b->restarts++;
            rlx_sampler_free(s);
            if (!(s = new_chain(b, true, seed + (uint64_t)g + 1, err))) {
                rc = err->code ? err->code : RLX_ENOMEM;
                goto done;
            }
        }
        int32_t p = (int32_t)b->n_prompt + g;
        uint8_t one = 1;
        int32_t zero = 0;
        rlx_batch db = {1, &t, &p, &zero, &one, 1, 1, &bs, NULL};
        bool aside = b->aside && constrained && b->cache;
        if (aside) rlx__gaside_begin(b->aside, b->cache, b->vocab, &s, 1);
        rc = rlx_runner_forward(r, &db, err);
        if (aside) rlx__gaside_end(b->aside);
        if (rc) goto done;
    }
    *secs = rlx_now() - t0;
done:
    rlx_sampler_free(s);
    free(pos);
    free(seqv);
    free(outv);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: rlxd bench --grammar FILE -m MODEL [-n 128] [-r 3] [-t THREADS] [--prompt TEXT] [--no-cache] [--aside]\n"
               "                          [--mask-only] [--json]\n"
               "  FILE: a JSON Schema (.json) or a GBNF grammar\n"
               "  --aside: each next step's mask built beside the forward pass (the daemon's --grammar-aside on)\n"
               "  --mask-only: no decoding; the masks along an output drawn uniformly among the allowed tokens\n");
}

int rlx__cmd_bench_grammar(int argc, char **argv)
{
    const char *model = NULL, *file = NULL, *v, *prompt_text = "Reply with one JSON value.";
    long n = 128, reps = 3, threads = 0;
    bool json = false, use_cache = true, mask_only = false, aside = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define NEXT() if (!(v = rlx_arg_value("bench", argc, argv, &i))) return 2
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEXT(); model = v; }
        else if (!strcmp(a, "--grammar")) { NEXT(); file = v; }
        else if (!strcmp(a, "--prompt")) { NEXT(); prompt_text = v; }
        else if (!strcmp(a, "-n")) { NEXT(); if (!rlx_arg_long("bench", a, v, 1, 65536, &n)) return 2; }
        else if (!strcmp(a, "-r")) { NEXT(); if (!rlx_arg_long("bench", a, v, 1, 100, &reps)) return 2; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { NEXT(); if (!rlx_arg_long("bench", a, v, 0, 1024, &threads)) return 2; }
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--no-cache")) use_cache = false;
        else if (!strcmp(a, "--mask-only")) mask_only = true;
        else if (!strcmp(a, "--aside")) aside = true;
        else { fprintf(stderr, "rlxd bench: unknown option '%s' with --grammar\n", a); usage(stderr); return 2; }
#undef NEXT
    }
    if (!model || !file) { usage(stderr); return 2; }
    size_t flen;
    if (!rlx__cli_model_path_ok("bench", model)) return 1;
    char *src = rlx_read_file(file, &flen);
    if (!src) { fprintf(stderr, "rlxd bench: cannot read %s: %s\n", file, strerror(errno)); return 1; }

    /* ---- model, vocabulary ---- */
    gbench b = {0};
    int rc = 1;
    rlx_error err = {0};
    char *gbnf = NULL;
    rlx_runner_config cfg = {.model_path = model, .n_ctx = (int32_t)(n + 256), .max_seqs = 1, .max_batch_tokens = 256,
                             .max_outputs = 1, .backend = {.n_threads = (int)threads}};
    double tv0 = 0, tv1 = 0;
    if (rlx_runner_open(&b.r, &cfg, &err) || rlx_tokenizer_from_gguf(&b.tok, b.r->model->gguf, &err)) goto fail;
    int32_t V = b.r->n_vocab;
    b.ids = rlx_grammar_tokenizer_ids(b.tok, b.r->n_vocab); /* token references: as the worker resolves them */

    /* ---- compile ---- */
    cJSON *schema = cJSON_ParseWithLength(src, flen);
    int creps = 20;
    double t_schema[20] = {0}, t_gbnf[20] = {0};
    for (int k = 0; k < creps; k++) {
        double t0 = rlx_now();
        char *text = schema ? rlx_json_schema_to_gbnf(schema, &err) : strdup(src);
        double t1 = rlx_now();
        rlx_grammar *g = text ? rlx_grammar_compile_ids(text, strlen(text), NULL, &b.ids, &err) : NULL;
        rlx_grammar_state *st = g ? rlx_grammar_state_new(g, &err) : NULL;
        double t2 = rlx_now();
        rlx_grammar_state_free(st);
        rlx_grammar_free(g);
        if (!st) {
            char why[sizeof err.msg];
            snprintf(why, sizeof why, "%s", text || schema ? err.msg : "out of memory");
            rlx_errorf(&err, RLX_EINVAL, "%s: %s", file, why);
            free(text);
            cJSON_Delete(schema);
            goto fail;
        }
        t_schema[k] = t1 - t0;
        t_gbnf[k] = t2 - t1;
        if (k) free(text);
        else gbnf = text;
    }
    double schema_ms = schema ? quantile(t_schema, (size_t)creps, 0.5) * 1e3 : 0;
    double schema_max = schema ? t_schema[creps - 1] * 1e3 : 0;
    double gbnf_ms = quantile(t_gbnf, (size_t)creps, 0.5) * 1e3, gbnf_max = t_gbnf[creps - 1] * 1e3;
    cJSON_Delete(schema);
    b.gbnf = gbnf;

    tv0 = rlx_now();
    if (rlx_grammar_token_bytes(b.tok, V, &b.texts, &b.lens, &err)) goto fail;
    b.vocab = rlx_grammar_vocab_new(V, (const char *const *)b.texts, b.lens);
    if (b.vocab && rlx_grammar_vocab_set_eog(b.vocab, rlx_grammar_tokenizer_is_eog, b.tok)) goto fail;
    tv1 = rlx_now();
    size_t steps = (size_t)(n * reps);
    b.mask = malloc((size_t)V);
    b.raw = malloc((size_t)V * sizeof *b.raw);
    b.work = malloc((size_t)V * sizeof *b.work);
    b.step_c = malloc(steps * sizeof *b.step_c);
    b.step_u = malloc(steps * sizeof *b.step_u);
    b.out = malloc((size_t)n * sizeof *b.out);
    if (use_cache) b.cache = rlx_grammar_cache_new(V, RLX_GRAMMAR_CACHE_ENTRIES);
    if (aside && !use_cache) { rlx_errorf(&err, RLX_EINVAL, "--aside needs the cache (not --no-cache)"); goto fail; }
    if (aside && !(b.aside = rlx__gaside_new())) { rlx_errorf(&err, RLX_ENOMEM, "cannot start the helper thread"); goto fail; }
    if ((use_cache && !b.cache) || !b.vocab || !b.mask || !b.raw || !b.work || !b.step_c || !b.step_u || !b.out) {
        rlx_errorf(&err, RLX_ENOMEM, "out of memory");
        goto fail;
    }
    if (rlx_tokenize(b.tok, prompt_text, strlen(prompt_text), true, false, &b.prompt, &b.n_prompt, &err)) goto fail;
    if (!b.n_prompt || b.n_prompt > 200) { rlx_errorf(&err, RLX_EINVAL, "--prompt must make 1 to 200 tokens"); goto fail; }

    /* ---- decode, constrained and not, interleaved; one warm-up of each ---- */
    double dc[100], du[100], secs;
    if (mask_only) { /* no model: a valid output drawn uniformly among the allowed tokens */
        rlx_grammar *g = rlx_grammar_compile_ids(gbnf, strlen(gbnf), NULL, &b.ids, &err);
        rlx_grammar_state *st = g ? rlx_grammar_state_new(g, &err) : NULL;
        uint64_t x = 0x9e3779b97f4a7c15ull;
        while (st && b.n_out < (size_t)n) {
            int64_t c = rlx_grammar_mask(st, b.vocab, b.mask);
            if (c <= 0) break;
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            int64_t pick = (int64_t)((x >> 33) % (uint64_t)c);
            int32_t t = 0;
            while (!b.mask[t] || pick--) t++;
            if (rlx_grammar_accept_token(st, t, b.texts[t], b.lens[t])) break;
            b.out[b.n_out++] = t;
        }
        rlx_grammar_state_free(st);
        rlx_grammar_free(g);
        if (!st) goto fail;
        reps = 1;
        du[0] = dc[0] = NAN;
    }
    for (long k = -1; k < reps && !mask_only; k++) {
        bool rec = k >= 0;
        if (run(&b, false, (int)n, 1000 + (uint64_t)k, rec, false, &secs, &err)) goto fail;
        if (rec) du[k] = (double)n / secs;
        /* the mask replay follows the first measured constrained output, up to its first end */
        if (run(&b, true, (int)n, 2000 + (uint64_t)k, rec, k == 0, &secs, &err)) goto fail;
        if (rec) dc[k] = (double)n / secs;
    }
    double tps_u = quantile(du, (size_t)reps, 0.5), tps_c = quantile(dc, (size_t)reps, 0.5);

    /* ---- the full mask at each position of the first measured constrained output: the reference
     * trie walk, the tables' mask with a fresh store (the first request with this grammar builds
     * the tables it needs), the same again (a later request reaching the same positions), and the
     * exact-position cache the runs filled ---- */
    size_t np = b.n_out + 1;
    double *tm = malloc(np * sizeof *tm), *tc = malloc(np * sizeof *tc), *tf0 = malloc(np * sizeof *tf0),
           *tf1 = malloc(np * sizeof *tf1);
    uint64_t *fbits = malloc(((size_t)V + 63) / 64 * sizeof *fbits);
    rlx_grammar_cache *fresh = rlx_grammar_cache_new(V, 1), *prep = rlx_grammar_cache_new(V, 1);
    double *tp = malloc(np * sizeof *tp), prep_ms = 0;
    int64_t prep_built = 0;
    size_t n_tm = 0, n_tc = 0, n_tf = 0;
    int64_t allowed_sum = 0;
    {
        rlx_grammar *g = rlx_grammar_compile_ids(gbnf, strlen(gbnf), NULL, &b.ids, &err);
        rlx_grammar_state *st = g ? rlx_grammar_state_new(g, &err) : NULL;
        rlx_grammar_state **at = calloc(np, sizeof *at); /* the state at each position */
        size_t n_at = 0;
        bool bad = !tm || !tc || !tf0 || !tf1 || !tp || !fbits || !fresh || !prep || !st || !at;
        for (size_t i = 0; !bad && i <= b.n_out; i++) {
            if (!(at[n_at] = rlx_grammar_state_clone(st))) bad = true;
            else n_at++;
            if (i == b.n_out || rlx_tokenizer_is_eog(b.tok, b.out[i]) ||
                rlx_grammar_accept_token(st, b.out[i], b.texts[b.out[i]], b.lens[b.out[i]]))
                break;
        }
        for (int pass = 0; !bad && pass < 4; pass++)
            for (size_t i = 0; !bad && i < n_at; i++) {
                if (pass == 0) {
                    double t0 = rlx_now();
                    int64_t c = rlx_grammar_mask(at[i], b.vocab, b.mask);
                    tm[n_tm++] = rlx_now() - t0;
                    if (c > 0) allowed_sum += c;
                    if (b.cache) { /* the same position through the cache the runs filled */
                        int64_t cn;
                        int crc;
                        t0 = rlx_now();
                        const uint64_t *bits = rlx_grammar_cache_mask(b.cache, at[i], b.vocab, &cn, &crc);
                        tc[n_tc++] = rlx_now() - t0;
                        if (!bits || cn != c) {
                            rlx_errorf(&err, RLX_EINVAL, "the cached mask disagrees with the full mask (%lld vs %lld tokens)",
                                       (long long)cn, (long long)c);
                            bad = true;
                        }
                    }
                    continue;
                }
                if (pass == 3 && i == 0) { /* the tables built ahead, from the start state (what the daemon does) */
                    double t0 = rlx_now();
                    prep_built = rlx_grammar_cache_prepare(prep, at[0], b.vocab, RLX_GRAMMAR_PREPARE_TABLES,
                                                           RLX_GRAMMAR_PREPARE_BUDGET_MS(b.aside != NULL), 0);
                    prep_ms = (rlx_now() - t0) * 1e3;
                    if (prep_built < 0) {
                        rlx_errorf(&err, (int)prep_built, "building the tables ahead failed");
                        bad = true;
                        break;
                    }
                }
                rlx_grammar_mask(at[i], b.vocab, b.mask); /* for the comparison below, untimed */
                double t0 = rlx_now();
                int64_t fc = rlx_grammar_cache_fast_mask(pass == 3 ? prep : fresh, at[i], b.vocab, fbits);
                double dt = rlx_now() - t0;
                if (pass == 1) tf0[n_tf++] = dt;
                else if (pass == 2) tf1[i] = dt;
                else tp[i] = dt;
                for (int32_t t = 0; fc >= 0 && t < V; t++)
                    if (b.mask[t] != ((fbits[t >> 6] >> (t & 63)) & 1)) fc = -1;
                if (fc < 0) {
                    rlx_errorf(&err, RLX_EINVAL, "the tables' mask disagrees with the full mask at position %zu", i);
                    bad = true;
                }
            }
        for (size_t i = 0; i < n_at; i++) rlx_grammar_state_free(at[i]);
        free(at);
        rlx_grammar_state_free(st);
        rlx_grammar_free(g);
        if (bad) {
            free(tm);
            free(tc);
            free(tf0);
            free(tf1);
            free(tp);
            free(fbits);
            rlx_grammar_cache_free(fresh);
            rlx_grammar_cache_free(prep);
            if (!err.code) rlx_errorf(&err, RLX_ENOMEM, "out of memory");
            goto fail;
        }
    }
    rlx_grammar_cache_stats fs = {0}, ps = {0};
    rlx_grammar_cache_get_stats(fresh, &fs);
    rlx_grammar_cache_get_stats(prep, &ps);
    rlx_grammar_cache_free(fresh);
    rlx_grammar_cache_free(prep);
    free(fbits);
    double mask_p50 = quantile(tm, n_tm, 0.5) * 1e6, mask_p99 = quantile(tm, n_tm, 0.99) * 1e6;
    double cm_p50 = quantile(tc, n_tc, 0.5) * 1e6, cm_p99 = quantile(tc, n_tc, 0.99) * 1e6;
    double f0_p50 = quantile(tf0, n_tf, 0.5) * 1e6, f0_p99 = quantile(tf0, n_tf, 0.99) * 1e6;
    double f1_p50 = quantile(tf1, n_tf, 0.5) * 1e6, f1_p99 = quantile(tf1, n_tf, 0.99) * 1e6;
    double p_p50 = quantile(tp, n_tf, 0.5) * 1e6, p_p99 = quantile(tp, n_tf, 0.99) * 1e6;
    unsigned long long late = (unsigned long long)ps.tables_built - (unsigned long long)prep_built;
    free(tp);
    free(tm);
    free(tc);
    free(tf0);
    free(tf1);
    rlx_grammar_cache_stats cs = {0};
    if (b.cache) rlx_grammar_cache_get_stats(b.cache, &cs);
    double sc50 = quantile(b.step_c, b.n_step_c, 0.5) * 1e6, sc99 = quantile(b.step_c, b.n_step_c, 0.99) * 1e6;
    double su50 = quantile(b.step_u, b.n_step_u, 0.5) * 1e6, su99 = quantile(b.step_u, b.n_step_u, 0.99) * 1e6;
    const char *base = strrchr(model, '/'), *gbase = strrchr(file, '/');
    base = base ? base + 1 : model;
    gbase = gbase ? gbase + 1 : file;
    if (json) {
        printf("{\"model\":\"%s\",\"grammar\":\"%s\",\"n_vocab\":%d,\"threads\":%ld,\"tokens\":%ld,\"reps\":%ld,"
               "\"schema_to_gbnf_ms\":%.3f,\"schema_to_gbnf_ms_max\":%.3f,\"compile_ms\":%.3f,\"compile_ms_max\":%.3f,"
               "\"vocab_ms\":%.1f,\"mask_us_p50\":%.1f,\"mask_us_p99\":%.1f,\"mask_positions\":%zu,\"mask_allowed_mean\":%.1f,"
               "\"step_us_p50\":%.1f,\"step_us_p99\":%.1f,\"step_unconstrained_us_p50\":%.1f,\"step_unconstrained_us_p99\":%.1f,"
               "\"aside\":%s,\"cache\":%s,\"cached_mask_us_p50\":%.1f,\"cached_mask_us_p99\":%.1f,\"cache_hits\":%llu,\"cache_misses\":%llu,"
               "\"tables_mask_us_p50\":%.1f,\"tables_mask_us_p99\":%.1f,\"tables_warm_mask_us_p50\":%.1f,"
               "\"tables_warm_mask_us_p99\":%.1f,\"tables_built\":%llu,\"prepare_ms\":%.1f,\"prepared_tables\":%lld,"
               "\"prepared_mask_us_p50\":%.1f,\"prepared_mask_us_p99\":%.1f,\"prepared_tables_late\":%llu,"
               "\"tables_derived\":%llu,\"prepared_tables_derived\":%llu,\"tables_counted\":%llu,"
               "\"prepared_tables_counted\":%llu,"
               "\"tps\":%.2f,\"tps_unconstrained\":%.2f,\"ratio\":%.3f,\"restarts\":%ld}\n",
               base, gbase, V, threads, n, reps, schema_ms, schema_max, gbnf_ms, gbnf_max, (tv1 - tv0) * 1e3, mask_p50,
               mask_p99, n_tm, n_tm ? (double)allowed_sum / (double)n_tm : 0.0, sc50, sc99, su50, su99,
               b.aside ? "true" : "false", b.cache ? "true" : "false",
               n_tc ? cm_p50 : 0.0, n_tc ? cm_p99 : 0.0, (unsigned long long)cs.hits, (unsigned long long)cs.misses, f0_p50, f0_p99, f1_p50, f1_p99,
               (unsigned long long)fs.tables_built, prep_ms, (long long)prep_built, p_p50, p_p99, late,
               (unsigned long long)fs.tables_derived, (unsigned long long)ps.tables_derived,
               (unsigned long long)fs.tables_counted, (unsigned long long)ps.tables_counted, tps_c,
               tps_u, tps_c / tps_u, b.restarts);
    } else {
        printf("grammar %s on %s (vocabulary %d), %ld tokens x %ld runs, threads %ld\n", gbase, base, V, n, reps, threads);
        if (schema_ms > 0 || schema_max > 0) printf("  schema -> GBNF     %.3f ms median, %.3f max\n", schema_ms, schema_max);
        printf("  GBNF compile      %.3f ms median, %.3f max (with the start state)\n", gbnf_ms, gbnf_max);
        printf("  vocabulary trie   %.1f ms (once per model)\n", (tv1 - tv0) * 1e3);
        printf("  full mask, walk   p50 %.1f us, p99 %.1f us over %zu positions (%.0f tokens allowed on average)\n",
               mask_p50, mask_p99, n_tm, n_tm ? (double)allowed_sum / (double)n_tm : 0.0);
        printf("  full mask, tables p50 %.1f us, p99 %.1f us with a fresh store (%llu tables built); "
               "p50 %.1f us, p99 %.1f us once built\n", f0_p50, f0_p99, (unsigned long long)fs.tables_built, f1_p50, f1_p99);
        printf("                    (of the tables built: %llu fresh store, %llu ahead derived from a counted repetition's "
               "earlier position; %llu, %llu by counting code points)\n", (unsigned long long)fs.tables_derived,
               (unsigned long long)ps.tables_derived, (unsigned long long)fs.tables_counted,
               (unsigned long long)ps.tables_counted);
        printf("  tables ahead      %lld built in %.1f ms from the start state; then p50 %.1f us, p99 %.1f us with a fresh "
               "store (%llu more built on the way): the first request's masks as the daemon serves them\n",
               (long long)prep_built, prep_ms, p_p50, p_p99, late);
 if (b.cache)
            printf("  mask via cache    p50 %.1f us, p99 %.1f us at the same positions after the runs (%llu hits, %llu misses in all)\n",
                   cm_p50, cm_p99, (unsigned long long)cs.hits, (unsigned long long)cs.misses);
        else
            printf("  mask via cache    off (--no-cache)\n");
        printf("  sampler step      constrained p50 %.1f us, p99 %.1f us; unconstrained p50 %.1f us, p99 %.1f us%s\n", sc50,
               sc99, su50, su99, b.aside ? " (masks built beside the forward pass: --aside)" : "");
        printf("  decode            constrained %.2f tok/s, unconstrained %.2f tok/s, ratio %.3f (%ld values completed)\n",
               tps_c, tps_u, tps_c / tps_u, b.restarts);
    }
    rc = 0;
fail:
    if (rc) fprintf(stderr, "rlxd bench: %s\n", err.msg);
    if (b.r)
        for (int32_t i = 0; i < b.nb; i++) rlx_kv_release(&b.r->kv, b.table[i]);
    free(b.table);
    free(b.prompt);
    free(b.mask);
    free(b.raw);
    free(b.work);
    free(b.step_c);
    free(b.step_u);
    free(b.out);
    rlx__gaside_free(b.aside); /* idle: it works only inside run()'s forward passes */
    rlx_grammar_cache_free(b.cache);
    rlx_grammar_vocab_free(b.vocab);
    rlx_grammar_token_bytes_free(b.texts, b.lens, b.texts ? b.r->n_vocab : 0);
    rlx_tokenizer_free(b.tok);
    rlx_runner_close(b.r);
    free(gbnf);
    free(src);
    return rc;
}
