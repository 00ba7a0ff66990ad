/* hf.c - Hugging Face references, URLs and file picking (see hf.h). */
#include "server/hf.h"
#include "models/gguf.h"
#include "server/cli.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HF_ID_MAX 96

bool rlx_hf_is_ref(const char *s) { return s && !strncmp(s, "hf:", 3); }

/* One OWNER or REPO id of n bytes at p. */
static bool id_ok(const char *p, size_t n)
{
    if (!n || n > HF_ID_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.'))
            return false;
        if (i && (c == '-' || c == '.') && p[i - 1] == c) return false; /* "--", ".." */
    }
    return p[0] != '-' && p[0] != '.' && p[n - 1] != '-' && p[n - 1] != '.';
}

static bool ends_gguf(const char *s, size_t n) { return n > 5 && !strncasecmp(s + n - 5, ".gguf", 5); }

static bool path_ok(const char *p, size_t n)
{
    if (!n || p[0] == '/' || p[n - 1] == '/') return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x20 || c == 0x7f || c == '\\' || c == ':') return false;
        if (c == '/' && p[i + 1] == '/') return false;
    }
    /* no "." or ".." segment */
    for (const char *seg = p; seg < p + n;) {
        const char *e = memchr(seg, '/', (size_t)(p + n - seg));
        size_t k = e ? (size_t)(e - seg) : (size_t)(p + n - seg);
        if ((k == 1 && seg[0] == '.') || (k == 2 && seg[0] == '.' && seg[1] == '.')) return false;
        seg += k + 1;
    }
    return true;
}

static bool tag_ok(const char *t)
{
    size_t n = strlen(t);
    if (!n || n >= 48) return false;
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.'))
            return false;
    }
    return true;
}

int rlx_hf_ref_parse(const char *s, bool allow_name, rlx_hf_ref *r, rlx_error *err)
{
    memset(r, 0, sizeof *r);
    if (!rlx_hf_is_ref(s))
        return rlx_errorf(err, RLX_EINVAL, "'%s' is not a Hugging Face reference (hf:OWNER/REPO[:QUANT] or "
                          "hf:OWNER/REPO/FILE.gguf)", s);
    const char *p = s + 3;
    const char *slash = strchr(p, '/');
    if (!slash || !id_ok(p, (size_t)(slash - p)))
        return rlx_errorf(err, RLX_EINVAL, "'%s': the owner must be a Hugging Face id (letters, digits, '-', '_', "
                          "'.'), followed by /REPO", s);
    const char *repo = slash + 1;
    size_t rn = strcspn(repo, "/:");
    if (!id_ok(repo, rn))
        return rlx_errorf(err, RLX_EINVAL, "'%s': the repository name must be a Hugging Face id (letters, digits, "
                          "'-', '_', '.', at most %d, no '--' or '..')", s, HF_ID_MAX);
    snprintf(r->repo, sizeof r->repo, "%.*s", (int)(repo + rn - p), p);
    const char *rest = repo + rn;
    if (*rest == '/') {
        rest++;
        size_t fn = strcspn(rest, ":");
        if (!path_ok(rest, fn) || !ends_gguf(rest, fn) || fn >= sizeof r->file)
            return rlx_errorf(err, RLX_EINVAL, "'%s': the file must be a path inside the repository ending in .gguf "
                              "(no '..', '//' or '\\')", s);
        snprintf(r->file, sizeof r->file, "%.*s", (int)fn, rest);
        rest += fn;
        if (*rest == ':') {
            if (!allow_name || !rest[1])
                return rlx_errorf(err, RLX_EINVAL, "'%s': nothing may follow the file name%s", s,
                                  allow_name ? " but :NAME" : "");
            snprintf(r->name, sizeof r->name, "%s", rest + 1);
        }
        return 0;
    }
    if (!*rest) return 0;
    /* ':' TAG [':' NAME] */
    char tag[64];
    const char *t = rest + 1;
    size_t tn = strcspn(t, ":");
    snprintf(tag, sizeof tag, "%.*s", (int)(tn < sizeof tag - 1 ? tn : sizeof tag - 1), t);
    const char *after = t + tn;
    const char *canon = NULL;
    bool known = rlx__quant_known(tag, &canon);
    if (*after == ':') {
        if (!allow_name) return rlx_errorf(err, RLX_EINVAL, "'%s': one :QUANT at most after the repository", s);
        if (!after[1]) return rlx_errorf(err, RLX_EINVAL, "'%s': an empty :NAME", s);
        snprintf(r->name, sizeof r->name, "%s", after + 1);
    } else if (allow_name && !known) {
        if (!tn) return rlx_errorf(err, RLX_EINVAL, "'%s': an empty :NAME", s);
        snprintf(r->name, sizeof r->name, "%.*s", (int)tn, t);
        return 0;
    }
    if (tn >= sizeof tag || !tag_ok(tag))
        return rlx_errorf(err, RLX_EINVAL, "'%s': '%.*s' is not a quantization tag (e.g. Q4_K_M, Q8_0, F16)", s,
                          (int)tn, t);
    snprintf(r->quant, sizeof r->quant, "%.47s", known ? canon : tag); /* tag_ok: under 48 */
    return 0;
}

