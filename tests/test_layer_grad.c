/* Finite-difference gradient checks for every registered layer type.
 * For each case and batch size (1 and 3), with random inputs, parameters and
 * output gradient R, the objective is L = sum(R .* forward(inputs, params)); the
 * analytic gradients from backward are compared with central differences of L for
 * every input element and every parameter element. Input and parameter gradients
 * start non-zero, so the check also proves that backward adds instead of
 * overwriting. The suite enumerates the registry: a type without a case fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "layers/layer.h"
#include "math/ops.h"
#include "testutil.h"

enum { MAX_IN = 3 };

typedef struct grad_case {
    const char *type;
    const char *attrs;       /* the layer's JSON spec */
    int n_inputs;
    pn_shape in[MAX_IN];
    int id_range[MAX_IN];    /* ids inputs draw from [0, id_range); a sparse input's
                              * sample 0 holds this many features (0: 4) */
    int lens[3];             /* input 0's length of sample b is lens[b % 3]; 0: fixed */
} grad_case;

#define F(w, s) {.width = (w), .seq = (s)}
#define IDS(s) {.seq = (s), .ids = true}
#define CSR(cols, f) {.seq = 1, .sparse = true, .fields = (f), .columns = (cols)}

static const grad_case cases[] = {
    {"data", "{\"size\": 5}", 0, {{0}}, {0}, {0}},
    {"fc", "{\"size\": 5}", 1, {F(7, 1)}, {0}, {0}},
    {"fc", "{\"size\": 3, \"act\": \"relu\"}", 1, {F(6, 2)}, {0}, {0}},
    {"fc", "{\"size\": 4, \"act\": \"tanh\", \"bias\": false}", 1, {F(5, 1)}, {0}, {0}},
    {"fc", "{\"size\": 4, \"act\": \"sigmoid\"}", 1, {F(3, 1)}, {0}, {0}},
    {"fc", "{\"size\": 3, \"act\": \"gelu\"}", 1, {F(5, 3)}, {0}, {0}},
    {"fc", "{\"size\": 5, \"act\": \"softmax\"}", 1, {F(4, 1)}, {0}, {0}},
    /* tied to an embedding's table: W is [size, in], used transposed */
    {"fc", "{\"size\": 6, \"tie\": \"emb\"}", 1, {F(4, 3)}, {0}, {0}},
    {"fc", "{\"size\": 5, \"tie\": \"emb\", \"bias\": false, \"act\": \"gelu\"}", 1,
     {F(3, 2)}, {0}, {0}},
    {"act", "{\"act\": \"relu\"}", 1, {F(9, 1)}, {0}, {0}},
    {"act", "{\"act\": \"tanh\"}", 1, {F(7, 2)}, {0}, {0}},
    {"act", "{\"act\": \"sigmoid\"}", 1, {F(7, 1)}, {0}, {0}},
    {"act", "{\"act\": \"gelu\"}", 1, {F(7, 1)}, {0}, {0}},
    {"act", "{\"act\": \"softmax\"}", 1, {F(5, 3)}, {0}, {0}},
    {"embedding", "{\"vocab\": 5, \"size\": 4}", 1, {IDS(3)}, {5}, {0}},
    {"embedding", "{\"vocab\": 6, \"size\": 3, \"positions\": true}", 1, {IDS(4)}, {6}, {0}},
    {"layernorm", "{}", 1, {F(7, 2)}, {0}, {0}},
    {"layernorm", "{\"eps\": 0.001}", 1, {F(3, 1)}, {0}, {0}},
    {"add", "{}", 3, {F(5, 1), F(5, 1), F(5, 1)}, {0}, {0}},
    {"add", "{}", 2, {F(3, 4), F(3, 4)}, {0}, {0}},
    {"concat", "{}", 2, {F(3, 2), F(4, 2)}, {0}, {0}},
    {"concat", "{}", 3, {F(1, 1), F(5, 1), F(2, 1)}, {0}, {0}},
    {"dropout", "{\"rate\": 0.4}", 1, {F(9, 1)}, {0}, {0}},
    {"attention", "{\"heads\": 3}", 1, {F(6, 5)}, {0}, {0}},
    {"attention", "{\"heads\": 1}", 1, {F(4, 3)}, {0}, {0}},
    {"attention", "{\"heads\": 2}", 1, {F(4, 1)}, {0}, {0}},
    {"attention", "{\"heads\": 2}", 1, {F(4, 4)}, {0}, {2, 4, 1}},
    {"softmax_xent", "{}", 2, {F(7, 1), IDS(1)}, {0, 7}, {0}},
    {"softmax_xent", "{}", 2, {F(3, 3), IDS(3)}, {0, 3}, {0}},
    {"mse", "{}", 2, {F(5, 1), F(5, 1)}, {0}, {0}},
    {"mse", "{}", 2, {F(2, 3), F(2, 3)}, {0}, {0}},
    {"softmax_xent", "{}", 2, {F(3, 4), IDS(4)}, {0, 3}, {2, 4, 1}},
    {"mse", "{}", 2, {F(2, 4), F(2, 4)}, {0}, {3, 1, 4}},
    {"lstm", "{\"size\": 3}", 1, {F(4, 4)}, {0}, {0}},
    {"lstm", "{\"size\": 2}", 1, {F(3, 5)}, {0}, {1, 5, 2}},
    {"lstm", "{\"size\": 3, \"reverse\": true}", 1, {F(2, 5)}, {0}, {3, 1, 2}},
    {"gru", "{\"size\": 3}", 1, {F(4, 4)}, {0}, {0}},
    {"gru", "{\"size\": 2}", 1, {F(3, 5)}, {0}, {1, 5, 2}},
    {"gru", "{\"size\": 3, \"reverse\": true}", 1, {F(2, 5)}, {0}, {3, 1, 2}},
    {"seq_pool", "{\"mode\": \"last\"}", 1, {F(4, 3)}, {0}, {0}},
    {"seq_pool", "{\"mode\": \"last\"}", 1, {F(3, 5)}, {0}, {2, 5, 1}},
    {"seq_pool", "{\"mode\": \"mean\"}", 1, {F(4, 3)}, {0}, {0}},
    {"seq_pool", "{\"mode\": \"mean\"}", 1, {F(3, 5)}, {0}, {1, 3, 2}},
    {"seq_pool", "{\"mode\": \"max\"}", 1, {F(4, 3)}, {0}, {0}},
    {"seq_pool", "{\"mode\": \"max\"}", 1, {F(3, 5)}, {0}, {5, 2, 1}},
    {"flatten", "{}", 1, {F(3, 4)}, {0}, {0}},
    {"flatten", "{}", 1, {F(5, 1)}, {0}, {0}},
    {"fm", "{}", 1, {F(4, 5)}, {0}, {0}},
    {"fm", "{}", 1, {F(3, 2)}, {0}, {0}},
    {"fm", "{}", 1, {F(3, 1)}, {0}, {0}}, /* one field: no pair, the term is 0 */
    {"inner_product", "{}", 1, {F(3, 5)}, {0}, {0}},
    {"inner_product", "{}", 1, {F(4, 2)}, {0}, {0}},
    {"cross", "{}", 2, {F(6, 1), F(6, 1)}, {0}, {0}},
    {"cross", "{}", 1, {F(5, 1)}, {0}, {0}}, /* x0 is x: both gradients reach it */
    {"cross", "{}", 2, {F(3, 2), F(3, 2)}, {0}, {0}},
    {"sigmoid_xent", "{}", 2, {F(1, 1), IDS(1)}, {0, 2}, {0}},
    {"sigmoid_xent", "{}", 2, {F(1, 3), IDS(3)}, {0, 2}, {0}},
    {"sigmoid_xent", "{}", 2, {F(1, 4), IDS(4)}, {0, 2}, {2, 4, 1}},
    /* sparse inputs (sparse_csr below): repeated ids within and across samples, an
     * empty sample; ids hashed where columns exceed rows */
    {"sparse_input", "{\"columns\": 10, \"fields\": 2}", 0, {{0}}, {0}, {0}},
    {"embedding_bag", "{\"rows\": 6, \"size\": 3}", 1, {CSR(6, 0)}, {0}, {0}},
    {"embedding_bag", "{\"rows\": 5, \"size\": 2, \"mode\": \"mean\"}", 1, {CSR(1000, 3)},
     {0}, {0}},
    {"embedding_bag", "{\"rows\": 4, \"size\": 2, \"per_field\": true}", 1, {CSR(4, 2)}, {0},
     {0}},
    {"embedding_bag", "{\"rows\": 7, \"size\": 2, \"mode\": \"mean\"}", 1, {CSR(1L << 40, 2)},
     {3000}, {0}},
    {"sparse_fc", "{\"rows\": 7, \"size\": 3}", 1, {CSR(7, 0)}, {0}, {0}},
    {"sparse_fc", "{\"rows\": 5, \"bias\": false}", 1, {CSR(100000, 2)}, {2500}, {0}},
};
enum { N_CASES = sizeof cases / sizeof *cases };

