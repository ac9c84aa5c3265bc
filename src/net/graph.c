/* Model JSON -> pn_graph: structure checks, the expansion of "repeat" blocks into
 * their copies, name resolution, topological sort (Kahn's algorithm, ties broken by
 * file order), then layer creation in that order so that every layer sees its inputs'
 * inferred shapes. */
#include "net/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/json_read.h"

static const char *const top_keys[] = {"name", "inputs", "layers", "train", NULL};
static const char *const repeat_keys[] = {"repeat", "name", "input", "layers", NULL};

enum {
    MAX_REPEAT = 4096,  /* copies of one block */
    MAX_LAYERS = 10000  /* layers once blocks are expanded (sorting is quadratic) */
};

/* Inside a repeat block, the input that names the previous copy's output. */
#define PN_REPEAT_IN "$in"

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
    char *own_name;         /* a copy's name, "<name>_<copy>" (NULL: name is the file's) */
} raw_node;

/* A repeat block's name, which stands for its last copy's output. */
typedef struct alias {
    const char *name;
    const char *target;     /* the name of that output's node */
    const char *input;      /* what feeds its first copy */
    pn_json_at at;          /* the block's place */
} alias;

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
    if (strchr(n->name, '/') || n->name[0] == '$')
        return pn_json_error_value(&n->at, "name", name, "a name without '/' that does not "
                                   "start with '$'");
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
    /* "sparse" makes it a CSR input; sparse_input refuses a value other than true */
    n->type = json_object_get(spec, "sparse") ? "sparse_input" : "data";
    return PN_OK;
}

static void free_raw(raw_node *raw, int n)
{
    for (int i = 0; i < n; i++) {
        free(raw[i].input_names);
        free(raw[i].inputs);
        free(raw[i].own_name);
    }
    free(raw);
}

/* Checks a repeat block at (an entry of "layers"): its keys, its name, its input, its
 * copies and its layers; *copies and *len receive the last two. */
static int check_repeat(const pn_json_at *at, const json_t *spec, long *copies, size_t *len)
{
    PN_TRY(pn_json_known_keys(spec, at, repeat_keys, NULL));
    const json_t *name = json_object_get(spec, "name"), *input = json_object_get(spec, "input");
    const json_t *layers = json_object_get(spec, "layers");
    if (!json_is_string(name) || !json_string_length(name))
        return pn_json_error_value(at, "name", name, "a non-empty string (the block's name)");
    PN_TRY(pn_json_name_length(at, "name", json_string_value(name), "a name"));
    if (strchr(json_string_value(name), '/') || json_string_value(name)[0] == '$')
        return pn_json_error_value(at, "name", name, "a name without '/' that does not "
                                   "start with '$'");
    if (!json_is_string(input))
        return pn_json_error_value(at, "input", input, "the name of the layer or input that "
                                   "feeds the first copy (a string)");
    PN_TRY(pn_json_int(spec, at, "repeat", true, 1, MAX_REPEAT, 1, copies));
    if (!json_is_array(layers) || json_array_size(layers) == 0)
        return pn_json_error_value(at, "layers", layers, "a non-empty list of layers");
    pn_json_at list = pn_json_field(at, "layers");
    for (size_t j = 0; j < json_array_size(layers); j++) {
        const json_t *inner = json_array_get(layers, j);
        if (json_is_object(inner) && json_object_get(inner, "repeat")) {
            pn_json_at item = pn_json_item(&list, j);
            return pn_json_error(&item, "repeat", "a repeat block inside a repeat block",
                                 "a layer (repeat blocks do not nest)");
        }
    }
    *len = json_array_size(layers);
    return PN_OK;
}

/* The name of layer j of a block's "layers", or NULL. */
static const char *inner_name(const json_t *layers, size_t j)
{
    const json_t *name = json_object_get(json_array_get(layers, j), "name");
    return json_is_string(name) ? json_string_value(name) : NULL;
}

/* Reads the repeat block spec (entry index of "layers", already checked) into its
 * copies raw[0 .. copies * len): copy c of layer "x" is "x_c"; inside copy c, "$in"
 * names copy c-1's last layer (the block's input for copy 0), a name of the block's
 * layers names that layer in copy c, and any other name is left as it is. *al is
 * the block's name, standing for the last copy's last layer. */
