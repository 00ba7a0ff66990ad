/* test_gguf_split.c - split GGUF (models/gguf_split.c, rlx_gguf_writer_write_split): part names,
 * the writer's layout (gguf-split's keys and tensor distribution), opening any part as one
 * model, and the errors: missing parts (all named), a corrupt part, parts that disagree. */
#include "models/gguf.h"
#include "backends/dtype.h"
#include "tests/rlx_test.h"
#include "tests/rlx_test_tmp.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_T 7


/* A model of N_T f32 tensors t0..t6 (tensor i has i+1 rows of 8 values i*100 + j). */
static rlx_gguf_writer *make_writer(void)
{
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    if (!w) return NULL;
    rlx_gguf_writer_set_str(w, "general.architecture", "llama", 5);
    rlx_gguf_writer_set_u32(w, "llama.block_count", 3);
    for (int i = 0; i < N_T; i++) {
        float v[8 * N_T];
        for (int j = 0; j < 8 * (i + 1); j++) v[j] = (float)(i * 100 + j);
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        int64_t ne[2] = {8, i + 1};
        rlx_gguf_writer_add_tensor(w, name, RLX_F32, 2, ne, v, sizeof(float) * 8 * (size_t)(i + 1));
    }
    return w;
}

/* Writes BASE.gguf split in n parts in the test folder; returns 0 or an RLX_E* code. */
static int write_split(const char *base, uint32_t n, rlx_error *err)
{
    rlx_gguf_writer *w = make_writer();
    char path[128];
    snprintf(path, sizeof path, "%s.gguf", base);
    int rc = rlx_gguf_writer_write_split(w, rlx_test_tmp_path(path), n, err);
    rlx_gguf_writer_free(w);
    return rc;
}

static const char *part(const char *base, uint32_t no, uint32_t count)
{
    char name[128];
    snprintf(name, sizeof name, "%s-%05u-of-%05u.gguf", base, no, count);
    return rlx_test_tmp_path(name);
}

TEST(names)
{
    char prefix[64];
    uint32_t no, count;
    ASSERT(rlx_gguf_split_parse_name("/m/Qwen3-8B-Q4_K_M-00002-of-00003.gguf", prefix, sizeof prefix, &no, &count));
    ASSERT_STR_EQ(prefix, "/m/Qwen3-8B-Q4_K_M");
    ASSERT_EQ(no, 2);
    ASSERT_EQ(count, 3);
    ASSERT(!rlx_gguf_split_parse_name("model.gguf", NULL, 0, NULL, NULL));
    ASSERT(!rlx_gguf_split_parse_name("m-00004-of-00003.gguf", NULL, 0, NULL, NULL));  /* no > count */
    ASSERT(!rlx_gguf_split_parse_name("m-00000-of-00003.gguf", NULL, 0, NULL, NULL));  /* 1-based */
    ASSERT(!rlx_gguf_split_parse_name("m-0001-of-00003.gguf", NULL, 0, NULL, NULL));
    ASSERT(!rlx_gguf_split_parse_name("d/-00001-of-00003.gguf", NULL, 0, NULL, NULL));   /* no prefix */
    ASSERT(!rlx_gguf_split_parse_name("m-00001-of-00003.gguf", prefix, 1, NULL, NULL)); /* does not fit */
    char buf[64];
    ASSERT_EQ(rlx_gguf_split_name(buf, sizeof buf, "a/b", 0, 12), 0);
    ASSERT_STR_EQ(buf, "a/b-00001-of-00012.gguf");
    ASSERT_EQ(rlx_gguf_split_name(buf, 8, "a/b", 0, 12), RLX_EINVAL);
}

