/* The feature-cross layers and the binary loss against their definitions, computed
 * here the slow way (test_layer_grad checks that their gradients match their
 * forwards; this checks that the forwards are what docs/layers.md says): fm is the
 * sum of the pairs' inner products, inner_product lists them in (0,1), (0,2)...
 * order, cross is x0 (x . w) + b + x, flatten keeps the values in order, and
 * sigmoid_xent's loss is exact where the logits are far too large for a probability
 * and counts its evaluation rows into the AUC histogram, not its training rows;
 * padded fields are refused. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "layers/layer.h"
#include "math/device.h"
#include "math/ops.h"
#include "testutil.h"

enum { B = 3, MAXIN = 2 };

/* A layer of type on the host with random inputs and parameters, run forward. */
typedef struct probe {
    pn_layer *layer;
    pn_layer_inst inst;
    pn_params *params;
    pn_arg in[MAXIN], out;
    pn_arg *ptrs[MAXIN];
} probe;

static void probe_run(probe *p, const char *type, int n_in, const pn_shape *shapes, bool train)
{
    memset(p, 0, sizeof *p);
    json_t *spec = json_object();
    ck_assert_msg(pn_layer_create(&p->layer, NULL, "x", type, spec, shapes, n_in) == 0, "%s",
                  pn_error_message());
    json_decref(spec);
    pn_device host = pn_device_host();
    ck_assert_int_eq(pn_params_create(&p->params, host), 0);
    ck_assert_int_eq(pn_layer_inst_init(&p->inst, p->layer, p->params), 0);
    ck_assert_int_eq(pn_params_finalize(p->params), 0);
    pn_rng rng;
    pn_rng_init(&rng, 11, 0);
    pn_matrix all = pn_params_all_values(p->params);
    tu_fill_uniform(&all, &rng, 0.9f);
    for (int i = 0; i < n_in; i++) {
        ck_assert_int_eq(pn_arg_reserve(&p->in[i], host, shapes[i], B, false), 0);
        if (shapes[i].ids)
            for (int r = 0; r < pn_arg_rows(&p->in[i]); r++) p->in[i].ids[r] = r % 2;
        else
            tu_fill_uniform(&p->in[i].value, &rng, 1.0f);
        p->ptrs[i] = &p->in[i];
    }
    ck_assert_int_eq(pn_arg_reserve(&p->out, host, p->layer->out_shape, B, false), 0);
    pn_pass pass = {.training = train};
    ck_assert_msg(pn_layer_forward(&p->inst, &pass, p->ptrs, &p->out) == 0, "%s",
                  pn_error_message());
}

static void probe_free(probe *p)
{
    for (int i = 0; i < MAXIN; i++) pn_arg_release(&p->in[i]);
    pn_arg_release(&p->out);
    pn_layer_inst_release(&p->inst);
    pn_params_free(p->params);
    pn_layer_free(p->layer);
}

/* <v_i, v_j> of sample b, fields of width k. */
static double dot(const float *v, int b, int fields, int k, int i, int j)
{
    double s = 0.0;
    for (int c = 0; c < k; c++)
        s += (double)v[(b * fields + i) * k + c] * v[(b * fields + j) * k + c];
    return s;
}

START_TEST(fm_and_inner_product_are_the_pairs_inner_products)
{
    enum { FIELDS = 4, K = 3 };
    pn_shape in = {.width = K, .seq = FIELDS};
    probe fm, ip;
    probe_run(&fm, "fm", 1, &in, true);
    probe_run(&ip, "inner_product", 1, &in, true);
    memcpy(ip.in[0].value.data, fm.in[0].value.data, sizeof(float) * B * FIELDS * K);
    pn_pass pass = {.training = true};
    ck_assert_int_eq(pn_layer_forward(&ip.inst, &pass, ip.ptrs, &ip.out), 0);
    ck_assert_int_eq(ip.layer->out_shape.width, FIELDS * (FIELDS - 1) / 2);
    const float *v = fm.in[0].value.data;
    for (int b = 0; b < B; b++) {
        double total = 0.0;
        int p = 0;
        for (int i = 0; i < FIELDS; i++)
            for (int j = i + 1; j < FIELDS; j++, p++) {
                double want = dot(v, b, FIELDS, K, i, j);
                total += want;
                ck_assert_msg(tu_close(ip.out.value.data[b * 6 + p], want, 1e-5, 1e-6),
                              "inner_product sample %d pair %d: %g, want %g", b, p,
                              ip.out.value.data[b * 6 + p], want);
            }
        ck_assert_msg(tu_close(fm.out.value.data[b], total, 1e-5, 1e-5),
                      "fm sample %d: %g, want %g", b, fm.out.value.data[b], total);
    }
    probe_free(&fm);
    probe_free(&ip);
}
END_TEST

