/* The parameter arena: contiguous slices, init keyed by (seed, name) and not by
 * declaration order, slots at the same offsets, shared declarations, and the packed
 * index that travels with a snapshot's arena image. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/names.h"
#include "layers/params.h"
#include "math/ops.h"
#include "testutil.h"

static const char *const names[] = {"fc1/w", "fc1/b", "norm/gamma", "emb/table"};
static const int shapes[][2] = {{7, 5}, {1, 5}, {1, 9}, {11, 3}};
static const pn_init inits[] = {{PN_INIT_UNIFORM, 0.5f}, {PN_INIT_ZEROS, 0}, {PN_INIT_ONES, 0},
                                {PN_INIT_NORMAL, 0.02f}};

/* An arena with the four parameters declared in the given order. */
static pn_params *make_arena(const int *order, uint64_t seed)
{
    pn_params *p;
    ck_assert_int_eq(pn_params_create(&p, pn_device_host()), 0);
    for (int k = 0; k < 4; k++) {
        int i = order[k], index;
        ck_assert_int_eq(pn_params_declare(p, names[i], shapes[i][0], shapes[i][1], inits[i],
                                           i != 1, &index),
                         0);
    }
    ck_assert_int_eq(pn_params_finalize(p), 0);
    ck_assert_int_eq(pn_params_init_values(p, seed), 0);
    return p;
}

static void assert_same_values(const pn_params *a, const pn_params *b, bool want_equal)
{
    for (int i = 0; i < 4; i++) {
        pn_matrix va = pn_params_value(a, pn_params_find(a, names[i]));
        pn_matrix vb = pn_params_value(b, pn_params_find(b, names[i]));
        bool equal = memcmp(va.data, vb.data, pn_matrix_count(va) * sizeof(float)) == 0;
        if (inits[i].kind == PN_INIT_UNIFORM || inits[i].kind == PN_INIT_NORMAL)
            ck_assert_msg(equal == want_equal, "%s: values %s", names[i],
                          equal ? "equal" : "differ");
    }
}

START_TEST(init_depends_on_seed_and_name_only)
{
    const int forward[] = {0, 1, 2, 3}, backward[] = {3, 2, 1, 0}, mixed[] = {2, 0, 3, 1};
    pn_params *a = make_arena(forward, 42), *b = make_arena(backward, 42);
    pn_params *c = make_arena(mixed, 42), *d = make_arena(forward, 43);
    assert_same_values(a, b, true);
    assert_same_values(a, c, true);
    assert_same_values(a, d, false);
    /* offsets do differ with the order: the values followed the names */
    ck_assert_uint_ne(pn_params_get(a, pn_params_find(a, "emb/table"))->offset,
                      pn_params_get(b, pn_params_find(b, "emb/table"))->offset);
    /* two parameters of one arena draw different streams */
    pn_matrix w = pn_params_value(a, pn_params_find(a, "fc1/w"));
    pn_matrix e = pn_params_value(a, pn_params_find(a, "emb/table"));
    ck_assert_float_ne(w.data[0] / 0.5f, e.data[0] / 0.02f);
    pn_params_free(a), pn_params_free(b), pn_params_free(c), pn_params_free(d);
}
END_TEST

START_TEST(init_kinds_follow_their_spec)
{
    const int order[] = {0, 1, 2, 3};
    pn_params *p = make_arena(order, 7);
    pn_matrix w = pn_params_value(p, 0), b = pn_params_value(p, 1), g = pn_params_value(p, 2);
    pn_matrix e = pn_params_value(p, 3);
    for (size_t k = 0; k < pn_matrix_count(w); k++) ck_assert(fabsf(w.data[k]) <= 0.5f);
    for (size_t k = 0; k < pn_matrix_count(b); k++) ck_assert_float_eq(b.data[k], 0.0f);
    for (size_t k = 0; k < pn_matrix_count(g); k++) ck_assert_float_eq(g.data[k], 1.0f);
    double ss = 0;
    for (size_t k = 0; k < pn_matrix_count(e); k++) ss += (double)e.data[k] * e.data[k];
    double sd = sqrt(ss / (double)pn_matrix_count(e));
    ck_assert_msg(sd > 0.01 && sd < 0.03, "normal(0.02) drew sd %.4f", sd);
    pn_params_free(p);
}
END_TEST

START_TEST(arena_is_contiguous_with_aligned_slices)
{
    const int order[] = {0, 1, 2, 3};
    pn_params *p = make_arena(order, 1);
    size_t end = 0, elements = 0;
    for (int i = 0; i < pn_params_count(p); i++) {
        const pn_param *q = pn_params_get(p, i);
        ck_assert_uint_eq(q->offset % 16, 0);
        ck_assert_uint_ge(q->offset, end);
        ck_assert_uint_lt(q->offset, end + 16);
        end = q->offset + (size_t)q->rows * q->cols;
        elements += (size_t)q->rows * q->cols;
        pn_matrix v = pn_params_value(p, i), g = pn_params_grad(p, i);
        ck_assert_ptr_eq(v.data, pn_params_all_values(p).data + q->offset);
        ck_assert_ptr_eq(g.data, pn_params_all_grads(p).data + q->offset);
    }
    ck_assert_uint_eq(pn_params_elements(p), elements);
    ck_assert_uint_ge(pn_params_size(p), end);
    ck_assert_uint_lt(pn_params_size(p), end + 16);
    ck_assert(!pn_params_get(p, 1)->decay);
    /* one call over the whole gradient arena reaches every parameter */
    pn_matrix all = pn_params_all_grads(p);
    ck_assert_int_eq(pn_fill(&all, 3.0f), 0);
    ck_assert_float_eq(pn_params_grad(p, 3).data[32], 3.0f);
    ck_assert_int_eq(pn_params_zero_grads(p), 0);
    ck_assert_float_eq(pn_params_grad(p, 3).data[32], 0.0f);
    pn_params_free(p);
}
END_TEST

