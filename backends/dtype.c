/* dtype.c - the table of element types and scalar half/bfloat16 conversions. */
#include "backends/dtype.h"

#include <string.h>
#include <strings.h>

static const rlx_dtype_info dtype_table[RLX_DTYPE_COUNT] = {
    [RLX_F32] = {"f32", 1, 4, true},
    [RLX_F16] = {"f16", 1, 2, true},
    [RLX_Q4_0] = {"q4_0", 32, 18, true},
    [RLX_Q4_1] = {"q4_1", 32, 20, false},
    [RLX_Q5_0] = {"q5_0", 32, 22, false},
    [RLX_Q5_1] = {"q5_1", 32, 24, false},
    [RLX_Q8_0] = {"q8_0", 32, 34, true},
    [RLX_Q8_1] = {"q8_1", 32, 36, false},
    [RLX_Q2_K] = {"q2_k", 256, 84, false},
    [RLX_Q3_K] = {"q3_k", 256, 110, false},
    [RLX_Q4_K] = {"q4_k", 256, 144, true},
    [RLX_Q5_K] = {"q5_k", 256, 176, true},
    [RLX_Q6_K] = {"q6_k", 256, 210, true},
    [RLX_Q8_K] = {"q8_k", 256, 292, false},
    [RLX_I8] = {"i8", 1, 1, false},
    [RLX_I16] = {"i16", 1, 2, false},
    [RLX_I32] = {"i32", 1, 4, false},
    [RLX_I64] = {"i64", 1, 8, false},
    [RLX_F64] = {"f64", 1, 8, false},
    [RLX_BF16] = {"bf16", 1, 2, true},
};

const rlx_dtype_info *rlx_dtype_get(int type)
{
    if (type < 0 || type >= RLX_DTYPE_COUNT || !dtype_table[type].name) return NULL;
    return &dtype_table[type];
}

int rlx_dtype_from_name(const char *name)
{
    for (int i = 0; i < RLX_DTYPE_COUNT; i++)
        if (dtype_table[i].name && strcasecmp(dtype_table[i].name, name) == 0) return i;
    return -1;
}

size_t rlx_row_bytes(int type, int64_t n)
{
    const rlx_dtype_info *t = rlx_dtype_get(type);
    if (!t || n < 0 || n % t->block_elems) return 0;
    return (size_t)(n / t->block_elems) * (size_t)t->block_bytes;
}
