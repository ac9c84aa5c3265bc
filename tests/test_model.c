/* The embedding API (pipenet.h) against the engine it wraps: a model file written
 * from an arena with known values loads and gives bit for bit the outputs, loss and
 * accuracy of a pn_network over the same values (the other kinds of loss:
 * test_model_losses.c); labels are optional; a snapshot
 * loads too; inputs and outputs are described; a batch larger than the last one
 * re-plans; errors name the file, the parameter and the missing input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_file.h"
#include "math/cuda_module.h"
#include "math/device.h"
#include "net/graph.h"
#include "net/network.h"
#include "pipenet.h"
#include "model_fixture.h"
#include "model_files.h"
#include "testutil.h"

#define SKIP_MLP mf_text("skip_mlp")
#define TINY_TRANSFORMER mf_text("tiny_transformer")
#define PADDED_LSTM mf_text("padded_lstm_tagger")

START_TEST(forward_matches_the_network_bit_for_bit)
{
    direct d;
    direct_init(&d, SKIP_MLP, 5);
    write_file(&d, SKIP_MLP, PN_FORMAT_MODEL, NULL, NULL, NULL);
    pn_model *m = load_ok();
    float out[5 * 4];
    const void *inputs[2] = {d.inputs[0], d.inputs[1]};
    int rc = pn_model_forward(m, 5, inputs, NULL, out);
    ck_assert_msg(rc == 0, "%s", pn_model_error());
    ck_assert_int_eq(memcmp(out, direct_output(&d, "out"), sizeof out), 0);

    /* with labels, the loss layer ran: the network's loss and accuracy */
    double loss, accuracy;
    ck_assert_int_eq(pn_model_loss(m, &loss, &accuracy), 5);
    ck_assert(loss == d.stats.loss_sum / d.stats.rows);
    ck_assert(accuracy == d.stats.correct / d.stats.rows);
    pn_model_reset_loss(m);
    ck_assert_int_eq(pn_model_loss(m, &loss, &accuracy), 0);
    ck_assert(isnan(loss) && isnan(accuracy));

    /* a classification: logits (raw, no softmax), an accuracy, no RMSE */
    ck_assert_int_eq(pn_model_classifies(m, NULL), 1);
    ck_assert_int_eq(pn_model_classifies(m, "out"), 1);
    ck_assert_int_eq(pn_model_classifies(m, "h1"), 0);
    ck_assert_int_eq(pn_model_classifies(m, "loss"), 0);
    ck_assert_int_eq(pn_model_classifies(m, "nope"), -1);
    ck_assert_int_eq(pn_model_classifies(NULL, NULL), -1);
    ck_assert(isnan(pn_model_rmse(m)));

    /* without labels: the same prediction, no loss */
    memset(out, 0, sizeof out);
    const void *features_only[2] = {d.inputs[0], NULL};
    rc = pn_model_forward(m, 5, features_only, NULL, out);
    ck_assert_msg(rc == 0, "%s", pn_model_error());
    ck_assert_int_eq(memcmp(out, direct_output(&d, "out"), sizeof out), 0);
    ck_assert_int_eq(pn_model_loss(m, NULL, NULL), 0);

    /* any layer by name */
    float h1[5 * 6];
    ck_assert_int_eq(pn_model_forward(m, 5, features_only, "h1", h1), 0);
    ck_assert_int_eq(memcmp(h1, direct_output(&d, "h1"), sizeof h1), 0);
    pn_model_free(m);
    direct_free(&d);
}
END_TEST

START_TEST(sequence_model_predicts_from_tokens_alone)
{
    direct d;
    direct_init(&d, TINY_TRANSFORMER, 3);
    write_file(&d, TINY_TRANSFORMER, PN_FORMAT_MODEL, NULL, NULL, NULL);
    pn_model *m = load_ok();
    ck_assert_str_eq(pn_model_output_name(m), "head");
    ck_assert_int_eq(pn_model_output_size(m, NULL), 4 * 7);
    ck_assert_int_eq(pn_model_input_size(m, 0), 4);
    ck_assert_int_eq(pn_model_input_is_ids(m, 0), 1);
    float out[3 * 4 * 7];
    const void *inputs[2] = {d.inputs[0], NULL};
    int rc = pn_model_forward(m, 3, inputs, NULL, out);
    ck_assert_msg(rc == 0, "%s", pn_model_error());
    ck_assert_int_eq(memcmp(out, direct_output(&d, "head"), sizeof out), 0);
    pn_model_free(m);
    direct_free(&d);
}
END_TEST

/* A sparse input takes a pn_sparse_rows: the same outputs as the network fed the
 * same CSR rows, and rows the model cannot take are refused naming input and sample. */
