/* The embedding API (include/pipenet.h): a graph from the file's config, an arena
 * on the model's device (the host, or a GPU: pn_model_load_on) holding the file's
 * values, and a forward-only network over the layers that
 * the requested output (and any loss whose inputs are given) needs; loss statistics
 * are carried over from network to network as the requested outputs change. It has a folder
 * of its own because it sits above io and pipeline and below cli: it is the part of
 * libpipenet that programs using an exported model call, and `pipenet infer` too. */
#include "model/model.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_file.h"
#include "layers/layer_types.h"
#include "pipeline/infer_stages.h"
#include "net/network.h"

/* Activation bytes one chunk of a forward may hold; larger batches run in chunks. */
enum { CHUNK_BYTES = 256 << 20 };

struct pn_model {
    char *path;          /* for messages */
    pn_graph *graph;
    pn_device device;    /* where the arena and the networks live */
    pn_params *params;   /* arena on device with the file's values */
    char device_name[16];/* pn_model_device's answer */
    pn_layer_stats *loss;/* [n_nodes] what each loss layer saw, over every forward */
    pn_auc *auc;         /* the binary losses' histogram over every forward, or NULL
                            when the model has no binary loss */
    int n_inputs;
    int *input_nodes;    /* [n_inputs] graph index of input i */
    int *input_of;       /* [n_nodes] input index of a node, or -1 */
    int output_node;     /* the default output */
    pn_network *net;     /* the last forward's network over `member`, or NULL */
    bool *member;        /* [n_nodes] */
    bool *want;          /* [n_nodes] the members a forward asks for */
    bool *avail;         /* [n_nodes] computable from the given inputs */
    int planned;         /* samples net is planned for */
    bool *part;          /* [n_nodes] the nodes this process holds, or NULL: all */
    pn_gen_hook hook;    /* generation over a part (step NULL: none) */
    pn_gen *gen;         /* generation in progress (model/generate.c), or NULL */
    void (*gen_free)(pn_gen *g);
};

const char *pn_model_error(void) { return pn_error_message(); }

int pn_model_default_output_of(const pn_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].layer->type->is_loss) return g->nodes[i].inputs[0];
    for (int i = g->n_nodes - 1; i >= 0; i--)
        if (!g->nodes[i].is_input && g->nodes[i].n_consumers == 0) return i;
    return g->n_nodes - 1;
}

/* Writes every parameter the layers declare from st (a tied copy from the table it
 * copies); refuses missing, misshapen and unknown ones. */
static int load_values(pn_model *m, const pn_train_state *st, const char *path)
{
    for (int k = 0; k < pn_params_count(m->params); k++) {
        const pn_param *p = pn_params_get(m->params, k);
        const char *name = p->tie ? p->tie : p->name; /* a tied copy is its table's */
        const pn_state_param *sp = pn_train_state_find(st, name);
        if (!sp)
            return pn_error_set(PN_ERR_INVALID, "%s: parameter '%s' (%dx%d) is missing from "
                                                "the file", path, name, p->rows, p->cols);
        if (sp->rows != p->rows || sp->cols != p->cols)
            return pn_error_set(PN_ERR_INVALID, "%s: parameter '%s' is %dx%d in the file, "
                                                "but the config declares %dx%d",
                                path, name, sp->rows, sp->cols, p->rows, p->cols);
        pn_matrix v = pn_params_value(m->params, k);
        PN_TRY(pn_matrix_write(&v, sp->value));
    }
    for (int k = 0; k < st->n_params; k++)
        if (pn_params_find(m->params, st->params[k].name) < 0)
            return pn_error_set(PN_ERR_INVALID, "%s: parameter '%s' belongs to no layer of the "
                                                "file's config", path, st->params[k].name);
    return PN_OK;
}

/* Everything after the graph: inputs, default output, the arena and its values (of
 * a part: read from the file at path, its own datasets only). */
