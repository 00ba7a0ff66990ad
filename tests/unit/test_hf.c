/* test_hf.c - Hugging Face references (server/hf.c): the hf: forms and their errors, the URLs of
 * Hugging Face's layout, quantization tags in file names, which files a reference picks from a
 * listing (default order, split parts together, projectors left out, ambiguity and absence as
 * errors), the listing JSON, local file names of repository paths (one to one, the folder flat);
 * pull.c's pure parts: token cleaning, control characters escaped, the GGUF check of a file no
 * sha256 verified, paths too long refused; and SHA-256 (server/sha256.c) against FIPS 180-4
 * vectors. */
#include "tests/rlx_test.h"
#include "models/gguf.h"
#include "server/hf.h"
#include "server/pull.h"
#include "server/sha256.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int parse(const char *s, bool name, rlx_hf_ref *r, rlx_error *err)
{
    memset(err, 0, sizeof *err);
    return rlx_hf_ref_parse(s, name, r, err);
}

TEST(ref_forms)
{
    rlx_hf_ref r;
    rlx_error err;
    ASSERT_EQ(parse("hf:Qwen/Qwen3-0.6B-GGUF", false, &r, &err), 0);
    ASSERT_STR_EQ(r.repo, "Qwen/Qwen3-0.6B-GGUF");
    ASSERT_STR_EQ(r.file, "");
    ASSERT_STR_EQ(r.quant, "");
    ASSERT_EQ(parse("hf:unsloth/gemma-3-4b-it-GGUF:q4_k_m", false, &r, &err), 0);
    ASSERT_STR_EQ(r.repo, "unsloth/gemma-3-4b-it-GGUF");
    ASSERT_STR_EQ(r.quant, "Q4_K_M"); /* canonical spelling of a quantization llama.cpp names */
    ASSERT_EQ(parse("hf:unsloth/x-GGUF:UD-Q4_K_XL", false, &r, &err), 0);
    ASSERT_STR_EQ(r.quant, "UD-Q4_K_XL"); /* any tag is looked for in the file names */
    ASSERT_EQ(parse("hf:org/repo/sub/dir/model-Q8_0.gguf", false, &r, &err), 0);
    ASSERT_STR_EQ(r.repo, "org/repo");
    ASSERT_STR_EQ(r.file, "sub/dir/model-Q8_0.gguf");
    char name[300];
    rlx_hf_ref_default_name(&r, name, sizeof name);
    ASSERT_STR_EQ(name, "org/repo/sub/dir/model-Q8_0");
    ASSERT_EQ(parse("hf:org/repo:Q8_0", false, &r, &err), 0);
    rlx_hf_ref_default_name(&r, name, sizeof name);
    ASSERT_STR_EQ(name, "org/repo:Q8_0");
    ASSERT(rlx_hf_is_ref("hf:a/b"));
    ASSERT(!rlx_hf_is_ref("/models/hf:a.gguf"));
}

TEST(ref_served_names)
{
    rlx_hf_ref r;
    rlx_error err;
    ASSERT_EQ(parse("hf:org/repo:Q4_K_M:chat", true, &r, &err), 0);
    ASSERT_STR_EQ(r.quant, "Q4_K_M");
    ASSERT_STR_EQ(r.name, "chat");
    ASSERT_EQ(parse("hf:org/repo:chat", true, &r, &err), 0); /* not a quantization: the name */
    ASSERT_STR_EQ(r.quant, "");
    ASSERT_STR_EQ(r.name, "chat");
    ASSERT_EQ(parse("hf:org/repo:f16", true, &r, &err), 0);
    ASSERT_STR_EQ(r.quant, "F16");
    ASSERT_STR_EQ(r.name, "");
    ASSERT_EQ(parse("hf:org/repo/m.gguf:small", true, &r, &err), 0);
    ASSERT_STR_EQ(r.file, "m.gguf");
    ASSERT_STR_EQ(r.name, "small");
    /* pull takes no name */
    ASSERT_EQ(parse("hf:org/repo:Q4_K_M:chat", false, &r, &err), RLX_EINVAL);
    ASSERT_MSG(strstr(err.msg, "one :QUANT"), "%s", err.msg);
    ASSERT_EQ(parse("hf:org/repo/m.gguf:x", false, &r, &err), RLX_EINVAL);
}

