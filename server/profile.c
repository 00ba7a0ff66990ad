/* profile.c - per-model compile profiles (see profile.h). */
#include "server/profile.h"
#include "models/filemap.h"
#include "backends/dtype.h"
#include "server/toml_flat.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef enum { K_INT, K_FLOAT, K_KVTYPE, K_BACKEND, K_FILE } key_type;

typedef struct key {
    const char *name;
    uint32_t bit;
    key_type type;
    size_t off;
    double lo, hi;
} key;

#define OFF(f) offsetof(rlx_profile, f)
static const key keys[] = {
    {"ctx", RLX_PF_CTX, K_INT, OFF(ctx), 0, 1 << 24},
    {"kv-type", RLX_PF_KV_TYPE, K_KVTYPE, OFF(kv_type), 0, 0},
    {"max-seqs", RLX_PF_MAX_SEQS, K_INT, OFF(max_seqs), 1, 4096},
    {"max-batch-tokens", RLX_PF_MAX_BATCH_TOKENS, K_INT, OFF(max_batch_tokens), 1, 1 << 20},
    {"threads", RLX_PF_THREADS, K_INT, OFF(threads), 0, 1024},
    {"backend", RLX_PF_BACKEND, K_BACKEND, OFF(backend), 0, 0},
    {"chat-template", RLX_PF_CHAT_TEMPLATE, K_FILE, OFF(chat_template), 0, 0},
    {"draft-model", RLX_PF_DRAFT_MODEL, K_FILE, OFF(draft_model), 0, 0},
    {"temperature", RLX_PF_TEMPERATURE, K_FLOAT, OFF(temperature), 0, 2},
    {"top-p", RLX_PF_TOP_P, K_FLOAT, OFF(top_p), 0, 1},
    {"top-k", RLX_PF_TOP_K, K_INT, OFF(top_k), -1, INT32_MAX},
    {"min-p", RLX_PF_MIN_P, K_FLOAT, OFF(min_p), 0, 1},
    {"repeat-penalty", RLX_PF_REPEAT_PENALTY, K_FLOAT, OFF(repeat_penalty), 0.01, 10},
    {"presence-penalty", RLX_PF_PRESENCE_PENALTY, K_FLOAT, OFF(presence_penalty), -2, 2},
    {"frequency-penalty", RLX_PF_FREQUENCY_PENALTY, K_FLOAT, OFF(frequency_penalty), -2, 2},
    {"repeat-last-n", RLX_PF_REPEAT_LAST_N, K_INT, OFF(repeat_last_n), -1, INT32_MAX},
    {"max-tokens", RLX_PF_MAX_TOKENS, K_INT, OFF(max_tokens), 1, INT32_MAX},
};
#define KEY_LIST "ctx, kv-type, max-seqs, max-batch-tokens, threads, backend, chat-template, draft-model, temperature, top-p, " \
                 "top-k, min-p, repeat-penalty, presence-penalty, frequency-penalty, repeat-last-n, max-tokens"

static const key *find_key(const char *name)
{
    char norm[64];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof norm; i++) norm[i] = name[i] == '_' ? '-' : (char)tolower((unsigned char)name[i]);
    norm[i] = 0;
    if (!strcmp(norm, "repetition-penalty")) snprintf(norm, sizeof norm, "repeat-penalty");
    for (size_t k = 0; k < RLX_ARRAY_LEN(keys); k++)
        if (!strcmp(keys[k].name, norm)) return &keys[k];
    return NULL;
}

static void add_source(rlx_profile *p, const char *src)
{
    size_t n = strlen(p->sources);
    if (strstr(p->sources, src)) return;
    snprintf(p->sources + n, sizeof p->sources - n, "%s%s", n ? "; " : "", src);
}