static int setup(pn_model *m, const pn_train_state *st, const char *path)
{
    const pn_graph *g = m->graph;
    size_t n = (size_t)g->n_nodes;
    m->path = strdup(path);
    m->input_nodes = calloc(n, sizeof *m->input_nodes);
    m->input_of = calloc(n, sizeof *m->input_of);
    m->member = calloc(n, sizeof *m->member);
    m->want = calloc(n, sizeof *m->want);
    m->avail = calloc(n, sizeof *m->avail);
    m->loss = calloc(n, sizeof *m->loss);
    bool binary = false;
    for (int i = 0; i < g->n_nodes; i++)
        binary |= g->nodes[i].layer->type->loss_kind == PN_LOSS_BINARY;
    m->auc = binary ? calloc(1, sizeof *m->auc) : NULL;
    if (!m->path || !m->input_nodes || !m->input_of || !m->member || !m->want || !m->avail ||
        !m->loss || (binary && !m->auc))
        return pn_error_set(PN_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < g->n_nodes; i++) {
        m->member[i] = true;
        m->input_of[i] = -1;
        if (g->nodes[i].is_input) {
            m->input_of[i] = m->n_inputs;
            m->input_nodes[m->n_inputs++] = i;
        }
    }
    m->output_node = pn_model_default_output_of(g);
    /* a network over every node declares every parameter; forwards replace it by
     * one over the nodes they need (select_members, prepare) */
    pn_network_options o = {.member = m->part, .device = m->device, .forward_only = true};
    PN_TRY(pn_network_build(g, &o, &m->params, &m->net));
    return m->part ? pn_infer_load_params(m->params, path) : load_values(m, st, path);
}

/* A model from st's config and values, its arena and networks on dev; with members,
 * the part it marks. */
