/* The activation memory planner (net/arg_plan.h) and networks planned with it
 * (pn_network_options.share_memory): which arguments share a slot and which run in
 * place; gradients against finite differences on the planned layout; and the same
 * bits as the unplanned network, step after step, for an MLP of element-wise layers,
 * a transformer block, padded sequences through an LSTM, and two copies taking
 * their gradients from one store while both hold a micro-batch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "math/ops.h"
#include "net/arg_plan.h"
#include "net/graph.h"
#include "net/network.h"
#include "model_files.h"
#include "testutil.h"

/* h1 dies into relu a1 (in place), h2 into sigmoid a2 (in place), sum into tanh t (in
 * place); gelu g reads t in backward, so t lives on and g takes another slot; h3's
 * value (read by no backward: dropout and add read none) dies at d. */
#define ACTS mf_text("activations_in_place")
#define BLOCK mf_text("transformer_block")

/* Types the planner knows nothing of (lstm, seq_pool, mse) keep their values. */
#define PADDED mf_text("padded_lstm_pool_act_layer")

static const int LENGTHS[] = {2, 4, 1, 3};

static int node(const pn_graph *g, const char *name)
{
    int i = pn_graph_find(g, name);
    ck_assert_msg(i >= 0, "no node %s", name);
    return i;
}

/* copies networks over one new arena, planned for batch; inputs filled from seed
 * (the same in every copy unless vary), parameters moved off their init. */
static pn_params *build(const pn_graph *g, bool share, pn_grad_store *grads, int copies,
                        int batch, bool vary, pn_network **nets)
{
    pn_params *params;
    pn_network_options o = {.device = pn_device_host(), .init = true, .seed = 3,
                            .copies = copies, .share_memory = share, .grads = grads};
    ck_assert_int_eq(pn_network_build(g, &o, &params, nets), 0);
    for (int k = 0; k < copies; k++) {
        ck_assert_int_eq(pn_network_plan(nets[k], batch), 0);
        tu_fill_inputs(nets[k], g, 17 + (vary ? (uint64_t)k : 0));
        for (int i = 0; i < g->n_nodes; i++) { /* the padded model's lengths */
            pn_arg *a = pn_network_arg(nets[k], i);
            if (a && g->nodes[i].is_input && a->shape.seq == 4 && !a->shape.ids)
                a->lengths = LENGTHS;
        }
    }
    tu_jitter_params(params);
    return params;
}

static const pn_pass PASS = {.training = true, .seed = 3, .step = 1};

static double loss_of(pn_network *net, const pn_pass *pass)
{
    pn_network_reset_stats(net);
    int rc = pn_network_forward(net, pass);
    ck_assert_msg(rc == 0, "%s", pn_error_message());
    pn_layer_stats s;
    pn_network_stats(net, &s);
    return s.loss_sum / s.rows;
}

START_TEST(dead_values_share_and_element_wise_layers_run_in_place)
{
    pn_graph *g = tu_graph_of(ACTS);
    pn_arg_plan p;
    ck_assert_int_eq(pn_arg_plan_make(&p, g, NULL, true, PN_PRECISION_FP32), 0);
    const int *v = p.value_slot;
    ck_assert_int_ge(v[node(g, "h1")], 0);
    ck_assert_int_eq(v[node(g, "a1")], v[node(g, "h1")]);   /* relu in place */
    ck_assert_int_eq(v[node(g, "a2")], v[node(g, "h2")]);   /* sigmoid in place */
    ck_assert_int_eq(v[node(g, "t")], v[node(g, "sum")]);   /* tanh in place */
    ck_assert_int_ne(v[node(g, "g")], v[node(g, "t")]);     /* gelu reads t in backward */
    ck_assert_int_ne(v[node(g, "res")], v[node(g, "t")]);
    ck_assert_int_eq(v[node(g, "x")], -1);                  /* supplied: its own */
    ck_assert_int_eq(v[node(g, "loss")], -1);               /* read after the forward */
    ck_assert_int_eq(p.grad_slot[node(g, "x")], -1);
    /* a1 is read by h2's backward and by the add: nothing may take its slot before */
    for (int i = node(g, "h2"); i < node(g, "loss"); i++)
        if (i != node(g, "a1")) ck_assert_int_ne(v[i], v[node(g, "a1")]);
    size_t own, values, grads, shared = 0;
    pn_arg_plan_bytes(&p, g, true, &own, &values, &grads);
    for (int k = 0; k < p.n_grad_slots; k++) shared += p.grad_slot_bytes[k];
    ck_assert_uint_lt(values + grads + shared, own * 2 / 3);
    pn_arg_plan_free(&p);
    /* forward only: values die with their last forward reader (h2 may take h1's) */
    size_t train_values = values;
    ck_assert_int_eq(pn_arg_plan_make(&p, g, NULL, false, PN_PRECISION_FP32), 0);
    pn_arg_plan_bytes(&p, g, false, &own, &values, &grads);
    ck_assert_uint_lt(values, train_values);
    ck_assert_int_eq(p.n_grad_slots, 0);
    ck_assert_uint_eq(grads, 0);
    pn_arg_plan_free(&p);
    pn_graph_free(g);
}
END_TEST

