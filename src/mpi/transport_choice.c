/* Which transport a run's data plane takes (comm.h): the table of requests and the
 * decision from every rank's (node, GPU, NCCL), a pure function the tests call with
 * made-up layouts. */
#include "config.h"

#include "mpi/comm.h"

#include "base/error.h"
#include "math/cuda_module.h"

static const pn_choice request_items[] = {
    [PN_TRANSPORT_REQUEST_MPI] = {"mpi", "MPI; GPU memory is staged through the host"},
    [PN_TRANSPORT_REQUEST_NCCL] = {"nccl", "NCCL between GPUs, one GPU per rank (never run yet)"},
    [PN_TRANSPORT_REQUEST_AUTO] = {"auto", "mpi until the NCCL transport has run on GPUs"},
};
_Static_assert(sizeof request_items / sizeof *request_items == PN_TRANSPORT_REQUEST_AUTO + 1,
               "one line per pn_transport_request");
const pn_choices pn_transport_requests = {"a transport", PN_TRANSPORT_REQUEST_AUTO + 1,
                                          request_items};

int pn_transport_request_from_name(const char *name)
{
    return pn_choice_find(&pn_transport_requests, name);
}

const char *pn_transport_request_name(pn_transport_request r)
{
    return pn_choice_name(&pn_transport_requests, (int)r);
}

bool pn_transport_have_nccl(void) { return pn_cuda_module_built_with_nccl(); }

/* Whether two ranks of one node use one GPU: by its identity where both know it (the
 * index names different GPUs under different CUDA_VISIBLE_DEVICES), else by index. */
static bool same_gpu(const pn_rank_gpu *a, const pn_rank_gpu *b)
{
    if (a->id >= 0 && b->id >= 0) return a->id == b->id;
    return a->gpu == b->gpu;
}

/* The first two ranks of one communicator that share a GPU: ranks r and q are in one
 * pipe when r / stages == q / stages, in one replica group when r % stages == q %
 * stages. Quadratic, over a few thousand ranks at most, once per run. */
static bool shared_gpu(const pn_rank_gpu *ranks, int size, int stages, int *a, int *b)
{
    for (int r = 0; r < size; r++)
        for (int q = r + 1; q < size; q++) {
            bool together = r / stages == q / stages || r % stages == q % stages;
            if (together && ranks[r].node == ranks[q].node && same_gpu(&ranks[r], &ranks[q])) {
                *a = r, *b = q;
                return true;
            }
        }
    return false;
}

int pn_transport_choose(pn_transport_request r, const pn_rank_gpu *ranks, int size, int stages,
                        pn_transport_request *chosen)
{
    *chosen = PN_TRANSPORT_REQUEST_MPI;
    if (r == PN_TRANSPORT_REQUEST_MPI) return PN_OK;
    bool asked = r == PN_TRANSPORT_REQUEST_NCCL;
    static const char *const instead = "; use --transport mpi or auto";
    int lacking = -1, having = -1; /* the first rank without NCCL, and with it */
    for (int q = 0; q < size; q++) {
        if (!ranks[q].nccl && lacking < 0) lacking = q;
        if (ranks[q].nccl && having < 0) having = q;
    }
    if (lacking >= 0 && !asked) return PN_OK;
    if (lacking >= 0 && having < 0)
        return pn_error_set(PN_ERR_UNSUPPORTED, "transport nccl: this pipenet was built without "
                            "NCCL (./configure found none, or was given --without-nccl or "
                            "--without-cuda)%s", instead);
    if (lacking >= 0) /* another pipenet, or another CUDA module, on some node */
        return pn_error_set(PN_ERR_UNSUPPORTED, "transport nccl: rank %d has no NCCL transport "
                            "(its CUDA module was built without NCCL) while rank %d has one%s",
                            lacking, having, instead);
    for (int q = 0; q < size; q++)
        if (ranks[q].gpu < 0)
            return asked ? pn_error_set(PN_ERR_UNSUPPORTED,
                                        "transport nccl: rank %d trains on the cpu, and NCCL "
                                        "moves GPU memory only (--device cuda puts every rank "
                                        "on a GPU)%s", q, instead)
                         : PN_OK;
    int a, b;
    if (stages > 0 && shared_gpu(ranks, size, stages, &a, &b))
        return asked ? pn_error_set(PN_ERR_UNSUPPORTED,
                                    "transport nccl: ranks %d and %d share GPU %d of one node, "
                                    "and NCCL needs a GPU of its own for each rank of a "
                                    "communicator (%s); start at most one rank per GPU%s",
                                    a, b, ranks[a].gpu,
                                    a / stages == b / stages ? "both are stages of one replica"
                                                             : "both hold one stage",
                                    instead)
                     : PN_OK;
    /* auto: mpi until the NCCL transport has run on GPUs. It has run on the CUDA
     * stand-in (tools/cuda-sim), not on GPUs, and its links and bucket sums run on
     * several communicators at once, which NCCL allows only where the GPU runs their
     * kernels together: a default must not hang a job on that. */
    if (asked) *chosen = PN_TRANSPORT_REQUEST_NCCL;
    return PN_OK;
}
