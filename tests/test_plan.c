/* pn_plan: manual placement from "stage" attributes, the mistakes it refuses, and
 * automatic placement checked against a brute-force search over every cut (balance
 * first, then fewer bytes crossing the cuts); per-stage costs add up to the graph's;
 * placement by measured times. (The times file and the prediction:
 * test_plan_times.c.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "net/graph.h"
#include "plan/plan.h"
#include "plan/plan_measure.h"
#include "testutil.h"

#define FILE_NAME "models/x.json"

static pn_graph *graph_from_text(const char *text)
{
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    ck_assert_msg(root != NULL, "test JSON does not parse: %s: %s", err.text, text);
    pn_graph *g = NULL;
    int rc = pn_graph_from_json(&g, root, FILE_NAME);
    json_decref(root);
    ck_assert_msg(rc == 0, "graph refused: %s", pn_error_message());
    return g;
}

static int stage_of(const pn_plan *p, const pn_graph *g, const char *name)
{
    int i = pn_graph_find(g, name);
    ck_assert_msg(i >= 0, "no layer %s", name);
    return p->stage_of[i];
}

/* Expects pn_plan_build to refuse with PN_ERR_INVALID and a message that starts with
 * the file and contains each of want (NULL-terminated). */
static void expect_refused(const pn_graph *g, int stages, const char *const *want)
{
    pn_plan *p = NULL;
    pn_error_clear();
    ck_assert_int_eq(pn_plan_build(&p, g, stages), PN_ERR_INVALID);
    ck_assert_ptr_null(p);
    const char *msg = pn_error_message();
    ck_assert_msg(strstr(msg, FILE_NAME ": ") == msg, "message lacks the file: %s", msg);
    for (; *want; want++) ck_assert_msg(strstr(msg, *want), "no \"%s\" in: %s", *want, msg);
}

#define INPUTS "\"inputs\": {\"x\": {\"dataset\": \"f\", \"size\": 8}," \
               " \"y\": {\"dataset\": \"l\", \"ids\": true}}"

START_TEST(manual_placement_inherits_stages)
{
    pn_graph *g = graph_from_text(
        "{" INPUTS ", \"layers\": ["
        " {\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 8},"
        " {\"name\": \"b\", \"type\": \"fc\", \"input\": \"a\", \"size\": 8, \"stage\": 1},"
        " {\"name\": \"c\", \"type\": \"fc\", \"input\": \"b\", \"size\": 8},"
        " {\"name\": \"d\", \"type\": \"fc\", \"input\": \"c\", \"size\": 4, \"stage\": 2},"
        " {\"name\": \"loss\", \"type\": \"softmax_xent\", \"input\": [\"d\", \"y\"]}]}");
    for (int stages = 0; stages <= 3; stages += 3) {
        pn_plan *p = NULL;
        ck_assert_msg(pn_plan_build(&p, g, stages) == 0, "%s", pn_error_message());
        ck_assert_int_eq(p->stages, 3);
        ck_assert_int_eq(stage_of(p, g, "x"), -1);
        ck_assert_int_eq(stage_of(p, g, "y"), -1);
        ck_assert_int_eq(stage_of(p, g, "a"), 0);
        ck_assert_int_eq(stage_of(p, g, "b"), 1);
        ck_assert_int_eq(stage_of(p, g, "c"), 1);
        ck_assert_int_eq(stage_of(p, g, "d"), 2);
        ck_assert_int_eq(stage_of(p, g, "loss"), 2);
        ck_assert_int_eq(p->cost[0].layers, 1);
        ck_assert_int_eq(p->cost[1].layers, 2);
        ck_assert_int_eq(p->cost[2].layers, 2);
        /* a -> b and c -> d cross; the inputs x and y are read where they are used */
        ck_assert_double_eq(p->cost[0].send_bytes, 8 * 4);
        ck_assert_double_eq(p->cost[1].recv_bytes, 8 * 4);
        ck_assert_double_eq(p->cost[1].send_bytes, 8 * 4);
        ck_assert_double_eq(p->cost[2].recv_bytes, 8 * 4);
        ck_assert_double_eq(p->cost[0].recv_bytes, 0);
        ck_assert_double_eq(p->cost[2].send_bytes, 0);
        pn_plan_free(p);
    }
    expect_refused(g, 2, (const char *const[]){"'d'", "stage 2", "3 stages", "2 were requested",
                                                NULL});
    expect_refused(g, 4, (const char *const[]){"'d'", "3 stages", "4 were requested", NULL});
    pn_graph_free(g);
}
END_TEST

