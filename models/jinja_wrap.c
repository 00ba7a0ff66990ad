/* jinja_wrap.c - Jinja2's wordwrap filter: Python's textwrap.wrap (expand_tabs and
 * replace_whitespace off, drop_whitespace on) over each line of the text, the lines joined
 * with the wrap string. Chunks come from textwrap's own word-separating regex, run with PCRE2
 * (UTF + UCP, so \w and \d are Unicode as in Python's re). */
#include "models/jinja_text.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#define WS "[\\t\\n\\x0b\\x0c\\r ]"
#define NWS "[^\\t\\n\\x0b\\x0c\\r ]"
#define WP "[\\w!\"'&.,?]"
#define LT "[^\\d\\W]"
/* textwrap.TextWrapper.wordsep_re (break_on_hyphens) and wordsep_simple_re */
static const char k_wordsep[] =
    "(" WS "+"
    "|(?<=" WP ")-{2,}(?=\\w)"
    "|" NWS "+?(?:-(?:(?<=" LT "{2}-)|(?<=" LT "-" LT "-))(?=" LT "-?" LT ")|(?=" WS "|\\z)|(?<=" WP ")(?=-{2,}\\w)))";
static const char k_wordsep_simple[] = "(" WS "+)";

typedef struct chunk { const char *p; size_t n, len; } chunk; /* bytes, byte count, code points */

static size_t cps(const char *p, size_t n) { return rlx__j_utf8_len(p, n); }

static bool blank(rj_rt *rt, chunk c) { return rlx__j_strip(rt, rj_str(c.p, c.n), NULL, 3).s.n == 0; }

/* re.split with the capturing pattern, empty pieces dropped */
static chunk *split_chunks(rj_rt *rt, rj_value line, bool hyphens, size_t *count)
{
    int ec;
    PCRE2_SIZE eo;
    const char *pat = hyphens ? k_wordsep : k_wordsep_simple;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &ec, &eo, NULL);
    if (!re) rlx__j_fail(rt, RLX_EINVAL, "wordwrap: cannot compile the word separator pattern");
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    chunk *v = rlx__j_alloc(rt, (line.s.n * 2 + 2) * sizeof *v);
    size_t n = 0, pos = 0;
    while (pos <= line.s.n && md) {
        int rc = pcre2_match(re, (PCRE2_SPTR)line.s.p, line.s.n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc < 0) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[0] > pos) v[n++] = (chunk){line.s.p + pos, ov[0] - pos, 0};
        if (ov[1] > ov[0]) v[n++] = (chunk){line.s.p + ov[0], ov[1] - ov[0], 0};
        if (ov[1] == ov[0]) break; /* cannot happen: every alternative consumes */
        pos = ov[1];
    }
    if (pos < line.s.n) v[n++] = (chunk){line.s.p + pos, line.s.n - pos, 0};
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    for (size_t i = 0; i < n; i++) v[i].len = cps(v[i].p, v[i].n);
    *count = n;
    return v;
}

/* the first k code points of c, and the rest */
static void cut(chunk c, size_t k, chunk *head, chunk *tail)
{
    size_t off = rlx__j_utf8_off(c.p, c.n, k);
    *head = (chunk){c.p, off, k};
    *tail = (chunk){c.p + off, c.n - off, c.len - k};
}

/* TextWrapper._wrap_chunks; the lines are appended to out */
static void wrap_chunks(rj_rt *rt, chunk *chunks, size_t n, int64_t width, bool break_long, bool hyphens, rj_list *out)
{
    if (width <= 0) rlx__j_fail(rt, RLX_EINVAL, "invalid width %lld (must be > 0)", (long long)width);
    size_t i = 0; /* chunks[i..n) are still to place (Python keeps them reversed) */
    bool any_line = false;
    chunk *cur = rlx__j_alloc(rt, (n + 1) * sizeof *cur);
    while (i < n) {
        size_t nc = 0, cur_len = 0;
        if (blank(rt, chunks[i]) && any_line) i++; /* a line does not start with whitespace */
        while (i < n && cur_len + chunks[i].len <= (size_t)width) {
            cur_len += chunks[i].len;
            cur[nc++] = chunks[i++];
        }
        if (i < n && chunks[i].len > (size_t)width) { /* _handle_long_word */
            size_t space_left = width < 1 ? 1 : (size_t)width - cur_len;
            if (break_long) {
                chunk c = chunks[i];
                size_t end = space_left;
                if (hyphens && c.len > space_left) { /* break after the last hyphen, if not all hyphens before it */
                    size_t hy = 0;
                    bool found = false;
                    for (size_t k = 0, off = 0; k < space_left && off < c.n; k++) {
                        if (c.p[off] == '-') { hy = k; found = true; }
                        size_t o2 = rlx__j_utf8_off(c.p + off, c.n - off, 1);
                        off += o2;
                    }
                    if (found && hy > 0) {
                        bool other = false;
                        for (size_t off = 0, k = 0; k < hy; k++) {
                            if (c.p[off] != '-') other = true;
                            off += rlx__j_utf8_off(c.p + off, c.n - off, 1);
                        }
                        if (other) end = hy + 1;
                    }
                }
                chunk head, tail;
                cut(c, end, &head, &tail);
                cur[nc++] = head;
                chunks[i] = tail;
            } else if (nc == 0) {
                cur[nc++] = chunks[i++];
            }
        }
        if (nc && blank(rt, cur[nc - 1])) nc--; /* drop trailing whitespace */
        if (nc) {
            rj_buf b = {0};
            rlx__j_buf_put(rt, &b, "", 0);
            for (size_t k = 0; k < nc; k++) rlx__j_buf_put(rt, &b, cur[k].p, cur[k].n);
            rlx__j_list_push(rt, out, rj_str(b.p, b.n));
            any_line = true;
        }
    }
}

rj_value rlx__j_f_wordwrap(rj_env *E, rj_value v, const rj_args *a)
{
    rj_rt *rt = rlx__j_env_rt(E);
    const rj_value *w = rlx__j_arg(a, 0, "width"), *bl = rlx__j_arg(a, 1, "break_long_words"),
                   *ws = rlx__j_arg(a, 2, "wrapstring"), *bh = rlx__j_arg(a, 3, "break_on_hyphens");
    int64_t width = 79;
    if (w) {
        if (w->type != RJ_INT && w->type != RJ_BOOL) rlx__j_fail(rt, RLX_EINVAL, "wordwrap: the width must be an integer");
        width = w->type == RJ_INT ? w->i : w->b;
    }
    bool break_long = bl ? rlx__j_truthy(*bl) : true, hyphens = bh ? rlx__j_truthy(*bh) : true;
    rj_value sep = ws && ws->type != RJ_NONE ? rlx__j_to_str(rt, *ws) : rj_str("\n", 1);
    rj_value lines = rlx__j_splitlines(rt, rlx__j_to_str(rt, v), false);
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    for (size_t li = 0; li < lines.l->n; li++) {
        if (li) rlx__j_buf_put(rt, &b, sep.s.p, sep.s.n);
        size_t nch;
        chunk *ch = split_chunks(rt, lines.l->v[li], hyphens, &nch);
        rj_value wrapped = rlx__j_new_list(rt, 0);
        wrap_chunks(rt, ch, nch, width, break_long, hyphens, wrapped.l);
        for (size_t k = 0; k < wrapped.l->n; k++) {
            if (k) rlx__j_buf_put(rt, &b, sep.s.p, sep.s.n);
            rlx__j_buf_put(rt, &b, wrapped.l->v[k].s.p, wrapped.l->v[k].s.n);
        }
    }
    return rj_str(b.p, b.n);
}
