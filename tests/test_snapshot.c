/* Snapshot and model files: bit-identical round trips (counters, a seed above 2^32,
 * config text, slots, parameters sorted by name); refusal of a wrong format, a
 * missing slot, a truncated file, a flipped bit in a dataset (fletcher32) or in a
 * large config text (CRC-32), each naming the file. Snapshot directories are
 * test_snapshot_dir.c's. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/names.h"
#include "io/hdf5_util.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_file.h"
#include "state_fixture.h"

static char dir[PATH_MAX];

static void setup(void) { tu_make_temp_dir(dir, sizeof dir, "snapshot"); }

static void teardown(void) { tu_remove_tree(dir); }

/* Asserts that reading path fails with code and a message holding every word. */
static void assert_refused(const char *path, const char *expect, int code, const char *word1,
                           const char *word2)
{
    pn_train_state *st = NULL;
    pn_error_clear();
    int rc = pn_snapshot_read(path, expect, &st);
    const char *msg = pn_error_message();
    ck_assert_msg(rc == code, "read of %s returned %d, expected %d (%s)", path, rc, code, msg);
    ck_assert_ptr_null(st);
    ck_assert_msg(strstr(msg, path), "message lacks the file: %s", msg);
    ck_assert_msg(!word1 || strstr(msg, word1), "message lacks '%s': %s", word1, msg);
    ck_assert_msg(!word2 || strstr(msg, word2), "message lacks '%s': %s", word2, msg);
}

START_TEST(snapshot_round_trip_is_bit_identical)
{
    pn_train_state *st = sf_make_state(PN_FORMAT_SNAPSHOT, 9), *back;
    char path[PATH_MAX + 32], names[512];
    pn_snapshot_path(dir, st->step, path, sizeof path);
    ck_assert_msg(strstr(path, "/snapshot-0000000100.h5"), "path %s", path);
    sf_write_state(path, st);
    ck_assert_msg(pn_snapshot_read(path, PN_FORMAT_SNAPSHOT, &back) == 0, "%s",
                  pn_error_message());
    sf_assert_same_state(back, st);
    ck_assert_str_eq(back->params[0].name, "emb/table");
    ck_assert_str_eq(back->params[1].name, "fc1/b");
    ck_assert_int_eq(back->params[1].rows, 1);
    ck_assert_str_eq(back->params[2].name, "fc1/w");
    pn_train_state_free(back);
    ck_assert_msg(pn_snapshot_read(path, NULL, &back) == 0, "%s", pn_error_message());
    pn_train_state_free(back);
    ck_assert_msg(pn_snapshot_read_header(path, PN_FORMAT_SNAPSHOT, &back) == 0, "%s",
                  pn_error_message()); /* what a resume checks first: no parameters */
    ck_assert_int_eq(back->n_params, 0);
    ck_assert_int_eq(back->step, st->step);
    ck_assert_int_eq(back->batch, st->batch);
    ck_assert_msg(back->seed == st->seed, "seed %llu", (unsigned long long)back->seed);
    ck_assert_str_eq(back->config, st->config);
    pn_train_state_free(back);
    ck_assert_int_eq(tu_list_dir(dir, names, sizeof names), 0);
    ck_assert_str_eq(names, "snapshot-0000000100.h5\n");
    pn_train_state_free(st);
}
END_TEST

START_TEST(model_round_trip_has_no_slots)
{
    pn_train_state *st = sf_make_state(PN_FORMAT_MODEL, 4), *back;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/model.h5", dir);
    sf_write_state(path, st);
    ck_assert_msg(pn_snapshot_read(path, PN_FORMAT_MODEL, &back) == 0, "%s", pn_error_message());
    sf_assert_same_state(back, st);
    pn_train_state_free(back);
    pn_train_state_free(st);
}
END_TEST

START_TEST(parameters_sort_by_full_name)
{
    pn_train_state *st, *back;
    ck_assert_int_eq(pn_train_state_create(&st, PN_FORMAT_MODEL), 0);
    sf_add_param(st, 0, "fc/w", 2, 2);
    sf_add_param(st, 1, "fc1/b", 1, 2);
    sf_add_param(st, 2, "fc-x/w", 2, 1);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/order.h5", dir);
    sf_write_state(path, st);
    ck_assert_msg(pn_snapshot_read(path, NULL, &back) == 0, "%s", pn_error_message());
    ck_assert_int_eq(back->n_params, 3);
    ck_assert_str_eq(back->params[0].name, "fc-x/w");
    ck_assert_str_eq(back->params[1].name, "fc/w");
    ck_assert_str_eq(back->params[2].name, "fc1/b");
    ck_assert_str_eq(back->config, "");
    pn_train_state_free(back);
    pn_train_state_free(st);
}
END_TEST

