/* test_vulkan_pcache.c - the Vulkan backend's pipeline cache on disk (backends/vulkan/
 * vk_pcache.c): written at the first load, read back at the next, and a file that is cut,
 * altered, padded or another device's is ignored (the load goes on) and replaced by a good one;
 * without a folder nothing is written, and an unwritable folder fails nothing. Skips (77)
 * without a Vulkan device. (Lavapipe keeps no pipelines in a VkPipelineCache - its data is the
 * 32-byte header - so this checks the file's life, not a speed-up.) */
#include "tests/rlx_test.h"
#include "backends/backend.h"

#ifdef RLX_HAVE_VULKAN
#include "backends/vulkan/vulkan.h"

#include <dirent.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

static char dir[64];

/* Creates and destroys a backend with the cache in `folder`; its stats. */
static int load(const char *folder, rlx_vk_stats *st)
{
    rlx_backend *vk = NULL;
    rlx_error err = {0};
    rlx_backend_config cfg = {.name = "vulkan", .cache_dir = folder};
    int rc = rlx_backend_create(&vk, &cfg, &err);
    if (rc) {
        fprintf(stderr, "  %s\n", err.msg);
        return rc;
    }
    rc = rlx_vk_get_stats(vk, st);
    rlx_backend_destroy(vk);
    return rc;
}

/* The one cache file in dir (path into buf); false when there is not exactly one. */
static bool the_file(char *buf, size_t cap)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') n++, snprintf(buf, cap, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
    return n == 1 && strstr(buf, "/vulkan-pipelines-") && strstr(buf, ".bin");
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    uint8_t *p = malloc(1 << 20);
    *n = f && p ? fread(p, 1, 1 << 20, f) : 0;
    if (f) fclose(f);
    return p;
}

static void spit(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) fwrite(p, 1, n, f), fclose(f);
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

TEST(written_then_read_back)
{
    snprintf(dir, sizeof dir, "/tmp/rlx-vkpc-XXXXXX");
    ASSERT(mkdtemp(dir) != NULL);
    rlx_vk_stats st = {0};
    int rc = load(dir, &st);
    if (rc == RLX_EUNSUPPORTED) SKIP("no Vulkan device");
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.pipeline_cache, RLX_VK_PCACHE_NEW);
    ASSERT(st.pipelines_created >= 7);
    ASSERT(st.pipeline_cache_saved_bytes >= 32); /* at least the driver's header */
    char path[512];
    ASSERT(the_file(path, sizeof path));
    size_t n;
    uint8_t *p = slurp(path, &n);
    ASSERT_EQ(n, 24 + st.pipeline_cache_saved_bytes);
    ASSERT(!memcmp(p, "RLXVKPC1", 8));
    free(p);
    ASSERT_EQ(load(dir, &st), 0);
    ASSERT_EQ(st.pipeline_cache, RLX_VK_PCACHE_LOADED);
    ASSERT_EQ(st.pipeline_cache_loaded_bytes, n - 24);
}

/* Each damage: ignored at the next load (which works), a good file written in its place. */
TEST(damaged_files_are_ignored_and_replaced)
{
    if (!dir[0]) SKIP("no Vulkan device");
    char path[512];
    ASSERT(the_file(path, sizeof path));
    size_t n;
    uint8_t *good = slurp(path, &n);
    ASSERT(n > 24 + 16);
    uint8_t *bad = malloc(n + 8);
    for (int k = 0; k < 6; k++) {
        memcpy(bad, good, n);
        size_t m = n;
        rlx_vk_pcache_state want = RLX_VK_PCACHE_CORRUPT;
        if (k == 0) bad[24 + 5] ^= 0x10;       /* a bit flipped in the driver's data */
        else if (k == 1) m = n - 3;            /* cut */
        else if (k == 2) bad[m++] = 0;         /* a byte more */
        else if (k == 3) memcpy(bad, "NOTOURS!", 8);
        else if (k == 4) m = 10;               /* shorter than our header */
        else {                                 /* another driver's cache UUID, checksum right */
            bad[24 + 16] ^= 0xff;
            uint64_t sum = fnv1a(bad + 24, n - 24);
            memcpy(bad + 16, &sum, 8);
            want = RLX_VK_PCACHE_STALE;
        }
        spit(path, bad, m);
        rlx_vk_stats st = {0};
        ASSERT_EQ(load(dir, &st), 0);
        ASSERT_MSG(st.pipeline_cache == want, "damage %d: %s", k, rlx_vk_pcache_state_name(st.pipeline_cache));
        ASSERT_EQ(st.pipeline_cache_loaded_bytes, 0);
        size_t n2;
        uint8_t *now = slurp(path, &n2);
        ASSERT_MSG(n2 == n && !memcmp(now, good, n), "damage %d: the file was not replaced by a good one", k);
        free(now);
    }
    free(bad);
    free(good);
    rlx_vk_stats st = {0};
    ASSERT_EQ(load(dir, &st), 0);
    ASSERT_EQ(st.pipeline_cache, RLX_VK_PCACHE_LOADED);
}

TEST(no_folder_or_an_unwritable_one)
{
    if (!dir[0]) SKIP("no Vulkan device");
    rlx_vk_stats st = {0};
    ASSERT_EQ(load(NULL, &st), 0);
    ASSERT_EQ(st.pipeline_cache, RLX_VK_PCACHE_OFF);
    ASSERT_EQ(st.pipeline_cache_saved_bytes, 0);
    char under_a_file[600], path[512];
    ASSERT(the_file(path, sizeof path));
    snprintf(under_a_file, sizeof under_a_file, "%s/sub", path); /* a folder inside a file: never writable */
    ASSERT_EQ(load(under_a_file, &st), 0);
    ASSERT_EQ(st.pipeline_cache, RLX_VK_PCACHE_NEW);
    ASSERT_EQ(st.pipeline_cache_saved_bytes, 0);
    /* a save writes a temporary of its own, never one named after the process alone (two
     * backends of one daemon save the same file, at once when two models load together): a
     * folder in the way under that name changes nothing */
    char in_the_way[600];
    snprintf(in_the_way, sizeof in_the_way, "%s.%d.tmp", path, (int)getpid());
    ASSERT_EQ(mkdir(in_the_way, 0700), 0);
    unlink(path);
    ASSERT_EQ(load(dir, &st), 0);
    ASSERT_EQ(st.pipeline_cache, RLX_VK_PCACHE_NEW);
    ASSERT(st.pipeline_cache_saved_bytes >= 32);
    struct stat sb;
    ASSERT_MSG(stat(path, &sb) == 0 && (size_t)sb.st_size == 24 + st.pipeline_cache_saved_bytes, "the cache was not written");
    rmdir(in_the_way);
    ASSERT(the_file(path, sizeof path)); /* and no temporary left behind */
    unlink(path);
    rmdir(dir);
}

TEST_MAIN(TEST_ENTRY(written_then_read_back), TEST_ENTRY(damaged_files_are_ignored_and_replaced),
          TEST_ENTRY(no_folder_or_an_unwritable_one))
#else
TEST(no_vulkan) { SKIP("this build has no Vulkan backend (configure with -DRLX_VULKAN=ON)"); }
TEST_MAIN(TEST_ENTRY(no_vulkan))
#endif
