/* cors.c - Cross-Origin Resource Sharing for browser clients (`--cors-origins`, off by default):
 * a request whose Origin is allowed gets Access-Control-Allow-Origin on every answer (streams
 * included); an OPTIONS preflight on a known path is answered 204 with the path's methods, the
 * headers asked for and a max age, without the API key (browsers send none on a preflight).
 * Without the setting nothing changes: OPTIONS stays a 405 and no CORS header is sent. */
#include "server/serve.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Whether origin is in the comma list (exact, case-insensitive for scheme and host). */
static bool origin_listed(const char *list, const char *origin)
{
    size_t on = strlen(origin);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',') p++;
        size_t n = strcspn(p, ",");
        size_t k = n;
        while (k && p[k - 1] == ' ') k--;
        if (k && k == on && !strncasecmp(p, origin, k)) return true;
        p += n;
    }
    return false;
}

int rlx_cors_check_config(const char *origins, rlx_error *err)
{
    if (!origins) return 0;
    if (!strcmp(origins, "*")) return 0;
    const char *p = origins;
    int n = 0;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        size_t len = strcspn(p, ",");
        size_t k = len;
        while (k && p[k - 1] == ' ') k--;
        char o[256];
        snprintf(o, sizeof o, "%.*s", (int)(k < sizeof o ? k : sizeof o - 1), p);
        const char *host = !strncasecmp(o, "http://", 7) ? o + 7 : !strncasecmp(o, "https://", 8) ? o + 8 : NULL;
        if (k >= sizeof o || !host || !host[0] || strpbrk(host, "/ *?#"))
            return rlx_errorf(err, RLX_EINVAL, "'cors-origins': '%s' is not an origin: give \"*\" or a comma list of "
                              "scheme://host[:port] (e.g. http://localhost:3000), without a path", o);
        n++;
        p += len;
    }
    if (!n) return rlx_errorf(err, RLX_EINVAL, "'cors-origins' is empty: give \"*\" or a comma list of origins");
    return 0;
}

void rlx_cors_request(rlx_srv *s, rlx_conn *c)
{
    memset(&c->cors, 0, sizeof c->cors);
    const char *list = s->cfg->cors_origins;
    if (!list) return;
    const char *origin = MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, "Origin");
    if (!origin || !origin[0]) return;
    if (!strcmp(list, "*")) {
        snprintf(c->cors.allow_origin, sizeof c->cors.allow_origin, "*");
        return;
    }
    c->cors.vary = true;
    if (strlen(origin) < sizeof c->cors.allow_origin && origin_listed(list, origin))
        snprintf(c->cors.allow_origin, sizeof c->cors.allow_origin, "%s", origin);
}

void rlx_cors_preflight(rlx_srv *s, rlx_conn *c, const char *methods)
{
    (void)s;
    if (!c->cors.allow_origin[0]) {
        const char *origin = MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, "Origin");
        rlx_api_error e;
        if (origin)
            rlx_api_errorf(&e, 403, RLX_API_ERR_INVALID, NULL, "Origin %.200s is not allowed (--cors-origins).", origin);
        else
            rlx_api_errorf(&e, 400, RLX_API_ERR_INVALID, NULL, "A CORS preflight needs an Origin header.");
        rlx_conn_error(c, &e);
        return;
    }
    c->cors.preflight = true;
    snprintf(c->cors.methods, sizeof c->cors.methods, "%s, OPTIONS", methods);
    /* the headers asked for, when they are plain header names; else the ones clients send */
    const char *h = MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    bool plain = h && h[0] && strlen(h) < sizeof c->cors.headers;
    for (const char *p = h; plain && *p; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-_, ", *p);
    snprintf(c->cors.headers, sizeof c->cors.headers, "%s", plain ? h : "Authorization, Content-Type, X-Session-Id");
    rlx_conn_respond(c, 204, NULL, strdup(""));
}

void rlx_cors_headers(const rlx_conn *c, struct MHD_Response *r)
{
    if (c->cors.vary) MHD_add_response_header(r, "Vary", "Origin");
    if (!c->cors.allow_origin[0]) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", c->cors.allow_origin);
    if (c->cors.preflight) {
        MHD_add_response_header(r, "Access-Control-Allow-Methods", c->cors.methods);
        MHD_add_response_header(r, "Access-Control-Allow-Headers", c->cors.headers);
        MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    } else {
        MHD_add_response_header(r, "Access-Control-Expose-Headers", "Retry-After, X-Session-Id");
    }
}
