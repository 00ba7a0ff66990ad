/* test_tok_cache.c - the tokenizer cache (models/tok_cache.c): a tokenizer read back from its
 * cache file has the built one's tables byte for byte (its own cache file is identical) and
 * tokenizes the vocabulary test texts to the same ids, for SentencePiece, BPE (several
 * pre-tokenizers) and WordPiece; a stale file (the model changed, or another format or build) and a
 * corrupt one (truncated, a flipped byte, a bad header, tables inconsistent under a valid
 * checksum) are refused with the reason, never read. */
#include "tests/rlx_test.h"
#include "models/tok_internal.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#define HEADER_BYTES 80

static char dir[64];

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    *n = fread(b, 1, (size_t)len, f);
    b[*n] = 0;
    fclose(f);
    return b;
}

static void spit(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

static int build(const char *model, rlx_tokenizer **t)
{
    rlx_gguf *g = NULL;
    rlx_error err = {0};
    int rc = rlx_gguf_open(&g, model, &err);
    if (!rc) rc = rlx_tokenizer_from_gguf(t, g, &err);
    if (rc) fprintf(stderr, "  %s: %s\n", model, err.msg);
    rlx_gguf_close(g);
    return rc;
}

/* Same ids for text from both tokenizers (special tokens parsed and not). */
static bool same_ids(const rlx_tokenizer *a, const rlx_tokenizer *b, const char *text, size_t len)
{
    for (int parse = 0; parse < 2; parse++) {
        int32_t *x = NULL, *y = NULL;
        size_t nx = 0, ny = 0;
        rlx_error err = {0};
        int ra = rlx_tokenize(a, text, len, true, parse, &x, &nx, &err);
        int rb = rlx_tokenize(b, text, len, true, parse, &y, &ny, &err);
        bool same = ra == rb && nx == ny && (!nx || !memcmp(x, y, nx * sizeof *x));
        free(x);
        free(y);
        if (!same) return false;
    }
    return true;
}

TEST(round_trip_every_family)
{
    static const char *const names[] = {
        "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-qwen2-reconstructed.gguf",
        "vocab/ggml-vocab-deepseek-llm.gguf", "vocab/ggml-vocab-falcon.gguf", "vocab/ggml-vocab-bert-bge.gguf",
        "vocab/ggml-vocab-phi-3.gguf", "vocab/ggml-vocab-starcoder.gguf", "models/synth-qwen3-tiny-f32.gguf",
        "models/stories260K.gguf",
    };
    int done = 0;
    for (size_t k = 0; k < RLX_ARRAY_LEN(names); k++) {
        const char *model = rlx_test_shared(names[k]);
        if (!model) continue;
        char path[128], again[128];
        snprintf(path, sizeof path, "%s/t%zu.bin", dir, k);
        snprintf(again, sizeof again, "%s/t%zu-again.bin", dir, k);
        rlx_tokenizer *t = NULL, *c = NULL;
        rlx_error err = {0};
        ASSERT_EQ(build(model, &t), 0);
        ASSERT_MSG(rlx_tokenizer_cache_save(t, path, model, &err) == 0, "%s", err.msg);
        rlx_tok_cache_status st;
        ASSERT_MSG(rlx_tokenizer_cache_load(&c, path, model, &st, &err) == 0, "%s: %s", names[k], err.msg);
        ASSERT_EQ(st, RLX_TOK_CACHE_HIT);
        /* the tables byte for byte: the read-back tokenizer writes the same file */
        ASSERT_MSG(rlx_tokenizer_cache_save(c, again, model, &err) == 0, "%s", err.msg);
        size_t na, nb;
        char *fa = slurp(path, &na), *fb = slurp(again, &nb);
        ASSERT_MSG(na == nb && !memcmp(fa, fb, na), "%s: the read-back tables differ", names[k]);
        free(fa);
        free(fb);
        ASSERT_EQ(rlx_tokenizer_n_vocab(c), rlx_tokenizer_n_vocab(t));
        ASSERT_EQ(rlx_tokenizer_bos(c), rlx_tokenizer_bos(t));
        ASSERT_EQ(rlx_tokenizer_max_bytes_per_token(c), rlx_tokenizer_max_bytes_per_token(t));
        /* and the same ids: the vocabulary's test texts, or a fixed text */
        char inp[300];
        snprintf(inp, sizeof inp, "%s.inp", model);
        size_t n = 0;
        char *text = slurp(inp, &n);
        static const char fixed[] = "Hello world! <|im_start|>user\n  3333 ñandú 日本語 \xf0\x9f\x98\x80 don't\t\tstop</s>";
        if (!text) { text = strdup(fixed); n = strlen(fixed); }
        ASSERT_MSG(same_ids(t, c, text, n), "%s: the read-back tokenizer gives other ids", names[k]);
        free(text);
        for (int32_t id = 0; id < rlx_tokenizer_n_vocab(t); id += 97)
            ASSERT_STR_EQ(rlx_tokenizer_piece(c, id), rlx_tokenizer_piece(t, id));
        rlx_tokenizer_free(c);
        rlx_tokenizer_free(t);
        done++;
    }
    if (!done) SKIP("no vocabulary under ../shared");
}

/* A copy of a shared model (the test changes its mtime) with its cache file written. */
static int setup(char *model, size_t mcap, char *path, size_t pcap, size_t *size)
{
    const char *src = rlx_test_shared("models/synth-qwen3-tiny-f32.gguf");
    if (!src) return 77;
    snprintf(model, mcap, "%s/m.gguf", dir);
    size_t n;
    char *b = slurp(src, &n);
    spit(model, b, n);
    free(b);
    snprintf(path, pcap, "%s/m.bin", dir);
    rlx_tokenizer *t = NULL;
    rlx_error err = {0};
    if (build(model, &t) || rlx_tokenizer_cache_save(t, path, model, &err)) return 1;
    rlx_tokenizer_free(t);
    struct stat st;
    stat(path, &st);
    *size = (size_t)st.st_size;
    return 0;
}

static rlx_tok_cache_status load_status(const char *path, const char *model, char *msg, size_t cap)
{
    rlx_tokenizer *t = NULL;
    rlx_tok_cache_status st;
    rlx_error err = {0};
    int rc = rlx_tokenizer_cache_load(&t, path, model, &st, &err);
    snprintf(msg, cap, "%s", err.msg);
    if (!rc) rlx_tokenizer_free(t);
    return st;
}

TEST(stale_and_corrupt)
{
    char model[128], path[128], msg[600];
    size_t size;
    int rc = setup(model, sizeof model, path, sizeof path, &size);
    if (rc == 77) SKIP("models/synth-qwen3-tiny-f32.gguf absent");
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(load_status(path, model, msg, sizeof msg), RLX_TOK_CACHE_HIT);
    char absent[160];
    snprintf(absent, sizeof absent, "%s/none.bin", dir);
    ASSERT_EQ(load_status(absent, model, msg, sizeof msg), RLX_TOK_CACHE_MISS);

    size_t n;
    char *orig = slurp(path, &n);
    ASSERT_EQ(n, size);
    /* a flipped byte deep in the tables */
    char *bad = malloc(n);
    memcpy(bad, orig, n);
    bad[n / 2] ^= 0x40;
    spit(path, bad, n);
    ASSERT_EQ(load_status(path, model, msg, sizeof msg), RLX_TOK_CACHE_CORRUPT);
    ASSERT_MSG(strstr(msg, "checksum mismatch"), "%s", msg);
    /* truncated */
    spit(path, orig, n - 100);
    ASSERT_EQ(load_status(path, model, msg, sizeof msg), RLX_TOK_CACHE_CORRUPT);
    ASSERT_MSG(strstr(msg, "truncated"), "%s", msg);
    /* not a cache file */
    spit(path, "hello", 5);
    ASSERT_EQ(load_status(path, model, msg, sizeof msg), RLX_TOK_CACHE_CORRUPT);
    ASSERT_MSG(strstr(msg, "bad header"), "%s", msg);
    /* a token offset out of range under a valid checksum: the tables are checked, not trusted */
    memcpy(bad, orig, n);
    size_t toff = HEADER_BYTES + ((sizeof(rlx_tokenizer) + 7) / 8) * 8 + 8; /* the offsets blob */
    uint32_t huge = 0x7ffffff0u;
    memcpy(bad + toff + 4 * 5, &huge, 4);
    uint64_t sum = rlx__tok_cache_checksum(bad + HEADER_BYTES, n - HEADER_BYTES);
    memcpy(bad + HEADER_BYTES - 8, &sum, 8);
    spit(path, bad, n);
    ASSERT_EQ(load_status(path, model, msg, sizeof msg), RLX_TOK_CACHE_CORRUPT);
    ASSERT_MSG(strstr(msg, "token offset is out of range"), "%s", msg);
    /* another format version */
    memcpy(bad, orig, n);
    bad[8] ^= 0x7f;
    spit(path, bad, n);
    ASSERT_EQ(load_status(path, model, msg, sizeof msg), RLX_TOK_CACHE_STALE);
    ASSERT_MSG(strstr(msg, "another version or build of rlxd"), "%s", msg);
    /* the model file changed since the cache was written */
    spit(path, orig, n);
    ASSERT_EQ(load_status(path, model, msg, sizeof msg), RLX_TOK_CACHE_HIT);
    struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
    ASSERT_EQ(utimes(model, tv), 0);
    ASSERT_EQ(load_status(path, model, msg, sizeof msg), RLX_TOK_CACHE_STALE);
    ASSERT_MSG(strstr(msg, "built from another version of"), "%s", msg);
    free(bad);
    free(orig);
}

/* A save writes a temporary of its own, never one named after the process alone (two models of
 * one daemon from the same file save the same cache at once): a folder in the way under that
 * name changes nothing, and no temporary is left behind. */
TEST(a_temporary_of_its_own)
{
    char model[128], path[128], msg[600], in_the_way[200];
    size_t size;
    int rc = setup(model, sizeof model, path, sizeof path, &size);
    if (rc == 77) SKIP("models/synth-qwen3-tiny-f32.gguf absent");
    ASSERT_EQ(rc, 0);
    snprintf(in_the_way, sizeof in_the_way, "%s.%d.tmp", path, (int)getpid());
    ASSERT_EQ(mkdir(in_the_way, 0700), 0);
    unlink(path);
    rlx_tokenizer *t = NULL;
    rlx_error err = {0};
    ASSERT_EQ(build(model, &t), 0);
    ASSERT_MSG(rlx_tokenizer_cache_save(t, path, model, &err) == 0, "%s", err.msg);
    rlx_tokenizer_free(t);
    rmdir(in_the_way);
    ASSERT_EQ(load_status(path, model, msg, sizeof msg), RLX_TOK_CACHE_HIT);
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strstr(e->d_name, "m.bin.")) n++;
    if (d) closedir(d);
    ASSERT_EQ(n, 0);
    /* the helper's failures: no folder, a name longer than the room for it */
    char t2[64] = "x";
    errno = 0;
    ASSERT(!rlx_tmpfile_beside("/nonexistent-rlx-dir/m.bin", 0644, t2, sizeof t2) && errno == ENOENT && !t2[0]);
    t2[0] = 'x';
    ASSERT(!rlx_tmpfile_beside(path, 0644, t2, 8) && errno == ENAMETOOLONG && !t2[0]);
}

