/* Generic layer life cycle: creation from a JSON spec (type lookup, input count,
 * unknown attributes), instances over an arena, and shape-checked forward/backward. */
#include "layers/layer.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "layers/attrs.h"
#include "math/ops.h"

/* Keys of a layer spec that belong to the graph, not to the layer type. */
static const char *const graph_keys[] = {"name", "type", "input", "stage", NULL};

/* Refuses a key that is neither an attribute of the layer's type nor the graph's. */
static int check_known_attrs(const pn_layer *l, const json_t *spec)
{
    if (!spec) return PN_OK;
    static const char *const none[] = {NULL};
    return pn_json_known_keys(spec, &l->where, l->type->attrs ? l->type->attrs : none,
                              graph_keys);
}

/* What a layer of these shapes holds per sample fits the int dimensions of a
 * matrix: its output's values, and each parameter (a stage's arena holds at most
 * INT_MAX floats). Sizes are counted in 64 bits. */
static int check_sizes(const pn_layer *l)
{
    pn_shape o = l->out_shape;
    int64_t values = (int64_t)o.seq * (o.ids ? 1 : o.width);
    char found[128];
    if (values > INT_MAX) {
        snprintf(found, sizeof found, "%d rows of %d (%lld values)", o.seq, o.ids ? 1 : o.width,
                 (long long)values);
        return pn_json_error(&l->where, NULL, found, "at most %d values per sample", INT_MAX);
    }
    for (int i = 0; i < l->n_params; i++) {
        const pn_param_decl *d = &l->param_decls[i];
        int64_t floats = (int64_t)d->rows * d->cols;
        if (floats <= INT_MAX) continue;
        snprintf(found, sizeof found, "'%s' of %d x %d (%lld floats)", d->suffix, d->rows,
                 d->cols, (long long)floats);
        return pn_json_error(&l->where, NULL, found,
                             "parameters of at most %d floats (what a stage holds)", INT_MAX);
    }
    return PN_OK;
}

/* A sparse (CSR) edge feeds only the types made for it (takes_sparse), so that no
 * other type ever reads its empty value matrix; and such a type takes it first. */
static int check_sparse_inputs(const pn_layer *l)
{
    for (int i = 0; i < l->n_inputs; i++) {
        bool ok = l->type->takes_sparse ? (i == 0) == l->in_shapes[i].sparse
                                        : !l->in_shapes[i].sparse;
        if (ok) continue;
        if (l->in_shapes[i].sparse)
            return pn_attr_error(l, "input", "a sparse (CSR) input",
                                 "float values or ids (a sparse input feeds embedding_bag or "
                                 "sparse_fc)");
        return pn_attr_error(l, "input", i ? "more than one input" : "a dense input",
                             "one sparse input (\"sparse\": true in the model's inputs)");
    }
    return PN_OK;
}

int pn_layer_check_batch(const pn_layer *l, int batch)
{
    int64_t per = l->type->rows_per_sample ? l->type->rows_per_sample(l) : 0;
    if (l->out_shape.seq > per) per = l->out_shape.seq;
    for (int i = 0; i < l->n_inputs; i++)
        if (l->in_shapes[i].seq > per) per = l->in_shapes[i].seq;
    int64_t rows = per * batch;
    if (rows <= INT_MAX) return PN_OK;
    return pn_error_set(PN_ERR_UNSUPPORTED, "%s: %s: %d samples of %lld rows make %lld rows, more "
                        "than a matrix holds (%d): use a smaller batch or shorter sequences "
                        "(layer '%s')", l->where.file, l->where.path, batch, (long long)per,
                        (long long)rows, INT_MAX, l->name);
}