START_TEST(cross_is_x0_times_x_dot_w_plus_b_plus_x)
{
    enum { D = 5 };
    pn_shape in[2] = {{.width = D, .seq = 1}, {.width = D, .seq = 1}};
    probe p;
    probe_run(&p, "cross", 2, in, true);
    const float *x0 = p.in[0].value.data, *x = p.in[1].value.data;
    const float *w = pn_layer_param(&p.inst, 0).data, *bias = pn_layer_param(&p.inst, 1).data;
    for (int b = 0; b < B; b++) {
        double xw = 0.0;
        for (int c = 0; c < D; c++) xw += (double)x[b * D + c] * w[c];
        for (int c = 0; c < D; c++) {
            double want = x0[b * D + c] * xw + bias[c] + x[b * D + c];
            ck_assert_msg(tu_close(p.out.value.data[b * D + c], want, 1e-5, 1e-6),
                          "cross [%d,%d]: %g, want %g", b, c, p.out.value.data[b * D + c], want);
        }
    }
    probe_free(&p);
}
END_TEST

START_TEST(flatten_keeps_the_values_in_order)
{
    pn_shape in = {.width = 3, .seq = 4};
    probe p;
    probe_run(&p, "flatten", 1, &in, true);
    ck_assert_int_eq(p.out.value.rows, B);
    ck_assert_int_eq(p.out.value.cols, 12);
    ck_assert_mem_eq(p.out.value.data, p.in[0].value.data, sizeof(float) * B * 12);
    probe_free(&p);
}
END_TEST

/* Logits of +-100 and +-20 with both labels: the loss is log(1 + exp(-(2y-1) z))
 * to float precision (a -log of the probability would give infinity or a cap). */
START_TEST(sigmoid_xent_is_stable_at_large_logits)
{
    pn_shape in[2] = {{.width = 1, .seq = 4}, {.seq = 4, .ids = true}};
    probe p;
    probe_run(&p, "sigmoid_xent", 2, in, true);
    static const float z[4] = {100.0f, -100.0f, 20.0f, 0.0f};
    for (int r = 0; r < B * 4; r++) p.in[0].value.data[r] = z[r % 4];
    pn_pass pass = {.training = true};
    ck_assert_int_eq(pn_layer_forward(&p.inst, &pass, p.ptrs, &p.out), 0);
    for (int r = 0; r < B * 4; r++) {
        double t = (2.0 * p.in[1].ids[r] - 1.0) * z[r % 4];
        double want = t > 0 ? log1p(exp(-t)) : -t + log1p(exp(t));
        ck_assert_msg(tu_close(p.out.value.data[r], want, 1e-6, 1e-6),
                      "row %d: z %g label %d: loss %.9g, want %.9g", r, z[r % 4],
                      p.in[1].ids[r], p.out.value.data[r], want);
    }
    ck_assert(p.inst.auc->rows == 0); /* training rows give no AUC */
    pass.training = false;
    ck_assert_int_eq(pn_layer_forward(&p.inst, &pass, p.ptrs, &p.out), 0);
    ck_assert(p.inst.auc->rows == B * 4);
    probe_free(&p);
}
END_TEST

START_TEST(sigmoid_xent_refuses_a_label_outside_0_1)
{
    pn_shape in[2] = {{.width = 1, .seq = 1}, {.seq = 1, .ids = true}};
    probe p;
    probe_run(&p, "sigmoid_xent", 2, in, true);
    ck_assert_int_eq(pn_layer_type_find("sigmoid_xent")->id_limit(p.layer, 1), 2);
    p.in[1].ids[2] = 2;
    pn_pass pass = {.training = true};
    ck_assert_int_ne(pn_layer_forward(&p.inst, &pass, p.ptrs, &p.out), 0);
    ck_assert_msg(strstr(pn_error_message(), "row 2"), "%s", pn_error_message());
    probe_free(&p);
}
END_TEST

/* A sample shorter than its seq (lengths): its padding would count as fields, so the
 * layers that take every row as one refuse it, naming the layer and the sample. */
START_TEST(padded_fields_are_refused)
{
    static const char *const types[] = {"fm", "inner_product", "flatten"};
    pn_shape in = {.width = 2, .seq = 3};
    const int lengths[B] = {3, 2, 3};
    for (int t = 0; t < 3; t++) {
        probe p;
        probe_run(&p, types[t], 1, &in, true);
        p.in[0].lengths = lengths;
        pn_pass pass = {.training = true};
        ck_assert_int_ne(pn_layer_forward(&p.inst, &pass, p.ptrs, &p.out), 0);
        char want[96];
        snprintf(want, sizeof want, "layer 'x' (%s): sample 1 of its input has 2 of 3 rows",
                 types[t]);
        ck_assert_msg(strstr(pn_error_message(), want), "%s", pn_error_message());
        probe_free(&p);
    }
}
END_TEST

int main(void)
{
    pn_math_set_threads(1);
    Suite *s = suite_create("feature crosses");
    TCase *tc = tcase_create("definitions");
    tcase_add_test(tc, fm_and_inner_product_are_the_pairs_inner_products);
    tcase_add_test(tc, cross_is_x0_times_x_dot_w_plus_b_plus_x);
    tcase_add_test(tc, flatten_keeps_the_values_in_order);
    tcase_add_test(tc, sigmoid_xent_is_stable_at_large_logits);
    tcase_add_test(tc, sigmoid_xent_refuses_a_label_outside_0_1);
    tcase_add_test(tc, padded_fields_are_refused);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