TEST(ref_errors)
{
    rlx_hf_ref r;
    rlx_error err;
    static const char *bad[] = {
        "org/repo",             /* no hf: */
        "hf:",                  /* nothing */
        "hf:org",               /* no repo */
        "hf:org/",              /* empty repo */
        "hf:or--g/repo",        /* "--" is not a Hugging Face id */
        "hf:org/re..po",
        "hf:-org/repo",
        "hf:org/repo-",
        "hf:o rg/repo",
        "hf:org/repo/model.bin",    /* not .gguf */
        "hf:org/repo/../x.gguf",    /* leaves the repository */
        "hf:org/repo/a//b.gguf",
        "hf:org/repo/a\\b.gguf",
        "hf:org/repo/",
        "hf:org/repo:",             /* empty tag */
        "hf:org/repo:Q4 K",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_MSG(parse(bad[i], false, &r, &err) == RLX_EINVAL, "accepted '%s'", bad[i]);
        ASSERT_MSG(err.msg[0], "no message for '%s'", bad[i]);
    }
    char longid[128] = "hf:org/";
    memset(longid + 7, 'a', 97); /* 97 characters: one past Hugging Face's limit */
    ASSERT_EQ(parse(longid, false, &r, &err), RLX_EINVAL);
    longid[7 + 96] = 0;
    ASSERT_EQ(parse(longid, false, &r, &err), 0);
    ASSERT_EQ(parse("hf:org/repo:", true, &r, &err), RLX_EINVAL);
    ASSERT_MSG(strstr(err.msg, "empty :NAME"), "%s", err.msg);
    ASSERT_EQ(parse("hf:or--g/repo", false, &r, &err), RLX_EINVAL);
    ASSERT_MSG(strstr(err.msg, "owner"), "%s", err.msg);
    ASSERT_EQ(parse("hf:org/repo/model.bin", false, &r, &err), RLX_EINVAL);
    ASSERT_MSG(strstr(err.msg, ".gguf"), "%s", err.msg);
}

TEST(urls)
{
    char u[512];
    ASSERT_EQ(rlx_hf_file_url(u, sizeof u, "https://huggingface.co", "org/repo", "m-Q4_K_M.gguf"), 0);
    ASSERT_STR_EQ(u, "https://huggingface.co/org/repo/resolve/main/m-Q4_K_M.gguf");
    ASSERT_EQ(rlx_hf_file_url(u, sizeof u, "http://127.0.0.1:9/mirror//", "org/repo", "sub dir/m+1.gguf"), 0);
    ASSERT_STR_EQ(u, "http://127.0.0.1:9/mirror/org/repo/resolve/main/sub%20dir/m%2B1.gguf");
    ASSERT_EQ(rlx_hf_api_url(u, sizeof u, "https://hf-mirror.com/", "org/repo"), 0);
    ASSERT_STR_EQ(u, "https://hf-mirror.com/api/models/org/repo");
    char small[40];
    ASSERT_EQ(rlx_hf_file_url(small, sizeof small, "https://huggingface.co", "org/repo", "model.gguf"), RLX_ERANGE);
    ASSERT_EQ(rlx_hf_local_dir(u, sizeof u, "/c/rlxd/models", "org/repo"), 0);
    ASSERT_STR_EQ(u, "/c/rlxd/models/org--repo");
}

