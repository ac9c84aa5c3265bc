/* Text generation through the embedding API (include/pipenet.h): the window of each
 * sequence's last tokens, the logits of its next token, and how a token is chosen
 * (greedy, temperature and top-k sampling drawn from the counter-based hash of
 * base/rng.h, or a beam search). The logits come from a forward-only network over
 * the output's ancestors stepped one position at a time (pn_network_step: attention
 * layers answer from their key/value cache, lstm and gru carry their state), or,
 * with no_cache, from the model's full forward over the whole window
 * (pn_model_forward), the reference the cached path is tested against. A window of
 * T tokens that grows by one is cut to its newest T/2 tokens, which are stepped
 * through again from position 0 (where a recurrent state starts again, as the full
 * forward over the cut window does). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "io/text_vocab.h"
#include "model/model.h"
#include "net/network.h"

enum { VOCAB = PN_TEXT_VOCAB, MAX_BEAM = 256 };

struct pn_gen {
    pn_model *m;
    pn_gen_options o;
    int token_node, token_input, out_node, t;
    int n, n_max;        /* sequences (beams) now, and at most */
    int len;             /* tokens in every sequence's window */
    int done;            /* positions of the window the step network has run */
    bool fresh;          /* logits hold the next token's of the current windows */
    long produced;       /* tokens chosen since the start: the draws' counter */
    int *ctx, *spare;    /* [n_max * t] windows, sequence i at i * t */
    int *ids;            /* [n_max * t] the step's ids, or the full forward's */
    float *logits;       /* [n_max * VOCAB] */
    float *full;         /* no_cache: [n_max * t * VOCAB] */
    const void **inputs; /* no_cache: one per model input */
    pn_network *net;     /* the step network (cached) */
};

static void gen_free(pn_gen *g)
{
    if (!g) return;
    pn_network_free(g->net);
    free(g->ctx);
    free(g->spare);
    free(g->ids);
    free(g->logits);
    free(g->full);
    free(g->inputs);
    free(g);
}

/* Refuses a model that is not a byte-level language model; else sets the token
 * input's node and index, the output node and the window (any may be NULL). */
static int find_lm(const pn_model *m, int *token_node, int *token_input, int *t)
{
    const pn_graph *g = pn_model_graph(m);
    const char *path = pn_model_path(m);
    int out = pn_model_output_node(m);
    const pn_shape os = g->nodes[out].layer->out_shape;
    bool *need = calloc((size_t)g->n_nodes, sizeof *need);
    if (!need) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    need[out] = true;
    for (int i = out; i >= 0; i--)
        if (need[i])
            for (int k = 0; k < g->nodes[i].n_inputs; k++) need[g->nodes[i].inputs[k]] = true;
    int found = -1, index = -1, inputs = 0;
    char why[512] = "";
    for (int i = 0; i < g->n_nodes && !why[0]; i++) {
        if (!g->nodes[i].is_input) continue;
        inputs++;
        if (!need[i]) continue;
        const pn_shape s = g->nodes[i].layer->out_shape;
        int limit = pn_graph_id_limit(g, i, NULL);
        if (!s.ids)
            snprintf(why, sizeof why, "its output '%s' reads input '%s', which holds floats",
                     g->nodes[out].name, g->nodes[i].name);
        else if (limit != VOCAB)
            snprintf(why, sizeof why, "input '%s' holds ids below %d, not bytes (0..255)",
                     g->nodes[i].name, limit);
        else if (found >= 0)
            snprintf(why, sizeof why, "its output '%s' reads two id inputs, '%s' and '%s'",
                     g->nodes[out].name, g->nodes[found].name, g->nodes[i].name);
        found = i;
        index = inputs - 1;
    }
    free(need);
    if (!why[0] && found < 0)
        snprintf(why, sizeof why, "its output '%s' reads no input", g->nodes[out].name);
    if (!why[0] && (os.ids || os.width != VOCAB || os.seq != g->nodes[found].layer->out_shape.seq))
        snprintf(why, sizeof why, "its output '%s' has %d x %d values per sample, not %d x %d "
                                  "(one row of 256 logits per position of '%s')",
                 g->nodes[out].name, os.seq, os.width, g->nodes[found].layer->out_shape.seq,
                 VOCAB, g->nodes[found].name);
    if (why[0])
        return pn_error_set(PN_ERR_INVALID, "%s: not a byte-level language model: %s (generation "
                                            "needs one input of byte ids, vocab 256, and an "
                                            "output of 256 logits per position)", path, why);
    if (token_node) *token_node = found;
    if (token_input) *token_input = index;
    if (t) *t = os.seq;
    return PN_OK;
}