/* No gradient flows into ids or a sparse (CSR) input. */
static bool no_grad(pn_shape s) { return s.ids || s.sparse; }

/* A CSR batch for input a: sample b holds `first` features (b == 0), none (b % 3 ==
 * 1), else 4 + b; every other feature has id 3 (repeats within and across samples),
 * the rest random ids in [0, columns); values in [-1, 1); random fields. */
static void fill_csr(pn_arg *a, int batch, int first, pn_rng *rng)
{
    int nnz = 0;
    a->csr.offsets[0] = 0;
    for (int b = 0; b < batch; b++) {
        nnz += b == 0 ? (first ? first : 4) : b % 3 == 1 ? 0 : 4 + b;
        a->csr.offsets[b + 1] = nnz;
    }
    ck_assert_int_eq(pn_arg_csr_reserve(a, nnz), 0);
    a->csr.rows = batch;
    for (int j = 0; j < nnz; j++) {
        a->csr.cols[j] = j % 2 ? (int64_t)(pn_rng_next(rng) % (uint64_t)a->shape.columns)
                               : 3 % a->shape.columns;
        a->csr.vals[j] = (float)(2.0 * pn_rng_uniform(rng) - 1.0);
        if (a->csr.fields) a->csr.fields[j] = (int)(pn_rng_next(rng) % (uint64_t)a->shape.fields);
    }
}