/* The cache folder ($XDG_CACHE_HOME/rlxd) and the folders above it need not exist: a save makes
 * them (a container's fresh volume under XDG_CACHE_HOME=/var/lib/rlxd/cache logged "cannot create
 * the cache folder ...: No such file or directory" at every load and never cached). */
TEST(a_cache_folder_that_does_not_exist)
{
    char model[128], path[128], deep[200], msg[600];
    size_t size;
    int rc = setup(model, sizeof model, path, sizeof path, &size);
    if (rc == 77) SKIP("models/synth-qwen3-tiny-f32.gguf absent");
    ASSERT_EQ(rc, 0);
    snprintf(deep, sizeof deep, "%s/xdg/new/rlxd/m.bin", dir);
    rlx_tokenizer *t = NULL;
    rlx_error err = {0};
    ASSERT_EQ(build(model, &t), 0);
    ASSERT_MSG(rlx_tokenizer_cache_save(t, deep, model, &err) == 0, "%s", err.msg);
    rlx_tokenizer_free(t);
    ASSERT_EQ(load_status(deep, model, msg, sizeof msg), RLX_TOK_CACHE_HIT);
}

/* "/aaa...": a path longer than PATH_MAX (malloc'd) */
static char *path_past_path_max(void)
{
    char *p = malloc(PATH_MAX + 16);
    if (!p) return NULL;
    memset(p, 'a', PATH_MAX + 15);
    p[0] = '/';
    p[PATH_MAX + 15] = 0;
    return p;
}

