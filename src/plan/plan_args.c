/* What the activation memory planner (arg_plan.h) saves, for `pipenet plan`: each
 * stage's argument bytes (values and gradients of its networks) with every
 * argument in its own block and as planned, the way the stage runtime builds them;
 * in bf16, the slots' bf16 bytes and the fp32 work area apart (arg_bf16.h). */
#include "plan/plan.h"

#include <stdlib.h>

#include "base/error.h"
#include "net/arg_bf16.h"
#include "net/arg_plan.h"

int pn_plan_arg_bytes(const pn_plan *p, const pn_graph *g, const pn_schedule *s, int stage,
                      int micro_batch, bool recompute, double *own, double *shared,
                      double *work)
{
    bool *member = calloc((size_t)g->n_nodes, sizeof *member);
    double *store = calloc((size_t)g->n_nodes, sizeof *store); /* no more slots than nodes */
    int rc = member && store ? PN_OK : pn_error_set(PN_ERR_NOMEM, "out of memory");
    double mb = micro_batch, most = 0.0;
    *own = *shared = 0.0;
    for (int c = stage; rc == PN_OK && c < p->chunks; c += p->stages) {
        for (int i = 0; i < g->n_nodes; i++) member[i] = p->chunk_of[i] == c;
        pn_arg_plan ap;
        if ((rc = pn_arg_plan_make(&ap, g, member, true, p->precision)) < 0) break;
        size_t all, values, grads;
        pn_arg_plan_bytes(&ap, g, true, &all, &values, &grads);
        int nets = recompute ? 1 : pn_schedule_peak_in_flight_chunk(s, stage, c / p->stages);
        *own += (double)all * mb * nets;
        *shared += (double)(values + grads) * mb * nets;
        for (int k = 0; k < ap.n_grad_slots; k++) /* one store for the stage's networks */
            if ((double)ap.grad_slot_bytes[k] * mb > store[k])
                store[k] = (double)ap.grad_slot_bytes[k] * mb;
        double w = (double)pn_arg_plan_work_bytes(&ap, g, micro_batch); /* one area too */
        if (w > most) most = w;
        pn_arg_plan_free(&ap);
    }
    for (int k = 0; rc == PN_OK && k < g->n_nodes; k++) *shared += store[k];
    if (work) *work = most;
    free(member);
    free(store);
    return rc;
}

int pn_plan_print_arg_memory(const pn_plan *p, const pn_graph *g, const pn_schedule *s,
                             int micro_batch, FILE *out)
{
    double mib = 1024.0 * 1024.0;
    bool bf16 = p->precision == PN_PRECISION_BF16;
    fprintf(out, "activation memory planner (`train --no-share-memory` turns it off): the\n"
                 "arguments of a stage's networks (values and gradients, micro-batches of %d)%s\n",
            micro_batch,
            bf16 ? ";\nbf16: shared slots in bf16, and the fp32 work area of a layer call" : "");
    for (int st = 0; st < p->stages; st++) {
        double own, shared, work, own_re, shared_re, work_re;
        PN_TRY(pn_plan_arg_bytes(p, g, s, st, micro_batch, false, &own, &shared, &work));
        PN_TRY(pn_plan_arg_bytes(p, g, s, st, micro_batch, true, &own_re, &shared_re,
                                 &work_re));
        if (!bf16) {
            fprintf(out, "  stage %d: %.2f MiB each in its own block, %.2f MiB shared (%+.1f%%); "
                         "--recompute %.2f -> %.2f MiB\n",
                    st, own / mib, shared / mib, own > 0 ? 100.0 * (shared - own) / own : 0.0,
                    own_re / mib, shared_re / mib);
            continue;
        }
        double total = shared + work;
        fprintf(out, "  stage %d: %.2f MiB each in its own block, %.2f MiB shared (bf16) + "
                     "work %.2f MiB (%+.1f%%); --recompute %.2f -> %.2f + %.2f MiB\n",
                st, own / mib, shared / mib, work / mib,
                own > 0 ? 100.0 * (total - own) / own : 0.0, own_re / mib, shared_re / mib,
                work_re / mib);
    }
    return PN_OK;
}