static double planned_loss(void *net) { return loss_of(net, &PASS); }

/* Every parameter gradient of the planned network against central differences. */
static void check_finite_differences(const char *json, int batch)
{
    pn_graph *g = tu_graph_of(json);
    pn_network *net;
    pn_params *params = build(g, true, NULL, 1, batch, false, &net);
    ck_assert_int_eq(pn_params_zero_grads(params), 0);
    loss_of(net, &PASS);
    ck_assert_int_eq(pn_network_backward(net, &PASS, batch), 0);
    tu_check_param_gradients(params, planned_loss, net);
    pn_network_free(net);
    pn_params_free(params);
    pn_graph_free(g);
}

START_TEST(planned_gradients_match_finite_differences)
{
    check_finite_differences(ACTS, 3);
    check_finite_differences(BLOCK, 2);
    check_finite_differences(PADDED, 4);
}
END_TEST

/* Three steps (forward, backward, a small update) planned and unplanned: the same
 * losses and gradients, bit for bit. */
static void check_same_bits(const char *json, int batch)
{
    pn_graph *g = tu_graph_of(json);
    pn_network *net[2];
    pn_params *params[2];
    for (int s = 0; s < 2; s++) params[s] = build(g, s == 1, NULL, 1, batch, false, &net[s]);
    for (int step = 0; step < 3; step++) {
        pn_pass pass = PASS;
        pass.step = step;
        double loss[2];
        for (int s = 0; s < 2; s++) {
            ck_assert_int_eq(pn_params_zero_grads(params[s]), 0);
            loss[s] = loss_of(net[s], &pass);
            ck_assert_int_eq(pn_network_backward(net[s], &pass, batch), 0);
        }
        ck_assert_msg(loss[0] == loss[1], "step %d: loss %.9g unplanned, %.9g planned", step,
                      loss[0], loss[1]);
        pn_matrix a = pn_params_all_grads(params[0]), b = pn_params_all_grads(params[1]);
        ck_assert_msg(!memcmp(a.data, b.data, pn_matrix_count(a) * sizeof(float)),
                      "step %d: the planned gradients differ", step);
        for (int s = 0; s < 2; s++) {
            pn_matrix v = pn_params_all_values(params[s]), d = pn_params_all_grads(params[s]);
            ck_assert_int_eq(pn_axpy(-0.1f, &d, &v), 0);
        }
    }
    for (int s = 0; s < 2; s++) {
        pn_network_free(net[s]);
        pn_params_free(params[s]);
    }
    pn_graph_free(g);
}

START_TEST(planned_networks_give_the_same_bits)
{
    check_same_bits(ACTS, 5);
    check_same_bits(BLOCK, 3);
    check_same_bits(PADDED, 4);
}
END_TEST

/* Two copies (micro-batches in flight) with different data, both forwards before
 * both backwards, as 1f1b and gpipe run them: gradients from one shared store sum
 * to the bits of unshared copies; the store holds one copy's gradients. */
START_TEST(copies_in_flight_share_one_gradient_store)
{
    pn_graph *g = tu_graph_of(BLOCK);
    pn_grad_store store;
    pn_grad_store_init(&store, pn_device_host());
    pn_network *net[2][2];
    pn_params *params[2];
    for (int s = 0; s < 2; s++)
        params[s] = build(g, s == 1, s == 1 ? &store : NULL, 2, 3, true, net[s]);
    for (int s = 0; s < 2; s++) {
        ck_assert_int_eq(pn_params_zero_grads(params[s]), 0);
        for (int k = 0; k < 2; k++) loss_of(net[s][k], &PASS);
        for (int k = 1; k >= 0; k--) ck_assert_int_eq(pn_network_backward(net[s][k], &PASS, 6), 0);
    }
    pn_matrix a = pn_params_all_grads(params[0]), b = pn_params_all_grads(params[1]);
    ck_assert(!memcmp(a.data, b.data, pn_matrix_count(a) * sizeof(float)));
    size_t unshared = pn_network_arg_bytes(net[0][0]) + pn_network_arg_bytes(net[0][1]);
    size_t planned = pn_network_arg_bytes(net[1][0]) + pn_network_arg_bytes(net[1][1]) +
                     pn_grad_store_bytes(&store);
    ck_assert_uint_lt(planned, unshared * 2 / 3);
    for (int s = 0; s < 2; s++) {
        for (int k = 0; k < 2; k++) pn_network_free(net[s][k]);
        pn_params_free(params[s]);
    }
    pn_grad_store_free(&store);
    pn_graph_free(g);
}
END_TEST

int main(void)
{
    pn_math_set_threads(1);
    Suite *s = suite_create("arg_plan");
    TCase *tc = tcase_create("arg_plan");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, dead_values_share_and_element_wise_layers_run_in_place);
    tcase_add_test(tc, planned_gradients_match_finite_differences);
    tcase_add_test(tc, planned_networks_give_the_same_bits);
    tcase_add_test(tc, copies_in_flight_share_one_gradient_store);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
