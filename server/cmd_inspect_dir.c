/* cmd_inspect_dir.c - `rlxd inspect DIR [--prefer QUANT] [--json]`: a folder's models (its .gguf
 * files and its direct subfolders', split parts as one file) grouped by model, each file's
 * quantization (general.file_type, else the dominant tensor type), size and rlxd check verdict,
 * and the file rlxd would pick per model: the --prefer quantization when that file is SUPPORTED,
 * else the first SUPPORTED one in rlx__quant_order, else any SUPPORTED one. Files group into a
 * model by name with a trailing -QUANT / .QUANT tag (a llama.cpp quantization name, any case)
 * dropped: Qwen3-8B-Q4_K_M.gguf and Qwen3-8B-Q8_0.gguf are two files of Qwen3-8B. */
#include "server/cli.h"
#include "models/model_files.h"
#include "models/safetensors.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* The default preference: smallest files that keep quality first, as llama.cpp's docs and
 * Ollama's defaults suggest (Q4_K_M), then larger quants, then unquantized. */
const char *const rlx__quant_order[] = {"Q4_K_M", "Q5_K_M", "Q8_0", "Q6_K", "Q4_K_S", "Q5_K_S", "Q4_0",
                                        "F16", "BF16", "F32", NULL};

typedef struct file {
    const rlx_model_entry *e;
    char model[256];          /* the group: name without its quantization tag */
    char quant[32];
    uint64_t bytes;           /* all parts present */
    rlx_check_result check;
} file;

bool rlx__quant_known(const char *q, const char **canon)
{
    for (uint32_t id = 0; id < 64; id++) {
        const char *n = rlx_ftype_name(id);
        if (n && !strcasecmp(n, q)) {
            if (canon) *canon = n;
            return true;
        }
    }
    return false;
}

static void model_name(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s", name);
    const char *base = strrchr(out, '/');
    base = base ? base + 1 : out;
    for (char *p = out + strlen(out); p > base; p--)
        if ((p[-1] == '-' || p[-1] == '.') && rlx__quant_known(p, NULL) && p - 1 > base) {
            p[-1] = 0;
            return;
        }
}

static uint64_t parts_bytes(const rlx_gguf *g)
{
    uint64_t n = 0;
    if (rlx_st_is_folder(rlx_gguf_path(g))) { /* a Hugging Face folder: its weights */
        for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) n += rlx_gguf_tensor_at(g, i)->size;
        return n;
    }
    for (uint32_t i = 0; i < rlx_gguf_n_parts(g); i++) {
        struct stat st;
        if (!stat(rlx_gguf_part_path(g, i), &st)) n += (uint64_t)st.st_size;
    }
    return n;
}

static void describe(file *f)
{
    rlx_gguf *g;
    rlx_error err = {0};
    snprintf(f->quant, sizeof f->quant, "?");
    if (rlx_model_open(&g, f->e->path, &err) == 0) {
        rlx_model_quant(g, f->quant, sizeof f->quant);
        f->bytes = parts_bytes(g);
        rlx_gguf_close(g);
    } else {
        struct stat st;
        if (!stat(f->e->path, &st)) f->bytes = (uint64_t)st.st_size; /* what there is of it */
    }
    rlx_model_check(f->e->path, &f->check);
}

static int cmp_file(const void *a, const void *b)
{
    const file *x = a, *y = b;
    int c = strcmp(x->model, y->model);
    return c ? c : strcmp(x->e->name, y->e->name);
}

/* Index in fs[lo, hi) of the file to serve, or -1; *why says how it was chosen. */
static long pick(const file *fs, size_t lo, size_t hi, const char *prefer, const char **why)
{
    if (prefer)
        for (size_t i = lo; i < hi; i++)
            if (fs[i].check.status == RLX_CHECK_SUPPORTED && !strcmp(fs[i].quant, prefer)) { *why = "preferred"; return (long)i; }
    for (size_t k = 0; rlx__quant_order[k]; k++)
        for (size_t i = lo; i < hi; i++)
            if (fs[i].check.status == RLX_CHECK_SUPPORTED && !strcmp(fs[i].quant, rlx__quant_order[k])) {
                *why = prefer ? "default order (the preferred quantization is absent or unsupported)" : "default order";
                return (long)i;
            }
    for (size_t i = lo; i < hi; i++)
        if (fs[i].check.status == RLX_CHECK_SUPPORTED) { *why = "the only kind supported"; return (long)i; }
    *why = "no supported file";
    return -1;
}