int pn_model_gen_window(const pn_model *m)
{
    int t;
    if (!m) return pn_error_set(PN_ERR_INVALID, "pn_model_gen_window: no model");
    return find_lm(m, NULL, NULL, &t) < 0 ? -1 : t;
}

/* The step network over the output's ancestors, planned for n_max sequences. */
static int build_step_network(pn_gen *g)
{
    const pn_graph *gr = pn_model_graph(g->m);
    bool *member = calloc((size_t)gr->n_nodes, sizeof *member);
    if (!member) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    member[g->out_node] = true;
    for (int i = g->out_node; i >= 0; i--)
        if (member[i])
            for (int k = 0; k < gr->nodes[i].n_inputs; k++) member[gr->nodes[i].inputs[k]] = true;
    const bool *part = pn_model_part(g->m); /* one stage: its layers only */
    for (int i = 0; part && i < gr->n_nodes; i++) member[i] &= part[i];
    pn_network_options o = {.member = member, .device = pn_model_device_of(g->m),
                            .forward_only = true};
    int rc = pn_network_create(&g->net, gr, &o, pn_model_params(g->m));
    free(member);
    return rc < 0 ? rc : pn_network_plan(g->net, g->n_max);
}

static int gen_create(pn_model *m, const pn_gen_options *o, pn_gen **out)
{
    *out = NULL;
    const char *path = pn_model_path(m);
    if (o->temperature < 0 || !isfinite(o->temperature))
        return pn_error_set(PN_ERR_INVALID, "%s: temperature %g: expected a number >= 0", path,
                            o->temperature);
    if (o->top_k < 0 || o->top_k > VOCAB)
        return pn_error_set(PN_ERR_INVALID, "%s: top_k %d: expected 0 (all) to %d", path,
                            o->top_k, VOCAB);
    if (o->beam < 0 || o->beam > MAX_BEAM)
        return pn_error_set(PN_ERR_INVALID, "%s: beam %d: expected 0 (sampling) to %d", path,
                            o->beam, MAX_BEAM);
    if (o->no_cache && pn_model_part(m))
        return pn_error_set(PN_ERR_UNSUPPORTED, "%s: --no-cache runs the whole model's forward, "
                            "which a model split into stages does not (run it in one process)",
                            path);
    pn_gen *g = calloc(1, sizeof *g);
    if (!g) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    g->m = m;
    g->o = *o;
    g->out_node = pn_model_output_node(m);
    g->n_max = o->beam > 1 ? o->beam : 1;
    int rc = find_lm(m, &g->token_node, &g->token_input, &g->t);
    size_t cells = (size_t)g->n_max * (size_t)(rc == PN_OK ? g->t : 0);
    if (rc == PN_OK &&
        (!(g->ctx = malloc(cells * sizeof *g->ctx)) ||
         !(g->spare = malloc(cells * sizeof *g->spare)) ||
         !(g->ids = calloc(cells, sizeof *g->ids)) ||
         !(g->logits = malloc((size_t)g->n_max * VOCAB * sizeof *g->logits)) ||
         !(g->inputs = calloc((size_t)pn_model_input_count(m), sizeof *g->inputs)) ||
         (o->no_cache && !(g->full = malloc(cells * VOCAB * sizeof *g->full)))))
        rc = pn_error_set(PN_ERR_NOMEM, "%s: out of memory for generation", path);
    if (rc == PN_OK && !o->no_cache) rc = build_step_network(g);
    if (rc < 0) {
        gen_free(g);
        return rc;
    }
    *out = g;
    return PN_OK;
}

