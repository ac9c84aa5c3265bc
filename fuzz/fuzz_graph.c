/* Fuzz target: model JSON files. The input is the file's text; what jansson parses
 * goes through pn_graph_from_json as every command takes it, and a graph that loads
 * is used as they use it: id bounds, the "train" section, placement, and (when it is
 * small) a network built over it running one forward and one backward pass. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "fuzz_util.h"
#include "layers/arg.h"
#include "net/graph.h"
#include "net/network.h"
#include "plan/plan.h"
#include "plan/schedule.h"
#include "train/train_config.h"

static const char *const FILE_NAME = "fuzz.json";

/* Beyond these the network is not built: memory, not pipenet, would be tested. */
enum { MAX_PARAMS = 1 << 20, MAX_ACTIVATION_BYTES = 32 << 20, BATCH = 2 };

/* A refused model must say where: "<file>: ..." (out of memory may say less). */
static void check_refusal(int rc)
{
    fz_check_status(rc, "pn_graph_from_json");
    if (rc < 0 && rc != PN_ERR_NOMEM && strncmp(pn_error_message(), FILE_NAME, strlen(FILE_NAME))) {
        fprintf(stderr, "fuzz: a model error that does not name the file: %s\n",
                pn_error_message());
        abort();
    }
}

static void place(const pn_graph *g, int stages)
{
    pn_plan *p = NULL;
    pn_error_clear();
    int rc = pn_plan_build(&p, g, stages);
    fz_check_status(rc, "pn_plan_build");
    if (rc < 0) return;
    pn_schedule *s = NULL;
    pn_error_clear();
    rc = pn_schedule_build(&s, PN_SCHEDULE_1F1B, p->stages, 2 * p->stages);
    fz_check_status(rc, "pn_schedule_build");
    FILE *sink = fopen("/dev/null", "w");
    if (rc == 0 && sink) pn_plan_print(p, g, s, 1, 1, sink);
    if (sink) fclose(sink);
    pn_schedule_free(s);
    pn_plan_free(p);
}

/* Fills the network's inputs: floats in [-1, 1], ids within their consumers' bound. */
static void fill_inputs(const pn_graph *g, pn_network *net)
{
    for (int i = 0; i < g->n_nodes; i++) {
        pn_arg *a = pn_network_arg(net, i);
        if (!a || !g->nodes[i].is_input) continue;
        int limit = pn_graph_id_limit(g, i, NULL), rows = pn_arg_rows(a);
        if (a->shape.ids) {
            for (int k = 0; k < rows; k++) a->ids[k] = limit > 0 ? k % limit : k % 4;
            continue;
        }
        size_t n = (size_t)rows * (size_t)a->value.cols;
        float *values = malloc((n ? n : 1) * sizeof *values);
        if (!values) continue;
        for (size_t k = 0; k < n; k++) values[k] = (float)(k % 7) / 3.0f - 1.0f;
        pn_matrix_write(&a->value, values);
        free(values);
    }
}

static void run_network(const pn_graph *g)
{
    double activation = 0;
    for (int i = 0; i < g->n_nodes; i++) activation += pn_layer_activation_bytes(g->nodes[i].layer);
    if (pn_graph_param_count(g) > MAX_PARAMS || activation * BATCH > MAX_ACTIVATION_BYTES) return;
    pn_network_options o = {.device = pn_device_host(), .init = true, .seed = 5};
    pn_params *params = NULL;
    pn_network *net = NULL;
    pn_error_clear();
    int rc = pn_network_build(g, &o, &params, &net);
    fz_check_status(rc, "pn_network_build");
    if (rc == 0) {
        pn_error_clear();
        rc = pn_network_plan(net, BATCH);
        fz_check_status(rc, "pn_network_plan");
    }
    if (rc == 0) {
        fill_inputs(g, net);
        pn_pass pass = {.training = true, .seed = 5, .step = 0, .sample0 = 0};
        pn_error_clear();
        rc = pn_network_forward(net, &pass);
        fz_check_status(rc, "pn_network_forward");
        if (rc == 0 && pn_graph_loss_count(g) > 0) {
            pn_error_clear();
            fz_check_status(pn_network_backward(net, &pass, BATCH), "pn_network_backward");
        }
    }
    pn_network_free(net);
    pn_params_free(params);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t err;
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &err);
    if (!root) return 0;
    pn_graph *g = NULL;
    pn_error_clear();
    int rc = pn_graph_from_json(&g, root, FILE_NAME);
    json_decref(root);
    check_refusal(rc);
    if (rc < 0) return 0;

    for (int i = 0; i < g->n_nodes; i++) {
        const pn_graph_node *user;
        pn_graph_id_limit(g, i, &user);
        if (pn_graph_find(g, g->nodes[i].name) != i) {
            fprintf(stderr, "fuzz: node '%s' is not found at its index\n", g->nodes[i].name);
            abort();
        }
    }
    pn_graph_loss_count(g);
    pn_graph_param_count(g);
    pn_train_config cfg;
    pn_train_config_default(&cfg);
    pn_error_clear();
    fz_check_status(pn_train_config_from_json(pn_graph_train_spec(g), FILE_NAME, &cfg),
                    "pn_train_config_from_json");
    place(g, 0);
    place(g, 2);
    run_network(g);
    pn_graph_free(g);
    return 0;
}