static const double EPS = 1e-2, RTOL = 2e-2, ATOL = 2e-3;
static long checked_elements; /* reported at the end */

/* A layer with its arena and arguments, ready to run on the host. */
typedef struct harness {
    pn_layer *layer;
    pn_layer_inst inst;
    pn_params *params;
    pn_arg in[MAX_IN], out;
    int lengths[8];
    pn_arg *in_ptrs[MAX_IN];
    pn_pass pass;
} harness;

static void harness_init(harness *h, const grad_case *c, int batch, uint64_t seed)
{
    memset(h, 0, sizeof *h);
    json_error_t jerr;
    json_t *spec = json_loads(c->attrs, 0, &jerr);
    ck_assert_msg(spec != NULL, "bad case JSON %s", c->attrs);
    int rc = pn_layer_create(&h->layer, NULL, "probe", c->type, spec, c->in, c->n_inputs);
    json_decref(spec);
    ck_assert_msg(rc == 0, "create %s: %s", c->type, pn_error_message());

    pn_device host = pn_device_host();
    ck_assert_int_eq(pn_params_create(&h->params, host), 0);
    ck_assert_int_eq(pn_layer_inst_init(&h->inst, h->layer, h->params), 0);
    ck_assert_int_eq(pn_params_finalize(h->params), 0);
    pn_rng rng;
    pn_rng_init(&rng, seed, 1);
    pn_matrix all = pn_params_all_values(h->params);
    tu_fill_uniform(&all, &rng, 0.8f); /* not the init: biases and gains should be generic */

    for (int i = 0; i < c->n_inputs; i++) {
        ck_assert_int_eq(pn_arg_reserve(&h->in[i], host, c->in[i], batch, true), 0);
        if (c->in[i].sparse)
            fill_csr(&h->in[i], batch, c->id_range[i], &rng);
        else if (c->in[i].ids)
            for (int k = 0; k < pn_arg_rows(&h->in[i]); k++)
                h->in[i].ids[k] = (int)(pn_rng_next(&rng) % (uint64_t)c->id_range[i]);
        else
            tu_fill_uniform(&h->in[i].value, &rng, 1.0f);
        h->in_ptrs[i] = &h->in[i];
    }
    ck_assert_int_eq(pn_arg_reserve(&h->out, host, h->layer->out_shape, batch, true), 0);
    if (c->lens[0]) {
        for (int b = 0; b < batch; b++) h->lengths[b] = c->lens[b % 3];
        h->in[0].lengths = h->lengths;
    }
    h->pass = (pn_pass){.training = true, .seed = seed, .step = 5, .sample0 = 7};
}

