/* keep_alive.c - Ollama's keep_alive values: how long a model stays loaded after a request.
 * A Go duration string ("5m", "1h30m", "30s", "1.5h", "500ms", "0"), or a number of seconds
 * (a JSON number, or a string of digits as OLLAMA_KEEP_ALIVE takes it); 0 unloads the model once
 * its requests end, any negative value keeps it loaded forever. */
#include "proto/proto.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Go's time.ParseDuration: [-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+, or "0". */
static int go_duration(const char *s, double *out)
{
    static const struct { const char *unit; double sec; } units[] = {
        {"ns", 1e-9}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6}, {"\xce\xbcs", 1e-6}, {"ms", 1e-3}, {"s", 1}, {"m", 60}, {"h", 3600},
    };
    double sign = 1;
    if (*s == '-' || *s == '+') sign = *s++ == '-' ? -1 : 1;
    if (!strcmp(s, "0")) { *out = 0; return 0; }
    if (!*s) return -1;
    double total = 0;
    while (*s) {
        const char *p = s;
        double v = 0, frac = 0.1;
        bool digits = false;
        while (*p >= '0' && *p <= '9') { v = v * 10 + (*p++ - '0'); digits = true; }
        if (*p == '.') {
            p++;
            while (*p >= '0' && *p <= '9') { v += (*p++ - '0') * frac; frac /= 10; digits = true; }
        }
        if (!digits) return -1;
        size_t best = 0;
        double mul = 0;
        for (size_t i = 0; i < RLX_ARRAY_LEN(units); i++) {
            size_t n = strlen(units[i].unit);
            /* the longest unit that matches ("ms" before "m") */
            if (n > best && !strncmp(p, units[i].unit, n)) { best = n; mul = units[i].sec; }
        }
        if (!best) return -1;
        total += v * mul;
        s = p + best;
    }
    *out = sign * total;
    return 0;
}

int rlx_keep_alive_parse(const char *s, double *seconds, rlx_error *err)
{
    double v;
    char *end;
    if (!s) return rlx_errorf(err, RLX_EINVAL, "keep_alive: no value");
    v = strtod(s, &end);
    bool number = end != s && !*end && s[strspn(s, " \t")] && isfinite(v);
    if (!number && go_duration(s, &v))
        return rlx_errorf(err, RLX_EINVAL, "keep_alive: '%.64s' is neither a duration (\"5m\", \"1h30m\", \"30s\") "
                          "nor a number of seconds", s);
    *seconds = v < 0 ? -1 : v;
    return 0;
}

int rlx_keep_alive_json(const cJSON *v, double *seconds, rlx_error *err)
{
    if (cJSON_IsNumber(v)) {
        if (!isfinite(v->valuedouble)) return rlx_errorf(err, RLX_EINVAL, "keep_alive: not a finite number");
        *seconds = v->valuedouble < 0 ? -1 : v->valuedouble;
        return 0;
    }
    if (cJSON_IsString(v)) return rlx_keep_alive_parse(v->valuestring, seconds, err);
    return rlx_errorf(err, RLX_EINVAL, "keep_alive must be a duration string (\"5m\") or a number of seconds");
}
