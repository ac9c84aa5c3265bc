/* pn_arg_plan: the activation memory planner (MXNet's executor planning, Paddle's
 * memory reuse). From a network's nodes, their layer types and the order a training
 * network runs them (forwards in topological order, then backwards in reverse), it
 * gives each argument's value and gradient a storage slot, so that arguments whose
 * lifetimes do not overlap share one block:
 *  - a value lives from its layer's forward to its last reader: the forwards of its
 *    consumers, and the backwards that read it (pn_layer_type.backward_reads; a type
 *    that does not say is taken to read every value);
 *  - a gradient lives from the first backward that writes it (its last consumer's;
 *    or the backward's start, for a loss's seed and what later stages send) to its
 *    own layer's backward;
 *  - an element-wise layer (pn_layer_type.in_place) whose input dies with it writes
 *    its output over that input.
 * Arguments the caller reads or fills outside the passes keep their own blocks: the
 * inputs supplied to the network, values sent to other stages, outputs nothing here
 * consumes, ids and sparse edges. Gradients are dead between backwards, so every
 * network of a stage (micro-batches in flight, chunks) takes them from one
 * pn_grad_store; values stay per network. Pure: no memory is touched here.
 * Under PN_PRECISION_BF16 a slot stores its occupants as bf16 (2 bytes an element),
 * but for the gradients written outside a layer call (a loss's seed, what a later
 * stage sends), which stay fp32 in theirs; a layer computes on fp32 copies of them in
 * a work area (net/arg_bf16.h). Arguments in their own blocks stay fp32. */
#ifndef PN_ARG_PLAN_H
#define PN_ARG_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "math/buffer.h"
#include "math/precision.h"
#include "net/graph.h"

typedef struct pn_arg_plan {
    int n_nodes;               /* the graph's */
    bool *held;                /* [n_nodes]: the network holds node's argument */
    int *value_slot;           /* [n_nodes]: slot of node's value, -1: its own block */
    int *grad_slot;            /* [n_nodes]: slot of node's gradient, -1: its own */
    int n_value_slots, n_grad_slots;
    size_t *value_slot_bytes;  /* [n_value_slots]: bytes per sample (the largest user) */
    size_t *grad_slot_bytes;   /* [n_grad_slots] */
    pn_precision precision;
    bool *value_bf16;          /* [n_nodes]: node's value is stored as bf16 in its slot */
    bool *grad_bf16;           /* [n_nodes]: the same for its gradient */
} pn_arg_plan;

/* Plans the arguments of the network over member's nodes of g (NULL: all) and the
 * nodes they consume; with_grad: a training network (else nothing has a gradient,
 * and values live for the forward only); precision: how slots store floats. */
int pn_arg_plan_make(pn_arg_plan *p, const pn_graph *g, const bool *member, bool with_grad,
                     pn_precision precision);
void pn_arg_plan_free(pn_arg_plan *p);

/* Per sample, the network's argument bytes (values and gradients of float edges)
 * with every argument in its own block (*own, fp32 in either precision), and as
 * planned (*values: own values and value slots; *grads: own gradients; the gradient
 * slots, shared with other networks, are p->grad_slot_bytes). Under bf16 the slots'
 * bytes are bf16's; the work area is pn_arg_plan_work_bytes (arg_bf16.h). */
void pn_arg_plan_bytes(const pn_arg_plan *p, const pn_graph *g, bool with_grad, size_t *own,
                       size_t *values, size_t *grads);

/* Whether l's backward reads the value of its input k (k = -1: its output), as its
 * type's backward_reads says (a type that does not say reads them all). */
bool pn_arg_plan_reads(const pn_layer *l, int k);

/* The gradient slots every network of a stage shares: slot i holds the largest
 * block any network asked for; and, under bf16, the fp32 work area a layer call
 * computes in (arg_bf16.h), one layer at a time for all of them. */
typedef struct pn_grad_store {
    pn_device device;
    int n;
    pn_buffer *bufs;
    pn_buffer work;
} pn_grad_store;

void pn_grad_store_init(pn_grad_store *s, pn_device dev);
/* Makes slot i hold at least bytes (growing the table of slots as needed); a grown
 * block moves, so the networks take their views again (pn_network_backward_begin). */
int pn_grad_store_reserve(pn_grad_store *s, int i, size_t bytes);
/* Makes the work area hold at least bytes (it only grows). */
int pn_grad_store_reserve_work(pn_grad_store *s, size_t bytes);
/* Bytes of the slots; of the work area. */
size_t pn_grad_store_bytes(const pn_grad_store *s);
size_t pn_grad_store_work_bytes(const pn_grad_store *s);
void pn_grad_store_free(pn_grad_store *s);

#endif
