/* The cases of tests/test_backend_ops.c: each builds random inputs for one or a few
 * slots of the backend table (the same inputs on every backend: the run's stream is
 * keyed by case, shape and variant), calls the slots through the backend's table and
 * reads back every output, strided views' padding included (backend_ops.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "backend_ops.h"

/* ---- inputs and outputs of one run ------------------------------------------------ */

void fail(ctx *c, const char *what)
{
    if (!c->error[0]) snprintf(c->error, sizeof c->error, "%s", what);
}

void check_rc(ctx *c, int rc, const char *what)
{
    char msg[512];
    if (rc == PN_OK) return;
    snprintf(msg, sizeof msg, "%s returned %d: %s", what, rc, pn_error_message());
    fail(c, msg);
}

void *dev_block(ctx *c, size_t bytes)
{
    if (c->n_bufs == MAX_BUFS) {
        fail(c, "test: too many buffers in one case");
        return NULL;
    }
    pn_buffer *b = &c->bufs[c->n_bufs++];
    check_rc(c, pn_buffer_acquire(b, c->dev, bytes ? bytes : 1), "pn_buffer_acquire");
    return b->data;
}

float uniform(ctx *c, float lo, float hi)
{
    return lo + (hi - lo) * (float)pn_rng_uniform(&c->rng);
}

/* A rows x cols view with ld = cols + pad on the backend's device, filled from host
 * (NULL: uniform in [lo, hi), padding included). */
pn_matrix mat_from(ctx *c, int rows, int cols, int pad, const float *host, float lo,
                          float hi)
{
    int ld = cols + pad;
    size_t n = (size_t)(rows > 0 ? rows : 1) * (size_t)ld;
    float *h = malloc(n * sizeof *h);
    for (size_t k = 0; k < n; k++) h[k] = uniform(c, lo, hi);
    if (host)
        for (int i = 0; i < rows; i++) memcpy(h + (size_t)i * ld, host + (size_t)i * cols,
                                              (size_t)cols * sizeof *h);
    pn_matrix m = {dev_block(c, n * sizeof *h), rows, cols, ld, c->dev};
    if (m.data) check_rc(c, c->be->memory.copy_from_host(m.data, h, n * sizeof *h), "copy_from_host");
    free(h);
    return m;
}

pn_matrix mat(ctx *c, int rows, int cols, int pad, float lo, float hi)
{
    return mat_from(c, rows, cols, pad, NULL, lo, hi);
}

static int *ints_on_device(ctx *c, const int *host, int n)
{
    int *p = dev_block(c, (size_t)(n > 0 ? n : 1) * sizeof(int));
    if (p && n > 0) check_rc(c, c->be->memory.copy_from_host(p, host, (size_t)n * sizeof(int)), "copy_from_host");
    return p;
}

out_val *new_out(ctx *c, const char *name, out_kind kind)
{
    if (c->n_outs == MAX_OUTS) {
        fail(c, "test: too many outputs in one case");
        return NULL;
    }
    out_val *o = &c->outs[c->n_outs++];
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", name);
    o->kind = kind;
    return o;
}

/* m's values as output name, and when m is strided its padding (the floats between
 * a row's end and the next row's start, and after the last row) as "name padding",
 * which must be left exactly as it was: a kernel that writes past a row's end or
 * mixes up cols and ld is caught even where the values themselves come out right. */
