/* bf16 networks (pn_network_options.precision, net/arg_bf16.h): with the
 * activation memory planner on (bf16 slots, fp32 work area) and off (fp32 blocks
 * rounded in place) the same bits; every value and gradient that crosses a layer
 * boundary bf16-exact; a network cut in two (values and gradients copied across the
 * cut as a link does) the same bits as the whole; close to fp32 but not equal to it;
 * the planner's slots half the bytes. Graphs: a chain of fc, in-place act, layernorm
 * with fan-out, a stack of two transformer blocks, and models/char_gpt.json. The
 * same on cuda:0 where the build has CUDA and a device is visible (the stand-in,
 * scripts/test_cuda_sim.sh tests/test_network_bf16). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "math/bf16_math.h"
#include "math/cuda_module.h"
#include "math/ops.h"
#include "math/precision.h"
#include "net/arg_bf16.h"
#include "net/arg_plan.h"
#include "net/graph.h"
#include "net/network.h"
#include "model_files.h"
#include "testutil.h"

/* a1 is read by n1 and s, n1 by b1 and b2 (gradients add up); a1 and a2 run in
 * place over the fc outputs. */
#define CHAIN mf_text("fanout_chain")
#define BLOCKS mf_text("repeat_transformer_blocks")

static const pn_pass PASS = {.training = true, .seed = 3, .step = 1};

static pn_device DEV; /* where the networks run: the host, or cuda:0 */

static pn_graph *char_gpt(void)
{
    const char *dir = getenv("srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/models/char_gpt.json", dir ? dir : ".");
    pn_graph *g = NULL;
    ck_assert_msg(pn_graph_load(&g, path) == 0, "%s", pn_error_message());
    return g;
}

/* m's elements in host memory, dense (free them). */
static float *on_host(const pn_matrix *m)
{
    float *h = malloc(pn_matrix_count(*m) * sizeof *h + 1);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(pn_matrix_read(m, h), 0);
    return h;
}

/* The first element of m that is not a bf16 value, or -1. */
static long inexact_at(const pn_matrix *m)
{
    float *h = on_host(m);
    long at = -1;
    for (size_t i = 0; at < 0 && i < pn_matrix_count(*m); i++)
        if (h[i] != pn_bf16_round(h[i])) at = (long)i;
    free(h);
    return at;
}

static bool same_bits(const pn_matrix *a, const pn_matrix *b)
{
    if (a->rows != b->rows || a->cols != b->cols) return false;
    float *x = on_host(a), *y = on_host(b);
    bool same = !memcmp(x, y, pn_matrix_count(*a) * sizeof *x);
    free(x);
    free(y);
    return same;
}

/* Every parameter moved off its init by noise that depends on its name only, so a
 * cut network's two arenas hold what the whole one's does. */
static void jitter(pn_params *p)
{
    for (int i = 0; i < pn_params_count(p); i++) {
        uint64_t h = 1469598103934665603ull;
        for (const char *c = pn_params_get(p, i)->name; *c; c++)
            h = (h ^ (uint8_t)*c) * 1099511628211ull; /* FNV-1a */
        pn_rng rng;
        pn_rng_init(&rng, h, 0);
        pn_matrix v = pn_params_value(p, i);
        float *host = on_host(&v);
        for (size_t k = 0; k < pn_matrix_count(v); k++)
            host[k] += (float)(0.6 * pn_rng_uniform(&rng) - 0.3);
        ck_assert_int_eq(pn_matrix_write(&v, host), 0);
        free(host);
    }
}

typedef struct run {
    pn_network *net;
    pn_params *params;
    const bool *member; /* NULL: the whole graph */
} run;

static run make(const pn_graph *g, const bool *member, bool share, pn_precision prec, int batch)
{
    run r = {.member = member};
    pn_network_options o = {.member = member, .device = DEV, .init = true,
                            .seed = 5, .share_memory = share, .precision = prec};
    ck_assert_msg(pn_network_build(g, &o, &r.params, &r.net) == 0, "%s", pn_error_message());
    ck_assert_msg(pn_network_plan(r.net, batch) == 0, "%s", pn_error_message());
    jitter(r.params);
    return r;
}