int rlx_profile_set(rlx_profile *p, const char *name, const char *v, const char *src, const char *base_dir,
                    rlx_error *err)
{
    const key *k = find_key(name);
    if (!k) return rlx_errorf(err, RLX_EINVAL, "%s: unknown key '%s' in a model profile (" KEY_LIST ")", src, name);
    char *base = (char *)p + k->off;
    switch (k->type) {
    case K_INT: {
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || x < (long long)k->lo || x > (long long)k->hi)
            return rlx_errorf(err, RLX_EINVAL, "%s: '%s' must be an integer between %.0f and %.0f, got '%s'", src, k->name,
                              k->lo, k->hi, v);
        if (k->bit == RLX_PF_TOP_K && x < 0) x = 0; /* -1 as the API: off */
        *(int32_t *)base = (int32_t)x;
        break;
    }
    case K_FLOAT: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x) || x < k->lo || x > k->hi)
            return rlx_errorf(err, RLX_EINVAL, "%s: '%s' must be a number between %g and %g, got '%s'", src, k->name,
                              k->lo, k->hi, v);
        *(float *)base = (float)x;
        break;
    }
    case K_KVTYPE:
        if (strcmp(v, "f16") && strcmp(v, "f32") && strcmp(v, "q8_0"))
            return rlx_errorf(err, RLX_EINVAL, "%s: 'kv-type' must be f16, f32 or q8_0, got '%s'", src, v);
        *(int *)base = !strcmp(v, "f16") ? RLX_F16 : !strcmp(v, "f32") ? RLX_F32 : RLX_Q8_0;
        break;
    case K_BACKEND:
        if (strcmp(v, "cpu") && strcmp(v, "vulkan") && strcmp(v, "cuda"))
            return rlx_errorf(err, RLX_EINVAL, "%s: 'backend' must be cpu, vulkan or cuda, got '%s'", src, v);
        /* fall through */
    case K_FILE: {
        char path[4096];
        if (k->type == K_FILE && !v[0])
            return rlx_errorf(err, RLX_EINVAL, "%s: '%s' needs a file name", src, k->name);
        if (k->type == K_FILE && v[0] != '/' && base_dir && base_dir[0])
            snprintf(path, sizeof path, "%s/%s", base_dir, v);
        else
            snprintf(path, sizeof path, "%s", v);
        struct stat st;
        if (k->type == K_FILE && (stat(path, &st) || !S_ISREG(st.st_mode)))
            return rlx_errorf(err, RLX_EINVAL, "%s: '%s' names %s, which is not a readable file", src, k->name, path);
        char *dup = strdup(path);
        if (!dup) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
        free(*(char **)base);
        *(char **)base = dup;
        break;
    }
    }
    p->set |= k->bit;
    /* the file, not the line: the sources say where the profile came from */
    char file[sizeof p->sources];
    snprintf(file, sizeof file, "%s", src);
    char *colon = strrchr(file, ':');
    if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)) *colon = 0;
    add_source(p, file);
    return 0;
}

void rlx_profile_file_for(const char *model_path, const char *ext, char *buf, size_t cap)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", model_path);
    size_t n = strlen(tmp);
    if (n > 5 && !strcmp(tmp + n - 5, ".gguf")) tmp[n -= 5] = 0;
    /* split parts: NAME-00001-of-00003 -> NAME */
    if (n > 15) {
        const char *t = tmp + n - 15;
        unsigned a, b;
        char c;
        if (t[0] == '-' && sscanf(t, "-%5u-of-%5u%c", &a, &b, &c) == 2 && strspn(t + 1, "0123456789") == 5)
            tmp[n - 15] = 0;
    }
    snprintf(buf, cap, "%s%s", tmp, ext);
}

typedef struct file_ctx {
    FILE *f;
    int line;
    const char *path;
    char dir[4096];
    rlx_profile *p;
    rlx_error *err;
    int rc;
} file_ctx;

static char *reader(char *str, int num, void *stream)
{
    file_ctx *x = stream;
    char *r = fgets(str, num, x->f);
    if (r) {
        size_t n = strlen(r);
        if (n && r[n - 1] == '\n') x->line++;
        else if (feof(x->f)) x->line++;
        else if (!x->rc) { /* past inih's line buffer: the rest would read as a line of its own */
            x->rc = rlx_errorf(x->err, RLX_EINVAL, "%s:%d: a line longer than %d bytes (the INI reader's limit)", x->path,
                               x->line + 1, num - 2);
            return NULL;
        }
    }
    return r;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    file_ctx *x = user;
    if (x->rc) return 1;
    char src[4200];
    snprintf(src, sizeof src, "%s:%d", x->path, x->line);
    if (section[0] && strcmp(section, "profile")) {
        x->rc = rlx_errorf(x->err, RLX_EINVAL, "%s: unknown section [%s] (keys go at the top or in [profile])", src,
                           section);
        return 1;
    }
    x->rc = rlx_profile_set(x->p, name, value, src, x->dir, x->err);
    return 1;
}

/* A key of a .rlx.toml file: TOML's types are checked against the key's (a number for the
 * numeric keys, a string for the others), then the value goes through rlx_profile_set. */
