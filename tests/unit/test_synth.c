/* test_synth.c - rlxd-synth end to end: runs the built tool (RLX_BIN), reopens its output with
 * the GGUF reader and checks metadata, tensor names/shapes/types per family, determinism, the
 * weight statistics it promises, the built-in vocabulary, --vocab-from, and bad arguments. */
#include "tests/rlx_test.h"
#include "tests/rlx_test_tmp.h"
#include "backends/quant.h"
#include "models/gguf.h"
#include "engine/runner.h"
#include "engine/sample.h"

#include <sys/wait.h>
#include <unistd.h>

static int synth(const char *args, const char *out)
{
    const char *bin = getenv("RLX_BIN");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "\"%s/rlxd-synth\" %s -o \"%s/%s\" 2>/dev/null", bin ? bin : ".", args, rlx_test_tmp_dir(), out);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static rlx_gguf *open_out(const char *out)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", rlx_test_tmp_dir(), out);
    rlx_gguf *g = NULL;
    rlx_error err = {0};
    if (rlx_gguf_open(&g, p, &err)) fprintf(stderr, "  cannot open %s: %s\n", p, err.msg);
    return g;
}

static bool have_tool(void)
{
    const char *bin = getenv("RLX_BIN");
    char p[512];
    snprintf(p, sizeof p, "%s/rlxd-synth", bin ? bin : ".");
    if (access(p, X_OK)) return false;
    return rlx_test_tmp_dir() != NULL;
}

static uint32_t get_u32(const rlx_gguf *g, const char *key)
{
    uint32_t v = 0xFFFFFFFFu;
    rlx_gguf_get_u32(g, key, &v, NULL);
    return v;
}

/* Mean and standard deviation of a dequantized tensor. */
static void stats(const rlx_gguf_tensor *t, double *mean, double *sd)
{
    const int64_t K = t->ne[0], rows = t->ne[1];
    const size_t rb = rlx_row_bytes(t->type, K);
    float *d = malloc((size_t)K * sizeof(float));
    double s = 0, s2 = 0;
    for (int64_t r = 0; r < rows; r++) {
        rlx_dequantize_row(t->type, (const char *)t->data + rb * (size_t)r, d, K);
        for (int64_t i = 0; i < K; i++) { s += d[i]; s2 += (double)d[i] * d[i]; }
    }
    free(d);
    const double n = (double)(K * rows);
    *mean = s / n;
    *sd = sqrt(s2 / n - *mean * *mean);
}

