/* Snapshot and model files: bit-identical round trips (counters, a seed above 2^32,
 * config text, slots, parameters sorted by name); refusal of a wrong format, a
 * missing slot, a truncated file, a flipped bit in a dataset (fletcher32) or in a
 * large config text (CRC-32), each naming the file; the newest good snapshot found
 * past corrupt ones and temporaries; pruning; and a writer killed mid-write leaving
 * the previous snapshot intact. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/names.h"
#include "io/hdf5_util.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_file.h"
#include "testutil.h"

static char dir[PATH_MAX];

static const char *const slot_names[2] = {"adam_m", "adam_v"};
static const char config_text[] =
    "{\"name\": \"tiny\", \"layers\": [{\"name\": \"fc1\", \"type\": \"fc\"}],\n"
    " \"note\": \"caf\xc3\xa9\"}\n";
static const uint64_t big_seed = 0xfedcba9876543210ull; /* above 2^32 and 2^63 */

static void setup(void)
{
    tu_make_temp_dir(dir, sizeof dir, "snapshot");
}

static void teardown(void) { tu_remove_tree(dir); }

/* Value k of parameter p, slot s (-1: the value): awkward floats included. */
static float value_at(int p, int s, size_t k)
{
    switch (k % 7) {
    case 0: return -0.0f;
    case 1: return FLT_MIN / 4; /* subnormal */
    case 2: return (float)p + (float)(s + 1) / 3.0f + (float)k * 1e-3f;
    case 3: return -FLT_MAX;
    case 4: return (float)(k * 7919 % 1000) / 997.0f - 0.5f;
    case 5: return INFINITY;
    default: return 1.0f / (float)(k + 3);
    }
}

static float *make_values(int p, int s, size_t n)
{
    float *v = malloc(n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t k = 0; k < n; k++) v[k] = value_at(p, s, k);
    return v;
}

/* Adds parameter name (index p) of rows x cols with values and, when the state has
 * slots, slot values. */
static void add_param(pn_train_state *st, int p, const char *name, int rows, int cols)
{
    size_t n = (size_t)rows * (size_t)cols;
    float *value = make_values(p, -1, n), *slots[2] = {NULL, NULL};
    for (int s = 0; s < st->n_slot_names; s++) slots[s] = make_values(p, s, n);
    ck_assert_msg(pn_train_state_add(st, name, rows, cols, value,
                                     st->n_slot_names ? (const float *const *)slots : NULL) == 0,
                  "%s", pn_error_message());
    free(value);
    for (int s = 0; s < 2; s++) free(slots[s]);
}

/* Three parameters (added unsorted; one a 1 x n bias), counters, seed, config and,
 * for a snapshot, two slots; w_rows sets the size of fc1/w. */
static pn_train_state *make_state(const char *format, int w_rows)
{
    pn_train_state *st;
    ck_assert_int_eq(pn_train_state_create(&st, format), 0);
    if (!strcmp(format, PN_FORMAT_SNAPSHOT))
        ck_assert_int_eq(pn_train_state_set_slots(st, 2, slot_names), 0);
    ck_assert_int_eq(pn_train_state_set_config(st, config_text), 0);
    st->step = 100;
    st->epoch = 3;
    st->batch_index = 17;
    st->seed = big_seed;
    st->batch = 96;
    add_param(st, 0, "fc1/w", w_rows, 37);
    add_param(st, 1, "fc1/b", 1, 37);
    add_param(st, 2, "emb/table", 11, 5);
    return st;
}

static void assert_same_floats(const float *a, const float *b, size_t n, const char *what)
{
    for (size_t k = 0; k < n; k++)
        ck_assert_msg(!memcmp(&a[k], &b[k], sizeof *a), "%s[%zu]: %a != %a", what, k, a[k], b[k]);
}

