/* Model JSON -> pn_graph: valid models get a topological order, shapes and gradient
 * flags; every mistake a person can make in the file is refused with a message of
 * one shape: the file, the path of the field, what was expected, what was found. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/names.h"
#include "net/graph.h"
#include "net/network.h"
#include "train/train_config.h"
#include "model_files.h"
#include "testutil.h"

#define MLP mf_text("mlp_layers_out_of_order")

static int from_text(const char *text, pn_graph **g)
{
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    ck_assert_msg(root != NULL, "test JSON does not parse: %s: %s", err.text, text);
    pn_error_clear();
    int rc = pn_graph_from_json(g, root, "models/bad.json");
    json_decref(root);
    return rc;
}

START_TEST(valid_model_is_ordered_and_shaped)
{
    pn_graph *g;
    ck_assert_int_eq(from_text(MLP, &g), 0);
    ck_assert_int_eq(g->n_nodes, 6);
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            ck_assert_int_lt(g->nodes[i].inputs[k], i); /* producers first */
    int fc2 = pn_graph_find(g, "fc2"), loss = pn_graph_find(g, "loss"), x = pn_graph_find(g, "x");
    ck_assert_int_lt(pn_graph_find(g, "fc1"), fc2);
    ck_assert_int_eq(g->nodes[fc2].layer->out_shape.width, 1024);
    ck_assert(g->nodes[x].is_input && !g->nodes[x].needs_grad);
    ck_assert(g->nodes[fc2].needs_grad && g->nodes[loss].needs_grad);
    ck_assert_int_eq(pn_graph_loss_count(g), 1);
    ck_assert_int_eq(pn_graph_param_count(g), 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 10250);
    ck_assert_str_eq(g->name, "mlp");
    pn_graph_free(g);
}
END_TEST

typedef struct mistake {
    const char *json;
    const char *expect[3]; /* substrings of the message after the file name */
} mistake;

#define IN "\"inputs\": {\"x\": {\"dataset\": \"f\", \"size\": 4}, \"y\": {\"dataset\": \"l\", \"ids\": true}}"

