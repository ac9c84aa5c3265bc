/* A layer call over arguments stored as bf16 (pn_network_options.precision, the
 * planner's bf16 slots, arg_plan.h). Layers compute in fp32 on pn_matrix views, so
 * for one call the network widens the bf16 values and gradients the layer reads into
 * a fp32 work area (the stage's pn_grad_store.work, one layer call at a time), points
 * the arguments' matrices there, and afterwards narrows what the layer wrote back
 * into the slots. Narrowing rounds to bf16; what the layer wrote into an argument of
 * its own fp32 block is rounded in place, so that after every call of a bf16
 * network (planned or not) the output's value after a forward, and every input
 * gradient after a backward, hold bf16 values: the same bits either way.
 * Not widened: what the call does not read (a forward's output; a value its
 * backward does not read, pn_layer_type.backward_reads, whose slot the planner may
 * have given to another argument already; a stale gradient, which the layer writes
 * whole or pn_layer_backward zeroes). Not rounded: a backward's output gradient (the
 * layer's to scribble on; dead afterwards), values the caller supplies, the loss
 * seed. Layer scratch kept for backward stays fp32. Outside a call a bf16-stored
 * argument's matrix points at its bf16 slot: only this file reads it. */
#ifndef PN_ARG_BF16_H
#define PN_ARG_BF16_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/arg.h"
#include "math/buffer.h"
#include "net/arg_plan.h"
#include "net/graph.h"

/* One matrix a call sees through the work area: node's value or gradient. */
typedef struct pn_bf16_view {
    int node;
    bool grad;
    bool read;      /* widened before the call (a gradient: unless it is stale then) */
    void *stored;   /* its bf16 slot, while the call runs */
} pn_bf16_view;

/* At most a layer's inputs and output, value and gradient each. */
enum { PN_BF16_MAX_VIEWS = 2 * 64 + 2 };

typedef struct pn_bf16_frame {
    int n;
    pn_bf16_view v[PN_BF16_MAX_VIEWS];
} pn_bf16_frame;

/* Bytes of the work area the calls of the network planned as p need, batch samples
 * (the largest call's views, each aligned to 64 bytes); 0 when nothing is bf16. */
size_t pn_arg_plan_work_bytes(const pn_arg_plan *p, const pn_graph *g, int batch);

/* Before node's forward (backward): its bf16-stored arguments (args indexed like
 * g's nodes; p NULL: nothing is, the network is unplanned) pointed into work, the
 * read ones widened. */
int pn_bf16_call_begin(pn_bf16_frame *f, const pn_arg_plan *p, const pn_graph *g,
                       pn_arg *args, int node, bool backward, const pn_buffer *work);

/* After the call: what it wrote narrowed into the slots or rounded in place, and
 * every matrix pointed back at its slot (also when the call failed: then nothing is
 * converted and ok is false). */
int pn_bf16_call_end(pn_bf16_frame *f, const pn_graph *g, pn_arg *args, int node,
                     bool backward, bool ok);

#endif