void out_mat(ctx *c, const char *name, const pn_matrix *m, out_kind kind)
{
    out_val *o = new_out(c, name, kind);
    if (!o) return;
    o->n = pn_matrix_count(*m);
    o->data = calloc(o->n ? o->n : 1, sizeof(float));
    int pad = m->ld - m->cols;
    if (m->rows == 0 || m->cols == 0) return;
    size_t block = (size_t)m->rows * (size_t)m->ld; /* mat_from's block, padding included */
    float *all = malloc(block * sizeof *all);
    check_rc(c, c->be->memory.copy_to_host(all, m->data, block * sizeof *all), "copy_to_host");
    for (int i = 0; i < m->rows; i++)
        memcpy((float *)o->data + (size_t)i * m->cols, all + (size_t)i * m->ld,
               (size_t)m->cols * sizeof *all);
    if (pad > 0) {
        char pad_name[sizeof o->name];
        snprintf(pad_name, sizeof pad_name, "%s padding", name);
        out_val *p = new_out(c, pad_name, OUT_EXACT);
        if (p) {
            p->n = (size_t)m->rows * (size_t)pad;
            p->data = malloc(p->n * sizeof(float));
            for (int i = 0; i < m->rows; i++)
                memcpy((float *)p->data + (size_t)i * pad, all + (size_t)i * m->ld + m->cols,
                       (size_t)pad * sizeof *all);
        }
    }
    free(all);
}

void out_ints(ctx *c, const char *name, const void *dev_ptr, size_t n, size_t elem)
{
    out_val *o = new_out(c, name, OUT_EXACT);
    if (!o) return;
    o->ints = true;
    o->n = n * elem / sizeof(char);
    o->data = calloc(o->n ? o->n : 1, 1);
    if (n) check_rc(c, c->be->memory.copy_to_host(o->data, dev_ptr, n * elem), "copy_to_host");
}

static void out_double(ctx *c, const char *name, double v, out_kind kind)
{
    out_val *o = new_out(c, name, kind);
    if (!o) return;
    o->is_double = true;
    o->n = 1;
    o->data = malloc(sizeof(double));
    memcpy(o->data, &v, sizeof v);
}

void ctx_release(ctx *c)
{
    for (int k = 0; k < c->n_bufs; k++) pn_buffer_release(&c->bufs[k]);
    for (int k = 0; k < c->n_outs; k++) free(c->outs[k].data);
    c->n_bufs = c->n_outs = 0;
}

/* ---- the cases ------------------------------------------------------------------- */

#define BE (c->be)

static void case_memory(ctx *c, shape s, int v)
{
    size_t sizes[] = {1, 7, 4099, (size_t)s.rows * s.cols * 4 + 1};
    size_t bytes = sizes[v];
    unsigned char *h = malloc(bytes), *back = malloc(bytes);
    for (size_t k = 0; k < bytes; k++) h[k] = (unsigned char)pn_rng_next(&c->rng);
    void *p = BE->memory.alloc(c->dev.index, bytes);
    if (!p) {
        fail(c, "alloc returned NULL");
    } else {
        check_rc(c, BE->memory.copy_from_host(p, h, bytes), "copy_from_host");
        check_rc(c, BE->memory.zero((char *)p + bytes / 3, bytes / 2), "zero");
        check_rc(c, BE->memory.copy_to_host(back, p, bytes), "copy_to_host");
        BE->memory.free(c->dev.index, p);
        memset(h + bytes / 3, 0, bytes / 2);
        if (memcmp(h, back, bytes)) fail(c, "bytes read back differ from those written");
        out_val *o = new_out(c, "bytes", OUT_EXACT);
        if (o) o->ints = true, o->n = bytes, o->data = back, back = NULL;
    }
    free(h);
    free(back);
}

static void case_gemm(ctx *c, shape s, int v)
{
    bool ta = v & 1, tb = v & 2;
    float beta = (v & 4) ? 1.0f : 0.0f;
    int m = s.rows, n = s.cols, k = (s.rows + s.cols) / 2 + 1;
    pn_matrix a = ta ? mat(c, k, m, s.pad, -1, 1) : mat(c, m, k, s.pad, -1, 1);
    pn_matrix b = tb ? mat(c, n, k, s.pad, -1, 1) : mat(c, k, n, s.pad, -1, 1);
    pn_matrix out = mat(c, m, n, s.pad, -1, 1);
    check_rc(c, BE->gemm(ta, tb, 0.5f, &a, &b, beta, &out), "gemm");
    out_mat(c, "c", &out, OUT_NEAR);
}

