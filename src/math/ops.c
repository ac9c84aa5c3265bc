/* Dispatch of math ops: check shapes and devices, pick the backend, call its slot. */
#include "config.h"

#include "math/ops.h"

#include <string.h>

#include "base/error.h"
#include "math/backend.h"
#include "math/cuda_module.h"
#include "math/precision.h"

static const char *const act_names[] = {"none", "relu", "tanh", "sigmoid", "gelu", "softmax"};

int pn_act_from_name(const char *name)
{
    for (int i = 0; i < (int)(sizeof act_names / sizeof *act_names); i++)
        if (!strcmp(name, act_names[i])) return i;
    return -1;
}

const char *pn_act_name(pn_act act) { return act_names[act]; }

static bool deterministic_ops;

void pn_math_set_deterministic(bool on) { deterministic_ops = on; }
bool pn_math_deterministic(void) { return deterministic_ops; }

int pn_backend_for(pn_device dev, const pn_backend **out)
{
    if (dev.kind == PN_DEVICE_HOST) {
        *out = &pn_cpu_backend;
        return PN_OK;
    }
    /* every op asks: the module's table is kept after the first */
    static const pn_backend *_Atomic cuda_table;
    if ((*out = cuda_table)) return PN_OK;
    const pn_cuda_module *m;
    PN_TRY(pn_cuda_module_get(&m));
    cuda_table = m->backend; /* (an assignment's value is not atomic: clang refuses it) */
    *out = m->backend;
    return PN_OK;
}

int pn_memory_backend_for(pn_device dev, const pn_memory_backend **out)
{
    const pn_backend *be;
    PN_TRY(pn_backend_for(dev, &be));
    *out = &be->memory;
    return PN_OK;
}

/* Every operand of one op must live on the device of the first. */
static int same_device(const char *op, pn_device dev, const pn_matrix *const *ms, int n)
{
    for (int i = 0; i < n; i++)
        if (ms[i] && !pn_device_equal(ms[i]->device, dev))
            return pn_error_set(PN_ERR_INTERNAL, "%s: operands on different devices", op);
    return PN_OK;
}

static int shape_error(const char *op, const pn_matrix *a, const pn_matrix *b)
{
    return pn_error_set(PN_ERR_INTERNAL, "%s: shape mismatch (%d x %d vs %d x %d)", op, a->rows,
                        a->cols, b->rows, b->cols);
}

#define SAME_SHAPE(op, a, b)                                           \
    do {                                                               \
        if ((a)->rows != (b)->rows || (a)->cols != (b)->cols)          \
            return shape_error(op, a, b);                              \
    } while (0)

/* Finds the backend of dev and the slot, or returns an error from the caller. */
#define DISPATCH(op, dev, slot, ...)                                               \
    do {                                                                           \
        const pn_backend *be_;                                                     \
        PN_TRY(pn_backend_for(dev, &be_));                                         \
        if (!be_->slot)                                                            \
            return pn_error_set(PN_ERR_UNSUPPORTED, "%s is not implemented on %s", \
                                op, be_->name);                                    \
        return be_->slot(__VA_ARGS__);                                             \
    } while (0)

#define DEVICES(op, dev, ...)                                          \
    do {                                                               \
        const pn_matrix *ms_[] = {__VA_ARGS__};                        \
        PN_TRY(same_device(op, dev, ms_, (int)(sizeof ms_ / sizeof *ms_))); \
    } while (0)

int pn_gemm(bool trans_a, bool trans_b, float alpha, const pn_matrix *a, const pn_matrix *b,
            float beta, pn_matrix *c)
{
    int m = trans_a ? a->cols : a->rows, k = trans_a ? a->rows : a->cols;
    int kb = trans_b ? b->cols : b->rows, n = trans_b ? b->rows : b->cols;
    if (k != kb || m != c->rows || n != c->cols)
        return pn_error_set(PN_ERR_INTERNAL,
                            "gemm: shape mismatch (%d x %d)%s * (%d x %d)%s -> %d x %d", a->rows,
                            a->cols, trans_a ? "^T" : "", b->rows, b->cols, trans_b ? "^T" : "",
                            c->rows, c->cols);
    DEVICES("gemm", c->device, a, b);
    if (pn_math_precision() == PN_PRECISION_BF16)
        DISPATCH("gemm_bf16", c->device, gemm_bf16, trans_a, trans_b, alpha, a, b, beta, c);
    DISPATCH("gemm", c->device, gemm, trans_a, trans_b, alpha, a, b, beta, c);
}

