/* Row-wise and reduction CPU kernels: bias, sums, softmax, losses, layer norm,
 * row gathers for embeddings. Sums that decide a result accumulate in double. What
 * a value is made of once a row's sums are known is math/row_math.h, shared with
 * the CUDA kernels. */
#include <float.h>
#include <math.h>

#include "base/error.h"
#include "math/act_math.h"
#include "math/row_math.h"
#include "math/cpu/cpu_kernels.h"

PN_VECTOR_CLONES int pn_cpu_add_row_vector(const pn_matrix *v, pn_matrix *m)
{
    const float *vr = v->data;
    for (int i = 0; i < m->rows; i++) {
        float *r = pn_cpu_row(m, i);
        for (int j = 0; j < m->cols; j++) r[j] += vr[j];
    }
    return PN_OK;
}

PN_VECTOR_CLONES int pn_cpu_col_sums(const pn_matrix *m, float beta, pn_matrix *out)
{
    float *o = out->data;
    for (int j = 0; j < out->cols; j++) o[j] = beta == 0.0f ? 0.0f : beta * o[j];
    for (int i = 0; i < m->rows; i++) {
        const float *r = pn_cpu_row(m, i);
        for (int j = 0; j < m->cols; j++) o[j] += r[j];
    }
    return PN_OK;
}

/* 64 running sums per row: independent lanes the compiler turns into a few vector
 * registers (one scalar sum is a chain of dependent adds, ~4 cycles per float). */
enum { SQUARE_LANES = 64 };

PN_VECTOR_CLONES int pn_cpu_sum_squares(const pn_matrix *m, double *out)
{
    double total = 0.0;
    for (int i = 0; i < m->rows; i++) {
        const float *r = pn_cpu_row(m, i);
        float lanes[SQUARE_LANES] = {0.0f}, part = 0.0f;
        int j = 0;
        for (; j + SQUARE_LANES <= m->cols; j += SQUARE_LANES)
            for (int k = 0; k < SQUARE_LANES; k++) lanes[k] += r[j + k] * r[j + k];
        for (; j < m->cols; j++) part += r[j] * r[j];
        for (int k = 0; k < SQUARE_LANES; k++) part += lanes[k];
        total += part;
    }
    *out = total;
    return PN_OK;
}

/* Softmax's max and sum run in SOFTMAX_LANES independent lanes (vector registers);
 * a single running max or sum is a chain the compiler may not reorder. */
enum { SOFTMAX_LANES = 16 };

/* fmaxf(m, v) for an m that is never NaN, without the call: gcc keeps fmaxf a libm
 * call unless math is finite-only (about 24 calls per causal row of T = 64); this
 * is one maxss. Equal to fmaxf but for the sign of a zero maximum, which no result
 * below depends on (x - (+-0) and exp(+-0) do not tell them apart). */
static inline float max_skipping_nan(float m, float v) { return v > m ? v : m; }

PN_VECTOR_CLONES int pn_cpu_softmax_rows(const pn_matrix *x, float scale, int causal_period, pn_matrix *y)
{
    for (int i = 0; i < y->rows; i++) {
        const float *xr = pn_cpu_row(x, i);
        float *yr = pn_cpu_row(y, i);
        int n = pn_rm_causal_cols(i, causal_period, y->cols), j = 0;
        float lanes[SOFTMAX_LANES], max = -FLT_MAX, sum = 0.0f;
        for (int k = 0; k < SOFTMAX_LANES; k++) lanes[k] = -FLT_MAX;
        for (; j + SOFTMAX_LANES <= n; j += SOFTMAX_LANES)
            for (int k = 0; k < SOFTMAX_LANES; k++) {
                float v = scale * xr[j + k];
                int more = v > lanes[k]; /* NaN is skipped here, as by fmaxf */
                lanes[k] = pn_am_where(more, v, lanes[k]);
            }
        /* a causal row's tail: the whole block when the row holds it, the columns
         * past n masked (x or y may hold anything there; y's are zeroed below) */
        int whole = j < n && j + SOFTMAX_LANES <= y->cols ? j + SOFTMAX_LANES : n;
        if (whole > n) {
            for (int k = 0; k < SOFTMAX_LANES; k++) {
                float v = pn_am_where(j + k < n, scale * xr[j + k], -FLT_MAX);
                lanes[k] = pn_am_where(v > lanes[k], v, lanes[k]);
            }
            j = n;
        }
        for (; j < n; j++) max = max_skipping_nan(max, scale * xr[j]);
        for (int h = SOFTMAX_LANES / 2; h > 0; h /= 2) /* a tree: the max is any order's */
            for (int k = 0; k < h; k++) lanes[k] = max_skipping_nan(lanes[k], lanes[k + h]);
        max = max_skipping_nan(max, lanes[0]);
        for (j = 0; j < whole; j++) yr[j] = pn_am_exp(scale * xr[j] - max);
        for (int k = 0; k < SOFTMAX_LANES; k++) lanes[k] = 0.0f;
        for (j = 0; j + SOFTMAX_LANES <= n; j += SOFTMAX_LANES)
            for (int k = 0; k < SOFTMAX_LANES; k++) lanes[k] += yr[j + k];
        for (; j < n; j++) sum += yr[j];
        for (int k = 0; k < SOFTMAX_LANES; k++) sum += lanes[k];
        float inv = 1.0f / sum;
        for (j = 0; j < whole; j++) yr[j] = pn_am_where(j < n, yr[j] * inv, 0.0f);
        for (j = whole; j < y->cols; j++) yr[j] = 0.0f;
    }
    return PN_OK;
}