void rlx_hf_ref_default_name(const rlx_hf_ref *r, char *buf, size_t cap)
{
    if (r->file[0]) {
        size_t n = strlen(r->file);
        snprintf(buf, cap, "%s/%.*s", r->repo, (int)(n - 5), r->file);
    } else if (r->quant[0]) {
        snprintf(buf, cap, "%s:%s", r->repo, r->quant);
    } else {
        snprintf(buf, cap, "%s", r->repo);
    }
}

static int base_url(char *buf, size_t cap, const char *endpoint)
{
    size_t n = strlen(endpoint);
    while (n && endpoint[n - 1] == '/') n--;
    int k = snprintf(buf, cap, "%.*s", (int)n, endpoint);
    return k < 0 || (size_t)k >= cap ? RLX_ERANGE : k;
}

int rlx_hf_file_url(char *buf, size_t cap, const char *endpoint, const char *repo, const char *file)
{
    int k = base_url(buf, cap, endpoint);
    if (k < 0) return k;
    size_t n = (size_t)k;
    int w = snprintf(buf + n, cap - n, "/%s/resolve/main/", repo);
    if (w < 0 || (size_t)w >= cap - n) return RLX_ERANGE;
    n += (size_t)w;
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)file; *p; p++) {
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                     strchr("._~/-", *p);
        if (n + (plain ? 1 : 3) >= cap) return RLX_ERANGE;
        if (plain) {
            buf[n++] = (char)*p;
        } else {
            buf[n++] = '%';
            buf[n++] = hex[*p >> 4];
            buf[n++] = hex[*p & 15];
        }
    }
    buf[n] = 0;
    return 0;
}

int rlx_hf_api_url(char *buf, size_t cap, const char *endpoint, const char *repo)
{
    int k = base_url(buf, cap, endpoint);
    if (k < 0) return k;
    int w = snprintf(buf + k, cap - (size_t)k, "/api/models/%s", repo);
    return w < 0 || (size_t)w >= cap - (size_t)k ? RLX_ERANGE : 0;
}

int rlx_hf_local_dir(char *buf, size_t cap, const char *root, const char *repo)
{
    const char *slash = strchr(repo, '/');
    if (!slash) return RLX_EINVAL;
    int k = snprintf(buf, cap, "%s/%.*s--%s", root, (int)(slash - repo), repo, slash + 1);
    return k < 0 || (size_t)k >= cap ? RLX_ERANGE : 0;
}

int rlx_hf_local_name(char *buf, size_t cap, const char *path)
{
    size_t n = 0;
    for (const char *p = path; *p; p++) {
        const char *e = *p == '%' ? "%25" : *p == '/' ? "%2F" : NULL;
        size_t k = e ? 3 : 1;
        if (n + k >= cap || n + k > RLX_HF_LOCAL_NAME_MAX) return RLX_ERANGE;
        memcpy(buf + n, e ? e : p, k);
        n += k;
    }
    if (!cap) return RLX_ERANGE;
    buf[n] = 0;
    return 0;
}

bool rlx_hf_local_path(const char *name, char *buf, size_t cap)
{
    size_t n = 0;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (c == '%') {
            /* only what rlx_hf_local_name writes, so that the mapping stays one to one */
            if (!strncmp(p, "%2F", 3)) c = '/';
            else if (!strncmp(p, "%25", 3)) c = '%';
            else return false;
            p += 2;
        }
        if (n + 1 >= cap) return false;
        buf[n++] = c;
    }
    if (!cap) return false;
    buf[n] = 0;
    return path_ok(buf, n);
}

/* The name without its directory, ".gguf" and a split suffix: the part a tag is looked for in. */
static void stem(const char *name, char *out, size_t cap)
{
    const char *b = strrchr(name, '/');
    b = b ? b + 1 : name;
    char prefix[512];
    if (rlx_gguf_split_parse_name(b, prefix, sizeof prefix, NULL, NULL)) {
        snprintf(out, cap, "%s", prefix);
        return;
    }
    size_t n = strlen(b);
    if (ends_gguf(b, n)) n -= 5;
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), b);
}

