/* Model JSON -> pn_graph: structure checks, name resolution, topological sort
 * (Kahn's algorithm, ties broken by file order), then layer creation in that order
 * so that every layer sees its inputs' inferred shapes. */
#include "pipeline/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/json_read.h"

static const char *const top_keys[] = {"name", "inputs", "layers", "train", NULL};

/* A node while parsing: where it came from and the names it consumes. */
typedef struct raw_node {
    const char *name;
    const char *type;       /* "data" for inputs */
    const json_t *spec;
    pn_json_at at;          /* "inputs.x" or "layers[3]" */
    int n_inputs;
    const char **input_names;
    int *inputs;
    int stage;
    bool is_input;
} raw_node;

/* "\"name\"" for a message. */
static const char *quoted(const char *name, char buf[96])
{
    snprintf(buf, 96, "\"%.80s\"", name);
    return buf;
}

/* Reads "input": a name or a non-empty list of names. */
static int read_inputs(raw_node *n)
{
    static const char *const what = "a layer name or a non-empty list of names";
    const json_t *in = json_object_get(n->spec, "input");
    size_t count = json_is_array(in) ? json_array_size(in) : 1;
    if (!json_is_string(in) && !(json_is_array(in) && count > 0))
        return pn_json_error_value(&n->at, "input", in, "%s", what);
    n->input_names = calloc(count, sizeof *n->input_names);
    n->inputs = calloc(count, sizeof *n->inputs);
    if (!n->input_names || !n->inputs) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    n->n_inputs = (int)count;
    pn_json_at list = pn_json_field(&n->at, "input");
    for (size_t i = 0; i < count; i++) {
        const json_t *v = json_is_array(in) ? json_array_get(in, i) : in;
        pn_json_at item = pn_json_item(&list, i);
        if (!json_is_string(v)) return pn_json_error_value(&item, NULL, v, "a layer name");
        n->input_names[i] = json_string_value(v);
    }
    return PN_OK;
}

static int read_layer(const pn_json_at *layers, const json_t *spec, size_t index, raw_node *n)
{
    n->at = pn_json_item(layers, index);
    n->spec = spec;
    n->stage = -1;
    if (!json_is_object(spec))
        return pn_json_error_value(&n->at, NULL, spec, "an object like {\"name\": \"fc1\", "
                                   "\"type\": \"fc\", \"input\": \"x\", ...}");
    const json_t *name = json_object_get(spec, "name"), *type = json_object_get(spec, "type");
    if (!json_is_string(name) || !json_string_length(name))
        return pn_json_error_value(&n->at, "name", name, "a non-empty string");
    n->name = json_string_value(name);
    PN_TRY(pn_json_name_length(&n->at, "name", n->name, "a name"));
    pn_json_about(&n->at, "layer '%s'", n->name);
    if (strchr(n->name, '/'))
        return pn_json_error_value(&n->at, "name", name, "a name without '/'");
    if (!json_is_string(type))
        return pn_json_error_value(&n->at, "type", type, "a layer type (a string)");
    n->type = json_string_value(type);
    long stage;
    PN_TRY(pn_json_int(spec, &n->at, "stage", false, 0, 1 << 20, -1, &stage));
    n->stage = (int)stage;
    return read_inputs(n);
}

static int read_input(const pn_json_at *inputs, const char *key, const json_t *spec,
                      raw_node *n)
{
    PN_TRY(pn_json_name_length(inputs, NULL, key, "input names"));
    n->at = pn_json_field(inputs, key);
    n->name = key;
    n->type = "data";
    n->spec = spec;
    n->stage = -1;
    n->is_input = true;
    if (!json_is_object(spec))
        return pn_json_error_value(&n->at, NULL, spec, "an object like {\"dataset\": "
                                   "\"features\", \"size\": 784}");
    const json_t *dataset = json_object_get(spec, "dataset");
    if (!json_is_string(dataset))
        return pn_json_error_value(&n->at, "dataset", dataset,
                                   "the name of a dataset in the HDF5 file (a string)");
    return PN_OK;
}

static void free_raw(raw_node *raw, int n)
{
    for (int i = 0; i < n; i++) {
        free(raw[i].input_names);
        free(raw[i].inputs);
    }
    free(raw);
}