int pn_round_bf16(pn_matrix *m) { DISPATCH("round_bf16", m->device, round_bf16, m); }

int pn_to_bf16(const pn_matrix *src, uint16_t *dst)
{
    DISPATCH("to_bf16", src->device, to_bf16, src, dst);
}

int pn_from_bf16(const uint16_t *src, pn_matrix *dst)
{
    DISPATCH("from_bf16", dst->device, from_bf16, src, dst);
}

int pn_fill(pn_matrix *m, float value) { DISPATCH("fill", m->device, fill, m, value); }

int pn_copy(const pn_matrix *src, pn_matrix *dst)
{
    SAME_SHAPE("copy", src, dst);
    DEVICES("copy", dst->device, src);
    DISPATCH("copy", dst->device, copy, src, dst);
}

int pn_scale(pn_matrix *m, float alpha) { DISPATCH("scale", m->device, scale, m, alpha); }

int pn_axpy(float alpha, const pn_matrix *x, pn_matrix *y)
{
    SAME_SHAPE("axpy", x, y);
    DEVICES("axpy", y->device, x);
    DISPATCH("axpy", y->device, axpy, alpha, x, y);
}

int pn_mul(const pn_matrix *a, const pn_matrix *b, float beta, pn_matrix *c)
{
    SAME_SHAPE("mul", a, c);
    SAME_SHAPE("mul", b, c);
    DEVICES("mul", c->device, a, b);
    DISPATCH("mul", c->device, mul, a, b, beta, c);
}

int pn_act_forward(pn_act act, const pn_matrix *x, pn_matrix *y)
{
    SAME_SHAPE("act_forward", x, y);
    DEVICES("act_forward", y->device, x);
    DISPATCH("act_forward", y->device, act_forward, act, x, y);
}

int pn_act_backward(pn_act act, const pn_matrix *x, const pn_matrix *y, const pn_matrix *dy,
                    float beta, pn_matrix *dx)
{
    SAME_SHAPE("act_backward", dy, dx);
    if (x) SAME_SHAPE("act_backward", x, dx);
    if (y) SAME_SHAPE("act_backward", y, dx);
    if ((act == PN_ACT_GELU && !x) || (act != PN_ACT_GELU && act != PN_ACT_NONE && !y))
        return pn_error_set(PN_ERR_INTERNAL, "act_backward(%s): missing operand", pn_act_name(act));
    DEVICES("act_backward", dx->device, x, y, dy);
    DISPATCH("act_backward", dx->device, act_backward, act, x, y, dy, beta, dx);
}

int pn_dropout_forward(const pn_matrix *x, float rate, uint64_t key, long row0,
                       pn_matrix *mask, pn_matrix *y)
{
    SAME_SHAPE("dropout", x, y);
    SAME_SHAPE("dropout", mask, y);
    DEVICES("dropout", y->device, x, mask);
    DISPATCH("dropout", y->device, dropout_forward, x, rate, key, row0, mask, y);
}

int pn_add_row_vector(const pn_matrix *v, pn_matrix *m)
{
    if (v->rows != 1 || v->cols != m->cols) return shape_error("add_row_vector", v, m);
    DEVICES("add_row_vector", m->device, v);
    DISPATCH("add_row_vector", m->device, add_row_vector, v, m);
}

int pn_col_sums(const pn_matrix *m, float beta, pn_matrix *out)
{
    if (out->rows != 1 || out->cols != m->cols) return shape_error("col_sums", m, out);
    DEVICES("col_sums", out->device, m);
    DISPATCH("col_sums", out->device, col_sums, m, beta, out);
}

