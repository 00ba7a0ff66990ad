/* gguf_split.c - split GGUF models as llama.cpp's gguf-split writes them: parts named
 * PREFIX-NNNNN-of-MMMMM.gguf (1-based), each carrying split.no (0-based), split.count and
 * split.tensors.count (the total over all parts); the first part holds the model's metadata,
 * every part the infos and data of its own tensors. rlx_gguf_open_split maps every part and
 * hands back the first with the tensors of all of them (rlx__gguf_adopt_parts in gguf.c). */
#include "models/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int rlx__gguf_adopt_parts(rlx_gguf *g, rlx_gguf **parts, uint32_t n, rlx_error *err);

#define SPLIT_SUFFIX_LEN 20 /* "-00001-of-00003.gguf" */

static bool digits5(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 5; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

bool rlx_gguf_split_parse_name(const char *path, char *prefix, size_t cap, uint32_t *no, uint32_t *count)
{
    size_t n = strlen(path);
    if (n <= SPLIT_SUFFIX_LEN) return false;
    const char *s = path + n - SPLIT_SUFFIX_LEN;
    uint32_t a, b;
    if (s[0] != '-' || !digits5(s + 1, &a) || memcmp(s + 6, "-of-", 4) || !digits5(s + 10, &b) ||
        strcmp(s + 15, ".gguf") || a == 0 || b == 0 || a > b)
        return false;
    if (s[-1] == '/') return false; /* no prefix */
    if (prefix) {
        if (cap <= (size_t)(s - path)) return false;
        memcpy(prefix, path, (size_t)(s - path));
        prefix[s - path] = 0;
    }
    if (no) *no = a;
    if (count) *count = b;
    return true;
}

int rlx_gguf_split_name(char *buf, size_t cap, const char *prefix, uint32_t no, uint32_t count)
{
    int k = snprintf(buf, cap, "%s-%05u-of-%05u.gguf", prefix, no + 1, count);
    return k < 0 || (size_t)k >= cap ? RLX_EINVAL : 0;
}

int rlx_gguf_split_keys(const rlx_gguf *g, uint32_t *no, uint32_t *count, rlx_error *err)
{
    *no = 0;
    *count = 1;
    int rc = rlx_gguf_get_u32(g, "split.count", count, err);
    if (rc == RLX_ENOTFOUND) { *count = 1; return 0; }
    if (rc) return rc;
    if (*count == 0) return rlx_errorf(err, RLX_EFORMAT, "%s: split.count is 0", rlx_gguf_path(g));
    rc = rlx_gguf_get_u32(g, "split.no", no, err);
    if (rc == RLX_ENOTFOUND) return rlx_errorf(err, RLX_EFORMAT, "%s: split.count is set but split.no is missing", rlx_gguf_path(g));
    if (rc) return rc;
    if (*no >= *count)
        return rlx_errorf(err, RLX_EFORMAT, "%s: split.no %u is not below split.count %u", rlx_gguf_path(g), *no, *count);
    return 0;
}

static void close_all(rlx_gguf **parts, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) rlx_gguf_close(parts[i]);
    free(parts);
}