TEST(quant_tags)
{
    ASSERT(rlx_hf_name_has_quant("Qwen3-8B-Q4_K_M.gguf", "Q4_K_M"));
    ASSERT(rlx_hf_name_has_quant("qwen3-8b-q4_k_m.gguf", "Q4_K_M"));
    ASSERT(rlx_hf_name_has_quant("model.Q8_0.gguf", "Q8_0"));
    ASSERT(rlx_hf_name_has_quant("m-Q4_K_M-00001-of-00003.gguf", "Q4_K_M"));
    ASSERT(rlx_hf_name_has_quant("Q4_K_M/m-00001-of-00003.gguf", "Q4_K_M"));
    ASSERT(rlx_hf_name_has_quant("x-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"));
    ASSERT(rlx_hf_name_has_quant("x-UD-Q4_K_XL.gguf", "Q4_K_XL"));
    ASSERT(!rlx_hf_name_has_quant("m-Q4_K_M.gguf", "Q4_K"));   /* a longer tag */
    ASSERT(!rlx_hf_name_has_quant("m-IQ4_XS.gguf", "Q4_XS"));   /* inside another tag */
    ASSERT(!rlx_hf_name_has_quant("m-Q8_0.gguf", "Q4_K_M"));
    ASSERT(!rlx_hf_name_has_quant("m-Q8_0.gguf", ""));
}

static int pick(const char *const *names, size_t n, const char *ref, char ***files, size_t *nf, rlx_error *err)
{
    rlx_hf_ref r;
    memset(err, 0, sizeof *err);
    if (rlx_hf_ref_parse(ref, false, &r, err)) return 99;
    return rlx_hf_pick(names, n, &r, files, nf, err);
}

TEST(pick)
{
    static const char *const names[] = {
        ".gitattributes", "README.md", "m-F16.gguf", "m-Q8_0.gguf", "m-Q5_K_M.gguf", "mmproj-m-Q4_K_M.gguf",
        "big/m-Q6_K-00002-of-00003.gguf", "big/m-Q6_K-00001-of-00003.gguf", "big/m-Q6_K-00003-of-00003.gguf",
        "half/m-Q4_0-00001-of-00002.gguf", "two/a-IQ2_XS.gguf", "two/b-IQ2_XS.gguf",
    };
    size_t nn = sizeof names / sizeof names[0], nf = 0;
    char **f = NULL;
    rlx_error err;
    /* default order: Q4_K_M is only a projector's (left out), Q5_K_M next */
    ASSERT_EQ(pick(names, nn, "hf:o/r", &f, &nf, &err), 0);
    ASSERT_EQ(nf, 1);
    ASSERT_STR_EQ(f[0], "m-Q5_K_M.gguf");
    rlx_hf_files_free(f, nf);
    ASSERT_EQ(pick(names, nn, "hf:o/r:q8_0", &f, &nf, &err), 0);
    ASSERT_STR_EQ(f[0], "m-Q8_0.gguf");
    rlx_hf_files_free(f, nf);
    /* a split model: every part, part 1 first, whichever part was named */
    ASSERT_EQ(pick(names, nn, "hf:o/r:Q6_K", &f, &nf, &err), 0);
    ASSERT_EQ(nf, 3);
    ASSERT_STR_EQ(f[0], "big/m-Q6_K-00001-of-00003.gguf");
    ASSERT_STR_EQ(f[2], "big/m-Q6_K-00003-of-00003.gguf");
    rlx_hf_files_free(f, nf);
    ASSERT_EQ(pick(names, nn, "hf:o/r/big/m-Q6_K-00003-of-00003.gguf", &f, &nf, &err), 0);
    ASSERT_EQ(nf, 3);
    ASSERT_STR_EQ(f[0], "big/m-Q6_K-00001-of-00003.gguf");
    rlx_hf_files_free(f, nf);
    /* a part missing from the listing */
    ASSERT_EQ(pick(names, nn, "hf:o/r:Q4_0", &f, &nf, &err), RLX_ENOTFOUND);
    ASSERT_MSG(strstr(err.msg, "half/m-Q4_0-00002-of-00002.gguf"), "%s", err.msg);
    /* absent quantization: the files there are listed */
    ASSERT_EQ(pick(names, nn, "hf:o/r:Q2_K", &f, &nf, &err), RLX_ENOTFOUND);
    ASSERT_MSG(strstr(err.msg, "no Q2_K") && strstr(err.msg, "m-F16.gguf"), "%s", err.msg);
    /* two models with the tag: name one */
    ASSERT_EQ(pick(names, nn, "hf:o/r:IQ2_XS", &f, &nf, &err), RLX_EINVAL);
    ASSERT_MSG(strstr(err.msg, "two/a-IQ2_XS.gguf") && strstr(err.msg, "two/b-IQ2_XS.gguf"), "%s", err.msg);
    /* a named file must be listed */
    ASSERT_EQ(pick(names, nn, "hf:o/r/nope.gguf", &f, &nf, &err), RLX_ENOTFOUND);
    ASSERT_EQ(pick(names, nn, "hf:o/r/m-F16.gguf", &f, &nf, &err), 0);
    ASSERT_STR_EQ(f[0], "m-F16.gguf");
    rlx_hf_files_free(f, nf);
    /* without a listing (a named file is fetched as named; a split part expands by name) */
    ASSERT_EQ(pick(NULL, 0, "hf:o/r/x-00002-of-00002.gguf", &f, &nf, &err), 0);
    ASSERT_EQ(nf, 2);
    ASSERT_STR_EQ(f[0], "x-00001-of-00002.gguf");
    ASSERT_STR_EQ(f[1], "x-00002-of-00002.gguf");
    rlx_hf_files_free(f, nf);
    /* no tag anywhere: the only model, else an error */
    static const char *const one[] = {"README.md", "model.gguf"};
    ASSERT_EQ(pick(one, 2, "hf:o/r", &f, &nf, &err), 0);
    ASSERT_STR_EQ(f[0], "model.gguf");
    rlx_hf_files_free(f, nf);
    static const char *const two[] = {"a.gguf", "b.gguf"};
    ASSERT_EQ(pick(two, 2, "hf:o/r", &f, &nf, &err), RLX_EINVAL);
    static const char *const none[] = {"README.md"};
    ASSERT_EQ(pick(none, 1, "hf:o/r", &f, &nf, &err), RLX_ENOTFOUND);
    ASSERT_MSG(strstr(err.msg, "no GGUF"), "%s", err.msg);
}