/* Resolves input names, then orders nodes so producers come first. */
static int sort_nodes(const pn_json_at *layers, raw_node *raw, int n, int *order)
{
    int *pending = calloc((size_t)n, sizeof *pending);
    if (!pending) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    char buf[96];
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < raw[i].n_inputs; k++) {
            int found = -1;
            for (int j = 0; j < n && found < 0; j++)
                if (!strcmp(raw[j].name, raw[i].input_names[k])) found = j;
            if (found < 0 || found == i) {
                free(pending);
                return pn_json_error(&raw[i].at, "input", quoted(raw[i].input_names[k], buf),
                                     found < 0 ? "the name of a layer or input"
                                               : "another layer than itself (a cycle)");
            }
            raw[i].inputs[k] = found;
        }
        pending[i] = raw[i].n_inputs;
    }
    /* Kahn: repeatedly take the first node in file order whose inputs are placed. */
    bool *placed = calloc((size_t)n, sizeof *placed);
    if (!placed) {
        free(pending);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    int count = 0;
    while (count < n) {
        int next = -1;
        for (int i = 0; i < n && next < 0; i++)
            if (!placed[i] && pending[i] == 0) next = i;
        if (next < 0) break;
        placed[next] = true;
        order[count++] = next;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < raw[i].n_inputs; k++)
                if (raw[i].inputs[k] == next) pending[i]--;
    }
    int rc = PN_OK;
    if (count < n) {
        char names[400] = "";
        for (int i = 0; i < n; i++)
            if (!placed[i] && strlen(names) + strlen(raw[i].name) + 4 < sizeof names)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'",
                         names[0] ? ", " : "", raw[i].name);
        char found[480];
        snprintf(found, sizeof found, "a cycle through %s", names);
        rc = pn_json_error(layers, NULL, found, "layers that form no cycle");
    }
    free(pending);
    free(placed);
    return rc;
}

/* Creates the layers in topological order and fills g->nodes. */
static int build_nodes(pn_graph *g, raw_node *raw, int n, const int *order)
{
    int *position = malloc((size_t)n * sizeof *position);
    g->nodes = calloc((size_t)n, sizeof *g->nodes);
    if (!position || !g->nodes) {
        free(position);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    for (int p = 0; p < n; p++) position[order[p]] = p;
    int rc = PN_OK;
    for (int p = 0; p < n && rc == PN_OK; p++) {
        raw_node *r = &raw[order[p]];
        pn_graph_node *node = &g->nodes[p];
        g->n_nodes = p + 1;
        node->name = strdup(r->name);
        node->n_inputs = r->n_inputs;
        node->inputs = calloc((size_t)(r->n_inputs ? r->n_inputs : 1), sizeof *node->inputs);
        node->stage = r->stage;
        node->is_input = r->is_input;
        pn_shape shapes[64];
        if (!node->name || !node->inputs) {
            rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
            break;
        }
        if (r->n_inputs > 64) {
            char found[32];
            snprintf(found, sizeof found, "%d", r->n_inputs);
            rc = pn_json_error(&r->at, "input", found, "at most 64 inputs");
            break;
        }
        for (int k = 0; k < r->n_inputs; k++) {
            node->inputs[k] = position[r->inputs[k]];
            shapes[k] = g->nodes[node->inputs[k]].layer->out_shape;
            g->nodes[node->inputs[k]].n_consumers++;
        }
        rc = pn_layer_create(&node->layer, &r->at, r->name, r->type, r->spec, shapes,
                             r->n_inputs);
    }
    free(position);
    if (rc < 0) return rc;
    /* A gradient flows into a node when it has parameters or an input that takes one. */
    for (int p = 0; p < n; p++) {
        pn_graph_node *node = &g->nodes[p];
        node->needs_grad = !node->is_input && node->layer->n_params > 0;
        for (int k = 0; k < node->n_inputs; k++)
            node->needs_grad |= g->nodes[node->inputs[k]].needs_grad;
    }
    return PN_OK;
}

static int check_structure(const pn_json_at *top, const json_t *root)
{
    if (!json_is_object(root)) return pn_json_error_value(top, NULL, root, "a JSON object");
    PN_TRY(pn_json_known_keys(root, top, top_keys, NULL));
    const json_t *inputs = json_object_get(root, "inputs"), *layers = json_object_get(root, "layers");
    const json_t *name = json_object_get(root, "name"), *train;
    if (!json_is_object(inputs) || json_object_size(inputs) == 0)
        return pn_json_error_value(top, "inputs", inputs, "a non-empty object of named inputs");
    if (!json_is_array(layers) || json_array_size(layers) == 0)
        return pn_json_error_value(top, "layers", layers, "a non-empty list of layers");
    if (name && !json_is_string(name)) return pn_json_error_value(top, "name", name, "a string");
    return pn_json_object(root, top, "train", false, &train);
}

int pn_graph_from_json(pn_graph **out, json_t *root, const char *file)
{
    pn_json_at top = pn_json_root(file), at_inputs = pn_json_field(&top, "inputs");
    pn_json_at at_layers = pn_json_field(&top, "layers");
    PN_TRY(check_structure(&top, root));
    const json_t *inputs = json_object_get(root, "inputs"), *layers = json_object_get(root, "layers");
    int n = (int)(json_object_size(inputs) + json_array_size(layers));
    raw_node *raw = calloc((size_t)n, sizeof *raw);
    int *order = calloc((size_t)n, sizeof *order);
    pn_graph *g = calloc(1, sizeof *g);
    if (!raw || !order || !g) {
        free(raw), free(order), free(g);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    g->file = strdup(file);
    g->root = json_incref(root);
    const json_t *name = json_object_get(root, "name");
    const char *base = strrchr(file, '/');
    g->name = strdup(name ? json_string_value(name) : base ? base + 1 : file);

    int rc = PN_OK, count = 0; /* raw nodes read so far */
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)inputs, key, value) {
        if (rc == PN_OK) rc = read_input(&at_inputs, key, value, &raw[count++]);
    }
    for (size_t i = 0; rc == PN_OK && i < json_array_size(layers); i++)
        rc = read_layer(&at_layers, json_array_get(layers, i), i, &raw[count++]);
    for (int i = 0; rc == PN_OK && i < n; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(raw[i].name, raw[j].name)) {
                char buf[96];
                pn_json_at at = raw[i].at;
                pn_json_about(&at, "already used by %s", raw[j].at.path);
                rc = pn_json_error(&at, raw[i].is_input ? NULL : "name", quoted(raw[i].name, buf),
                                   "a name no other layer or input has");
                break;
            }
    if (rc == PN_OK) rc = sort_nodes(&at_layers, raw, n, order);
    if (rc == PN_OK) rc = build_nodes(g, raw, n, order);
    free_raw(raw, n);
    free(order);
    if (rc < 0) {
        pn_graph_free(g);
        return rc;
    }
    *out = g;
    return PN_OK;
}