TEST(families_metadata_and_tensors)
{
    if (!have_tool()) SKIP("rlxd-synth not built (RLX_BIN unset?)");
    static const struct { const char *arch; bool bias, qk_norm, post, tied; } fam[] = {
        {"llama", false, false, false, false}, {"qwen2", true, false, false, false}, {"qwen3", false, true, false, false},
        {"gemma2", false, false, true, true},  {"gemma3", false, true, true, true},
    };
    for (size_t f = 0; f < RLX_ARRAY_LEN(fam); f++) {
        char args[256], out[64];
        snprintf(args, sizeof args, "--arch %s --preset tiny --type f16 --seed 3", fam[f].arch);
        snprintf(out, sizeof out, "%s.gguf", fam[f].arch);
        ASSERT_EQ(synth(args, out), 0);
        rlx_gguf *g = open_out(out);
        ASSERT(g);
        rlx_gguf_str s;
        ASSERT_EQ(rlx_gguf_get_str(g, "general.architecture", &s, NULL), 0);
        ASSERT(s.len == strlen(fam[f].arch) && !memcmp(s.ptr, fam[f].arch, s.len));
        char key[128];
        static const struct { const char *k; uint32_t v; } want[] = {
            {"context_length", 256}, {"embedding_length", 64}, {"block_count", 2}, {"feed_forward_length", 128},
            {"attention.head_count", 4}, {"attention.head_count_kv", 2}, {"attention.key_length", 16},
            {"attention.value_length", 16}, {"rope.dimension_count", 16},
        };
        for (size_t k = 0; k < RLX_ARRAY_LEN(want); k++) {
            snprintf(key, sizeof key, "%s.%s", fam[f].arch, want[k].k);
            ASSERT_MSG(get_u32(g, key) == want[k].v, "%s = %u, want %u", key, get_u32(g, key), want[k].v);
        }
        float eps = 0, base = 0;
        snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", fam[f].arch);
        ASSERT_EQ(rlx_gguf_get_f32(g, key, &eps, NULL), 0);
        ASSERT(eps > 0 && eps < 1e-4);
        snprintf(key, sizeof key, "%s.rope.freq_base", fam[f].arch);
        ASSERT_EQ(rlx_gguf_get_f32(g, key, &base, NULL), 0);
        ASSERT(base >= 10000);
        ASSERT_EQ(get_u32(g, "general.file_type"), 1);
        ASSERT_EQ(get_u32(g, "general.alignment"), 32);
        ASSERT_EQ(rlx_gguf_alignment(g), 32);
        if (!strcmp(fam[f].arch, "gemma2")) {
            float cap = 0;
            ASSERT_EQ(rlx_gguf_get_f32(g, "gemma2.attn_logit_softcapping", &cap, NULL), 0);
            ASSERT_NEAR(cap, 50, 0);
            ASSERT_EQ(rlx_gguf_get_f32(g, "gemma2.final_logit_softcapping", &cap, NULL), 0);
            ASSERT_NEAR(cap, 30, 0);
            ASSERT_EQ(get_u32(g, "gemma2.attention.sliding_window"), 32);
        }
        const uint32_t nv = get_u32(g, "tokenizer.ggml.bos_token_id");
        ASSERT(nv != 0xFFFFFFFFu);
        const rlx_gguf_array *toks;
        ASSERT_EQ(rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", &toks, NULL), 0);
        /* tensors: names, shapes (ne[0] is the input dim), types */
        const rlx_gguf_tensor *emb = rlx_gguf_find_tensor(g, "token_embd.weight");
        ASSERT(emb && emb->ne[0] == 64 && emb->ne[1] == (int64_t)toks->n && emb->type == RLX_F16);
        ASSERT_EQ(rlx_gguf_find_tensor(g, "output.weight") != NULL, !fam[f].tied);
        const rlx_gguf_tensor *on = rlx_gguf_find_tensor(g, "output_norm.weight");
        ASSERT(on && on->type == RLX_F32 && on->n_dims == 1 && on->ne[0] == 64);
        for (int l = 0; l < 2; l++) {
            static const struct { const char *n; int64_t ne0, ne1; int kind; } t[] = {
                {"attn_norm.weight", 64, 1, 0}, {"attn_q.weight", 64, 64, 0}, {"attn_k.weight", 64, 32, 0},
                {"attn_v.weight", 64, 32, 0}, {"attn_output.weight", 64, 64, 0}, {"ffn_norm.weight", 64, 1, 0},
                {"ffn_gate.weight", 64, 128, 0}, {"ffn_up.weight", 64, 128, 0}, {"ffn_down.weight", 128, 64, 0},
                {"attn_q.bias", 64, 1, 1}, {"attn_k.bias", 32, 1, 1}, {"attn_v.bias", 32, 1, 1},
                {"attn_q_norm.weight", 16, 1, 2}, {"attn_k_norm.weight", 16, 1, 2},
                {"post_attention_norm.weight", 64, 1, 3}, {"post_ffw_norm.weight", 64, 1, 3},
            };
            for (size_t k = 0; k < RLX_ARRAY_LEN(t); k++) {
                char name[96];
                snprintf(name, sizeof name, "blk.%d.%s", l, t[k].n);
                const bool on_ = t[k].kind == 0 || (t[k].kind == 1 && fam[f].bias) || (t[k].kind == 2 && fam[f].qk_norm) ||
                                 (t[k].kind == 3 && fam[f].post);
                const rlx_gguf_tensor *x = rlx_gguf_find_tensor(g, name);
                ASSERT_MSG((x != NULL) == on_, "%s: %s %s", fam[f].arch, name, on_ ? "missing" : "unexpected");
                if (!x) continue;
                ASSERT_MSG(x->ne[0] == t[k].ne0 && x->ne[1] == t[k].ne1, "%s: %s is %lldx%lld", fam[f].arch, name,
                           (long long)x->ne[0], (long long)x->ne[1]);
                ASSERT_EQ(x->type, t[k].ne1 == 1 ? RLX_F32 : RLX_F16);
            }
        }
        rlx_gguf_close(g);
    }
}

TEST(quant_mix_and_statistics)
{
    if (!have_tool()) SKIP("rlxd-synth not built (RLX_BIN unset?)");
    /* hidden 256 so K formats fit; ffn 320 is not a multiple of 256 -> ffn_down falls back to Q8_0 */
    ASSERT_EQ(synth("--arch llama --preset tiny --hidden 256 --ffn 320 --layers 8 --vocab 600 --type q4_k_m --seed 5", "km.gguf"), 0);
    rlx_gguf *g = open_out("km.gguf");
    ASSERT(g);
    ASSERT_EQ(get_u32(g, "general.file_type"), 15);
    ASSERT_EQ(rlx_gguf_find_tensor(g, "output.weight")->type, RLX_Q6_K);
    ASSERT_EQ(rlx_gguf_find_tensor(g, "token_embd.weight")->type, RLX_Q4_K);
    ASSERT_EQ(rlx_gguf_find_tensor(g, "token_embd.weight")->ne[1], 600);
    int v6 = 0;
    for (int l = 0; l < 8; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        const int t = rlx_gguf_find_tensor(g, name)->type;
        ASSERT(t == RLX_Q4_K || t == RLX_Q6_K);
        v6 += t == RLX_Q6_K;
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        ASSERT_EQ(rlx_gguf_find_tensor(g, name)->type, RLX_Q8_0);
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", l);
        ASSERT_EQ(rlx_gguf_find_tensor(g, name)->type, RLX_Q4_K);
    }
    ASSERT(v6 >= 2 && v6 <= 6); /* llama.cpp's use_more_bits: ends and every third layer */
    double mean, sd;
    stats(rlx_gguf_find_tensor(g, "blk.3.attn_q.weight"), &mean, &sd);
    ASSERT_NEAR(mean, 0, 0.003);
    ASSERT_NEAR(sd, 1 / sqrt(256.0), 0.1 / sqrt(256.0));
    stats(rlx_gguf_find_tensor(g, "blk.3.ffn_down.weight"), &mean, &sd);
    ASSERT_NEAR(sd, 1 / sqrt(320.0), 0.05 / sqrt(320.0));
    const rlx_gguf_tensor *n = rlx_gguf_find_tensor(g, "blk.3.ffn_norm.weight");
    ASSERT_EQ(n->type, RLX_F32);
    stats(n, &mean, &sd);
    ASSERT_NEAR(mean, 1, 0.03);
    ASSERT(sd > 0.05 && sd < 0.15);
    rlx_gguf_close(g);
}

TEST(every_type)
{
    if (!have_tool()) SKIP("rlxd-synth not built (RLX_BIN unset?)");
    static const struct { const char *name; int main_type, output_type; uint32_t file_type; double tol; } types[] = {
        {"f32", RLX_F32, RLX_F32, 0, 0.02},      {"f16", RLX_F16, RLX_F16, 1, 0.02},
        {"bf16", RLX_BF16, RLX_BF16, 32, 0.02},  {"q8_0", RLX_Q8_0, RLX_Q8_0, 7, 0.02},
        {"q4_0", RLX_Q4_0, RLX_Q6_K, 2, 0.05},   {"q4_k", RLX_Q4_K, RLX_Q6_K, 14, 0.05},
        {"q5_k", RLX_Q5_K, RLX_Q6_K, 16, 0.03},  {"q6_k", RLX_Q6_K, RLX_Q6_K, 18, 0.02},
        {"q4_k_m", RLX_Q4_K, RLX_Q6_K, 15, 0.05}, {"q5_k_m", RLX_Q5_K, RLX_Q6_K, 17, 0.03},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(types); i++) {
        char args[256], out[64];
        snprintf(args, sizeof args, "--arch qwen2 --preset tiny --hidden 256 --ffn 512 --layers 1 --type %s --seed 9", types[i].name);
        snprintf(out, sizeof out, "t_%s.gguf", types[i].name);
        ASSERT_EQ(synth(args, out), 0);
        rlx_gguf *g = open_out(out);
        ASSERT(g);
        ASSERT_EQ(get_u32(g, "general.file_type"), types[i].file_type);
        const rlx_gguf_tensor *q = rlx_gguf_find_tensor(g, "blk.0.attn_q.weight");
        ASSERT_MSG(q->type == types[i].main_type, "%s: attn_q is %s", types[i].name, rlx_dtype_get(q->type)->name);
        ASSERT_EQ(rlx_gguf_find_tensor(g, "output.weight")->type, types[i].output_type);
        ASSERT_EQ(rlx_gguf_find_tensor(g, "blk.0.attn_q.bias")->type, RLX_F32);
        double mean, sd;
        stats(q, &mean, &sd); /* quantization noise only shifts the spread a little */
        ASSERT_NEAR(mean, 0, 0.003);
        ASSERT_MSG(fabs(sd * 16 - 1) <= types[i].tol + 0.05, "%s: sd %.5f, want 1/16", types[i].name, sd);
        stats(rlx_gguf_find_tensor(g, "blk.0.attn_q.bias"), &mean, &sd);
        ASSERT_NEAR(sd, 0.02, 0.004);
        rlx_gguf_close(g);
    }
}

static bool same_file(const char *a, const char *b)
{
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/%s", rlx_test_tmp_dir(), a);
    snprintf(pb, sizeof pb, "%s/%s", rlx_test_tmp_dir(), b);
    FILE *fa = fopen(pa, "rb"), *fb = fopen(pb, "rb");
    bool same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = false;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

TEST(deterministic)
{
    if (!have_tool()) SKIP("rlxd-synth not built (RLX_BIN unset?)");
    /* the exact command of the project's quick start, with parent directories to create */
    ASSERT_EQ(synth("--arch llama --preset tiny --type q8_0 --seed 1", "models/default.gguf"), 0);
    ASSERT_EQ(synth("--arch llama --preset tiny --type q8_0 --seed 1", "models/default2.gguf"), 0);
    ASSERT_EQ(synth("--arch llama --preset tiny --type q8_0 --seed 2", "models/seed2.gguf"), 0);
    ASSERT(same_file("models/default.gguf", "models/default2.gguf"));
    ASSERT(!same_file("models/default.gguf", "models/seed2.gguf"));
    rlx_gguf *g = open_out("models/default.gguf");
    ASSERT(g);
    ASSERT_EQ(get_u32(g, "general.file_type"), 7);
    ASSERT_EQ(rlx_gguf_find_tensor(g, "blk.0.attn_q.weight")->type, RLX_Q8_0);
    rlx_gguf_close(g);
}

TEST(builtin_vocabulary)
{
    if (!have_tool()) SKIP("rlxd-synth not built (RLX_BIN unset?)");
    ASSERT_EQ(synth("--arch qwen3 --preset tiny --vocab 1000", "voc.gguf"), 0);
    rlx_gguf *g = open_out("voc.gguf");
    ASSERT(g);
    rlx_gguf_str s;
    ASSERT_EQ(rlx_gguf_get_str(g, "tokenizer.ggml.model", &s, NULL), 0);
    ASSERT(s.len == 4 && !memcmp(s.ptr, "gpt2", 4));
    const rlx_gguf_array *toks, *types, *merges;
    ASSERT_EQ(rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", &toks, NULL), 0);
    ASSERT_EQ(rlx_gguf_get_arr(g, "tokenizer.ggml.token_type", &types, NULL), 0);
    ASSERT_EQ(rlx_gguf_get_arr(g, "tokenizer.ggml.merges", &merges, NULL), 0);
    ASSERT_EQ(toks->n, 1000);
    ASSERT_EQ(types->n, 1000);
    ASSERT_EQ(get_u32(g, "qwen3.vocab_size"), 1000);
    ASSERT(merges->n >= 250);
    /* byte 'A' is spelled "A", the space byte is spelled "Ġ" (U+0120) */
    ASSERT(toks->strs['A'].len == 1 && toks->strs['A'].ptr[0] == 'A');
    ASSERT(toks->strs[' '].len == 2 && !memcmp(toks->strs[' '].ptr, "\xC4\xA0", 2));
    /* every merge joins two existing tokens into one that also exists */
    for (uint64_t m = 0; m < merges->n; m++) {
        const rlx_gguf_str *ms = &merges->strs[m];
        const char *sp = memchr(ms->ptr, ' ', ms->len);
        ASSERT(sp && sp > ms->ptr);
        char joined[256];
        const size_t la = (size_t)(sp - ms->ptr), lb = ms->len - la - 1;
        ASSERT(la + lb < sizeof joined);
        memcpy(joined, ms->ptr, la);
        memcpy(joined + la, sp + 1, lb);
        bool found = false;
        for (uint64_t i = 0; i < toks->n && !found; i++)
            found = toks->strs[i].len == la + lb && !memcmp(toks->strs[i].ptr, joined, la + lb);
        ASSERT_MSG(found, "merge %llu has no token", (unsigned long long)m);
    }
    const uint32_t bos = get_u32(g, "tokenizer.ggml.bos_token_id"), eos = get_u32(g, "tokenizer.ggml.eos_token_id");
    ASSERT(bos < 1000 && eos < 1000);
    ASSERT(toks->strs[bos].len == 17 && !memcmp(toks->strs[bos].ptr, "<|begin_of_text|>", 17));
    ASSERT(toks->strs[eos].len == 15 && !memcmp(toks->strs[eos].ptr, "<|end_of_text|>", 15));
    int32_t ty[2]; /* array data lies unaligned in the mapping */
    memcpy(&ty[0], (const char *)types->data + 4 * bos, 4);
    memcpy(&ty[1], (const char *)types->data + 4 * 999, 4);
    ASSERT_EQ(ty[0], 3);
    ASSERT_EQ(ty[1], 5);
    bool im_start = false;
    for (uint64_t i = 0; i < toks->n; i++) im_start |= toks->strs[i].len == 12 && !memcmp(toks->strs[i].ptr, "<|im_start|>", 12);
    ASSERT(im_start);
    ASSERT_EQ(rlx_gguf_get_str(g, "tokenizer.chat_template", &s, NULL), 0);
    ASSERT(s.len > 40 && memmem(s.ptr, s.len, "<|im_start|>", 12) && memmem(s.ptr, s.len, "add_generation_prompt", 21));
    rlx_gguf_close(g);
    /* too small a vocabulary is refused */
    ASSERT_EQ(synth("--arch qwen3 --preset tiny --vocab 100", "small.gguf"), 1);
}

TEST(vocab_from)
{
    if (!have_tool()) SKIP("rlxd-synth not built (RLX_BIN unset?)");
    const char *src = rlx_test_shared("models/stories260K.gguf");
    if (!src) SKIP("../shared/models/stories260K.gguf not found (set RLX_SHARED)");
    char args[1024];
    snprintf(args, sizeof args, "--arch llama --preset tiny --type q8_0 --vocab-from \"%s\"", src);
    ASSERT_EQ(synth(args, "vf.gguf"), 0);
    rlx_gguf *g = open_out("vf.gguf"), *r = NULL;
    ASSERT(g);
    ASSERT_EQ(rlx_gguf_open(&r, src, NULL), 0);
    int copied = 0;
    for (uint64_t i = 0; i < rlx_gguf_n_kv(r); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(r, i);
        if (strncmp(kv->key, "tokenizer.", 10)) continue;
        const rlx_gguf_value *v = rlx_gguf_find(g, kv->key);
        ASSERT_MSG(v && v->type == kv->value.type, "%s not copied", kv->key);
        copied++;
    }
    ASSERT(copied >= 4);
    ASSERT_EQ(rlx_gguf_find_tensor(g, "token_embd.weight")->ne[1], 512);
    ASSERT_EQ(get_u32(g, "llama.vocab_size"), 512);
    rlx_gguf_close(r);
    rlx_gguf_close(g);
}

TEST(bad_arguments)
{
    if (!have_tool()) SKIP("rlxd-synth not built (RLX_BIN unset?)");
    ASSERT_EQ(synth("--arch mamba", "x.gguf"), 2);
    ASSERT_EQ(synth("--arch llama --type q3_k", "x.gguf"), 2);
    ASSERT_EQ(synth("--arch llama --heads 3 --kv-heads 2", "x.gguf"), 2);
    ASSERT_EQ(synth("--arch llama --hidden -4", "x.gguf"), 2);
    ASSERT_EQ(synth("--arch llama --preset huge", "x.gguf"), 2);
    ASSERT_EQ(synth("--arch llama --vocab-from /nonexistent.gguf", "x.gguf"), 1);
    char p[512];
    snprintf(p, sizeof p, "%s/x.gguf", rlx_test_tmp_dir());
    ASSERT(access(p, F_OK) != 0);
}

/* qwen35: the qwen35-tiny preset writes the tensors (names, shapes) and keys of the shared
 * synth-qwen35-tiny (made with llama.cpp's gguf-py), and models of other shapes load and run
 * (prefill, then decode steps through the model's memory: KV and state slots) */
TEST(qwen35_any_shape)
{
    if (!have_tool()) SKIP("rlxd-synth not built (RLX_BIN unset?)");
    const char *ref_path = rlx_test_shared("models/synth-qwen35-tiny-f32.gguf");
    if (ref_path) {
        char args[1200];
        snprintf(args, sizeof args, "--arch qwen35 --preset qwen35-tiny --seed 4 --vocab-from \"%s\"", ref_path);
        ASSERT_EQ(synth(args, "q35.gguf"), 0);
        rlx_gguf *g = open_out("q35.gguf"), *ref = NULL;
        rlx_error err = {0};
        ASSERT(g != NULL);
        ASSERT_EQ(rlx_gguf_open(&ref, ref_path, &err), 0);
        ASSERT_EQ(rlx_gguf_n_tensors(g), rlx_gguf_n_tensors(ref));
        for (uint64_t i = 0; i < rlx_gguf_n_tensors(ref); i++) {
            const rlx_gguf_tensor *r = rlx_gguf_tensor_at(ref, i), *x = rlx_gguf_find_tensor(g, r->name);
            ASSERT_MSG(x != NULL, "%s missing", r->name);
            ASSERT_MSG(x->ne[0] == r->ne[0] && x->ne[1] == r->ne[1] && x->type == r->type, "%s: %lldx%lld type %d, reference %lldx%lld type %d",
                       r->name, (long long)x->ne[0], (long long)x->ne[1], x->type, (long long)r->ne[0], (long long)r->ne[1], r->type);
        }
        static const char *keys[] = {"block_count", "full_attention_interval", "ssm.conv_kernel", "ssm.state_size", "ssm.group_count",
                                     "ssm.time_step_rank", "ssm.inner_size", "rope.dimension_count", "attention.key_length"};
        for (size_t k = 0; k < RLX_ARRAY_LEN(keys); k++) {
            char key[128];
            snprintf(key, sizeof key, "qwen35.%s", keys[k]);
            ASSERT_MSG(get_u32(g, key) == get_u32(ref, key), "%s: %u, reference %u", key, get_u32(g, key), get_u32(ref, key));
        }
        const rlx_gguf_array *a = NULL, *b = NULL;
        ASSERT_EQ(rlx_gguf_get_arr(g, "qwen35.rope.dimension_sections", &a, NULL), 0);
        ASSERT_EQ(rlx_gguf_get_arr(ref, "qwen35.rope.dimension_sections", &b, NULL), 0);
        ASSERT(a->n == b->n && !memcmp(a->data, b->data, a->n * 4));
        rlx_gguf_close(ref);
        rlx_gguf_close(g);
    }
    static const char *shapes[] = {
        "--hidden 96 --layers 5 --heads 6 --kv-heads 3 --head-dim 32 --rope-dims 12 --attn-interval 2 --ssm-state 24 "
        "--ssm-groups 2 --ssm-heads 6 --conv-kernel 3 --type q8_0",
        "--hidden 64 --layers 3 --heads 2 --kv-heads 1 --head-dim 32 --attn-interval 3 --ssm-state 8 --ssm-groups 4 "
        "--ssm-heads 8 --conv-kernel 5 --type f16 --tied",
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(shapes); i++) {
        char args[512], path[512];
        snprintf(args, sizeof args, "--arch qwen35 %s --seed 7", shapes[i]);
        ASSERT_MSG(synth(args, "shape.gguf") == 0, "%s", args);
        snprintf(path, sizeof path, "%s/shape.gguf", rlx_test_tmp_dir());
        rlx_runner_config cfg = {.model_path = path, .n_ctx = 64, .max_batch_tokens = 32, .max_outputs = 32, .backend = {.n_threads = 1}};
        rlx_runner *r = NULL;
        rlx_error err = {0};
        ASSERT_MSG(rlx_runner_open(&r, &cfg, &err) == 0, "%s: %s", args, err.msg);
        rlx_mem_seq ms;
        rlx_mem_seq_init(&ms);
        ASSERT_EQ(rlx_memory_grow(&r->mem, &ms, 24), 0);
        ASSERT(ms.slot >= 0);
        int32_t tok[20], pos[20], seq[20] = {0};
        uint8_t out[20] = {0};
        for (int k = 0; k < 20; k++) { tok[k] = 10 + k * 7 % 300; pos[k] = k; }
        out[19] = 1;
        rlx_batch_seq bs = {ms.blocks, ms.n_blocks, ms.slot};
        rlx_batch b = {20, tok, pos, seq, out, 1, 1, &bs, NULL};
        ASSERT_MSG(rlx_runner_forward(r, &b, &err) == 0, "%s: %s", args, err.msg);
        for (int k = 0; k < 4 && !rlx_test_failed_; k++) {
            int32_t t = rlx_argmax(r->logits, r->n_vocab), p = 20 + k;
            uint8_t one = 1;
            rlx_batch d = {1, &t, &p, seq, &one, 1, 1, &bs, NULL};
            ASSERT_MSG(rlx_runner_forward(r, &d, &err) == 0, "%s: %s", args, err.msg);
            ASSERT(isfinite(r->logits[0]) && isfinite(r->logits[r->n_vocab - 1]));
        }
        rlx_memory_release(&r->mem, &ms);
        rlx_mem_seq_free(&ms);
        rlx_runner_close(r);
    }
    ASSERT_EQ(synth("--arch qwen35 --heads 4 --kv-heads 2 --ssm-groups 3 --ssm-heads 4", "x.gguf"), 2);
    ASSERT_EQ(synth("--arch qwen35 --head-dim 16 --rope-dims 18", "x.gguf"), 2);
}

TEST_MAIN(TEST_ENTRY(families_metadata_and_tensors), TEST_ENTRY(quant_mix_and_statistics), TEST_ENTRY(every_type),
          TEST_ENTRY(deterministic),
          TEST_ENTRY(builtin_vocabulary), TEST_ENTRY(vocab_from), TEST_ENTRY(bad_arguments), TEST_ENTRY(qwen35_any_shape))
