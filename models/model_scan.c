/* model_scan.c - a folder's GGUF models (one level of subfolders, split parts grouped) and the
 * quantization names llama.cpp gives them. */
#include "models/model_files.h"
#include "models/safetensors.h"
#include "backends/dtype.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* llama.cpp's llama_ftype values (general.file_type) and the names its tools print. */
static const struct { uint32_t id; const char *name; } ftypes[] = {
    {0, "F32"},     {1, "F16"},      {2, "Q4_0"},     {3, "Q4_1"},    {7, "Q8_0"},    {8, "Q5_0"},
    {9, "Q5_1"},    {10, "Q2_K"},    {11, "Q3_K_S"},  {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"},
    {15, "Q4_K_M"}, {16, "Q5_K_S"},  {17, "Q5_K_M"},  {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},
    {21, "Q2_K_S"}, {22, "IQ3_XS"},  {23, "IQ3_XXS"}, {24, "IQ1_S"},  {25, "IQ4_NL"}, {26, "IQ3_S"},
    {27, "IQ3_M"},  {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"}, {31, "IQ1_M"},  {32, "BF16"},
    {36, "TQ1_0"},  {37, "TQ2_0"},   {38, "MXFP4_MOE"},
};

const char *rlx_ftype_name(uint32_t ftype)
{
    for (size_t i = 0; i < RLX_ARRAY_LEN(ftypes); i++)
        if (ftypes[i].id == ftype) return ftypes[i].name;
    return NULL;
}

void rlx_model_quant(const rlx_gguf *g, char *buf, size_t cap)
{
    uint32_t ft;
    const char *name;
    if (rlx_gguf_get_u32(g, "general.file_type", &ft, NULL) == 0 && (name = rlx_ftype_name(ft))) {
        snprintf(buf, cap, "%s", name);
        return;
    }
    /* bytes per tensor type among matrices; the largest share names the file */
    uint64_t bytes[64] = {0};
    int best = -1;
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        if (t->ne[1] > 1 && t->type >= 0 && t->type < 64) bytes[t->type] += t->size;
    }
    for (int t = 0; t < 64; t++)
        if (bytes[t] && (best < 0 || bytes[t] > bytes[best])) best = t;
    const rlx_dtype_info *di = best >= 0 ? rlx_dtype_get(best) : NULL;
    size_t k = 0;
    for (const char *p = di ? di->name : "unknown"; *p && k + 1 < cap; p++) buf[k++] = (char)toupper((unsigned char)*p);
    if (cap) buf[k] = 0;
}

/* ---- folders ---- */

typedef struct item {
    char *path, *name;       /* name: relative, without .gguf and the split suffix */
    uint32_t no, count;      /* 1-based part number and count; 0 / 0 for a plain file */
} item;

typedef struct list { item *v; size_t n, cap; } list;

static int add(list *l, const char *dir, const char *sub, const char *file)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        item *v = realloc(l->v, cap * sizeof *v);
        if (!v) return RLX_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    item *it = &l->v[l->n];
    memset(it, 0, sizeof *it);
    size_t plen = strlen(dir) + (sub ? strlen(sub) + 1 : 0) + strlen(file) + 2;
    it->path = malloc(plen);
    it->name = malloc(plen);
    if (!it->path || !it->name) { free(it->path); free(it->name); return RLX_ENOMEM; }
    snprintf(it->path, plen, "%s/%s%s%s", dir, sub ? sub : "", sub && *file ? "/" : "", file);
    char *rel = it->path + strlen(dir) + 1; /* relative to dir */
    if (!*file) { /* a Hugging Face folder: one model named after it */
        snprintf(it->name, plen, "%s", rel);
        it->no = it->count = 0;
    } else if (!rlx_gguf_split_parse_name(rel, it->name, plen, &it->no, &it->count)) {
        snprintf(it->name, plen, "%s", rel);
        it->name[strlen(it->name) - 5] = 0; /* ".gguf" */
        it->no = it->count = 0;
    }
    l->n++;
    return 0;
}

static bool is_gguf(const char *name)
{
    size_t n = strlen(name);
    return n > 5 && !strcasecmp(name + n - 5, ".gguf"); /* Model-Q8_0.GGUF too, as pull writes it */
}