int pn_sum_squares(const pn_matrix *m, double *out)
{
    DISPATCH("sum_squares", m->device, sum_squares, m, out);
}

int pn_softmax_rows(const pn_matrix *x, float scale, int causal_period, pn_matrix *y)
{
    SAME_SHAPE("softmax", x, y);
    if (causal_period > 0 && causal_period > x->cols)
        return pn_error_set(PN_ERR_INTERNAL, "softmax: causal period %d > %d columns",
                            causal_period, x->cols);
    DEVICES("softmax", y->device, x);
    DISPATCH("softmax", y->device, softmax_rows, x, scale, causal_period, y);
}

int pn_xent_forward(const pn_matrix *probs, const int *labels, pn_matrix *loss,
                    double *correct)
{
    if (loss->rows != probs->rows || loss->cols != 1) return shape_error("xent", probs, loss);
    DEVICES("xent", loss->device, probs);
    DISPATCH("xent", loss->device, xent_forward, probs, labels, loss, correct);
}

int pn_xent_backward(const pn_matrix *probs, const int *labels, const pn_matrix *dloss,
                     float beta, pn_matrix *dlogits)
{
    SAME_SHAPE("xent_backward", probs, dlogits);
    if (dloss->rows != probs->rows || dloss->cols != 1)
        return shape_error("xent_backward", probs, dloss);
    DEVICES("xent_backward", dlogits->device, probs, dloss);
    DISPATCH("xent_backward", dlogits->device, xent_backward, probs, labels, dloss, beta,
             dlogits);
}

int pn_mse_forward(const pn_matrix *p, const pn_matrix *t, pn_matrix *loss)
{
    SAME_SHAPE("mse", p, t);
    if (loss->rows != p->rows || loss->cols != 1) return shape_error("mse", p, loss);
    DEVICES("mse", loss->device, p, t);
    DISPATCH("mse", loss->device, mse_forward, p, t, loss);
}

int pn_mse_backward(const pn_matrix *p, const pn_matrix *t, const pn_matrix *dloss,
                    pn_matrix *dp, pn_matrix *dt)
{
    SAME_SHAPE("mse_backward", p, t);
    if (dp) SAME_SHAPE("mse_backward", p, dp);
    if (dt) SAME_SHAPE("mse_backward", p, dt);
    DEVICES("mse_backward", p->device, t, dloss, dp, dt);
    DISPATCH("mse_backward", p->device, mse_backward, p, t, dloss, dp, dt);
}

int pn_layernorm_forward(const pn_matrix *x, const pn_matrix *gamma, const pn_matrix *beta,
                         float eps, pn_matrix *y, pn_matrix *mean, pn_matrix *rstd)
{
    SAME_SHAPE("layernorm", x, y);
    if (gamma->cols != x->cols || beta->cols != x->cols || mean->rows != x->rows ||
        rstd->rows != x->rows)
        return shape_error("layernorm", x, gamma);
    DEVICES("layernorm", y->device, x, gamma, beta, mean, rstd);
    DISPATCH("layernorm", y->device, layernorm_forward, x, gamma, beta, eps, y, mean, rstd);
}

int pn_layernorm_backward(const pn_matrix *x, const pn_matrix *gamma, const pn_matrix *mean,
                          const pn_matrix *rstd, const pn_matrix *dy, pn_matrix *dx,
                          pn_matrix *dgamma, pn_matrix *dbeta)
{
    SAME_SHAPE("layernorm_backward", x, dy);
    if (dx) SAME_SHAPE("layernorm_backward", x, dx);
    SAME_SHAPE("layernorm_backward", gamma, dgamma);
    SAME_SHAPE("layernorm_backward", gamma, dbeta);
    DEVICES("layernorm_backward", x->device, gamma, mean, rstd, dy, dx, dgamma, dbeta);
    DISPATCH("layernorm_backward", x->device, layernorm_backward, x, gamma, mean, rstd, dy, dx,
             dgamma, dbeta);
}