static void harness_free(harness *h)
{
    for (int i = 0; i < MAX_IN; i++) pn_arg_release(&h->in[i]);
    pn_arg_release(&h->out);
    pn_layer_inst_release(&h->inst);
    pn_params_free(h->params);
    pn_layer_free(h->layer);
}

/* L = sum(R .* forward()) in double, R = the output gradient. */
static double objective(harness *h)
{
    int rc = pn_layer_forward(&h->inst, &h->pass, h->in_ptrs, &h->out);
    ck_assert_msg(rc == 0, "forward: %s", pn_error_message());
    double l = 0.0;
    pn_matrix y = h->out.value, r = h->out.grad;
    for (int i = 0; i < y.rows; i++)
        for (int j = 0; j < y.cols; j++)
            l += (double)y.data[(size_t)i * y.ld + j] * r.data[(size_t)i * r.ld + j];
    return l;
}

/* Compares analytic (grad minus its starting value) with central differences of
 * L over every element of value. */
static void compare(harness *h, pn_matrix value, const float *grad, const float *start,
                    const char *what, const char *label)
{
    for (size_t k = 0; k < pn_matrix_count(value); k++) {
        float *v = &value.data[k], saved = *v;
        *v = saved + (float)EPS;
        double plus = objective(h);
        *v = saved - (float)EPS;
        double minus = objective(h);
        *v = saved;
        double numeric = (plus - minus) / (2.0 * EPS), analytic = (double)grad[k] - start[k];
        ck_assert_msg(tu_close(analytic, numeric, RTOL, ATOL),
                      "%s: d/d %s[%zu]: backward %.6g, finite difference %.6g", label, what, k,
                      analytic, numeric);
        checked_elements++;
    }
}

static void check_case(const grad_case *c, int batch)
{
    char label[256];
    snprintf(label, sizeof label, "%s %s batch %d", c->type, c->attrs, batch);
    harness h;
    harness_init(&h, c, batch, 1000 + (uint64_t)batch);
    if (c->n_inputs == 0) { /* data: nothing differentiable, and it must declare nothing */
        ck_assert_int_eq(h.layer->n_params, 0);
        ck_assert_int_eq(pn_params_count(h.params), 0);
        harness_free(&h);
        return;
    }
    pn_rng rng;
    pn_rng_init(&rng, 77, (uint64_t)batch);
    tu_fill_uniform(&h.out.grad, &rng, 1.0f);

    /* starting gradients, kept to subtract */
    size_t n_par = pn_params_grad_size(h.params);
    float *par_start = malloc(n_par * sizeof(float) + 1), *in_start[MAX_IN] = {0};
    pn_matrix pg = pn_params_all_grads(h.params);
    tu_fill_uniform(&pg, &rng, 1.0f);
    memcpy(par_start, pg.data, n_par * sizeof(float));
    for (int i = 0; i < c->n_inputs; i++) {
        if (no_grad(c->in[i])) continue;
        size_t n = pn_matrix_count(h.in[i].grad);
        in_start[i] = malloc(n * sizeof(float));
        tu_fill_uniform(&h.in[i].grad, &rng, 1.0f);
        memcpy(in_start[i], h.in[i].grad.data, n * sizeof(float));
    }

    objective(&h);
    int rc = pn_layer_backward(&h.inst, &h.pass, h.in_ptrs, &h.out);
    ck_assert_msg(rc == 0, "%s: backward: %s", label, pn_error_message());

    for (int i = 0; i < c->n_inputs; i++) {
        if (no_grad(c->in[i])) continue;
        char what[32];
        snprintf(what, sizeof what, "input%d", i);
        compare(&h, h.in[i].value, h.in[i].grad.data, in_start[i], what, label);
        free(in_start[i]);
    }
    for (int p = 0; p < h.layer->n_params; p++) {
        pn_matrix value = pn_layer_param(&h.inst, p);
        pn_row_grad *rg = pn_layer_param_row_grad(&h.inst, p);
        if (rg) { /* the touched rows, as a table from zeros */
            size_t n = pn_matrix_count(value);
            float *dense = calloc(n + 1, sizeof(float)), *zeros = calloc(n + 1, sizeof(float));
            pn_matrix d = {dense, value.rows, value.cols, value.cols, value.device};
            ck_assert_int_eq(pn_row_grad_add_to(rg, &d), 0);
            pn_row_grad_reset(rg); /* objective() runs no backward: it stays as it is */
            compare(&h, value, dense, zeros, h.layer->param_decls[p].suffix, label);
            free(dense), free(zeros);
            continue;
        }
        size_t off = pn_params_get(h.params, h.inst.param_index[p])->grad_offset;
        compare(&h, value, pn_layer_param_grad(&h.inst, p).data, par_start + off,
                h.layer->param_decls[p].suffix, label);
    }
    free(par_start);
    harness_free(&h);
}