START_TEST(no_attributes_and_no_stages_is_one_stage)
{
    const int widths[] = {16, 8, 4};
    pn_graph *g = tu_fc_chain(8, widths, 3, FILE_NAME);
    pn_plan *p = NULL;
    ck_assert_int_eq(pn_plan_build(&p, g, 0), 0);
    ck_assert_int_eq(p->stages, 1);
    ck_assert_int_eq(p->cost[0].layers, 3);
    ck_assert_double_eq(p->cost[0].send_bytes + p->cost[0].recv_bytes, 0);
    ck_assert_int_eq(stage_of(p, g, "x"), -1);
    pn_plan_free(p);
    pn_graph_free(g);
}
END_TEST

START_TEST(backward_edge_is_refused)
{
    pn_graph *g = graph_from_text(
        "{" INPUTS ", \"layers\": ["
        " {\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 8, \"stage\": 1},"
        " {\"name\": \"b\", \"type\": \"fc\", \"input\": \"a\", \"size\": 8, \"stage\": 0}]}");
    expect_refused(g, 0, (const char *const[]){"layer 'b' (stage 0) takes input 'a' from stage 1",
                                                "forward", NULL});
    expect_refused(g, 2, (const char *const[]){"'b'", "'a'", "forward", NULL});
    pn_graph_free(g);
}
END_TEST

START_TEST(empty_stage_is_refused)
{
    pn_graph *g = graph_from_text(
        "{" INPUTS ", \"layers\": ["
        " {\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 8},"
        " {\"name\": \"b\", \"type\": \"fc\", \"input\": \"a\", \"size\": 8, \"stage\": 2},"
        " {\"name\": \"c\", \"type\": \"fc\", \"input\": \"b\", \"size\": 8}]}");
    expect_refused(g, 0, (const char *const[]){"stage 1 has no layers", "'a'", "'b'", NULL});
    expect_refused(g, 3, (const char *const[]){"stage 1 has no layers", NULL});
    pn_graph_free(g);

    g = graph_from_text("{" INPUTS ", \"layers\": ["
                        " {\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 8,"
                        " \"stage\": 1}]}");
    expect_refused(g, 0, (const char *const[]){"stage 0 has no layers", "'a'", NULL});
    pn_graph_free(g);
}
END_TEST

START_TEST(more_stages_than_layers_is_refused)
{
    const int widths[] = {16, 8, 4};
    pn_graph *g = tu_fc_chain(8, widths, 3, FILE_NAME);
    expect_refused(g, 4, (const char *const[]){"3 layers cannot fill 4 stages", NULL});
    pn_plan *p = NULL;
    ck_assert_int_eq(pn_plan_build(&p, g, 3), 0);
    for (int s = 0; s < 3; s++) ck_assert_int_eq(p->cost[s].layers, 1);
    pn_plan_free(p);
    pn_graph_free(g);
}
END_TEST

/* A stage's parameters live in one arena of at most INT_MAX floats: two layers of
 * 2^30 each need two stages, and plan says so before anything is allocated. */
START_TEST(a_stage_holds_at_most_int_max_parameters)
{
    const int widths[] = {32768, 32768};
    pn_graph *g = tu_fc_chain(32768, widths, 2, FILE_NAME);
    pn_plan *p = NULL;
    ck_assert_int_eq(pn_plan_build(&p, g, 1), PN_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(pn_error_message(), FILE_NAME ": stage 0 would hold 2147549184 "
                                             "parameters, at most 2147483647"),
                  "%s", pn_error_message());
    ck_assert_int_eq(pn_plan_build(&p, g, 2), 0);
    ck_assert_int_eq(p->cost[0].params, 32768L * 32768 + 32768);
    pn_plan_free(p);
    pn_graph_free(g);
}
END_TEST