static int check_label(int label, int classes, int row)
{
    if (label < 0 || label >= classes)
        return pn_error_set(PN_ERR_INVALID, "label %d at row %d is outside [0, %d)", label, row,
                            classes);
    return PN_OK;
}

/* The first column holding the row's largest value, as the scan `if (p[j] >
 * p[best]) best = j` finds it (NaN never wins; a NaN in column 0 keeps 0), in two
 * vectorized passes: the maximum in lanes, then its first column. The scan's
 * branch per element was most of xent_forward (256 classes per row). */
static inline int row_argmax(const float *restrict p, int n)
{
    if (!(p[0] == p[0])) return 0;
    float lanes[SOFTMAX_LANES], max = p[0];
    for (int k = 0; k < SOFTMAX_LANES; k++) lanes[k] = p[0];
    int j = 0;
    for (; j + SOFTMAX_LANES <= n; j += SOFTMAX_LANES)
        for (int k = 0; k < SOFTMAX_LANES; k++)
            lanes[k] = pn_am_where(p[j + k] > lanes[k], p[j + k], lanes[k]);
    for (; j < n; j++) max = max_skipping_nan(max, p[j]);
    for (int k = 0; k < SOFTMAX_LANES; k++) max = max_skipping_nan(max, lanes[k]);
    for (j = 0; j < n; j++)
        if (p[j] == max) break;
    return j;
}

PN_VECTOR_CLONES int pn_cpu_xent_forward(const pn_matrix *probs, const int *labels,
                                         pn_matrix *loss, double *correct)
{
    double hits = 0.0;
    for (int i = 0; i < probs->rows; i++) {
        const float *p = pn_cpu_row(probs, i);
        PN_TRY(check_label(labels[i], probs->cols, i));
        hits += row_argmax(p, probs->cols) == labels[i];
        loss->data[(size_t)i * (size_t)loss->ld] = pn_rm_xent_loss(p[labels[i]]);
    }
    *correct = hits;
    return PN_OK;
}

int pn_cpu_xent_backward(const pn_matrix *probs, const int *labels, const pn_matrix *dloss,
                         float beta, pn_matrix *dlogits)
{
    for (int i = 0; i < probs->rows; i++) {
        const float *p = pn_cpu_row(probs, i);
        float *d = pn_cpu_row(dlogits, i);
        float g = dloss->data[(size_t)i * (size_t)dloss->ld];
        PN_TRY(check_label(labels[i], probs->cols, i));
        for (int j = 0; j < probs->cols; j++) {
            d[j] = pn_am_accum(beta, d[j], pn_rm_xent_grad(g, p[j], j == labels[i]));
        }
    }
    return PN_OK;
}

int pn_cpu_mse_forward(const pn_matrix *p, const pn_matrix *t, pn_matrix *loss)
{
    for (int i = 0; i < p->rows; i++) {
        const float *pr = pn_cpu_row(p, i), *tr = pn_cpu_row(t, i);
        double s = 0.0;
        for (int j = 0; j < p->cols; j++) {
            double d = (double)pr[j] - tr[j];
            s += d * d;
        }
        loss->data[(size_t)i * (size_t)loss->ld] = (float)(s / p->cols);
    }
    return PN_OK;
}

