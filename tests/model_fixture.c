/* The embedding API tests' fixture (model_fixture.h). */
#include "model_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "base/error.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_file.h"
#include "math/cuda_module.h"
#include "math/device.h"
#include "testutil.h"

char dir[512], path[600];

void setup(void)
{
    tu_make_temp_dir(dir, sizeof dir, "model");
    snprintf(path, sizeof path, "%s/model.h5", dir);
}

void teardown(void) { tu_remove_tree(dir); }

/* Builds json's network for batch samples with random values (not the init's) and
 * random inputs, and runs it forward. */
void direct_init(direct *d, const char *json, int batch)
{
    *d = (direct){.batch = batch};
    d->graph = tu_graph_of(json);
    pn_network_options o = {.device = pn_device_host()};
    ck_assert_int_eq(pn_network_build(d->graph, &o, &d->params, &d->net), 0);
    pn_rng rng;
    pn_rng_init(&rng, 41, 0);
    pn_matrix all = pn_params_all_values(d->params);
    tu_fill_uniform(&all, &rng, 0.7f);
    ck_assert_int_eq(pn_network_plan(d->net, batch), 0);
    for (int i = 0; i < d->graph->n_nodes; i++) {
        if (!d->graph->nodes[i].is_input) continue;
        pn_arg *a = pn_network_arg(d->net, i);
        int rows = pn_arg_rows(a);
        ck_assert_int_lt(d->n_inputs, MAX_INPUTS);
        if (a->shape.sparse) { /* sample b holds b % 3 * 2 features; one block to free */
            int nnz = 0;
            for (int b = 0; b < rows; b++) nnz += b % 3 * 2;
            size_t bytes = sizeof(pn_sparse_rows) + (size_t)(rows + 1) * sizeof(int) +
                           (size_t)nnz * (sizeof(int64_t) + sizeof(float) + sizeof(int));
            pn_sparse_rows *sr = malloc(bytes);
            int64_t *ids = (int64_t *)(sr + 1);
            float *vals = (float *)(ids + nnz);
            int *fields = (int *)(vals + nnz), *off = fields + nnz;
            off[0] = 0;
            for (int b = 0; b < rows; b++) off[b + 1] = off[b] + b % 3 * 2;
            for (int j = 0; j < nnz; j++) {
                ids[j] = (int64_t)(pn_rng_next(&rng) % (uint64_t)a->shape.columns);
                vals[j] = (float)pn_rng_uniform(&rng);
                fields[j] = j % (a->shape.fields ? a->shape.fields : 1);
            }
            *sr = (pn_sparse_rows){off, ids, vals, a->shape.fields ? fields : NULL};
            pn_csr view = {rows, nnz, off, ids, vals, sr->fields ? fields : NULL};
            ck_assert_int_eq(pn_arg_csr_feed(a, &view, 0, rows), 0);
            d->inputs[d->n_inputs++] = sr;
        } else if (a->shape.ids) {
            int *ids = malloc((size_t)rows * sizeof *ids);
            int limit = pn_graph_id_limit(d->graph, i, NULL); /* a binary label's: 2 */
            uint64_t bound = limit > 0 && limit < 4 ? (uint64_t)limit : 4;
            for (int k = 0; k < rows; k++) ids[k] = a->ids[k] = (int)(pn_rng_next(&rng) % bound);
            d->inputs[d->n_inputs++] = ids;
        } else {
            tu_fill_uniform(&a->value, &rng, 1.0f);
            float *v = malloc((size_t)rows * (size_t)a->shape.width * sizeof *v);
            memcpy(v, a->value.data, (size_t)rows * (size_t)a->shape.width * sizeof *v);
            d->inputs[d->n_inputs++] = v;
        }
    }
    pn_pass pass = {.training = false};
    pn_network_reset_stats(d->net);
    int rc = pn_network_forward(d->net, &pass);
    ck_assert_msg(rc == 0, "%s", pn_error_message());
    pn_network_stats(d->net, &d->stats);
}

void direct_free(direct *d)
{
    for (int i = 0; i < d->n_inputs; i++) free(d->inputs[i]);
    pn_network_free(d->net);
    pn_params_free(d->params);
    pn_graph_free(d->graph);
}

/* The direct network's output of layer name, [batch * seq, width] dense. */
const float *direct_output(direct *d, const char *name)
{
    pn_arg *a = pn_network_arg(d->net, pn_graph_find(d->graph, name));
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(a->value.ld, a->value.cols);
    return a->value.data;
}

/* Writes d's parameters (all but skip; bad_shape one of them transposed, extra adds
 * one more) to path as a model, or as a snapshot with one zero optimizer slot. */
void write_file(const direct *d, const char *json, const char *format, const char *skip,
                const char *bad_shape, const char *extra)
{
    pn_train_state *st;
    ck_assert_int_eq(pn_train_state_create(&st, format), 0);
    ck_assert_int_eq(pn_train_state_set_config(st, json), 0);
    const char *slot = "m";
    bool snapshot = !strcmp(format, PN_FORMAT_SNAPSHOT);
    if (snapshot) ck_assert_int_eq(pn_train_state_set_slots(st, 1, &slot), 0);
    for (int k = 0; k < pn_params_count(d->params); k++) {
        const pn_param *p = pn_params_get(d->params, k);
        if (skip && !strcmp(p->name, skip)) continue;
        pn_matrix v = pn_params_value(d->params, k);
        ck_assert_int_eq(v.ld, v.cols);
        float *zeros = calloc(pn_matrix_count(v), sizeof *zeros);
        const float *const slots[1] = {zeros};
        bool transpose = bad_shape && !strcmp(p->name, bad_shape);
        int rc = pn_train_state_add(st, p->name, transpose ? v.cols : v.rows,
                                    transpose ? v.rows : v.cols, v.data,
                                    snapshot ? slots : NULL);
        free(zeros);
        ck_assert_msg(rc == 0, "%s", pn_error_message());
    }
    if (extra) {
        float one = 1.0f;
        const float *const slots[1] = {&one};
        ck_assert_int_eq(pn_train_state_add(st, extra, 1, 1, &one, snapshot ? slots : NULL), 0);
    }
    int rc = pn_snapshot_write(path, st, NULL);
    ck_assert_msg(rc == 0, "%s", pn_error_message());
    pn_train_state_free(st);
}

pn_model *load_ok(void)
{
    pn_model *m = NULL;
    int rc = pn_model_load(&m, path);
    ck_assert_msg(rc == 0, "%s", pn_model_error());
    return m;
}

/* pn_model_load fails and its message holds want (and the file's path). */
void assert_load_fails(const char *want)
{
    pn_model *m = (pn_model *)1;
    ck_assert_int_lt(pn_model_load(&m, path), 0);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(pn_model_error(), want) && strstr(pn_model_error(), path),
                  "message '%s' lacks '%s' or the path", pn_model_error(), want);
}