/* What the brute force measures of one placement of the layers. */
typedef struct split_cost {
    double time;  /* largest stage time */
    double bytes; /* bytes sent, each output once per consuming stage */
} split_cost;

static split_cost measure(const pn_graph *g, const int *stage, int stages)
{
    split_cost r = {0, 0};
    for (int s = 0; s < stages; s++) {
        pn_stage_cost c = {0};
        for (int i = 0; i < g->n_nodes; i++)
            if (stage[i] == s) {
                c.flops += pn_layer_flops(g->nodes[i].layer);
                c.activation_bytes += pn_layer_activation_bytes(g->nodes[i].layer);
            }
        double t = pn_plan_stage_time(&c);
        if (t > r.time) r.time = t;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if (stage[i] < 0) continue;
        for (int s = stage[i] + 1; s < stages; s++) {
            bool used = false;
            for (int j = 0; j < g->n_nodes; j++)
                for (int k = 0; k < g->nodes[j].n_inputs; k++)
                    used |= stage[j] == s && g->nodes[j].inputs[k] == i;
            if (used) r.bytes += (double)pn_shape_bytes(g->nodes[i].layer->out_shape);
        }
    }
    return r;
}

static bool same_time(double a, double b) { return tu_close(a, b, 1e-9, 0.0); }

/* Tries every way to cut the layers (in node order) into stages contiguous runs,
 * keeping the best time, and the fewest bytes among splits of that time. */
static void search(const pn_graph *g, int *stage, int node, int cur, int stages,
                   split_cost *best)
{
    if (node == g->n_nodes) {
        if (cur != stages - 1) return;
        split_cost c = measure(g, stage, stages);
        if (best->time < 0 || (c.time < best->time && !same_time(c.time, best->time)))
            *best = c;
        else if (same_time(c.time, best->time) && c.bytes < best->bytes)
            best->bytes = c.bytes;
        return;
    }
    if (g->nodes[node].is_input) {
        stage[node] = -1;
        search(g, stage, node + 1, cur, stages, best);
        return;
    }
    bool first = cur < 0;
    for (int s = first ? 0 : cur; s <= (first ? 0 : cur + 1) && s < stages; s++) {
        stage[node] = s;
        search(g, stage, node + 1, s, stages, best);
    }
}

/* Builds an automatic plan and checks it against the brute force: contiguous,
 * non-empty runs; the optimal balance; the fewest bytes among balanced splits. */
static void check_against_brute_force(const pn_graph *g, int stages)
{
    pn_plan *p = NULL;
    ck_assert_msg(pn_plan_build(&p, g, stages) == 0, "%s", pn_error_message());
    ck_assert_int_eq(p->stages, stages);
    int last = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].is_input) {
            ck_assert_int_eq(p->stage_of[i], -1);
            continue;
        }
        ck_assert_msg(p->stage_of[i] == last || p->stage_of[i] == last + 1,
                      "layer %s on stage %d after stage %d: runs not contiguous",
                      g->nodes[i].name, p->stage_of[i], last);
        last = p->stage_of[i];
    }
    ck_assert_int_eq(last, stages - 1);
    for (int s = 0; s < stages; s++) ck_assert_int_gt(p->cost[s].layers, 0);

    int *stage = malloc((size_t)g->n_nodes * sizeof *stage);
    split_cost best = {-1, 0};
    search(g, stage, 0, -1, stages, &best);
    split_cost got = measure(g, p->stage_of, stages);
    free(stage);
    ck_assert_msg(same_time(got.time, best.time),
                  "%d stages: largest stage time %.9g s, brute force finds %.9g s", stages,
                  got.time, best.time);
    ck_assert_msg(got.bytes == best.bytes,
                  "%d stages: balanced split sends %.0f bytes, brute force finds %.0f", stages,
                  got.bytes, best.bytes);
    double sent = 0;
    for (int s = 0; s < stages; s++) sent += p->cost[s].send_bytes;
    ck_assert_double_eq(sent, got.bytes);
    pn_plan_free(p);
}