START_TEST(every_registered_type_has_a_case)
{
    char missing[512] = "";
    for (int t = 0; t < pn_layer_type_count(); t++) {
        const char *name = pn_layer_type_at(t)->name;
        bool found = false;
        for (int c = 0; c < N_CASES; c++) found |= !strcmp(cases[c].type, name);
        if (!found) strncat(missing, name, sizeof missing - strlen(missing) - 2), strcat(missing, " ");
    }
    ck_assert_msg(missing[0] == '\0', "layer types without a gradient check: %s", missing);
    for (int c = 0; c < N_CASES; c++)
        ck_assert_msg(pn_layer_type_find(cases[c].type), "case for unregistered type %s",
                      cases[c].type);
}
END_TEST

START_TEST(gradients_match_finite_differences)
{
    const grad_case *c = &cases[_i];
    check_case(c, 1);
    check_case(c, 3);
}
END_TEST

/* Runs backward from fixed starting gradients: the parameters' from par_start, the
 * inputs' zero, or NaN and stale (arg.h) when stale; output gradient NaN and stale
 * when out_stale (it then counts as zeros), else R (seeded). */
static void backward_from(harness *h, const grad_case *c, const float *par_start, bool stale,
                          bool out_stale)
{
    pn_matrix pg = pn_params_all_grads(h->params);
    memcpy(pg.data, par_start, pn_params_grad_size(h->params) * sizeof(float));
    pn_params_reset_row_grads(h->params);
    for (int i = 0; i < c->n_inputs; i++) {
        if (no_grad(c->in[i])) continue;
        ck_assert_int_eq(pn_fill(&h->in[i].grad, stale ? NAN : 0.0f), 0);
        h->in[i].grad_stale = stale;
    }
    pn_rng rng;
    pn_rng_init(&rng, 78, 0);
    if (out_stale)
        ck_assert_int_eq(pn_fill(&h->out.grad, NAN), 0);
    else
        tu_fill_uniform(&h->out.grad, &rng, 1.0f);
    h->out.grad_stale = out_stale;
    objective(h);
    int rc = pn_layer_backward(&h->inst, &h->pass, h->in_ptrs, &h->out);
    ck_assert_msg(rc == 0, "backward: %s", pn_error_message());
    for (int i = 0; i < c->n_inputs; i++) ck_assert(!h->in[i].grad_stale);
    ck_assert(!h->out.grad_stale);
}

/* Copies of the input gradients, the dense parameter gradients and the row-sparse
 * ones as tables, one after another. */
static float *grads_copy(harness *h, const grad_case *c, size_t *n)
{
    size_t total = pn_params_grad_size(h->params);
    for (int p = 0; p < pn_params_count(h->params); p++)
        if (pn_params_row_grad(h->params, p)) total += pn_matrix_count(pn_params_value(h->params, p));
    for (int i = 0; i < c->n_inputs; i++)
        if (!no_grad(c->in[i])) total += pn_matrix_count(h->in[i].grad);
    float *out = malloc(total * sizeof(float) + 1), *at = out;
    for (int i = 0; i < c->n_inputs; i++) {
        if (no_grad(c->in[i])) continue;
        size_t k = pn_matrix_count(h->in[i].grad);
        memcpy(at, h->in[i].grad.data, k * sizeof(float));
        at += k;
    }
    memcpy(at, pn_params_all_grads(h->params).data, pn_params_grad_size(h->params) * sizeof(float));
    at += pn_params_grad_size(h->params);
    for (int p = 0; p < pn_params_count(h->params); p++) {
        pn_row_grad *rg = pn_params_row_grad(h->params, p);
        if (!rg) continue;
        pn_matrix v = pn_params_value(h->params, p);
        pn_matrix d = {at, v.rows, v.cols, v.cols, v.device};
        memset(at, 0, pn_matrix_count(v) * sizeof(float));
        ck_assert_int_eq(pn_row_grad_add_to(rg, &d), 0);
        at += pn_matrix_count(v);
    }
    *n = total;
    return out;
}

