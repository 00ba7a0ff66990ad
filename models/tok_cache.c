/* tok_cache.c - a built tokenizer's tables on disk (see tokenizer.h, "the tokenizer cache").
 *
 * File: a header (magic, format version, sizeof(struct rlx_tokenizer), the model file's size,
 * mtime, inode and device, the size and mtime of the program that wrote it (a rebuild may build
 * other tables), the payload's length and checksum), then the payload: the struct
 * with its pointers cleared, and each table as a blob (u64 length, bytes, padded to 8). Strings
 * are stored as their arena plus offsets. Reading checks every length against the struct's
 * counts and every offset and id against their ranges, so a damaged file is refused rather than
 * trusted; PCRE2 regexes are compiled again from the pre-tokenizer's name. */
#include "models/tok_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_MAGIC "RLXTOKC"
#define CACHE_VERSION 1u

typedef struct cache_header {
    char magic[8];
    uint32_t version, struct_size;
    uint64_t src_size, src_mtime_ns, src_ino, src_dev;
    uint64_t exe_size, exe_mtime_ns; /* the program that wrote it: a rebuild may build other tables */
    uint64_t payload, checksum;
} cache_header;

uint64_t rlx__tok_cache_checksum(const void *data, size_t n)
{
    const uint8_t *p = data;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h ^ (h >> 29);
}

static int identity(const char *model_path, cache_header *h, rlx_error *err)
{
    struct stat st;
    if (stat(model_path, &st))
        return rlx_errorf(err, RLX_EIO, "%s: %s", model_path, strerror(errno));
    h->src_size = (uint64_t)st.st_size;
    h->src_mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
    h->src_ino = (uint64_t)st.st_ino;
    h->src_dev = (uint64_t)st.st_dev;
    if (!stat("/proc/self/exe", &st)) {
        h->exe_size = (uint64_t)st.st_size;
        h->exe_mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
    }
    return 0;
}

void rlx_tokenizer_cache_path(const char *cache_dir, const char *model_path, char *buf, size_t cap)
{
    char abs[PATH_MAX];
    const char *p = realpath(model_path, abs) ? abs : model_path;
    uint64_t h = rlx__tok_cache_checksum((const uint8_t *)p, strlen(p));
    snprintf(buf, cap, "%s/tokenizer-%016llx.bin", cache_dir, (unsigned long long)h);
}

/* ---- writing ---- */

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} wbuf;

static void put(wbuf *b, const void *src, size_t n)
{
    size_t pad = (8 - n % 8) % 8;
    if (b->oom) return;
    if (b->n + n + pad > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 20;
        while (cap < b->n + n + pad) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) { b->oom = true; return; }
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    memset(b->p + b->n + n, 0, pad);
    b->n += n + pad;
}

static void blob(wbuf *b, const void *src, size_t n)
{
    uint64_t len = n;
    put(b, &len, sizeof len);
    put(b, src, n);
}

/* offsets of strs[i] in arena */
static uint32_t *offsets(const char *const *strs, size_t n, const char *arena)
{
    uint32_t *o = malloc((n ? n : 1) * sizeof *o);
    if (o)
        for (size_t i = 0; i < n; i++) o[i] = (uint32_t)(strs[i] - arena);
    return o;
}