START_TEST(automatic_placement_is_balanced)
{
    const int widths[] = {700, 50, 900, 200, 600, 10};
    pn_graph *g = tu_fc_chain(300, widths, 6, FILE_NAME);
    for (int stages = 1; stages <= 6; stages++) check_against_brute_force(g, stages);
    pn_plan *p = NULL;
    ck_assert_int_eq(pn_plan_build(&p, g, 2), 0);
    double t0 = pn_plan_stage_time(&p->cost[0]), t1 = pn_plan_stage_time(&p->cost[1]);
    ck_assert_msg(t0 < 2 * t1 && t1 < 2 * t0, "2 stages: %g s vs %g s", t0, t1);
    pn_plan_free(p);
    pn_graph_free(g);

    const int other[] = {64, 2048, 32, 32, 1500, 128};
    g = tu_fc_chain(1000, other, 6, FILE_NAME);
    for (int stages = 2; stages <= 3; stages++) check_against_brute_force(g, stages);
    pn_graph_free(g);
}
END_TEST

START_TEST(equal_time_cuts_prefer_fewer_bytes)
{
    /* big dominates: {big} {a, b} {c} and {big} {a} {b, c} both take as long as big
     * alone; the cut after the narrower of a and b sends fewer bytes. */
    const int narrow_b[] = {64, 512, 16, 64}, narrow_a[] = {64, 16, 512, 64};
    pn_graph *g = tu_fc_chain(4096, narrow_b, 4, FILE_NAME);
    check_against_brute_force(g, 3);
    pn_plan *p = NULL;
    ck_assert_int_eq(pn_plan_build(&p, g, 3), 0);
    ck_assert_int_eq(stage_of(p, g, "l2"), 1);
    ck_assert_int_eq(stage_of(p, g, "l3"), 1);
    ck_assert_double_eq(p->cost[1].send_bytes, 16 * 4);
    pn_plan_free(p);
    pn_graph_free(g);

    g = tu_fc_chain(4096, narrow_a, 4, FILE_NAME);
    check_against_brute_force(g, 3);
    ck_assert_int_eq(pn_plan_build(&p, g, 3), 0);
    ck_assert_int_eq(stage_of(p, g, "l2"), 1);
    ck_assert_int_eq(stage_of(p, g, "l3"), 2);
    ck_assert_double_eq(p->cost[1].send_bytes, 16 * 4);
    pn_plan_free(p);
    pn_graph_free(g);
}
END_TEST

START_TEST(skip_connection_counts_once_per_consumer_stage)
{
    /* a feeds b (stage 1) and both c and d (stage 2): sent twice, not three times */
    pn_graph *g = graph_from_text(
        "{" INPUTS ", \"layers\": ["
        " {\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 8},"
        " {\"name\": \"b\", \"type\": \"fc\", \"input\": \"a\", \"size\": 8, \"stage\": 1},"
        " {\"name\": \"c\", \"type\": \"add\", \"input\": [\"a\", \"b\"], \"stage\": 2},"
        " {\"name\": \"d\", \"type\": \"add\", \"input\": [\"a\", \"c\"]}]}");
    pn_plan *p = NULL;
    ck_assert_msg(pn_plan_build(&p, g, 3) == 0, "%s", pn_error_message());
    ck_assert_double_eq(p->cost[0].send_bytes, 2 * 32);
    ck_assert_double_eq(p->cost[1].recv_bytes, 32);
    ck_assert_double_eq(p->cost[1].send_bytes, 32);
    ck_assert_double_eq(p->cost[2].recv_bytes, 2 * 32);
    pn_plan_free(p);
    pn_graph_free(g);

    /* the same graph placed automatically agrees with the brute force's byte count */
    g = graph_from_text(
        "{" INPUTS ", \"layers\": ["
        " {\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 64},"
        " {\"name\": \"b\", \"type\": \"fc\", \"input\": \"a\", \"size\": 64},"
        " {\"name\": \"c\", \"type\": \"add\", \"input\": [\"a\", \"b\"]},"
        " {\"name\": \"e\", \"type\": \"fc\", \"input\": \"c\", \"size\": 64},"
        " {\"name\": \"d\", \"type\": \"add\", \"input\": [\"a\", \"e\"]}]}");
    for (int stages = 2; stages <= 4; stages++) check_against_brute_force(g, stages);
    pn_graph_free(g);
}
END_TEST