TEST(listing)
{
    char **n = NULL;
    size_t k = 0;
    rlx_error err = {0};
    ASSERT_EQ(rlx_hf_listing_names("{\"id\":\"o/r\",\"siblings\":[{\"rfilename\":\"a.gguf\"},{\"rfilename\":\"../x\"},"
                                   "{\"x\":1},{\"rfilename\":\"d/b.gguf\"}]}", &n, &k, &err), 0);
    ASSERT_EQ(k, 2); /* a name leaving the repository is dropped */
    ASSERT_STR_EQ(n[0], "a.gguf");
    ASSERT_STR_EQ(n[1], "d/b.gguf");
    rlx_hf_files_free(n, k);
    ASSERT_EQ(rlx_hf_listing_names("{\"error\":\"Repository not found\"}", &n, &k, &err), RLX_EFORMAT);
    ASSERT_EQ(rlx_hf_listing_names("<html>", &n, &k, &err), RLX_EFORMAT);
}

static void sha(const void *d, size_t n, char out[65])
{
    rlx_sha256 s;
    rlx_sha256_init(&s);
    rlx_sha256_update(&s, d, n);
    rlx_sha256_hex(&s, out);
}

TEST(local_names)
{
    char b[300], back[300];
    static const char *paths[] = {"m-Q8_0.gguf", "Q4_K_M/model.gguf", "a/b/c-00001-of-00002.gguf", "50%/x.gguf",
                                  "a%2Fb.gguf"};
    static const char *names[] = {"m-Q8_0.gguf", "Q4_K_M%2Fmodel.gguf", "a%2Fb%2Fc-00001-of-00002.gguf",
                                  "50%25%2Fx.gguf", "a%252Fb.gguf"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        ASSERT_EQ(rlx_hf_local_name(b, sizeof b, paths[i]), 0);
        ASSERT_STR_EQ(b, names[i]);
        ASSERT(rlx_hf_local_path(b, back, sizeof back));
        ASSERT_STR_EQ(back, paths[i]);
    }
    /* two subfolders' files of one base name stay apart */
    char q4[300], q8[300];
    ASSERT_EQ(rlx_hf_local_name(q4, sizeof q4, "Q4_K_M/model.gguf"), 0);
    ASSERT_EQ(rlx_hf_local_name(q8, sizeof q8, "Q8_0/model.gguf"), 0);
    ASSERT(strcmp(q4, q8));
    /* names no download writes are not read back */
    ASSERT(!rlx_hf_local_path("x%41.gguf", back, sizeof back));
    ASSERT(!rlx_hf_local_path("a%2f.gguf", back, sizeof back));
    ASSERT(!rlx_hf_local_path("%2E%2E%2Fx.gguf", back, sizeof back));
    ASSERT(!rlx_hf_local_path("..%2Fx.gguf", back, sizeof back));
    /* too long for a file name (with ".part.etag") */
    char longp[400];
    memset(longp, 'a', 240);
    strcpy(longp + 240, ".gguf");
    ASSERT_EQ(rlx_hf_local_name(b, sizeof b, longp), 0); /* 245: the most */
    memset(longp, 'a', 241);
    strcpy(longp + 241, ".gguf");
    ASSERT_EQ(rlx_hf_local_name(b, sizeof b, longp), RLX_ERANGE);
    /* the local names of a split model's parts are a split model's names: the loader finds part 2 */
    ASSERT_EQ(rlx_hf_local_name(b, sizeof b, "Q8_0/m-Q8_0-00001-of-00002.gguf"), 0);
    char prefix[300];
    ASSERT(rlx_gguf_split_parse_name(b, prefix, sizeof prefix, NULL, NULL));
    ASSERT_STR_EQ(prefix, "Q8_0%2Fm-Q8_0");
    /* a pick among local names read back: :QUANT finds the subfolder's file */
    const char *have[] = {"Q4_K_M/model.gguf", "Q8_0/model.gguf"};
    rlx_hf_ref r;
    rlx_error err = {0};
    ASSERT_EQ(rlx_hf_ref_parse("hf:o/r:Q8_0", false, &r, &err), 0);
    char **f = NULL;
    size_t nf = 0;
    ASSERT_EQ(rlx_hf_pick(have, 2, &r, &f, &nf, &err), 0);
    ASSERT_STR_EQ(f[0], "Q8_0/model.gguf");
    rlx_hf_files_free(f, nf);
}

