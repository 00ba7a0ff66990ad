/* test_safetensors_util.h - file helpers of test_safetensors.c: a temporary folder, whole files
 * written, config.json read, edited and written back. */
#ifndef TEST_SAFETENSORS_UTIL_H
#define TEST_SAFETENSORS_UTIL_H

#include "tests/rlx_test.h"
#include "tests/rlx_test_tmp.h"
#include "models/safetensors.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void put_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) { fwrite(data, 1, n, f); fclose(f); }
}

/* dir/name parsed (NULL when absent or not JSON), and written back (j freed) */
static cJSON *json_file(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    size_t n;
    char *text = rlx_read_file(p, &n);
    cJSON *j = text ? cJSON_ParseWithLength(text, n) : NULL;
    free(text);
    return j;
}

static void json_file_put(const char *dir, const char *name, cJSON *j)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    char *out = cJSON_PrintUnformatted(j);
    if (out) put_file(p, out, strlen(out));
    free(out);
    cJSON_Delete(j);
}

static void write_json_file(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    put_file(p, text, strlen(text));
}

/* config.json's key (text_config's in a multimodal folder) set to json, or removed (NULL) */
static void edit_config(const char *dir, const char *key, const char *json)
{
    cJSON *j = json_file(dir, "config.json");
    if (!j) return;
    cJSON *tc = cJSON_GetObjectItem(j, "text_config");
    cJSON *o = tc ? tc : j;
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
    if (json) cJSON_AddItemToObject(o, key, cJSON_Parse(json));
    json_file_put(dir, "config.json", j);
}

#endif