static int model_from_state(pn_model **out, const pn_train_state *st, const char *path,
                            pn_device dev, pn_model_members_fn members, void *ctx)
{
    *out = NULL;
    if (!st->config || !st->config[0])
        return pn_error_set(PN_ERR_INVALID, "%s: holds no model config", path);
    json_error_t err;
    json_t *root = json_loads(st->config, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return pn_error_set(PN_ERR_INVALID, "%s: config:%d:%d: invalid JSON: %s", path,
                            err.line, err.column, err.text);
    pn_model *m = calloc(1, sizeof *m);
    if (!m) {
        json_decref(root);
        return pn_error_set(PN_ERR_NOMEM, "%s: out of memory", path);
    }
    m->device = dev;
    pn_device_label(dev, m->device_name, sizeof m->device_name);
    int rc = pn_graph_from_json(&m->graph, root, path);
    json_decref(root);
    if (rc == PN_OK && members) {
        m->part = calloc((size_t)m->graph->n_nodes, sizeof *m->part);
        rc = m->part ? members(ctx, m->graph, m->part)
                     : pn_error_set(PN_ERR_NOMEM, "%s: out of memory", path);
    }
    if (rc == PN_OK) rc = setup(m, st, path);
    if (rc < 0) {
        pn_model_free(m);
        return rc;
    }
    *out = m;
    return PN_OK;
}

int pn_model_from_state(pn_model **out, const pn_train_state *st, const char *path)
{
    return model_from_state(out, st, path, pn_device_host(), NULL, NULL);
}

/* The device a pn_model_load_on name asks for: a name of pn_device_requests (NULL:
 * cpu; cuda: the first GPU visible) or "cuda:N"; made current (pn_device_select)
 * when a GPU. */
static int device_of(const char *name, pn_device *dev)
{
    *dev = pn_device_host();
    if (!name) return PN_OK;
    pn_device_request request;
    int index;
    PN_TRY(pn_device_parse(name, &request, &index));
    /* resolving index as a node rank gives GPU index mod the visible count: refuse a
     * GPU that is not there instead */
    PN_TRY(pn_device_resolve(request, index, dev));
    if (dev->kind != PN_DEVICE_HOST && dev->index != index)
        return pn_error_set(PN_ERR_INVALID, "device '%s': no such GPU (this process sees "
                            "fewer than %d)", name, index + 1);
    return pn_device_select(*dev);
}

int pn_model_load(pn_model **out, const char *path) { return pn_model_load_on(out, path, NULL); }

int pn_model_load_on(pn_model **out, const char *path, const char *device)
{
    if (!out || !path)
        return pn_error_set(PN_ERR_INVALID, "pn_model_load: out and path must not be NULL");
    *out = NULL;
    pn_device dev;
    PN_TRY(device_of(device, &dev));
    char newest[4096];
    PN_TRY(pn_snapshot_resolve(path, newest, sizeof newest)); /* a run's --snapshot-dir too */
    path = newest;
    pn_train_state *st;
    PN_TRY(pn_snapshot_read(path, NULL, &st));
    int rc = model_from_state(out, st, path, dev, NULL, NULL);
    pn_train_state_free(st);
    return rc;
}

int pn_model_load_part(pn_model **out, const char *path, const char *device,
                       pn_model_members_fn members, void *ctx)
{
    *out = NULL;
    pn_device dev;
    PN_TRY(device_of(device, &dev));
    pn_train_state *st; /* the header: the config, no values */
    PN_TRY(pn_snapshot_read_header(path, NULL, &st));
    int rc = model_from_state(out, st, path, dev, members, ctx);
    pn_train_state_free(st);
    return rc;
}

const bool *pn_model_part(const pn_model *m) { return m->part; }

void pn_model_set_gen_hook(pn_model *m, const pn_gen_hook *hook)
{
    m->hook = hook ? *hook : (pn_gen_hook){0};
}

const pn_gen_hook *pn_model_gen_hook(const pn_model *m) { return m->hook.step ? &m->hook : NULL; }

void pn_model_free(pn_model *m)
{
    if (!m) return;
    pn_model_set_gen(m, NULL, NULL);
    pn_network_free(m->net);
    pn_params_free(m->params);
    pn_graph_free(m->graph);
    free(m->path);
    free(m->input_nodes);
    free(m->input_of);
    free(m->member);
    free(m->want);
    free(m->avail);
    free(m->loss);
    free(m->auc);
    free(m->part);
    free(m);
}

const pn_graph *pn_model_graph(const pn_model *m) { return m->graph; }

pn_gen *pn_model_gen(const pn_model *m) { return m->gen; }

void pn_model_set_gen(pn_model *m, pn_gen *g, void (*free_fn)(pn_gen *g))
{
    if (m->gen && m->gen_free) m->gen_free(m->gen);
    m->gen = g;
    m->gen_free = free_fn;
}

pn_params *pn_model_params(const pn_model *m) { return m->params; }

const char *pn_model_path(const pn_model *m) { return m->path; }

pn_device pn_model_device_of(const pn_model *m) { return m->device; }

const char *pn_model_device(const pn_model *m) { return m ? m->device_name : NULL; }

int pn_model_select_device(const pn_model *m) { return pn_device_select(m->device); }

int pn_model_output_node(const pn_model *m) { return m->output_node; }

const char *pn_model_name(const pn_model *m) { return m ? m->graph->name : NULL; }

int pn_model_input_count(const pn_model *m) { return m ? m->n_inputs : -1; }

/* The data layer of input i, or NULL when i is out of range. */
static const pn_layer *input_layer(const pn_model *m, int i)
{
    return m && i >= 0 && i < m->n_inputs ? m->graph->nodes[m->input_nodes[i]].layer : NULL;
}

const char *pn_model_input_name(const pn_model *m, int i)
{
    return input_layer(m, i) ? m->graph->nodes[m->input_nodes[i]].name : NULL;
}

const char *pn_model_input_dataset(const pn_model *m, int i)
{
    const pn_layer *l = input_layer(m, i);
    return l ? pn_data_layer_dataset(l) : NULL;
}

const char *pn_model_input_lengths(const pn_model *m, int i)
{
    const pn_layer *l = input_layer(m, i);
    return l ? pn_data_layer_lengths(l) : NULL;
}

/* Refuses lengths the inputs cannot take: for an input without lengths in the model,
 * or a value outside 1 .. seq. */
static int check_lengths(const pn_model *m, int batch, const int *const *lengths)
{
    for (int i = 0; lengths && i < m->n_inputs; i++) {
        if (!lengths[i]) continue;
        const pn_layer *l = input_layer(m, i);
        const char *name = m->graph->nodes[m->input_nodes[i]].name;
        if (!pn_data_layer_lengths(l))
            return pn_error_set(PN_ERR_INVALID, "%s: input '%s' takes no lengths (the model "
                                "names none for it)", m->path, name);
        for (int b = 0; b < batch; b++)
            if (lengths[i][b] < 1 || lengths[i][b] > l->out_shape.seq)
                return pn_error_set(PN_ERR_INVALID, "%s: input '%s', sample %d: length %d "
                                    "outside 1..%d", m->path, name, b, lengths[i][b],
                                    l->out_shape.seq);
    }
    return PN_OK;
}

int pn_model_input_size(const pn_model *m, int i)
{
    const pn_layer *l = input_layer(m, i);
    if (!l) return -1;
    if (l->out_shape.sparse) return 0;
    return l->out_shape.ids ? l->out_shape.seq : l->out_shape.width * l->out_shape.seq;
}

int pn_model_input_is_sparse(const pn_model *m, int i)
{
    const pn_layer *l = input_layer(m, i);
    return l ? l->out_shape.sparse : -1;
}

int pn_model_input_is_ids(const pn_model *m, int i)
{
    const pn_layer *l = input_layer(m, i);
    return l ? l->out_shape.ids : -1;
}

const char *pn_model_output_name(const pn_model *m)
{
    return m ? m->graph->nodes[m->output_node].name : NULL;
}

/* Graph index of output (NULL: the default), or -1. */
static int output_index(const pn_model *m, const char *output)
{
    return output ? pn_graph_find(m->graph, output) : m->output_node;
}

int pn_model_output_size(const pn_model *m, const char *output)
{
    int node = m ? output_index(m, output) : -1;
    if (node < 0) return -1;
    pn_shape s = m->graph->nodes[node].layer->out_shape;
    return s.ids ? -1 : s.width * s.seq;
}

/* Sets m->want to the nodes a forward of node computes: its ancestors, and every
 * loss layer whose inputs are all given, with theirs. Refuses a missing input. */
static int select_members(pn_model *m, int node, const void *const *inputs)
{
    const pn_graph *g = m->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const pn_graph_node *gn = &g->nodes[i];
        if (gn->is_input) {
            m->avail[i] = inputs && inputs[m->input_of[i]];
        } else {
            m->avail[i] = true;
            for (int k = 0; k < gn->n_inputs; k++) m->avail[i] &= m->avail[gn->inputs[k]];
        }
        m->want[i] = i == node || (gn->layer->type->is_loss && m->avail[i]);
    }
    for (int i = g->n_nodes - 1; i >= 0; i--)
        if (m->want[i])
            for (int k = 0; k < g->nodes[i].n_inputs; k++) m->want[g->nodes[i].inputs[k]] = true;
    for (int i = 0; i < g->n_nodes; i++)
        if (m->want[i] && g->nodes[i].is_input && !m->avail[i])
            return pn_error_set(PN_ERR_INVALID, "%s: output '%s' needs input '%s' (index %d), "
                                                "which was not given", m->path,
                                g->nodes[node].name, g->nodes[i].name, m->input_of[i]);
    return PN_OK;
}

