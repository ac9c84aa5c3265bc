/* Model JSON -> pn_graph: structure checks, name resolution, topological sort
 * (Kahn's algorithm, ties broken by file order), then layer creation in that order
 * so that every layer sees its inputs' inferred shapes. */
#include "pipeline/graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

static const char *const top_keys[] = {"name", "inputs", "layers", "train", NULL};

/* A node while parsing: where it came from and the names it consumes. */
typedef struct raw_node {
    const char *name;
    const char *type;       /* "data" for inputs */
    const json_t *spec;
    const char *place;      /* "inputs.x" or "layers[3]" */
    char place_buf[64];
    int n_inputs;
    const char **input_names;
    int *inputs;
    int stage;
    bool is_input;
} raw_node;

/* Records "<file>: <place>: <what>" and returns PN_ERR_INVALID. */
static int graph_error(const char *file, const char *place, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int graph_error(const char *file, const char *place, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return pn_error_set(PN_ERR_INVALID, "%s: %s: %s", file, place, what);
}

#define GRAPH_ERROR(file, place, ...) return graph_error(file, place, __VA_ARGS__)

static bool in_list(const char *const *list, const char *key)
{
    for (; *list; list++)
        if (!strcmp(*list, key)) return true;
    return false;
}

/* Reads "input": a name or a non-empty list of names. */
static int read_inputs(const char *file, raw_node *n)
{
    const json_t *in = json_object_get(n->spec, "input");
    if (!in) GRAPH_ERROR(file, n->place, "layer '%s': missing 'input'", n->name);
    size_t count = json_is_array(in) ? json_array_size(in) : 1;
    if (!json_is_string(in) && !(json_is_array(in) && count > 0))
        GRAPH_ERROR(file, n->place,
                    "layer '%s': 'input' must be a layer name or a non-empty list of names",
                    n->name);
    n->input_names = calloc(count, sizeof *n->input_names);
    n->inputs = calloc(count, sizeof *n->inputs);
    if (!n->input_names || !n->inputs) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    n->n_inputs = (int)count;
    for (size_t i = 0; i < count; i++) {
        const json_t *v = json_is_array(in) ? json_array_get(in, i) : in;
        if (!json_is_string(v))
            GRAPH_ERROR(file, n->place, "layer '%s': 'input'[%zu] must be a string", n->name,
                        i);
        n->input_names[i] = json_string_value(v);
    }
    return PN_OK;
}

static int read_layer(const char *file, const json_t *spec, size_t index, raw_node *n)
{
    snprintf(n->place_buf, sizeof n->place_buf, "layers[%zu]", index);
    n->place = n->place_buf;
    n->spec = spec;
    n->stage = -1;
    if (!json_is_object(spec)) GRAPH_ERROR(file, n->place, "expected an object");
    const json_t *name = json_object_get(spec, "name"), *type = json_object_get(spec, "type");
    if (!json_is_string(name) || !json_string_length(name))
        GRAPH_ERROR(file, n->place, "missing or empty 'name' (a string)");
    n->name = json_string_value(name);
    if (strchr(n->name, '/'))
        GRAPH_ERROR(file, n->place, "layer name '%s' contains '/'", n->name);
    if (!json_is_string(type))
        GRAPH_ERROR(file, n->place, "layer '%s': missing 'type' (a string)", n->name);
    n->type = json_string_value(type);
    const json_t *stage = json_object_get(spec, "stage");
    if (stage) {
        if (!json_is_integer(stage) || json_integer_value(stage) < 0 ||
            json_integer_value(stage) > 1 << 20)
            GRAPH_ERROR(file, n->place, "layer '%s': 'stage' must be an integer >= 0", n->name);
        n->stage = (int)json_integer_value(stage);
    }
    return read_inputs(file, n);
}

static int read_input(const char *file, const char *key, const json_t *spec, raw_node *n)
{
    snprintf(n->place_buf, sizeof n->place_buf, "inputs.%.50s", key);
    n->place = n->place_buf;
    n->name = key;
    n->type = "data";
    n->spec = spec;
    n->stage = -1;
    n->is_input = true;
    if (!json_is_object(spec))
        GRAPH_ERROR(file, n->place, "expected an object like {\"dataset\": \"features\", "
                                    "\"size\": 784}");
    if (!json_is_string(json_object_get(spec, "dataset")))
        GRAPH_ERROR(file, n->place, "input '%s' names no dataset (add \"dataset\": \"<name in "
                                    "the HDF5 file>\")", key);
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
static int sort_nodes(const char *file, raw_node *raw, int n, int *order)
{
    int *pending = calloc((size_t)n, sizeof *pending);
    if (!pending) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < raw[i].n_inputs; k++) {
            int found = -1;
            for (int j = 0; j < n && found < 0; j++)
                if (!strcmp(raw[j].name, raw[i].input_names[k])) found = j;
            if (found < 0) {
                free(pending);
                GRAPH_ERROR(file, raw[i].place, "layer '%s': input '%s' names no layer or input",
                            raw[i].name, raw[i].input_names[k]);
            }
            if (found == i) {
                free(pending);
                GRAPH_ERROR(file, raw[i].place, "layer '%s' takes itself as input (a cycle)",
                            raw[i].name);
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
        rc = pn_error_set(PN_ERR_INVALID, "%s: layers: a cycle runs through %s", file, names);
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
            rc = pn_error_set(PN_ERR_INVALID, "%s: %s: layer '%s' has more than 64 inputs",
                              g->file, r->place, r->name);
            break;
        }
        for (int k = 0; k < r->n_inputs; k++) {
            node->inputs[k] = position[r->inputs[k]];
            shapes[k] = g->nodes[node->inputs[k]].layer->out_shape;
            g->nodes[node->inputs[k]].n_consumers++;
        }
        rc = pn_layer_create(&node->layer, r->name, r->type, r->spec, shapes, r->n_inputs);
        if (rc < 0) rc = pn_error_wrap(rc, "%s: %s", g->file, r->place);
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

static int check_structure(const char *file, const json_t *root)
{
    const char *key;
    json_t *value;
    if (!json_is_object(root)) GRAPH_ERROR(file, "top level", "expected a JSON object");
    json_object_foreach((json_t *)root, key, value) {
        (void)value;
        if (!in_list(top_keys, key))
            GRAPH_ERROR(file, key, "unknown key (a model has name, inputs, layers, train)");
    }
    const json_t *inputs = json_object_get(root, "inputs"), *layers = json_object_get(root, "layers");
    const json_t *name = json_object_get(root, "name"), *train = json_object_get(root, "train");
    if (!json_is_object(inputs) || json_object_size(inputs) == 0)
        GRAPH_ERROR(file, "inputs", "missing or empty (an object of named inputs)");
    if (!json_is_array(layers) || json_array_size(layers) == 0)
        GRAPH_ERROR(file, "layers", "missing or empty (a list of layers)");
    if (name && !json_is_string(name)) GRAPH_ERROR(file, "name", "expected a string");
    if (train && !json_is_object(train)) GRAPH_ERROR(file, "train", "expected an object");
    return PN_OK;
}

int pn_graph_from_json(pn_graph **out, json_t *root, const char *file)
{
    PN_TRY(check_structure(file, root));
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
        if (rc == PN_OK) rc = read_input(file, key, value, &raw[count++]);
    }
    for (size_t i = 0; rc == PN_OK && i < json_array_size(layers); i++)
        rc = read_layer(file, json_array_get(layers, i), i, &raw[count++]);
    for (int i = 0; rc == PN_OK && i < n; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(raw[i].name, raw[j].name)) {
                rc = pn_error_set(PN_ERR_INVALID, "%s: %s: name '%s' is already used by %s",
                                  file, raw[i].place, raw[i].name, raw[j].place);
                break;
            }
    if (rc == PN_OK) rc = sort_nodes(file, raw, n, order);
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