static void case_fill(ctx *c, shape s, int v)
{
    pn_matrix m = mat(c, s.rows, s.cols, s.pad, -1, 1);
    check_rc(c, BE->fill(&m, v ? -0.0f : 2.5f), "fill");
    out_mat(c, "m", &m, OUT_EXACT);
}

/* Variants 3 and 4 copy rows 1.. of a matrix onto rows 0.. of the same one, and rows
 * 0.. onto rows 1..: overlapping source and destination, both directions. */
static void case_copy_scale_axpy(ctx *c, shape s, int v)
{
    pn_matrix x = mat(c, s.rows, s.cols, s.pad, -1, 1), y = mat(c, s.rows, s.cols, 0, -1, 1);
    switch (v) {
    case 0: check_rc(c, BE->copy(&x, &y), "copy"); break;
    case 1: check_rc(c, BE->scale(&y, -0.75f), "scale"); break;
    case 2: check_rc(c, BE->axpy(0.3f, &x, &y), "axpy"); break;
    default: {
        pn_matrix src = x, dst = x;
        src.rows--, dst.rows--;
        if (v == 3) src.data += src.ld; /* rows 1.. onto rows 0.. */
        else dst.data += dst.ld;        /* rows 0.. onto rows 1.. */
        check_rc(c, BE->copy(&src, &dst), "copy (overlapping)");
        y = x;
        break;
    }
    }
    out_mat(c, "y", &y, v == 0 || v >= 3 ? OUT_EXACT : OUT_NEAR);
}

static void case_mul(ctx *c, shape s, int v)
{
    pn_matrix a = mat(c, s.rows, s.cols, s.pad, -1, 1), b = mat(c, s.rows, s.cols, 0, -1, 1);
    pn_matrix out = mat(c, s.rows, s.cols, s.pad, -1, 1);
    check_rc(c, BE->mul(&a, &b, v ? 0.7f : 0.0f, &out), "mul");
    out_mat(c, "c", &out, OUT_NEAR);
}

static void case_act_forward(ctx *c, shape s, int v)
{
    pn_matrix x = mat(c, s.rows, s.cols, s.pad, -6, 6), y = mat(c, s.rows, s.cols, 1, -1, 1);
    check_rc(c, BE->act_forward((pn_act)v, &x, &y), "act_forward");
    out_mat(c, "y", &y, OUT_NEAR);
}

static void case_act_backward(ctx *c, shape s, int v)
{
    pn_act act = (pn_act)(v % 6);
    float beta = v >= 6 ? 1.0f : 0.0f;
    pn_matrix x = mat(c, s.rows, s.cols, s.pad, -6, 6), y = mat(c, s.rows, s.cols, 0, 0, 1);
    pn_matrix dy = mat(c, s.rows, s.cols, 2, -1, 1), dx = mat(c, s.rows, s.cols, s.pad, -1, 1);
    bool needs_x = act == PN_ACT_GELU, needs_y = act != PN_ACT_GELU && act != PN_ACT_NONE;
    check_rc(c, BE->act_backward(act, needs_x ? &x : NULL, needs_y ? &y : NULL, &dy, beta, &dx),
             "act_backward");
    out_mat(c, "dx", &dx, OUT_NEAR);
}

static void case_dropout(ctx *c, shape s, int v)
{
    float rates[] = {0.0f, 0.1f, 0.5f, 1.0f};
    pn_matrix x = mat(c, s.rows, s.cols, s.pad, -1, 1), y = mat(c, s.rows, s.cols, 0, -1, 1);
    pn_matrix mask = mat(c, s.rows, s.cols, 1, -1, 1);
    check_rc(c, BE->dropout_forward(&x, rates[v], 0x1234abcdULL + (uint64_t)v, 1000 + v, &mask, &y),
             "dropout_forward");
    out_mat(c, "mask", &mask, OUT_EXACT);
    out_mat(c, "y", &y, OUT_EXACT);
}

