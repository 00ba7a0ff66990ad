/* cmd_generate.c - `rlxd generate`: prompt -> text on stdout (streamed, UTF-8 safe), stopping
 * at end-of-generation, after -n tokens or when the context is full (said on stderr); speed on
 * stderr. */
#include "engine/runner.h"
#include "engine/sample.h"
#include "models/tokenizer.h"
#include "server/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: rlxd generate -m FILE -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
               "                     [--repeat-penalty R] [--seed S] [--kv-type f16|f32|q8_0] [-t THREADS] [--backend cpu|vulkan|cuda] [--device N] [--ctx N]\n"
               "  -n N        tokens to generate (default 128; -1: until the context is full)\n"
               "  --temp T    0 = greedy (default 0.8)\n");
}

int rlx_cmd_generate(int argc, char **argv)
{
    const char *model = NULL, *prompt = NULL, *v;
    const char *backend_name = NULL;
    long device = 0;
    long n_gen = 128, threads = 0, seed = -1, ctx = 0, top_k = 40;
    float temp = 0.8f, top_p = 0.95f, min_p = 0.05f, rep = 1.0f;
    int kv_type = RLX_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define NEXT() if (!(v = rlx_arg_value("generate", argc, argv, &i))) return 2
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEXT(); model = v; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { NEXT(); prompt = v; }
        else if (!strcmp(a, "-n")) { NEXT(); if (!rlx_arg_long("generate", a, v, -1, 1 << 30, &n_gen)) return 2; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { NEXT(); if (!rlx_arg_long("generate", a, v, 0, 1024, &threads)) return 2; }
        else if (!strcmp(a, "--ctx")) { NEXT(); if (!rlx_arg_long("generate", a, v, 0, 1 << 24, &ctx)) return 2; }
        else if (!strcmp(a, "--seed")) { NEXT(); if (!rlx_arg_long("generate", a, v, -1, INT32_MAX, &seed)) return 2; }
        else if (!strcmp(a, "--temp")) { NEXT(); if (!rlx_arg_float("generate", a, v, 0, 100, &temp)) return 2; }
        else if (!strcmp(a, "--top-k")) { NEXT(); if (!rlx_arg_long("generate", a, v, 0, 1 << 30, &top_k)) return 2; }
        else if (!strcmp(a, "--top-p")) { NEXT(); if (!rlx_arg_float("generate", a, v, 0, 1, &top_p)) return 2; }
        else if (!strcmp(a, "--min-p")) { NEXT(); if (!rlx_arg_float("generate", a, v, 0, 1, &min_p)) return 2; }
        else if (!strcmp(a, "--repeat-penalty")) { NEXT(); if (!rlx_arg_float("generate", a, v, 0.01, 100, &rep)) return 2; }
        else if (!strcmp(a, "--backend")) { if (!(v = rlx_arg_value("generate", argc, argv, &i))) return 2; backend_name = v; }
        else if (!strcmp(a, "--device")) { if (!(v = rlx_arg_value("generate", argc, argv, &i)) || !rlx_arg_long("generate", a, v, 0, 64, &device)) return 2; }
        else if (!strcmp(a, "--kv-type")) {
            NEXT();
            if ((kv_type = rlx_arg_kv_type(v)) < 0) { fprintf(stderr, "rlxd generate: --kv-type must be f16, f32 or q8_0\n"); return 2; }
        } else { fprintf(stderr, "rlxd generate: unknown option '%s'\n", a); usage(stderr); return 2; }
#undef NEXT
    }
    if (!model || !prompt) { usage(stderr); return 2; }
    if (!rlx__cli_model_path_ok("generate", model)) return 1;

    rlx_error err = {0};
    rlx_runner_config cfg = {.model_path = model, .kv_type = kv_type, .kv_type_set = true, .n_ctx = (int32_t)ctx,
                             .max_batch_tokens = 512, .max_outputs = 1, .backend = {.name = backend_name, .n_threads = (int)threads, .device = (int)device}};
    rlx_runner *r = NULL;
    rlx_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    rlx_mem_seq ms;
    rlx_mem_seq_init(&ms);
    size_t n_ids = 0;
    rlx_sampler *smp = NULL;
    int rc = 1;
    if (rlx_runner_open(&r, &cfg, &err) || rlx_tokenizer_from_gguf(&tok, r->model->gguf, &err) ||
        rlx_tokenize(tok, prompt, strlen(prompt), true, true, &ids, &n_ids, &err)) {
        fprintf(stderr, "rlxd generate: %s\n", err.msg);
        goto done;
    }
    if (rlx_runner_embeds(r)) {
        fprintf(stderr, "rlxd generate: %s is an embedding model (it outputs hidden states, not logits); serve it for "
                "/v1/embeddings\n", model);
        goto done;
    }
    if (n_ids == 0) { fprintf(stderr, "rlxd generate: the prompt is empty\n"); goto done; }
    if ((int64_t)n_ids >= r->n_ctx) {
        fprintf(stderr, "rlxd generate: the prompt has %zu tokens; the context holds %d\n", n_ids, r->n_ctx);
        goto done;
    }
    int64_t limit = r->n_ctx - (int64_t)n_ids;
    const bool ctx_bound = n_gen < 0 || n_gen > limit; /* the context, not -n, ends the text */
    if (!ctx_bound) limit = n_gen;
    if (rlx_memory_grow(&r->mem, &ms, (int32_t)(n_ids + (size_t)limit))) {
        fprintf(stderr, "rlxd generate: the model's memory cannot hold %lld tokens\n", (long long)(n_ids + (size_t)limit));
        goto done;
    }
    rlx_sampling_params sp;
    rlx_sampling_params_default(&sp);
    sp.temperature = temp;
    sp.top_k = (int32_t)top_k;
    sp.top_p = top_p;
    sp.min_p = min_p;
    sp.repetition_penalty = rep;
    if (seed >= 0) { sp.seed = (uint64_t)seed; sp.has_seed = true; }
    if (!(smp = rlx_sampler_new(&sp, r->n_vocab))) { fprintf(stderr, "rlxd generate: out of memory\n"); goto done; }
    for (size_t i = 0; i < n_ids; i++) rlx_sampler_accept(smp, ids[i], false);

    rlx_batch_seq bs = {ms.blocks, ms.n_blocks, ms.slot};
    int32_t zero = 0;
    double t0 = rlx_now();
    /* prefill in chunks of the plan's batch size; logits only for the last prompt token */
    for (size_t s = 0; s < n_ids; s += (size_t)r->max_batch_tokens) {
        int32_t n = (int32_t)RLX_MIN(n_ids - s, (size_t)r->max_batch_tokens);
        int32_t pos[512], seq[512];
        uint8_t outf[512];
        for (int32_t i = 0; i < n; i++) { pos[i] = (int32_t)s + i; seq[i] = 0; outf[i] = (s + (size_t)i == n_ids - 1); }
        rlx_batch b = {n, ids + s, pos, seq, outf, s + (size_t)n == n_ids ? 1 : 0, 1, &bs, NULL};
        if (rlx_runner_forward(r, &b, &err)) { fprintf(stderr, "rlxd generate: %s\n", err.msg); goto done; }
    }
    double t1 = rlx_now();
    rlx_detok_stream ds = {0};
    char text[512];
    int64_t n_out = 0;
    int32_t pos = (int32_t)n_ids;
    while (n_out < limit) {
        int32_t tk = rlx_sampler_sample(smp, r->logits);
        if (rlx_tokenizer_is_eog(tok, tk)) break;
        rlx_sampler_accept(smp, tk, true);
        size_t m = rlx_detok_push(tok, &ds, tk, false, text, sizeof text);
        fwrite(text, 1, m, stdout);
        fflush(stdout);
        n_out++;
        if (n_out == limit) break;
        uint8_t one = 1;
        rlx_batch d = {1, &tk, &pos, &zero, &one, 1, 1, &bs, NULL};
        if (rlx_runner_forward(r, &d, &err)) { fprintf(stderr, "\nrlxd generate: %s\n", err.msg); goto done; }
        pos++;
    }
    size_t m = rlx_detok_flush(&ds, text, sizeof text);
    fwrite(text, 1, m, stdout);
    fflush(stdout);
    double t2 = rlx_now();
    fprintf(stderr, "\nprompt: %zu tokens in %.3f s (%.1f tok/s); generation: %lld tokens in %.3f s (%.1f tok/s)\n",
            n_ids, t1 - t0, (double)n_ids / (t1 - t0), (long long)n_out, t2 - t1, n_out > 0 ? (double)n_out / (t2 - t1) : 0.0);
    if (ctx_bound && n_out == limit)
        fprintf(stderr, "rlxd generate: stopped after %lld tokens: the context of %d tokens is full (finish reason: length)%s\n",
                (long long)n_out, r->n_ctx, n_gen > 0 ? "; -n asked for more" : "");
    rc = 0;
done:
    rlx_sampler_free(smp);
    free(ids);
    if (r) rlx_memory_release(&r->mem, &ms);
    rlx_mem_seq_free(&ms);
    rlx_tokenizer_free(tok);
    rlx_runner_close(r);
    return rc;
}
