/* jinja_lex.c - template source -> tokens, applying Jinja2's whitespace rules as configured by
 * transformers: trim_blocks (drop the newline after a block or comment tag), lstrip_blocks
 * (drop spaces before a block or comment tag that starts its line), {%- / -%} stripping, and
 * keep_trailing_newline=False. Comments vanish; {% raw %} bodies become data. */
#include "models/jinja_ast.h"
#include "models/jinja_text.h"

#include <errno.h>
#include <stdlib.h>

typedef struct lexer {
    rj_rt *rt;
    const char *s;
    size_t n, pos;
    int line;
    bool line_starting; /* the previous tag's match ended with a newline (Jinja's lstrip rule) */
    rj_tokens *out;
} lexer;

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* Whitespace as Python's \s and str.strip() see it (Unicode spaces included): the byte length
 * of the whitespace character starting at p[0], or ending at p[n-1]; 0 if there is none. */
static size_t uws_at(const char *p, size_t n)
{
    if (!n) return 0;
    unsigned char c = (unsigned char)p[0];
    if (c < 0x80) return (is_ws((char)c) || (c >= 0x1c && c <= 0x1f)) ? 1 : 0;
    size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    if (k > n) return 0;
    int32_t cp = k == 2 ? ((c & 0x1f) << 6) | (p[1] & 0x3f)
               : k == 3 ? ((c & 0x0f) << 12) | ((p[1] & 0x3f) << 6) | (p[2] & 0x3f) : -1;
    return cp > 0 && rlx__j_is_space_cp(cp) ? k : 0;
}

static size_t uws_before(const char *p, size_t n)
{
    size_t st = n;
    while (st > 0 && n - st < 4) {
        st--;
        if (((unsigned char)p[st] & 0xc0) != 0x80) break;
    }
    return n > 0 && uws_at(p + st, n - st) == n - st ? n - st : 0;
}
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static rj_token *push(lexer *L, int type, const char *p, size_t n, int line)
{
    rj_tokens *t = L->out;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        rj_token *nv = rlx__j_alloc(L->rt, cap * sizeof *nv);
        if (t->n) memcpy(nv, t->v, t->n * sizeof *nv);
        t->v = nv;
        t->cap = cap;
    }
    rj_token *k = &t->v[t->n++];
    memset(k, 0, sizeof *k);
    k->type = (uint8_t)type;
    k->p = p;
    k->n = n;
    k->line = line;
    return k;
}

static int count_nl(const char *p, size_t n)
{
    int c = 0;
    for (size_t i = 0; i < n; i++) c += p[i] == '\n';
    return c;
}

/* Applies the stripping that a tag's opening modifier asks for to the data before it, then
 * emits that data. is_var: the tag is {{ (lstrip_blocks never applies to it). */
static void emit_data(lexer *L, const char *p, size_t n, char mod, bool is_var)
{
    int line = L->line;
    L->line += count_nl(p, n);
    if (mod == '-') {
        for (size_t k; (k = uws_before(p, n));) n -= k;
    } else if (mod != '+' && !is_var) {
        size_t l_pos = n;
        while (l_pos && p[l_pos - 1] != '\n') l_pos--;
        if ((l_pos > 0 || L->line_starting) && l_pos < n) {
            size_t i = l_pos;
            for (size_t k; i < n && (k = uws_at(p + i, n - i));) i += k;
            if (i == n) n = l_pos;
        }
    }
    if (n) push(L, TK_DATA, p, n, line);
}

/* After a tag's closing delimiter: `-` strips all following whitespace, a block/comment tag
 * without `+` drops one newline (trim_blocks). */
static void after_tag(lexer *L, char mod, bool is_block)
{
    L->line_starting = false;
    if (mod == '-') {
        for (size_t k; L->pos < L->n && (k = uws_at(L->s + L->pos, L->n - L->pos));) {
            if (L->s[L->pos] == '\n') { L->line++; L->line_starting = true; } else L->line_starting = false;
            L->pos += k;
        }
    } else if (mod != '+' && is_block && L->pos < L->n && L->s[L->pos] == '\n') {
        L->pos++;
        L->line++;
        L->line_starting = true;
    }
}