START_TEST(sparse_inputs_take_csr_rows)
{
    const char *json = mf_text("sparse_bag_pool_classifier");
    direct d;
    direct_init(&d, json, 5);
    write_file(&d, json, PN_FORMAT_MODEL, NULL, NULL, NULL);
    pn_model *m = load_ok();
    ck_assert_int_eq(pn_model_input_is_sparse(m, 0), 1);
    ck_assert_int_eq(pn_model_input_is_sparse(m, 1), 0);
    ck_assert_int_eq(pn_model_input_size(m, 0), 0);
    float out[5 * 4];
    const void *inputs[2] = {d.inputs[0], NULL};
    ck_assert_msg(pn_model_forward(m, 5, inputs, NULL, out) == 0, "%s", pn_model_error());
    ck_assert_int_eq(memcmp(out, direct_output(&d, "out"), sizeof out), 0);
    pn_sparse_rows bad = *(const pn_sparse_rows *)d.inputs[0];
    int64_t ids[16];
    memcpy(ids, bad.ids, (size_t)bad.offsets[5] * sizeof *ids);
    ids[bad.offsets[2]] = 20; /* sample 2's first feature: past the columns */
    bad.ids = ids;
    inputs[0] = &bad;
    ck_assert_int_lt(pn_model_forward(m, 5, inputs, NULL, out), 0);
    ck_assert_msg(strstr(pn_model_error(), "input 'x', sample 2: feature"), "%s", pn_model_error());
    pn_model_free(m);
    direct_free(&d);
}
END_TEST

/* Lengths reach the network: full lengths are no lengths; shorter ones count only the
 * real positions in the loss and leave the positions before them as they were (the
 * lstm runs forward in time); lengths the model cannot take are refused. */
START_TEST(padded_sequences_take_their_lengths)
{
    direct d;
    direct_init(&d, PADDED_LSTM, 3);
    write_file(&d, PADDED_LSTM, PN_FORMAT_MODEL, NULL, NULL, NULL);
    pn_model *m = load_ok();
    ck_assert_str_eq(pn_model_input_lengths(m, 0), "len");
    ck_assert_ptr_null(pn_model_input_lengths(m, 1));
    enum { N = 3, T = 4, V = 7 };
    float plain[N * T * V], full[N * T * V], cut[N * T * V];
    const void *inputs[2] = {d.inputs[0], d.inputs[1]};
    ck_assert_int_eq(pn_model_forward(m, N, inputs, NULL, plain), 0);
    ck_assert_int_eq(pn_model_loss(m, NULL, NULL), N * T);
    pn_model_reset_loss(m);

    int all[N] = {T, T, T}, some[N] = {1, T, 3};
    const int *full_lengths[2] = {all, NULL}, *some_lengths[2] = {some, NULL};
    ck_assert_int_eq(pn_model_forward_lengths(m, N, inputs, full_lengths, NULL, full), 0);
    ck_assert_int_eq(memcmp(plain, full, sizeof full), 0);
    pn_model_reset_loss(m);
    int rc = pn_model_forward_lengths(m, N, inputs, some_lengths, NULL, cut);
    ck_assert_msg(rc == 0, "%s", pn_model_error());
    ck_assert_int_eq(pn_model_loss(m, NULL, NULL), 1 + T + 3);
    for (int s = 0; s < N; s++) /* real positions: as without lengths */
        ck_assert_int_eq(memcmp(cut + s * T * V, plain + s * T * V, (size_t)some[s] * V *
                                sizeof *cut), 0);
    ck_assert(memcmp(cut, plain, sizeof cut) != 0); /* the padding differs */

    int too_long[N] = {1, T + 1, 2};
    const int *bad[2] = {too_long, NULL};
    ck_assert_int_lt(pn_model_forward_lengths(m, N, inputs, bad, NULL, cut), 0);
    ck_assert_msg(strstr(pn_model_error(), "input 'tok', sample 1: length 5 outside 1..4"), "%s",
                  pn_model_error());
    const int *on_labels[2] = {NULL, all};
    ck_assert_int_lt(pn_model_forward_lengths(m, N, inputs, on_labels, NULL, cut), 0);
    ck_assert_msg(strstr(pn_model_error(), "input 'next' takes no lengths"), "%s",
                  pn_model_error());
    pn_model_free(m);
    direct_free(&d);
}
END_TEST

