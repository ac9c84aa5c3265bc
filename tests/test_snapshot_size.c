/* The size a snapshot or model file will take (io/snapshot_size.h) against the files
 * written: never less (the writer reserves it, and a full disk must be found before
 * a byte is written), and at most 8 KiB + 5% more, for the models of models/ and
 * tests/lm_fixture.sh, 1 to 130 layers, both formats, and arrays of many chunks with
 * a partial edge chunk (which HDF5 stores whole). Also the start-time check of a
 * snapshot directory's free space (io/snapshot_dir.h). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_size.h"
#include "state_fixture.h"

static char dir[PATH_MAX];

static void setup(void) { tu_make_temp_dir(dir, sizeof dir, "snapshot_size"); }

static void teardown(void) { tu_remove_tree(dir); }

typedef struct shape {
    const char *name;
    int rows, cols;
} shape;

/* models/fashion_mlp.json */
static const shape fashion_mlp[] = {{"fc1/w", 784, 1024}, {"fc1/b", 1, 1024},
                                    {"fc2/w", 1024, 1024}, {"fc2/b", 1, 1024},
                                    {"out/w", 1024, 10}, {"out/b", 1, 10}, {NULL, 0, 0}};
/* tests/test_resume.sh's small model: a 48 KB snapshot without slots */
static const shape small_mlp[] = {{"h/w", 784, 16}, {"h/b", 1, 16}, {"out/w", 16, 10},
                                  {"out/b", 1, 10}, {NULL, 0, 0}};
/* tests/lm_fixture.sh's tiny GPT, vocabulary 256 */
static const shape tiny_gpt[] = {
    {"attn_0/out_b", 1, 16}, {"attn_0/out_w", 16, 16}, {"attn_0/qkv_b", 1, 48},
    {"attn_0/qkv_w", 16, 48}, {"attn_1/out_b", 1, 16}, {"attn_1/out_w", 16, 16},
    {"attn_1/qkv_b", 1, 48}, {"attn_1/qkv_w", 16, 48}, {"embed/pos", 16, 16},
    {"embed/table", 256, 16}, {"ln1_0/beta", 1, 16}, {"ln1_0/gamma", 1, 16},
    {"ln1_1/beta", 1, 16}, {"ln1_1/gamma", 1, 16}, {"ln2_0/beta", 1, 16},
    {"ln2_0/gamma", 1, 16}, {"ln2_1/beta", 1, 16}, {"ln2_1/gamma", 1, 16},
    {"ln_f/beta", 1, 16}, {"ln_f/gamma", 1, 16}, {"logits/b", 1, 256}, {"logits/w", 16, 256},
    {"mlp1_0/b", 1, 32}, {"mlp1_0/w", 16, 32}, {"mlp1_1/b", 1, 32}, {"mlp1_1/w", 16, 32},
    {"mlp2_0/b", 1, 16}, {"mlp2_0/w", 32, 16}, {"mlp2_1/b", 1, 16}, {"mlp2_1/w", 32, 16},
    {NULL, 0, 0}};
/* several chunks each, the last one partial: 6 chunks of 32 x 7130 for 187 rows */
static const shape chunky[] = {{"wide/w", 187, 7130}, {"long/b", 1, 700001}, {NULL, 0, 0}};

static pn_train_state *state_of(const shape *shapes, int slots)
{
    pn_train_state *st;
    ck_assert_int_eq(pn_train_state_create(&st, PN_FORMAT_SNAPSHOT), 0);
    ck_assert_int_eq(pn_train_state_set_slots(st, slots, sf_slot_names), 0);
    ck_assert_int_eq(pn_train_state_set_config(st, sf_config_text), 0);
    for (int i = 0; shapes[i].name; i++)
        sf_add_param(st, i, shapes[i].name, shapes[i].rows, shapes[i].cols);
    return st;
}