static void done(run *r)
{
    pn_network_free(r->net);
    pn_params_free(r->params);
}

static bool computes(const run *r, const pn_graph *g, int i)
{
    return !g->nodes[i].is_input && (!r->member || r->member[i]);
}

/* The nodes dst is given (not computed there) copied in, as a link delivers them
 * from the network that computes them (prev), or the data feed (whole's inputs). */
static void feed(run *dst, run *prev, run *whole, const pn_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        pn_arg *d = pn_network_arg(dst->net, i);
        if (!d || computes(dst, g, i)) continue;
        pn_arg *s = pn_network_arg((prev && computes(prev, g, i) ? prev : whole)->net, i);
        ck_assert_ptr_nonnull(s);
        if (d->shape.ids) {
            size_t bytes = (size_t)pn_arg_rows(d) * sizeof(int);
            int *ids = malloc(bytes);
            ck_assert_int_eq(pn_buffer_read(&s->ids_buf, 0, ids, bytes), 0);
            ck_assert_int_eq(pn_buffer_write(&d->ids_buf, 0, ids, bytes), 0);
            free(ids);
        } else
            ck_assert_int_eq(pn_copy(&s->value, &d->value), 0);
    }
}

static double forward(run *r)
{
    pn_network_reset_stats(r->net);
    ck_assert_int_eq(pn_params_zero_grads(r->params), 0);
    int rc = pn_network_forward(r->net, &PASS);
    ck_assert_msg(rc == 0, "%s", pn_error_message());
    pn_layer_stats s;
    pn_network_stats(r->net, &s);
    return s.rows > 0 ? s.loss_sum / s.rows : 0.0;
}

static void backward(run *r, long global_batch)
{
    int rc = pn_network_backward(r->net, &PASS, global_batch);
    ck_assert_msg(rc == 0, "%s", pn_error_message());
}

/* The data inputs: ids in [0, 4), values in [-1, 1), from one stream. */
static void fill_inputs(run *r, const pn_graph *g)
{
    pn_rng rng;
    pn_rng_init(&rng, 17, 0);
    for (int i = 0; i < g->n_nodes; i++) {
        pn_arg *a = pn_network_arg(r->net, i);
        if (!a || !g->nodes[i].is_input) continue;
        size_t n = a->shape.ids ? (size_t)pn_arg_rows(a) : pn_matrix_count(a->value);
        int *ids = malloc(n * sizeof *ids + 1);
        float *v = malloc(n * sizeof *v + 1);
        for (size_t k = 0; k < n; k++) {
            ids[k] = (int)(pn_rng_next(&rng) % 4);
            v[k] = (float)(2.0 * pn_rng_uniform(&rng) - 1.0);
        }
        ck_assert_int_eq(a->shape.ids ? pn_buffer_write(&a->ids_buf, 0, ids, n * sizeof *ids)
                                      : pn_matrix_write(&a->value, v), 0);
        free(ids);
        free(v);
    }
}

/* The whole graph, one pass: the loss. */
static double whole_pass(run *r, const pn_graph *g, int batch)
{
    fill_inputs(r, g);
    double loss = forward(r);
    backward(r, batch);
    return loss;
}

/* Parameter i of whole's arena: its gradient in a or b (the halves of a cut). */
static void check_param_grads(const run *whole, const run *a, const run *b, const char *what)
{
    for (int i = 0; i < pn_params_count(whole->params); i++) {
        const char *name = pn_params_get(whole->params, i)->name;
        const run *part = pn_params_find(a->params, name) >= 0 ? a : b;
        int k = pn_params_find(part->params, name);
        ck_assert_msg(k >= 0, "%s: no %s in either half", what, name);
        pn_matrix x = pn_params_grad(whole->params, i), y = pn_params_grad(part->params, k);
        ck_assert_msg(same_bits(&x, &y), "%s: the gradient of %s differs", what, name);
    }
}

/* (1) planner on and off, whole graph: the same loss and parameter gradients; off,
 * every value a layer wrote is bf16-exact after the pass. */