int pn_cpu_mse_backward(const pn_matrix *p, const pn_matrix *t, const pn_matrix *dloss,
                        pn_matrix *dp, pn_matrix *dt)
{
    for (int i = 0; i < p->rows; i++) {
        const float *pr = pn_cpu_row(p, i), *tr = pn_cpu_row(t, i);
        float g = pn_rm_mse_factor(dloss->data[(size_t)i * (size_t)dloss->ld], p->cols);
        float *dpr = dp ? pn_cpu_row(dp, i) : NULL, *dtr = dt ? pn_cpu_row(dt, i) : NULL;
        for (int j = 0; j < p->cols; j++) {
            float v = g * (pr[j] - tr[j]);
            if (dpr) dpr[j] += v;
            if (dtr) dtr[j] -= v;
        }
    }
    return PN_OK;
}

/* Layer norm's row sums stay in double (as before) but run in LN_LANES independent
 * double lanes, which the compiler keeps in vector registers: one running double
 * sum is a chain of dependent adds and left the kernel ~4x slower. The lanes change
 * the order of the double additions, not their precision. */
enum { LN_LANES = 16 };

/* Helpers of the cloned kernels are inlined into each clone (a helper compiled on
 * its own gets the baseline's SSE code). */
#if defined(__GNUC__)
#define LN_INLINE static inline __attribute__((always_inline))
#else
#define LN_INLINE static inline
#endif

LN_INLINE double lanes_total(const double *lanes)
{
    double s = 0.0;
    for (int k = 0; k < LN_LANES; k++) s += lanes[k];
    return s;
}

/* sum_j x[j] in double. */
LN_INLINE double row_sum(const float *restrict x, int n)
{
    double lanes[LN_LANES] = {0.0}, s = 0.0;
    int j = 0;
    for (; j + LN_LANES <= n; j += LN_LANES)
        for (int k = 0; k < LN_LANES; k++) lanes[k] += x[j + k];
    for (; j < n; j++) s += x[j];
    return s + lanes_total(lanes);
}

/* sum_j (x[j] - mu)^2 in double, the difference rounded to float first. */
LN_INLINE double row_sq_dev(const float *restrict x, float mu, int n)
{
    double lanes[LN_LANES] = {0.0}, s = 0.0;
    int j = 0;
    for (; j + LN_LANES <= n; j += LN_LANES)
        for (int k = 0; k < LN_LANES; k++) {
            double d = x[j + k] - mu;
            lanes[k] += d * d;
        }
    for (; j < n; j++) {
        double d = x[j] - mu;
        s += d * d;
    }
    return s + lanes_total(lanes);
}

PN_VECTOR_CLONES int pn_cpu_layernorm_forward(const pn_matrix *x, const pn_matrix *gamma,
                                              const pn_matrix *beta, float eps, pn_matrix *y,
                                              pn_matrix *mean, pn_matrix *rstd)
{
    int n = x->cols;
    const float *restrict g = gamma->data, *restrict b = beta->data;
    for (int i = 0; i < x->rows; i++) {
        const float *restrict xr = pn_cpu_row(x, i);
        float *restrict yr = pn_cpu_row(y, i);
        float mu = (float)(row_sum(xr, n) / n);
        float rs = pn_rm_rstd(row_sq_dev(xr, mu, n), n, eps);
        for (int j = 0; j < n; j++) yr[j] = pn_rm_layernorm_y(xr[j], mu, rs, g[j], b[j]);
        mean->data[(size_t)i * (size_t)mean->ld] = mu;
        rstd->data[(size_t)i * (size_t)rstd->ld] = rs;
    }
    return PN_OK;
}

/* One row's share of dgamma and dbeta, and its sums of g = dy * gamma and of
 * g * xhat (in double lanes, see LN_LANES; a separate loop, as gcc vectorizes
 * neither half of the fused one). */
LN_INLINE void row_param_grads(const float *restrict xr, const float *restrict dyr,
                                   const float *restrict gam, float mu, float rs, int n,
                                   float *restrict dgam, float *restrict dbet, double *sum_g,
                                   double *sum_gx)
{
    for (int j = 0; j < n; j++) {
        dgam[j] += dyr[j] * pn_rm_xhat(xr[j], mu, rs);
        dbet[j] += dyr[j];
    }
    double lg[LN_LANES] = {0.0}, lgx[LN_LANES] = {0.0}, sg = 0.0, sgx = 0.0;
    int j = 0;
    for (; j + LN_LANES <= n; j += LN_LANES)
        for (int k = 0; k < LN_LANES; k++) {
            float xhat = pn_rm_xhat(xr[j + k], mu, rs), g = dyr[j + k] * gam[j + k];
            lg[k] += g;
            lgx[k] += (double)g * xhat;
        }
    for (; j < n; j++) {
        float xhat = pn_rm_xhat(xr[j], mu, rs), g = dyr[j] * gam[j];
        sg += g;
        sgx += (double)g * xhat;
    }
    *sum_g = sg + lanes_total(lg);
    *sum_gx = sgx + lanes_total(lgx);
}