/* rlx_mkdirs: every missing level, existing folders kept, doubled and trailing slashes, and its
 * failures (a file in the way, a name past PATH_MAX) with errno set. */
TEST(mkdirs_makes_every_level)
{
    char a[200], b[220], f[220];
    struct stat st;
    snprintf(a, sizeof a, "%s/mk/one//two/three/", dir);
    ASSERT_EQ(rlx_mkdirs(a, 0700), 0);
    snprintf(b, sizeof b, "%s/mk/one/two/three", dir);
    ASSERT(!stat(b, &st) && S_ISDIR(st.st_mode));
    ASSERT_EQ(rlx_mkdirs(b, 0700), 0); /* exists: fine */
    snprintf(f, sizeof f, "%s/mk/file", dir);
    spit(f, "x", 1);
    errno = 0;
    ASSERT(rlx_mkdirs(f, 0700) == -1 && errno == ENOTDIR);
    snprintf(b, sizeof b, "%s/mk/file/below", dir);
    errno = 0;
    ASSERT(rlx_mkdirs(b, 0700) == -1 && errno == ENOTDIR);
    char *long_name = path_past_path_max();
    ASSERT(long_name);
    errno = 0;
    ASSERT(rlx_mkdirs(long_name, 0700) == -1 && errno == ENAMETOOLONG);
    free(long_name);
    ASSERT_EQ(rlx_mkdirs("/", 0700), 0);
}