static void put_utf8(lexer *L, rj_buf *b, uint32_t cp)
{
    char u[4];
    size_t k;
    if (cp > 0x10ffff) rlx__j_fail(L->rt, RLX_EFORMAT, "string escape names an invalid code point");
    if (cp < 0x80) { u[0] = (char)cp; k = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xc0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3f)); k = 2; }
    else if (cp < 0x10000) { u[0] = (char)(0xe0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3f)); u[2] = (char)(0x80 | (cp & 0x3f)); k = 3; }
    else { u[0] = (char)(0xf0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 0x3f)); u[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); u[3] = (char)(0x80 | (cp & 0x3f)); k = 4; }
    rlx__j_buf_put(L->rt, b, u, k);
}

/* A quoted string with Python's unicode-escape rules. */
static void lex_string(lexer *L)
{
    char q = L->s[L->pos];
    int line = L->line;
    size_t i = L->pos + 1;
    rj_buf b = {0};
    rlx__j_buf_put(L->rt, &b, "", 0);
    size_t run = i;
    for (;;) {
        if (i >= L->n) { L->rt->line = line; rlx__j_fail(L->rt, RLX_EFORMAT, "unterminated string literal"); }
        char c = L->s[i];
        if (c == q) break;
        if (c == '\n') L->line++;
        if (c != '\\') { i++; continue; }
        rlx__j_buf_put(L->rt, &b, L->s + run, i - run);
        if (i + 1 >= L->n) { i++; continue; } /* a backslash ending the text: unterminated, above */
        char e = L->s[i + 1];
        i += 2;
        switch (e) {
        case 'n': rlx__j_buf_puts(L->rt, &b, "\n"); break;
        case 't': rlx__j_buf_puts(L->rt, &b, "\t"); break;
        case 'r': rlx__j_buf_puts(L->rt, &b, "\r"); break;
        case '\\': rlx__j_buf_puts(L->rt, &b, "\\"); break;
        case '\'': rlx__j_buf_puts(L->rt, &b, "'"); break;
        case '"': rlx__j_buf_puts(L->rt, &b, "\""); break;
        case 'a': rlx__j_buf_puts(L->rt, &b, "\a"); break;
        case 'b': rlx__j_buf_puts(L->rt, &b, "\b"); break;
        case 'f': rlx__j_buf_puts(L->rt, &b, "\f"); break;
        case 'v': rlx__j_buf_puts(L->rt, &b, "\v"); break;
        case '\n': L->line++; break; /* line continuation */
        case 'N': L->rt->line = L->line; rlx__j_fail(L->rt, RLX_EUNSUPPORTED, "\\N{...} escapes in string literals are not supported");
        case 'x': case 'u': case 'U': {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int k = 0; k < nd; k++) {
                int h = i < L->n ? rlx_hex_value(L->s[i]) : -1;
                if (h < 0) { L->rt->line = L->line; rlx__j_fail(L->rt, RLX_EFORMAT, "truncated \\%c escape in a string literal", e); }
                cp = cp * 16 + (uint32_t)h;
                i++;
            }
            put_utf8(L, &b, cp);
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && i < L->n && L->s[i] >= '0' && L->s[i] <= '7'; k++) cp = cp * 8 + (uint32_t)(L->s[i++] - '0');
                put_utf8(L, &b, cp);
            } else { /* unknown escapes keep their backslash */
                i -= 1;
                rlx__j_buf_puts(L->rt, &b, "\\");
            }
        }
        run = i;
    }
    rlx__j_buf_put(L->rt, &b, L->s + run, i - run);
    push(L, TK_STRING, b.p, b.n, line);
    L->pos = i + 1;
}