TEST(writer_layout)
{
    rlx_error err = {0};
    ASSERT_MSG(write_split("lay", 3, &err) == 0, "%s", err.msg);
    /* gguf-split --split-max-tensors 3: 3 + 3 + 1; metadata in the first part only */
    const int want_t[3] = {3, 3, 1};
    for (uint32_t p = 0; p < 3; p++) {
        rlx_gguf *g;
        ASSERT_MSG(rlx_gguf_open(&g, part("lay", p + 1, 3), &err) == 0, "%s", err.msg);
        uint32_t no, count, u;
        int64_t total;
        ASSERT_EQ(rlx_gguf_split_keys(g, &no, &count, &err), 0);
        ASSERT_EQ(no, p);
        ASSERT_EQ(count, 3);
        ASSERT_EQ(rlx_gguf_find(g, "split.no")->type, RLX_GGUF_UINT16);
        ASSERT_EQ(rlx_gguf_find(g, "split.count")->type, RLX_GGUF_UINT16);
        ASSERT_EQ(rlx_gguf_find(g, "split.tensors.count")->type, RLX_GGUF_INT32);
        ASSERT_EQ(rlx_gguf_get_i64(g, "split.tensors.count", &total, &err), 0);
        ASSERT_EQ(total, N_T);
        ASSERT_EQ(rlx_gguf_n_tensors(g), want_t[p]);
        ASSERT_EQ(rlx_gguf_get_u32(g, "llama.block_count", &u, &err), p == 0 ? 0 : RLX_ENOTFOUND);
        ASSERT_EQ(rlx_gguf_n_parts(g), 1);
        rlx_gguf_close(g);
    }
    ASSERT_EQ(access(part("lay", 1, 4), F_OK), -1);
    /* 7 tensors cannot make 6 non-empty parts of equal size, nor 8 parts */
    ASSERT_NE(write_split("bad6", 6, &err), 0);
    ASSERT(strstr(err.msg, "try 4 parts"));
    ASSERT_NE(write_split("bad8", 8, &err), 0);
    ASSERT(strstr(err.msg, "each part needs a tensor"));
    ASSERT_EQ(access(part("bad6", 1, 6), F_OK), -1);
    /* 1 part: a plain file without split keys */
    ASSERT_EQ(write_split("plain", 1, &err), 0);
    rlx_gguf *g;
    ASSERT_MSG(rlx_gguf_open(&g, rlx_test_tmp_path("plain.gguf"), &err) == 0, "%s", err.msg);
    ASSERT(!rlx_gguf_find(g, "split.count"));
    rlx_gguf_close(g);
}

TEST(open_any_part)
{
    rlx_error err = {0};
    ASSERT_MSG(write_split("any", 3, &err) == 0, "%s", err.msg);
    for (uint32_t p = 1; p <= 3; p++) {
        rlx_gguf *g;
        ASSERT_MSG(rlx_gguf_open_split(&g, part("any", p, 3), &err) == 0, "%s", err.msg);
        ASSERT_STR_EQ(rlx_gguf_path(g), part("any", 1, 3)); /* the first part, whichever was named */
        ASSERT_EQ(rlx_gguf_n_parts(g), 3);
        ASSERT_STR_EQ(rlx_gguf_part_path(g, 2), part("any", 3, 3));
        ASSERT(!rlx_gguf_part_path(g, 3));
        ASSERT_EQ(rlx_gguf_n_tensors(g), N_T);
        uint32_t u;
        ASSERT_EQ(rlx_gguf_get_u32(g, "llama.block_count", &u, &err), 0);
        ASSERT_EQ(u, 3);
        for (int i = 0; i < N_T; i++) {
            char name[16];
            snprintf(name, sizeof name, "t%d", i);
            const rlx_gguf_tensor *t = rlx_gguf_find_tensor(g, name);
            ASSERT_MSG(t, "tensor %s not found", name);
            ASSERT(t == rlx_gguf_tensor_at(g, (uint64_t)i)); /* in the original order */
            ASSERT_EQ(t->ne[1], i + 1);
            const float *v = t->data;
            for (int j = 0; j < 8 * (i + 1); j++) ASSERT_EQ(v[j], i * 100 + j);
        }
        ASSERT(!rlx_gguf_find_tensor(g, "t7"));
        rlx_gguf_close(g);
    }
    /* a plain file opens as itself */
    ASSERT_EQ(write_split("single", 1, &err), 0);
    rlx_gguf *g;
    ASSERT_MSG(rlx_gguf_open_split(&g, rlx_test_tmp_path("single.gguf"), &err) == 0, "%s", err.msg);
    ASSERT_EQ(rlx_gguf_n_parts(g), 1);
    ASSERT_EQ(rlx_gguf_n_tensors(g), N_T);
    rlx_gguf_close(g);
}

