/* Train states for the snapshot tests (state_fixture.h): awkward values (signed
 * zeros, subnormals, infinities), a three-parameter state, a state comparison to
 * the bit, and ways to damage a written file. */
#include "state_fixture.h"

#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "io/hdf5_util.h"
#include "io/snapshot_dir.h"

const char *const sf_slot_names[2] = {"adam_m", "adam_v"};
const char sf_config_text[] =
    "{\"name\": \"tiny\", \"layers\": [{\"name\": \"fc1\", \"type\": \"fc\"}],\n"
    " \"note\": \"caf\xc3\xa9\"}\n";
const uint64_t sf_big_seed = 0xfedcba9876543210ull; /* above 2^32 and 2^63 */

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
void sf_add_param(pn_train_state *st, int p, const char *name, int rows, int cols)
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
pn_train_state *sf_make_state(const char *format, int w_rows)
{
    pn_train_state *st;
    ck_assert_int_eq(pn_train_state_create(&st, format), 0);
    if (!strcmp(format, PN_FORMAT_SNAPSHOT))
        ck_assert_int_eq(pn_train_state_set_slots(st, 2, sf_slot_names), 0);
    ck_assert_int_eq(pn_train_state_set_config(st, sf_config_text), 0);
    st->step = 100;
    st->epoch = 3;
    st->batch_index = 17;
    st->seed = sf_big_seed;
    st->batch = 96;
    sf_add_param(st, 0, "fc1/w", w_rows, 37);
    sf_add_param(st, 1, "fc1/b", 1, 37);
    sf_add_param(st, 2, "emb/table", 11, 5);
    return st;
}

static void assert_same_floats(const float *a, const float *b, size_t n, const char *what)
{
    for (size_t k = 0; k < n; k++)
        ck_assert_msg(!memcmp(&a[k], &b[k], sizeof *a), "%s[%zu]: %a != %a", what, k, a[k], b[k]);
}

/* got equals want, with got's parameters in sorted order. */
void sf_assert_same_state(const pn_train_state *got, const pn_train_state *want)
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

void sf_write_state(const char *path, const pn_train_state *st)
{
    ck_assert_msg(pn_snapshot_write(path, st, NULL) == 0, "%s", pn_error_message());
}

/* Flips one bit in the middle of the first chunk of dataset name of path. */
void sf_flip_chunk_bit(const char *path, const char *name)
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