START_TEST(state_refuses_bad_names_and_shapes)
{
    pn_train_state *st;
    float v[4] = {0};
    ck_assert_int_eq(pn_train_state_create(&st, PN_FORMAT_SNAPSHOT), 0);
    ck_assert_int_lt(pn_train_state_create(&(pn_train_state *){NULL}, "pipenet-other"), 0);
    const char *bad_slots[2] = {"m", "a,b"};
    ck_assert_int_eq(pn_train_state_set_slots(st, 2, bad_slots), PN_ERR_INVALID);
    ck_assert_int_eq(pn_train_state_add(st, "noslash", 1, 4, v, NULL), PN_ERR_INVALID);
    ck_assert_int_eq(pn_train_state_add(st, "a/b/c", 1, 4, v, NULL), PN_ERR_INVALID);
    ck_assert_int_eq(pn_train_state_add(st, "../w", 1, 4, v, NULL), PN_ERR_INVALID);
    ck_assert_int_eq(pn_train_state_add(st, "l/w", 0, 4, v, NULL), PN_ERR_INVALID);
    ck_assert_int_eq(pn_train_state_add(st, "l/w", 2, 2, v, NULL), 0);
    ck_assert_int_eq(pn_train_state_add(st, "l/w", 2, 2, v, NULL), PN_ERR_INVALID);
    ck_assert_msg(strstr(pn_error_message(), "'l/w' added twice"), "%s", pn_error_message());
    pn_train_state_free(st);
}
END_TEST

/* The longest names a state accepts (a layer of PN_NAME_MAX bytes, a parameter and
 * slots of PN_SUFFIX_MAX) go through a file whole; one byte more is refused. */
START_TEST(longest_names_round_trip)
{
    char layer[PN_NAME_MAX + 2], name[PN_PARAM_NAME_MAX + 2], path[PATH_MAX + 32];
    const char *slots[2] = {"slot_of_15bytes", "other_15_bytes_"};
    memset(layer, 'l', PN_NAME_MAX + 1);
    layer[PN_NAME_MAX + 1] = '\0';
    pn_train_state *st, *back;
    ck_assert_int_eq(pn_train_state_create(&st, PN_FORMAT_SNAPSHOT), 0);
    const char *long_slot[1] = {"a_sixteen_bytes_"};
    ck_assert_int_eq(pn_train_state_set_slots(st, 1, long_slot), PN_ERR_INVALID);
    ck_assert_int_eq(pn_train_state_set_slots(st, 2, slots), 0);
    ck_assert_int_eq(pn_train_state_set_config(st, sf_config_text), 0);
    float v[2] = {1, 2};
    const float *sv[2] = {v, v};
    snprintf(name, sizeof name, "%s/w", layer); /* a layer name one byte too long */
    ck_assert_int_eq(pn_train_state_add(st, name, 1, 2, v, sv), PN_ERR_INVALID);
    snprintf(name, sizeof name, "%s/param_of_15byte", layer + 1);
    ck_assert_int_eq(strlen(name), PN_PARAM_NAME_MAX);
    ck_assert_msg(pn_train_state_add(st, name, 1, 2, v, sv) == 0, "%s", pn_error_message());
    snprintf(path, sizeof path, "%s/long.h5", dir);
    sf_write_state(path, st);
    ck_assert_msg(pn_snapshot_read(path, PN_FORMAT_SNAPSHOT, &back) == 0, "%s",
                  pn_error_message());
    sf_assert_same_state(back, st);
    pn_train_state_free(back);
    pn_train_state_free(st);
}
END_TEST

