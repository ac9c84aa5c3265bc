/* Invalid layer specs are refused with PN_ERR_INVALID and a message of the one
 * config-error shape: "<file>: layers[i].<attribute>: expected ..., found ...
 * (layer '<name>', <type>)"; valid specs produce the inferred shapes. */
#include <string.h>

#include "base/error.h"
#include "layers/layer.h"
#include "testutil.h"

#define F(w, s) {.width = (w), .seq = (s)}
#define IDS(s) {.seq = (s), .ids = true}

typedef struct bad_spec {
    const char *type;
    const char *spec;
    int n_inputs;
    pn_shape in[2];
    const char *attr; /* the field the message points at */
    const char *hint; /* what it says it expected or found */
} bad_spec;

static const bad_spec bad[] = {
    {"fc", "{}", 1, {F(4, 1)}, "size", "(required), found nothing"},
    {"fc", "{\"size\": \"wide\"}", 1, {F(4, 1)}, "size", "an integer >= 1, found \"wide\""},
    {"fc", "{\"size\": 0}", 1, {F(4, 1)}, "size", "an integer >= 1, found 0"},
    {"fc", "{\"size\": 2.5}", 1, {F(4, 1)}, "size", "found 2.5"},
    {"fc", "{\"size\": 3, \"act\": \"swish\"}", 1, {F(4, 1)}, "act", "\"softmax\", found \"swish\""},
    {"fc", "{\"size\": 3, \"bias\": \"yes\"}", 1, {F(4, 1)}, "bias", "true or false, found \"yes\""},
    {"fc", "{\"size\": 3, \"sise\": 4}", 1, {F(4, 1)}, "sise", "size, bias, act, tie, found an unknown key"},
    {"fc", "{\"size\": 3}", 1, {IDS(1)}, "input", "float values, found integer ids"},
    {"fc", "{\"size\": 3}", 2, {F(4, 1), F(4, 1)}, "input", "1 input(s), found 2"},
    {"act", "{}", 1, {F(4, 1)}, "act", "(required), found nothing"},
    {"dropout", "{\"rate\": 1.0}", 1, {F(4, 1)}, "rate", "a number in [0, 1), found 1"},
    {"dropout", "{\"rate\": -0.1}", 1, {F(4, 1)}, "rate", "found -0.1"},
    {"dropout", "{}", 1, {F(4, 1)}, "rate", "found nothing"},
    {"attention", "{\"heads\": 4}", 1, {F(6, 3)}, "heads", "divides the width 6, found 4"},
    {"attention", "{\"heads\": 0}", 1, {F(6, 3)}, "heads", ">= 1, found 0"},
    {"embedding", "{\"vocab\": 10, \"size\": 4}", 1, {F(4, 1)}, "input", "integer ids"},
    {"embedding", "{\"size\": 4}", 1, {IDS(2)}, "vocab", "found nothing"},
    {"layernorm", "{\"eps\": \"small\"}", 1, {F(4, 1)}, "eps", "a number in [1e-12, 1], found \"small\""},
    {"add", "{}", 2, {F(4, 1), F(5, 1)}, "input", "inputs of one shape, found input 1 of shape 5"},
    {"add", "{}", 1, {F(4, 1)}, "input", "at least 2 inputs, found 1"},
    {"concat", "{}", 2, {F(4, 1), F(5, 2)}, "input", "rows per sample, found input 1 with 2"},
    {"softmax_xent", "{}", 2, {F(4, 1), F(1, 1)}, "input", "integer labels"},
    {"softmax_xent", "{}", 2, {F(4, 2), IDS(1)}, "input", "labels per sample as rows of logits (2), found 1"},
    {"mse", "{}", 2, {F(4, 1), F(3, 1)}, "input", "of one shape, found a prediction of shape 4"},
    {"fm", "{}", 1, {IDS(4)}, "input", "float field embeddings, found integer ids"},
    {"fm", "{\"k\": 2}", 1, {F(4, 3)}, "k", "one of the keys (none), found an unknown key"},
    {"inner_product", "{}", 1, {F(4, 1)}, "input", "at least 2 fields (seq >= 2), found 1 field"},
    {"cross", "{}", 2, {F(4, 1), F(5, 1)}, "input", "x0 and x of one shape, found x0 of shape 4"},
    {"cross", "{}", 2, {F(4, 1), IDS(1)}, "input", "float inputs, found integer ids as input 1"},
    {"flatten", "{}", 1, {IDS(3)}, "input", "float values, found integer ids"},
    {"sigmoid_xent", "{}", 2, {F(2, 1), IDS(1)}, "input", "one logit per row, found 2 logits"},
    {"sigmoid_xent", "{}", 2, {F(1, 1), F(1, 1)}, "input", "0/1 labels as input 1"},
    {"sigmoid_xent", "{}", 2, {F(1, 3), IDS(1)}, "input", "labels per sample as logits (3), found 1"},
    {"data", "{\"ids\": true, \"size\": 3}", 0, {{0}}, "size", "no size with \"ids\": true"},
    {"data", "{\"dataset\": 7, \"size\": 3}", 0, {{0}}, "dataset", "a non-empty string, found 7"},
    {"data", "{\"seq\": 0, \"size\": 3}", 0, {{0}}, "seq", ">= 1, found 0"},
};
enum { N_BAD = sizeof bad / sizeof *bad };