/* The *.gguf regular files of dir/sub (sub NULL: dir itself, recursing once into folders). */
static int walk(list *l, const char *dir, const char *sub, rlx_error *err)
{
    char path[4096];
    int k = snprintf(path, sizeof path, "%s%s%s", dir, sub ? "/" : "", sub ? sub : "");
    DIR *d = k < 0 || (size_t)k >= sizeof path ? NULL : opendir(path);
    if (!d) {
        if (sub) return 0; /* an unreadable subfolder holds no models we can serve */
        return rlx_errorf(err, RLX_EIO, "%s: cannot read the folder: %s", path, strerror(errno));
    }
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char full[4096];
        int k = snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        struct stat st;
        if (k < 0 || (size_t)k >= sizeof full || stat(full, &st)) continue; /* too long, or a dangling link */
        if (S_ISDIR(st.st_mode) && !sub && rlx_st_is_folder(full)) {
            if ((rc = add(l, dir, e->d_name, ""))) rlx_errorf(err, rc, "out of memory listing %s", path);
        } else if (S_ISDIR(st.st_mode) && !sub) rc = walk(l, dir, e->d_name, err);
        else if (S_ISREG(st.st_mode) && is_gguf(e->d_name) && (rc = add(l, dir, sub, e->d_name)))
            rlx_errorf(err, rc, "out of memory listing %s", path);
    }
    closedir(d);
    return rc;
}

static int cmp_item(const void *a, const void *b)
{
    const item *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    if (x->count != y->count) return x->count < y->count ? -1 : 1;
    if (x->no != y->no) return x->no < y->no ? -1 : 1;
    return strcmp(x->path, y->path);
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const rlx_model_entry *)a)->name, ((const rlx_model_entry *)b)->name);
}

/* Entries that share a name (m.gguf beside m-00001-of-00002.gguf, two split sets of different
 * counts, a folder m beside m.gguf): the first complete one keeps it, so a broken set never
 * hides a good model; each other one is named by its path relative to dir (its first part's
 * file name with .gguf, a folder's name with '/'), listed rather than hidden. */
static int unshadow(rlx_model_entry *es, size_t ne, const char *dir)
{
    size_t dl = strlen(dir) + 1;
    for (size_t i = 0; i < ne;) {
        size_t j = i + 1;
        while (j < ne && !strcmp(es[j].name, es[i].name)) j++;
        size_t keep = i;
        while (keep < j && es[keep].n_present != es[keep].n_parts) keep++;
        if (keep == j) keep = i;
        for (size_t k = i; k < j; k++) {
            if (k == keep) continue;
            struct stat st;
            bool folder = !stat(es[k].path, &st) && S_ISDIR(st.st_mode);
            size_t n = strlen(es[k].path + dl) + 2;
            char *nm = malloc(n);
            if (!nm) return RLX_ENOMEM;
            snprintf(nm, n, "%s%s", es[k].path + dl, folder ? "/" : "");
            free(es[k].name);
            es[k].name = nm;
        }
        i = j;
    }
    if (ne > 1) qsort(es, ne, sizeof *es, cmp_entry); /* es is NULL for an empty folder */
    return 0;
}

void rlx_model_scan_free(rlx_model_entry *e, size_t n)
{
    for (size_t i = 0; e && i < n; i++) {
        free(e[i].name);
        free(e[i].path);
    }
    free(e);
}

int rlx_model_scan(const char *dir, rlx_model_entry **out, size_t *n, rlx_error *err)
{
    *out = NULL;
    *n = 0;
    list l = {0};
    int rc = walk(&l, dir, NULL, err);
    rlx_model_entry *es = NULL;
    size_t ne = 0;
    if (!rc && l.n) {
        qsort(l.v, l.n, sizeof *l.v, cmp_item);
        es = calloc(l.n, sizeof *es);
        if (!es) rc = rlx_errorf(err, RLX_ENOMEM, "out of memory listing %s", dir);
    }
    for (size_t i = 0; !rc && i < l.n; i++) {
        const item *it = &l.v[i];
        if (i && it->count && l.v[i - 1].count == it->count && !strcmp(l.v[i - 1].name, it->name)) {
            es[ne - 1].n_present++;
            continue;
        }
        es[ne] = (rlx_model_entry){.name = strdup(it->name), .path = strdup(it->path),
                                   .n_parts = it->count ? it->count : 1, .n_present = 1};
        if (!es[ne].name || !es[ne].path) rc = rlx_errorf(err, RLX_ENOMEM, "out of memory listing %s", dir);
        ne++;
    }
    for (size_t i = 0; i < l.n; i++) {
        free(l.v[i].path);
        free(l.v[i].name);
    }
    free(l.v);
    if (!rc && unshadow(es, ne, dir)) rc = rlx_errorf(err, RLX_ENOMEM, "out of memory listing %s", dir);
    if (rc) {
        rlx_model_scan_free(es, ne);
        return rc;
    }
    *out = es;
    *n = ne;
    return 0;
}
