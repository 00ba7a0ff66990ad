/* rlx_test.h - a minimal test harness in the manner of libuv's: one TEST per behaviour, typed
 * asserts that print both operands, a runner that prints "N passed, N failed". A test binary
 * exits 0 on success, 1 on failure and 77 (ctest SKIP) when every test skipped, e.g. because
 * ../shared is absent. */
#ifndef RLX_TEST_H
#define RLX_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <inttypes.h>

typedef struct rlx_test_case { const char *name; void (*fn)(void); } rlx_test_case;

static int rlx_test_failed_;
static int rlx_test_skipped_;

#define TEST(name) static void test_##name(void)
#define TEST_ENTRY(name) {#name, test_##name}

#define FAIL_(...) do { fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); \
    fprintf(stderr, "\n"); rlx_test_failed_ = 1; return; } while (0)
#define ASSERT(c) do { if (!(c)) FAIL_("assertion failed: %s", #c); } while (0)
#define ASSERT_MSG(c, ...) do { if (!(c)) FAIL_(__VA_ARGS__); } while (0)
#define ASSERT_EQ(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b); \
    if (a_ != b_) FAIL_("%s == %s: %lld != %lld", #a, #b, a_, b_); } while (0)
#define ASSERT_NE(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b); \
    if (a_ == b_) FAIL_("%s != %s: both %lld", #a, #b, a_); } while (0)
#define ASSERT_STR_EQ(a, b) do { const char *a_ = (a), *b_ = (b); \
    if (!a_ || !b_ || strcmp(a_, b_)) FAIL_("%s == %s:\n    \"%s\"\n != \"%s\"", #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); } while (0)
#define ASSERT_NEAR(a, b, tol) do { double a_ = (a), b_ = (b), t_ = (tol); \
    if (!(fabs(a_ - b_) <= t_)) FAIL_("%s ~= %s: %.9g vs %.9g (tol %.3g)", #a, #b, a_, b_, t_); } while (0)
#define SKIP(...) do { fprintf(stderr, "  skipped: "); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); \
    rlx_test_skipped_ = 1; return; } while (0)

/* Path under ../shared (env RLX_SHARED), or NULL if that file is absent. Static buffer ring. */
static inline const char *rlx_test_shared(const char *rel)
{
    static char bufs[8][1024];
    static int next;
    const char *root = getenv("RLX_SHARED");
    if (!root) root = "../shared";
    char *b = bufs[next++ & 7];
    snprintf(b, sizeof bufs[0], "%s/%s", root, rel);
    FILE *f = fopen(b, "rb");
    if (!f) return NULL;
    fclose(f);
    return b;
}

static inline int rlx_test_run(const rlx_test_case *cases, size_t n)
{
    int passed = 0, failed = 0, skipped = 0;
    const char *only = getenv("RLX_TEST_ONLY"); /* run the tests whose name contains this */
    for (size_t i = 0; i < n; i++) {
        if (only && *only && !strstr(cases[i].name, only)) continue;
        rlx_test_failed_ = rlx_test_skipped_ = 0;
        cases[i].fn();
        if (rlx_test_failed_) { failed++; fprintf(stderr, "FAIL %s\n", cases[i].name); }
        else if (rlx_test_skipped_) { skipped++; fprintf(stderr, "SKIP %s\n", cases[i].name); }
        else { passed++; fprintf(stderr, "ok   %s\n", cases[i].name); }
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (failed) return 1;
    if (passed == 0 && skipped > 0) return 77;
    return 0;
}

#define TEST_MAIN(...) int main(void) { static const rlx_test_case cases_[] = {__VA_ARGS__}; \
    return rlx_test_run(cases_, sizeof cases_ / sizeof cases_[0]); }

#endif