/* Samples per chunk of a forward of batch samples over m->want. */
static int chunk_size(const pn_model *m, int batch)
{
    size_t per_sample = 0;
    for (int i = 0; i < m->graph->n_nodes; i++)
        if (m->want[i]) per_sample += pn_shape_bytes(m->graph->nodes[i].layer->out_shape);
    size_t fit = per_sample ? CHUNK_BYTES / per_sample : (size_t)batch;
    if (fit < 1) fit = 1;
    return fit < (size_t)batch ? (int)fit : batch;
}

/* A network over m->want planned for chunk samples, reusing the last one. */
static int prepare(pn_model *m, int chunk)
{
    size_t n = (size_t)m->graph->n_nodes;
    if (!m->net || memcmp(m->want, m->member, n * sizeof *m->want) != 0) {
        pn_network_free(m->net);
        m->net = NULL;
        m->planned = 0;
        pn_network_options o = {.member = m->want, .device = m->device,
                                .forward_only = true};
        PN_TRY(pn_network_create(&m->net, m->graph, &o, m->params));
        memcpy(m->member, m->want, n * sizeof *m->want);
    }
    if (chunk > m->planned) {
        PN_TRY(pn_network_plan(m->net, chunk));
        m->planned = chunk;
    }
    return PN_OK;
}

/* Copies samples [first, first + n) of sparse input a (named name) from rows after
 * checking them: offsets in order, ids and fields within the input's. */
