/* test_stop.c - the hold-back stop-string matcher (engine/stop.c). */
#include "tests/rlx_test.h"
#include "engine/stop.h"

/* Feeds pieces, concatenating what is released; returns whether a stop matched. */
static int run(const char *const *stops, size_t n_stop, const char *const *pieces, size_t n,
               char *got, size_t cap, size_t *max_held_visible)
{
    rlx_stop_matcher m;
    if (rlx_stop_init(&m, (char *const *)stops, n_stop, NULL)) return -1;
    got[0] = 0;
    int matched = 0;
    for (size_t i = 0; i < n && !matched; i++) {
        const char *out;
        size_t len;
        matched = rlx_stop_push(&m, pieces[i], strlen(pieces[i]), &out, &len);
        strncat(got, out, cap - strlen(got) - 1);
        if (max_held_visible && len > *max_held_visible) *max_held_visible = len;
    }
    if (!matched) {
        const char *out;
        size_t len;
        rlx_stop_flush(&m, &out, &len);
        strncat(got, out, cap - strlen(got) - 1);
    }
    rlx_stop_free(&m);
    return matched;
}

TEST(no_stops_pass_through)
{
    const char *p[] = {"ab", "", "c"};
    char got[64];
    ASSERT_EQ(run(NULL, 0, p, 3, got, sizeof got, NULL), 0);
    ASSERT_STR_EQ(got, "abc");
}

TEST(match_across_pieces_hides_every_byte)
{
    const char *stops[] = {"STOP"};
    const char *p[] = {"hello S", "T", "O", "P world"};
    char got[64];
    ASSERT_EQ(run(stops, 1, p, 4, got, sizeof got, NULL), 1);
    ASSERT_STR_EQ(got, "hello ");
}

TEST(partial_prefix_released_when_it_diverges)
{
    const char *stops[] = {"STOP"};
    const char *p[] = {"a ST", "ART b"};
    rlx_stop_matcher m;
    ASSERT_EQ(rlx_stop_init(&m, (char *const *)stops, 1, NULL), 0);
    const char *out;
    size_t len;
    ASSERT_EQ(rlx_stop_push(&m, p[0], strlen(p[0]), &out, &len), 0);
    ASSERT_EQ(len, 2);          /* "ST" held back */
    ASSERT(!memcmp(out, "a ", 2));
    ASSERT_EQ(rlx_stop_push(&m, p[1], strlen(p[1]), &out, &len), 0);
    ASSERT_EQ(len, 7);
    ASSERT(!memcmp(out, "START b", 7));
    rlx_stop_flush(&m, &out, &len);
    ASSERT_EQ(len, 0);
    rlx_stop_free(&m);
}

TEST(earliest_of_several_wins)
{
    const char *stops[] = {"world", "lo w"};
    const char *p[] = {"hello world"};
    char got[64];
    ASSERT_EQ(run(stops, 2, p, 1, got, sizeof got, NULL), 1);
    ASSERT_STR_EQ(got, "hel");
}

TEST(flush_releases_held_text_at_end)
{
    const char *stops[] = {"\n\n"};
    const char *p[] = {"line\n"};
    char got[64];
    ASSERT_EQ(run(stops, 1, p, 1, got, sizeof got, NULL), 0);
    ASSERT_STR_EQ(got, "line\n");
}

TEST(overlapping_prefix)
{
    /* "aab" inside "aaab": the held "aa" must not lose the match */
    const char *stops[] = {"aab"};
    const char *p[] = {"x", "a", "a", "a", "b", "y"};
    char got[64];
    ASSERT_EQ(run(stops, 1, p, 6, got, sizeof got, NULL), 1);
    ASSERT_STR_EQ(got, "xa");
}

TEST(after_match_nothing_more)
{
    const char *stops[] = {"."};
    rlx_stop_matcher m;
    ASSERT_EQ(rlx_stop_init(&m, (char *const *)stops, 1, NULL), 0);
    const char *out;
    size_t len;
    ASSERT_EQ(rlx_stop_push(&m, "a.b", 3, &out, &len), 1);
    ASSERT_EQ(len, 1);
    ASSERT_EQ(rlx_stop_push(&m, "cd", 2, &out, &len), 1);
    ASSERT_EQ(len, 0);
    rlx_stop_flush(&m, &out, &len);
    ASSERT_EQ(len, 0);
    rlx_stop_free(&m);
}

TEST(empty_stop_rejected)
{
    const char *stops[] = {"ok", ""};
    rlx_stop_matcher m;
    rlx_error err = {0};
    ASSERT_EQ(rlx_stop_init(&m, (char *const *)stops, 2, &err), RLX_EINVAL);
    ASSERT(strstr(err.msg, "empty") != NULL);
}

TEST_MAIN(TEST_ENTRY(no_stops_pass_through), TEST_ENTRY(match_across_pieces_hides_every_byte),
          TEST_ENTRY(partial_prefix_released_when_it_diverges), TEST_ENTRY(earliest_of_several_wins),
          TEST_ENTRY(flush_releases_held_text_at_end), TEST_ENTRY(overlapping_prefix),
          TEST_ENTRY(after_match_nothing_more), TEST_ENTRY(empty_stop_rejected))