/* got equals want, with got's parameters in sorted order. */
static void assert_same_state(const pn_train_state *got, const pn_train_state *want)
{
    ck_assert_str_eq(got->format, want->format);
    ck_assert_int_eq(got->step, want->step);
    ck_assert_int_eq(got->epoch, want->epoch);
    ck_assert_int_eq(got->batch_index, want->batch_index);
    ck_assert_msg(got->seed == want->seed, "seed %llu", (unsigned long long)got->seed);
    ck_assert_int_eq(got->batch, want->batch);
    ck_assert_str_eq(got->config, want->config);
    ck_assert_int_eq(got->n_slot_names, want->n_slot_names);
    for (int s = 0; s < want->n_slot_names; s++)
        ck_assert_str_eq(got->slot_names[s], want->slot_names[s]);
    ck_assert_int_eq(got->n_params, want->n_params);
    for (int i = 0; i < got->n_params; i++) {
        const pn_state_param *g = &got->params[i];
        if (i) ck_assert_msg(strcmp(got->params[i - 1].name, g->name) < 0, "order: %s, %s",
                             got->params[i - 1].name, g->name);
        const pn_state_param *w = pn_train_state_find(want, g->name);
        ck_assert_msg(w != NULL, "unexpected parameter %s", g->name);
        ck_assert_int_eq(g->rows, w->rows);
        ck_assert_int_eq(g->cols, w->cols);
        size_t n = (size_t)g->rows * (size_t)g->cols;
        assert_same_floats(g->value, w->value, n, g->name);
        if (!want->n_slot_names) ck_assert_ptr_null(g->slots[0]);
        for (int s = 0; s < want->n_slot_names; s++)
            assert_same_floats(g->slots[s], w->slots[s], n, want->slot_names[s]);
    }
}

/* The names in dir, sorted, one per line. */
static void list_dir(char *out, size_t cap)
{
    struct dirent **entries;
    int n = scandir(dir, &entries, NULL, alphasort);
    ck_assert_int_ge(n, 0);
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (entries[i]->d_name[0] != '.')
            len += (size_t)snprintf(out + len, cap - len, "%s\n", entries[i]->d_name);
        free(entries[i]);
    }
    free(entries);
}

static void write_state(const char *path, const pn_train_state *st)
{
    ck_assert_msg(pn_snapshot_write(path, st, NULL) == 0, "%s", pn_error_message());
}

/* Flips one bit in the middle of the first chunk of dataset name of path. */
static void flip_chunk_bit(const char *path, const char *name)
{
    hid_t file;
    ck_assert_int_eq(pn_hdf5_open_file(path, H5P_DEFAULT, &file), 0);
    pn_hdf5_lock();
    hid_t dset = H5Dopen2(file, name, H5P_DEFAULT), space = H5Dget_space(dset);
    hsize_t offset[2], size = 0;
    haddr_t addr = HADDR_UNDEF;
    unsigned mask;
    ck_assert(dset >= 0 && space >= 0);
    ck_assert(H5Dget_chunk_info(dset, space, 0, offset, &mask, &addr, &size) >= 0);
    H5Sclose(space);
    H5Dclose(dset);
    pn_hdf5_unlock();
    ck_assert_int_eq(pn_hdf5_close(file, path), 0);
    ck_assert(addr != HADDR_UNDEF && size > 8);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    unsigned char byte;
    off_t at = (off_t)(addr + size / 2);
    ck_assert_int_eq(pread(fd, &byte, 1, at), 1);
    byte ^= 0x10;
    ck_assert_int_eq(pwrite(fd, &byte, 1, at), 1);
    close(fd);
}

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

/* The pid of a process that has exited (and been reaped). */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) _exit(0);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return pid;
}

static void touch(const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("half a snapshot", f);
    fclose(f);
}