bool rlx_hf_name_has_quant(const char *name, const char *tag)
{
    size_t tn = strlen(tag);
    if (!tn) return false;
    /* the folder counts too: "Q4_K_M/model-00001-of-00002.gguf" */
    char s[1024];
    const char *b = strrchr(name, '/');
    if (b) {
        snprintf(s, sizeof s, "%.*s/", (int)(b - name), name);
        size_t k = strlen(s);
        stem(name, s + k, sizeof s - k);
    } else {
        stem(name, s, sizeof s);
    }
    size_t n = strlen(s);
    for (size_t i = 0; i + tn <= n; i++) {
        if (strncasecmp(s + i, tag, tn)) continue;
        bool before = !i || strchr("/-._", s[i - 1]);
        char a = s[i + tn];
        bool after = !a || a == '-' || a == '.' || a == '/';
        if (before && after) return true;
    }
    return false;
}

void rlx_hf_files_free(char **files, size_t n)
{
    for (size_t i = 0; files && i < n; i++) free(files[i]);
    free(files);
}

static bool listed(const char *const *names, size_t n, const char *f)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], f)) return true;
    return false;
}

/* A model candidate: a .gguf that is not a projector and, when split, its part 1. */
static bool candidate(const char *name)
{
    size_t n = strlen(name);
    if (!ends_gguf(name, n)) return false;
    const char *b = strrchr(name, '/');
    b = b ? b + 1 : name;
    if (!strncasecmp(b, "mmproj", 6)) return false;
    uint32_t no = 1;
    if (rlx_gguf_split_parse_name(b, NULL, 0, &no, NULL) && no != 1) return false;
    return true;
}

/* Appends sep and s to the text in buf when both fit; a name over 120 bytes is shortened (with
 * "...") so that one long name does not crowd out the others. */
static void append(char *buf, size_t cap, const char *sep, const char *s)
{
    size_t k = strlen(buf), a = strlen(sep), b = strlen(s);
    bool cut = b > 120;
    if (cut) b = 120;
    if (k + a + b + (cut ? 3 : 0) >= cap) return;
    memcpy(buf + k, sep, a);
    memcpy(buf + k + a, s, b);
    memcpy(buf + k + a + b, cut ? "..." : "", cut ? 4 : 1);
}

/* The files of the model whose (part 1) path is first: every part of a split one. */
static int expand(const char *const *names, size_t n_names, const char *first, bool need_listed, char ***files,
                  size_t *n, rlx_error *err)
{
    const char *b = strrchr(first, '/');
    size_t dir = b ? (size_t)(b + 1 - first) : 0;
    char prefix[512];
    uint32_t no = 1, count = 1;
    bool split = rlx_gguf_split_parse_name(first + dir, prefix, sizeof prefix, &no, &count);
    if (!split) count = 1;
    char **out = calloc(count, sizeof *out);
    if (!out) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    char missing[400] = "";
    size_t nmiss = 0;
    for (uint32_t i = 0; i < count; i++) {
        char part[1024], bn[600];
        if (split) {
            int k = -1;
            if (!rlx_gguf_split_name(bn, sizeof bn, prefix, i, count))
                k = snprintf(part, sizeof part, "%.*s%s", (int)dir, first, bn);
            if (k < 0 || (size_t)k >= sizeof part) {
                rlx_hf_files_free(out, i);
                return rlx_errorf(err, RLX_EINVAL, "%.200s...: a split part's name is too long", first);
            }
        }
        /* not split: the name as listed, whatever its length (a copy cut short is not listed) */
        const char *name = split ? part : first;
        if (need_listed && !listed(names, n_names, name)) {
            append(missing, sizeof missing, nmiss ? ", " : "", name);
            nmiss++;
        }
        if (!(out[i] = strdup(name))) {
            rlx_hf_files_free(out, i);
            return rlx_errorf(err, RLX_ENOMEM, "out of memory");
        }
    }
    if (nmiss) {
        rlx_hf_files_free(out, count);
        return rlx_errorf(err, RLX_ENOTFOUND, "%.200s is part 1 of %u, but %zu part(s) are missing: %s", first,
                          count, nmiss, missing);
    }
    *files = out;
    *n = count;
    return 0;
}

