/* grammar.c - the recogniser (see grammar.h, grammar_internal.h): stack sets, expanding rule
 * references, matching code points fed byte by byte, and a sequence's state.
 *
 * A parse stack is a list of element indexes, the top being the next thing to match; the state
 * of a sequence is the set of stacks it may be in (the grammar can be ambiguous) after every
 * stack was advanced to a character set (rule references expanded) or emptied (the root rule
 * is complete). Accepting a code point keeps the stacks whose top set contains it, moved one
 * element on and advanced again. */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- stack sets ------------------------------------------------------------------------- */


void rlx__sset_clear(rlx__sset *s)
{
    s->dlen = 0;
    s->n = 0;
    s->overflow = s->oom = false;
    if (s->table) memset(s->table, 0xff, s->tcap * sizeof *s->table);
}

void rlx__sset_free(rlx__sset *s)
{
    free(s->data);
    free(s->off);
    free(s->len);
    free(s->hash);
    free(s->table);
    memset(s, 0, sizeof *s);
}

static uint64_t stack_hash(const uint32_t *v, uint32_t n)
{
    uint64_t h = 1469598103934665603ull ^ n;
    for (uint32_t i = 0; i < n; i++) {
        h ^= v[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

static bool sset_rehash(rlx__sset *s, size_t tcap)
{
    int32_t *t = malloc(tcap * sizeof *t);
    if (!t) return false;
    memset(t, 0xff, tcap * sizeof *t);
    for (size_t i = 0; i < s->n; i++) {
        size_t p = s->hash[i] & (tcap - 1);
        while (t[p] >= 0) p = (p + 1) & (tcap - 1);
        t[p] = (int32_t)i;
    }
    free(s->table);
    s->table = t;
    s->tcap = tcap;
    return true;
}

/* Adds a stack unless the set holds it already: 1 added, 0 held already, -1 not added (out of
 * memory, or full: s->oom / s->overflow). */
static int sset_put(rlx__sset *s, const uint32_t *v, uint32_t n)
{
    if (s->oom || s->overflow) return -1;
    uint64_t h = stack_hash(v, n);
    if (s->tcap < 2 * (s->n + 1) && !sset_rehash(s, s->tcap ? s->tcap * 2 : 64)) {
        s->oom = true;
        return -1;
    }
    size_t p = h & (s->tcap - 1);
    for (; s->table[p] >= 0; p = (p + 1) & (s->tcap - 1)) {
        size_t i = (size_t)s->table[p];
        if (s->hash[i] == h && s->len[i] == n && (n == 0 || !memcmp(s->data + s->off[i], v, n * sizeof *v))) return 0;
    }
    if (s->n >= (s->max ? s->max : RLX_GRAMMAR_MAX_STACKS)) {
        s->overflow = true;
        return -1;
    }
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        uint32_t *o = realloc(s->off, nc * sizeof *o);
        if (o) s->off = o;
        uint32_t *l = realloc(s->len, nc * sizeof *l);
        if (l) s->len = l;
        uint64_t *hh = realloc(s->hash, nc * sizeof *hh);
        if (hh) s->hash = hh;
        if (!o || !l || !hh) {
            s->oom = true;
            return -1;
        }
        s->cap = nc;
    }
    if (s->dlen + n > s->dcap) {
        size_t nc = s->dcap ? s->dcap * 2 : 256;
        while (nc < s->dlen + n) nc *= 2;
        uint32_t *d = realloc(s->data, nc * sizeof *d);
        if (!d) {
            s->oom = true;
            return -1;
        }
        s->data = d;
        s->dcap = nc;
    }
    if (n) memcpy(s->data + s->dlen, v, n * sizeof *v);
    s->off[s->n] = (uint32_t)s->dlen;
    s->len[s->n] = n;
    s->hash[s->n] = h;
    s->table[p] = (int32_t)s->n;
    s->dlen += n;
    s->n++;
    return 1;
}

static void sset_add(rlx__sset *s, const uint32_t *v, uint32_t n) { (void)sset_put(s, v, n); }

bool rlx__sset_copy(rlx__sset *dst, const rlx__sset *src)
{
    rlx__sset_clear(dst);
    for (size_t i = 0; i < src->n; i++) /* (a set of empty stacks only may have no data) */
        sset_add(dst, src->len[i] ? src->data + src->off[i] : NULL, src->len[i]);
    return !dst->oom;
}

/* ---- advancing ------------------------------------------------------------------------------ */

static bool end_of_seq(const gelem *e) { return e->type == G_END || e->type == G_ALT; }

/* Expands rule references at the top of stack v (of n entries, with room for one more in buf
 * up to RLX_GRAMMAR_MAX_DEPTH) until every resulting stack's top is a character set or the
 * stack is empty, adding those to out. No left recursion (checked at compile time), so this
 * ends, but the paths through alternatives that may be empty multiply: nested repetitions of
 * what may be empty (((a?){0,9}){0,9}) reach the same stacks by exponentially many paths, and
 * popping through them recurses without the stack growing. So past EXPAND_MEMO_AFTER steps an
 * expansion remembers the stacks it has expanded (what a stack expands to depends on the stack
 * alone, so one met again adds nothing new) and skips them; and it takes at most
 * RLX_GRAMMAR_MAX_EXPAND steps and RLX_GRAMMAR_MAX_EXPAND_DEPTH nested calls - past either,
 * out->overflow (the request's "too ambiguous" error), never an unbounded walk or a blown
 * thread stack. */
#define EXPAND_MEMO_AFTER 256
typedef struct expand_ctx {
    uint32_t steps;
    rlx__sset *seen; /* the stacks expanded so far, once past EXPAND_MEMO_AFTER steps */
} expand_ctx;

static void advance_r(const rlx_grammar *g, uint32_t *v, uint32_t n, rlx__sset *out, expand_ctx *x, uint32_t depth)
{
    if (out->overflow || out->oom) return;
    if (n == 0 || g->e[v[n - 1]].type != G_REF) {
        sset_add(out, v, n);
        return;
    }
    if (++x->steps > RLX_GRAMMAR_MAX_EXPAND || depth >= RLX_GRAMMAR_MAX_EXPAND_DEPTH) {
        out->overflow = true;
        return;
    }
    if (x->steps > EXPAND_MEMO_AFTER) {
        if (!x->seen) {
            if (!(x->seen = calloc(1, sizeof *x->seen))) {
                out->oom = true;
                return;
            }
            x->seen->max = RLX_GRAMMAR_MAX_EXPAND;
        }
        int r = sset_put(x->seen, v, n);
        if (r == 0) return; /* expanded already in this call: its stacks are in out */
        if (r < 0) {
            if (x->seen->oom) out->oom = true;
            else out->overflow = true;
            return;
        }
    }
    uint32_t pos = v[n - 1];
    uint32_t sub = g->rule_start[g->e[pos].value];
    uint32_t saved_top = v[n - 1];
    for (;;) {
        uint32_t m = n - 1;
        if (!end_of_seq(&g->e[pos + 1])) v[m++] = pos + 1;
        if (!end_of_seq(&g->e[sub])) {
            if (m >= RLX_GRAMMAR_MAX_DEPTH) {
                out->overflow = true;
                v[n - 1] = saved_top;
                break;
            }
            v[m++] = sub;
        }
        advance_r(g, v, m, out, x, depth + 1);
        v[n - 1] = saved_top; /* the recursion wrote over the entries above n - 1 only */
        if (out->overflow || out->oom) break;
        while (!end_of_seq(&g->e[sub])) sub++;
        if (g->e[sub].type != G_ALT) break;
        sub++;
    }
}

static void advance(const rlx_grammar *g, uint32_t *v, uint32_t n, rlx__sset *out)
{
    expand_ctx x = {0, NULL};
    advance_r(g, v, n, out, &x, 0);
    if (x.seen) {
        rlx__sset_free(x.seen);
        free(x.seen);
    }
}

void rlx__grammar_advance(const rlx_grammar *g, uint32_t *v, uint32_t n, rlx__sset *out) { advance(g, v, n, out); }

/* Does the set starting at element p contain c? *next gets the element after the set. */
static bool match_char(const gelem *e, uint32_t p, uint32_t c, uint32_t *next)
{
    if (e[p].type >= G_TOKEN) { /* a token reference holds no code point */
        *next = p + 1;
        return false;
    }
    bool positive = e[p].type == G_CHAR || e[p].type == G_ANY, found = false;
    do {
        uint32_t a, b;
        p = rlx__grammar_set_range(e, p, &a, &b);
        found = found || (a <= c && c <= b);
    } while (e[p].type == G_CHAR_ALT);
    *next = p;
    return found == positive;
}

/* Could a code point in [lo, hi] (a half-read UTF-8 sequence) be in the set at p? */
static bool match_range(const gelem *e, uint32_t p, uint32_t lo, uint32_t hi)
{
    if (e[p].type >= G_TOKEN) return false;
    bool positive = e[p].type == G_CHAR || e[p].type == G_ANY;
    do {
        uint32_t a, b;
        p = rlx__grammar_set_range(e, p, &a, &b);
        if (positive && a <= hi && b >= lo) return true;
        if (!positive && a <= lo && b >= hi) return false; /* every candidate is excluded */
    } while (e[p].type == G_CHAR_ALT);
    return !positive;
}

/* Stack v (n > 0 entries) with its top set matched: the top moves on to element next (popped
 * when next ends its alternative), advanced into out. buf: scratch of RLX_GRAMMAR_MAX_DEPTH + 1. */
static void pass_top(const rlx_grammar *g, const uint32_t *v, uint32_t n, uint32_t next, rlx__sset *out, uint32_t *buf)
{
    memcpy(buf, v, (n - 1) * sizeof *buf);
    uint32_t m = n - 1;
    if (!end_of_seq(&g->e[next])) buf[m++] = next;
    advance(g, buf, m, out);
}

/* One code point: out = the advanced stacks of `in` whose top set holds c. */
static void step_cp(const rlx_grammar *g, const rlx__sset *in, uint32_t c, rlx__sset *out, uint32_t *buf)
{
    rlx__sset_clear(out);
    for (size_t i = 0; i < in->n; i++) {
        uint32_t n = in->len[i];
        if (n == 0) continue;
        const uint32_t *v = in->data + in->off[i];
        uint32_t next;
        if (match_char(g->e, v[n - 1], c, &next)) pass_top(g, v, n, next, out, buf);
    }
}

void rlx__grammar_after_top(const rlx_grammar *g, const uint32_t *v, uint32_t n, rlx__sset *out, uint32_t *buf)
{
    uint32_t next;
    if (!n) return;
    match_char(g->e, v[n - 1], 0, &next); /* only for the element after the set, whatever it holds */
    pass_top(g, v, n, next, out, buf);
}

/* ---- states -------------------------------------------------------------------------------- */


#define LEAD_FLAG RLX__UTF8_LEAD

static bool partial_possible(const rlx_grammar *g, const rlx__sset *s, uint32_t partial, int remain)
{
    uint32_t lo, hi;
    if (!rlx__grammar_partial_range(partial, remain, &lo, &hi)) return false;
    for (size_t i = 0; i < s->n; i++)
        if (s->len[i] && match_range(g->e, s->data[s->off[i] + s->len[i] - 1], lo, hi)) return true;
    return false;
}

bool rlx__grammar_partial_possible(const rlx_grammar *g, const rlx__sset *s, uint32_t partial, int remain)
{
    return partial_possible(g, s, partial, remain);
}

bool rlx__grammar_top_has(const rlx_grammar *g, uint32_t elem, uint32_t cp)
{
    uint32_t next;
    return match_char(g->e, elem, cp, &next);
}

void rlx__grammar_step_cp(const rlx_grammar *g, const rlx__sset *in, uint32_t cp, rlx__sset *out, uint32_t *buf)
{
    step_cp(g, in, cp, out, buf);
}

int rlx__grammar_step_byte(const rlx_grammar *g, const rlx__sset *in, uint32_t *partial, int *remain, uint8_t b,
                           rlx__sset *out, uint32_t *buf)
{
    uint32_t cp = 0;
    int d = rlx__grammar_decode_byte(partial, remain, b, &cp);
    if (d == 0) return 0;
    if (d == 2) return partial_possible(g, in, *partial, *remain) ? 2 : 0;
    step_cp(g, in, cp, out, buf);
    if (out->oom) return RLX_ENOMEM;
    if (out->overflow) return RLX_ERANGE;
    return out->n ? 1 : 0;
}

/* A state with its scratch and no stacks yet; NULL when out of memory. */
static rlx_grammar_state *state_alloc(const rlx_grammar *g)
{
    rlx_grammar_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->g = g;
    s->buf = malloc((RLX_GRAMMAR_MAX_DEPTH + 1) * sizeof *s->buf);
    s->spare = calloc(3, sizeof *s->spare);
    if (!s->buf || !s->spare) {
        rlx_grammar_state_free(s);
        return NULL;
    }
    return s;
}

rlx_grammar_state *rlx_grammar_state_new(const rlx_grammar *g, rlx_error *err)
{
    rlx_grammar_state *s = state_alloc(g);
    if (!s) {
        rlx_errorf(err, RLX_ENOMEM, "out of memory");
        return NULL;
    }
    /* one stack per alternative of the root rule */
    uint32_t p = g->rule_start[g->root];
    for (;;) {
        uint32_t n = 0;
        if (!end_of_seq(&g->e[p])) s->buf[n++] = p;
        advance(g, s->buf, n, &s->stacks);
        while (!end_of_seq(&g->e[p])) p++;
        if (g->e[p].type != G_ALT) break;
        p++;
    }
    if (s->stacks.oom || s->stacks.overflow) {
        rlx_errorf(err, s->stacks.oom ? RLX_ENOMEM : RLX_ERANGE, "the grammar's start is too ambiguous: it needs more than %d "
                   "parse stacks, or more than %d expansions of rules that may be empty (nested repetitions of what may "
                   "be empty, such as ((a?){0,9}){0,9})", RLX_GRAMMAR_MAX_STACKS, RLX_GRAMMAR_MAX_EXPAND);
        rlx_grammar_state_free(s);
        return NULL;
    }
    return s;
}

rlx_grammar_state *rlx_grammar_state_clone(const rlx_grammar_state *src)
{
    rlx_grammar_state *s = state_alloc(src->g);
    if (!s || !rlx__sset_copy(&s->stacks, &src->stacks)) {
        rlx_grammar_state_free(s);
        return NULL;
    }
    s->partial = src->partial;
    s->remain = src->remain;
    return s;
}

void rlx_grammar_state_free(rlx_grammar_state *s)
{
    if (!s) return;
    rlx__sset_free(&s->stacks);
    if (s->spare) {
        rlx__sset_free(&s->spare[0]);
        rlx__sset_free(&s->spare[1]);
        rlx__sset_free(&s->spare[2]);
    }
    free(s->spare);
    free(s->buf);
    free(s);
}

/* Runs bytes from the state through its scratch sets without changing what it accepts. Returns
 * the set the stacks end in (the state's own when no code point completed) with the partial
 * sequence in *partial / *remain, or NULL with *rc the refusal (RLX_EINVAL) or a limit. */
static rlx__sset *run_bytes(const rlx_grammar_state *s, const char *bytes, size_t n, uint32_t *partial, int *remain,
                            int *rc)
{
    *partial = s->partial;
    *remain = s->remain;
    const rlx__sset *cur = &s->stacks;
    int which = 0;
    for (size_t i = 0; i < n; i++) {
        rlx__sset *out = &s->spare[which];
        int r = rlx__grammar_step_byte(s->g, cur, partial, remain, (uint8_t)bytes[i], out, s->buf);
        if (r <= 0) {
            *rc = r ? r : RLX_EINVAL;
            return NULL;
        }
        if (r == 1) {
            cur = out;
            which ^= 1;
        }
    }
    *rc = 0;
    return (rlx__sset *)cur;
}

int rlx_grammar_accept(rlx_grammar_state *s, const char *bytes, size_t n)
{
    uint32_t partial;
    int remain, rc;
    rlx__sset *res = run_bytes(s, bytes, n, &partial, &remain, &rc);
    if (!res) return rc;
    if (res != &s->stacks) { /* the result becomes the state's, its old stacks the scratch */
        rlx__sset old = s->stacks;
        s->stacks = *res;
        *res = old;
    }
    s->partial = partial;
    s->remain = remain;
    return 0;
}

bool rlx_grammar_allows(const rlx_grammar_state *s, const char *bytes, size_t n)
{
    uint32_t partial;
    int remain, rc;
    return run_bytes(s, bytes, n, &partial, &remain, &rc) != NULL;
}

/* ---- token references ---------------------------------------------------------------------- */

static bool ref_matches(const gelem *e, int32_t token)
{
    return (e->type == G_TOKEN && e->value == (uint32_t)token) || (e->type == G_TOKEN_NOT && e->value != (uint32_t)token);
}

/* A whole token through the state's scratch (run_bytes' contract): the stacks that read its bytes
 * and, at a character boundary on both sides, those whose top reference matches its id, passed. */
static rlx__sset *run_token(const rlx_grammar_state *s, int32_t token, const char *bytes, size_t n, uint32_t *partial,
                            int *remain, int *rc)
{
    if (!s->g->has_tokens) {
        if (n) return run_bytes(s, bytes, n, partial, remain, rc);
        *rc = RLX_EINVAL;
        return NULL;
    }
    rlx__sset *by_bytes = n ? run_bytes(s, bytes, n, partial, remain, rc) : NULL;
    if (n && !by_bytes && *rc != RLX_EINVAL) return NULL; /* a limit */
    if (s->remain || (by_bytes && *remain)) { /* inside a character: no reference can match */
        if (!by_bytes) *rc = RLX_EINVAL;
        return by_bytes;
    }
    rlx__sset *out = &s->spare[2]; /* the byte route's stacks, then the references' */
    rlx__sset_clear(out);
    if (by_bytes && !rlx__sset_copy(out, by_bytes)) {
        *rc = RLX_ENOMEM;
        return NULL;
    }
    for (size_t i = 0; i < s->stacks.n; i++) {
        uint32_t len = s->stacks.len[i];
        if (!len) continue; /* (a set of empty stacks only may hold no data at all) */
        const uint32_t *v = s->stacks.data + s->stacks.off[i];
        if (ref_matches(&s->g->e[v[len - 1]], token)) pass_top(s->g, v, len, v[len - 1] + 1, out, s->buf);
    }
    *rc = out->oom ? RLX_ENOMEM : out->overflow ? RLX_ERANGE : out->n ? 0 : RLX_EINVAL;
    if (*rc) return NULL;
    if (!by_bytes) *partial = 0, *remain = 0;
    return out;
}

int rlx_grammar_accept_token(rlx_grammar_state *s, int32_t token, const char *bytes, size_t n)
{
    uint32_t partial;
    int remain, rc;
    rlx__sset *res = run_token(s, token, bytes, n, &partial, &remain, &rc);
    if (!res) return rc;
    if (res != &s->stacks) {
        rlx__sset old = s->stacks;
        s->stacks = *res;
        *res = old;
    }
    s->partial = partial;
    s->remain = remain;
    return 0;
}

int rlx_grammar_token_check(const rlx_grammar_state *s, int32_t token, const char *bytes, size_t n)
{
    uint32_t partial;
    int remain, rc;
    return run_token(s, token, bytes, n, &partial, &remain, &rc) ? 0 : rc ? rc : RLX_EINVAL;
}

bool rlx_grammar_allows_token(const rlx_grammar_state *s, int32_t token, const char *bytes, size_t n)
{
    return rlx_grammar_token_check(s, token, bytes, n) == 0;
}

int64_t rlx__grammar_token_bits(const rlx_grammar_state *s, const rlx_grammar_vocab *v, uint64_t *bits,
                                uint8_t *allowed)
{
    if (!s->g->has_tokens || s->remain) return 0;
    int64_t added = 0;
    size_t words = ((size_t)v->n_vocab + 63) / 64;
    for (size_t i = 0; i < s->stacks.n; i++) {
        uint32_t len = s->stacks.len[i];
        const gelem *e = len ? &s->g->e[s->stacks.data[s->stacks.off[i] + len - 1]] : NULL;
        if (!e || e->type < G_TOKEN) continue;
        for (size_t w = 0; w < words; w++) {
            uint64_t m = e->type == G_TOKEN_NOT ? ~0ull : 0;
            if (e->value / 64 == w) m ^= 1ull << (e->value % 64);
            if (v->eog) m &= ~v->eog[w];
            if (w == words - 1 && v->n_vocab % 64) m &= (1ull << (v->n_vocab % 64)) - 1;
            if (!m) continue;
            uint64_t was = 0;
            for (uint64_t b = m; allowed && b; b &= b - 1) {
                size_t t = w * 64 + (size_t)__builtin_ctzll(b);
                was |= (uint64_t)allowed[t] << (t % 64);
                allowed[t] = 1;
            }
            if (bits) {
                was = bits[w];
                bits[w] |= m;
            }
            added += __builtin_popcountll(m & ~was);
        }
    }
    return added;
}

bool rlx_grammar_can_end(const rlx_grammar_state *s)
{
    if (s->remain) return false;
    for (size_t i = 0; i < s->stacks.n; i++)
        if (s->stacks.len[i] == 0) return true;
    return false;
}

bool rlx_grammar_must_end(const rlx_grammar_state *s)
{
    if (s->remain) return false;
    for (size_t i = 0; i < s->stacks.n; i++)
        if (s->stacks.len[i] != 0) return false;
    return true;
}

