/* The fused optimizer update on CUDA (pn_optimizer_update): one kernel per call, one
 * thread per element, running the CPU's per-element step (math/update_math.h) with
 * the coefficients resolved on the host the CPU's way. Never run on a GPU yet. */
#include "math/cuda/cuda_common.h"

extern "C" {
#include "math/update_math.h"
}

/* Absent slots are empty views. */
struct update_op {
    pn_update_rule rule;
    pn_update_coefs c;
    pn_matrix w, g, s1, s2;
    __device__ void operator()(long i, long j) const
    {
        float *wp = &pn_at(w, i, j), *gp = &pn_at(g, i, j);
        switch (rule) {
        case PN_UPDATE_SGD: *wp = pn_update_sgd(&c, *wp, *gp); break;
        case PN_UPDATE_MOMENTUM: *wp = pn_update_momentum(&c, *wp, *gp, &pn_at(s1, i, j)); break;
        case PN_UPDATE_ADAM:
            *wp = pn_update_adam(&c, *wp, *gp, &pn_at(s1, i, j), &pn_at(s2, i, j));
            break;
        }
        *gp = 0.0f;
    }
};

int pn_cuda_optimizer_update(const pn_update_hparams *hp, pn_matrix *w, pn_matrix *g,
                             pn_matrix *slot1, pn_matrix *slot2)
{
    if (hp->rule != PN_UPDATE_SGD && hp->rule != PN_UPDATE_MOMENTUM && hp->rule != PN_UPDATE_ADAM)
        return pn_error_set(PN_ERR_INTERNAL, "optimizer_update: bad rule %d", (int)hp->rule);
    pn_matrix none = {0};
    return pn_map2d(w->rows, w->cols,
                    update_op{hp->rule, pn_update_coefs_of(hp), *w, *g, slot1 ? *slot1 : none,
                              slot2 ? *slot2 : none});
}

/* The row-sparse update: element (k, j) is row ids[k] of w and the slots, row k of g;
 * ids are unique, so no two threads share an element. */
struct update_rows_op {
    pn_update_rule rule;
    pn_update_coefs c;
    pn_matrix w, g, s1, s2;
    const int *ids;
    unsigned long long *fault;
    __device__ void operator()(long k, long j) const
    {
        int i = ids[k];
        if (i < 0 || i >= w.rows) {
            if (j == 0) pn_cuda_fault(fault, (int)k, i);
            return;
        }
        float *wp = &pn_at(w, i, j), *gp = &pn_at(g, k, j);
        switch (rule) {
        case PN_UPDATE_SGD: *wp = pn_update_sgd(&c, *wp, *gp); break;
        case PN_UPDATE_MOMENTUM: *wp = pn_update_momentum(&c, *wp, *gp, &pn_at(s1, i, j)); break;
        case PN_UPDATE_ADAM:
            *wp = pn_update_adam(&c, *wp, *gp, &pn_at(s1, i, j), &pn_at(s2, i, j));
            break;
        }
        *gp = 0.0f;
    }
};

int pn_cuda_optimizer_update_rows(const pn_update_hparams *hp, pn_matrix *w, const int *ids,
                                  pn_matrix *g, pn_matrix *slot1, pn_matrix *slot2)
{
    if (g->rows == 0) return PN_OK;
    unsigned long long *fault;
    PN_TRY(pn_cuda_fault_ptr(&fault));
    pn_matrix none = {0};
    PN_TRY(pn_map2d(g->rows, g->cols,
                    update_rows_op{hp->rule, pn_update_coefs_of(hp), *w, *g,
                                   slot1 ? *slot1 : none, slot2 ? *slot2 : none, ids, fault}));
    bool hit;
    int row, value;
    PN_TRY(pn_cuda_fault_take(&hit, &row, &value));
    if (hit)
        return pn_error_set(PN_ERR_INVALID, "id %d at row %d is outside [0, %d)", value, row,
                            w->rows);
    return PN_OK;
}
