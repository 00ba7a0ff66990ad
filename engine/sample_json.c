/* sample_json.c - a constraint stage for JSON output (json_schema, response_format): no object
 * repeats a key. A grammar cannot say it (an object of additionalProperties or patternProperties
 * takes any number of keys from an open set), so a model could write {"a": 1, "a": 2}, which
 * strict parsers refuse and OpenAI's structured outputs never give. The stage follows the
 * generated text with a small JSON reader (containers, strings and their escapes; the grammar
 * keeps the text valid JSON) and refuses a token that would close an object key already in
 * that object. Keys compare by their decoded text ("a" and "\u0061" are one key), as 64-bit
 * hashes. With the grammar's stage beside it, a token that leaves a key spelling a used one is
 * refused too where the grammar lets nothing but the closing quote follow (a pattern's keys:
 * "c" written again can only close as "c"). Where the grammar offers an object a short list of
 * keys (asked once, at its first ','; rlx_grammar_strings_before), a ',' once every listed key is
 * written is refused (the object closes instead), and so is a key begun whose every listed
 * completion is written ("d" where "de" alone begins so). Where the grammar leaves nothing but
 * such tokens, the stage yields rather than end the request. Called only by the thread running
 * the sampler. */
#include "engine/grammar.h"
#include "engine/sample_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define LOCAL_PUSH 32  /* containers a token may open that a check follows; deeper: allowed */
#define LOCAL_KEYS 16  /* keys a token may close that a check follows */

#define KEYSET_MAX 64 /* keys an object's grammar may offer for its key list to be followed */
#define KEY_PRE 64    /* bytes of a key kept as text (a list's keys; the key being written) */

/* A listed key: its hash, and its text as written (len > KEY_PRE: only the first KEY_PRE bytes) */
typedef struct kentry { uint64_t h; size_t len; char text[KEY_PRE]; } kentry;

typedef struct jframe {
    bool object, expect_key;
    uint64_t *keys;
    size_t n_keys, cap_keys;
    /* The keys the grammar offers after the object's first ',' (KEYSET_MAX at most): 0 not
     * asked yet, 1 listed in kset, -1 not a short list (or the grammar did not say). */
    int8_t keyset;
    kentry *kset;
    size_t n_kset;
} jframe;

/* The reader's state apart from the containers' key sets (copied by a check). */
typedef struct jscan {
    bool in_str, is_key, esc;
    int uhex;                 /* hex digits of a \u escape still to come (0: none) */
    uint32_t unit, hi;        /* the \u escape so far; a high surrogate waiting for its low one */
    uint64_t h;               /* the key's hash so far */
    bool fits;                /* a key whose bytes so far, as written (escapes too), are in pre */
    uint8_t n_pre;
    uint8_t pre[KEY_PRE];
} jscan;

typedef struct json_stage {
    rlx_sampler_stage base;
    const char *const *texts; /* per token (borrowed) */
    const size_t *lens;
    int32_t n_vocab;
    jframe *f;
    size_t depth, cap;
    jscan sc;
    const rlx_sampler_stage *grammar; /* the grammar stage before this one (NULL: none) */
    bool yield;               /* the position's mask would refuse every token the others allow */
    rlx_token_logit *saved;   /* the mask's refused tokens and their logits (a yield restores them) */
    size_t cap_saved;
} json_stage;

#define FNV0 0xcbf29ce484222325ull
static uint64_t fnv(uint64_t h, uint8_t b) { return (h ^ b) * 0x100000001b3ull; }

/* A code point into the hash as its UTF-8 bytes (a lone surrogate as its three bytes), so a key
 * written with escapes hashes as the same key written raw. */
static uint64_t hash_cp(uint64_t h, uint32_t cp)
{
    utf8proc_uint8_t b[4];
    const utf8proc_ssize_t n = utf8proc_encode_char((utf8proc_int32_t)cp, b);
    for (utf8proc_ssize_t i = 0; i < n; i++) h = fnv(h, b[i]);
    return h;
}