int pn_layer_create(pn_layer **out, const pn_json_at *at, const char *name,
                    const char *type_name, const json_t *spec, const pn_shape *in_shapes,
                    int n_inputs)
{
    *out = NULL;
    pn_json_at where = at ? *at : pn_json_root("(layer spec)");
    pn_json_about(&where, "layer '%s'", name);
    const pn_layer_type *type = pn_layer_type_find(type_name);
    if (!type) {
        char found[96];
        snprintf(found, sizeof found, "\"%.80s\"", type_name);
        return pn_json_error(&where, "type", found, "a layer type (`pipenet layers` lists them)");
    }
    pn_json_about(&where, "layer '%s', %s", name, type_name);
    pn_layer *l = calloc(1, sizeof *l);
    if (!l) return pn_error_set(PN_ERR_NOMEM, "out of memory creating layer '%s'", name);
    l->where = where;
    l->type = type;
    l->name = strdup(name);
    l->n_inputs = n_inputs;
    l->in_shapes = calloc((size_t)(n_inputs ? n_inputs : 1), sizeof *l->in_shapes);
    l->attrs = calloc(1, type->attrs_size ? type->attrs_size : 1);
    int rc = PN_OK;
    if (!l->name || !l->in_shapes || !l->attrs)
        rc = pn_error_set(PN_ERR_NOMEM, "out of memory creating layer '%s'", name);
    if (rc == PN_OK && (n_inputs < type->min_inputs ||
                        (type->max_inputs >= 0 && n_inputs > type->max_inputs))) {
        char found[32];
        snprintf(found, sizeof found, "%d", n_inputs);
        if (type->max_inputs == type->min_inputs)
            rc = pn_attr_error(l, "input", found, "%d input(s)", type->min_inputs);
        else if (type->max_inputs < 0)
            rc = pn_attr_error(l, "input", found, "at least %d inputs", type->min_inputs);
        else
            rc = pn_attr_error(l, "input", found, "%d to %d inputs", type->min_inputs,
                               type->max_inputs);
    }
    if (rc == PN_OK) {
        if (n_inputs) memcpy(l->in_shapes, in_shapes, (size_t)n_inputs * sizeof *in_shapes);
        rc = check_known_attrs(l, spec);
    }
    if (rc == PN_OK && type->parse) rc = type->parse(l, spec);
    if (rc == PN_OK) rc = check_sparse_inputs(l);
    if (rc == PN_OK) rc = type->infer(l);
    if (rc == PN_OK && type->declare) type->declare(l);
    if (rc == PN_OK) rc = check_sizes(l);
    if (rc < 0) {
        pn_layer_free(l);
        return rc;
    }
    *out = l;
    return PN_OK;
}

void pn_layer_free(pn_layer *l)
{
    if (!l) return;
    free(l->attrs);
    free(l->in_shapes);
    free(l->name);
    free(l);
}

void pn_layer_add_param(pn_layer *l, const char *suffix, int rows, int cols, pn_init init,
                        bool decay)
{
    l->param_decls[l->n_params++] = (pn_param_decl){suffix, rows, cols, init, decay, NULL, NULL, false, false};
}

void pn_layer_add_row_sparse_param(pn_layer *l, const char *suffix, int rows, int cols,
                                   pn_init init, bool decay)
{
    l->param_decls[l->n_params++] =
        (pn_param_decl){suffix, rows, cols, init, decay, NULL, NULL, true, false};
}

void pn_layer_shard_last_param(pn_layer *l)
{
    if (l->n_params > 0) l->param_decls[l->n_params - 1].sharded = true;
}

int pn_layer_pull_rows(const pn_layer_inst *x, int i, const pn_pass *pass, const int *ids,
                       int n, pn_buffer *scratch, pn_matrix *out)
{
    const pn_param *q = pn_params_get(x->params, x->param_index[i]);
    if (!pn_params_split(x->params, q) || !pass->puller)
        return pn_error_set(PN_ERR_INTERNAL, "layer '%s': a pull from %s", x->layer->name,
                            pass->puller ? "a table that is not split" : "no puller");
    PN_TRY(pn_layer_scratch(scratch, pn_params_device(x->params), n, q->cols, out));
    return pass->puller->pull(pass->puller->ctx, x->params, x->param_index[i], ids, n, out);
}

void pn_layer_add_tied_param(pn_layer *l, const char *suffix, int rows, int cols,
                             const char *tie_layer, const char *tie_suffix)
{
    /* a layer alone (tests) keeps these; in a graph the copy takes the tied
     * parameter's init and decay (graph_ties.c) */
    l->param_decls[l->n_params++] = (pn_param_decl){
        suffix, rows, cols, {PN_INIT_NORMAL, 0.02f}, true, tie_layer, tie_suffix, false, false};
}

bool pn_layer_param_tie(const pn_layer *l, int i, char buf[PN_PARAM_NAME_MAX + 1])
{
    const pn_param_decl *d = &l->param_decls[i];
    if (!d->tie_layer) return false;
    snprintf(buf, PN_PARAM_NAME_MAX + 1, "%s/%s", d->tie_layer, d->tie_suffix);
    return true;
}