START_TEST(snapshot_round_trip_is_bit_identical)
{
    pn_train_state *st = make_state(PN_FORMAT_SNAPSHOT, 9), *back;
    char path[PATH_MAX + 32], names[512];
    pn_snapshot_path(dir, st->step, path, sizeof path);
    ck_assert_msg(strstr(path, "/snapshot-0000000100.h5"), "path %s", path);
    write_state(path, st);
    ck_assert_msg(pn_snapshot_read(path, PN_FORMAT_SNAPSHOT, &back) == 0, "%s",
                  pn_error_message());
    assert_same_state(back, st);
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
    list_dir(names, sizeof names);
    ck_assert_str_eq(names, "snapshot-0000000100.h5\n");
    pn_train_state_free(st);
}
END_TEST

START_TEST(model_round_trip_has_no_slots)
{
    pn_train_state *st = make_state(PN_FORMAT_MODEL, 4), *back;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/model.h5", dir);
    write_state(path, st);
    ck_assert_msg(pn_snapshot_read(path, PN_FORMAT_MODEL, &back) == 0, "%s", pn_error_message());
    assert_same_state(back, st);
    pn_train_state_free(back);
    pn_train_state_free(st);
}
END_TEST

START_TEST(parameters_sort_by_full_name)
{
    pn_train_state *st, *back;
    ck_assert_int_eq(pn_train_state_create(&st, PN_FORMAT_MODEL), 0);
    add_param(st, 0, "fc/w", 2, 2);
    add_param(st, 1, "fc1/b", 1, 2);
    add_param(st, 2, "fc-x/w", 2, 1);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/order.h5", dir);
    write_state(path, st);
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
    ck_assert_int_eq(pn_train_state_set_config(st, config_text), 0);
    float v[2] = {1, 2};
    const float *sv[2] = {v, v};
    snprintf(name, sizeof name, "%s/w", layer); /* a layer name one byte too long */
    ck_assert_int_eq(pn_train_state_add(st, name, 1, 2, v, sv), PN_ERR_INVALID);
    snprintf(name, sizeof name, "%s/param_of_15byte", layer + 1);
    ck_assert_int_eq(strlen(name), PN_PARAM_NAME_MAX);
    ck_assert_msg(pn_train_state_add(st, name, 1, 2, v, sv) == 0, "%s", pn_error_message());
    snprintf(path, sizeof path, "%s/long.h5", dir);
    write_state(path, st);
    ck_assert_msg(pn_snapshot_read(path, PN_FORMAT_SNAPSHOT, &back) == 0, "%s",
                  pn_error_message());
    assert_same_state(back, st);
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
    pn_train_state *m = make_state(PN_FORMAT_MODEL, 3), *s = make_state(PN_FORMAT_SNAPSHOT, 3);
    write_state(model, m);
    write_state(snap, s);
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
    pn_train_state *st = make_state(PN_FORMAT_SNAPSHOT, 3000);
    char path[PATH_MAX + 32];
    pn_snapshot_path(dir, 100, path, sizeof path);
    write_state(path, st);
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
    pn_train_state *st = make_state(PN_FORMAT_SNAPSHOT, 64);
    char path[PATH_MAX + 32];
    pn_snapshot_path(dir, 100, path, sizeof path);
    write_state(path, st);
    flip_chunk_bit(path, "/params/fc1/w");
    assert_refused(path, PN_FORMAT_SNAPSHOT, PN_ERR_IO, "dataset '/params/fc1/w'",
                   "checksum mismatch");

    write_state(path, st);
    flip_chunk_bit(path, "/optimizer/emb/table/adam_m");
    assert_refused(path, NULL, PN_ERR_IO, "dataset '/optimizer/emb/table/adam_m'", "checksum");
    pn_train_state_free(st);
}
END_TEST