int rlx_gguf_open_split(rlx_gguf **out, const char *path, rlx_error *err)
{
    *out = NULL;
    rlx_gguf *g;
    int rc = rlx_gguf_open(&g, path, err);
    if (rc) return rc;
    uint32_t no, count;
    if ((rc = rlx_gguf_split_keys(g, &no, &count, err))) { rlx_gguf_close(g); return rc; }
    if (count == 1) { *out = g; return 0; }

    size_t cap = strlen(path) + 1;
    char *prefix = malloc(cap), *name = malloc(cap), *missing = NULL;
    rlx_gguf **parts = calloc(count, sizeof *parts);
    uint32_t fno, fcount;
    if (!prefix || !name || !parts) { rc = rlx_errorf(err, RLX_ENOMEM, "%s: out of memory", path); goto fail; }
    if (!rlx_gguf_split_parse_name(path, prefix, cap, &fno, &fcount) || fno != no + 1 || fcount != count) {
        rc = rlx_errorf(err, RLX_EFORMAT, "%s: part %u of a %u-part split model, but its name does not end in "
                        "-%05u-of-%05u.gguf, so the other parts cannot be found", path, no + 1, count, no + 1, count);
        goto fail;
    }
    parts[no] = g;
    g = NULL;
    /* every missing part at once, so the user can fetch them all */
    size_t mlen = 0;
    uint32_t n_missing = 0;
    for (uint32_t i = 0; i < count; i++) {
        struct stat st;
        if (i == no) continue;
        rlx_gguf_split_name(name, cap, prefix, i, count);
        if (stat(name, &st) == 0) continue;
        char *m = realloc(missing, mlen + strlen(name) + 3);
        if (!m) { rc = rlx_errorf(err, RLX_ENOMEM, "%s: out of memory", path); goto fail; }
        missing = m;
        mlen += (size_t)sprintf(missing + mlen, "%s%s", n_missing++ ? ", " : "", name);
    }
    if (n_missing) {
        rc = rlx_errorf(err, RLX_ENOTFOUND, "split model %s: %u of its %u parts %s missing: %s", prefix, n_missing, count,
                        n_missing == 1 ? "is" : "are", missing);
        goto fail;
    }
    int64_t total = -1;
    for (uint32_t i = 0; i < count; i++) {
        rlx_gguf_split_name(name, cap, prefix, i, count);
        if (!parts[i] && (rc = rlx_gguf_open(&parts[i], name, err))) goto fail;
        uint32_t pno, pcount;
        if ((rc = rlx_gguf_split_keys(parts[i], &pno, &pcount, err))) goto fail;
        if (pcount != count || pno != i) {
            rc = rlx_errorf(err, RLX_EFORMAT, "%s: says it is part %u of %u (split.no %u, split.count %u), but its name "
                            "makes it part %u of %u", name, pno + 1, pcount, pno, pcount, i + 1, count);
            goto fail;
        }
        int64_t t;
        int trc = rlx_gguf_get_i64(parts[i], "split.tensors.count", &t, err);
        if (trc && trc != RLX_ENOTFOUND) { rc = trc; goto fail; }
        if (trc) continue;
        if (total >= 0 && t != total) {
            rc = rlx_errorf(err, RLX_EFORMAT, "%s: split.tensors.count %lld disagrees with the first part's %lld", name,
                            (long long)t, (long long)total);
            goto fail;
        }
        total = t;
    }
    /* parts[0] keeps the metadata and takes the others */
    rlx_gguf **rest = NULL;
    if (count > 1) {
        rest = malloc((count - 1) * sizeof *rest);
        if (!rest) { rc = rlx_errorf(err, RLX_ENOMEM, "%s: out of memory", path); goto fail; }
        memcpy(rest, parts + 1, (count - 1) * sizeof *rest);
    }
    if ((rc = rlx__gguf_adopt_parts(parts[0], rest, count - 1, err))) { free(rest); goto fail; }
    rlx_gguf *first = parts[0];
    free(parts);
    parts = NULL;
    if (total >= 0 && rlx_gguf_n_tensors(first) != (uint64_t)total) {
        rc = rlx_errorf(err, RLX_EFORMAT, "split model %s: its %u parts hold %llu tensors, but split.tensors.count is %lld",
                        prefix, count, (unsigned long long)rlx_gguf_n_tensors(first), (long long)total);
        rlx_gguf_close(first);
        goto fail;
    }
    free(prefix);
    free(name);
    *out = first;
    return 0;
fail:
    rlx_gguf_close(g);
    if (parts) close_all(parts, count);
    free(prefix);
    free(name);
    free(missing);
    return rc;
}
