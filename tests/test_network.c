/* pn_network: whole-network gradients against finite differences of the mean loss
 * (an MLP with a skip connection, layer norm, dropout and concat; a small causal
 * transformer block on token ids), batch changes within the plan, a stage subset
 * with an input supplied from outside, and no allocation in steady-state steps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "math/ops.h"
#include "net/graph.h"
#include "net/network.h"
#include "model_files.h"
#include "testutil.h"

#define SKIP_MLP mf_text("skip_mlp_concat")
#define TINY_TRANSFORMER mf_text("tiny_transformer")
#define PADDED_LSTM mf_text("padded_lstm_pool")
#define PADDED_TAGGER mf_text("padded_gru_tagger")

typedef struct fixture {
    pn_graph *graph;
    pn_network *net;
    pn_params *params;
    pn_pass pass;
    int batch;
} fixture;

static void fixture_init(fixture *f, const char *json, const bool *member, int batch)
{
    f->graph = tu_graph_of(json);
    pn_network_options o = {.member = member, .device = pn_device_host(), .init = true,
                            .seed = 3};
    ck_assert_int_eq(pn_network_build(f->graph, &o, &f->params, &f->net), 0);
    ck_assert_int_eq(pn_network_plan(f->net, batch), 0);
    f->batch = batch;
    f->pass = (pn_pass){.training = true, .seed = 3, .step = 1, .sample0 = 0};

    tu_fill_inputs(f->net, f->graph, 17);
    tu_jitter_params(f->params);
}

static void fixture_free(fixture *f)
{
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

static double fixture_loss(void *f) { return mean_loss(f); }

/* Every parameter's gradient from backward against central differences. */
static void check_param_gradients(fixture *f)
{
    ck_assert_int_eq(pn_params_zero_grads(f->params), 0);
    mean_loss(f);
    ck_assert_int_eq(pn_network_backward(f->net, &f->pass, f->batch), 0);
    tu_check_param_gradients(f->params, fixture_loss, f);
}

START_TEST(skip_mlp_gradients_match_finite_differences)
{
    fixture f;
    fixture_init(&f, SKIP_MLP, NULL, 3);
    check_param_gradients(&f);
    fixture_free(&f);
}
END_TEST

START_TEST(transformer_block_gradients_match_finite_differences)
{
    fixture f;
    fixture_init(&f, TINY_TRANSFORMER, NULL, 2);
    check_param_gradients(&f);
    fixture_free(&f);
}
END_TEST

START_TEST(steady_state_steps_allocate_nothing)
{
    fixture f;
    fixture_init(&f, SKIP_MLP, NULL, 8);
    pn_pool_stats before, after;
    for (int step = 0; step < 6; step++) {
        if (step == 1) pn_pool_stats_get(pn_device_host(), &before);
        f.pass.step = step;
        mean_loss(&f);
        ck_assert_int_eq(pn_network_backward(f.net, &f.pass, f.batch), 0);
        ck_assert_int_eq(pn_params_zero_grads(f.params), 0);
    }
    pn_pool_stats_get(pn_device_host(), &after);
    ck_assert_uint_eq(after.system_allocs, before.system_allocs);
    ck_assert_uint_eq(after.reuses, before.reuses); /* not even from the pool */
    fixture_free(&f);
}
END_TEST

START_TEST(smaller_batches_fit_the_plan)
{
    fixture f;
    fixture_init(&f, SKIP_MLP, NULL, 5);
    double full = mean_loss(&f);
    ck_assert_int_eq(pn_network_set_batch(f.net, 2), 0);
    double part = mean_loss(&f);
    ck_assert(isfinite(full) && isfinite(part) && full != part);
    pn_layer_stats s;
    pn_network_stats(f.net, &s);
    ck_assert_double_eq(s.rows, 2);
    ck_assert_int_eq(pn_network_set_batch(f.net, 6), PN_ERR_INTERNAL);
    fixture_free(&f);
}
END_TEST

/* --recompute's forward (pipeline/stage.c): the same pass again gives the same loss,
 * dropout included, and leaves the loss statistics as they were. */