START_TEST(costs_add_up_to_the_graph)
{
    const int widths[] = {700, 50, 900, 200, 600, 10};
    pn_graph *g = tu_fc_chain(300, widths, 6, FILE_NAME);
    double flops = 0, act = 0;
    int layers = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].is_input) {
            layers++;
            flops += pn_layer_flops(g->nodes[i].layer);
            act += pn_layer_activation_bytes(g->nodes[i].layer);
        }
    for (int stages = 1; stages <= 4; stages++) {
        pn_plan *p = NULL;
        ck_assert_int_eq(pn_plan_build(&p, g, stages), 0);
        pn_stage_cost sum = {0};
        for (int s = 0; s < stages; s++) {
            sum.layers += p->cost[s].layers;
            sum.params += p->cost[s].params;
            sum.flops += p->cost[s].flops;
            sum.activation_bytes += p->cost[s].activation_bytes;
            sum.send_bytes += p->cost[s].send_bytes;
            sum.recv_bytes += p->cost[s].recv_bytes;
        }
        ck_assert_int_eq(sum.layers, layers);
        ck_assert_int_eq(sum.params, pn_graph_param_count(g));
        ck_assert(tu_close(sum.flops, flops, 1e-12, 0));
        ck_assert(tu_close(sum.activation_bytes, act, 1e-12, 0));
        ck_assert_double_eq(sum.send_bytes, sum.recv_bytes);
        ck_assert(stages == 1 ? sum.send_bytes == 0 : sum.send_bytes > 0);
        pn_plan_free(p);
    }
    pn_graph_free(g);
}
END_TEST

/* Times indexed like g's nodes from per-layer times of a chain (node 0 is the input). */
static void chain_times(const pn_graph *g, const double *per_layer, double *layer_s)
{
    for (int i = 0, k = 0; i < g->n_nodes; i++)
        layer_s[i] = g->nodes[i].is_input ? 0.0 : per_layer[k++];
}

/* The smallest largest-run time over every split of n times into stages runs. */
static double brute_bottleneck(const double *t, int n, int stages)
{
    if (stages == 1) {
        double sum = 0;
        for (int i = 0; i < n; i++) sum += t[i];
        return sum;
    }
    double best = -1, head = 0;
    for (int k = 1; k <= n - stages + 1; k++) {
        head += t[k - 1];
        double rest = brute_bottleneck(t + k, n - k, stages - 1);
        double v = head > rest ? head : rest;
        if (best < 0 || v < best) best = v;
    }
    return best;
}

static double largest_stage(const pn_plan *p, const pn_graph *g, const double *layer_s)
{
    double st[8] = {0}, max = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (p->stage_of[i] >= 0) st[p->stage_of[i]] += layer_s[i];
    for (int s = 0; s < p->stages; s++) max = st[s] > max ? st[s] : max;
    return max;
}