static const mistake mistakes[] = {
    {"[1, 2]", {"top level: expected a JSON object", "found [1,2]"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 3}], \"optimiser\": {}}",
     {"optimiser: expected one of the keys name, inputs, layers, train", "found an unknown key"}},
    {"{\"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 3}]}", {"inputs: expected a non-empty object", "found nothing"}},
    {"{" IN "}", {"layers: expected a non-empty list", "found nothing"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"type\": \"conv\", \"input\": \"x\"}]}",
     {"layers[0].type: expected a layer type", "found \"conv\"", "(layer 'a')"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"fc9\", \"size\": 3}]}",
     {"layers[0].input: expected the name of a layer or input", "found \"fc9\"", "(layer 'a')"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 3},"
     " {\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 3}]}",
     {"layers[1].name: expected a name no other", "found \"a\"", "(already used by layers[0])"}},
    {"{" IN ", \"layers\": [{\"name\": \"x\", \"type\": \"fc\", \"input\": \"y\", \"size\": 3}]}",
     {"layers[0].name: expected a name no other", "found \"x\"", "(already used by inputs.x)"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"b\", \"size\": 4},"
     " {\"name\": \"b\", \"type\": \"fc\", \"input\": \"a\", \"size\": 4},"
     " {\"name\": \"c\", \"type\": \"fc\", \"input\": \"x\", \"size\": 4}]}",
     {"layers: expected layers that form no cycle", "found a cycle through 'a', 'b'"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"a\", \"size\": 4}]}",
     {"layers[0].input: expected another layer than itself", "found \"a\"", "(layer 'a')"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 3},"
     " {\"name\": \"sum\", \"type\": \"add\", \"input\": [\"a\", \"x\"]}]}",
     {"layers[1].input: expected inputs of one shape", "found input 1 of shape 4", "(layer 'sum', add)"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\"}]}",
     {"layers[0].size: expected an integer >= 1 (required)", "found nothing", "(layer 'a', fc)"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": \"big\"}]}",
     {"layers[0].size: expected an integer >= 1", "found \"big\"", "(layer 'a', fc)"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 3, \"activation\": \"relu\"}]}",
     {"layers[0].activation: expected one of the keys size, bias, act", "found an unknown key", "(layer 'a', fc)"}},
    {"{\"inputs\": {\"x\": {\"size\": 4}}, \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 3}]}",
     {"inputs.x.dataset: expected the name of a dataset", "found nothing"}},
    /* labels written without "ids": true: the message names that key as the likely fix */
    {"{\"inputs\": {\"y\": {\"dataset\": \"labels\"}}, \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"y\", \"size\": 3}]}",
     {"inputs.y.size: expected an integer >= 1 (required), or, if dataset 'labels' holds class "
      "ids (integers), \"ids\": true in its place", "found nothing", "(layer 'y', data)"}},
    {"{" IN ", \"layers\": [{\"type\": \"fc\", \"input\": \"x\", \"size\": 3}]}", {"layers[0].name: expected a non-empty string", "found nothing"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"input\": \"x\", \"size\": 3}]}", {"layers[0].type: expected a layer type", "found nothing", "(layer 'a')"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"size\": 3}]}", {"layers[0].input: expected a layer name or a non-empty list", "found nothing", "(layer 'a')"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": [], \"size\": 3}]}", {"layers[0].input: expected a layer name or a non-empty list", "found []"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": [\"x\", 3], \"size\": 3}]}", {"layers[0].input[1]: expected a layer name", "found 3"}},
    {"{" IN ", \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 3, \"stage\": -1}]}",
     {"layers[0].stage: expected an integer in [0, 1048576]", "found -1"}},
    {"{" IN ", \"layers\": [{\"name\": \"a/b\", \"type\": \"fc\", \"input\": \"x\", \"size\": 3}]}", {"layers[0].name: expected a name without '/'", "found \"a/b\""}},
    {"{" IN ", \"layers\": [{\"name\": \"e\", \"type\": \"embedding\", \"input\": \"x\", \"vocab\": 5, \"size\": 3}]}",
     {"layers[0].input: expected integer ids", "found float values", "(layer 'e', embedding)"}},
    {"{" IN ", \"layers\": [{\"name\": \"l\", \"type\": \"softmax_xent\", \"input\": [\"x\", \"x\"]}]}",
     {"layers[0].input: expected integer labels as input 1", "found float values", "(layer 'l', softmax_xent)"}},
    /* sizes in 64 bits: what a sample or a parameter holds fits a matrix's int sizes */
    {"{\"inputs\": {\"x\": {\"dataset\": \"f\", \"size\": 784, \"seq\": 1073741824}}, \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 3}]}",
     {"inputs.x: expected at most 2147483647 values per sample", "found 1073741824 rows of 784 (841813590016 values)", "(layer 'x', data)"}},
    {"{\"inputs\": {\"x\": {\"dataset\": \"f\", \"size\": 1073741824}}, \"layers\": [{\"name\": \"a\", \"type\": \"fc\", \"input\": \"x\", \"size\": 1073741824}]}",
     {"layers[0]: expected parameters of at most 2147483647 floats", "found 'w' of 1073741824 x 1073741824", "(layer 'a', fc)"}},
    {"{\"inputs\": {\"x\": {\"dataset\": \"f\", \"size\": 1073741824}}, \"layers\": [{\"name\": \"c\", \"type\": \"concat\", \"input\": [\"x\", \"x\"]}]}",
     {"layers[0].input: expected widths that add up to at most 2147483647", "found widths that add up to 2147483648", "(layer 'c', concat)"}},
    {"{\"inputs\": {\"x\": {\"dataset\": \"f\", \"size\": 1073741824}}, \"layers\": [{\"name\": \"t\", \"type\": \"attention\", \"input\": \"x\", \"heads\": 1}]}",
     {"layers[0].input: expected a width of at most 715827882", "found a width of 1073741824", "(layer 't', attention)"}},
    /* repeat blocks */
#define BLOCK(head, inner) "{" IN ", \"layers\": [{" head ", \"layers\": [" inner "]}]}"
#define F_IN "{\"name\": \"f\", \"type\": \"fc\", \"input\": \"$in\", \"size\": 4}"
    {BLOCK("\"repeat\": 0, \"name\": \"blk\", \"input\": \"x\"", F_IN),
     {"layers[0].repeat: expected an integer in [1, 4096]", "found 0", "(repeat 'blk')"}},
    {BLOCK("\"repeat\": \"four\", \"name\": \"blk\", \"input\": \"x\"", F_IN),
     {"layers[0].repeat: expected an integer", "found \"four\""}},
    {BLOCK("\"repeat\": 2, \"input\": \"x\"", F_IN),
     {"layers[0].name: expected a non-empty string (the block's name)", "found nothing"}},
    {BLOCK("\"repeat\": 2, \"name\": \"blk\"", F_IN),
     {"layers[0].input: expected the name of the layer or input that feeds the first copy",
      "found nothing", "(repeat 'blk')"}},
    {BLOCK("\"repeat\": 2, \"name\": \"blk\", \"input\": \"nope\"", F_IN),
     {"layers[0].input: expected the name of a layer, input or other block", "found \"nope\""}},
    {BLOCK("\"repeat\": 2, \"name\": \"blk\", \"input\": \"x\", \"stage\": 1", F_IN),
     {"layers[0].stage: expected one of the keys repeat, name, input, layers",
      "found an unknown key"}},
    {BLOCK("\"repeat\": 2, \"name\": \"blk\", \"input\": \"x\"", ""),
     {"layers[0].layers: expected a non-empty list of layers", "found []"}},
    {BLOCK("\"repeat\": 2, \"name\": \"blk\", \"input\": \"x\"",
           F_IN ", {\"repeat\": 2, \"name\": \"in\", \"input\": \"f\", \"layers\": [" F_IN "]}"),
     {"layers[0].layers[1].repeat: expected a layer (repeat blocks do not nest)"}},
    {BLOCK("\"repeat\": 2, \"name\": \"blk\", \"input\": \"x\"",
           "{\"name\": \"f\", \"type\": \"fc\", \"input\": \"$in\", \"size\": 0}"),
     {"layers[0].layers[0].size: expected an integer >= 1", "found 0", "(layer 'f_0', fc)"}},
    {BLOCK("\"repeat\": 2, \"name\": \"blk\", \"input\": \"x\"",
           "{\"name\": \"f\", \"type\": \"fc\", \"input\": \"g\", \"size\": 4}"),
     {"layers[0].layers[0].input: expected the name of a layer or input", "found \"g\"",
      "(layer 'f_0'"}},
    {BLOCK("\"repeat\": 2, \"name\": \"$blk\", \"input\": \"x\"", F_IN),
     {"layers[0].name: expected a name without '/' that does not start with '$'",
      "found \"$blk\""}},
    {"{" IN ", \"layers\": [{\"repeat\": 2, \"name\": \"blk\", \"input\": \"x\", \"layers\": [" F_IN "]},"
     " {\"name\": \"f_1\", \"type\": \"fc\", \"input\": \"x\", \"size\": 3}]}",
     {"layers[1].name: expected a name no other layer or input has", "found \"f_1\"",
      "(already used by layers[0].layers[0])"}},
    {"{" IN ", \"layers\": [{\"repeat\": 2, \"name\": \"blk\", \"input\": \"x\", \"layers\": [" F_IN "]},"
     " {\"name\": \"blk\", \"type\": \"fc\", \"input\": \"x\", \"size\": 3}]}",
     {"layers[0].name: expected a name no other layer, input or block has", "found \"blk\"",
      "(already used by layers[1])"}},
    {"{" IN ", \"layers\": [" F_IN "]}",
     {"layers[0].input: expected the name of a layer or input", "found \"$in\"", "(layer 'f')"}},
    {BLOCK("\"repeat\": 4096, \"name\": \"blk\", \"input\": \"x\"", F_IN ", " F_IN ", " F_IN),
     {"layers: expected at most 10000 layers", "found more than 10000 with repeat blocks expanded"}},
    /* an fc's "tie" names an embedding whose table is its weight transposed */
#define EMB(v, w) "{\"name\": \"e\", \"type\": \"embedding\", \"input\": \"y\", \"vocab\": " #v ", \"size\": " #w "}"
#define TIED(tie) "{\"name\": \"o\", \"type\": \"fc\", \"input\": \"e\", \"size\": 6, \"tie\": " tie "}"
    {"{" IN ", \"layers\": [" EMB(6, 4) ", " TIED("\"emb\"") "]}",
     {"layers[1].tie: expected the name of an embedding layer", "found \"emb\", which names no layer",
      "(layer 'o', fc)"}},
    {"{" IN ", \"layers\": [" EMB(6, 4) ", " TIED("\"x\"") "]}",
     {"layers[1].tie: expected the name of an embedding layer", "found \"x\", a layer of type data"}},
    {"{" IN ", \"layers\": [" EMB(6, 4) ", " TIED("\"o\"") "]}",
     {"layers[1].tie: expected the name of an embedding layer", "found \"o\", a layer of type fc"}},
    {"{" IN ", \"layers\": [" EMB(7, 4) ", " TIED("\"e\"") "]}",
     {"layers[1].tie: expected an embedding of vocab 6 (this layer's size) and size 4 (its input "
      "width)", "found \"e\" of vocab 7 and size 4", "(layer 'o', fc)"}},
    {"{" IN ", \"layers\": [" EMB(6, 4) ", {\"name\": \"h\", \"type\": \"fc\", \"input\": \"e\", "
     "\"size\": 5}, {\"name\": \"o\", \"type\": \"fc\", \"input\": \"h\", \"size\": 6, \"tie\": \"e\"}]}",
     {"layers[2].tie: expected an embedding of vocab 6 (this layer's size) and size 5 (its input "
      "width)", "found \"e\" of vocab 6 and size 4"}},
    {"{" IN ", \"layers\": [" EMB(6, 4) ", " TIED("7") "]}",
     {"layers[1].tie: expected a non-empty string", "found 7", "(layer 'o', fc)"}},
    {"{" IN ", \"layers\": [" EMB(6, 4) ", " TIED("\"\"") "]}",
     {"layers[1].tie: expected a non-empty string", "found \"\"", "(layer 'o', fc)"}},
#define SP(extra) "{\"inputs\": {\"x\": {\"dataset\": \"f\", \"sparse\": " extra "}}"
#define SPX "\"layers\": [{\"name\": \"e\", \"type\": \"embedding_bag\", \"input\": \"x\", " \
    "\"rows\": 8, \"size\": 2}]}"
    {SP("false, \"columns\": 9") ", " SPX,
     {"inputs.x.sparse: expected true", "found false", "(layer 'x', sparse_input)"}},
    {SP("true") ", " SPX, {"inputs.x.columns: expected an integer", "found nothing"}},
    {SP("true, \"columns\": 9, \"size\": 3") ", " SPX,
     {"inputs.x.size: expected one of the keys dataset, sparse, columns, fields"}},
    {SP("true, \"columns\": 9") ", \"layers\": [{\"name\": \"o\", \"type\": \"fc\", "
     "\"input\": \"x\", \"size\": 2}]}",
     {"layers[0].input: expected float values or ids (a sparse input feeds embedding_bag or "
      "sparse_fc)", "found a sparse (CSR) input", "(layer 'o', fc)"}},
    {"{" IN ", \"layers\": [{\"name\": \"w\", \"type\": \"sparse_fc\", \"input\": \"x\", "
     "\"rows\": 4}]}",
     {"layers[0].input: expected one sparse input", "found a dense input"}},
    {SP("true, \"columns\": 9") ", \"layers\": [{\"name\": \"e\", \"type\": "
     "\"embedding_bag\", \"input\": \"x\", \"rows\": 8, \"size\": 2, \"per_field\": true}]}",
     {"layers[0].per_field: expected per_field only where the input has \"fields\""}},
    {SP("true, \"columns\": 9, \"fields\": 2") ", \"layers\": [{\"name\": \"e\", \"type\": "
     "\"embedding_bag\", \"input\": \"x\", \"rows\": 8, \"size\": 2, \"mode\": \"max\"}]}",
     {"layers[0].mode: expected a bag mode", "found \"max\""}},
#undef SPX
#undef SP
#undef TIED
#undef EMB
#undef BLOCK
#undef F_IN
};
enum { N_MISTAKES = sizeof mistakes / sizeof *mistakes };

START_TEST(mistakes_name_file_place_and_field)
{
    const mistake *m = &mistakes[_i];
    pn_graph *g = NULL;
    ck_assert_int_eq(from_text(m->json, &g), PN_ERR_INVALID);
    const char *msg = pn_error_message();
    ck_assert_msg(strstr(msg, "models/bad.json: ") == msg, "message does not start with the file: %s", msg);
    ck_assert_msg(strstr(msg, ": expected ") && strstr(msg, ", found "),
                  "case %d: not \"<file>: <path>: expected ..., found ...\": %s", _i, msg);
    for (int k = 0; k < 3 && m->expect[k]; k++)
        ck_assert_msg(strstr(msg, m->expect[k]), "case %d: no \"%s\" in: %s", _i, m->expect[k], msg);
}
END_TEST

/* A sparse input becomes a sparse_input node of a CSR edge (its columns beyond
 * 2^31, its fields); embedding_bag makes fields x size of it (on a GPU too:
 * tests/test_cuda_sparse.sh). */
START_TEST(sparse_inputs_make_csr_edges)
{
    static const char *const text =
        "{\"inputs\": {\"x\": {\"dataset\": \"f\", \"sparse\": true, \"columns\": 1099511627776,"
        " \"fields\": 3}, \"y\": {\"dataset\": \"l\", \"ids\": true}},"
        " \"layers\": [{\"name\": \"e\", \"type\": \"embedding_bag\", \"input\": \"x\","
        " \"rows\": 100, \"size\": 4, \"per_field\": true},"
        " {\"name\": \"w\", \"type\": \"sparse_fc\", \"input\": \"x\", \"rows\": 50, \"size\": 2}]}";
    pn_graph *g;
    ck_assert_msg(from_text(text, &g) == 0, "%s", pn_error_message());
    const pn_layer *x = g->nodes[pn_graph_find(g, "x")].layer;
    const pn_layer *e = g->nodes[pn_graph_find(g, "e")].layer;
    ck_assert_str_eq(x->type->name, "sparse_input");
    ck_assert(x->out_shape.sparse && x->out_shape.columns == (int64_t)1 << 40);
    ck_assert_int_eq(x->out_shape.fields, 3);
    ck_assert_int_eq(e->out_shape.seq, 3);
    ck_assert_int_eq(e->out_shape.width, 4);
    ck_assert_int_eq(e->param_decls[0].rows, 300); /* a table per field */
    ck_assert_int_eq(pn_graph_param_count(g), 300 * 4 + 50 * 2 + 2);
    pn_graph_free(g);
}
END_TEST

/* A block of three layers (one names a later one), repeated 3 times between "pre"
 * and "out", which names the block; a residual to "$in" and to an input outside. */
#define REPEATED mf_text("repeat_block")

/* The name of input k of node name in g. */
static const char *input_of(const pn_graph *g, const char *name, int k)
{
    int i = pn_graph_find(g, name);
    ck_assert_msg(i >= 0, "no node %s", name);
    ck_assert_int_lt(k, g->nodes[i].n_inputs);
    return g->nodes[g->nodes[i].inputs[k]].name;
}

START_TEST(repeat_blocks_expand_into_wired_copies)
{
    pn_graph *g;
    ck_assert_msg(from_text(REPEATED, &g) == 0, "%s", pn_error_message());
    ck_assert_int_eq(g->n_nodes, 1 + 1 + 3 * 3 + 1); /* x, pre, the copies, out */
    ck_assert_int_lt(pn_graph_find(g, "blk"), 0);    /* the block is a name, no node */
    ck_assert_int_lt(pn_graph_find(g, "f"), 0);
    ck_assert_int_lt(pn_graph_find(g, "f_3"), 0);
    char prev[16] = "pre";
    for (int c = 0; c < 3; c++) {
        char f[16], h[16], r[16], param[PN_PARAM_NAME_MAX + 1];
        snprintf(f, sizeof f, "f_%d", c);
        snprintf(h, sizeof h, "h_%d", c);
        snprintf(r, sizeof r, "r_%d", c);
        ck_assert_str_eq(input_of(g, f, 0), prev);          /* "$in" */
        ck_assert_str_eq(input_of(g, h, 0), f);             /* block-local: the same copy */
        ck_assert_str_eq(input_of(g, r, 0), prev);          /* "$in" in a residual */
        ck_assert_str_eq(input_of(g, r, 1), h);
        ck_assert_str_eq(input_of(g, r, 2), "x");           /* outside: unchanged */
        ck_assert_int_eq(g->nodes[pn_graph_find(g, f)].stage, 0);
        ck_assert_int_eq(g->nodes[pn_graph_find(g, h)].stage, -1);
        ck_assert_int_eq(pn_layer_param_name(g->nodes[pn_graph_find(g, f)].layer, 0, param), 0);
        snprintf(f, sizeof f, "f_%d/w", c);
        ck_assert_str_eq(param, f);
        snprintf(prev, sizeof prev, "%s", r);               /* the last layer is the output */
    }
    ck_assert_str_eq(input_of(g, "out", 0), "r_2");         /* the block's name */
    ck_assert_int_eq(pn_graph_param_count(g), 7 * (16 + 4));
    pn_graph_free(g);
}
END_TEST

START_TEST(syntax_errors_give_line_and_column)
{
    char path[] = "/tmp/pipenet-graph-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *text = "{\n  \"inputs\": {},\n  \"layers\": [\n    {\"name\": \"a\",}\n  ]\n}\n";
    ck_assert_int_eq(write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    pn_graph *g = NULL;
    ck_assert_int_eq(pn_graph_load(&g, path), PN_ERR_INVALID);
    char where[64];
    snprintf(where, sizeof where, "%s:4:", path);
    ck_assert_msg(strstr(pn_error_message(), where), "no %s in: %s", where, pn_error_message());
    unlink(path);
    ck_assert_int_eq(pn_graph_load(&g, "/nonexistent/model.json"), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "/nonexistent/model.json"));
}
END_TEST

START_TEST(train_section_is_validated)
{
    static const char *const bad[][2] = {
        {"{\"batch\": \"big\"}", "train.batch"},
        {"{\"epochs\": 0}", "train.epochs"},
        {"{\"eval_every\": -1}", "train.eval_every"},
        {"{\"data\": 5}", "train.data"},
        {"{\"learning_rate\": 0.1}", "train.learning_rate"},
        {"{\"optimizer\": {\"type\": \"adagrad\"}}", "train.optimizer.type"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *train = json_loads(bad[i][0], 0, NULL);
        pn_train_config cfg;
        pn_train_config_default(&cfg);
        ck_assert_int_eq(pn_train_config_from_json(train, "models/bad.json", &cfg), PN_ERR_INVALID);
        ck_assert_msg(strstr(pn_error_message(), bad[i][1]) &&
                          strstr(pn_error_message(), "models/bad.json"),
                      "no %s in: %s", bad[i][1], pn_error_message());
        json_decref(train);
    }
    json_t *train = json_loads("{\"batch\": 32, \"epochs\": 3, \"seed\": 9, \"data\": \"t.h5\","
                               " \"eval_every\": 500,"
                               " \"optimizer\": {\"type\": \"adam\", \"lr\": 0.002}}", 0, NULL);
    pn_train_config cfg;
    pn_train_config_default(&cfg);
    ck_assert_int_eq(pn_train_config_from_json(train, "m.json", &cfg), 0);
    ck_assert_int_eq(cfg.batch, 32);
    ck_assert_int_eq(cfg.epochs, 3);
    ck_assert_uint_eq(cfg.seed, 9);
    ck_assert_str_eq(cfg.data, "t.h5");
    ck_assert_int_eq(cfg.eval_every, 500);
    ck_assert_int_eq(cfg.optimizer.kind, PN_OPT_ADAM);
    ck_assert_double_eq_tol(cfg.optimizer.lr, 0.002, 1e-12);
    json_decref(train);
}
END_TEST

/* The model with a layer called `layer`, an input called `input` and a dataset
 * called `dataset` (malloc'd). */
static char *named_model(const char *layer, const char *input, const char *dataset)
{
    const char *fmt = "{\"inputs\": {\"%s\": {\"dataset\": \"%s\", \"size\": 4}},"
                      " \"layers\": [{\"name\": \"%s\", \"type\": \"fc\", \"input\": \"%s\","
                      " \"size\": 3}]}";
    size_t n = strlen(fmt) + 2 * strlen(input) + strlen(dataset) + strlen(layer);
    char *text = malloc(n);
    snprintf(text, n, fmt, input, dataset, layer, input);
    return text;
}

/* One limit for names: PN_NAME_MAX bytes are accepted (and the parameters named after
 * the layer keep the whole name), one more is refused naming the place, so no two
 * long names can be cut to one shared parameter. */
START_TEST(names_have_one_length_limit)
{
    char at[PN_NAME_MAX + 1], over[PN_NAME_MAX + 2];
    memset(at, 'a', PN_NAME_MAX);
    at[PN_NAME_MAX] = '\0';
    memset(over, 'b', PN_NAME_MAX + 1);
    over[PN_NAME_MAX + 1] = '\0';
    pn_graph *g = NULL;
    char *text = named_model(at, at + 1, at);
    ck_assert_msg(from_text(text, &g) == 0, "%s", pn_error_message());
    free(text);
    int node = pn_graph_find(g, at);
    ck_assert_int_ge(node, 0);
    char name[PN_PARAM_NAME_MAX + 1];
    ck_assert_int_eq(pn_layer_param_name(g->nodes[node].layer, 0, name), 0);
    ck_assert_uint_eq(strlen(name), PN_NAME_MAX + 2);
    ck_assert_str_eq(name + PN_NAME_MAX, "/w");
    pn_graph_free(g);

    const struct { const char *layer, *input, *dataset, *expect; } cases[] = {
        {over, "x", "f", "layers[0].name: expected a name of at most 200 bytes, found \"bbbb"},
        {"a", over, "f", "inputs: expected input names of at most 200 bytes, found \"bbbb"},
        {"a", "x", over, "inputs.x.dataset: expected a name of at most 200 bytes, found \"bbbb"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        text = named_model(cases[i].layer, cases[i].input, cases[i].dataset);
        ck_assert_int_eq(from_text(text, &g), PN_ERR_INVALID);
        free(text);
        const char *msg = pn_error_message();
        ck_assert_msg(strstr(msg, cases[i].expect) && strstr(msg, "(201 bytes)"),
                      "case %zu: %s", i, msg);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("graph");
    TCase *tc = tcase_create("model json");
    tcase_add_test(tc, valid_model_is_ordered_and_shaped);
    tcase_add_loop_test(tc, mistakes_name_file_place_and_field, 0, N_MISTAKES);
    tcase_add_test(tc, repeat_blocks_expand_into_wired_copies);
    tcase_add_test(tc, sparse_inputs_make_csr_edges);
    tcase_add_test(tc, syntax_errors_give_line_and_column);
    tcase_add_test(tc, train_section_is_validated);
    tcase_add_test(tc, names_have_one_length_limit);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