START_TEST(recompute_forward_counts_nothing_again)
{
    fixture f;
    fixture_init(&f, SKIP_MLP, NULL, 5);
    pn_layer_stats first, again, counted;
    ck_assert_int_eq(pn_network_forward(f.net, &f.pass), 0);
    pn_network_stats(f.net, &first);
    pn_pass re = f.pass;
    re.recompute = true;
    ck_assert_int_eq(pn_network_forward(f.net, &re), 0);
    pn_network_stats(f.net, &again);
    ck_assert(again.rows == first.rows && again.loss_sum == first.loss_sum);
    pn_network_reset_stats(f.net);
    ck_assert_int_eq(pn_network_forward(f.net, &re), 0);
    pn_network_stats(f.net, &again);
    ck_assert(again.rows == 0 && again.loss_sum == 0);
    ck_assert_int_eq(pn_network_forward(f.net, &f.pass), 0);
    pn_network_stats(f.net, &counted);
    ck_assert(counted.rows == first.rows && counted.loss_sum == first.loss_sum);
    fixture_free(&f);
}
END_TEST

/* A network holding only the layers after h1 receives h1 from outside and sends its
 * gradient back: the same numbers as the whole network computes. */
START_TEST(stage_subset_matches_whole_network)
{
    fixture whole;
    fixture_init(&whole, SKIP_MLP, NULL, 3);
    ck_assert_int_eq(pn_params_zero_grads(whole.params), 0);
    double loss = mean_loss(&whole);
    ck_assert_int_eq(pn_network_backward(whole.net, &whole.pass, 3), 0);

    int h1 = pn_graph_find(whole.graph, "h1");
    bool *member = calloc((size_t)whole.graph->n_nodes, sizeof *member);
    for (int i = h1 + 1; i < whole.graph->n_nodes; i++) member[i] = true;
    member[pn_graph_find(whole.graph, "x")] = member[pn_graph_find(whole.graph, "y")] = true;
    member[h1] = false;
    fixture tail;
    fixture_init(&tail, SKIP_MLP, member, 3);
    /* same data and parameters as the whole network */
    for (int i = 0; i < whole.graph->n_nodes; i++) {
        pn_arg *a = pn_network_arg(tail.net, i), *w = pn_network_arg(whole.net, i);
        if (!a) continue;
        if (a->shape.ids) memcpy(a->ids, w->ids, (size_t)pn_arg_rows(a) * sizeof(int));
        else ck_assert_int_eq(pn_copy(&w->value, &a->value), 0);
    }
    for (int p = 0; p < pn_params_count(tail.params); p++) {
        const char *name = pn_params_get(tail.params, p)->name;
        pn_matrix dst = pn_params_value(tail.params, p);
        pn_matrix src = pn_params_value(whole.params, pn_params_find(whole.params, name));
        ck_assert_int_eq(pn_copy(&src, &dst), 0);
    }
    ck_assert_ptr_null(pn_network_arg(tail.net, pn_graph_find(tail.graph, "nothing")));
    ck_assert_int_eq(pn_params_find(tail.params, "h1/w"), -1); /* not this stage's */
    ck_assert_int_eq(pn_params_zero_grads(tail.params), 0);
    ck_assert_double_eq_tol(mean_loss(&tail), loss, 1e-6);
    ck_assert_int_eq(pn_network_backward(tail.net, &tail.pass, 3), 0);
    pn_arg *boundary = pn_network_arg(tail.net, h1);
    ck_assert_ptr_nonnull(boundary->grad.data);
    /* the boundary gradient equals what the whole network passed into h1 */
    pn_arg *inner = pn_network_arg(whole.net, h1);
    for (size_t k = 0; k < pn_matrix_count(boundary->grad); k++)
        ck_assert(tu_close(boundary->grad.data[k], inner->grad.data[k], 1e-5, 1e-7));
    free(member);
    fixture_free(&tail);
    fixture_free(&whole);
}
END_TEST

/* Two networks built over one arena share the parameters but not what a forward
 * keeps for backward: a forward of other data through the second copy between the
 * first copy's forward and backward leaves the first copy's gradients as they are
 * when it runs alone. */