int pn_gather_rows(const pn_matrix *table, const int *ids, pn_matrix *out)
{
    if (table->cols != out->cols) return shape_error("gather_rows", table, out);
    DEVICES("gather_rows", out->device, table);
    DISPATCH("gather_rows", out->device, gather_rows, table, ids, out);
}

int pn_scatter_add_rows(const pn_matrix *dout, const int *ids, pn_matrix *dtable)
{
    if (dtable->cols != dout->cols) return shape_error("scatter_add_rows", dout, dtable);
    DEVICES("scatter_add_rows", dtable->device, dout);
    DISPATCH("scatter_add_rows", dtable->device, scatter_add_rows, dout, ids, dtable);
}

int pn_seq_max_forward(const pn_matrix *x, int period, const int *lengths, pn_matrix *y,
                       int *arg)
{
    if (period < 1 || x->cols != y->cols || (long)y->rows * period != x->rows)
        return pn_error_set(PN_ERR_INTERNAL, "seq_max: %d x %d rows are not %d samples of %d",
                            x->rows, x->cols, y->rows, period);
    DEVICES("seq_max", y->device, x);
    DISPATCH("seq_max", y->device, seq_max_forward, x, period, lengths, y, arg);
}

int pn_seq_max_backward(const pn_matrix *dy, const int *arg, pn_matrix *dx)
{
    if (dx->cols != dy->cols) return shape_error("seq_max_backward", dy, dx);
    DEVICES("seq_max_backward", dx->device, dy);
    DISPATCH("seq_max_backward", dx->device, seq_max_backward, dy, arg, dx);
}

/* What both optimizer updates check of their rule: a known one, given the slots it
 * takes, Adam's bias corrections positive. */
static int check_rule(const char *op, const pn_update_hparams *hp, const pn_matrix *slot1,
                      const pn_matrix *slot2)
{
    if (hp->rule < PN_UPDATE_SGD || hp->rule > PN_UPDATE_ADAM)
        return pn_error_set(PN_ERR_INTERNAL, "%s: bad rule %d", op, (int)hp->rule);
    bool wants1 = hp->rule != PN_UPDATE_SGD, wants2 = hp->rule == PN_UPDATE_ADAM;
    if (!slot1 != !wants1 || !slot2 != !wants2)
        return pn_error_set(PN_ERR_INTERNAL, "%s: rule %d takes %d slot(s)", op, (int)hp->rule,
                            wants1 + wants2);
    if (wants2 && !(hp->bias1 > 0.0f && hp->bias2 > 0.0f))
        return pn_error_set(PN_ERR_INTERNAL, "%s: bias corrections must be > 0", op);
    return PN_OK;
}

int pn_optimizer_update(const pn_update_hparams *hp, pn_matrix *w, pn_matrix *g,
                        pn_matrix *slot1, pn_matrix *slot2)
{
    static const char *const op = "optimizer_update";
    PN_TRY(check_rule(op, hp, slot1, slot2));
    SAME_SHAPE(op, w, g);
    if (slot1) SAME_SHAPE(op, w, slot1);
    if (slot2) SAME_SHAPE(op, w, slot2);
    DEVICES(op, w->device, g, slot1, slot2);
    DISPATCH(op, w->device, optimizer_update, hp, w, g, slot1, slot2);
}

int pn_optimizer_update_rows(const pn_update_hparams *hp, pn_matrix *w, const int *ids,
                             pn_matrix *g, pn_matrix *slot1, pn_matrix *slot2)
{
    static const char *const op = "optimizer_update_rows";
    PN_TRY(check_rule(op, hp, slot1, slot2));
    if (g->cols != w->cols) return shape_error(op, g, w);
    if (slot1) SAME_SHAPE(op, w, slot1);
    if (slot2) SAME_SHAPE(op, w, slot2);
    DEVICES(op, w->device, g, slot1, slot2);
    DISPATCH(op, w->device, optimizer_update_rows, hp, w, ids, g, slot1, slot2);
}
