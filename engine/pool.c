/* pool.c - pooling and normalization of embeddings (see pool.h). */
#include "engine/pool.h"

#include <math.h>
#include <string.h>

static const char *const names[] = {"none", "mean", "cls", "last", "rank"};

int rlx_pooling_from_gguf(int64_t v, rlx_pooling *out, rlx_error *err)
{
    if (v < RLX_POOL_NONE || v > RLX_POOL_RANK)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "pooling type %lld is not supported (known: 0 none, 1 mean, "
                          "2 cls, 3 last, 4 rank)", (long long)v);
    *out = (rlx_pooling)v;
    return 0;
}

const char *rlx_pooling_name(rlx_pooling p)
{
    return p >= RLX_POOL_NONE && p <= RLX_POOL_RANK ? names[p] : "unknown";
}

int rlx_pooling_parse(const char *name, rlx_pooling *out, rlx_error *err)
{
    for (int i = 0; name && i <= RLX_POOL_RANK; i++)
        if (!strcmp(name, names[i])) {
            *out = (rlx_pooling)i;
            return 0;
        }
    return rlx_errorf(err, RLX_EINVAL, "unknown pooling \"%s\" (one of none, mean, cls, last, rank)",
                      name ? name : "(null)");
}

int rlx_pool_rows(rlx_pooling p, const float *rows, int32_t n_tokens, int64_t n_embd, float *out)
{
    if (!rows || !out || n_tokens < 1 || n_embd < 1) return RLX_EINVAL;
    switch (p) {
    case RLX_POOL_CLS:
        memmove(out, rows, (size_t)n_embd * sizeof *out);
        return 0;
    case RLX_POOL_LAST:
        memmove(out, rows + (size_t)(n_tokens - 1) * (size_t)n_embd, (size_t)n_embd * sizeof *out);
        return 0;
    case RLX_POOL_MEAN:
        for (int64_t i = 0; i < n_embd; i++) {
            double sum = 0.0;
            for (int32_t t = 0; t < n_tokens; t++) sum += (double)rows[(size_t)t * (size_t)n_embd + (size_t)i];
            out[i] = (float)(sum / (double)n_tokens);
        }
        return 0;
    default:
        return RLX_EINVAL;
    }
}

int rlx_embd_normalize(const float *in, float *out, int64_t n, int norm)
{
    if (norm < -1 || n < 0 || (n && (!in || !out))) return RLX_EINVAL;
    double sum = 0.0;
    if (norm == -1) {
        sum = 1.0;
    } else if (norm == 0) {
        for (int64_t i = 0; i < n; i++) if (sum < fabs((double)in[i])) sum = fabs((double)in[i]);
        sum /= 32760.0;
    } else if (norm == 2) {
        for (int64_t i = 0; i < n; i++) sum += (double)in[i] * (double)in[i]; /* squares in double: the goldens bit for bit */
        sum = sqrt(sum);
    } else {
        for (int64_t i = 0; i < n; i++) sum += pow(fabs((double)in[i]), (double)norm);
        sum = pow(sum, 1.0 / (double)norm);
        if (!isfinite(sum) || sum == 0.0) {
            /* a large p: |x|^p overflows (or, for values under 1, underflows) a double, which made
               the vector all zeros; the same norm with the values over their largest first */
            double mx = 0.0, acc = 0.0;
            for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs((double)in[i]));
            for (int64_t i = 0; mx > 0.0 && i < n; i++) acc += pow(fabs((double)in[i]) / mx, (double)norm);
            sum = mx > 0.0 ? mx * pow(acc, 1.0 / (double)norm) : 0.0;
        }
    }
    const float scale = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
    for (int64_t i = 0; i < n; i++) out[i] = in[i] * scale;
    return 0;
}