/* rlx_mkdirs_for: the folders above a file, not the file's own name; a bare name, one in the root
 * and a file in the way. */
TEST(mkdirs_for_makes_the_files_folder)
{
    char p[220], d[220];
    struct stat st;
    snprintf(p, sizeof p, "%s/mkf/a/b/file.bin", dir);
    ASSERT_EQ(rlx_mkdirs_for(p, 0700), 0);
    snprintf(d, sizeof d, "%s/mkf/a/b", dir);
    ASSERT(!stat(d, &st) && S_ISDIR(st.st_mode));
    ASSERT(stat(p, &st) == -1 && errno == ENOENT); /* the file's name is left for the file */
    ASSERT_EQ(rlx_mkdirs_for(p, 0700), 0);          /* there already: fine */
    ASSERT_EQ(rlx_mkdirs_for("bare-name.bin", 0700), 0);
    ASSERT_EQ(rlx_mkdirs_for("/in-the-root.bin", 0700), 0);
    snprintf(d, sizeof d, "%s/mkf/file", dir);
    spit(d, "x", 1);
    snprintf(p, sizeof p, "%s/mkf/file/below/x.bin", dir);
    errno = 0;
    ASSERT(rlx_mkdirs_for(p, 0700) == -1 && errno == ENOTDIR);
    char *long_name = path_past_path_max();
    ASSERT(long_name);
    errno = 0;
    ASSERT(rlx_mkdirs_for(long_name, 0700) == -1 && errno == ENAMETOOLONG);
    free(long_name);
}

TEST(cache_path_names_the_model)
{
    char a[256], b[256], c[256];
    rlx_tokenizer_cache_path("/c", "/m/a.gguf", a, sizeof a);
    rlx_tokenizer_cache_path("/c", "/m/b.gguf", b, sizeof b);
    rlx_tokenizer_cache_path("/c", "/m/a.gguf", c, sizeof c);
    ASSERT(!strncmp(a, "/c/tokenizer-", 13) && strstr(a, ".bin"));
    ASSERT(strcmp(a, b));
    ASSERT_STR_EQ(a, c);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/rlx_tok_cache_%d", (int)getpid());
    char cmd[128];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    if (system(cmd)) return 1;
    static const rlx_test_case cases[] = {TEST_ENTRY(round_trip_every_family), TEST_ENTRY(stale_and_corrupt),
                                          TEST_ENTRY(a_temporary_of_its_own), TEST_ENTRY(a_cache_folder_that_does_not_exist),
                                          TEST_ENTRY(mkdirs_makes_every_level), TEST_ENTRY(mkdirs_for_makes_the_files_folder),
                                          TEST_ENTRY(cache_path_names_the_model)};
    int rc = rlx_test_run(cases, RLX_ARRAY_LEN(cases));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    return rc;
}