/* Brings the logits of every sequence's next token up to date. */
static int compute_logits(pn_gen *g)
{
    if (g->fresh) return PN_OK;
    int n = g->n, t = g->t;
    if (g->o.no_cache) {
        for (int i = 0; i < n; i++)
            for (int p = 0; p < t; p++) g->ids[i * t + p] = p < g->len ? g->ctx[i * t + p] : 0;
        g->inputs[g->token_input] = g->ids;
        PN_TRY(pn_model_forward(g->m, n, g->inputs, NULL, g->full));
        for (int i = 0; i < n; i++)
            memcpy(g->logits + (size_t)i * VOCAB,
                   g->full + ((size_t)i * t + (size_t)g->len - 1) * VOCAB, VOCAB * sizeof(float));
    } else {
        PN_TRY(pn_model_select_device(g->m));
        const pn_gen_hook *hook = pn_model_gen_hook(g->m);
        pn_arg *in = pn_network_arg(g->net, g->token_node); /* NULL: another stage's */
        for (int p = g->done; p < g->len; p++) {
            for (int i = 0; i < n; i++) g->ids[i] = g->ctx[i * t + p];
            if (in) PN_TRY(pn_buffer_write(&in->ids_buf, 0, g->ids, (size_t)n * sizeof(int)));
            if (hook) /* across stages: the logits of the last position on every rank */
                PN_TRY(hook->step(hook->ctx, g->net, p, n, p == g->len - 1 ? g->logits : NULL));
            else
                PN_TRY(pn_network_step(g->net, p, n));
        }
        g->done = g->len;
        if (!hook) PN_TRY(pn_matrix_read(&pn_network_arg(g->net, g->out_node)->value, g->logits));
    }
    g->fresh = true;
    return PN_OK;
}

/* Appends tok[i] to sequence i's window; a full window is first cut to its newest
 * T/2 - 1 tokens (so it holds T/2 with the new one), which the next logits run again. */
static void append(pn_gen *g, const int *tok)
{
    int t = g->t;
    if (g->len == t) {
        int keep = t / 2 > 1 ? t / 2 - 1 : 0;
        for (int i = 0; i < g->n; i++)
            memmove(g->ctx + (size_t)i * t, g->ctx + (size_t)i * t + (t - keep),
                    (size_t)keep * sizeof *g->ctx);
        g->len = keep;
        g->done = 0;
    }
    for (int i = 0; i < g->n; i++) g->ctx[i * t + g->len] = tok[i];
    g->len++;
    g->fresh = false;
}

/* The two terms log softmax(z)[k] subtracts from z[k], in double: max(z) and
 * log sum exp(z - max(z)). */
typedef struct log_norm {
    double max, log_sum;
} log_norm;

static log_norm normalizer(const float *z)
{
    float max = z[0];
    for (int j = 1; j < VOCAB; j++)
        if (z[j] > max) max = z[j];
    double sum = 0.0;
    for (int j = 0; j < VOCAB; j++) sum += exp((double)z[j] - max);
    return (log_norm){max, log(sum)};
}

static double log_prob_with(const float *z, log_norm n, int k)
{
    return (double)z[k] - n.max - n.log_sum;
}

/* log softmax(z)[k], in double. */
static double log_prob(const float *z, int k) { return log_prob_with(z, normalizer(z), k); }

static int argmax(const float *z)
{
    int best = 0;
    for (int j = 1; j < VOCAB; j++)
        if (z[j] > z[best]) best = j;
    return best;
}

/* order[0..VOCAB) = the token ids by logit, largest first, the smaller id first among
 * equals (an insertion sort: 256 ids, no shared state). */
static void sort_by_logit(const float *z, int *order)
{
    for (int j = 0; j < VOCAB; j++) {
        int i = j;
        for (; i > 0 && z[order[i - 1]] < z[j]; i--) order[i] = order[i - 1];
        order[i] = j;
    }
}