static void case_add_row_vector(ctx *c, shape s, int v)
{
    pn_matrix vec = mat(c, 1, s.cols, 0, -1, 1), m = mat(c, s.rows, s.cols, s.pad, -1, 1);
    check_rc(c, BE->add_row_vector(&vec, &m), "add_row_vector");
    out_mat(c, "m", &m, OUT_NEAR);
}

static void case_col_sums(ctx *c, shape s, int v)
{
    pn_matrix m = mat(c, s.rows, s.cols, s.pad, -1, 1), out = mat(c, 1, s.cols, 0, -1, 1);
    check_rc(c, BE->col_sums(&m, v ? 0.5f : 0.0f, &out), "col_sums");
    out_mat(c, "out", &out, OUT_NEAR);
}

static void case_sum_squares(ctx *c, shape s, int v)
{
    pn_matrix m = mat(c, s.rows, s.cols, s.pad, -2, 2);
    double sum = -1.0;
    check_rc(c, BE->sum_squares(&m, &sum), "sum_squares");
    out_double(c, "sum", sum, OUT_NEAR);
}

static void case_softmax(ctx *c, shape s, int v)
{
    int period = v ? (s.cols < 5 ? s.cols : 5) : 0;
    pn_matrix x = mat(c, s.rows, s.cols, s.pad, -8, 8), y = mat(c, s.rows, s.cols, 0, -1, 1);
    check_rc(c, BE->softmax_rows(&x, 0.7f, period, &y), "softmax_rows");
    out_mat(c, "y", &y, OUT_NEAR);
}

/* Rows of positive values summing to 1, and a label per row. */
static pn_matrix probs_and_labels(ctx *c, shape s, int **labels)
{
    float *p = malloc((size_t)s.rows * s.cols * sizeof *p);
    int *l = malloc((size_t)s.rows * sizeof *l);
    for (int i = 0; i < s.rows; i++) {
        double sum = 0.0;
        for (int j = 0; j < s.cols; j++) sum += p[i * s.cols + j] = uniform(c, 0.01f, 1.0f);
        for (int j = 0; j < s.cols; j++) p[i * s.cols + j] = (float)(p[i * s.cols + j] / sum);
        l[i] = (int)(pn_rng_next(&c->rng) % (uint64_t)s.cols);
    }
    pn_matrix m = mat_from(c, s.rows, s.cols, s.pad, p, 0, 1);
    *labels = ints_on_device(c, l, s.rows);
    free(p);
    free(l);
    return m;
}

static void case_xent_forward(ctx *c, shape s, int v)
{
    int *labels;
    pn_matrix probs = probs_and_labels(c, s, &labels), loss = mat(c, s.rows, 1, 1, -1, 1);
    double correct = -1.0;
    check_rc(c, BE->xent_forward(&probs, labels, &loss, &correct), "xent_forward");
    out_mat(c, "loss", &loss, OUT_NEAR);
    out_double(c, "correct", correct, OUT_EXACT);
}

static void case_xent_backward(ctx *c, shape s, int v)
{
    int *labels;
    pn_matrix probs = probs_and_labels(c, s, &labels), dloss = mat(c, s.rows, 1, 0, -1, 1);
    pn_matrix dlogits = mat(c, s.rows, s.cols, s.pad, -1, 1);
    check_rc(c, BE->xent_backward(&probs, labels, &dloss, v ? 1.0f : 0.0f, &dlogits),
             "xent_backward");
    out_mat(c, "dlogits", &dlogits, OUT_NEAR);
}

static void case_mse_forward(ctx *c, shape s, int v)
{
    pn_matrix p = mat(c, s.rows, s.cols, s.pad, -1, 1), t = mat(c, s.rows, s.cols, 0, -1, 1);
    pn_matrix loss = mat(c, s.rows, 1, 2, -1, 1);
    check_rc(c, BE->mse_forward(&p, &t, &loss), "mse_forward");
    out_mat(c, "loss", &loss, OUT_NEAR);
}

