/* grammar_rules.c - the GBNF compiler's analysis of the parsed rules (see grammar_rules.h). */
#include "engine/grammar_rules.h"

#include <stdlib.h>
#include <string.h>

/* The rules that can match the empty text (terminals false), or some finite text (terminals
 * true: "productive"), by fixpoint over their alternatives. */
void rlx__gc_fix(const rule_tab *rt, bool *out, bool terminals)
{
    memset(out, 0, (size_t)rt->n * sizeof *out);
    for (bool changed = true; changed;) {
        changed = false;
        for (int r = 0; r < rt->n; r++) {
            if (out[r]) continue;
            const gelem *e = rt->body[r].e;
            size_t i = 0;
            for (;;) { /* each alternative */
                bool all = true;
                for (; e[i].type != G_END && e[i].type != G_ALT; i++) {
                    if (e[i].type == G_REF) {
                        all = all && out[e[i].value];
                        continue;
                    }
                    all = all && terminals; /* a character set (the rest of it skipped) or a token */
                    while (e[i + 1].type == G_CHAR_ALT || e[i + 1].type == G_RNG_UPPER) i++;
                }
                if (all) {
                    out[r] = changed = true;
                    break;
                }
                if (e[i].type == G_END) break;
                i++;
            }
        }
    }
}

/* Finds a rule reachable from r through leading (nullable-prefixed) references that leads back
 * to r: such a rule can never be expanded to a character. */
int rlx__gc_left_recursive(const rule_tab *rt, const bool *nullable, int r, uint8_t *mark)
{
    if (mark[r] == 1) return r; /* on the current path */
    if (mark[r] == 2) return -1;
    mark[r] = 1;
    const gelem *e = rt->body[r].e;
    for (size_t i = 0;; i++) {
        /* start of an alternative */
        for (; e[i].type != G_END && e[i].type != G_ALT; i++) {
            if (e[i].type != G_REF) break;
            int hit = rlx__gc_left_recursive(rt, nullable, (int)e[i].value, mark);
            if (hit >= 0) return hit;
            if (!nullable[e[i].value]) break;
        }
        while (e[i].type != G_END && e[i].type != G_ALT) i++;
        if (e[i].type == G_END) break;
    }
    mark[r] = 2;
    return -1;
}

/* The counted repetitions' chains into g (grammar_internal.h): a chain whose term could match
 * nothing (all its elements references to nullable rules) is left out, since a term would not
 * then take a byte. false when out of memory. */
bool rlx__gc_chains_out(const rule_tab *rt, const bool *nullable, rlx_grammar *g)
{
    g->chain_prev = malloc((size_t)rt->n * sizeof *g->chain_prev);
    g->chain_left = malloc((size_t)rt->n * sizeof *g->chain_left);
    if (!g->chain_prev || !g->chain_left) return false;
    for (int r = 0; r < rt->n; r++) {
        bool solid = false; /* the term takes a byte or more */
        for (int i = 0; i < rt->chain_tlen[r] && !solid; i++)
            solid = rt->body[r].e[i].type != G_REF || !nullable[rt->body[r].e[i].value];
        g->chain_prev[r] = solid ? rt->chain_prev[r] : -1;
        g->chain_left[r] = (uint32_t)rt->chain_left[r];
    }
    return true;
}

/* ---- repetitions of terms that can match nothing ----
 *
 * x* with x nullable ((a|)*, (b? c?)*, as regexes and hand-written grammars have them) would
 * reach its own rule through x's empty match: left recursion, refused below. x* is the same
 * language as (x without its empty match)*, so the star rule's term is replaced by the term's
 * non-empty matches: NE(s1 .. sn) = NE(s1) s2 .. sn | NE(s2) s3 .. sn | ... for as long as the
 * symbols before are nullable; NE of a nullable rule is a new rule of the NE of its
 * alternatives; a character set or a rule that is not nullable is its own NE. */
typedef struct ne_ctx {
    parser *p;
    rule_tab *rt;
    const bool *nullable;   /* of the rules [0, n0) */
    int n0;
    int *ne;                /* [n0]: NE rule of a nullable rule (-1: not made yet) */
    bool *none;             /* [n0]: the rule matches only the empty string (its NE matches nothing) */
    size_t emitted;         /* elements written so far (an alternative of n symbols gives up to n^2) */
} ne_ctx;

static int ne_rule(ne_ctx *c, int q);

/* Appends to out the alternatives of NE(e[0..n)), each followed by tail (a rule reference; -1:
 * none), separated by G_ALT; *alts counts them. */