START_TEST(inputs_and_outputs_are_described)
{
    direct d;
    direct_init(&d, SKIP_MLP, 2);
    write_file(&d, SKIP_MLP, PN_FORMAT_MODEL, NULL, NULL, NULL);
    pn_model *m = load_ok();
    ck_assert_str_eq(pn_model_name(m), "skip");
    ck_assert_int_eq(pn_model_input_count(m), 2);
    ck_assert_str_eq(pn_model_input_name(m, 0), "x");
    ck_assert_str_eq(pn_model_input_dataset(m, 0), "features");
    ck_assert_int_eq(pn_model_input_size(m, 0), 5);
    ck_assert_int_eq(pn_model_input_is_ids(m, 0), 0);
    ck_assert_str_eq(pn_model_input_name(m, 1), "y");
    ck_assert_str_eq(pn_model_input_dataset(m, 1), "labels");
    ck_assert_int_eq(pn_model_input_size(m, 1), 1);
    ck_assert_int_eq(pn_model_input_is_ids(m, 1), 1);
    ck_assert_ptr_null(pn_model_input_name(m, 2));
    ck_assert_int_eq(pn_model_input_size(m, -1), -1);
    ck_assert_int_eq(pn_model_input_is_ids(m, 2), -1);
    ck_assert_str_eq(pn_model_output_name(m), "out");
    ck_assert_int_eq(pn_model_output_size(m, NULL), 4);
    ck_assert_int_eq(pn_model_output_size(m, "h2"), 6);
    ck_assert_int_eq(pn_model_output_size(m, "loss"), 1);
    ck_assert_int_eq(pn_model_output_size(m, "y"), -1);
    ck_assert_int_eq(pn_model_output_size(m, "nope"), -1);
    pn_model_free(m);
    direct_free(&d);
}
END_TEST

START_TEST(a_larger_batch_replans)
{
    direct d;
    direct_init(&d, SKIP_MLP, 7);
    write_file(&d, SKIP_MLP, PN_FORMAT_MODEL, NULL, NULL, NULL);
    pn_model *m = load_ok();
    float small[2 * 4], out[7 * 4];
    const void *inputs[2] = {d.inputs[0], d.inputs[1]};
    ck_assert_int_eq(pn_model_forward(m, 2, inputs, NULL, small), 0);
    int rc = pn_model_forward(m, 7, inputs, NULL, out);
    ck_assert_msg(rc == 0, "%s", pn_model_error());
    ck_assert_int_eq(memcmp(out, direct_output(&d, "out"), sizeof out), 0);
    for (int k = 0; k < 2 * 4; k++) ck_assert(tu_close(small[k], out[k], 1e-5, 1e-6));
    ck_assert_int_eq(pn_model_loss(m, NULL, NULL), 2 + 7);
    ck_assert_int_eq(pn_model_forward(m, 0, inputs, NULL, out), 0);
    pn_model_free(m);
    direct_free(&d);
}
END_TEST

START_TEST(a_snapshot_loads_as_a_model)
{
    direct d;
    direct_init(&d, SKIP_MLP, 4);
    write_file(&d, SKIP_MLP, PN_FORMAT_SNAPSHOT, NULL, NULL, NULL);
    pn_model *m = load_ok();
    float out[4 * 4];
    const void *inputs[2] = {d.inputs[0], NULL};
    ck_assert_int_eq(pn_model_forward(m, 4, inputs, NULL, out), 0);
    ck_assert_int_eq(memcmp(out, direct_output(&d, "out"), sizeof out), 0);
    pn_model_free(m);
    direct_free(&d);
}
END_TEST

/* pn_model_load_on: cpu and auto (without a GPU) are pn_model_load's bits; on a GPU
 * (cuda, and auto where one is visible) the outputs agree to float rounding; cuda
 * without CUDA or a GPU, a GPU that is not there and a bad name fail saying so. A
 * build with CUDA must load its module (the GPU comes through it). */