int rlx_tokenizer_cache_save(const rlx_tokenizer *t, const char *cache_path, const char *model_path, rlx_error *err)
{
    cache_header h = {.version = CACHE_VERSION, .struct_size = (uint32_t)sizeof *t};
    memcpy(h.magic, CACHE_MAGIC, sizeof CACHE_MAGIC);
    int rc = identity(model_path, &h, err);
    if (rc) return rc;
    rlx_tokenizer copy = *t;
    copy.text = NULL, copy.len = NULL, copy.score = NULL, copy.attr = NULL, copy.arena = NULL;
    copy.tok_slots = NULL, copy.pairs = NULL, copy.special = NULL;
    copy.merge_str = NULL, copy.merge_llen = NULL, copy.merge_rlen = NULL, copy.merge_arena = NULL;
    copy.merge_slots = NULL;
    memset(copy.re, 0, sizeof copy.re);
    copy.map = NULL;
    copy.map_len = 0;
    size_t n = (size_t)t->n_vocab, nm = t->kind == RLX_TOK_BPE ? t->n_merges : 0;
    wbuf b = {0};
    uint32_t *toff = offsets(t->text, n, t->arena);
    uint32_t *moff = t->kind == RLX_TOK_BPE ? offsets(t->merge_str, nm, t->merge_arena) : NULL;
    if (!toff || (t->kind == RLX_TOK_BPE && !moff)) b.oom = true;
    put(&b, &copy, sizeof copy);
    blob(&b, toff, n * sizeof *toff);
    blob(&b, t->arena, t->arena_bytes);
    blob(&b, t->len, n * sizeof *t->len);
    blob(&b, t->score, n * sizeof *t->score);
    blob(&b, t->attr, n * sizeof *t->attr);
    blob(&b, t->tok_slots, ((size_t)t->tok_mask + 1) * sizeof *t->tok_slots);
    blob(&b, t->pairs, 65536 / 8);
    blob(&b, t->special, t->n_special * sizeof *t->special);
    if (t->kind == RLX_TOK_BPE) {
        blob(&b, moff, nm * sizeof *moff);
        blob(&b, t->merge_arena, t->merge_arena_bytes);
        blob(&b, t->merge_llen, nm * sizeof *t->merge_llen);
        blob(&b, t->merge_rlen, nm * sizeof *t->merge_rlen);
        blob(&b, t->merge_slots, ((size_t)t->merge_mask + 1) * sizeof *t->merge_slots);
    }
    free(toff);
    free(moff);
    if (b.oom) {
        free(b.p);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory writing the tokenizer cache");
    }
    h.payload = b.n;
    h.checksum = rlx__tok_cache_checksum(b.p, b.n);

    char tmp[PATH_MAX + 32];
    if (rlx_mkdirs_for(cache_path, 0755)) { /* $XDG_CACHE_HOME itself may not exist yet */
        free(b.p);
        return rlx_errorf(err, RLX_EIO, "cannot create the folder of the cache file %s: %s", cache_path,
                          strerror(errno));
    }
    /* a temporary of its own: two models of one daemon loaded from the same file at once save
     * the same cache file */
    FILE *f = rlx_tmpfile_beside(cache_path, 0644, tmp, sizeof tmp);
    bool ok = f && fwrite(&h, sizeof h, 1, f) == 1 && fwrite(b.p, 1, b.n, f) == b.n;
    if (f && fclose(f)) ok = false;
    free(b.p);
    if (!ok || rename(tmp, cache_path)) {
        int e = errno;
        if (tmp[0]) unlink(tmp);
        return rlx_errorf(err, RLX_EIO, "cannot write the tokenizer cache %s: %s", cache_path, strerror(e));
    }
    return 0;
}

/* ---- reading ---- */

typedef struct rbuf {
    const uint8_t *p;
    size_t n, off;
} rbuf;

/* The next blob, which must hold want bytes: a pointer into the mapping, or NULL. */
static void *take(rbuf *b, size_t want, const char *what, rlx_error *err)
{
    uint64_t len;
    if (b->n - b->off < 8) { rlx_errorf(err, RLX_EFORMAT, "truncated before %s", what); return NULL; }
    memcpy(&len, b->p + b->off, 8);
    b->off += 8;
    size_t padded = (size_t)len + (8 - len % 8) % 8;
    if (len != want || b->n - b->off < padded) {
        rlx_errorf(err, RLX_EFORMAT, "%s: %llu bytes where %zu were expected", what, (unsigned long long)len, want);
        return NULL;
    }
    void *v = (void *)(b->p + b->off);
    b->off += padded;
    return v;
}

void rlx__tok_unmap(void *map, size_t len)
{
    munmap(map, len);
}

/* The length of the next blob (not consumed). */
static size_t peek_len(const rbuf *b)
{
    uint64_t len = 0;
    if (b->n - b->off >= 8) memcpy(&len, b->p + b->off, 8);
    return len > b->n ? 0 : (size_t)len;
}

/* strs[i] = arena + off[i]: the strings lie one after the other, each NUL-terminated, so the
 * offsets start at 0, rise, and each string ends (NUL) where the next begins */
static int point(const char **strs, const uint32_t *off, size_t n, const char *arena, size_t bytes)
{
    for (size_t i = 0; i < n; i++) {
        size_t end = i + 1 < n ? off[i + 1] : bytes;
        if ((i == 0 && off[0] != 0) || off[i] >= end || end > bytes || arena[end - 1] != 0) return -1;
        strs[i] = arena + off[i];
    }
    return 0;
}

static bool slots_ok(const rlx__slot *s, size_t n, int32_t max)
{
    for (size_t i = 0; i < n; i++)
        if (s[i].id < -1 || s[i].id >= max) return false;
    return true;
}