START_TEST(copies_share_parameters_not_state)
{
    fixture f;
    fixture_init(&f, TINY_TRANSFORMER, NULL, 3);
    ck_assert_int_eq(pn_params_zero_grads(f.params), 0);
    mean_loss(&f);
    ck_assert_int_eq(pn_network_backward(f.net, &f.pass, 3), 0);
    pn_matrix g = pn_params_all_grads(f.params);
    float *alone = malloc(pn_matrix_count(g) * sizeof *alone);
    memcpy(alone, g.data, pn_matrix_count(g) * sizeof *alone);

    pn_params *arena;
    pn_network *copy[2];
    pn_network_options o = {.device = pn_device_host(), .copies = 2};
    ck_assert_int_eq(pn_network_build(f.graph, &o, &arena, copy), 0);
    ck_assert_int_eq(pn_params_count(arena), pn_params_count(f.params)); /* declared once */
    pn_matrix all = pn_params_all_values(arena), src = pn_params_all_values(f.params);
    ck_assert_int_eq(pn_copy(&src, &all), 0);
    pn_rng rng;
    pn_rng_init(&rng, 99, 0);
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(pn_network_plan(copy[k], 3), 0);
        for (int i = 0; i < f.graph->n_nodes; i++) {
            if (!f.graph->nodes[i].is_input) continue;
            pn_arg *a = pn_network_arg(copy[k], i), *same = pn_network_arg(f.net, i);
            for (int r = 0; r < pn_arg_rows(a); r++)
                a->ids[r] = k == 0 ? same->ids[r] : (int)(pn_rng_next(&rng) % 7);
        }
    }
    ck_assert_int_eq(pn_params_zero_grads(arena), 0);
    ck_assert_int_eq(pn_network_forward(copy[0], &f.pass), 0);
    ck_assert_int_eq(pn_network_forward(copy[1], &f.pass), 0); /* other data, same layers */
    ck_assert_int_eq(pn_network_backward(copy[0], &f.pass, 3), 0);
    pn_matrix shared = pn_params_all_grads(arena);
    ck_assert_int_eq(memcmp(shared.data, alone, pn_matrix_count(g) * sizeof *alone), 0);
    free(alone);
    pn_network_free(copy[0]);
    pn_network_free(copy[1]);
    pn_params_free(arena);
    fixture_free(&f);
}
END_TEST

/* Sizes are counted in 64 bits: a batch whose matrices would have more rows than an
 * int holds is refused naming the layer (attention's probabilities are heads x T
 * rows per sample), and memory that cannot be had is named by layer. None of these
 * allocates what it refuses. */
/* The data input's lengths reach every layer whose output has its seq (fc, lstm) and
 * stop at seq_pool (seq 1); padded positions then change nothing. */
START_TEST(lengths_propagate_to_outputs_of_the_same_seq)
{
    fixture f;
    fixture_init(&f, PADDED_LSTM, NULL, 3);
    const int lengths[3] = {2, 4, 1};
    int x = -1, node_in = -1, node_rnn = -1, node_pool = -1, node_loss = -1;
    for (int i = 0; i < f.graph->n_nodes; i++) {
        const char *n = f.graph->nodes[i].name;
        if (!strcmp(n, "x")) x = i;
        if (!strcmp(n, "in")) node_in = i;
        if (!strcmp(n, "rnn")) node_rnn = i;
        if (!strcmp(n, "pool")) node_pool = i;
        if (!strcmp(n, "loss")) node_loss = i;
    }
    pn_arg *a = pn_network_arg(f.net, x);
    a->lengths = lengths;
    double before = mean_loss(&f);
    ck_assert_ptr_eq(pn_network_arg(f.net, node_in)->lengths, lengths);
    ck_assert_ptr_eq(pn_network_arg(f.net, node_rnn)->lengths, lengths);
    ck_assert_ptr_null(pn_network_arg(f.net, node_pool)->lengths);
    ck_assert_ptr_null(pn_network_arg(f.net, node_loss)->lengths);
    for (int b = 0; b < 3; b++) /* scribble over the padding */
        for (int t = lengths[b]; t < 4; t++)
            for (int c = 0; c < 3; c++) a->value.data[(b * 4 + t) * 3 + c] += 5.0f;
    ck_assert_double_eq(mean_loss(&f), before);
    a->lengths = NULL; /* without lengths the padding counts */
    ck_assert_double_ne(mean_loss(&f), before);
    ck_assert_ptr_null(pn_network_arg(f.net, node_rnn)->lengths);
    fixture_free(&f);

    json_t *root = json_loads("{\"inputs\": {\"x\": {\"dataset\": \"f\", \"size\": 3, "
                              "\"lengths\": \"len\"}}, \"layers\": [{\"name\": \"h\", "
                              "\"type\": \"fc\", \"input\": \"x\", \"size\": 2}]}", 0, NULL);
    pn_graph *g = NULL;
    ck_assert_int_eq(pn_graph_from_json(&g, root, "test.json"), PN_ERR_INVALID);
    ck_assert_msg(strstr(pn_error_message(), "no lengths on an input of seq 1"), "%s",
                  pn_error_message());
    json_decref(root);
}
END_TEST

/* A loss over padded samples is the mean over real positions only (the stats count
 * them, the backward seed is 1 / their number), and its gradients match finite
 * differences of that mean; padded labels change nothing. */
