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