static void case_mse_backward(ctx *c, shape s, int v)
{
    pn_matrix p = mat(c, s.rows, s.cols, s.pad, -1, 1), t = mat(c, s.rows, s.cols, 0, -1, 1);
    pn_matrix dloss = mat(c, s.rows, 1, 0, -1, 1);
    pn_matrix dp = mat(c, s.rows, s.cols, 1, -1, 1), dt = mat(c, s.rows, s.cols, 0, -1, 1);
    check_rc(c, BE->mse_backward(&p, &t, &dloss, v != 2 ? &dp : NULL, v != 1 ? &dt : NULL),
             "mse_backward");
    out_mat(c, "dp", &dp, OUT_NEAR);
    out_mat(c, "dt", &dt, OUT_NEAR);
}

static void case_layernorm_forward(ctx *c, shape s, int v)
{
    pn_matrix x = mat(c, s.rows, s.cols, s.pad, -3, 5), y = mat(c, s.rows, s.cols, 0, -1, 1);
    pn_matrix gamma = mat(c, 1, s.cols, 0, 0.5f, 1.5f), beta = mat(c, 1, s.cols, 0, -1, 1);
    pn_matrix mean = mat(c, s.rows, 1, 0, -1, 1), rstd = mat(c, s.rows, 1, 1, -1, 1);
    check_rc(c, BE->layernorm_forward(&x, &gamma, &beta, 1e-5f, &y, &mean, &rstd),
             "layernorm_forward");
    out_mat(c, "y", &y, OUT_NEAR);
    out_mat(c, "mean", &mean, OUT_NEAR);
    out_mat(c, "rstd", &rstd, OUT_NEAR);
}

static void case_layernorm_backward(ctx *c, shape s, int v)
{
    pn_matrix x = mat(c, s.rows, s.cols, s.pad, -3, 5), gamma = mat(c, 1, s.cols, 0, 0.5f, 1.5f);
    pn_matrix mean = mat(c, s.rows, 1, 0, -1, 2), rstd = mat(c, s.rows, 1, 1, 0.5f, 2);
    pn_matrix dy = mat(c, s.rows, s.cols, 0, -1, 1), dx = mat(c, s.rows, s.cols, s.pad, -1, 1);
    pn_matrix dgamma = mat(c, 1, s.cols, 0, -1, 1), dbeta = mat(c, 1, s.cols, 0, -1, 1);
    check_rc(c, BE->layernorm_backward(&x, &gamma, &mean, &rstd, &dy, v ? NULL : &dx, &dgamma,
                                       &dbeta),
             "layernorm_backward");
    out_mat(c, "dx", &dx, OUT_NEAR);
    out_mat(c, "dgamma", &dgamma, OUT_NEAR);
    out_mat(c, "dbeta", &dbeta, OUT_NEAR);
}

/* n random ids in [0, range). */
static int *random_ids(ctx *c, int n, int range)
{
    int *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    for (int i = 0; i < n; i++) h[i] = (int)(pn_rng_next(&c->rng) % (uint64_t)range);
    int *d = ints_on_device(c, h, n);
    free(h);
    return d;
}

static void case_gather(ctx *c, shape s, int v)
{
    pn_matrix table = mat(c, s.rows + 3, s.cols, s.pad, -1, 1);
    pn_matrix out = mat(c, s.rows, s.cols, 0, -1, 1);
    int *ids = random_ids(c, s.rows, s.rows + 3);
    check_rc(c, BE->gather_rows(&table, ids, &out), "gather_rows");
    out_mat(c, "out", &out, OUT_EXACT);
}

/* Variant 0: the backend's default; 1: pn_math_set_deterministic, whose order of adds
 * is the CPU's, so the result must be the CPU's to the bit. Fewer table rows than
 * ids: rows receive several. */