START_TEST(wrong_format_and_missing_pieces_are_refused)
{
    char model[PATH_MAX + 32], snap[PATH_MAX + 32], plain[PATH_MAX + 32];
    snprintf(model, sizeof model, "%s/model.h5", dir);
    snprintf(snap, sizeof snap, "%s/snap.h5", dir);
    snprintf(plain, sizeof plain, "%s/data.h5", dir);
    pn_train_state *m = sf_make_state(PN_FORMAT_MODEL, 3), *s = sf_make_state(PN_FORMAT_SNAPSHOT, 3);
    sf_write_state(model, m);
    sf_write_state(snap, s);
    assert_refused(model, PN_FORMAT_SNAPSHOT, PN_ERR_INVALID,
                   ": is a pipenet-model, expected a pipenet-snapshot", NULL);
    assert_refused(snap, PN_FORMAT_MODEL, PN_ERR_INVALID,
                   ": is a pipenet-snapshot, expected a pipenet-model", NULL);

    hid_t file;
    hsize_t n = 4;
    int labels[4] = {0, 1, 2, 3};
    ck_assert_int_eq(pn_hdf5_create_file(plain, false, &file), 0);
    ck_assert_int_eq(pn_hdf5_write_dataset(file, plain, "labels", PN_HDF5_INT32, 1, &n, 4, labels),
                     0);
    ck_assert_int_eq(pn_hdf5_close(file, plain), 0);
    assert_refused(plain, NULL, PN_ERR_INVALID, "not a pipenet file (no 'format' attribute)",
                   NULL);

    /* A slot dataset removed, then the version raised. */
    pn_hdf5_lock();
    file = H5Fopen(snap, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert(file >= 0 && H5Ldelete(file, "/optimizer/fc1/b/adam_v", H5P_DEFAULT) >= 0);
    pn_hdf5_unlock();
    ck_assert_int_eq(pn_hdf5_close(file, snap), 0);
    assert_refused(snap, NULL, PN_ERR_INVALID, "'/optimizer/fc1/b/adam_v'",
                   "slot 'adam_v' of parameter 'fc1/b'");
    pn_hdf5_lock();
    file = H5Fopen(model, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert(file >= 0);
    pn_hdf5_unlock();
    ck_assert_int_eq(pn_hdf5_write_attr_int(file, model, "version", 2), 0);
    ck_assert_int_eq(pn_hdf5_close(file, model), 0);
    assert_refused(model, NULL, PN_ERR_INVALID, "version 2", NULL);
    pn_train_state_free(m);
    pn_train_state_free(s);
}
END_TEST

START_TEST(truncated_file_is_refused)
{
    pn_train_state *st = sf_make_state(PN_FORMAT_SNAPSHOT, 3000);
    char path[PATH_MAX + 32];
    pn_snapshot_path(dir, 100, path, sizeof path);
    sf_write_state(path, st);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_gt(sb.st_size, 3 * 3000 * 37 * 4);
    ck_assert_int_eq(truncate(path, sb.st_size / 2), 0);
    assert_refused(path, PN_FORMAT_SNAPSHOT, PN_ERR_IO, NULL, NULL);
    pn_train_state_free(st);
}
END_TEST

START_TEST(flipped_bit_fails_the_checksum)
{
    pn_train_state *st = sf_make_state(PN_FORMAT_SNAPSHOT, 64);
    char path[PATH_MAX + 32];
    pn_snapshot_path(dir, 100, path, sizeof path);
    sf_write_state(path, st);
    sf_flip_chunk_bit(path, "/params/fc1/w");
    assert_refused(path, PN_FORMAT_SNAPSHOT, PN_ERR_IO, "dataset '/params/fc1/w'",
                   "checksum mismatch");

    sf_write_state(path, st);
    sf_flip_chunk_bit(path, "/optimizer/emb/table/adam_m");
    assert_refused(path, NULL, PN_ERR_IO, "dataset '/optimizer/emb/table/adam_m'", "checksum");
    pn_train_state_free(st);
}
END_TEST

START_TEST(config_text_is_checksummed)
{
    enum { LEN = 100000 }; /* past HDF5's 64 KiB object header messages */
    pn_train_state *st = sf_make_state(PN_FORMAT_MODEL, 2);
    char *config = malloc(LEN + 1), path[PATH_MAX + 32];
    ck_assert_ptr_nonnull(config);
    for (int k = 0; k < LEN; k++) config[k] = "{\"name\": \"big\"} 0123456789"[k % 26];
    config[LEN] = '\0';
    ck_assert_int_eq(pn_train_state_set_config(st, config), 0);
    snprintf(path, sizeof path, "%s/model.h5", dir);
    sf_write_state(path, st);
    pn_train_state *back;
    ck_assert_msg(pn_snapshot_read(path, NULL, &back) == 0, "%s", pn_error_message());
    ck_assert_str_eq(back->config, config);
    pn_train_state_free(back);

    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    static char bytes[1 << 20];
    size_t n = fread(bytes, 1, sizeof bytes, f);
    char *at = memmem(bytes, n, config, 1000);
    ck_assert_ptr_nonnull(at);
    long offset = (long)(at - bytes) + LEN / 2;
    ck_assert_int_eq(fseek(f, offset, SEEK_SET), 0);
    ck_assert_int_eq(fputc(bytes[offset] ^ 0x01, f), bytes[offset] ^ 0x01);
    fclose(f);
    assert_refused(path, NULL, PN_ERR_IO, "attribute 'config': checksum mismatch", NULL);
    free(config);
    pn_train_state_free(st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("snapshot");
    TCase *tc = tcase_create("snapshot");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, snapshot_round_trip_is_bit_identical);
    tcase_add_test(tc, model_round_trip_has_no_slots);
    tcase_add_test(tc, parameters_sort_by_full_name);
    tcase_add_test(tc, state_refuses_bad_names_and_shapes);
    tcase_add_test(tc, longest_names_round_trip);
    tcase_add_test(tc, wrong_format_and_missing_pieces_are_refused);
    tcase_add_test(tc, truncated_file_is_refused);
    tcase_add_test(tc, flipped_bit_fails_the_checksum);
    tcase_add_test(tc, config_text_is_checksummed);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