TEST(missing_parts_named)
{
    rlx_error err = {0};
    ASSERT_MSG(write_split("miss", 4, &err) == 0, "%s", err.msg);
    ASSERT_EQ(unlink(part("miss", 2, 4)), 0);
    ASSERT_EQ(unlink(part("miss", 4, 4)), 0);
    rlx_gguf *g = (rlx_gguf *)1;
    ASSERT_EQ(rlx_gguf_open_split(&g, part("miss", 3, 4), &err), RLX_ENOTFOUND);
    ASSERT(!g);
    ASSERT_MSG(strstr(err.msg, "2 of its 4 parts are missing") && strstr(err.msg, part("miss", 2, 4)) &&
               strstr(err.msg, part("miss", 4, 4)) && !strstr(err.msg, part("miss", 1, 4)), "%s", err.msg);
}

static void corrupt(const char *path, long at, const char *bytes, size_t n)
{
    FILE *f = fopen(path, "r+b");
    if (!f) return;
    fseek(f, at, SEEK_SET);
    fwrite(bytes, 1, n, f);
    fclose(f);
}

TEST(bad_parts)
{
    rlx_error err = {0};
    rlx_gguf *g;
    /* a truncated part: its parse error, naming it */
    ASSERT_MSG(write_split("cut", 3, &err) == 0, "%s", err.msg);
    ASSERT_EQ(truncate(part("cut", 3, 3), 100), 0);
    ASSERT_NE(rlx_gguf_open_split(&g, part("cut", 1, 3), &err), 0);
    ASSERT_MSG(strstr(err.msg, part("cut", 3, 3)) && strstr(err.msg, "truncated"), "%s", err.msg);
    /* a part that is not GGUF at all */
    ASSERT_MSG(write_split("magic", 3, &err) == 0, "%s", err.msg);
    corrupt(part("magic", 2, 3), 0, "GGML", 4);
    ASSERT_NE(rlx_gguf_open_split(&g, part("magic", 1, 3), &err), 0);
    ASSERT_MSG(strstr(err.msg, part("magic", 2, 3)) && strstr(err.msg, "not a GGUF file"), "%s", err.msg);
    /* parts 2 and 3 swapped: split.no disagrees with the name */
    ASSERT_MSG(write_split("swap", 3, &err) == 0, "%s", err.msg);
    ASSERT_EQ(rename(part("swap", 2, 3), rlx_test_tmp_path("x.gguf")), 0);
    ASSERT_EQ(rename(part("swap", 3, 3), part("swap", 2, 3)), 0);
    ASSERT_EQ(rename(rlx_test_tmp_path("x.gguf"), part("swap", 3, 3)), 0);
    ASSERT_NE(rlx_gguf_open_split(&g, part("swap", 1, 3), &err), 0);
    ASSERT_MSG(strstr(err.msg, "says it is part 3 of 3") && strstr(err.msg, "makes it part 2 of 3"), "%s", err.msg);
    /* a part of another split (count 4 among parts of 3) */
    ASSERT_MSG(write_split("other", 4, &err) == 0, "%s", err.msg);
    ASSERT_MSG(write_split("mix", 3, &err) == 0, "%s", err.msg);
    ASSERT_EQ(rename(part("other", 2, 4), part("mix", 2, 3)), 0);
    ASSERT_NE(rlx_gguf_open_split(&g, part("mix", 1, 3), &err), 0);
    ASSERT_MSG(strstr(err.msg, "part 2 of 4"), "%s", err.msg);
    /* a part renamed so its name does not match its keys */
    ASSERT_MSG(write_split("ren", 3, &err) == 0, "%s", err.msg);
    ASSERT_EQ(rename(part("ren", 1, 3), rlx_test_tmp_path("ren.gguf")), 0);
    ASSERT_NE(rlx_gguf_open_split(&g, rlx_test_tmp_path("ren.gguf"), &err), 0);
    ASSERT_MSG(strstr(err.msg, "does not end in -00001-of-00003.gguf"), "%s", err.msg);
}