static void case_scatter_add(ctx *c, shape s, int v)
{
    int trows = s.rows / 2 + 1;
    pn_matrix dout = mat(c, s.rows, s.cols, s.pad, -1, 1);
    pn_matrix dtable = mat(c, trows, s.cols, 1, -1, 1);
    int *ids = random_ids(c, s.rows, trows);
    pn_math_set_deterministic(v == 1);
    check_rc(c, BE->scatter_add_rows(&dout, ids, &dtable), "scatter_add_rows");
    pn_math_set_deterministic(false);
    out_mat(c, "dtable", &dtable, v == 1 ? OUT_EXACT : OUT_NEAR);
}

/* Random lengths in [1, period] (variant 1) or none (0). */
static int *random_lengths(ctx *c, int batch, int period)
{
    int *h = malloc((size_t)batch * sizeof *h);
    for (int b = 0; b < batch; b++) h[b] = 1 + (int)(pn_rng_next(&c->rng) % (uint64_t)period);
    int *d = ints_on_device(c, h, batch);
    free(h);
    return d;
}

static void case_seq_max_forward(ctx *c, shape s, int v)
{
    int period = 3;
    pn_matrix x = mat(c, s.rows * period, s.cols, s.pad, -1, 1);
    pn_matrix y = mat(c, s.rows, s.cols, 0, -1, 1);
    int *lengths = v ? random_lengths(c, s.rows, period) : NULL;
    int *arg = dev_block(c, (size_t)s.rows * s.cols * sizeof(int));
    check_rc(c, BE->seq_max_forward(&x, period, lengths, &y, arg), "seq_max_forward");
    out_mat(c, "y", &y, OUT_EXACT);
    out_ints(c, "arg", arg, (size_t)s.rows * s.cols, sizeof(int));
}

static void case_seq_max_backward(ctx *c, shape s, int v)
{
    int period = 4;
    pn_matrix dy = mat(c, s.rows, s.cols, s.pad, -1, 1);
    pn_matrix dx = mat(c, s.rows * period, s.cols, 1, -1, 1);
    int *h = malloc((size_t)s.rows * s.cols * sizeof *h);
    for (int b = 0; b < s.rows; b++) /* a row of sample b, as the forward leaves */
        for (int j = 0; j < s.cols; j++)
            h[b * s.cols + j] = b * period + (int)(pn_rng_next(&c->rng) % (uint64_t)period);
    int *arg = ints_on_device(c, h, s.rows * s.cols);
    free(h);
    check_rc(c, BE->seq_max_backward(&dy, arg, &dx), "seq_max_backward");
    out_mat(c, "dx", &dx, OUT_NEAR);
}

/* The optimizer cases' variants: each rule, with and without decay. */
static pn_update_hparams update_variant(int v)
{
    pn_update_hparams hp = {.rule = PN_UPDATE_SGD, .lr = 0.05f, .grad_scale = 0.8f,
                            .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                            .bias1 = 0.1f, .bias2 = 0.001999f};
    switch (v) {
    case 0: break;
    case 1: hp.weight_decay = 0.01f; break;
    case 2: hp.rule = PN_UPDATE_MOMENTUM, hp.momentum = 0.9f; break;
    case 3: hp.rule = PN_UPDATE_MOMENTUM, hp.momentum = 0.9f, hp.nesterov = true,
            hp.weight_decay = 0.01f, hp.decoupled = true; break;
    case 4: hp.rule = PN_UPDATE_ADAM; break;
    default: hp.rule = PN_UPDATE_ADAM, hp.weight_decay = 0.1f, hp.decoupled = true; break;
    }
    return hp;
}

static void case_optimizer(ctx *c, shape s, int v)
{
    pn_update_hparams hp = update_variant(v);
    pn_matrix w = mat(c, s.rows, s.cols, s.pad, -1, 1), g = mat(c, s.rows, s.cols, 0, -1, 1);
    pn_matrix s1 = mat(c, s.rows, s.cols, s.pad, -0.1f, 0.1f), s2 = mat(c, s.rows, s.cols, 1, 0, 0.01f);
    check_rc(c, BE->optimizer_update(&hp, &w, &g, hp.rule != PN_UPDATE_SGD ? &s1 : NULL,
                                     hp.rule == PN_UPDATE_ADAM ? &s2 : NULL),
             "optimizer_update");
    out_mat(c, "w", &w, OUT_NEAR);
    out_mat(c, "g", &g, OUT_EXACT);
    out_mat(c, "slot1", &s1, OUT_NEAR);
    out_mat(c, "slot2", &s2, OUT_NEAR);
}