START_TEST(config_text_is_checksummed)
{
    enum { LEN = 100000 }; /* past HDF5's 64 KiB object header messages */
    pn_train_state *st = make_state(PN_FORMAT_MODEL, 2);
    char *config = malloc(LEN + 1), path[PATH_MAX + 32];
    ck_assert_ptr_nonnull(config);
    for (int k = 0; k < LEN; k++) config[k] = "{\"name\": \"big\"} 0123456789"[k % 26];
    config[LEN] = '\0';
    ck_assert_int_eq(pn_train_state_set_config(st, config), 0);
    snprintf(path, sizeof path, "%s/model.h5", dir);
    write_state(path, st);
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

START_TEST(latest_skips_corrupt_snapshots_and_temporaries)
{
    char path[PATH_MAX + 32], found[PATH_MAX + 32], tmp[64];
    pn_error_clear();
    ck_assert_int_lt(pn_snapshot_latest(dir, false, found, sizeof found), 0);
    ck_assert_msg(strstr(pn_error_message(), "no snapshots in ") &&
                      strstr(pn_error_message(), dir),
                  "%s", pn_error_message());
    strcpy(found, "x"); /* none_ok: a run that has written nothing yet */
    ck_assert_msg(pn_snapshot_latest(dir, true, found, sizeof found) == 0, "%s",
                  pn_error_message());
    ck_assert_str_eq(found, "");

    pn_train_state *st = make_state(PN_FORMAT_SNAPSHOT, 8);
    for (long step = 100; step <= 300; step += 100) {
        st->step = step;
        pn_snapshot_path(dir, step, path, sizeof path);
        write_state(path, st);
    }
    snprintf(tmp, sizeof tmp, "snapshot-0000000400.h5.tmp-%ld", (long)dead_pid());
    touch(tmp);
    touch("snapshot-500.h5");
    ck_assert_msg(pn_snapshot_latest(dir, false, found, sizeof found) == 0, "%s", pn_error_message());
    ck_assert_str_eq(found, path);

    flip_chunk_bit(path, "/params/fc1/b");
    ck_assert_msg(pn_snapshot_latest(dir, false, found, sizeof found) == 0, "%s", pn_error_message());
    pn_snapshot_path(dir, 200, path, sizeof path);
    ck_assert_str_eq(found, path);

    for (long step = 100; step <= 200; step += 100) {
        pn_snapshot_path(dir, step, path, sizeof path);
        ck_assert_int_eq(truncate(path, 1000), 0);
    }
    pn_error_clear();
    ck_assert_int_lt(pn_snapshot_latest(dir, true, found, sizeof found), 0); /* not none */
    const char *msg = pn_error_message();
    ck_assert_msg(strstr(msg, "(3 refused)") && strstr(msg, "snapshot-0000000300.h5") &&
                      strstr(msg, "snapshot-0000000200.h5") &&
                      strstr(msg, "snapshot-0000000100.h5") && strstr(msg, "checksum"),
                  "%s", msg);
    pn_train_state_free(st);
}
END_TEST

START_TEST(prune_keeps_the_newest)
{
    pn_train_state *st;
    char path[PATH_MAX + 32], names[1024], want[1024], tmp[64];
    float v = 1.0f;
    ck_assert_int_eq(pn_train_state_create(&st, PN_FORMAT_SNAPSHOT), 0);
    ck_assert_int_eq(pn_train_state_add(st, "l/w", 1, 1, &v, NULL), 0);
    for (long step = 10; step <= 50; step += 10) {
        st->step = step;
        pn_snapshot_path(dir, step, path, sizeof path);
        write_state(path, st);
    }
    long dead = (long)dead_pid();
    snprintf(tmp, sizeof tmp, "snapshot-0000000060.h5.tmp-%ld", dead);
    touch(tmp);
    snprintf(tmp, sizeof tmp, "snapshot-0000000070.h5.tmp-%ld", (long)getpid());
    touch(tmp);
    snprintf(tmp, sizeof tmp, "snapshot-0000000080.h5.tmp-%ld", (long)getppid());
    touch(tmp);
    touch("notes.txt");
    /* a run that just wrote step 30 (50 and 40 are not its own: kept, a warning) */
    ck_assert_msg(pn_snapshot_prune(dir, 2, 30) == 0, "%s", pn_error_message());
    list_dir(names, sizeof names);
    snprintf(want, sizeof want,
             "notes.txt\nsnapshot-0000000020.h5\nsnapshot-0000000030.h5\n"
             "snapshot-0000000040.h5\nsnapshot-0000000050.h5\n"
             "snapshot-0000000070.h5.tmp-%ld\nsnapshot-0000000080.h5.tmp-%ld\n",
             (long)getpid(), (long)getppid());
    ck_assert_str_eq(names, want);
    ck_assert_msg(pn_snapshot_prune(dir, 2, 50) == 0, "%s", pn_error_message());
    list_dir(names, sizeof names);
    snprintf(want, sizeof want,
             "notes.txt\nsnapshot-0000000040.h5\nsnapshot-0000000050.h5\n"
             "snapshot-0000000070.h5.tmp-%ld\nsnapshot-0000000080.h5.tmp-%ld\n",
             (long)getpid(), (long)getppid());
    ck_assert_str_eq(names, want);
    ck_assert_msg(pn_snapshot_prune(dir, 5, 50) == 0, "%s", pn_error_message());
    list_dir(names, sizeof names);
    ck_assert_str_eq(names, want);
    ck_assert_int_eq(pn_snapshot_prune(dir, -1, 50), PN_ERR_INVALID);
    pn_train_state_free(st);
}
END_TEST

/* A 48 MB state: one 2048 x 2048 parameter and two slots. */
static pn_train_state *big_state(void)
{
    pn_train_state *st;
    ck_assert_int_eq(pn_train_state_create(&st, PN_FORMAT_SNAPSHOT), 0);
    ck_assert_int_eq(pn_train_state_set_slots(st, 2, slot_names), 0);
    st->step = 200;
    add_param(st, 7, "big/w", 2048, 2048);
    return st;
}

static off_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

START_TEST(kill_during_write_keeps_the_previous_snapshot)
{
    pn_train_state *good = make_state(PN_FORMAT_SNAPSHOT, 20), *big = big_state(), *back;
    char path[PATH_MAX + 32], tmp[PATH_MAX + 64], found[PATH_MAX + 32];
    pn_snapshot_path(dir, 100, path, sizeof path);
    write_state(path, good);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) _exit(pn_snapshot_write(path, big, NULL) == 0 ? 0 : 1);
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)child);
    struct timespec pause = {0, 200 * 1000};
    off_t started = (off_t)1 << 20; /* bytes written by the child, in either file */
    for (int i = 0; i < 50000 && file_size(tmp) < started && file_size(path) < started; i++)
        nanosleep(&pause, NULL);
    ck_assert_int_eq(kill(child, SIGKILL), 0);
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "the writer finished before it was killed (status %d)", status);

    ck_assert_msg(pn_snapshot_read(path, PN_FORMAT_SNAPSHOT, &back) == 0, "%s",
                  pn_error_message());
    assert_same_state(back, good);
    pn_train_state_free(back);
    /* the writer reserves the file's space first, so its size says nothing about
     * progress; what matters is that the half-written file is refused */
    ck_assert_msg(file_size(tmp) >= (off_t)1 << 20, "no temporary file: %s", tmp);
    ck_assert_int_ne(pn_snapshot_read(tmp, PN_FORMAT_SNAPSHOT, &back), 0);
    ck_assert_msg(pn_snapshot_latest(dir, false, found, sizeof found) == 0, "%s", pn_error_message());
    ck_assert_str_eq(found, path);
    ck_assert_int_eq(pn_snapshot_prune(dir, 3, 100), 0);
    ck_assert_int_eq(file_size(tmp), -1);
    ck_assert_int_gt(file_size(path), 0);
    pn_train_state_free(good);
    pn_train_state_free(big);
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
    tcase_add_test(tc, latest_skips_corrupt_snapshots_and_temporaries);
    tcase_add_test(tc, prune_keeps_the_newest);
    tcase_add_test(tc, kill_during_write_keeps_the_previous_snapshot);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