/* Token `index` of a sampling run: argmax at temperature 0, else a draw from
 * softmax(z / temperature) over the top_k most likely, with the uniform number that
 * hashes (seed, index): the same seed gives the same tokens, cached or not. */
static int choose(const pn_gen *g, const float *z, long index)
{
    if (g->o.temperature == 0.0) return argmax(z);
    int order[VOCAB], k = g->o.top_k > 0 ? g->o.top_k : VOCAB;
    sort_by_logit(z, order);
    double w[VOCAB], sum = 0.0;
    for (int j = 0; j < k; j++)
        sum += w[j] = exp(((double)z[order[j]] - z[order[0]]) / g->o.temperature);
    uint64_t h = pn_hash_mix(pn_hash_mix(g->o.seed, pn_hash_string("generate")), (uint64_t)index);
    double u = (double)(h >> 11) * 0x1p-53 * sum;
    for (int j = 0; j < k - 1; j++) {
        if (u < w[j]) return order[j];
        u -= w[j];
    }
    return order[k - 1];
}

/* The model's generation, started by the last pn_model_gen_start. */
static int current(pn_model *m, const char *fn, pn_gen **g)
{
    if (!m) return pn_error_set(PN_ERR_INVALID, "%s: no model", fn);
    *g = pn_model_gen(m);
    if (!*g) return pn_error_set(PN_ERR_INVALID, "%s: no generation started on %s (call "
                                                 "pn_model_gen_start first)", fn,
                                 pn_model_path(m));
    return PN_OK;
}

int pn_model_gen_start(pn_model *m, const unsigned char *prompt, int len,
                       const pn_gen_options *o)
{
    static const pn_gen_options defaults;
    if (!m) return pn_error_set(PN_ERR_INVALID, "pn_model_gen_start: no model");
    if (!prompt || len < 1)
        return pn_error_set(PN_ERR_INVALID, "%s: the prompt is empty: generation starts from at "
                                            "least one byte", pn_model_path(m));
    pn_model_set_gen(m, NULL, NULL);
    pn_gen *g;
    PN_TRY(gen_create(m, o ? o : &defaults, &g));
    int first = len > g->t ? len - g->t : 0;
    g->n = 1;
    g->len = len - first;
    for (int p = 0; p < g->len; p++) g->ctx[p] = prompt[first + p];
    pn_model_set_gen(m, g, gen_free);
    return PN_OK;
}

int pn_model_gen_logits(pn_model *m, float *logits)
{
    pn_gen *g;
    PN_TRY(current(m, "pn_model_gen_logits", &g));
    if (!logits) return pn_error_set(PN_ERR_INVALID, "pn_model_gen_logits: logits is NULL");
    PN_TRY(compute_logits(g));
    memcpy(logits, g->logits, VOCAB * sizeof *logits);
    return PN_OK;
}

int pn_model_gen_next(pn_model *m, int *byte, double *logprob)
{
    pn_gen *g;
    PN_TRY(current(m, "pn_model_gen_next", &g));
    if (g->o.beam > 0)
        return pn_error_set(PN_ERR_INVALID, "%s: pn_model_gen_next samples, but this generation "
                                            "is a beam search (run it with pn_model_generate)",
                            pn_model_path(m));
    PN_TRY(compute_logits(g));
    int tok = choose(g, g->logits, g->produced++);
    if (logprob) *logprob = log_prob(g->logits, tok);
    if (byte) *byte = tok;
    append(g, &tok);
    return PN_OK;
}

int pn_model_gen_append(pn_model *m, int byte)
{
    pn_gen *g;
    PN_TRY(current(m, "pn_model_gen_append", &g));
    if (byte < 0 || byte >= VOCAB)
        return pn_error_set(PN_ERR_INVALID, "pn_model_gen_append: byte %d outside 0..255", byte);
    if (g->o.beam > 0)
        return pn_error_set(PN_ERR_INVALID, "%s: pn_model_gen_append on a beam search (it "
                                            "runs in pn_model_generate)", pn_model_path(m));
    append(g, &byte);
    return PN_OK;
}

