/* synth_vocab.c - the built-in vocabulary of rlxd-synth: a byte-level BPE (GPT-2 byte-to-unicode
 * token spelling, tokenizer.ggml.model "gpt2", pre-tokenizer "qwen2") trained deterministically
 * at run time on a small English text, plus four special tokens and a ChatML template. */
#include "tools/synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Training text: everyday English, so frequent pairs (" t", "he", "in", " the", ...) merge first. */
static const char corpus[] =
    "Once upon a time there was a little girl who lived in a village near the forest. "
    "Whenever she went out, the little girl wore a red riding cloak, so everyone in the village "
    "called her Little Red Riding Hood. One morning, Little Red Riding Hood asked her mother if she "
    "could go to visit her grandmother as it had been a while since they had seen each other. "
    "That is a good idea, her mother said. So they packed a nice basket for her to take to her "
    "grandmother. When the basket was ready, the little girl put on her red cloak and kissed her "
    "mother goodbye.\n"
    "The weather is nice today and the sun is shining. We are going to the park to play with the "
    "dog and to read a book under the big tree. It is important to drink water and to eat well. "
    "The quick brown fox jumps over the lazy dog. What time is it? It is time to go home, and "
    "then we will have dinner with our friends and family.\n"
    "A computer is a machine that can be programmed to carry out sequences of arithmetic or "
    "logical operations automatically. Modern computers can perform generic sets of operations "
    "known as programs. These programs enable computers to perform a wide range of tasks. "
    "The server answers the request of the client and sends the response back over the network. "
    "In this example, the model reads the input, thinks about the question, and writes the answer. "
    "Thank you for your help! You are welcome. Please let me know if there is anything else.\n"
    "There were three little pigs who lived with their mother. When they grew up, they left home "
    "to build their own houses. The first pig built a house of straw, the second pig built a house "
    "of sticks, and the third pig built a house of bricks. Then the wolf came and said: little pig, "
    "little pig, let me come in! Not by the hair of my chin, said the pig.\n"
    "The children were playing in the garden when it started to rain. They ran inside and sat by "
    "the window, watching the water run down the glass. Their mother made them a cup of warm milk "
    "and told them a story about a brave little mouse who wanted to see the world. The mouse "
    "walked for many days and nights, and every evening he looked at the stars and thought about "
    "his family at home. In the end he came back and told everyone about the things he had seen.\n"
    "Learning something new takes time and practice. If you want to get better at writing, read "
    "many books and write a little every day. Ask questions when you do not understand something, "
    "and do not be afraid of making mistakes, because every mistake teaches you something important. "
    "Good teachers and good friends will always help you when you need them.\n";

enum { N_MERGES_MAX = 320 };