static int restore(rlx_tokenizer *t, rbuf *b, rlx_error *err)
{
    size_t n = (size_t)t->n_vocab;
    const uint32_t *toff = NULL, *moff = NULL;
    int rc = RLX_EFORMAT;
    if (t->n_vocab <= 0 || t->tok_mask >= (1u << 30) || ((t->tok_mask + 1) & t->tok_mask) || t->n_special > n ||
        (t->kind != RLX_TOK_SPM && t->kind != RLX_TOK_BPE && t->kind != RLX_TOK_WPM) ||
        t->merge_mask >= (1u << 30) || !memchr(t->pre, 0, sizeof t->pre))
        return rlx_errorf(err, RLX_EFORMAT, "inconsistent tokenizer header");
    if (!(toff = take(b, n * 4, "token offsets", err))) goto out;
    size_t abytes = peek_len(b);
    if (!(t->arena = take(b, abytes, "token texts", err))) goto out;
    if (!(t->text = malloc(n * sizeof *t->text))) { rc = rlx_errorf(err, RLX_ENOMEM, "out of memory"); goto out; }
    if (point(t->text, toff, n, t->arena, abytes)) { rlx_errorf(err, RLX_EFORMAT, "a token offset is out of range"); goto out; }
    if (!(t->len = take(b, n * sizeof *t->len, "token lengths", err))) goto out;
    if (!(t->score = take(b, n * sizeof *t->score, "token scores", err))) goto out;
    if (!(t->attr = take(b, n * sizeof *t->attr, "token attributes", err))) goto out;
    if (!(t->tok_slots = take(b, ((size_t)t->tok_mask + 1) * sizeof *t->tok_slots, "token hash", err))) goto out;
    if (!(t->pairs = take(b, 65536 / 8, "byte pairs", err))) goto out;
    if (!(t->special = take(b, t->n_special * sizeof *t->special, "special tokens", err))) goto out;
    for (size_t i = 0; i < n; i++)
        if ((size_t)(t->text[i] - t->arena) + t->len[i] + 1 != (i + 1 < n ? toff[i + 1] : abytes)) {
            rlx_errorf(err, RLX_EFORMAT, "token %zu: length mismatch", i);
            goto out;
        }
    t->arena_bytes = abytes;
    if (!slots_ok(t->tok_slots, (size_t)t->tok_mask + 1, t->n_vocab)) { rlx_errorf(err, RLX_EFORMAT, "token hash: id out of range"); goto out; }
    for (size_t i = 0; i < t->n_special; i++)
        if (t->special[i] < 0 || t->special[i] >= t->n_vocab) { rlx_errorf(err, RLX_EFORMAT, "special token out of range"); goto out; }
    const int32_t ids[] = {t->bos, t->eos, t->eot, t->eom, t->unk, t->sep, t->pad};
    for (size_t i = 0; i < RLX_ARRAY_LEN(ids); i++)
        if (ids[i] < -1 || ids[i] >= t->n_vocab) { rlx_errorf(err, RLX_EFORMAT, "special id out of range"); goto out; }
    for (int i = 0; i < 256; i++)
        if (t->byte_tok[i] < -1 || t->byte_tok[i] >= t->n_vocab) { rlx_errorf(err, RLX_EFORMAT, "byte token out of range"); goto out; }
    if (t->kind == RLX_TOK_BPE) {
        size_t nm = t->n_merges;
        if (nm > INT32_MAX) { rlx_errorf(err, RLX_EFORMAT, "merge count out of range"); goto out; }
        if (!(moff = take(b, nm * 4, "merge offsets", err))) goto out;
        size_t mbytes = peek_len(b);
        if (!(t->merge_arena = take(b, mbytes, "merge texts", err))) goto out;
        if (!(t->merge_str = malloc((nm ? nm : 1) * sizeof *t->merge_str))) { rc = rlx_errorf(err, RLX_ENOMEM, "out of memory"); goto out; }
        if (point(t->merge_str, moff, nm, t->merge_arena, mbytes)) { rlx_errorf(err, RLX_EFORMAT, "a merge offset is out of range"); goto out; }
        if (!(t->merge_llen = take(b, nm * 4, "merge lengths", err))) goto out;
        if (!(t->merge_rlen = take(b, nm * 4, "merge lengths", err))) goto out;
        t->merge_arena_bytes = mbytes;
        for (size_t i = 0; i < nm; i++)
            if ((size_t)t->merge_llen[i] + t->merge_rlen[i] + (t->merge_llen[i] ? 1 : 0) >
                (i + 1 < nm ? moff[i + 1] : mbytes) - moff[i] - 1) {
                rlx_errorf(err, RLX_EFORMAT, "merge %zu: length mismatch", i);
                goto out;
            }
        if (!(t->merge_slots = take(b, ((size_t)t->merge_mask + 1) * sizeof *t->merge_slots, "merge hash", err))) goto out;
        if (!slots_ok(t->merge_slots, (size_t)t->merge_mask + 1, (int32_t)nm)) { rlx_errorf(err, RLX_EFORMAT, "merge hash: rank out of range"); goto out; }
    }
    if (b->off != b->n) { rlx_errorf(err, RLX_EFORMAT, "%zu bytes past the tables", b->n - b->off); goto out; }
    if (t->kind == RLX_TOK_BPE && (rc = rlx__bpe_restore(t, err))) goto out;
    rc = 0;
out:
    return rc;
}