/* A code unit of a \u escape into the key's hash (a surrogate pair as its code point). */
static void key_unit(jscan *sc, uint32_t u)
{
    if (sc->hi && u >= 0xdc00 && u <= 0xdfff) {
        sc->h = hash_cp(sc->h, 0x10000 + ((sc->hi - 0xd800) << 10) + (u - 0xdc00));
        sc->hi = 0;
        return;
    }
    if (sc->hi) sc->h = hash_cp(sc->h, sc->hi), sc->hi = 0;
    if (u >= 0xd800 && u <= 0xdbff) sc->hi = u;
    else sc->h = hash_cp(sc->h, u);
}

static int hexval(uint8_t c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A string opened (a key or not). */
static jscan open_str(bool is_key) { return (jscan){.in_str = true, .is_key = is_key, .h = FNV0, .fits = is_key}; }

/* One byte inside a string; returns true when it closed the string. */
static bool str_byte(jscan *sc, uint8_t b)
{
    if (sc->fits && (b != '"' || sc->esc || sc->uhex)) { /* a key's text as written, escapes and all */
        if (sc->n_pre == KEY_PRE) sc->fits = false;
        else sc->pre[sc->n_pre++] = b;
    }
    if (sc->uhex) {
        int v = hexval(b);
        sc->unit = (sc->unit << 4) | (uint32_t)(v < 0 ? 0 : v);
        if (--sc->uhex == 0 && sc->is_key) key_unit(sc, sc->unit);
        return false;
    }
    if (sc->esc) {
        sc->esc = false;
        if (b == 'u') {
            sc->uhex = 4;
            sc->unit = 0;
            return false;
        }
        if (sc->is_key) {
            if (sc->hi) sc->h = hash_cp(sc->h, sc->hi), sc->hi = 0;
            uint8_t d = b == 'n' ? '\n' : b == 't' ? '\t' : b == 'r' ? '\r' : b == 'b' ? '\b' : b == 'f' ? '\f' : b;
            sc->h = fnv(sc->h, d);
        }
        return false;
    }
    if (b == '\\') {
        sc->esc = true;
        return false;
    }
    if (b == '"') {
        if (sc->is_key && sc->hi) sc->h = hash_cp(sc->h, sc->hi), sc->hi = 0;
        sc->in_str = false;
        return true;
    }
    if (sc->is_key) {
        if (sc->hi) sc->h = hash_cp(sc->h, sc->hi), sc->hi = 0;
        sc->h = fnv(sc->h, b);
    }
    return false;
}

static bool has_key(const jframe *f, uint64_t h)
{
    for (size_t i = 0; i < f->n_keys; i++)
        if (f->keys[i] == h) return true;
    return false;
}

/* Whether the bytes, read after the text so far, close no key twice in one object; the state is
 * not changed. Containers with index < low are the reader's (low: the fewest open since the
 * bytes began; only the one at low - 1 can change, its expect_key in exp_low); those the bytes
 * open are followed in a local overlay (index - low). */
static bool check(const json_stage *s, const char *p, size_t n)
{
    jscan sc = s->sc;
    size_t depth = s->depth, low = s->depth;
    bool exp_low = low ? s->f[low - 1].expect_key : false;
    bool lobj[LOCAL_PUSH], lexp[LOCAL_PUSH];
    uint64_t lkeys[LOCAL_KEYS];
    size_t lkey_depth[LOCAL_KEYS], n_lkeys = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t b = (uint8_t)p[i];
        const bool local = depth > low;
        const bool obj = depth == 0 ? false : local ? lobj[depth - low - 1] : s->f[depth - 1].object;
        bool *exp = depth == 0 ? NULL : local ? &lexp[depth - low - 1] : &exp_low;
        if (sc.in_str) {
            if (!str_byte(&sc, b) || !sc.is_key) continue;
            bool dup = false; /* a key closed in the container at index depth - 1 */
            for (size_t k = 0; k < n_lkeys && !dup; k++) dup = lkey_depth[k] == depth && lkeys[k] == sc.h;
            if (!dup && !local && depth) dup = has_key(&s->f[depth - 1], sc.h);
            if (dup) return false;
            if (n_lkeys < LOCAL_KEYS) lkeys[n_lkeys] = sc.h, lkey_depth[n_lkeys++] = depth;
            if (exp) *exp = false;
            continue;
        }
        if (b == '"') {
            sc = open_str(obj && exp && *exp);
        } else if (b == '{' || b == '[') {
            if (depth - low >= LOCAL_PUSH) return true; /* too deep to follow here: allowed */
            lobj[depth - low] = b == '{';
            lexp[depth - low] = b == '{';

            depth++;
        } else if (b == '}' || b == ']') {
            if (depth == 0) return true;
            depth--;
            for (size_t k = 0; k < n_lkeys; k++) /* the closed container's keys are gone */
                if (lkey_depth[k] > depth) lkey_depth[k] = (size_t)-1;
            if (depth < low) {
                low = depth;
                exp_low = low ? s->f[low - 1].expect_key : false;
            }
        } else if (b == ',' && obj && exp) {
            *exp = true;
        }
    }
    return true;
}