static void lex_number(lexer *L)
{
    size_t i = L->pos;
    bool is_float = false;
    int base = 10;
    if (L->s[i] == '0' && i + 1 < L->n && strchr("bBoOxX", L->s[i + 1]) && L->s[i + 1]) {
        char k = (char)(L->s[i + 1] | 0x20);
        base = k == 'b' ? 2 : k == 'o' ? 8 : 16;
        i += 2;
        while (i < L->n && (rlx_hex_value(L->s[i]) >= 0 || L->s[i] == '_')) i++;
    } else {
        while (i < L->n && (is_digit(L->s[i]) || L->s[i] == '_')) i++;
        if (i + 1 < L->n && L->s[i] == '.' && is_digit(L->s[i + 1])) {
            is_float = true;
            i++;
            while (i < L->n && (is_digit(L->s[i]) || L->s[i] == '_')) i++;
        }
        if (i < L->n && (L->s[i] == 'e' || L->s[i] == 'E')) {
            size_t j = i + 1;
            if (j < L->n && (L->s[j] == '+' || L->s[j] == '-')) j++;
            if (j < L->n && is_digit(L->s[j])) {
                is_float = true;
                i = j;
                while (i < L->n && is_digit(L->s[i])) i++;
            }
        }
    }
    rj_token *t = push(L, is_float ? TK_FLOAT : TK_INT, L->s + L->pos, i - L->pos, L->line);
    if (is_float) {
        /* the literal without its underscores, whole: a fixed buffer cut long literals (a
           200-digit one read as 1e126) and its '.' was written past the end */
        char *tmp = rlx__j_alloc(L->rt, i - L->pos + 1);
        size_t tn = 0;
        for (size_t k = L->pos; k < i; k++)
            if (L->s[k] != '_') tmp[tn++] = L->s[k];
        tmp[tn] = 0;
        t->f = strtod(tmp, NULL);
    } else { /* Python ints have no size limit: a literal past int64 is a big int */
        size_t start = L->pos + (base == 10 ? 0 : 2);
        L->rt->line = L->line;
        t->num = rlx__j_int_parse(L->rt, L->s + start, i - start, base);
        t->i = t->num.type == RJ_INT ? t->num.i : INT64_MAX;
    }
    L->pos = i;
}

static const char *const ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[", "]",
                                  "(", ")", "{", "}", "<", ">", "=", ".", ":", "|", ",", ";"};

/* Tokens inside {{ }} or {% %} up to and including the closing delimiter. */
static void lex_tag(lexer *L, bool is_var, int open_line)
{
    const char *close = is_var ? "}}" : "%}";
    int balance = 0; /* open ( [ {: a closing delimiter inside brackets is not the tag's end */
    for (;;) {
        while (L->pos < L->n && is_ws(L->s[L->pos])) {
            if (L->s[L->pos] == '\n') L->line++;
            L->pos++;
        }
        if (L->pos >= L->n) {
            L->rt->line = open_line;
            rlx__j_fail(L->rt, RLX_EFORMAT, "the tag opened here is never closed with '%s'", close);
        }
        const char *p = L->s + L->pos;
        size_t left = L->n - L->pos;
        char mod = 0;
        size_t k = 0;
        if (balance > 0) k = 0;
        else if (left >= 3 && (p[0] == '-' || p[0] == '+') && !memcmp(p + 1, close, 2)) { mod = p[0]; k = 3; }
        else if (left >= 2 && !memcmp(p, close, 2)) k = 2;
        if (k) {
            push(L, is_var ? TK_VAR_END : TK_BLOCK_END, p, k, L->line);
            L->pos += k;
            after_tag(L, mod, !is_var);
            return;
        }
        char c = *p;
        if (is_alpha(c)) {
            size_t i = 1;
            while (i < left && (is_alpha(p[i]) || is_digit(p[i]))) i++;
            push(L, TK_NAME, p, i, L->line);
            L->pos += i;
        } else if (is_digit(c)) {
            lex_number(L);
        } else if (c == '\'' || c == '"') {
            lex_string(L);
        } else {
            size_t i;
            for (i = 0; i < RLX_ARRAY_LEN(ops); i++) {
                size_t on = strlen(ops[i]);
                if (left >= on && !memcmp(p, ops[i], on)) break;
            }
            if (i == RLX_ARRAY_LEN(ops)) {
                L->rt->line = L->line;
                rlx__j_fail(L->rt, RLX_EFORMAT, "unexpected character '%c' inside a tag", c);
            }
            if (c == '(' || c == '[' || c == '{') balance++;
            else if ((c == ')' || c == ']' || c == '}') && balance > 0) balance--;
            push(L, TK_OP, p, strlen(ops[i]), L->line);
            L->pos += strlen(ops[i]);
        }
    }
}