START_TEST(measured_times_are_balanced)
{
    /* equal widths: every cut sends the same bytes, so time alone decides */
    const int widths[] = {8, 8, 8, 8, 8, 8};
    const double t[] = {0.009, 0.001, 0.002, 0.004, 0.001, 0.003};
    pn_graph *g = tu_fc_chain(8, widths, 6, FILE_NAME);
    double layer_s[7];
    chain_times(g, t, layer_s);
    for (int stages = 1; stages <= 6; stages++) {
        pn_plan *p = NULL;
        ck_assert_msg(pn_plan_build_timed(&p, g, stages, layer_s) == 0, "%s", pn_error_message());
        double want = brute_bottleneck(t, 6, stages), got = largest_stage(p, g, layer_s);
        ck_assert_msg(got <= want * (1 + 1e-12), "%d stages: largest %g, best %g", stages, got,
                      want);
        pn_plan_free(p);
    }
    /* 2 stages: {l1, l2} | {l3..l6} is 0.010 | 0.010; after l1 11 ms, after l3 12 ms */
    pn_plan *p = NULL;
    ck_assert_int_eq(pn_plan_build_timed(&p, g, 2, layer_s), 0);
    ck_assert_int_eq(stage_of(p, g, "l2"), 0);
    ck_assert_int_eq(stage_of(p, g, "l3"), 1);
    ck_assert_double_eq_tol(largest_stage(p, g, layer_s), 0.010, 1e-12);
    pn_plan_free(p);
    /* the FLOP estimate sees six equal layers and cuts in the middle instead */
    ck_assert_int_eq(pn_plan_build(&p, g, 2), 0);
    ck_assert_int_eq(stage_of(p, g, "l3"), 0);
    pn_plan_free(p);
    pn_graph_free(g);
}
END_TEST

START_TEST(measured_ties_take_the_earliest_cut)
{
    /* {l1} | {l2, l3} and {l1, l2} | {l3} both take 0.003: the earlier cut wins, every time */
    const int widths[] = {8, 8, 8};
    const double t[] = {0.001, 0.002, 0.001};
    pn_graph *g = tu_fc_chain(8, widths, 3, FILE_NAME);
    double layer_s[4];
    chain_times(g, t, layer_s);
    for (int round = 0; round < 3; round++) {
        pn_plan *p = NULL;
        ck_assert_int_eq(pn_plan_build_timed(&p, g, 2, layer_s), 0);
        ck_assert_int_eq(stage_of(p, g, "l1"), 0);
        ck_assert_int_eq(stage_of(p, g, "l2"), 1);
        pn_plan_free(p);
    }
    /* all zero: still a valid split, the earliest */
    const double zero[] = {0, 0, 0};
    chain_times(g, zero, layer_s);
    pn_plan *p = NULL;
    ck_assert_int_eq(pn_plan_build_timed(&p, g, 3, layer_s), 0);
    ck_assert_int_eq(stage_of(p, g, "l3"), 2);
    pn_plan_free(p);
    pn_graph_free(g);
}
END_TEST

START_TEST(bad_times_are_refused)
{
    const int widths[] = {8, 8};
    pn_graph *g = tu_fc_chain(8, widths, 2, FILE_NAME);
    double bad[][2] = {{0.001, -1.0}, {0.001, NAN}, {INFINITY, 0.001}};
    for (int k = 0; k < 3; k++) {
        double layer_s[3];
        chain_times(g, bad[k], layer_s);
        pn_plan *p = NULL;
        ck_assert_int_eq(pn_plan_build_timed(&p, g, 2, layer_s), PN_ERR_INVALID);
        ck_assert_ptr_null(p);
        ck_assert_msg(strstr(pn_error_message(), "is not a non-negative number"), "%s",
                      pn_error_message());
    }
    pn_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("placement");
    tcase_add_test(tc, manual_placement_inherits_stages);
    tcase_add_test(tc, no_attributes_and_no_stages_is_one_stage);
    tcase_add_test(tc, backward_edge_is_refused);
    tcase_add_test(tc, empty_stage_is_refused);
    tcase_add_test(tc, more_stages_than_layers_is_refused);
    tcase_add_test(tc, a_stage_holds_at_most_int_max_parameters);
    tcase_add_test(tc, automatic_placement_is_balanced);
    tcase_add_test(tc, equal_time_cuts_prefer_fewer_bytes);
    tcase_add_test(tc, skip_connection_counts_once_per_consumer_stage);
    tcase_add_test(tc, costs_add_up_to_the_graph);
    tcase_add_test(tc, measured_times_are_balanced);
    tcase_add_test(tc, measured_ties_take_the_earliest_cut);
    tcase_add_test(tc, bad_times_are_refused);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