static void list_candidates(const char *const *names, size_t n, char *buf, size_t cap)
{
    buf[0] = 0;
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        if (!candidate(names[i])) continue;
        if (shown == 12) {
            append(buf, cap, "", ", ...");
            return;
        }
        append(buf, cap, shown ? ", " : "", names[i]);
        shown++;
    }
    if (!shown) snprintf(buf, cap, "none");
}

int rlx_hf_pick(const char *const *names, size_t n_names, const rlx_hf_ref *r, char ***files, size_t *n,
                rlx_error *err)
{
    *files = NULL;
    *n = 0;
    char have[700];
    if (r->file[0]) {
        const char *b = strrchr(r->file, '/');
        b = b ? b + 1 : r->file;
        uint32_t no = 1, count = 1;
        char prefix[512];
        if (rlx_gguf_split_parse_name(b, prefix, sizeof prefix, &no, &count) && no != 1) {
            /* any part names the model: start from part 1 */
            char first[1024], bn[600];
            if (rlx_gguf_split_name(bn, sizeof bn, prefix, 0, count))
                return rlx_errorf(err, RLX_EINVAL, "%.200s: a split part's name is too long", r->file);
            snprintf(first, sizeof first, "%.*s%s", (int)(b - r->file), r->file, bn);
            return expand(names, n_names, first, names != NULL, files, n, err);
        }
        if (names && !listed(names, n_names, r->file)) {
            list_candidates(names, n_names, have, sizeof have);
            return rlx_errorf(err, RLX_ENOTFOUND, "%s has no file %.200s (GGUF files: %s)", r->repo, r->file, have);
        }
        return expand(names, n_names, r->file, names != NULL, files, n, err);
    }
    const char *tags[32];
    size_t nt = 0;
    if (r->quant[0]) {
        tags[nt++] = r->quant;
    } else {
        for (size_t k = 0; rlx__quant_order[k] && nt < 31; k++) tags[nt++] = rlx__quant_order[k];
    }
    for (size_t t = 0; t < nt; t++) {
        const char *hit = NULL, *other = NULL;
        for (size_t i = 0; i < n_names; i++) {
            if (!candidate(names[i]) || !rlx_hf_name_has_quant(names[i], tags[t])) continue;
            if (!hit) hit = names[i];
            else if (!other) other = names[i];
        }
        if (other)
            return rlx_errorf(err, RLX_EINVAL, "%s: several files are %s: %.200s and %.200s; name one with "
                              "hf:%s/FILE.gguf", r->repo, tags[t], hit, other, r->repo);
        if (hit) return expand(names, n_names, hit, true, files, n, err);
    }
    list_candidates(names, n_names, have, sizeof have);
    if (r->quant[0])
        return rlx_errorf(err, RLX_ENOTFOUND, "%s has no %s file (GGUF files: %s)", r->repo, r->quant, have);
    /* no known quantization in any name: the only model, if there is one */
    const char *only = NULL;
    size_t nc = 0;
    for (size_t i = 0; i < n_names; i++)
        if (candidate(names[i])) {
            only = names[i];
            nc++;
        }
    if (nc == 1) return expand(names, n_names, only, true, files, n, err);
    if (!nc) return rlx_errorf(err, RLX_ENOTFOUND, "%s has no GGUF file", r->repo);
    return rlx_errorf(err, RLX_EINVAL, "%s: no file names a known quantization and several models are there (%s); "
                      "name one with :QUANT or /FILE.gguf", r->repo, have);
}

int rlx_hf_listing_names(const char *json, char ***names, size_t *n, rlx_error *err)
{
    *names = NULL;
    *n = 0;
    cJSON *root = cJSON_Parse(json);
    cJSON *sib = root ? cJSON_GetObjectItemCaseSensitive(root, "siblings") : NULL;
    if (!cJSON_IsArray(sib)) {
        cJSON_Delete(root);
        return rlx_errorf(err, RLX_EFORMAT, "the repository listing is not a Hugging Face model listing (no "
                          "\"siblings\" array)");
    }
    size_t cap = (size_t)cJSON_GetArraySize(sib);
    char **out = calloc(cap ? cap : 1, sizeof *out);
    if (!out) {
        cJSON_Delete(root);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    }
    size_t k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, sib) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(it, "rfilename");
        if (!cJSON_IsString(f) || !path_ok(f->valuestring, strlen(f->valuestring))) continue;
        if (!(out[k] = strdup(f->valuestring))) {
            rlx_hf_files_free(out, k);
            cJSON_Delete(root);
            return rlx_errorf(err, RLX_ENOMEM, "out of memory");
        }
        k++;
    }
    cJSON_Delete(root);
    *names = out;
    *n = k;
    return 0;
}