/* {% raw %} at pos (just after "{%" and its modifier)? Returns the length up to the end of "%}". */
static size_t match_word_tag(const char *p, size_t left, const char *word, char *end_mod)
{
    size_t i = 0, wn = strlen(word);
    while (i < left && is_ws(p[i])) i++;
    if (left - i < wn || memcmp(p + i, word, wn)) return 0;
    i += wn;
    if (i < left && (is_alpha(p[i]) || is_digit(p[i]))) return 0;
    while (i < left && is_ws(p[i])) i++;
    *end_mod = 0;
    if (i < left && (p[i] == '-' || p[i] == '+')) *end_mod = p[i++];
    if (left - i < 2 || memcmp(p + i, "%}", 2)) return 0;
    return i + 2;
}

static void lex_raw(lexer *L, char end_mod)
{
    /* jinja2's raw_begin rule: `-%}` strips what follows, a plain `%}` keeps even the newline
     * (trim_blocks does not apply to it) */
    after_tag(L, end_mod, false);
    size_t start = L->pos;
    for (size_t i = start; i + 1 < L->n; i++) {
        if (L->s[i] != '{' || L->s[i + 1] != '%') continue;
        size_t j = i + 2;
        char mod = 0;
        if (j < L->n && (L->s[j] == '-' || L->s[j] == '+')) mod = L->s[j++];
        char emod;
        size_t k = match_word_tag(L->s + j, L->n - j, "endraw", &emod);
        if (!k) continue;
        emit_data(L, L->s + start, i - start, mod, false);
        L->line += count_nl(L->s + i, j + k - i);
        L->pos = j + k;
        after_tag(L, emod, true);
        return;
    }
    rlx__j_fail(L->rt, RLX_EFORMAT, "{%% raw %%} is never closed with {%% endraw %%}");
}

void rlx__j_lex(rj_rt *rt, const char *src, size_t len, rj_tokens *out)
{
    /* universal newlines, and one trailing newline dropped (keep_trailing_newline=False) */
    char *s = rlx__j_alloc(rt, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = 0;
    lexer L = {.rt = rt, .s = s, .n = n, .line = 1, .line_starting = true, .out = out};
    while (L.pos < L.n) {
        size_t t = L.pos;
        while (t + 1 < L.n && !(L.s[t] == '{' && (L.s[t + 1] == '{' || L.s[t + 1] == '%' || L.s[t + 1] == '#'))) t++;
        if (t + 1 >= L.n) { /* no more tags */
            emit_data(&L, L.s + L.pos, L.n - L.pos, '+', true);
            break;
        }
        char kind = L.s[t + 1];
        char mod = (t + 2 < L.n && (L.s[t + 2] == '-' || L.s[t + 2] == '+')) ? L.s[t + 2] : 0;
        emit_data(&L, L.s + L.pos, t - L.pos, mod, kind == '{');
        L.line_starting = false;
        size_t body = t + 2 + (mod ? 1 : 0);
        int open_line = L.line;
        if (kind == '#') {
            const char *e = NULL;
            for (size_t i = body; i + 1 < L.n; i++)
                if (L.s[i] == '#' && L.s[i + 1] == '}') { e = L.s + i; break; }
            if (!e) { rt->line = open_line; rlx__j_fail(rt, RLX_EFORMAT, "comment is never closed with '#}'"); }
            size_t epos = (size_t)(e - L.s);
            char emod = (epos > body && (L.s[epos - 1] == '-' || L.s[epos - 1] == '+')) ? L.s[epos - 1] : 0;
            L.line += count_nl(L.s + t, epos + 2 - t);
            L.pos = epos + 2;
            after_tag(&L, emod, true);
            continue;
        }
        if (kind == '%') {
            char emod;
            size_t k = match_word_tag(L.s + body, L.n - body, "raw", &emod);
            if (k && emod != '+') { /* `{% raw +%}` is not a raw tag for jinja2 (an unknown tag) */
                L.line += count_nl(L.s + body, k);
                L.pos = body + k;
                lex_raw(&L, emod);
                continue;
            }
        }
        push(&L, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, L.s + t, body - t, L.line);
        L.pos = body;
        lex_tag(&L, kind == '{', open_line);
    }
    push(&L, TK_EOF, "", 0, L.line);
}