static int copy_sparse(pn_arg *a, const char *name, const pn_sparse_rows *rows, int first, int n)
{
    const int *off = rows->offsets;
    for (int b = first; b < first + n; b++) {
        if (off[b + 1] < off[b] || (b == 0 && off[0] != 0))
            return pn_error_set(PN_ERR_INVALID, "input '%s', sample %d: offsets %d, %d are out "
                                "of order", name, b, off[b], off[b + 1]);
        for (int j = off[b]; j < off[b + 1]; j++)
            if (rows->ids[j] < 0 || rows->ids[j] >= a->shape.columns ||
                (a->shape.fields && (rows->fields[j] < 0 || rows->fields[j] >= a->shape.fields)))
                return pn_error_set(PN_ERR_INVALID, "input '%s', sample %d: feature %d (id %lld, "
                                    "field %d) outside its %lld columns or %d fields", name, b, j,
                                    (long long)rows->ids[j], a->shape.fields ? rows->fields[j] : 0,
                                    (long long)a->shape.columns, a->shape.fields);
    }
    pn_csr view = {.rows = first + n, .nnz = off[first + n], .offsets = (int *)off,
                   .cols = (int64_t *)rows->ids, .vals = (float *)rows->values,
                   .fields = (int *)rows->fields};
    return pn_arg_csr_feed(a, &view, first, n);
}

/* Copies samples [first, first + n) of every held input into the network. */
static int copy_inputs(pn_model *m, const void *const *inputs, const int *const *lengths,
                       int first, int n)
{
    for (int i = 0; i < m->n_inputs; i++) {
        pn_arg *a = pn_network_arg(m->net, m->input_nodes[i]);
        if (!a) continue;
        a->lengths = lengths && lengths[i] ? lengths[i] + first : NULL; /* host, this call */
        if (a->shape.sparse) {
            PN_TRY(copy_sparse(a, m->graph->nodes[m->input_nodes[i]].name, inputs[i], first, n));
            continue;
        }
        size_t seq = (size_t)a->shape.seq, rows = (size_t)n * seq;
        if (a->shape.ids) {
            PN_TRY(pn_buffer_write(&a->ids_buf, 0, (const int *)inputs[i] + (size_t)first * seq,
                                   rows * sizeof(int)));
            continue;
        }
        size_t width = (size_t)a->shape.width;
        PN_TRY(pn_matrix_write(&a->value, (const float *)inputs[i] + (size_t)first * seq * width));
    }
    return PN_OK;
}

/* Adds what the network's loss layers saw to the model's totals. */
static void collect_loss(pn_model *m)
{
    for (int i = 0; i < m->graph->n_nodes; i++) {
        const pn_layer_stats *s = pn_network_node_stats(m->net, i);
        if (!s) continue;
        m->loss[i].loss_sum += s->loss_sum;
        m->loss[i].correct += s->correct;
        m->loss[i].rows += s->rows;
    }
    if (m->auc) pn_network_auc(m->net, m->auc);
    pn_network_reset_stats(m->net);
}

int pn_model_forward(pn_model *m, int batch, const void *const *inputs, const char *output,
                     float *out)
{
    return pn_model_forward_lengths(m, batch, inputs, NULL, output, out);
}

int pn_model_forward_lengths(pn_model *m, int batch, const void *const *inputs,
                             const int *const *lengths, const char *output, float *out)
{
    if (!m || !out || batch < 0)
        return pn_error_set(PN_ERR_INVALID, "pn_model_forward: %s", !m ? "no model"
                                                                   : !out ? "out is NULL"
                                                                          : "negative batch");
    int node = output_index(m, output);
    if (node < 0)
        return pn_error_set(PN_ERR_INVALID, "%s: the model has no layer or input '%s'", m->path,
                            output);
    const pn_graph_node *gn = &m->graph->nodes[node];
    if (gn->layer->out_shape.ids)
        return pn_error_set(PN_ERR_INVALID, "%s: output '%s' holds ids, not floats", m->path,
                            gn->name);
    if (m->part)
        return pn_error_set(PN_ERR_INVALID, "%s: this process holds one stage of the model, "
                            "which cannot run a whole forward", m->path);
    if (batch == 0) return PN_OK;
    PN_TRY(check_lengths(m, batch, lengths));
    PN_TRY(pn_model_select_device(m)); /* another model may have made its GPU current */
    PN_TRY(select_members(m, node, inputs));
    int chunk = chunk_size(m, batch);
    PN_TRY(prepare(m, chunk));
    size_t width = (size_t)gn->layer->out_shape.width, seq = (size_t)gn->layer->out_shape.seq;
    const pn_pass pass = {.training = false};
    for (int first = 0; first < batch; first += chunk) {
        int n = batch - first < chunk ? batch - first : chunk;
        PN_TRY(pn_network_set_batch(m->net, n));
        PN_TRY(copy_inputs(m, inputs, lengths, first, n));
        int rc = pn_network_forward(m->net, &pass);
        collect_loss(m);
        if (rc < 0) return pn_error_wrap(rc, "%s: samples %d..%d", m->path, first, first + n - 1);
        PN_TRY(pn_matrix_read(&pn_network_arg(m->net, node)->value,
                              out + (size_t)first * seq * width));
    }
    return PN_OK;
}