/* Rows 2(n-1-k) of a table of 2n+1 rows: unique, descending, every other row left. */
static void case_optimizer_rows(ctx *c, shape s, int v)
{
    pn_update_hparams hp = update_variant(v);
    int trows = 2 * s.rows + 1;
    int *h = malloc((size_t)(s.rows > 0 ? s.rows : 1) * sizeof *h);
    for (int k = 0; k < s.rows; k++) h[k] = 2 * (s.rows - 1 - k);
    int *ids = ints_on_device(c, h, s.rows);
    free(h);
    pn_matrix w = mat(c, trows, s.cols, s.pad, -1, 1), g = mat(c, s.rows, s.cols, s.pad, -1, 1);
    pn_matrix s1 = mat(c, trows, s.cols, s.pad, -0.1f, 0.1f), s2 = mat(c, trows, s.cols, 1, 0, 0.01f);
    check_rc(c, BE->optimizer_update_rows(&hp, &w, ids, &g, hp.rule != PN_UPDATE_SGD ? &s1 : NULL,
                                          hp.rule == PN_UPDATE_ADAM ? &s2 : NULL),
             "optimizer_update_rows");
    out_mat(c, "w", &w, OUT_NEAR);
    out_mat(c, "g", &g, OUT_EXACT);
    out_mat(c, "slot1", &s1, OUT_NEAR);
    out_mat(c, "slot2", &s2, OUT_NEAR);
}

const op_case backend_op_cases[] = {
    {"memory", "memory.alloc memory.free memory.zero memory.copy_from_host memory.copy_to_host", 4,
     case_memory},
    {"gemm", "gemm", 8, case_gemm},
    {"fill", "fill", 2, case_fill},
    {"copy/scale/axpy", "copy scale axpy", 5, case_copy_scale_axpy},
    {"mul", "mul", 2, case_mul},
    {"act_forward", "act_forward", 6, case_act_forward},
    {"act_backward", "act_backward", 12, case_act_backward},
    {"dropout", "dropout_forward", 4, case_dropout},
    {"add_row_vector", "add_row_vector", 1, case_add_row_vector},
    {"col_sums", "col_sums", 2, case_col_sums},
    {"sum_squares", "sum_squares", 1, case_sum_squares},
    {"softmax", "softmax_rows", 2, case_softmax},
    {"xent_forward", "xent_forward", 1, case_xent_forward},
    {"xent_backward", "xent_backward", 2, case_xent_backward},
    {"mse_forward", "mse_forward", 1, case_mse_forward},
    {"mse_backward", "mse_backward", 3, case_mse_backward},
    {"layernorm_forward", "layernorm_forward", 1, case_layernorm_forward},
    {"layernorm_backward", "layernorm_backward", 2, case_layernorm_backward},
    {"gather", "gather_rows", 1, case_gather},
    {"scatter_add", "scatter_add_rows", 2, case_scatter_add},
    {"seq_max_forward", "seq_max_forward", 2, case_seq_max_forward},
    {"seq_max_backward", "seq_max_backward", 1, case_seq_max_backward},
    {"optimizer_update", "optimizer_update", 6, case_optimizer},
    {"optimizer_update_rows", "optimizer_update_rows", 6, case_optimizer_rows},
    {"gemm_bf16", "gemm_bf16", 8, case_gemm_bf16},
    {"round_bf16", "round_bf16", 1, case_round_bf16},
    {"to_bf16", "to_bf16", 1, case_to_bf16},
    {"from_bf16", "from_bf16", 1, case_from_bf16},
};
const int backend_op_n_cases = (int)(sizeof backend_op_cases / sizeof *backend_op_cases);
