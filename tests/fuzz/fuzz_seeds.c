/* fuzz_seeds.c - writes seed inputs that come from ../shared (never copied into the repository)
 * into a fuzzer's corpus directory, at test time:
 *   fuzz_seeds gguf DIR SHARED       small GGUFs: every value type and tensor types, and the
 *                                    vocabulary metadata of stories260K (SPM), a qwen2 (BPE) and
 *                                    a bert (WPM) model with a chat template and one tiny tensor
 *   fuzz_seeds jinja DIR SHARED      the chat templates of ../shared/templates/ *.json
 *   fuzz_seeds tokenizer DIR SHARED  the texts of the ../shared/vocab/ *.inp test vectors */
#include "models/gguf.h"
#include "models/chat_template.h"
#include "backends/dtype.h"
#include "server/cli.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_written;

static void put(const char *dir, const char *name, const void *data, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
    n_written++;
}

static void gguf_types(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/seed-types.gguf", dir);
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    rlx_gguf_writer_set_str(w, "general.architecture", "llama", 5);
    rlx_gguf_writer_set_u32(w, "a.u32", 7);
    rlx_gguf_writer_set_i32(w, "a.i32", -7);
    rlx_gguf_writer_set_u64(w, "a.u64", 1ULL << 40);
    rlx_gguf_writer_set_f32(w, "a.f32", 1.5f);
    rlx_gguf_writer_set_bool(w, "a.bool", true);
    int32_t arr[4] = {1, -2, 3, -4};
    rlx_gguf_writer_set_arr(w, "a.arr", RLX_GGUF_INT32, arr, 4);
    rlx_gguf_str strs[2] = {{"x", 1}, {"yz", 2}};
    rlx_gguf_writer_set_arr_str(w, "a.strs", strs, 2);
    float t[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t ne[2] = {4, 2};
    rlx_gguf_writer_add_tensor(w, "t.f32", RLX_F32, 2, ne, t, sizeof t);
    rlx_error err = {0};
    if (rlx_gguf_writer_write(w, path, &err) == 0) n_written++;
    rlx_gguf_writer_free(w);
}

/* The model's tokenizer.* and general.architecture keys, a chat template, one tiny tensor. */
static void gguf_vocab(const char *dir, const char *shared, const char *model, const char *name)
{
    char src[1024], path[1024];
    snprintf(src, sizeof src, "%s/models/%s", shared, model);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    rlx_gguf *g = NULL;
    rlx_error err = {0};
    if (rlx_gguf_open(&g, src, &err)) return;
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    for (uint64_t i = 0; i < rlx_gguf_n_kv(g); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(g, i);
        if (!strncmp(kv->key, "tokenizer.", 10) || !strcmp(kv->key, "general.architecture"))
            rlx_gguf_writer_copy_kv(w, kv);
    }
    if (!rlx_gguf_find(g, "tokenizer.chat_template"))
        rlx_gguf_writer_set_str(w, "tokenizer.chat_template", rlx_chatml_template, strlen(rlx_chatml_template));
    float t[4] = {1, 2, 3, 4};
    int64_t ne[1] = {4};
    rlx_gguf_writer_add_tensor(w, "t", RLX_F32, 1, ne, t, sizeof t);
    if (rlx_gguf_writer_write(w, path, &err) == 0) n_written++;
    rlx_gguf_writer_free(w);
    rlx_gguf_close(g);
}

/* Every "template" string of the JSON files in ../shared/templates. */
static void jinja(const char *dir, const char *shared)
{
    char tdir[1024];
    snprintf(tdir, sizeof tdir, "%s/templates", shared);
    DIR *d = opendir(tdir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl < 6 || strcmp(e->d_name + nl - 5, ".json")) continue;
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", tdir, e->d_name);
        size_t n = 0;
        char *txt = rlx_read_file(p, &n);
        cJSON *j = txt ? cJSON_ParseWithLength(txt, n) : NULL;
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "template");
        if (cJSON_IsString(t)) {
            char name[600];
            snprintf(name, sizeof name, "shared-%.*s.jinja", (int)(nl - 5), e->d_name);
            put(dir, name, t->valuestring, strlen(t->valuestring));
        }
        cJSON_Delete(j);
        free(txt);
    }
    closedir(d);
}

/* The entries of every test-vector file, each prefixed with a flags byte (fuzz_tokenizer). */
static void tokenizer(const char *dir, const char *shared)
{
    char vdir[1024];
    snprintf(vdir, sizeof vdir, "%s/vocab", shared);
    DIR *d = opendir(vdir);
    if (!d) return;
    struct dirent *e;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    int k = 0;
    while ((e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl < 5 || strcmp(e->d_name + nl - 4, ".inp")) continue;
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", vdir, e->d_name);
        size_t n = 0;
        char *txt = rlx_read_file(p, &n);
        if (!txt) continue;
        char *s = txt, *end = txt + n;
        while (s < end && k < 400) {
            char *q = memmem(s, (size_t)(end - s), sep, sizeof sep - 1);
            size_t len = q ? (size_t)(q - s) : (size_t)(end - s);
            if (len && len < 2000) {
                char *b = malloc(len + 1);
                b[0] = (char)(k & 7);
                memcpy(b + 1, s, len);
                char name[64];
                snprintf(name, sizeof name, "vec-%04d", k++);
                put(dir, name, b, len + 1);
                free(b);
            }
            if (!q) break;
            s = q + sizeof sep - 1;
        }
        free(txt);
    }
    closedir(d);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: fuzz_seeds gguf|jinja|tokenizer DIR SHARED\n");
        return 2;
    }
    const char *kind = argv[1], *dir = argv[2], *shared = argv[3];
    if (!strcmp(kind, "gguf")) {
        gguf_types(dir);
        gguf_vocab(dir, shared, "stories260K.gguf", "seed-spm.gguf");
        gguf_vocab(dir, shared, "synth-qwen2-tiny-f32.gguf", "seed-bpe.gguf");
        gguf_vocab(dir, shared, "synth-bert-tiny-f32.gguf", "seed-wpm.gguf");
    } else if (!strcmp(kind, "jinja")) {
        jinja(dir, shared);
    } else if (!strcmp(kind, "tokenizer")) {
        tokenizer(dir, shared);
    }
    printf("%d seeds written to %s\n", n_written, dir);
    return 0;
}
