/* http_framing.c - a request's framing checked once its headers are in, before any body is read
 * (see rlx__http_framing_check in serve.h). Loop thread. */
#include "server/serve.h"

#include <string.h>
#include <strings.h>

typedef struct framing {
    int n_cl, n_host;
    const char *cl, *ce;
    bool cl_differ, te, bad_name;
} framing;

static bool tchar(unsigned char c) /* RFC 9110 5.6.2 */
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    framing *f = cls;
    if (!key || !key[0]) f->bad_name = true;
    for (const unsigned char *k = (const unsigned char *)(key ? key : ""); *k; k++)
        if (!tchar(*k)) f->bad_name = true;
    if (key && !strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (f->n_cl++ && strcmp(f->cl, value ? value : "")) f->cl_differ = true;
        f->cl = value ? value : "";
    }
    if (key && !strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) f->te = true;
    if (key && !strcasecmp(key, MHD_HTTP_HEADER_HOST)) f->n_host++;
    if (key && !strcasecmp(key, MHD_HTTP_HEADER_CONTENT_ENCODING) && value && strcasecmp(value, "identity")) f->ce = value;
    return MHD_YES;
}

/* A request whose body length two parties could read differently (RFC 9112 6.3, the shapes of
 * request smuggling) is answered 400 and the connection closed. A chunked body is refused
 * (411) with libmicrohttpd before 1.0: its 0.9 releases spin forever, holding the whole loop,
 * on a chunk-size line longer than the connection's buffer (one request of ~70 KB wedged the
 * daemon). A compressed body (Content-Encoding other than identity) is a 415. Returns the status
 * to answer, 0 when the framing is sound. */
int rlx__http_framing_check(struct MHD_Connection *mc, const char *version, rlx_api_error *e)
{
    framing f = {0};
    MHD_get_connection_values(mc, MHD_HEADER_KIND, scan_header, &f);
    if (f.bad_name)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, NULL, "A request header's name is empty or holds a character "
                              "HTTP does not allow in one (a space before the colon, a control byte).");
    if (f.cl_differ)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, NULL, "The request gives Content-Length twice with different "
                              "values.");
    if (f.te && f.n_cl)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, NULL, "The request gives both Transfer-Encoding and "
                              "Content-Length; send one.");
    if (f.ce) { /* a compressed body would read as JSON that does not parse: say why instead */
        char enc[64];
        return rlx_api_errorf(e, 415, RLX_API_ERR_INVALID, NULL, "The request body's Content-Encoding '%s' is not supported; "
                              "send it uncompressed.", rlx_log_escape(f.ce, true, enc, sizeof enc));
    }
    if (version && !strcmp(version, MHD_HTTP_VERSION_1_1) && f.n_host != 1)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, NULL, "An HTTP/1.1 request needs exactly one Host header.");
#if MHD_VERSION < 0x01000000
    if (f.te)
        return rlx_api_errorf(e, 411, RLX_API_ERR_INVALID, NULL, "Send the body with a Content-Length: this server does not "
                              "read chunked (Transfer-Encoding) request bodies.");
#endif
    return 0;
}