static int push(json_stage *s, bool object)
{
    if (s->depth == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 16;
        jframe *f = realloc(s->f, c * sizeof *f);
        if (!f) return RLX_ENOMEM;
        s->f = f;
        s->cap = c;
    }
    s->f[s->depth++] = (jframe){.object = object, .expect_key = object};
    return 0;
}

/* Follows a generated token's bytes for good. */
static int json_accept(rlx_sampler_stage *st, int32_t token, bool generated)
{
    json_stage *s = (json_stage *)st;
    s->yield = false;
    if (!generated || token < 0 || token >= s->n_vocab || !s->texts[token]) return 0;
    const uint8_t *p = (const uint8_t *)s->texts[token];
    for (size_t i = 0; i < s->lens[token]; i++) {
        const uint8_t b = p[i];
        jframe *top = s->depth ? &s->f[s->depth - 1] : NULL;
        if (s->sc.in_str) {
            if (!str_byte(&s->sc, b) || !s->sc.is_key || !top) continue;
            if (top->n_keys == top->cap_keys) {
                size_t c = top->cap_keys ? top->cap_keys * 2 : 8;
                uint64_t *k = realloc(top->keys, c * sizeof *k);
                if (!k) return RLX_ENOMEM;
                top->keys = k;
                top->cap_keys = c;
            }
            top->keys[top->n_keys++] = s->sc.h;
            top->expect_key = false;
            continue;
        }
        if (b == '"') {
            s->sc = open_str(top && top->object && top->expect_key);
        } else if (b == '{' || b == '[') {
            if (push(s, b == '{')) return RLX_ENOMEM;
        } else if ((b == '}' || b == ']') && s->depth) {
            --s->depth;
            free(s->f[s->depth].keys);
            free(s->f[s->depth].kset);
        } else if (b == ',' && top && top->object) {
            top->expect_key = true;
        }
    }
    return 0;
}

/* Whether the bytes leave the text inside a key of the current object (opened before or by
 * them, with no container opened or closed on the way) that so far spells a key the object has
 * (*h its hash). */
static bool open_used_key(const json_stage *s, const char *p, size_t n)
{
    if (!s->depth || !s->f[s->depth - 1].object) return false;
    const jframe *top = &s->f[s->depth - 1];
    jscan sc = s->sc;
    bool exp = top->expect_key;
    for (size_t i = 0; i < n; i++) {
        const uint8_t b = (uint8_t)p[i];
        if (sc.in_str) {
            if (str_byte(&sc, b)) return false; /* closed: check() judges it */
            continue;
        }
        if (b == '"') sc = open_str(exp);
        else if (b == '{' || b == '[' || b == '}' || b == ']') return false;
        else if (b == ',') exp = true;
    }
    return sc.in_str && sc.is_key && !sc.esc && !sc.uhex && !sc.hi && has_key(top, sc.h);
}

/* Whether, after the token, the grammar lets nothing but '"' follow. */
static bool grammar_closes(const json_stage *s, const char *p, size_t n)
{
    const rlx_grammar_state *g = s->grammar ? rlx_grammar_stage_state(s->grammar) : NULL;
    rlx_grammar_state *c = g ? rlx_grammar_state_clone(g) : NULL;
    if (!c) return false;
    bool closes = rlx_grammar_accept(c, p, n) == 0;
    for (int b = 0; closes && b < 256; b++) {
        const char ch = (char)b;
        if (b != '"' && rlx_grammar_allows(c, &ch, 1)) closes = false;
    }
    rlx_grammar_state_free(c);
    return closes;
}

/* ---- an object whose keys are all used: a ',' that would open one more is refused ---- */