static void human(char *buf, size_t cap, uint64_t v)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)v;
    int k = 0;
    while (x >= 1024 && k < 4) x /= 1024, k++;
    snprintf(buf, cap, k ? "%.2f %s" : "%.0f %s", x, u[k]);
}

static int print(const file *fs, size_t n, const char *dir, const char *prefer, bool json)
{
    cJSON *root = json ? cJSON_CreateObject() : NULL, *models = NULL;
    if (json) {
        if (!root) return 1;
        cJSON_AddStringToObject(root, "folder", dir);
        if (prefer) cJSON_AddStringToObject(root, "prefer", prefer);
        else cJSON_AddNullToObject(root, "prefer");
        models = cJSON_AddArrayToObject(root, "models");
    }
    for (size_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo + 1; hi < n && !strcmp(fs[hi].model, fs[lo].model);) hi++;
        const char *why;
        long p = pick(fs, lo, hi, prefer, &why);
        if (!json) {
            if (p >= 0) printf("%s: pick %s (%s): %s\n", fs[lo].model, fs[p].quant, why, fs[p].e->path);
            else printf("%s: nothing to pick (%s)\n", fs[lo].model, why);
        }
        cJSON *m = json ? cJSON_CreateObject() : NULL, *files = NULL;
        if (json) {
            cJSON_AddItemToArray(models, m);
            cJSON_AddStringToObject(m, "name", fs[lo].model);
            if (p >= 0) {
                cJSON_AddStringToObject(m, "pick", fs[p].e->path);
                cJSON_AddStringToObject(m, "pick_quant", fs[p].quant);
            } else {
                cJSON_AddNullToObject(m, "pick");
                cJSON_AddNullToObject(m, "pick_quant");
            }
            cJSON_AddStringToObject(m, "pick_reason", why);
            files = cJSON_AddArrayToObject(m, "files");
        }
        for (size_t i = lo; i < hi; i++) {
            const file *f = &fs[i];
            if (!json) {
                char h[32], parts[32] = "";
                human(h, sizeof h, f->bytes);
                if (f->e->n_parts > 1) snprintf(parts, sizeof parts, ", %u parts", f->e->n_parts);
                printf("  %c %-9s %10s  %-18s %s (%s%s)%s%s\n", (long)i == p ? '*' : ' ', f->quant, h,
                       rlx_check_status_name(f->check.status), f->e->name, f->check.arch[0] ? f->check.arch : "?", parts,
                       f->check.reason[0] ? ": " : "", f->check.reason);
                continue;
            }
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToArray(files, o);
            cJSON_AddStringToObject(o, "path", f->e->path);
            cJSON_AddStringToObject(o, "quant", f->quant);
            cJSON_AddNumberToObject(o, "bytes", (double)f->bytes);
            cJSON_AddNumberToObject(o, "parts", f->e->n_parts);
            if (f->check.arch[0]) cJSON_AddStringToObject(o, "architecture", f->check.arch);
            else cJSON_AddNullToObject(o, "architecture");
            cJSON_AddStringToObject(o, "status", rlx_check_status_name(f->check.status));
            if (f->check.reason[0]) cJSON_AddStringToObject(o, "reason", f->check.reason);
            else cJSON_AddNullToObject(o, "reason");
            cJSON_AddBoolToObject(o, "picked", (long)i == p);
        }
    }
    if (json) {
        char *s = cJSON_Print(root);
        cJSON_Delete(root);
        if (!s) return 1;
        puts(s);
        cJSON_free(s);
    }
    return 0;
}

int rlx__cmd_inspect_dir(const char *dir, const char *prefer, bool json)
{
    rlx_model_entry *es;
    size_t n;
    rlx_error err = {0};
    if (rlx_model_scan(dir, &es, &n, &err)) {
        fprintf(stderr, "rlxd inspect: %s\n", err.msg);
        return 1;
    }
    if (!n) {
        fprintf(stderr, "rlxd inspect: %s holds no .gguf files (nor do its subfolders)\n", dir);
        rlx_model_scan_free(es, n);
        return 1;
    }
    file *fs = calloc(n, sizeof *fs);
    if (!fs) {
        rlx_model_scan_free(es, n);
        fprintf(stderr, "rlxd inspect: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        fs[i].e = &es[i];
        model_name(es[i].name, fs[i].model, sizeof fs[i].model);
        describe(&fs[i]);
    }
    qsort(fs, n, sizeof *fs, cmp_file);
    int rc = print(fs, n, dir, prefer, json);
    free(fs);
    rlx_model_scan_free(es, n);
    if (rc || fflush(stdout)) {
        fprintf(stderr, "rlxd inspect: cannot write the output\n");
        return 1;
    }
    return 0;
}