TEST(long_names_keep_the_reason)
{
    /* a split part 1 of 495 characters, part 2 absent: the message still says why */
    char first[600];
    memset(first, 'x', 470);
    strcpy(first + 470, "-Q8_0-00001-of-00002.gguf");
    const char *names[] = {first};
    rlx_hf_ref r;
    rlx_error err = {0};
    ASSERT_EQ(rlx_hf_ref_parse("hf:o/r:Q8_0", false, &r, &err), 0);
    char **f = NULL;
    size_t nf = 0;
    ASSERT_EQ(rlx_hf_pick(names, 1, &r, &f, &nf, &err), RLX_ENOTFOUND);
    ASSERT_MSG(strstr(err.msg, "part(s) are missing: xxx"), "%s", err.msg);
    /* a name longer than any buffer of the pick is taken whole, not cut short */
    char *huge = malloc(1300);
    ASSERT(huge);
    for (int i = 0; i < 600; i++) memcpy(huge + 2 * i, "a/", 2);
    strcpy(huge + 1200, "m-Q8_0.gguf");
    const char *one[] = {huge};
    ASSERT_EQ(rlx_hf_ref_parse("hf:o/r", false, &r, &err), 0);
    ASSERT_EQ(rlx_hf_pick(one, 1, &r, &f, &nf, &err), 0);
    ASSERT_STR_EQ(f[0], huge);
    rlx_hf_files_free(f, nf);
    free(huge);
}