static void check_planner_on_off(const pn_graph *g, int batch)
{
    pn_math_set_precision(PN_PRECISION_BF16);
    run off = make(g, NULL, false, PN_PRECISION_BF16, batch);
    run on = make(g, NULL, true, PN_PRECISION_BF16, batch);
    double l_off = whole_pass(&off, g, batch), l_on = whole_pass(&on, g, batch);
    ck_assert_msg(l_off == l_on, "loss %.9g unplanned, %.9g planned", l_off, l_on);
    pn_matrix a = pn_params_all_grads(off.params), b = pn_params_all_grads(on.params);
    ck_assert_msg(same_bits(&a, &b), "bf16: the planned parameter gradients differ");
    for (int i = 0; i < g->n_nodes; i++) {
        pn_arg *x = pn_network_arg(off.net, i);
        if (!computes(&off, g, i) || !x->value.data) continue;
        long at = inexact_at(&x->value);
        ck_assert_msg(at < 0, "the value of %s is not bf16 at %ld", g->nodes[i].name, at);
    }
    done(&off);
    done(&on);
    pn_math_set_precision(PN_PRECISION_FP32);
}

/* (2, 5, 1) The graph cut before node `cut`, planner on or off: the values sent across
 * are bf16, so are the gradients sent back; the loss, the parameter gradients and the
 * gradients at the cut are those of the whole graph. */
static void check_cut(const pn_graph *g, int batch, int cut, bool share, run *whole,
                      double whole_loss, float **cut_grads, int *n_cut)
{
    bool *in_a = calloc((size_t)g->n_nodes, 1), *in_b = calloc((size_t)g->n_nodes, 1);
    for (int i = 0; i < g->n_nodes; i++) (i < cut ? in_a : in_b)[i] = true;
    run a = make(g, in_a, share, PN_PRECISION_BF16, batch);
    run b = make(g, in_b, share, PN_PRECISION_BF16, batch);
    feed(&a, NULL, whole, g);
    double la = forward(&a);
    feed(&b, &a, whole, g);
    double lb = forward(&b);
    char what[64];
    snprintf(what, sizeof what, "cut before %s (%s)", g->nodes[cut].name, share ? "on" : "off");
    ck_assert_msg(la + lb == whole_loss, "%s: loss %.9g, whole %.9g", what, la + lb, whole_loss);
    backward(&b, batch);
    ck_assert_int_eq(pn_network_backward_begin(a.net, batch), 0);
    *n_cut = 0;
    for (int i = 0; i < cut; i++) {
        pn_arg *to = pn_network_arg(a.net, i), *from = pn_network_arg(b.net, i);
        if (!from || !computes(&a, g, i)) continue;
        long at = inexact_at(&from->value);
        ck_assert_msg(at < 0, "%s: the value of %s sent is not bf16 at %ld", what,
                      g->nodes[i].name, at);
        if (!from->grad.data) continue;
        at = inexact_at(&from->grad);
        ck_assert_msg(at < 0, "%s: the gradient of %s sent back is not bf16 at %ld", what,
                      g->nodes[i].name, at);
        ck_assert_msg(pn_arg_grad_beta(to) == 0.0f, "%s: stale", what);
        ck_assert_int_eq(pn_copy(&from->grad, &to->grad), 0);
        /* the gradient at the cut, the same with the planner on and off */
        float *got = on_host(&from->grad);
        if (cut_grads[*n_cut]) {
            ck_assert_msg(!memcmp(cut_grads[*n_cut], got, pn_matrix_count(from->grad) * 4),
                          "%s: the gradient of %s differs from the planner's other setting",
                          what, g->nodes[i].name);
            free(got);
        } else {
            cut_grads[*n_cut] = got;
        }
        (*n_cut)++;
    }
    ck_assert_int_eq(pn_network_backward_run(a.net, &PASS), 0);
    check_param_grads(whole, &a, &b, what);
    done(&a);
    done(&b);
    free(in_a);
    free(in_b);
}

