/* Tied parameters (an fc's "tie" to an embedding's table): the whole network's
 * gradient with respect to the one table, that is the embedding's use plus the
 * output projection's summed by pipeline/ties.c, against central differences of
 * the mean loss in which a change of the table changes both uses; the copy starts
 * equal to the table, the arena's packed index carries the tie, and the graph
 * counts the table once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "math/ops.h"
#include "net/graph.h"
#include "net/network.h"
#include "pipeline/ties.h"
#include "model_files.h"
#include "testutil.h"

/* data ids -> embedding -> fc tied to it -> softmax_xent */
#define TIED_DIRECT mf_text("tied_embedding")

/* the same with a hidden layer and positions between, and no bias on the projection */
#define TIED_DEEP mf_text("tied_embedding_hidden")

typedef struct fixture {
    pn_graph *graph;
    pn_network *net;
    pn_params *params;
    pn_ties *ties;
    pn_pass pass;
    int batch, table, copy; /* the table's and the copy's handles */
} fixture;

static void fixture_init(fixture *f, const char *json, int batch, int vocab)
{
    json_t *root = json_loads(json, 0, NULL);
    ck_assert_ptr_nonnull(root);
    int rc = pn_graph_from_json(&f->graph, root, "tied.json");
    json_decref(root);
    ck_assert_msg(rc == 0, "%s", pn_error_message());
    pn_network_options o = {.device = pn_device_host(), .init = true, .seed = 5};
    ck_assert_int_eq(pn_network_build(f->graph, &o, &f->params, &f->net), 0);
    ck_assert_int_eq(pn_network_plan(f->net, batch), 0);
    ck_assert_int_eq(pn_ties_create(&f->ties, f->graph, NULL, 0, f->params, NULL), 0);
    ck_assert_ptr_nonnull(f->ties);
    f->batch = batch;
    f->pass = (pn_pass){.training = true, .seed = 5, .step = 1};
    f->table = pn_params_find(f->params, "e/table");
    f->copy = pn_params_find(f->params, "o/w");
    ck_assert_int_ge(f->table, 0);
    ck_assert_int_ge(f->copy, 0);

    pn_rng rng;
    pn_rng_init(&rng, 23, 0);
    for (int i = 0; i < f->graph->n_nodes; i++) {
        pn_arg *a = pn_network_arg(f->net, i);
        if (a && f->graph->nodes[i].is_input)
            for (int k = 0; k < pn_arg_rows(a); k++) a->ids[k] = (int)(pn_rng_next(&rng) % vocab);
    }
    /* values of a useful size (the init's 0.02 makes every logit alike), the copy
     * kept equal to the table */
    pn_matrix all = pn_params_all_values(f->params);
    pn_matrix noise = tu_alloc(1, all.cols, 0);
    tu_fill_uniform(&noise, &rng, 0.5f);
    ck_assert_int_eq(pn_axpy(1.0f, &noise, &all), 0);
    tu_free(&noise);
    pn_matrix t = pn_params_value(f->params, f->table), c = pn_params_value(f->params, f->copy);
    ck_assert_int_eq(pn_copy(&t, &c), 0);
}

static void fixture_free(fixture *f)
{
    pn_ties_free(f->ties);
    pn_network_free(f->net);
    pn_params_free(f->params);
    pn_graph_free(f->graph);
}

static double mean_loss(fixture *f)
{
    pn_network_reset_stats(f->net);
    int rc = pn_network_forward(f->net, &f->pass);
    ck_assert_msg(rc == 0, "%s", pn_error_message());
    pn_layer_stats s;
    pn_network_stats(f->net, &s);
    return s.loss_sum / s.rows;
}

/* d loss / d table[k], the table's element k changed in both uses. */
static double numeric_table(fixture *f, size_t k, double eps)
{
    pn_matrix t = pn_params_value(f->params, f->table), c = pn_params_value(f->params, f->copy);
    float saved = t.data[k];
    t.data[k] = c.data[k] = saved + (float)eps;
    double plus = mean_loss(f);
    t.data[k] = c.data[k] = saved - (float)eps;
    double minus = mean_loss(f);
    t.data[k] = c.data[k] = saved;
    return (plus - minus) / (2 * eps);
}