START_TEST(slots_share_offsets)
{
    const int order[] = {0, 1, 2, 3};
    pn_params *p = make_arena(order, 1);
    int m, v, again;
    ck_assert_int_eq(pn_params_add_slot(p, "m", &m), 0);
    ck_assert_int_eq(pn_params_add_slot(p, "v", &v), 0);
    ck_assert_int_eq(pn_params_add_slot(p, "m", &again), 0);
    ck_assert_int_eq(again, m);
    ck_assert_int_eq(pn_params_n_slots(p), 2);
    ck_assert_str_eq(pn_params_slot_name(p, v), "v");
    for (int i = 0; i < pn_params_count(p); i++) {
        pn_matrix s = pn_params_slot(p, v, i);
        ck_assert_ptr_eq(s.data, pn_params_all_slot(p, v).data + pn_params_get(p, i)->offset);
        for (size_t k = 0; k < pn_matrix_count(s); k++) ck_assert_float_eq(s.data[k], 0.0f);
    }
    pn_params_free(p);
}
END_TEST

START_TEST(declarations_are_checked)
{
    pn_params *p;
    int a, b;
    ck_assert_int_eq(pn_params_create(&p, pn_device_host()), 0);
    ck_assert_int_eq(pn_params_declare(p, "x/w", 3, 4, inits[0], true, &a), 0);
    ck_assert_int_eq(pn_params_declare(p, "x/w", 3, 4, inits[0], true, &b), 0);
    ck_assert_int_eq(a, b); /* shared by name */
    ck_assert_int_eq(pn_params_declare(p, "x/w", 4, 3, inits[0], true, &b), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "x/w"));
    ck_assert_int_eq(pn_params_declare(p, "y/w", 0, 3, inits[0], true, &b), PN_ERR_INVALID);
    ck_assert_int_eq(pn_params_add_slot(p, "m", &b), PN_ERR_INTERNAL);
    char longest[PN_PARAM_NAME_MAX + 2]; /* names are never cut: the longest or refused */
    memset(longest, 'n', PN_PARAM_NAME_MAX + 1);
    longest[PN_PARAM_NAME_MAX + 1] = '\0';
    ck_assert_int_eq(pn_params_declare(p, longest, 1, 1, inits[0], true, &b), PN_ERR_INVALID);
    longest[PN_PARAM_NAME_MAX] = '\0';
    ck_assert_int_eq(pn_params_declare(p, longest, 1, 1, inits[0], true, &b), 0);
    ck_assert_str_eq(pn_params_get(p, b)->name, longest);
    ck_assert_int_eq(pn_params_finalize(p), 0);
    ck_assert_int_eq(pn_params_add_slot(p, "a_sixteen_bytes_", &b), PN_ERR_INTERNAL);
    ck_assert_int_eq(pn_params_declare(p, "z/w", 2, 2, inits[0], true, &b), PN_ERR_INTERNAL);
    pn_params_free(p);
}
END_TEST

START_TEST(packed_index_round_trips)
{
    const int order[] = {2, 0, 3, 1};
    pn_params *a = make_arena(order, 7);
    char *packed;
    size_t bytes, floats, piece;
    pn_param *items;
    int count;
    ck_assert_int_eq(pn_params_pack_index(a, &packed, &bytes), 0);
    ck_assert_int_eq(pn_params_unpack_index(packed, bytes, &items, &count, &floats, &piece),
                     0);
    ck_assert_int_eq(count, pn_params_count(a));
    ck_assert_uint_eq(floats, pn_params_size(a));
    ck_assert_uint_eq(piece, pn_params_grad_piece(a));
    for (int i = 0; i < count; i++) {
        const pn_param *p = pn_params_get(a, i);
        ck_assert_str_eq(items[i].name, p->name);
        ck_assert_int_eq(items[i].rows, p->rows);
        ck_assert_int_eq(items[i].cols, p->cols);
        ck_assert_uint_eq(items[i].offset, p->offset);
        ck_assert_uint_eq(items[i].grad_offset, p->grad_offset);
        ck_assert_int_eq(items[i].row_sparse, p->row_sparse);
        ck_assert_int_eq(items[i].table_rows, p->table_rows);
        ck_assert(!items[i].sharded); /* one shard: nothing split */
    }
    pn_params_free_index(items, count);
    /* cut short anywhere, or with a bad magic: refused, nothing returned */
    for (size_t cut = 0; cut < bytes; cut += 3) {
        items = (pn_param *)1;
        ck_assert_int_eq(
            pn_params_unpack_index(packed, cut, &items, &count, &floats, NULL),
            PN_ERR_INTERNAL);
        ck_assert_ptr_null(items);
    }
    packed[0] ^= 1;
    ck_assert_int_eq(
        pn_params_unpack_index(packed, bytes, &items, &count, &floats, NULL), PN_ERR_INTERNAL);
    free(packed);
    pn_params_free(a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("params");
    TCase *tc = tcase_create("arena");
    tcase_add_test(tc, init_depends_on_seed_and_name_only);
    tcase_add_test(tc, init_kinds_follow_their_spec);
    tcase_add_test(tc, arena_is_contiguous_with_aligned_slices);
    tcase_add_test(tc, slots_share_offsets);
    tcase_add_test(tc, declarations_are_checked);
    tcase_add_test(tc, packed_index_round_trips);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