static bool ne_alts(ne_ctx *c, const gelem *e, size_t n, int tail, ebuf *out, int *alts)
{
    for (size_t i = 0; i < n;) {
        size_t len = 1;
        if (e[i].type != G_REF)
            while (i + len < n && (e[i + len].type == G_CHAR_ALT || e[i + len].type == G_RNG_UPPER)) len++;
        bool nul = e[i].type == G_REF && (int)e[i].value < c->n0 && c->nullable[e[i].value];
        int sym = nul ? ne_rule(c, (int)e[i].value) : -1;
        if (nul && sym < 0) return false;
        if (!nul || !c->none[e[i].value]) {
            if ((c->emitted += n - i + 3) > RLX_GRAMMAR_MAX_ELEMS) {
                rlx_errorf(c->p->err, RLX_ERANGE, "grammar: repetitions of optional terms expand past %u elements",
                           RLX_GRAMMAR_MAX_ELEMS);
                c->p->failed = true;
                return false;
            }
            if ((*alts)++ && !rlx__gc_push(c->p, out, G_ALT, 0)) return false;
            if (nul && !rlx__gc_push(c->p, out, G_REF, (uint32_t)sym)) return false;
            for (size_t k = nul ? i + len : i; k < n; k++)
                if (!rlx__gc_push(c->p, out, e[k].type, e[k].value)) return false;
            if (tail >= 0 && !rlx__gc_push(c->p, out, G_REF, (uint32_t)tail)) return false;
        }
        if (!nul) break;
        i += len;
    }
    return true;
}

static int ne_rule(ne_ctx *c, int q)
{
    if (c->ne[q] >= 0) return c->ne[q];
    int r = rlx__gc_rule_new(c->p, c->rt, c->rt->name[q]);
    if (r < 0) return -1;
    c->ne[q] = r;
    size_t n = c->rt->body[q].n; /* a copy: new rules move the bodies */
    gelem *e = malloc(n * sizeof *e);
    if (!e) return rlx__gc_perr(c->p, NULL, "out of memory"), -1;
    memcpy(e, c->rt->body[q].e, n * sizeof *e);
    ebuf out = {0};
    int alts = 0;
    bool ok = true;
    for (size_t a = 0; ok && a < n;) {
        size_t b = a;
        while (e[b].type != G_ALT && e[b].type != G_END) b++;
        ok = ne_alts(c, e + a, b - a, -1, &out, &alts);
        a = b + 1;
    }
    free(e);
    if (ok && !alts) { /* only the empty string: NE matches no code point */
        c->none[q] = true;
        ok = rlx__gc_push(c->p, &out, G_CHAR_NOT, 0) && rlx__gc_push(c->p, &out, G_RNG_UPPER, 0x10FFFF);
    }
    if (!ok || !rlx__gc_push(c->p, &out, G_END, 0)) {
        free(out.e);
        return -1;
    }
    free(c->rt->body[r].e);
    c->rt->body[r] = out;
    return r;
}

/* Rewrites every star rule whose term is nullable (see above). */
bool rlx__gc_star_terms_nonempty(parser *p, rule_tab *rt, const bool *nullable)
{
    int n0 = rt->n;
    ne_ctx c = {p, rt, nullable, n0, malloc((size_t)n0 * sizeof(int)), calloc((size_t)n0, sizeof(bool)), 0};
    bool ok = c.ne && c.none;
    if (!ok) rlx__gc_perr(p, NULL, "out of memory");
    for (int i = 0; ok && i < n0; i++) c.ne[i] = -1;
    for (int r = 0; ok && r < n0; r++) {
        int tlen = rt->star_tlen[r];
        bool nul = tlen > 0;
        for (int i = 0; nul && i < tlen; i++)
            nul = rt->body[r].e[i].type == G_REF && nullable[rt->body[r].e[i].value];
        if (!nul) continue;
        gelem term[64];
        memcpy(term, rt->body[r].e, (size_t)tlen * sizeof *term);
        ebuf out = {0};
        int alts = 0;
        ok = ne_alts(&c, term, (size_t)tlen, r, &out, &alts) && (!alts || rlx__gc_push(p, &out, G_ALT, 0)) &&
             rlx__gc_push(p, &out, G_END, 0);
        if (!ok) {
            free(out.e);
            break;
        }
        free(rt->body[r].e);
        rt->body[r] = out;
        rt->star_tlen[r] = 0;
    }
    free(c.ne);
    free(c.none);
    return ok;
}