static void check_tied_gradient(const char *json, int vocab)
{
    fixture f;
    fixture_init(&f, json, 3, vocab);
    ck_assert_int_eq(pn_params_zero_grads(f.params), 0);
    mean_loss(&f);
    ck_assert_int_eq(pn_network_backward(f.net, &f.pass, f.batch), 0);
    pn_matrix gt = pn_params_grad(f.params, f.table), gc = pn_params_grad(f.params, f.copy);
    size_t n = pn_matrix_count(gt);
    float *embed_use = malloc(n * sizeof *embed_use), *proj_use = malloc(n * sizeof *proj_use);
    memcpy(embed_use, gt.data, n * sizeof *embed_use);
    memcpy(proj_use, gc.data, n * sizeof *proj_use);
    ck_assert_int_eq(pn_ties_sum_grads(f.ties), 0);

    const double eps = 2e-3;
    double embed_only_err = 0.0, proj_only_err = 0.0;
    for (size_t k = 0; k < n; k++) {
        /* the sum in graph order, and the same bits in both uses */
        ck_assert_msg(gt.data[k] == embed_use[k] + proj_use[k] && gc.data[k] == gt.data[k],
                      "table[%zu]: %.9g and %.9g, uses %.9g + %.9g", k, gt.data[k], gc.data[k],
                      embed_use[k], proj_use[k]);
        double numeric = numeric_table(&f, k, eps);
        ck_assert_msg(tu_close(gt.data[k], numeric, 3e-2, 2e-4),
                      "d loss / d e/table[%zu]: summed uses %.6g, finite difference %.6g", k,
                      gt.data[k], numeric);
        embed_only_err = fmax(embed_only_err, fabs(embed_use[k] - numeric));
        proj_only_err = fmax(proj_only_err, fabs(proj_use[k] - numeric));
    }
    /* either use alone is far off: the check sees both */
    ck_assert_msg(embed_only_err > 1e-2 && proj_only_err > 1e-2, "one use alone is off by "
                  "only %.3g (embedding) or %.3g (projection)", embed_only_err, proj_only_err);
    /* the other parameters, as in test_network */
    for (int p = 0; p < pn_params_count(f.params); p++) {
        if (p == f.table || p == f.copy) continue;
        pn_matrix v = pn_params_value(f.params, p), g = pn_params_grad(f.params, p);
        for (size_t k = 0; k < pn_matrix_count(v); k++) {
            float saved = v.data[k];
            v.data[k] = saved + (float)eps;
            double plus = mean_loss(&f);
            v.data[k] = saved - (float)eps;
            double minus = mean_loss(&f);
            v.data[k] = saved;
            double numeric = (plus - minus) / (2 * eps);
            ck_assert_msg(tu_close(g.data[k], numeric, 3e-2, 2e-4), "%s[%zu]: backward %.6g, "
                          "finite difference %.6g", pn_params_get(f.params, p)->name, k,
                          g.data[k], numeric);
        }
    }
    free(embed_use);
    free(proj_use);
    fixture_free(&f);
}

START_TEST(tied_table_gradient_matches_finite_differences)
{
    check_tied_gradient(TIED_DIRECT, 6);
}
END_TEST

START_TEST(tied_table_gradient_through_a_hidden_layer)
{
    check_tied_gradient(TIED_DEEP, 5);
}
END_TEST

/* The copy starts as the table (its init and seed are the table's), the packed
 * index carries the tie to another process, and counts take the table once. */
START_TEST(copy_starts_equal_and_counts_once)
{
    json_t *root = json_loads(TIED_DEEP, 0, NULL);
    pn_graph *g;
    ck_assert_int_eq(pn_graph_from_json(&g, root, "tied.json"), 0);
    json_decref(root);
    /* e: table 5x4 + pos 3x4; h: 4x4 + 4; o: no bias, its weight is the table */
    ck_assert_int_eq(pn_graph_param_count(g), 20 + 12 + 16 + 4);
    int o = pn_graph_find(g, "o"), e = pn_graph_find(g, "e");
    ck_assert(pn_graph_is_tied_copy(g, o, 0) && !pn_graph_is_tied_copy(g, e, 0));

    pn_params *arena;
    pn_network *net;
    pn_network_options opt = {.device = pn_device_host(), .init = true, .seed = 9};
    ck_assert_int_eq(pn_network_build(g, &opt, &arena, &net), 0);
    int table = pn_params_find(arena, "e/table"), copy = pn_params_find(arena, "o/w");
    const pn_param *c = pn_params_get(arena, copy);
    ck_assert_str_eq(c->tie, "e/table");
    ck_assert_ptr_null(pn_params_get(arena, table)->tie);
    ck_assert(c->decay && c->init.kind == PN_INIT_NORMAL); /* the table's, not fc's */
    pn_matrix vt = pn_params_value(arena, table), vc = pn_params_value(arena, copy);
    ck_assert_int_eq(memcmp(vt.data, vc.data, pn_matrix_count(vt) * sizeof(float)), 0);
    float first = vt.data[0];
    ck_assert(first != 0.0f);

    char *packed;
    size_t bytes, floats;
    pn_param *items;
    int count;
    ck_assert_int_eq(pn_params_pack_index(arena, &packed, &bytes), 0);
    ck_assert_int_eq(pn_params_unpack_index(packed, bytes, &items, &count, &floats, NULL),
                     0);
    ck_assert_int_eq(count, pn_params_count(arena));
    for (int i = 0; i < count; i++) {
        ck_assert_str_eq(items[i].name, pn_params_get(arena, i)->name);
        if (i == copy) ck_assert_str_eq(items[i].tie, "e/table");
        else ck_assert_ptr_null(items[i].tie);
    }
    pn_params_free_index(items, count);
    for (size_t cut = 0; cut < bytes; cut++) /* a cut in the tie is refused too */
        ck_assert_int_eq(
            pn_params_unpack_index(packed, cut, &items, &count, &floats, NULL),
            PN_ERR_INTERNAL);
    free(packed);
    pn_network_free(net);
    pn_params_free(arena);
    pn_graph_free(g);
}
END_TEST

int main(void)
{
    pn_math_set_threads(1);
    Suite *s = suite_create("ties");
    TCase *tc = tcase_create("ties");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, tied_table_gradient_matches_finite_differences);
    tcase_add_test(tc, tied_table_gradient_through_a_hidden_layer);
    tcase_add_test(tc, copy_starts_equal_and_counts_once);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
