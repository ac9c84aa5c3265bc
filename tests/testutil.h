/* Helpers shared by the Check suites: random host data, tolerant comparison,
 * temporary directories and a main() that runs one suite and maps the result to an
 * exit status. */
#ifndef PN_TESTUTIL_H
#define PN_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/rng.h"
#include "layers/params.h"
#include "math/matrix.h"
#include "net/graph.h"
#include "net/network.h"

/* Fills m (host) with uniform values in [-scale, scale]. */
void tu_fill_uniform(pn_matrix *m, pn_rng *rng, float scale);

/* A host matrix rows x cols inside a wider allocation (ld = cols + pad), so that
 * kernels are exercised on strided views; free with tu_free. */
pn_matrix tu_alloc(int rows, int cols, int pad);
void tu_free(pn_matrix *m);

/* |a - b| <= atol + rtol * max(|a|, |b|) */
bool tu_close(double a, double b, double rtol, double atol);

/* Asserts every element of a matches the double reference want (row-major rows x cols). */
void tu_assert_matrix_near(const pn_matrix *a, const double *want, double rtol, double atol,
                           const char *what);

/* Creates a fresh directory $TMPDIR/pn_test_<name>.XXXXXX (or under /tmp) and
 * writes its path into dir (cap bytes). */
void tu_make_temp_dir(char *dir, size_t cap, const char *name);

/* The names in dir (not those starting with '.'), sorted, each followed by a newline,
 * into out (cap bytes, cut to fit); -1 (and "") when dir cannot be read. */
int tu_list_dir(const char *dir, char *out, size_t cap);

/* Removes dir and everything under it. */
void tu_remove_tree(const char *dir);

/* The graph of a model given as JSON text (file "test.json" in messages); fails the
 * test if refused. */
pn_graph *tu_graph_of(const char *json);

/* A graph of a chain x -> l1 -> ... -> ln of n fc layers of the given widths over an
 * input of `input` floats, as if read from file (for messages); fails the test if
 * refused. */
pn_graph *tu_fc_chain(int input, const int *widths, int n, const char *file);

/* Random data in every input net holds (ids in [0, 4), floats in [-1, 1]) from
 * seed, and every parameter of params moved by up to 0.3 (biases and gains off
 * 0 and 1). */
void tu_fill_inputs(pn_network *net, const pn_graph *g, uint64_t seed);
void tu_jitter_params(pn_params *params);

/* Asserts that every parameter gradient params holds (after the caller's backward)
 * matches central differences of loss(ctx), the mean loss of the same forward, over
 * steps of 2e-3 (layer norm over 6 values curves fast: 1e-2 is too coarse); more
 * than 50 values must be compared. */
void tu_check_param_gradients(pn_params *params, double (*loss)(void *ctx), void *ctx);

/* Runs suite and returns 0 when every test passed. */
int tu_run_suite(Suite *suite);

#endif