/* Stale gradients (holding NaN here) count as zeros: backward into them gives what
 * backward into zeroed gradients gives, exactly, for every type (those that write
 * stale gradients whole and those whose stale inputs pn_layer_backward zeroes); a
 * stale output gradient counts as zeros too. */
START_TEST(stale_gradients_count_as_zeros)
{
    const grad_case *c = &cases[_i];
    if (c->n_inputs == 0) return;
    harness h;
    harness_init(&h, c, 3, 2000);
    size_t n_par = pn_params_grad_size(h.params), n_zero, n_stale, n_quiet;
    float *par_start = malloc(n_par * sizeof(float) + 1);
    pn_rng rng;
    pn_rng_init(&rng, 79, 0);
    pn_matrix pg = pn_params_all_grads(h.params);
    tu_fill_uniform(&pg, &rng, 1.0f);
    memcpy(par_start, pg.data, n_par * sizeof(float));

    backward_from(&h, c, par_start, false, false);
    float *zero = grads_copy(&h, c, &n_zero);
    backward_from(&h, c, par_start, true, false);
    float *stale = grads_copy(&h, c, &n_stale);
    ck_assert_uint_eq(n_zero, n_stale);
    for (size_t k = 0; k < n_zero; k++)
        ck_assert_msg(zero[k] == stale[k], "%s %s: gradient element %zu: %g into zeros, %g into "
                      "a stale gradient", c->type, c->attrs, k, zero[k], stale[k]);
    backward_from(&h, c, par_start, false, true);
    float *quiet = grads_copy(&h, c, &n_quiet);
    size_t n_in = 0;
    for (int i = 0; i < c->n_inputs; i++)
        if (!no_grad(c->in[i])) n_in += pn_matrix_count(h.in[i].grad);
    for (size_t k = 0; k < n_quiet; k++) /* the row-sparse tables after n_par: zeros */
        ck_assert_msg(quiet[k] == (k < n_in || k >= n_in + n_par ? 0.0f : par_start[k - n_in]),
                      "%s %s: a stale output gradient changed gradient element %zu to %g",
                      c->type, c->attrs, k, quiet[k]);
    free(zero), free(stale), free(quiet), free(par_start);
    harness_free(&h);
}
END_TEST

/* The recurrent layers' forward semantics beyond their gradients: outputs at padded
 * positions are zero and do not depend on the padding's values; a sample gives the
 * same outputs alone as in a batch of other lengths (the SequenceToBatch order); a
 * reversed layer equals the forward one run on each sample's real positions reversed. */
static void run_recurrent(const char *type, bool reverse, int batch, const int *lengths,
                          const float *x, float *y)
{
    enum { SEQ = 5, W = 3 };
    char attrs[64];
    snprintf(attrs, sizeof attrs, "{\"size\": 4, \"reverse\": %s}", reverse ? "true" : "false");
    grad_case c = {type, attrs, 1, {F(W, SEQ)}, {0}, {0}};
    harness h;
    harness_init(&h, &c, batch, 42); /* same seed: same parameter values */
    h.in[0].lengths = lengths;
    memcpy(h.in[0].value.data, x, sizeof(float) * (size_t)batch * SEQ * W);
    ck_assert_int_eq(pn_layer_forward(&h.inst, &h.pass, h.in_ptrs, &h.out), 0);
    memcpy(y, h.out.value.data, sizeof(float) * (size_t)batch * SEQ * 4);
    harness_free(&h);
}