static void check_cuts(const pn_graph *g, int batch)
{
    pn_math_set_precision(PN_PRECISION_BF16);
    run whole = make(g, NULL, true, PN_PRECISION_BF16, batch);
    double loss = whole_pass(&whole, g, batch);
    for (int cut = 1; cut < g->n_nodes; cut++) {
        if (g->nodes[cut].is_input) continue;
        float *grads[64] = {0};
        int n = 0;
        for (int share = 0; share < 2; share++)
            check_cut(g, batch, cut, share, &whole, loss, grads, &n);
        for (int k = 0; k < n; k++) free(grads[k]);
    }
    done(&whole);
    pn_math_set_precision(PN_PRECISION_FP32);
}

START_TEST(planner_on_and_off_give_the_same_bf16_bits)
{
    pn_graph *g[3] = {tu_graph_of(CHAIN), tu_graph_of(BLOCKS), char_gpt()};
    int batch[3] = {5, 3, 2};
    for (int k = 0; k < 3; k++) {
        check_planner_on_off(g[k], batch[k]);
        pn_graph_free(g[k]);
    }
}
END_TEST

START_TEST(a_cut_network_gives_the_whole_ones_bits)
{
    pn_graph *g[2] = {tu_graph_of(CHAIN), tu_graph_of(BLOCKS)};
    int batch[2] = {5, 3};
    for (int k = 0; k < 2; k++) {
        check_cuts(g[k], batch[k]);
        pn_graph_free(g[k]);
    }
}
END_TEST

/* Relative distance of two vectors: |a - b| / |b|. */
static double distance(const pn_matrix *a, const pn_matrix *b)
{
    float *x = on_host(a), *y = on_host(b);
    double d = 0.0, n = 0.0;
    for (size_t i = 0; i < pn_matrix_count(*a); i++) {
        d += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        n += (double)y[i] * y[i];
    }
    free(x);
    free(y);
    return sqrt(d / n);
}

/* (3) bf16 against fp32: close, not equal. Each rounding is off by up to 2^-9; the
 * gradients of the first layers drift most (CHAIN's h1 by ~5%: its layernorm over 8
 * features, half of them relu's zeros, divides by a small deviation), so the bound on
 * all gradients together is 6%, the loss's 1%. */
static void check_near_fp32(const pn_graph *g, int batch, double loss_tol, double grad_tol)
{
    run r[2];
    double loss[2];
    for (int p = 0; p < 2; p++) {
        pn_math_set_precision(p ? PN_PRECISION_BF16 : PN_PRECISION_FP32);
        r[p] = make(g, NULL, true, p ? PN_PRECISION_BF16 : PN_PRECISION_FP32, batch);
        loss[p] = whole_pass(&r[p], g, batch);
    }
    pn_math_set_precision(PN_PRECISION_FP32);
    pn_matrix a = pn_params_all_grads(r[1].params), b = pn_params_all_grads(r[0].params);
    double dl = fabs(loss[1] - loss[0]) / fabs(loss[0]), dg = distance(&a, &b);

    printf("bf16 vs fp32 (%d nodes, batch %d): loss %.7g vs %.7g (rel %.2e), parameter "
           "gradients rel %.2e\n", g->n_nodes, batch, loss[1], loss[0], dl, dg);
    ck_assert_msg(dl < loss_tol, "bf16 loss %.9g, fp32 %.9g", loss[1], loss[0]);
    ck_assert_msg(dg < grad_tol, "bf16 gradients %.3g away from fp32's", dg);
    ck_assert_msg(loss[1] != loss[0] && !same_bits(&a, &b), "bf16 gave fp32's bits");
    for (int p = 0; p < 2; p++) done(&r[p]);
}

START_TEST(bf16_is_near_fp32_and_not_equal)
{
    pn_graph *g[3] = {tu_graph_of(CHAIN), tu_graph_of(BLOCKS), char_gpt()};
    int batch[3] = {5, 3, 2};
    for (int k = 0; k < 3; k++) {
        check_near_fp32(g[k], batch[k], 1e-2, 6e-2);
        pn_graph_free(g[k]);
    }
}
END_TEST

static size_t sum(const size_t *v, int n)
{
    size_t s = 0;
    for (int k = 0; k < n; k++) s += v[k];
    return s;
}