START_TEST(padded_losses_average_real_positions)
{
    fixture f;
    fixture_init(&f, PADDED_TAGGER, NULL, 3);
    const int lengths[3] = {3, 1, 4};
    pn_arg *x = pn_network_arg(f.net, 0);
    ck_assert_str_eq(f.graph->nodes[0].name, "x");
    x->lengths = lengths;
    pn_layer_stats st;
    double before = mean_loss(&f);
    pn_network_stats(f.net, &st);
    ck_assert_double_eq(st.rows, 8.0);
    pn_arg *y = pn_network_arg(f.net, 1);
    ck_assert_str_eq(f.graph->nodes[1].name, "y");
    y->ids[1 * 4 + 2] = (y->ids[1 * 4 + 2] + 1) % 4; /* a padded label */
    ck_assert_double_eq(mean_loss(&f), before);
    check_param_gradients(&f);
    pn_network_set_positions(f.net, 16.0); /* as if this were half the global batch */
    ck_assert_int_eq(pn_params_zero_grads(f.params), 0);
    mean_loss(&f);
    ck_assert_int_eq(pn_network_backward_begin(f.net, 6), 0);
    pn_arg *loss = pn_network_arg(f.net, f.graph->n_nodes - 1);
    ck_assert_float_eq(loss->grad.data[0], 1.0f / 16.0f);
    fixture_free(&f);
}
END_TEST

START_TEST(oversized_batches_are_refused_naming_the_layer)
{
    pn_graph *g = tu_graph_of("{\"inputs\": {\"x\": {\"dataset\": \"f\", \"size\": 8, \"seq\": 134217728}},"
                           " \"layers\": [{\"name\": \"att\", \"type\": \"attention\","
                           " \"input\": \"x\", \"heads\": 8}]}");
    ck_assert_int_eq(pn_graph_check_batch(g, 1), 0);
    ck_assert_int_eq(pn_graph_check_batch(g, 2), PN_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(pn_error_message(), "test.json: layers[0]: 2 samples of 1073741824 rows "
                                             "make 2147483648 rows, more than a matrix holds") &&
                      strstr(pn_error_message(), "(layer 'att')"),
                  "%s", pn_error_message());
    pn_graph_free(g);

    g = tu_graph_of("{\"inputs\": {\"x\": {\"dataset\": \"f\", \"size\": 1, \"seq\": 1048576}},"
                 " \"layers\": [{\"name\": \"a\", \"type\": \"act\", \"input\": \"x\", \"act\": \"relu\"}]}");
    pn_network_options o = {.device = pn_device_host(), .forward_only = true};
    pn_params *params;
    pn_network *net;
    ck_assert_int_eq(pn_network_build(g, &o, &params, &net), 0);
    ck_assert_int_eq(pn_network_plan(net, 2048), PN_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(pn_error_message(), "test.json: inputs.x: 2048 samples of 1048576 rows "
                                             "make 2147483648 rows"), "%s", pn_error_message());
    pn_network_free(net);
    pn_params_free(params);
    pn_graph_free(g);

    g = tu_graph_of("{\"inputs\": {\"x\": {\"dataset\": \"f\", \"size\": 1073741824}},"
                 " \"layers\": [{\"name\": \"a\", \"type\": \"act\", \"input\": \"x\", \"act\": \"relu\"}]}");
    ck_assert_int_eq(pn_network_build(g, &o, &params, &net), 0);
    ck_assert_int_eq(pn_network_plan(net, 2147483647), PN_ERR_NOMEM); /* 2^63 bytes */
    ck_assert_msg(strstr(pn_error_message(), "test.json: inputs.x: the output of 2147483647 "
                                             "samples (layer 'x'): cannot allocate"),
                  "%s", pn_error_message());
    pn_network_free(net);
    pn_params_free(params);
    pn_graph_free(g);
}
END_TEST

int main(void)
{
    pn_math_set_threads(1);
    Suite *s = suite_create("network");
    TCase *tc = tcase_create("network");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, skip_mlp_gradients_match_finite_differences);
    tcase_add_test(tc, transformer_block_gradients_match_finite_differences);
    tcase_add_test(tc, steady_state_steps_allocate_nothing);
    tcase_add_test(tc, smaller_batches_fit_the_plan);
    tcase_add_test(tc, recompute_forward_counts_nothing_again);
    tcase_add_test(tc, stage_subset_matches_whole_network);
    tcase_add_test(tc, copies_share_parameters_not_state);
    tcase_add_test(tc, oversized_batches_are_refused_naming_the_layer);
    tcase_add_test(tc, lengths_propagate_to_outputs_of_the_same_seq);
    tcase_add_test(tc, padded_losses_average_real_positions);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