static int read_repeat(const pn_json_at *layers_at, const json_t *spec, size_t index,
                       raw_node *raw, alias *al)
{
    pn_json_at at = pn_json_item(layers_at, index);
    pn_json_about(&at, "repeat '%s'", json_string_value(json_object_get(spec, "name")));
    pn_json_at list = pn_json_field(&at, "layers");
    const json_t *layers = json_object_get(spec, "layers");
    size_t len = json_array_size(layers);
    long copies = json_integer_value(json_object_get(spec, "repeat"));
    for (long c = 0; c < copies; c++) {
        raw_node *copy = raw + (size_t)c * len;
        for (size_t j = 0; j < len; j++) {
            raw_node *r = &copy[j];
            PN_TRY(read_layer(&list, json_array_get(layers, j), j, r));
            char name[PN_NAME_MAX + 32];
            snprintf(name, sizeof name, "%s_%ld", r->name, c);
            pn_json_at name_at = r->at;
            PN_TRY(pn_json_name_length(&name_at, "name", name, "copy names (<name>_<index>)"));
            if (!(r->own_name = strdup(name))) return pn_error_set(PN_ERR_NOMEM, "out of memory");
            r->name = r->own_name;
            pn_json_about(&r->at, "layer '%s' of repeat '%s'", r->name, al->name);
        }
        for (size_t j = 0; j < len; j++)
            for (int k = 0; k < copy[j].n_inputs; k++) {
                const char **in = &copy[j].input_names[k];
                if (!strcmp(*in, PN_REPEAT_IN)) {
                    *in = c ? copy[-1].name : json_string_value(json_object_get(spec, "input"));
                    continue;
                }
                for (size_t m = 0; m < len; m++)
                    if (inner_name(layers, m) && !strcmp(*in, inner_name(layers, m))) {
                        *in = copy[m].name;
                        break;
                    }
            }
    }
    al->target = raw[(size_t)copies * len - 1].name;
    al->input = json_string_value(json_object_get(spec, "input"));
    al->at = at;
    return PN_OK;
}

/* The nodes "layers" expands to (a block counts its copies), checking each block. */
static int count_layers(const pn_json_at *layers_at, const json_t *layers, int *count,
                        int *blocks)
{
    long total = 0;
    *blocks = 0;
    for (size_t i = 0; i < json_array_size(layers); i++) {
        const json_t *spec = json_array_get(layers, i);
        long copies = 1;
        size_t len = 1;
        if (json_is_object(spec) && json_object_get(spec, "repeat")) {
            pn_json_at at = pn_json_item(layers_at, i);
            const json_t *name = json_object_get(spec, "name");
            if (json_is_string(name)) pn_json_about(&at, "repeat '%.80s'", json_string_value(name));
            PN_TRY(check_repeat(&at, spec, &copies, &len));
            ++*blocks;
        }
        total += copies * (long)len;
        if (total > MAX_LAYERS) {
            char found[64];
            snprintf(found, sizeof found, "more than %d with repeat blocks expanded", MAX_LAYERS);
            return pn_json_error(layers_at, NULL, found, "at most %d layers", MAX_LAYERS);
        }
    }
    *count = (int)total;
    return PN_OK;
}

/* Resolves input names, then orders nodes so producers come first. */
static int sort_nodes(const pn_json_at *layers, raw_node *raw, int n, const alias *aliases,
                      int n_aliases, int *order)
{
    int *pending = calloc((size_t)n, sizeof *pending);
    if (!pending) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    char buf[96];
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < raw[i].n_inputs; k++) {
            int found = -1;
            const char *name = raw[i].input_names[k];
            for (int a = 0; a < n_aliases; a++)
                if (!strcmp(aliases[a].name, name)) {
                    name = aliases[a].target;
                    break;
                }
            for (int j = 0; j < n && found < 0; j++)
                if (!strcmp(raw[j].name, name)) found = j;
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

/* Refuses a name two nodes or blocks share, and a block input that names nothing. */
static int check_names(const raw_node *raw, int n, const alias *aliases, int n_aliases)
{
    char buf[96];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(raw[i].name, raw[j].name)) {
                pn_json_at at = raw[i].at;
                pn_json_about(&at, "already used by %s", raw[j].at.path);
                return pn_json_error(&at, raw[i].is_input ? NULL : "name",
                                     quoted(raw[i].name, buf),
                                     "a name no other layer or input has");
            }
    for (int a = 0; a < n_aliases; a++) {
        pn_json_at at = aliases[a].at;
        const char *used = NULL;
        for (int i = 0; i < n && !used; i++)
            if (!strcmp(raw[i].name, aliases[a].name)) used = raw[i].at.path;
        for (int b = 0; b < a && !used; b++)
            if (!strcmp(aliases[b].name, aliases[a].name)) used = aliases[b].at.path;
        if (used) {
            pn_json_about(&at, "already used by %s", used);
            return pn_json_error(&at, "name", quoted(aliases[a].name, buf),
                                 "a name no other layer, input or block has");
        }
        bool found = false;
        for (int i = 0; i < n && !found; i++) found = !strcmp(raw[i].name, aliases[a].input);
        for (int b = 0; b < n_aliases && !found; b++)
            found = b != a && !strcmp(aliases[b].name, aliases[a].input);
        if (!found)
            return pn_json_error(&at, "input", quoted(aliases[a].input, buf),
                                 "the name of a layer, input or other block");
    }
    return PN_OK;
}