PN_VECTOR_CLONES int pn_cpu_layernorm_backward(const pn_matrix *x, const pn_matrix *gamma,
                                               const pn_matrix *mean, const pn_matrix *rstd,
                                               const pn_matrix *dy, pn_matrix *dx,
                                               pn_matrix *dgamma, pn_matrix *dbeta)
{
    int n = x->cols;
    const float *restrict gam = gamma->data;
    float *restrict dgam = dgamma->data, *restrict dbet = dbeta->data;
    for (int i = 0; i < x->rows; i++) {
        const float *restrict xr = pn_cpu_row(x, i), *restrict dyr = pn_cpu_row(dy, i);
        float mu = mean->data[(size_t)i * (size_t)mean->ld];
        float rs = rstd->data[(size_t)i * (size_t)rstd->ld];
        double sum_g, sum_gx; /* sums of dxhat and dxhat * xhat */
        row_param_grads(xr, dyr, gam, mu, rs, n, dgam, dbet, &sum_g, &sum_gx);
        if (!dx) continue;
        float mg = (float)(sum_g / n), mgx = (float)(sum_gx / n);
        float *restrict dxr = pn_cpu_row(dx, i);
        for (int j = 0; j < n; j++) {
            float xhat = pn_rm_xhat(xr[j], mu, rs), g = dyr[j] * gam[j];
            dxr[j] += pn_rm_layernorm_dx(rs, g, mg, xhat, mgx);
        }
    }
    return PN_OK;
}

int pn_cpu_gather_rows(const pn_matrix *table, const int *ids, pn_matrix *out)
{
    for (int i = 0; i < out->rows; i++) {
        if (ids[i] < 0 || ids[i] >= table->rows)
            return pn_error_set(PN_ERR_INVALID, "id %d at row %d is outside [0, %d)", ids[i], i,
                                table->rows);
        const float *src = pn_cpu_row(table, ids[i]);
        float *dst = pn_cpu_row(out, i);
        for (int j = 0; j < out->cols; j++) dst[j] = src[j];
    }
    return PN_OK;
}

int pn_cpu_scatter_add_rows(const pn_matrix *dout, const int *ids, pn_matrix *dtable)
{
    for (int i = 0; i < dout->rows; i++) {
        if (ids[i] < 0 || ids[i] >= dtable->rows)
            return pn_error_set(PN_ERR_INVALID, "id %d at row %d is outside [0, %d)", ids[i], i,
                                dtable->rows);
        const float *src = pn_cpu_row(dout, i);
        float *dst = pn_cpu_row(dtable, ids[i]);
        for (int j = 0; j < dout->cols; j++) dst[j] += src[j];
    }
    return PN_OK;
}

int pn_cpu_seq_max_forward(const pn_matrix *x, int period, const int *lengths, pn_matrix *y,
                           int *arg)
{
    for (int b = 0; b < y->rows; b++) {
        int len = lengths ? lengths[b] : period, first = b * period;
        if (len < 1 || len > period)
            return pn_error_set(PN_ERR_INVALID, "seq_max: sample %d has length %d, outside "
                                "[1, %d]", b, len, period);
        float *yr = pn_cpu_row(y, b);
        int *ar = arg + (size_t)b * (size_t)y->cols;
        const float *x0 = pn_cpu_row(x, first);
        for (int j = 0; j < y->cols; j++) yr[j] = x0[j], ar[j] = first;
        for (int t = 1; t < len; t++) {
            const float *xr = pn_cpu_row(x, first + t);
            for (int j = 0; j < y->cols; j++)
                if (xr[j] > yr[j]) yr[j] = xr[j], ar[j] = first + t;
        }
    }
    return PN_OK;
}

int pn_cpu_seq_max_backward(const pn_matrix *dy, const int *arg, pn_matrix *dx)
{
    for (int b = 0; b < dy->rows; b++) {
        const float *dyr = pn_cpu_row(dy, b);
        const int *ar = arg + (size_t)b * (size_t)dy->cols;
        for (int j = 0; j < dy->cols; j++) {
            if (ar[j] < 0 || ar[j] >= dx->rows)
                return pn_error_set(PN_ERR_INVALID, "seq_max_backward: row %d outside [0, %d)",
                                    ar[j], dx->rows);
            pn_cpu_row(dx, ar[j])[j] += dyr[j];
        }
    }
    return PN_OK;
}