/* A candidate of a beam step: sequence `from` followed by token `tok`. */
typedef struct beam_cand {
    double score;
    int from, tok;
} beam_cand;

static int by_score(const void *a, const void *b)
{
    const beam_cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->from != y->from) return x->from - y->from;
    return x->tok - y->tok;
}

/* Beam search of width B = o.beam for n tokens: every step extends each of the (at
 * most B) hypotheses by every byte and keeps the B of the largest sums of
 * log-probabilities (ties: the earlier hypothesis, then the smaller byte), so the
 * result depends on nothing but the model and the prompt. */
static int beam_search(pn_gen *g, int n, unsigned char *out, double *logprob)
{
    int b = g->o.beam, t = g->t;
    beam_cand *cand = malloc((size_t)b * VOCAB * sizeof *cand);
    double *score = calloc((size_t)b, sizeof *score);
    unsigned char *hist = malloc((size_t)b * (size_t)n), *hist2 = malloc((size_t)b * (size_t)n);
    int *from = malloc((size_t)b * sizeof *from), *tok = malloc((size_t)b * sizeof *tok);
    int rc = cand && score && hist && hist2 && from && tok
                 ? PN_OK
                 : pn_error_set(PN_ERR_NOMEM, "out of memory for a beam of %d", b);
    for (int s = 0; rc == PN_OK && s < n; s++) {
        if ((rc = compute_logits(g)) < 0) break;
        int c = 0;
        for (int i = 0; i < g->n; i++) { /* the normalizer once per hypothesis, not per byte */
            const float *z = g->logits + (size_t)i * VOCAB;
            log_norm norm = normalizer(z);
            for (int v = 0; v < VOCAB; v++)
                cand[c++] = (beam_cand){score[i] + log_prob_with(z, norm, v), i, v};
        }
        qsort(cand, (size_t)c, sizeof *cand, by_score);
        int kept = c < b ? c : b;
        for (int j = 0; j < kept; j++) {
            from[j] = cand[j].from;
            tok[j] = cand[j].tok;
            score[j] = cand[j].score;
            memcpy(hist2 + (size_t)j * n, hist + (size_t)from[j] * n, (size_t)s);
            hist2[(size_t)j * n + s] = (unsigned char)tok[j];
            memcpy(g->spare + (size_t)j * t, g->ctx + (size_t)from[j] * t,
                   (size_t)g->len * sizeof *g->ctx);
        }
        unsigned char *h = hist;
        hist = hist2;
        hist2 = h;
        int *w = g->ctx;
        g->ctx = g->spare;
        g->spare = w;
        if (!g->o.no_cache && g->done > 0)
            rc = pn_network_step_reorder(g->net, from, kept, g->done);
        g->n = kept;
        append(g, tok);
    }
    if (rc == PN_OK) {
        memcpy(out, hist, (size_t)n);
        if (logprob) *logprob = score[0];
    }
    free(cand);
    free(score);
    free(hist);
    free(hist2);
    free(from);
    free(tok);
    return rc;
}

int pn_model_generate(pn_model *m, const unsigned char *prompt, int len, int n,
                      const pn_gen_options *o, unsigned char *out, double *logprob)
{
    if (n < 0 || (n > 0 && !out))
        return pn_error_set(PN_ERR_INVALID, "pn_model_generate: %s",
                            n < 0 ? "negative count of tokens" : "out is NULL");
    PN_TRY(pn_model_gen_start(m, prompt, len, o));
    pn_gen *g = pn_model_gen(m);
    if (g->o.beam > 0) return beam_search(g, n, out, logprob);
    double sum = 0.0;
    for (int s = 0; s < n; s++) {
        int tok;
        double lp;
        PN_TRY(pn_model_gen_next(m, &tok, &lp));
        out[s] = (unsigned char)tok;
        sum += lp;
    }
    if (logprob) *logprob = sum;
    return PN_OK;
}