static int on_toml_key(void *user, const char *table, const char *name, rlx_toml_kind kind, const char *value,
                       const char *src, rlx_error *err)
{
    file_ctx *x = user;
    if (table[0] && strcmp(table, "profile"))
        return rlx_errorf(err, RLX_EINVAL, "%s: unknown table [%s] (keys go at the top or in [profile])", src, table);
    const key *k = find_key(name);
    if (k && (x->p->set & k->bit)) /* another spelling of a key given above (max_tokens, "max-tokens") */
        return rlx_errorf(err, RLX_EINVAL, "%s: '%s' is given twice", src, k->name);
    if (k) {
        bool number = k->type == K_INT || k->type == K_FLOAT;
        bool fits = number ? kind == RLX_TOML_INT || (kind == RLX_TOML_FLOAT && k->type == K_FLOAT)
                           : kind == RLX_TOML_STRING;
        if (!fits)
            return rlx_errorf(err, RLX_EINVAL, "%s: '%s' takes %s, not %s (%s)", src, k->name,
                              k->type == K_INT ? "an integer" : k->type == K_FLOAT ? "a number" : "a string in quotes",
                              rlx_toml_kind_name(kind), value);
    }
    return rlx_profile_set(x->p, name, value, src, x->dir, err);
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

int rlx_profile_load_file(rlx_profile *p, const char *path, rlx_error *err)
{
    /* read on the loop thread at a rescan: a FIFO or /dev/zero named like a profile must not
       hold it (a wait in open, an endless read) */
    FILE *f = NULL;
    rlx_error oe = {0};
    int orc = rlx__fopen_regular(path, 1 << 20, &f, &oe);
    if (orc == RLX_ENOTFOUND) return RLX_ENOTFOUND;
    if (orc) return rlx_errorf(err, RLX_EIO, "%s (a model profile)", oe.msg);
    file_ctx x = {.f = f, .path = path, .err = err};
    snprintf(x.dir, sizeof x.dir, "%s", path);
    char *slash = strrchr(x.dir, '/');
    if (slash) *slash = 0;
    else snprintf(x.dir, sizeof x.dir, ".");
    rlx_profile tmp = {0};
    x.p = &tmp;
    int rc;
    if (ends_with(path, ".toml")) {
        rc = rlx_toml_flat_read(f, path, on_toml_key, &x, err);
        fclose(f);
    } else {
        int line = ini_parse_stream(reader, &x, on_key, &x);
        fclose(f);
        rc = x.rc;
        if (!rc && line > 0)
            rc = rlx_errorf(err, RLX_EINVAL, "%s:%d: syntax error (KEY = VALUE or [profile])", path, line);
        else if (!rc && line < 0) rc = rlx_errorf(err, RLX_ENOMEM, "%s: out of memory reading the profile", path);
    }
    if (!rc) rc = rlx_profile_merge(p, &tmp, err);
    rlx_profile_free(&tmp);
    return rc;
}

int rlx_profile_load_beside(rlx_profile *p, const char *model_path, rlx_error *err)
{
    char toml[4200], ini[4200];
    rlx_profile_file_for(model_path, ".rlx.toml", toml, sizeof toml);
    rlx_profile_file_for(model_path, ".rlx.ini", ini, sizeof ini);
    struct stat st;
    bool has_toml = !stat(toml, &st), has_ini = !stat(ini, &st);
    if (has_toml && has_ini)
        return rlx_errorf(err, RLX_EINVAL, "both %s and %s exist: a model takes one profile file, remove the other",
                          toml, ini);
    return rlx_profile_load_file(p, has_ini ? ini : toml, err);
}

static int copy_str(char **dst, const char *src, rlx_error *err)
{
    char *d = strdup(src);
    if (!d) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    free(*dst);
    *dst = d;
    return 0;
}

int rlx_profile_merge(rlx_profile *dst, const rlx_profile *o, rlx_error *err)
{
    for (size_t k = 0; k < RLX_ARRAY_LEN(keys); k++) {
        const key *ky = &keys[k];
        if (!(o->set & ky->bit)) continue;
        const char *from = (const char *)o + ky->off;
        char *to = (char *)dst + ky->off;
        switch (ky->type) {
        case K_INT: *(int32_t *)to = *(const int32_t *)from; break;
        case K_FLOAT: *(float *)to = *(const float *)from; break;
        case K_KVTYPE: *(int *)to = *(const int *)from; break;
        case K_BACKEND: case K_FILE:
            if (copy_str((char **)to, *(char *const *)from, err)) return RLX_ENOMEM;
            break;
        }
        dst->set |= ky->bit;
    }
    if (o->sources[0]) {
        char tmp[sizeof o->sources];
        snprintf(tmp, sizeof tmp, "%s", o->sources);
        char *save = NULL;
        for (char *t = strtok_r(tmp, ";", &save); t; t = strtok_r(NULL, ";", &save)) add_source(dst, t + (*t == ' '));
    }
    return 0;
}

void rlx_profile_apply_worker(const rlx_profile *p, rlx_worker_config *wc)
{
    if (p->set & RLX_PF_CTX) wc->n_ctx = p->ctx;
    if (p->set & RLX_PF_KV_TYPE) wc->kv_type = p->kv_type, wc->kv_type_set = true;
    if (p->set & RLX_PF_MAX_SEQS) wc->max_seqs = p->max_seqs;
    if (p->set & RLX_PF_MAX_BATCH_TOKENS) wc->max_batch_tokens = p->max_batch_tokens;
    if (p->set & RLX_PF_THREADS) wc->n_threads = p->threads;
    if (p->set & RLX_PF_BACKEND) wc->backend = p->backend;
    if (p->set & RLX_PF_CHAT_TEMPLATE) wc->chat_template_file = p->chat_template;
    if (p->set & RLX_PF_DRAFT_MODEL) wc->draft_model = p->draft_model;
}

void rlx_profile_apply_request(const rlx_profile *p, rlx_api_request *r)
{
    if (!r->base) return;
    rlx_sampling_params *s = &r->base->sampling;
    uint32_t g = r->given, set = p->set;
#define DEF(pf, gv, stmt) if ((set & (pf)) && !(g & (gv))) { stmt; }
    DEF(RLX_PF_TEMPERATURE, RLX_API_GIVEN_TEMPERATURE, s->temperature = p->temperature)
    DEF(RLX_PF_TOP_P, RLX_API_GIVEN_TOP_P, s->top_p = p->top_p)
    DEF(RLX_PF_TOP_K, RLX_API_GIVEN_TOP_K, s->top_k = p->top_k)
    DEF(RLX_PF_MIN_P, RLX_API_GIVEN_MIN_P, s->min_p = p->min_p)
    DEF(RLX_PF_REPEAT_PENALTY, RLX_API_GIVEN_REPEAT_PENALTY, s->repetition_penalty = p->repeat_penalty)
    DEF(RLX_PF_PRESENCE_PENALTY, RLX_API_GIVEN_PRESENCE_PENALTY, s->presence_penalty = p->presence_penalty)
    DEF(RLX_PF_FREQUENCY_PENALTY, RLX_API_GIVEN_FREQUENCY_PENALTY, s->frequency_penalty = p->frequency_penalty)
    DEF(RLX_PF_REPEAT_LAST_N, RLX_API_GIVEN_REPEAT_LAST_N, s->penalty_last_n = p->repeat_last_n)
    DEF(RLX_PF_MAX_TOKENS, RLX_API_GIVEN_MAX_TOKENS, r->base->max_tokens = p->max_tokens)
#undef DEF
}

cJSON *rlx_profile_json(const rlx_profile *p)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    for (size_t k = 0; k < RLX_ARRAY_LEN(keys); k++) {
        const key *ky = &keys[k];
        if (!(p->set & ky->bit)) continue;
        const char *v = (const char *)p + ky->off;
        switch (ky->type) {
        case K_INT: cJSON_AddNumberToObject(o, ky->name, *(const int32_t *)v); break;
        case K_FLOAT: { /* the value as written (0.7, not 0.699999988) */
            char num[32];
            snprintf(num, sizeof num, "%.6g", (double)*(const float *)v);
            cJSON_AddNumberToObject(o, ky->name, strtod(num, NULL));
            break;
        }
        case K_KVTYPE: cJSON_AddStringToObject(o, ky->name, rlx_dtype_get(*(const int *)v)->name); break;
        case K_BACKEND: case K_FILE: cJSON_AddStringToObject(o, ky->name, *(char *const *)v); break;
        }
    }
    if (p->sources[0]) cJSON_AddStringToObject(o, "sources", p->sources);
    return o;
}

void rlx_profile_free(rlx_profile *p)
{
    free(p->backend);
    free(p->chat_template);
    free(p->draft_model);
    memset(p, 0, sizeof *p);
}