#define KEYSET_MAX_LEN 64  /* code points of a listed key, at most */
#define KEYSET_STEPS 1024  /* steps of the walk that lists them, at most */

typedef struct kset_fill { kentry *k; size_t n; } kset_fill;

/* A listed key as the grammar spells it, read by the key reader as a written key is: its text
 * as written (escapes and all, so that "\\" begun matches "\\n" and "\\t"; len past KEY_PRE
 * when it does not fit) and the hash of its decoded text (\" and \u0071 are their characters). */
static int kset_add(void *ctx, const uint32_t *cps, size_t n)
{
    kset_fill *f = ctx;
    jscan sc = open_str(true);
    for (size_t i = 0; i < n; i++) {
        utf8proc_uint8_t b[4];
        const utf8proc_ssize_t m = utf8proc_encode_char((utf8proc_int32_t)cps[i], b);
        for (utf8proc_ssize_t j = 0; j < m; j++)
            if (str_byte(&sc, b[j])) return RLX_ERANGE; /* cannot be: '"' ends the list's strings */
    }
    if (sc.esc || sc.uhex) return RLX_ERANGE; /* an escape left open: not a key */
    str_byte(&sc, '"'); /* a high surrogate left waiting counts as itself, as when a key closes */
    kentry *k = &f->k[f->n++];
    *k = (kentry){.h = sc.h, .len = sc.fits ? sc.n_pre : KEY_PRE + 1};
    memcpy(k->text, sc.pre, sc.n_pre);
    return 0;
}

/* Lists the keys the grammar offers after a ',' of the top object: from the state after the text
 * so far, the token's first `upto` bytes (which end with that ',') and '"'. Asked at the first
 * ',' only: after it the offer only narrows (a schema's object: its optional properties in order,
 * then the extras; alternatives drop out), so the first list holds every later one. The grammar
 * refusing the bytes leaves the question for a later token. */
static void list_keys(json_stage *s, jframe *top, const char *p, size_t upto)
{
    const rlx_grammar_state *g = rlx_grammar_stage_state(s->grammar);
    rlx_grammar_state *c = g ? rlx_grammar_state_clone(g) : NULL;
    kentry *k = c ? malloc(KEYSET_MAX * sizeof *k) : NULL;
    if (k && !rlx_grammar_accept(c, p, upto)) {
        kset_fill f = {k, 0};
        size_t n = 0;
        top->keyset = -1;
        if (!rlx_grammar_accept(c, "\"", 1) &&
            !rlx_grammar_strings_before(c, '"', '\\', KEYSET_MAX, KEYSET_MAX_LEN, KEYSET_STEPS, kset_add, &f, &n) && n) {
            top->kset = k, top->n_kset = n, top->keyset = 1;
            k = NULL;
        }
    }
    free(k);
    rlx_grammar_state_free(c);
}

/* Whether every listed key of the object that begins with the given text (all of them for none)
 * is one it has or one of `closed`; false when none begins so. */
static bool listed_all_used(const jframe *top, const uint8_t *pre, size_t n_pre, const uint64_t *closed, size_t n_closed)
{
    size_t cands = 0;
    for (size_t k = 0; k < top->n_kset; k++) {
        const kentry *e = &top->kset[k];
        if (e->len < n_pre || (n_pre && memcmp(e->text, pre, n_pre))) continue;
        cands++;
        bool used = has_key(top, e->h);
        for (size_t c = 0; c < n_closed && !used; c++) used = closed[c] == e->h;
        if (!used) return false;
    }
    return cands > 0;
}

/* Whether the token leads the top object where only keys it has could follow, by the keys its
 * grammar offers (list_keys): a ',' once every listed key is written (a pattern's keys,
 * {"en","fr","de"}, all there: the object has to close instead), or a key left open whose every
 * listed completion is written ("d" where "de" is the only key so begun). Keys the token closes
 * count. */