int pn_graph_from_json(pn_graph **out, json_t *root, const char *file)
{
    pn_json_at top = pn_json_root(file), at_inputs = pn_json_field(&top, "inputs");
    pn_json_at at_layers = pn_json_field(&top, "layers");
    PN_TRY(check_structure(&top, root));
    const json_t *inputs = json_object_get(root, "inputs"), *layers = json_object_get(root, "layers");
    int n_layers = 0, n_aliases = 0;
    PN_TRY(count_layers(&at_layers, layers, &n_layers, &n_aliases));
    int n = (int)json_object_size(inputs) + n_layers;
    raw_node *raw = calloc((size_t)n, sizeof *raw);
    int *order = calloc((size_t)n, sizeof *order);
    alias *aliases = calloc((size_t)n_aliases + 1, sizeof *aliases);
    pn_graph *g = calloc(1, sizeof *g);
    if (!raw || !order || !aliases || !g) {
        free(raw), free(order), free(aliases), free(g);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    g->file = strdup(file);
    g->root = json_incref(root);
    const json_t *name = json_object_get(root, "name");
    const char *base = strrchr(file, '/');
    g->name = strdup(name ? json_string_value(name) : base ? base + 1 : file);

    int rc = PN_OK, count = 0, blocks = 0; /* raw nodes and blocks read so far */
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)inputs, key, value) {
        if (rc == PN_OK) rc = read_input(&at_inputs, key, value, &raw[count++]);
    }
    for (size_t i = 0; rc == PN_OK && i < json_array_size(layers); i++) {
        const json_t *spec = json_array_get(layers, i);
        if (!(json_is_object(spec) && json_object_get(spec, "repeat"))) {
            rc = read_layer(&at_layers, spec, i, &raw[count++]);
            continue;
        }
        alias *al = &aliases[blocks++];
        al->name = json_string_value(json_object_get(spec, "name"));
        rc = read_repeat(&at_layers, spec, i, &raw[count], al);
        count += (int)(json_integer_value(json_object_get(spec, "repeat")) *
                       (json_int_t)json_array_size(json_object_get(spec, "layers")));
    }
    if (rc == PN_OK) rc = check_names(raw, n, aliases, n_aliases);
    if (rc == PN_OK) rc = sort_nodes(&at_layers, raw, n, aliases, n_aliases, order);
    if (rc == PN_OK) rc = build_nodes(g, raw, n, order);
    if (rc == PN_OK) rc = pn_graph_resolve_ties(g);
    free_raw(raw, n);
    free(order);
    free(aliases);
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

pn_loss_kind pn_graph_loss_kind(const pn_graph *g)
{
    int n = 0;
    pn_loss_kind kind = PN_LOSS_OTHER;
    for (int i = 0; i < g->n_nodes; i++) {
        const pn_layer_type *t = g->nodes[i].layer->type;
        if (!t->is_loss) continue;
        if (n++ > 0 && t->loss_kind != kind) return PN_LOSS_OTHER;
        kind = t->loss_kind;
    }
    return kind;
}

int pn_graph_loss_of(const pn_graph *g, int node)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].layer->type->is_loss && g->nodes[i].inputs[0] == node) return i;
    return -1;
}

int pn_graph_tokens_per_sample(const pn_graph *g)
{
    int seq = 1;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].is_input && g->nodes[i].layer->out_shape.seq > seq)
            seq = g->nodes[i].layer->out_shape.seq;
    return seq;
}

long pn_graph_param_count(const pn_graph *g)
{
    long n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const pn_layer *l = g->nodes[i].layer;
        for (int p = 0; p < l->n_params; p++)
            if (!pn_graph_is_tied_copy(g, i, p))
                n += (long)l->param_decls[p].rows * l->param_decls[p].cols;
    }
    return n;
}

int pn_graph_check_batch(const pn_graph *g, int batch)
{
    for (int i = 0; i < g->n_nodes; i++) PN_TRY(pn_layer_check_batch(g->nodes[i].layer, batch));
    return PN_OK;
}
