/* Shared Check helpers (see testutil.h). */
#include "testutil.h"

#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/error.h"
#include "math/ops.h"

void tu_fill_uniform(pn_matrix *m, pn_rng *rng, float scale)
{
    for (int i = 0; i < m->rows; i++)
        for (int j = 0; j < m->cols; j++)
            m->data[(size_t)i * m->ld + j] = (float)((2.0 * pn_rng_uniform(rng) - 1.0) * scale);
}

pn_matrix tu_alloc(int rows, int cols, int pad)
{
    int ld = cols + pad;
    float *data = calloc((size_t)(rows ? rows : 1) * (size_t)ld, sizeof *data);
    ck_assert_ptr_nonnull(data);
    return (pn_matrix){data, rows, cols, ld, pn_device_host()};
}

void tu_free(pn_matrix *m)
{
    free(m->data);
    m->data = NULL;
}

bool tu_close(double a, double b, double rtol, double atol)
{
    double scale = fmax(fabs(a), fabs(b));
    return fabs(a - b) <= atol + rtol * scale;
}

void tu_assert_matrix_near(const pn_matrix *a, const double *want, double rtol, double atol,
                           const char *what)
{
    for (int i = 0; i < a->rows; i++)
        for (int j = 0; j < a->cols; j++) {
            double got = a->data[(size_t)i * a->ld + j], ref = want[(size_t)i * a->cols + j];
            ck_assert_msg(tu_close(got, ref, rtol, atol), "%s[%d,%d]: got %.9g, want %.9g", what,
                          i, j, got, ref);
        }
}

void tu_make_temp_dir(char *dir, size_t cap, const char *name)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    ck_assert_int_lt(snprintf(dir, cap, "%s/pn_test_%s.XXXXXX", tmp, name), (int)cap);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

int tu_list_dir(const char *dir, char *out, size_t cap)
{
    struct dirent **entries;
    out[0] = '\0';
    int n = scandir(dir, &entries, NULL, alphasort);
    if (n < 0) return -1;
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        int k = entries[i]->d_name[0] == '.' || len >= cap
                    ? 0 : snprintf(out + len, cap - len, "%s\n", entries[i]->d_name);
        len += k > 0 ? (size_t)k : 0;
        free(entries[i]);
    }
    free(entries);
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

void tu_remove_tree(const char *dir) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

int tu_run_suite(Suite *suite)
{
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

pn_graph *tu_graph_of(const char *json)
{
    json_t *root = json_loads(json, 0, NULL);
    ck_assert_ptr_nonnull(root);
    pn_graph *g = NULL;
    int rc = pn_graph_from_json(&g, root, "test.json");
    json_decref(root);
    ck_assert_msg(rc == 0, "%s", pn_error_message());
    return g;
}

pn_graph *tu_fc_chain(int input, const int *widths, int n, const char *file)
{
    json_t *layers = json_array();
    char prev[16] = "x";
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "l%d", i + 1);
        json_array_append_new(layers, json_pack("{s:s, s:s, s:s, s:i}", "name", name, "type",
                                                "fc", "input", prev, "size", widths[i]));
        strcpy(prev, name);
    }
    json_t *root = json_pack("{s:{s:{s:s, s:i}}, s:o}", "inputs", "x", "dataset", "features",
                             "size", input, "layers", layers);
    pn_graph *g = NULL;
    int rc = pn_graph_from_json(&g, root, file);
    json_decref(root);
    ck_assert_msg(rc == 0, "graph refused: %s", pn_error_message());
    return g;
}

void tu_check_param_gradients(pn_params *params, double (*loss)(void *ctx), void *ctx)
{
    const double eps = 2e-3;
    long compared = 0;
    for (int p = 0; p < pn_params_count(params); p++) {
        pn_matrix v = pn_params_value(params, p), g = pn_params_grad(params, p);
        for (size_t k = 0; k < pn_matrix_count(v); k++) {
            float saved = v.data[k];
            v.data[k] = saved + (float)eps;
            double plus = loss(ctx);
            v.data[k] = saved - (float)eps;
            double minus = loss(ctx);
            v.data[k] = saved;
            double numeric = (plus - minus) / (2 * eps);
            ck_assert_msg(tu_close(g.data[k], numeric, 3e-2, 2e-4), "%s[%zu]: backward %.6g, "
                          "finite difference %.6g", pn_params_get(params, p)->name, k,
                          g.data[k], numeric);
            compared++;
        }
    }
    ck_assert_int_gt(compared, 50);
}

void tu_fill_inputs(pn_network *net, const pn_graph *g, uint64_t seed)
{
    pn_rng rng;
    pn_rng_init(&rng, seed, 0);
    for (int i = 0; i < g->n_nodes; i++) {
        pn_arg *a = pn_network_arg(net, i);
        if (!a || !g->nodes[i].is_input) continue;
        if (a->shape.ids)
            for (int k = 0; k < pn_arg_rows(a); k++) a->ids[k] = (int)(pn_rng_next(&rng) % 4);
        else
            tu_fill_uniform(&a->value, &rng, 1.0f);
    }
}

void tu_jitter_params(pn_params *params)
{
    pn_matrix all = pn_params_all_values(params);
    pn_rng rng;
    pn_rng_init(&rng, 18, 0);
    pn_matrix noise = tu_alloc(1, all.cols, 0);
    tu_fill_uniform(&noise, &rng, 0.3f);
    ck_assert_int_eq(pn_axpy(1.0f, &noise, &all), 0);
    tu_free(&noise);
}