int pn_layer_param_name(const pn_layer *l, int i, char buf[PN_PARAM_NAME_MAX + 1])
{
    const char *suffix = l->param_decls[i].suffix;
    if (strlen(l->name) > PN_NAME_MAX || strlen(suffix) > PN_SUFFIX_MAX)
        return pn_error_set(PN_ERR_INVALID, "layer '%.40s...' (%zu bytes): parameter '%s': a "
                            "layer name has at most %d bytes, a parameter's at most %d",
                            l->name, strlen(l->name), suffix, PN_NAME_MAX, PN_SUFFIX_MAX);
    snprintf(buf, PN_PARAM_NAME_MAX + 1, "%s/%s", l->name, suffix);
    return PN_OK;
}

int pn_layer_inst_init(pn_layer_inst *x, const pn_layer *l, pn_params *params)
{
    *x = (pn_layer_inst){.layer = l, .params = params};
    for (int i = 0; i < PN_LAYER_MAX_PARAMS; i++) x->param_index[i] = -1;
    for (int i = 0; i < l->n_params; i++) {
        const pn_param_decl *d = &l->param_decls[i];
        char full[PN_PARAM_NAME_MAX + 1];
        PN_TRY(pn_layer_param_name(l, i, full));
        PN_TRY(pn_params_declare(params, full, d->rows, d->cols, d->init, d->decay,
                                 &x->param_index[i]));
        char tie[PN_PARAM_NAME_MAX + 1];
        if (pn_layer_param_tie(l, i, tie)) PN_TRY(pn_params_tie(params, x->param_index[i], tie));
        if (d->row_sparse) PN_TRY(pn_params_set_row_sparse(params, x->param_index[i]));
        if (d->sharded) PN_TRY(pn_params_set_sharded(params, x->param_index[i]));
    }
    if (l->type->scratch_size && !(x->scratch = calloc(1, l->type->scratch_size)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory for layer '%s'", l->name);
    if (l->type->loss_kind == PN_LOSS_BINARY && !(x->auc = calloc(1, sizeof *x->auc)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory for layer '%s'", l->name);
    return PN_OK;
}

void pn_layer_inst_release(pn_layer_inst *x)
{
    if (!x->layer) return;
    if (x->scratch && x->layer->type->release) x->layer->type->release(x);
    free(x->scratch);
    free(x->auc);
    *x = (pn_layer_inst){0};
}

static bool shape_equal(pn_shape a, pn_shape b)
{
    return a.width == b.width && a.seq == b.seq && a.ids == b.ids && a.sparse == b.sparse &&
           a.fields == b.fields && a.columns == b.columns;
}

/* Arguments must carry the shapes the layer was created for, with one batch size. */
static int check_args(const pn_layer *l, pn_arg *const *in, const pn_arg *out)
{
    for (int i = 0; i < l->n_inputs; i++) {
        if (!shape_equal(in[i]->shape, l->in_shapes[i]) || in[i]->batch != out->batch ||
            (in[i]->shape.ids && !in[i]->ids))
            return pn_error_set(PN_ERR_INTERNAL, "layer '%s': input %d does not match its plan",
                                l->name, i);
    }
    if (!shape_equal(out->shape, l->out_shape) || out->value.rows != pn_arg_rows(out))
        return pn_error_set(PN_ERR_INTERNAL, "layer '%s': output does not match its plan",
                            l->name);
    return PN_OK;
}

int pn_layer_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    const pn_layer *l = x->layer;
    PN_TRY(check_args(l, in, out));
    int rc = l->type->forward(x, pass, in, out);
    return rc < 0 ? pn_error_wrap(rc, "layer '%s' forward", l->name) : rc;
}

int pn_layer_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    const pn_layer *l = x->layer;
    PN_TRY(check_args(l, in, out));
    int rc = pn_arg_grad_zero_stale(out); /* a gradient nothing produced is zeros */
    for (int i = 0; rc == PN_OK && !l->type->writes_stale_grads && i < l->n_inputs; i++)
        rc = pn_arg_grad_zero_stale(in[i]);
    if (rc == PN_OK) rc = l->type->backward(x, pass, in, out);
    return rc < 0 ? pn_error_wrap(rc, "layer '%s' backward", l->name) : rc;
}

int pn_layer_step(pn_layer_inst *x, int pos, pn_arg *const *in, pn_arg *out)
{
    const pn_layer *l = x->layer;
    if (pos < 0 || pos >= l->out_shape.seq)
        return pn_error_set(PN_ERR_INVALID, "layer '%s': position %d outside its %d", l->name,
                            pos, l->out_shape.seq);
    for (int i = 0; i < l->n_inputs; i++)
        if (in[i]->batch != out->batch ||
            (in[i]->shape.ids ? !in[i]->ids : in[i]->value.rows != out->batch))
            return pn_error_set(PN_ERR_INTERNAL, "layer '%s': step input %d does not hold one "
                                                 "row per sequence", l->name, i);
    if (out->value.rows != out->batch)
        return pn_error_set(PN_ERR_INTERNAL, "layer '%s': step output does not hold one row "
                                             "per sequence", l->name);
    int rc;
    if (l->type->step) {
        rc = l->type->step(x, pos, in, out);
    } else if (l->type->per_row) {
        const pn_pass eval = {.training = false};
        rc = l->type->forward(x, &eval, in, out);
    } else {
        return pn_error_set(PN_ERR_UNSUPPORTED, "layer '%s' (%s) cannot run one position at a "
                                                "time", l->name, l->type->name);
    }
    return rc < 0 ? pn_error_wrap(rc, "layer '%s' step at position %d", l->name, pos) : rc;
}

int pn_layer_step_reorder(pn_layer_inst *x, const int *from, int n, int len)
{
    if (!x->layer->type->step_reorder || len == 0) return PN_OK;
    return x->layer->type->step_reorder(x, from, n, len);
}

double pn_layer_flops(const pn_layer *l) { return l->type->flops ? l->type->flops(l) : 0.0; }

double pn_layer_activation_bytes(const pn_layer *l)
{
    double saved = l->type->saved_bytes ? l->type->saved_bytes(l) : 0.0;
    return (double)pn_shape_bytes(l->out_shape) + saved;
}

pn_matrix pn_layer_param(const pn_layer_inst *x, int i)
{
    return pn_params_value(x->params, x->param_index[i]);
}

pn_matrix pn_layer_param_grad(const pn_layer_inst *x, int i)
{
    return pn_params_grad(x->params, x->param_index[i]);
}

pn_row_grad *pn_layer_param_row_grad(const pn_layer_inst *x, int i)
{
    return pn_params_row_grad(x->params, x->param_index[i]);
}

int pn_layer_scratch(pn_buffer *buf, pn_device dev, int rows, int cols, pn_matrix *out)
{
    PN_TRY(pn_buffer_reserve(buf, dev, (size_t)rows * (size_t)cols * sizeof(float)));
    *out = (pn_matrix){buf->data, rows, cols, cols, dev};
    return PN_OK;
}

const int *pn_loss_lengths(pn_arg *const *in)
{
    return in[0]->lengths ? in[0]->lengths : in[1]->lengths;
}

int pn_layer_refuse_lengths(const pn_layer_inst *x, const pn_arg *in)
{
    for (int b = 0; in->lengths && b < in->batch; b++)
        if (in->lengths[b] < in->shape.seq)
            return pn_error_set(PN_ERR_INVALID,
                                "layer '%s' (%s): sample %d of its input has %d of %d rows; "
                                "it takes every row of a sample as a field, so its input "
                                "must have no lengths",
                                x->layer->name, x->layer->type->name, b, in->lengths[b],
                                in->shape.seq);
    return PN_OK;
}

int pn_zero_padded_rows(pn_matrix *loss, int seq, const int *lengths)
{
    for (int b = 0; b < loss->rows / seq; b++)
        if (lengths[b] < seq) {
            pn_matrix pad = pn_matrix_rows(*loss, b * seq + lengths[b], seq - lengths[b]);
            PN_TRY(pn_fill(&pad, 0.0f));
        }
    return PN_OK;
}

int pn_layer_record_loss(pn_layer_inst *x, pn_buffer *sum_buf, const pn_matrix *loss,
                         int seq, const int *lengths, double correct)
{
    pn_matrix sum;
    float host_sum;
    PN_TRY(pn_layer_scratch(sum_buf, loss->device, 1, 1, &sum));
    PN_TRY(pn_col_sums(loss, 0.0f, &sum));
    PN_TRY(pn_buffer_read(sum_buf, 0, &host_sum, sizeof host_sum));
    x->stats.loss_sum += host_sum;
    x->stats.correct += correct;
    if (!lengths) {
        x->stats.rows += loss->rows;
        return PN_OK;
    }
    for (int b = 0; b < loss->rows / seq; b++) x->stats.rows += lengths[b];
    return PN_OK;
}