START_TEST(invalid_attributes_name_layer_and_attribute)
{
    const bad_spec *b = &bad[_i];
    json_t *spec = json_loads(b->spec, 0, NULL);
    ck_assert_ptr_nonnull(spec);
    pn_layer *l = NULL;
    pn_error_clear();
    pn_json_at top = pn_json_root("models/x.json"), layers = pn_json_field(&top, "layers");
    pn_json_at at = pn_json_item(&layers, 2);
    int rc = pn_layer_create(&l, &at, "bad", b->type, spec, b->in, b->n_inputs);
    json_decref(spec);
    ck_assert_msg(rc == PN_ERR_INVALID, "%s %s was accepted", b->type, b->spec);
    ck_assert_ptr_null(l);
    const char *msg = pn_error_message();
    char start[96], subject[64];
    snprintf(start, sizeof start, "models/x.json: layers[2].%s: expected ", b->attr);
    snprintf(subject, sizeof subject, "(layer 'bad', %s)", b->type);
    ck_assert_msg(strstr(msg, start) == msg, "message does not start with %s: %s", start, msg);
    ck_assert_msg(strstr(msg, b->hint), "no \"%s\" in: %s", b->hint, msg);
    ck_assert_msg(strstr(msg, subject), "no %s in: %s", subject, msg);
}
END_TEST

START_TEST(unknown_type_is_named)
{
    pn_layer *l = NULL;
    ck_assert_int_eq(pn_layer_create(&l, NULL, "conv1", "conv", NULL, NULL, 0), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "type: expected a layer type"));
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "found \"conv\" (layer 'conv1')"));
}
END_TEST

START_TEST(valid_specs_infer_shapes)
{
    pn_shape x = F(6, 4), ids = IDS(4);
    pn_layer *l;
    json_t *spec = json_loads("{\"name\": \"a\", \"type\": \"attention\", \"input\": \"x\", "
                              "\"stage\": 1, \"heads\": 2}",
                              0, NULL);
    ck_assert_int_eq(pn_layer_create(&l, NULL, "a", "attention", spec, &x, 1), 0);
    ck_assert_int_eq(l->out_shape.width, 6);
    ck_assert_int_eq(l->out_shape.seq, 4);
    ck_assert_int_eq(l->n_params, 4);
    pn_layer_free(l);
    json_decref(spec);

    pn_shape two[2] = {F(10, 4), ids};
    ck_assert_int_eq(pn_layer_create(&l, NULL, "loss", "softmax_xent", NULL, two, 2), 0);
    ck_assert_int_eq(l->out_shape.width, 1);
    ck_assert_int_eq(l->out_shape.seq, 4);
    ck_assert(l->type->is_loss);
    pn_layer_free(l);

    /* the feature crosses over F = 5 fields of width 3 */
    pn_shape fields = F(3, 5);
    static const struct { const char *type; int width, params; } crosses[] = {
        {"fm", 1, 0}, {"inner_product", 10, 0}, {"flatten", 15, 0}, {"cross", 3, 2}};
    for (int i = 0; i < 4; i++) {
        pn_shape in = strcmp(crosses[i].type, "cross") ? fields : (pn_shape)F(3, 1);
        ck_assert_int_eq(pn_layer_create(&l, NULL, "c", crosses[i].type, NULL, &in, 1), 0);
        ck_assert_int_eq(l->out_shape.width, crosses[i].width);
        ck_assert_int_eq(l->out_shape.seq, 1);
        ck_assert_int_eq(l->n_params, crosses[i].params);
        pn_layer_free(l);
    }
    pn_shape bin[2] = {F(1, 1), IDS(1)};
    ck_assert_int_eq(pn_layer_create(&l, NULL, "loss", "sigmoid_xent", NULL, bin, 2), 0);
    ck_assert(l->type->is_loss && l->type->loss_kind == PN_LOSS_BINARY);
    ck_assert_int_eq(l->type->id_limit(l, 1), 2);
    pn_layer_free(l);

    pn_shape cat[2] = {F(3, 2), F(5, 2)};
    ck_assert_int_eq(pn_layer_create(&l, NULL, "c", "concat", NULL, cat, 2), 0);
    ck_assert_int_eq(l->out_shape.width, 8);
    pn_layer_free(l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layer attributes");
    TCase *tc = tcase_create("validation");
    tcase_add_loop_test(tc, invalid_attributes_name_layer_and_attribute, 0, N_BAD);
    tcase_add_test(tc, unknown_type_is_named);
    tcase_add_test(tc, valid_specs_infer_shapes);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