TEST(tensor_count_and_duplicates)
{
    rlx_error err = {0};
    rlx_gguf *g;
    /* split.tensors.count says 7; make a 2-part model whose parts say otherwise */
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    float v[8] = {0};
    int64_t ne[1] = {8};
    rlx_gguf_writer_add_tensor(w, "a", RLX_F32, 1, ne, v, sizeof v);
    rlx_gguf_writer_add_tensor(w, "a2", RLX_F32, 1, ne, v, sizeof v);
    ASSERT_EQ(rlx_gguf_writer_write_split(w, rlx_test_tmp_path("dup.gguf"), 2, &err), 0);
    rlx_gguf_writer_free(w);
    /* rewrite part 2 holding "a" again: a tensor in two parts */
    w = rlx_gguf_writer_new();
    rlx_gguf_writer_set_u32(w, "split.no", 1);
    rlx_gguf_writer_set_u32(w, "split.count", 2);
    rlx_gguf_writer_set_i32(w, "split.tensors.count", 2);
    rlx_gguf_writer_add_tensor(w, "a", RLX_F32, 1, ne, v, sizeof v);
    ASSERT_EQ(rlx_gguf_writer_write(w, part("dup", 2, 2), &err), 0);
    rlx_gguf_writer_free(w);
    ASSERT_NE(rlx_gguf_open_split(&g, part("dup", 1, 2), &err), 0);
    ASSERT_MSG(strstr(err.msg, "tensor 'a' is in two split parts"), "%s", err.msg);
    /* the same part saying 3 tensors in all */
    w = rlx_gguf_writer_new();
    rlx_gguf_writer_set_u32(w, "split.no", 1);
    rlx_gguf_writer_set_u32(w, "split.count", 2);
    rlx_gguf_writer_set_i32(w, "split.tensors.count", 3);
    rlx_gguf_writer_add_tensor(w, "a2", RLX_F32, 1, ne, v, sizeof v);
    ASSERT_EQ(rlx_gguf_writer_write(w, part("dup", 2, 2), &err), 0);
    rlx_gguf_writer_free(w);
    ASSERT_NE(rlx_gguf_open_split(&g, part("dup", 1, 2), &err), 0);
    ASSERT_MSG(strstr(err.msg, "split.tensors.count 3 disagrees"), "%s", err.msg);
    /* and a writer that already has split keys refuses to split */
    w = rlx_gguf_writer_new();
    rlx_gguf_writer_set_u32(w, "split.count", 2);
    rlx_gguf_writer_add_tensor(w, "a", RLX_F32, 1, ne, v, sizeof v);
    rlx_gguf_writer_add_tensor(w, "b", RLX_F32, 1, ne, v, sizeof v);
    ASSERT_EQ(rlx_gguf_writer_write_split(w, rlx_test_tmp_path("keys.gguf"), 2, &err), RLX_EINVAL);
    rlx_gguf_writer_free(w);
}

/* gguf-split --no-tensor-first-split: the first part holds only metadata */
TEST(metadata_only_first_part)
{
    rlx_error err = {0};
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    rlx_gguf_writer_set_str(w, "general.architecture", "llama", 5);
    rlx_gguf_writer_set_u32(w, "split.no", 0);
    rlx_gguf_writer_set_u32(w, "split.count", 2);
    rlx_gguf_writer_set_i32(w, "split.tensors.count", 1);
    ASSERT_MSG(rlx_gguf_writer_write(w, part("meta", 1, 2), &err) == 0, "%s", err.msg);
    rlx_gguf_writer_free(w);
    w = rlx_gguf_writer_new();
    rlx_gguf_writer_set_u32(w, "split.no", 1);
    rlx_gguf_writer_set_u32(w, "split.count", 2);
    rlx_gguf_writer_set_i32(w, "split.tensors.count", 1);
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t ne[1] = {8};
    rlx_gguf_writer_add_tensor(w, "only", RLX_F32, 1, ne, v, sizeof v);
    ASSERT_MSG(rlx_gguf_writer_write(w, part("meta", 2, 2), &err) == 0, "%s", err.msg);
    rlx_gguf_writer_free(w);
    rlx_gguf *g;
    ASSERT_MSG(rlx_gguf_open_split(&g, part("meta", 1, 2), &err) == 0, "%s", err.msg);
    ASSERT_EQ(rlx_gguf_n_tensors(g), 1);
    const rlx_gguf_tensor *t = rlx_gguf_find_tensor(g, "only");
    ASSERT(t && ((const float *)t->data)[7] == 8.0f);
    rlx_gguf_str s;
    ASSERT_EQ(rlx_gguf_get_str(g, "general.architecture", &s, &err), 0);
    rlx_gguf_close(g);
}


int main(void)
{
    static const rlx_test_case cases[] = {
        TEST_ENTRY(names), TEST_ENTRY(writer_layout), TEST_ENTRY(open_any_part),
        TEST_ENTRY(missing_parts_named), TEST_ENTRY(bad_parts), TEST_ENTRY(tensor_count_and_duplicates),
        TEST_ENTRY(metadata_only_first_part),
    };
    return rlx_test_run(cases, sizeof cases / sizeof cases[0]);
}
