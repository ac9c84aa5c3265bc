/* Invalid layer specs are refused with PN_ERR_INVALID and a message that names the
 * layer and the offending attribute; valid specs produce the inferred shapes. */
#include <string.h>

#include "base/error.h"
#include "layers/layer.h"
#include "testutil.h"

#define F(w, s) {(w), (s), false}
#define IDS(s) {0, (s), true}

typedef struct bad_spec {
    const char *type;
    const char *spec;
    int n_inputs;
    pn_shape in[2];
    const char *attr; /* must appear quoted in the message */
    const char *hint; /* and this too */
} bad_spec;

static const bad_spec bad[] = {
    {"fc", "{}", 1, {F(4, 1)}, "size", "missing"},
    {"fc", "{\"size\": \"wide\"}", 1, {F(4, 1)}, "size", "integer"},
    {"fc", "{\"size\": 0}", 1, {F(4, 1)}, "size", ">= 1"},
    {"fc", "{\"size\": 2.5}", 1, {F(4, 1)}, "size", "2.5"},
    {"fc", "{\"size\": 3, \"act\": \"swish\"}", 1, {F(4, 1)}, "act", "swish"},
    {"fc", "{\"size\": 3, \"bias\": \"yes\"}", 1, {F(4, 1)}, "bias", "true or false"},
    {"fc", "{\"size\": 3, \"sise\": 4}", 1, {F(4, 1)}, "sise", "not an attribute"},
    {"fc", "{\"size\": 3}", 1, {IDS(1)}, "input", "ids"},
    {"fc", "{\"size\": 3}", 2, {F(4, 1), F(4, 1)}, "input", "1 input"},
    {"act", "{}", 1, {F(4, 1)}, "act", "missing"},
    {"dropout", "{\"rate\": 1.0}", 1, {F(4, 1)}, "rate", "[0, 1)"},
    {"dropout", "{\"rate\": -0.1}", 1, {F(4, 1)}, "rate", "-0.1"},
    {"dropout", "{}", 1, {F(4, 1)}, "rate", "missing"},
    {"attention", "{\"heads\": 4}", 1, {F(6, 3)}, "heads", "divide"},
    {"attention", "{\"heads\": 0}", 1, {F(6, 3)}, "heads", ">= 1"},
    {"embedding", "{\"vocab\": 10, \"size\": 4}", 1, {F(4, 1)}, "input", "ids"},
    {"embedding", "{\"size\": 4}", 1, {IDS(2)}, "vocab", "missing"},
    {"layernorm", "{\"eps\": \"small\"}", 1, {F(4, 1)}, "eps", "number"},
    {"add", "{}", 2, {F(4, 1), F(5, 1)}, "input", "shape"},
    {"add", "{}", 1, {F(4, 1)}, "input", "at least 2"},
    {"concat", "{}", 2, {F(4, 1), F(5, 2)}, "input", "rows per sample"},
    {"softmax_xent", "{}", 2, {F(4, 1), F(1, 1)}, "input", "labels"},
    {"softmax_xent", "{}", 2, {F(4, 2), IDS(1)}, "input", "labels per sample"},
    {"mse", "{}", 2, {F(4, 1), F(3, 1)}, "input", "differ"},
    {"data", "{\"ids\": true, \"size\": 3}", 0, {{0}}, "size", "ids"},
    {"data", "{\"dataset\": 7, \"size\": 3}", 0, {{0}}, "dataset", "string"},
    {"data", "{\"seq\": 0, \"size\": 3}", 0, {{0}}, "seq", ">= 1"},
};
enum { N_BAD = sizeof bad / sizeof *bad };

START_TEST(invalid_attributes_name_layer_and_attribute)
{
    const bad_spec *b = &bad[_i];
    json_t *spec = json_loads(b->spec, 0, NULL);
    ck_assert_ptr_nonnull(spec);
    pn_layer *l = NULL;
    pn_error_clear();
    int rc = pn_layer_create(&l, "bad", b->type, spec, b->in, b->n_inputs);
    json_decref(spec);
    ck_assert_msg(rc == PN_ERR_INVALID, "%s %s was accepted", b->type, b->spec);
    ck_assert_ptr_null(l);
    const char *msg = pn_error_message();
    char quoted[64];
    snprintf(quoted, sizeof quoted, "'%s'", b->attr);
    ck_assert_msg(strstr(msg, "layer 'bad'"), "no layer name in: %s", msg);
    ck_assert_msg(strstr(msg, quoted), "no %s in: %s", quoted, msg);
    ck_assert_msg(strstr(msg, b->hint), "no \"%s\" in: %s", b->hint, msg);
}
END_TEST

START_TEST(unknown_type_is_named)
{
    pn_layer *l = NULL;
    ck_assert_int_eq(pn_layer_create(&l, "conv1", "conv", NULL, NULL, 0), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "'conv1'"));
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "'conv'"));
}
END_TEST

START_TEST(valid_specs_infer_shapes)
{
    pn_shape x = F(6, 4), ids = IDS(4);
    pn_layer *l;
    json_t *spec = json_loads("{\"name\": \"a\", \"type\": \"attention\", \"input\": \"x\", "
                              "\"stage\": 1, \"heads\": 2}",
                              0, NULL);
    ck_assert_int_eq(pn_layer_create(&l, "a", "attention", spec, &x, 1), 0);
    ck_assert_int_eq(l->out_shape.width, 6);
    ck_assert_int_eq(l->out_shape.seq, 4);
    ck_assert_int_eq(l->n_params, 4);
    pn_layer_free(l);
    json_decref(spec);

    pn_shape two[2] = {F(10, 4), ids};
    ck_assert_int_eq(pn_layer_create(&l, "loss", "softmax_xent", NULL, two, 2), 0);
    ck_assert_int_eq(l->out_shape.width, 1);
    ck_assert_int_eq(l->out_shape.seq, 4);
    ck_assert(l->type->is_loss);
    pn_layer_free(l);

    pn_shape cat[2] = {F(3, 2), F(5, 2)};
    ck_assert_int_eq(pn_layer_create(&l, "c", "concat", NULL, cat, 2), 0);
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