int pn_graph_load(pn_graph **out, const char *path)
{
    struct stat info;
    if (stat(path, &info) == 0 && S_ISDIR(info.st_mode)) /* jansson would call it bad JSON */
        return pn_error_set(PN_ERR_INVALID, "%s: is a directory, not a model file", path);
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        if (err.line < 0)
            return pn_error_set(PN_ERR_INVALID, "%s: %s", path, err.text);
        return pn_error_set(PN_ERR_INVALID, "%s:%d:%d: invalid JSON: %s", path, err.line,
                            err.column, err.text);
    }
    int rc = pn_graph_from_json(out, root, path);
    json_decref(root);
    return rc;
}

int pn_graph_id_limit(const pn_graph *g, int node, const pn_graph_node **user)
{
    int limit = 0;
    if (user) *user = NULL;
    for (int i = node + 1; i < g->n_nodes; i++) { /* consumers come later */
        const pn_graph_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++) {
            int bound = n->inputs[k] == node && n->layer->type->id_limit
                            ? n->layer->type->id_limit(n->layer, k)
                            : 0;
            if (bound > 0 && (limit == 0 || bound < limit)) {
                limit = bound;
                if (user) *user = n;
            }
        }
    }
    return limit;
}

void pn_graph_free(pn_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) {
        free(g->nodes[i].name);
        free(g->nodes[i].inputs);
        pn_layer_free(g->nodes[i].layer);
    }
    free(g->nodes);
    free(g->file);
    free(g->name);
    json_decref(g->root);
    free(g);
}

int pn_graph_find(const pn_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, name)) return i;
    return -1;
}

const json_t *pn_graph_train_spec(const pn_graph *g) { return json_object_get(g->root, "train"); }

int pn_graph_loss_count(const pn_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].layer->type->is_loss;
    return n;
}

long pn_graph_param_count(const pn_graph *g)
{
    long n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const pn_layer *l = g->nodes[i].layer;
        for (int p = 0; p < l->n_params; p++)
            n += (long)l->param_decls[p].rows * l->param_decls[p].cols;
    }
    return n;
}

int pn_graph_check_batch(const pn_graph *g, int batch)
{
    for (int i = 0; i < g->n_nodes; i++) PN_TRY(pn_layer_check_batch(g->nodes[i].layer, batch));
    return PN_OK;
}