int rlx_tokenizer_cache_load(rlx_tokenizer **out, const char *cache_path, const char *model_path,
                             rlx_tok_cache_status *st, rlx_error *err)
{
    *out = NULL;
    *st = RLX_TOK_CACHE_MISS;
    /* O_NONBLOCK: a FIFO at the cache's path must not hold the load (and the shutdown) forever */
    int fd = open(cache_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return RLX_ENOTFOUND;
    cache_header h, want = {0};
    struct stat fst;
    const uint8_t *p = NULL;
    int rc = RLX_EFORMAT;
    *st = RLX_TOK_CACHE_CORRUPT;
    if (fstat(fd, &fst) || !S_ISREG(fst.st_mode)) {
        rlx_errorf(err, RLX_EFORMAT, "%s: not a regular file", cache_path);
        goto out;
    }
    if (read(fd, &h, sizeof h) != (ssize_t)sizeof h || memcmp(h.magic, CACHE_MAGIC, sizeof CACHE_MAGIC)) {
        rlx_errorf(err, RLX_EFORMAT, "%s: not a tokenizer cache file (bad header)", cache_path);
        goto out;
    }
    if ((rc = identity(model_path, &want, err))) goto out;
    if (h.version != CACHE_VERSION || h.struct_size != sizeof(rlx_tokenizer) || h.exe_size != want.exe_size ||
        h.exe_mtime_ns != want.exe_mtime_ns) {
        *st = RLX_TOK_CACHE_STALE;
        rc = rlx_errorf(err, RLX_EFORMAT, "%s: written by another version or build of rlxd", cache_path);
        goto out;
    }
    if (h.src_size != want.src_size || h.src_mtime_ns != want.src_mtime_ns || h.src_ino != want.src_ino ||
        h.src_dev != want.src_dev) {
        *st = RLX_TOK_CACHE_STALE;
        rc = rlx_errorf(err, RLX_EFORMAT, "%s: built from another version of %s", cache_path, model_path);
        goto out;
    }
    rc = RLX_EFORMAT;
    if (h.payload != (uint64_t)fst.st_size - sizeof h || h.payload < sizeof(rlx_tokenizer)) {
        rlx_errorf(err, RLX_EFORMAT, "%s: truncated (%llu of %llu bytes)", cache_path,
                   (unsigned long long)fst.st_size, (unsigned long long)(h.payload + sizeof h));
        goto out;
    }
    size_t map_len = (size_t)fst.st_size;
    void *map = mmap(NULL, map_len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED) { rc = rlx_errorf(err, RLX_EIO, "%s: cannot map: %s", cache_path, strerror(errno)); goto out; }
    p = (uint8_t *)map + sizeof h;
    size_t got = (size_t)h.payload;
    if (rlx__tok_cache_checksum(p, got) != h.checksum) {
        munmap(map, map_len);
        rlx_errorf(err, RLX_EFORMAT, "%s: checksum mismatch", cache_path);
        goto out;
    }
    rlx_tokenizer *t = malloc(sizeof *t);
    if (!t) {
        munmap(map, map_len);
        rc = rlx_errorf(err, RLX_ENOMEM, "out of memory");
        goto out;
    }
    memcpy(t, p, sizeof *t);
    t->map = map;
    t->map_len = map_len;
    t->text = NULL, t->len = NULL, t->score = NULL, t->attr = NULL, t->arena = NULL;
    t->tok_slots = NULL, t->pairs = NULL, t->special = NULL;
    t->merge_str = NULL, t->merge_llen = NULL, t->merge_rlen = NULL, t->merge_arena = NULL, t->merge_slots = NULL;
    memset(t->re, 0, sizeof t->re);
    t->n_re = 0;
    rbuf b = {p, got, sizeof *t + (8 - sizeof *t % 8) % 8};
    char why[200] = "";
    rlx_error e2 = {0};
    if ((rc = restore(t, &b, &e2))) {
        snprintf(why, sizeof why, "%.180s", e2.msg);
        rlx_tokenizer_free(t);
        if (rc != RLX_ENOMEM) rc = rlx_errorf(err, RLX_EFORMAT, "%s: %s", cache_path, why);
        else *err = e2;
        goto out;
    }
    *out = t;
    *st = RLX_TOK_CACHE_HIT;
    rc = 0;
out:
    close(fd);
    return rc;
}