TEST(pull_token_and_text)
{
    rlx_error err = {0};
    char *t = NULL;
    ASSERT_EQ(rlx__pull_clean_token("  hf_abc\r\n", "HF_TOKEN", &t, &err), 0);
    ASSERT_STR_EQ(t, "hf_abc");
    free(t);
    ASSERT_EQ(rlx__pull_clean_token("hf_a\r\nX-Injected: 1", "HF_TOKEN", &t, &err), 0);
    ASSERT(!strchr(t, '\r') && !strchr(t, '\n'));
    free(t);
    ASSERT_EQ(rlx__pull_clean_token("hf_se\x1b" "cret", "--token", &t, &err), RLX_EINVAL);
    ASSERT(!t);
    ASSERT_MSG(strstr(err.msg, "--token") && !strstr(err.msg, "hf_se"), "%s", err.msg);
    ASSERT_EQ(rlx__pull_clean_token(" \r\n", "HF_TOKEN", &t, &err), 0);
    ASSERT(!t); /* nothing left: no token */
    char out[64];
    rlx__pull_printable("a\x1b[31mb\rc\xc2\x9b" "d \xc3\xa9\xff", out, sizeof out);
    ASSERT_STR_EQ(out, "a\\x1b[31mb\\x0dc\\xc2\\x9bd \xc3\xa9\\xff");
    char buf[16];
    ASSERT_EQ(rlx__pull_path(&err, buf, sizeof buf, "%s/%s", "/a/long/folder", "x"), RLX_ERANGE);
    ASSERT_MSG(strstr(err.msg, "path too long") && strstr(err.msg, "/a/long/folder"), "%s", err.msg);
}

TEST(pull_check_gguf)
{
    char dir[] = "/tmp/rlx-test-hf-XXXXXX", p[64];
    ASSERT(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/f.gguf", dir);
    rlx_error err = {0};
    FILE *f = fopen(p, "wb");
    ASSERT(f);
    fputs("<html>rate limited</html>", f);
    fclose(f);
    ASSERT_EQ(rlx__pull_check_gguf(p, -1, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "not a GGUF file (it begins '<htm')"), "%s", err.msg);
    ASSERT_EQ(rlx__pull_check_gguf(p, 3, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "stated 3 bytes"), "%s", err.msg);
    f = fopen(p, "wb");
    ASSERT(f);
    fclose(f);
    ASSERT_EQ(rlx__pull_check_gguf(p, -1, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "empty"), "%s", err.msg);
    /* the magic and a header that promises more than there is */
    f = fopen(p, "wb");
    ASSERT(f);
    fwrite("GGUF\x03\0\0\0\x05\0\0\0\0\0\0\0", 1, 16, f);
    fclose(f);
    ASSERT_EQ(rlx__pull_check_gguf(p, -1, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "not a whole GGUF file"), "%s", err.msg);
    unlink(p);
    rmdir(dir);
}

TEST(sha256_vectors)
{
    char h[65];
    sha("", 0, h);
    ASSERT_STR_EQ(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha("abc", 3, h);
    ASSERT_STR_EQ(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha(m, strlen(m), h);
    ASSERT_STR_EQ(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* one million 'a', fed in uneven pieces: the block boundary handling */
    rlx_sha256 s;
    rlx_sha256_init(&s);
    char a[997];
    memset(a, 'a', sizeof a);
    size_t left = 1000000;
    for (size_t k = 1; left; k = k % 997 + 1) {
        size_t n = k < left ? k : left;
        rlx_sha256_update(&s, a, n);
        left -= n;
    }
    rlx_sha256_hex(&s, h);
    ASSERT_STR_EQ(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* a file */
    char path[] = "/tmp/rlx_test_sha_XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    ASSERT_EQ(write(fd, "abc", 3), 3);
    close(fd);
    ASSERT_EQ(rlx_sha256_file(path, h), 0);
    ASSERT_STR_EQ(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    unlink(path);
    ASSERT_EQ(rlx_sha256_file(path, h), -1);
}

TEST_MAIN(TEST_ENTRY(ref_forms), TEST_ENTRY(ref_served_names), TEST_ENTRY(ref_errors), TEST_ENTRY(urls),
          TEST_ENTRY(quant_tags), TEST_ENTRY(pick), TEST_ENTRY(listing), TEST_ENTRY(local_names),
          TEST_ENTRY(long_names_keep_the_reason), TEST_ENTRY(pull_token_and_text), TEST_ENTRY(pull_check_gguf),
          TEST_ENTRY(sha256_vectors))