START_TEST(recurrent_outputs_respect_lengths)
{
    enum { SEQ = 5, W = 3, H = 4, B = 3 };
    static const char *const types[] = {"lstm", "gru"};
    const int lengths[B] = {1, 5, 2};
    float x[B * SEQ * W], x2[B * SEQ * W], y[B * SEQ * H], y2[B * SEQ * H];
    float one_x[SEQ * W], one_y[SEQ * H], rev_y[SEQ * H];
    pn_rng rng;
    pn_rng_init(&rng, 3, 0);
    for (int i = 0; i < B * SEQ * W; i++) x[i] = (float)pn_rng_uniform(&rng) * 2.0f - 1.0f;
    for (int ty = 0; ty < 2; ty++)
        for (int rv = 0; rv < 2; rv++) {
            run_recurrent(types[ty], rv, B, lengths, x, y);
            memcpy(x2, x, sizeof x);
            for (int b = 0; b < B; b++)
                for (int t = lengths[b]; t < SEQ; t++)
                    for (int j = 0; j < W; j++) x2[(b * SEQ + t) * W + j] = 100.0f + (float)j;
            run_recurrent(types[ty], rv, B, lengths, x2, y2);
            ck_assert_mem_eq(y, y2, sizeof y);
            for (int b = 0; b < B; b++) {
                for (int t = lengths[b]; t < SEQ; t++)
                    for (int j = 0; j < H; j++) ck_assert(y[(b * SEQ + t) * H + j] == 0.0f);
                run_recurrent(types[ty], rv, 1, &lengths[b], &x[b * SEQ * W], one_y);
                for (int k = 0; k < lengths[b] * H; k++)
                    ck_assert_msg(fabsf(one_y[k] - y[b * SEQ * H + k]) < 1e-6f,
                                  "%s sample %d alone differs", types[ty], b);
                if (!rv) continue;
                /* reversed = forward over the reversed real positions */
                int len = lengths[b];
                memset(one_x, 0, sizeof one_x);
                for (int t = 0; t < len; t++)
                    memcpy(&one_x[t * W], &x[(b * SEQ + len - 1 - t) * W], sizeof(float) * W);
                run_recurrent(types[ty], false, 1, &lengths[b], one_x, rev_y);
                for (int t = 0; t < len; t++)
                    for (int j = 0; j < H; j++)
                        ck_assert_msg(fabsf(rev_y[(len - 1 - t) * H + j] -
                                            y[(b * SEQ + t) * H + j]) < 1e-6f,
                                      "%s reverse sample %d position %d", types[ty], b, t);
            }
        }
}
END_TEST

START_TEST(dropout_is_identity_in_evaluation)
{
    int c = 0;
    while (strcmp(cases[c].type, "dropout")) c++;
    harness h;
    harness_init(&h, &cases[c], 2, 5);
    h.pass.training = false;
    ck_assert_int_eq(pn_layer_forward(&h.inst, &h.pass, h.in_ptrs, &h.out), 0);
    ck_assert_mem_eq(h.out.value.data, h.in[0].value.data,
                     pn_matrix_count(h.out.value) * sizeof(float));
    harness_free(&h);
}
END_TEST

START_TEST(estimates_are_reported)
{
    for (int c = 0; c < N_CASES; c++) {
        harness h;
        harness_init(&h, &cases[c], 1, 3);
        double flops = pn_layer_flops(h.layer), bytes = pn_layer_activation_bytes(h.layer);
        ck_assert_msg(bytes >= (double)pn_shape_bytes(h.layer->out_shape), "%s bytes",
                      cases[c].type);
        if (cases[c].n_inputs > 0) /* inputs compute nothing */
            ck_assert_msg(flops > 0.0, "%s reports no FLOPs", cases[c].type);
        harness_free(&h);
    }
}
END_TEST

int main(void)
{
    pn_math_set_threads(1);
    Suite *s = suite_create("layer gradients");
    TCase *tc = tcase_create("finite differences");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_registered_type_has_a_case);
    tcase_add_loop_test(tc, gradients_match_finite_differences, 0, N_CASES);
    tcase_add_loop_test(tc, stale_gradients_count_as_zeros, 0, N_CASES);
    tcase_add_test(tc, recurrent_outputs_respect_lengths);
    tcase_add_test(tc, dropout_is_identity_in_evaluation);
    tcase_add_test(tc, estimates_are_reported);
    suite_add_tcase(s, tc);
    int rc = tu_run_suite(s);
    printf("gradient checks: %d cases x 2 batch sizes over %d layer types, %ld elements "
           "compared with finite differences\n",
           N_CASES, pn_layer_type_count(), checked_elements);
    return rc;
}