static bool token_into_used(json_stage *s, const char *p, size_t n)
{
    if (!s->grammar || !s->depth || !s->f[s->depth - 1].object || s->f[s->depth - 1].keyset < 0) return false;
    jframe *top = &s->f[s->depth - 1];
    jscan sc = s->sc;
    size_t depth = s->depth;
    bool exp = top->expect_key;
    uint64_t closed[LOCAL_KEYS];
    size_t n_closed = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t b = (uint8_t)p[i];
        if (sc.in_str) {
            if (str_byte(&sc, b) && sc.is_key) {
                if (n_closed < LOCAL_KEYS) closed[n_closed++] = sc.h;
                exp = false;
            }
            continue;
        }
        if (b == '"') {
            sc = open_str(depth == s->depth && exp);
        } else if (b == '{' || b == '[') {
            depth++;
        } else if (b == '}' || b == ']') {
            if (depth-- == s->depth) return false; /* the object closed first */
        } else if (b == ',' && depth == s->depth) {
            exp = true;
            if (!top->keyset) list_keys(s, top, p, i + 1);
            if (top->keyset < 0) return false;
            if (top->keyset && listed_all_used(top, NULL, 0, closed, n_closed)) return true;
        }
    }
    return top->keyset > 0 && depth == s->depth && sc.in_str && sc.is_key && sc.fits &&
           listed_all_used(top, sc.pre, sc.n_pre, closed, n_closed);
}

/* A token holding '"' that closes a key the object has; with the grammar, also one that leaves
 * the key spelling such a key where the grammar forces it to close next (a pattern of a few
 * one-letter keys: "c" written again could only become "c" - refused one token later, the
 * stage met nothing but repeats and yielded). */
static bool refuses(json_stage *s, int32_t t)
{
    const char *p = s->texts[t];
    if (!p) return false;
    if (memchr(p, '"', s->lens[t]) && !check(s, p, s->lens[t])) return true;
    if ((s->sc.in_str || memchr(p, ',', s->lens[t]) || memchr(p, '"', s->lens[t])) && token_into_used(s, p, s->lens[t]))
        return true;
    if (!s->grammar || (!s->sc.in_str && !memchr(p, '"', s->lens[t]))) return false; /* opens no key */
    return open_used_key(s, p, s->lens[t]) && grammar_closes(s, p, s->lens[t]);
}

static bool json_allows(rlx_sampler_stage *st, int32_t token)
{
    json_stage *s = (json_stage *)st;
    return s->yield || token < 0 || token >= s->n_vocab || !refuses(s, token);
}

/* Refuses the tokens that would repeat a key, among those still allowed (the grammar's mask came
 * first); when that would leave none, refuses none (yield) and allows() agrees for this position. */
static int64_t json_mask(rlx_sampler_stage *st, rlx_token_cands *c)
{
    json_stage *s = (json_stage *)st;
    int64_t left = 0;
    size_t refused = 0;
    for (int32_t t = 0; t < c->n_vocab; t++) {
        if (c->logits[t] == -INFINITY) continue;
        left++;
        if (!refuses(s, t)) continue;
        if (refused == s->cap_saved) { /* one pass: refused at once, kept to be put back on a yield */
            size_t cap = s->cap_saved ? s->cap_saved * 2 : 16;
            rlx_token_logit *v = realloc(s->saved, cap * sizeof *v);
            if (!v) return RLX_ENOMEM;
            s->saved = v;
            s->cap_saved = cap;
        }
        s->saved[refused++] = (rlx_token_logit){t, c->logits[t]};
        c->logits[t] = -INFINITY;
    }
    if (refused && (int64_t)refused == left) { /* only repeats are left: yield (a schema's keys all used) */
        for (size_t i = 0; i < refused; i++) c->logits[s->saved[i].id] = s->saved[i].logit;
        s->yield = true;
        return left;
    }
    return left - (int64_t)refused;
}

static void json_free(rlx_sampler_stage *st)
{
    json_stage *s = (json_stage *)st;
    for (size_t i = 0; i < s->depth; i++) free(s->f[i].keys), free(s->f[i].kset);
    free(s->f);
    free(s->saved);
    free(s);
}

rlx_sampler_stage *rlx_json_keys_stage_new(const char *const *texts, const size_t *lens, int32_t n_vocab,
                                           const rlx_sampler_stage *grammar)
{
    static const rlx_stage_ops ops = {.name = "json_keys", .allows = json_allows, .mask = json_mask, .accept = json_accept,
                                      .free = json_free};
    json_stage *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->base.ops = &ops;
    s->texts = texts;
    s->lens = lens;
    s->n_vocab = n_vocab;
    s->grammar = grammar;
    return &s->base;
}