/* layers layers "block<i>_<kind>" of 1 to 4 parameters, a few hundred floats each */
static pn_train_state *many_layers(int layers, int slots)
{
    static const char *const suffixes[] = {"w", "b", "gamma", "qkv_w"};
    pn_train_state *st = state_of((const shape[]){{NULL, 0, 0}}, slots);
    for (int l = 0, p = 0; l < layers; l++)
        for (int k = 0; k <= l % 4; k++, p++) {
            char name[64];
            snprintf(name, sizeof name, "block%d_%s/%s", l, l % 3 ? "mlp" : "attention",
                     suffixes[k]);
            sf_add_param(st, p, name, k % 2 ? 1 : 1 + l % 24, 16 + 8 * (p % 5));
        }
    return st;
}

/* Writes st (as a snapshot, or a model file) and checks the estimate against the
 * file: returns bytes over. */
static long check_estimate(pn_train_state *st, bool snapshot, const char *what)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/file.h5", dir);
    uint64_t estimate;
    ck_assert_msg(pn_snapshot_state_bytes(st, snapshot, &estimate) == 0, "%s", pn_error_message());
    ck_assert_msg(pn_snapshot_write(path, st, snapshot ? NULL : PN_FORMAT_MODEL) == 0, "%s: %s",
                  what, pn_error_message());
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    long over = (long)estimate - (long)sb.st_size;
    printf("%-34s %10lld bytes, estimate %10llu: %+6ld (%.2f%%)\n", what, (long long)sb.st_size,
           (unsigned long long)estimate, over, 100.0 * (double)over / (double)sb.st_size);
    ck_assert_msg(over >= 0, "%s: %lld bytes written, %llu estimated", what,
                  (long long)sb.st_size, (unsigned long long)estimate);
    ck_assert_msg(over <= 8192 + sb.st_size / 20, "%s: %lld bytes written, %llu estimated", what,
                  (long long)sb.st_size, (unsigned long long)estimate);
    pn_train_state_free(st);
    return over;
}

START_TEST(the_estimate_covers_the_file_closely)
{
    check_estimate(state_of(fashion_mlp, 2), true, "fashion_mlp, adam");
    check_estimate(state_of(fashion_mlp, 0), false, "fashion_mlp, model file");
    check_estimate(state_of(small_mlp, 0), true, "small mlp, sgd");
    check_estimate(state_of(small_mlp, 2), true, "small mlp, adam");
    check_estimate(state_of(tiny_gpt, 2), true, "tiny gpt, adam");
    check_estimate(state_of(tiny_gpt, 1), true, "tiny gpt, momentum");
    check_estimate(state_of(tiny_gpt, 0), false, "tiny gpt, model file");
    check_estimate(state_of(chunky, 2), true, "many chunks, edge chunks");
    static const int layers[] = {1, 8, 9, 41, 130};
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
        char what[64];
        snprintf(what, sizeof what, "%d layers, adam", layers[i]);
        check_estimate(many_layers(layers[i], 2), true, what);
        snprintf(what, sizeof what, "%d layers, model file", layers[i]);
        check_estimate(many_layers(layers[i], 0), false, what);
    }
}
END_TEST

START_TEST(a_directory_without_room_is_named_with_both_sizes)
{
    ck_assert_msg(pn_snapshot_dir_check_room(dir, 1000) == 0, "%s", pn_error_message());
    uint64_t huge = (uint64_t)1 << 62; /* more than any file system */
    ck_assert_int_eq(pn_snapshot_dir_check_room(dir, huge), PN_ERR_IO);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "snapshot directory '%s' has ", dir);
    ck_assert_msg(strstr(pn_error_message(), want), "%s", pn_error_message());
    ck_assert_msg(strstr(pn_error_message(), "one snapshot of this model takes "
                                             "4611686018427387904"),
                  "%s", pn_error_message());
}
END_TEST

int main(void)
{
    Suite *s = suite_create("snapshot_size");
    TCase *tc = tcase_create("snapshot_size");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, the_estimate_covers_the_file_closely);
    tcase_add_test(tc, a_directory_without_room_is_named_with_both_sizes);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