/* What the loss layers counted (per_node, [g->n_nodes]), summed into *sum, and the
 * kind they share: PN_LOSS_OTHER when the layers that counted rows differ in kind,
 * or none did (one accuracy, RMSE or AUC over rows of different losses would mean
 * nothing). */
static pn_loss_kind counted(const pn_graph *g, const pn_layer_stats *per_node,
                            pn_layer_stats *sum)
{
    *sum = (pn_layer_stats){0};
    pn_loss_kind kind = PN_LOSS_OTHER;
    for (int i = 0; i < g->n_nodes; i++) {
        const pn_layer_stats *s = &per_node[i];
        if (s->rows == 0) continue;
        pn_loss_kind k = g->nodes[i].layer->type->loss_kind;
        kind = sum->rows == 0 || k == kind ? k : PN_LOSS_OTHER; /* OTHER stays OTHER */
        sum->loss_sum += s->loss_sum;
        sum->correct += s->correct;
        sum->rows += s->rows;
    }
    return kind;
}

void pn_loss_summarize(const pn_graph *g, const pn_layer_stats *per_node, const pn_auc *auc,
                       pn_loss_summary *out)
{
    pn_layer_stats s;
    pn_loss_kind kind = counted(g, per_node, &s);
    bool any = s.rows > 0;
    *out = (pn_loss_summary){
        .rows = (long)s.rows,
        .mean_loss = any ? s.loss_sum / s.rows : NAN,
        .accuracy = any && kind == PN_LOSS_CLASSIFICATION ? s.correct / s.rows : NAN,
        .rmse = any && kind == PN_LOSS_SQUARED_ERROR ? sqrt(s.loss_sum / s.rows) : NAN,
        .auc = any && kind == PN_LOSS_BINARY && auc ? pn_auc_value(auc) : NAN};
}

/* The model's summary (an empty one without a model). */
static pn_loss_summary summary(const pn_model *m)
{
    pn_loss_summary out = {0, NAN, NAN, NAN, NAN};
    if (m) pn_loss_summarize(m->graph, m->loss, m->auc, &out);
    return out;
}

long pn_model_loss(const pn_model *m, double *mean_loss, double *accuracy)
{
    pn_loss_summary s = summary(m);
    if (mean_loss) *mean_loss = s.mean_loss;
    if (accuracy) *accuracy = s.accuracy;
    return s.rows;
}

double pn_model_rmse(const pn_model *m) { return summary(m).rmse; }

double pn_model_auc(const pn_model *m) { return summary(m).auc; }

int pn_model_classifies_node(const pn_graph *g, int node)
{
    int loss = pn_graph_loss_of(g, node);
    pn_loss_kind kind = loss >= 0 ? g->nodes[loss].layer->type->loss_kind : PN_LOSS_OTHER;
    return kind == PN_LOSS_CLASSIFICATION ? 1 : kind == PN_LOSS_BINARY ? 2 : 0;
}

int pn_model_classifies(const pn_model *m, const char *output)
{
    int node = m ? output_index(m, output) : -1;
    return node < 0 ? -1 : pn_model_classifies_node(m->graph, node);
}

void pn_model_reset_loss(pn_model *m)
{
    for (int i = 0; m && i < m->graph->n_nodes; i++) m->loss[i] = (pn_layer_stats){0};
    if (m && m->auc) pn_auc_reset(m->auc);
}