START_TEST(a_model_loads_onto_the_device_named)
{
    direct d;
    direct_init(&d, SKIP_MLP, 6);
    write_file(&d, SKIP_MLP, PN_FORMAT_MODEL, NULL, NULL, NULL);
    const float *want = direct_output(&d, "out");
    const void *inputs[2] = {d.inputs[0], d.inputs[1]};
    const pn_cuda_module *module;
    if (pn_cuda_module_built())
        ck_assert_msg(pn_cuda_module_get(&module) == 0, "%s", pn_error_message());
    bool gpu = pn_cuda_available();
    /* every name of the table of device requests, then cuda:0 */
    for (int k = 0; k <= pn_device_requests.n; k++) {
        bool indexed = k == pn_device_requests.n;
        const char *name = indexed ? "cuda:0" : pn_device_request_name((pn_device_request)k);
        int request = indexed ? PN_DEVICE_REQUEST_CUDA : k;
        pn_model *m = (pn_model *)1;
        int rc = pn_model_load_on(&m, path, name);
        bool on_gpu = request == PN_DEVICE_REQUEST_CUDA ||
                      (request == PN_DEVICE_REQUEST_AUTO && gpu);
        if (on_gpu && !gpu) {
            ck_assert_int_lt(rc, 0);
            ck_assert_ptr_null(m);
            ck_assert_msg(strstr(pn_model_error(), "device cuda: "), "%s", pn_model_error());
            continue;
        }
        ck_assert_msg(rc == 0, "%s: %s", name, pn_model_error());
        ck_assert_str_eq(pn_model_device(m), on_gpu ? "cuda:0" : "cpu");
        float out[6 * 4];
        rc = pn_model_forward(m, 6, inputs, NULL, out);
        ck_assert_msg(rc == 0, "%s: %s", name, pn_model_error());
        if (!on_gpu) ck_assert_int_eq(memcmp(out, want, sizeof out), 0);
        for (int i = 0; i < 6 * 4; i++)
            ck_assert_msg(fabsf(out[i] - want[i]) <= 1e-5f * (1.0f + fabsf(want[i])),
                          "%s: output %d is %g, the host's %g", name, i, out[i], want[i]);
        double loss;
        ck_assert_int_eq(pn_model_loss(m, &loss, NULL), 6);
        pn_model_free(m);
    }
    pn_model *m = (pn_model *)1;
    ck_assert_int_lt(pn_model_load_on(&m, path, "gpu"), 0);
    ck_assert_ptr_null(m);
    char list[128], refusal[192];
    snprintf(refusal, sizeof refusal, "device 'gpu': expected %s, or cuda:N",
             pn_choice_list(&pn_device_requests, list, sizeof list));
    ck_assert_msg(strstr(pn_model_error(), refusal), "%s", pn_model_error());
    ck_assert_int_lt(pn_model_load_on(&m, path, "cuda:15"), 0);
    ck_assert_msg(strstr(pn_model_error(), gpu ? "no such GPU" : "device cuda: "), "%s",
                  pn_model_error());
    direct_free(&d);
}
END_TEST

START_TEST(errors_name_the_file_the_parameter_and_the_input)
{
    pn_model *m = (pn_model *)1;
    snprintf(path, sizeof path, "%s/none.h5", dir);
    ck_assert_int_lt(pn_model_load(&m, path), 0);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(pn_model_error(), "none.h5"), "%s", pn_model_error());
    snprintf(path, sizeof path, "%s/model.h5", dir);

    direct d;
    direct_init(&d, SKIP_MLP, 2);
    write_file(&d, SKIP_MLP, PN_FORMAT_MODEL, "h2/b", NULL, NULL);
    assert_load_fails("parameter 'h2/b'");
    write_file(&d, SKIP_MLP, PN_FORMAT_MODEL, NULL, "h1/w", NULL);
    assert_load_fails("parameter 'h1/w' is 6x5 in the file");
    write_file(&d, SKIP_MLP, PN_FORMAT_MODEL, NULL, NULL, "ghost/w");
    assert_load_fails("parameter 'ghost/w' belongs to no layer");
    write_file(&d, "{\"inputs\": ", PN_FORMAT_MODEL, NULL, NULL, NULL);
    assert_load_fails("invalid JSON");

    write_file(&d, SKIP_MLP, PN_FORMAT_MODEL, NULL, NULL, NULL);
    m = load_ok();
    float out[2 * 4];
    const void *none[2] = {NULL, d.inputs[1]};
    ck_assert_int_lt(pn_model_forward(m, 2, none, NULL, out), 0);
    ck_assert_msg(strstr(pn_model_error(), "needs input 'x'"), "%s", pn_model_error());
    const void *features_only[2] = {d.inputs[0], NULL};
    ck_assert_int_lt(pn_model_forward(m, 2, features_only, "loss", out), 0);
    ck_assert_msg(strstr(pn_model_error(), "output 'loss' needs input 'y'"), "%s",
                  pn_model_error());
    ck_assert_int_lt(pn_model_forward(m, 2, features_only, "nope", out), 0);
    ck_assert_msg(strstr(pn_model_error(), "no layer or input 'nope'"), "%s", pn_model_error());
    int bad_labels[2] = {0, 9};
    const void *with_bad_labels[2] = {d.inputs[0], bad_labels};
    ck_assert_int_lt(pn_model_forward(m, 2, with_bad_labels, NULL, out), 0);
    ck_assert_msg(strstr(pn_model_error(), "outside [0, 4)"), "%s", pn_model_error());
    pn_model_free(m);
    direct_free(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, forward_matches_the_network_bit_for_bit);
    tcase_add_test(tc, sequence_model_predicts_from_tokens_alone);
    tcase_add_test(tc, padded_sequences_take_their_lengths);
    tcase_add_test(tc, sparse_inputs_take_csr_rows);
    tcase_add_test(tc, inputs_and_outputs_are_described);
    tcase_add_test(tc, a_larger_batch_replans);
    tcase_add_test(tc, a_snapshot_loads_as_a_model);
    tcase_add_test(tc, a_model_loads_onto_the_device_named);
    tcase_add_test(tc, errors_name_the_file_the_parameter_and_the_input);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