/* (4) The value slots of bf16 are half fp32's, slot by slot; gradient slots hold
 * fp32 only for what is written outside a layer call (here the loss's seed). The
 * figures of char_gpt at its batch (32) are printed for the record. */
START_TEST(bf16_slots_take_half_the_bytes)
{
    pn_graph *g = char_gpt();
    pn_arg_plan p[2];
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(pn_arg_plan_make(&p[k], g, NULL, true,
                                          k ? PN_PRECISION_BF16 : PN_PRECISION_FP32), 0);
    ck_assert_int_eq(p[0].n_value_slots, p[1].n_value_slots);
    for (int s = 0; s < p[0].n_value_slots; s++)
        ck_assert_uint_eq(p[1].value_slot_bytes[s] * 2, p[0].value_slot_bytes[s]);
    size_t g32 = sum(p[0].grad_slot_bytes, p[0].n_grad_slots);
    size_t g16 = sum(p[1].grad_slot_bytes, p[1].n_grad_slots);
    printf("char_gpt gradient slots: %zu bytes a sample in bf16, %zu in fp32\n", g16, g32);
    ck_assert_msg(g16 < g32, "gradient slots: %zu bytes a sample in bf16, %zu in fp32", g16, g32);
    ck_assert_uint_eq(pn_arg_plan_work_bytes(&p[0], g, 32), 0);
    ck_assert_uint_gt(pn_arg_plan_work_bytes(&p[1], g, 32), 0);
    size_t bytes[2], work[2];
    for (int k = 0; k < 2; k++) {
        pn_params *params;
        pn_network *net;
        pn_network_options o = {.device = DEV, .share_memory = true,
                                .precision = k ? PN_PRECISION_BF16 : PN_PRECISION_FP32};
        ck_assert_int_eq(pn_network_build(g, &o, &params, &net), 0);
        ck_assert_int_eq(pn_network_plan(net, 32), 0);
        bytes[k] = pn_network_arg_bytes(net);
        work[k] = pn_network_work_bytes(net);
        ck_assert_uint_eq(work[k], pn_arg_plan_work_bytes(&p[k], g, 32));
        pn_network_free(net);
        pn_params_free(params);
        pn_arg_plan_free(&p[k]);
    }
    double mib = 1024.0 * 1024.0;
    printf("char_gpt, batch 32, planned: arguments %.2f MiB fp32, %.2f MiB bf16 + work "
           "%.2f MiB\n", bytes[0] / mib, bytes[1] / mib, work[1] / mib);
    ck_assert_uint_lt(bytes[1], bytes[0] * 3 / 4);
    pn_graph_free(g);
}
END_TEST

/* The small graphs on cuda:0: the same promises on the device's kernels. */
START_TEST(on_the_gpu_too)
{
    DEV = pn_device_cuda(0);
    pn_graph *g[2] = {tu_graph_of(CHAIN), tu_graph_of(BLOCKS)};
    int batch[2] = {5, 3};
    for (int k = 0; k < 2; k++) {
        check_planner_on_off(g[k], batch[k]);
        check_cuts(g[k], batch[k]);
        check_near_fp32(g[k], batch[k], 1e-2, 6e-2);
        pn_graph_free(g[k]);
    }
}
END_TEST

static bool have_gpu(void)
{
    const pn_cuda_module *m;
    return pn_cuda_module_built() && pn_cuda_module_get(&m) == PN_OK && m->device_count() > 0;
}

int main(void)
{
    pn_math_set_threads(1);
    DEV = pn_device_host();
    Suite *s = suite_create("network_bf16");
    TCase *tc = tcase_create("network_bf16");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, planner_on_and_off_give_the_same_bf16_bits);
    tcase_add_test(tc, a_cut_network_gives_the_whole_ones_bits);
    tcase_add_test(tc, bf16_is_near_fp32_and_not_equal);
    tcase_add_test(tc, bf16_slots_take_half_the_bytes);
    if (have_gpu())
        tcase_add_test(tc, on_the_gpu_too);
    else
        puts("no CUDA device: the cuda:0 case does not run");
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