static const char *const specials[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"};

static const char chat_template[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others are moved
 * to U+0100 and up, so every byte has a visible, whitespace-free spelling. */
static uint32_t byte_cp(int b)
{
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return (uint32_t)b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
    return 256u + (uint32_t)n;
}

/* Appends the UTF-8 spelling of bytes [p, p+n) to out (capacity checked by the caller: at most
 * 2 output bytes per input byte). Returns the new length. */
static size_t spell(const uint8_t *p, size_t n, char *out, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        const uint32_t cp = byte_cp(p[i]);
        if (cp < 0x80) out[len++] = (char)cp;
        else {
            out[len++] = (char)(0xC0 | (cp >> 6));
            out[len++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    out[len] = 0;
    return len;
}

typedef struct tok { uint8_t bytes[64]; int len; } tok;
typedef struct word { int ids[48]; int n; int count; } word;
typedef struct vocab { tok toks[256 + N_MERGES_MAX]; int n_toks; int merge_a[N_MERGES_MAX], merge_b[N_MERGES_MAX]; int n_merges; } vocab;

static int char_class(int c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return 1;
    if (c >= '0' && c <= '9') return 2;
    if (c == ' ' || c == '\n') return 0;
    return 3;
}

/* Splits the corpus into GPT-2 style words (" word", " ,", "\n") with their counts. */
static int split_words(word *words, int max_words)
{
    int nw = 0;
    const size_t n = sizeof corpus - 1;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        if (corpus[j] == '\n') j++;
        else {
            if (corpus[j] == ' ') j++;
            const int cls = j < n ? char_class((unsigned char)corpus[j]) : 0;
            while (j < n && cls && char_class((unsigned char)corpus[j]) == cls && j - i < 40) j++;
            if (j == i) j++;
        }
        word w = {.n = (int)(j - i), .count = 1};
        for (int k = 0; k < w.n; k++) w.ids[k] = (unsigned char)corpus[i + (size_t)k];
        int found = -1;
        for (int k = 0; k < nw && found < 0; k++)
            if (words[k].n == w.n && !memcmp(words[k].ids, w.ids, sizeof(int) * (size_t)w.n)) found = k;
        if (found >= 0) words[found].count++;
        else if (nw < max_words) words[nw++] = w;
        i = j;
    }
    return nw;
}

/* Greedy BPE: merge the most frequent adjacent pair (ties: lowest ids) until N_MERGES_MAX merges
 * or no pair occurs twice. Fully deterministic. */
static void train(vocab *v)
{
    static word words[1024];
    const int nw = split_words(words, 1024);
    v->n_toks = 256;
    for (int b = 0; b < 256; b++) { v->toks[b].bytes[0] = (uint8_t)b; v->toks[b].len = 1; }
    v->n_merges = 0;
    int *counts = malloc(sizeof(int) * (size_t)(256 + N_MERGES_MAX) * (256 + N_MERGES_MAX));
    if (!counts) return;
    const int dim = 256 + N_MERGES_MAX;
    while (v->n_merges < N_MERGES_MAX) {
        memset(counts, 0, sizeof(int) * (size_t)dim * (size_t)dim);
        int best_a = -1, best_b = -1, best = 1;
        for (int k = 0; k < nw; k++)
            for (int i = 0; i + 1 < words[k].n; i++) {
                const int a = words[k].ids[i], b = words[k].ids[i + 1];
                int *c = &counts[a * dim + b];
                *c += words[k].count;
                if (*c > best || (*c == best && best_a >= 0 && (a < best_a || (a == best_a && b < best_b)))) {
                    best = *c; best_a = a; best_b = b;
                }
            }
        if (best_a < 0) break;
        const tok *ta = &v->toks[best_a], *tb = &v->toks[best_b];
        if (ta->len + tb->len > (int)sizeof ta->bytes) break;
        tok *nt = &v->toks[v->n_toks];
        memcpy(nt->bytes, ta->bytes, (size_t)ta->len);
        memcpy(nt->bytes + ta->len, tb->bytes, (size_t)tb->len);
        nt->len = ta->len + tb->len;
        v->merge_a[v->n_merges] = best_a;
        v->merge_b[v->n_merges] = best_b;
        v->n_merges++;
        const int id = v->n_toks++;
        for (int k = 0; k < nw; k++) {
            int o = 0;
            for (int i = 0; i < words[k].n; i++) {
                if (i + 1 < words[k].n && words[k].ids[i] == best_a && words[k].ids[i + 1] == best_b) {
                    words[k].ids[o++] = id;
                    i++;
                } else {
                    words[k].ids[o++] = words[k].ids[i];
                }
            }
            words[k].n = o;
        }
    }
    free(counts);
}

static vocab *built(void)
{
    static vocab v;
    static bool done;
    if (!done) { train(&v); done = true; }
    return &v;
}

int64_t rlx_synth_vocab_size(void)
{
    return built()->n_toks + (int64_t)RLX_ARRAY_LEN(specials);
}

int64_t rlx_synth_vocab(rlx_gguf_writer *w, int64_t n_vocab, bool add_bos, rlx_error *err)
{
    const vocab *v = built();
    const int64_t base = rlx_synth_vocab_size();
    if (n_vocab == 0) n_vocab = base;
    if (n_vocab < base)
        return rlx_errorf(err, RLX_EINVAL, "--vocab %lld is smaller than the built-in vocabulary (%lld tokens); "
                          "use at least %lld or --vocab-from FILE.gguf", (long long)n_vocab, (long long)base, (long long)base);
    if (n_vocab > 10000000) return rlx_errorf(err, RLX_ERANGE, "--vocab %lld is too large (at most 10000000)", (long long)n_vocab);
    rlx_gguf_str *toks = calloc((size_t)n_vocab, sizeof *toks);
    int32_t *types = calloc((size_t)n_vocab, sizeof *types);
    rlx_gguf_str *merges = calloc((size_t)v->n_merges, sizeof *merges);
    /* spellings take at most 2 bytes per token byte; pads fit in 40 */
    char *text = malloc((size_t)v->n_toks * 130 + (size_t)v->n_merges * 260 + (size_t)(n_vocab - base) * 40 + 1024);
    int rc = RLX_ENOMEM;
    if (!toks || !types || (!merges && v->n_merges) || !text) {
        rlx_errorf(err, rc, "out of memory building a vocabulary of %lld tokens", (long long)n_vocab);
        goto done;
    }
    size_t used = 0;
    for (int i = 0; i < v->n_toks; i++) {
        const size_t len = spell(v->toks[i].bytes, (size_t)v->toks[i].len, text + used, 0);
        toks[i] = (rlx_gguf_str){text + used, len};
        types[i] = 1; /* normal */
        used += len + 1;
    }
    for (int i = 0; i < v->n_merges; i++) {
        size_t len = spell(v->toks[v->merge_a[i]].bytes, (size_t)v->toks[v->merge_a[i]].len, text + used, 0);
        text[used + len++] = ' ';
        len = spell(v->toks[v->merge_b[i]].bytes, (size_t)v->toks[v->merge_b[i]].len, text + used, len);
        merges[i] = (rlx_gguf_str){text + used, len};
        used += len + 1;
    }
    const int64_t first_special = v->n_toks;
    for (size_t i = 0; i < RLX_ARRAY_LEN(specials); i++) {
        toks[first_special + (int64_t)i] = (rlx_gguf_str){specials[i], strlen(specials[i])};
        types[first_special + (int64_t)i] = 3; /* control */
    }
    for (int64_t i = base; i < n_vocab; i++) {
        const int len = snprintf(text + used, 40, "[PAD%lld]", (long long)i);
        toks[i] = (rlx_gguf_str){text + used, (uint64_t)len};
        types[i] = 5; /* unused, as llama.cpp's converter pads */
        used += (size_t)len + 1;
    }
    const uint32_t bos = (uint32_t)first_special, eos = bos + 1, im_end = bos + 3;
    static const char model[] = "gpt2", pre[] = "qwen2";
    if ((rc = rlx_gguf_writer_set_str(w, "tokenizer.ggml.model", model, sizeof model - 1)) ||
        (rc = rlx_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre, sizeof pre - 1)) ||
        (rc = rlx_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, (uint64_t)n_vocab)) ||
        (rc = rlx_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", RLX_GGUF_INT32, types, (uint64_t)n_vocab)) ||
        (rc = rlx_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, (uint64_t)v->n_merges)) ||
        (rc = rlx_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", bos)) ||
        (rc = rlx_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", eos)) ||
        (rc = rlx_gguf_writer_set_u32(w, "tokenizer.ggml.eot_token_id", im_end)) ||
        (rc = rlx_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", eos)) ||
        (rc = rlx_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos)) ||
        (rc = rlx_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false)) ||
        (rc = rlx_gguf_writer_set_str(w, "tokenizer.chat_template", chat_template, sizeof chat_template - 1))) {
        rlx_errorf(err, rc, "could not store the vocabulary: %s", rlx_strerror(rc));
        goto done;
    }
    rc = 0;
done:
    free(toks);
    free(types);
    free(merges);
    free(text);
    return rc ? rc : n_vocab;
}

/* ---- WordPiece (encoders) ----
 * [PAD] [UNK] [CLS] [SEP] [MASK], every printable ASCII character as a word start ("\u2581c",
 * the converter's spelling) and as a continuation ("c"), then "\u2581word" for each distinct
 * lowercase word of the corpus in order of appearance, padded with "[unusedN]". */

#define WPM_BASE_MAX 4096     /* the built-in pieces fit in this many */
#define WPM_MAX (1 << 20)     /* padding allowed up to */

int64_t rlx_synth_vocab_wpm(rlx_gguf_writer *w, int64_t n_vocab, rlx_error *err)
{
    if (n_vocab < 0 || n_vocab > WPM_MAX)
        return rlx_errorf(err, RLX_EINVAL, "--vocab %lld: the built-in WordPiece vocabulary pads to at most %d", (long long)n_vocab, WPM_MAX);
    const int64_t cap = RLX_MAX(n_vocab, WPM_BASE_MAX);
    const size_t pool_bytes = (size_t)cap * 24;
    char *pool = malloc(pool_bytes);
    rlx_gguf_str *toks = malloc((size_t)cap * sizeof *toks);
    int32_t *types = malloc((size_t)cap * sizeof *types);
    if (!pool || !toks || !types) {
        free(pool);
        free(toks);
        free(types);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory for the vocabulary");
    }
    size_t used = 0;
    int64_t n = 0;
    int rc = 0;
#define ADD(str, type) do { \
        size_t l_ = strlen(str); \
        if (n < cap && used + l_ + 1 <= pool_bytes) { \
            memcpy(pool + used, str, l_ + 1); \
            toks[n] = (rlx_gguf_str){pool + used, l_}; types[n++] = (type); used += l_ + 1; \
        } } while (0)
    static const char *const sp[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (size_t i = 0; i < RLX_ARRAY_LEN(sp); i++) ADD(sp[i], 3);
    char buf[64];
    for (int c = 0x21; c < 0x7f; c++) {
        if (c >= 'A' && c <= 'Z') continue; /* the tokenizer lowercases */
        snprintf(buf, sizeof buf, "\xe2\x96\x81%c", c);
        ADD(buf, 1);
        snprintf(buf, sizeof buf, "%c", c);
        ADD(buf, 1);
    }
    const int64_t words0 = n;
    for (const char *p = corpus; *p;) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) { p++; continue; }
        size_t l = 0;
        memcpy(buf, "\xe2\x96\x81", 3);
        while (((p[l] >= 'a' && p[l] <= 'z') || (p[l] >= 'A' && p[l] <= 'Z')) && l < 40) {
            buf[3 + l] = (char)(p[l] | 0x20);
            l++;
        }
        buf[3 + l] = 0;
        p += l;
        bool dup = l < 2;
        for (int64_t k = words0; k < n && !dup; k++) dup = !strcmp(toks[k].ptr, buf);
        if (!dup) ADD(buf, 1);
    }
    if (n_vocab == 0) n_vocab = n;
    if (n_vocab < n) {
        rc = rlx_errorf(err, RLX_EINVAL, "--vocab %lld: the built-in WordPiece vocabulary has %lld tokens", (long long)n_vocab,
                        (long long)n);
        goto done;
    }
    for (int64_t i = 0; n < n_vocab; i++) {
        snprintf(buf, sizeof buf, "[unused%lld]", (long long)i);
        ADD(buf, 5);
    }
#undef ADD
    static const char model[] = "bert", pre[] = "bert-bge";
    if ((rc = rlx_gguf_writer_set_str(w, "tokenizer.ggml.model", model, sizeof model - 1)) ||
        (rc = rlx_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre, sizeof pre - 1)) ||
        (rc = rlx_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, (uint64_t)n)) ||
        (rc = rlx_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", RLX_GGUF_INT32, types, (uint64_t)n)) ||
        (rc = rlx_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 2)) ||
        (rc = rlx_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 3)) ||
        (rc = rlx_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 1)) ||
        (rc = rlx_gguf_writer_set_u32(w, "tokenizer.ggml.seperator_token_id", 3)) ||
        (rc = rlx_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 0)) ||
        (rc = rlx_gguf_writer_set_u32(w, "tokenizer.ggml.cls_token_id", 2)) ||
        (rc = rlx_gguf_writer_set_u32(w, "tokenizer.ggml.mask_token_id", 4)))
        rlx_errorf(err, rc, "could not store the vocabulary: %s", rlx_strerror(rc));
done:
    free(pool);
    free(toks);
    free(types);
    return rc ? rc : n;
}
