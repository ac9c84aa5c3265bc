/* The activation memory planner (arg_plan.h): lifetimes on one clock, forwards at
 * times 0..N-1 (a node's index), the backwards' start at N, node i's backward at
 * 2N - i; slots handed out greedily, best fit, in order of birth. */
#include "net/arg_plan.h"

#include <stdint.h>
#include <stdlib.h>

#include "base/error.h"

/* What the planner knows of one node. */
typedef struct node_facts {
    bool held, computed, floats;
    bool outside;   /* a node outside the network consumes it (a link sends it) */
    int last_use;   /* the last member consumer's index, -1: none */
    int value_end;  /* the last time its value is read */
} node_facts;

bool pn_arg_plan_reads(const pn_layer *l, int k)
{
    return !l->type->backward_reads || l->type->backward_reads(l, k);
}

static bool reads(const pn_layer *l, int k) { return pn_arg_plan_reads(l, k); }

/* Bytes of one sample of shape in a slot: bf16's or fp32's. */
static size_t slot_bytes(pn_shape shape, bool bf16)
{
    return bf16 ? pn_shape_bytes(shape) / sizeof(float) * sizeof(uint16_t) : pn_shape_bytes(shape);
}

static void learn(node_facts *f, const pn_graph *g, const bool *member, bool with_grad)
{
    int n = g->n_nodes;
    for (int i = 0; i < n; i++) {
        f[i] = (node_facts){.last_use = -1, .value_end = i};
        const pn_shape *s = &g->nodes[i].layer->out_shape;
        f[i].floats = !s->ids && !s->sparse && s->width > 0;
    }
    for (int j = 0; j < n; j++) {
        const pn_graph_node *gn = &g->nodes[j];
        bool in = !member || member[j];
        if (in) f[j].held = true;
        f[j].computed = in && !gn->is_input;
        if (f[j].computed && with_grad && reads(gn->layer, -1) && 2 * n - j > f[j].value_end)
            f[j].value_end = 2 * n - j;
        for (int k = 0; k < gn->n_inputs; k++) {
            node_facts *x = &f[gn->inputs[k]];
            if (!in) {
                x->outside = true;
                continue;
            }
            x->held = true;
            if (j > x->last_use) x->last_use = j;
            int end = with_grad && reads(gn->layer, k) ? 2 * n - j : j;
            if (end > x->value_end) x->value_end = end;
        }
    }
}

/* Whether node i's value may live in a slot: computed here, read only by this
 * network's passes, and not a loss (whose value the stage reads after forward). */
static bool value_shared(const node_facts *f, const pn_graph *g, int i)
{
    return f[i].computed && f[i].floats && !f[i].outside && f[i].last_use >= 0 &&
           !g->nodes[i].layer->type->is_loss;
}

static bool has_grad(const node_facts *f, const pn_graph *g, int i, bool with_grad)
{
    return with_grad && f[i].held && f[i].floats && g->nodes[i].needs_grad;
}

/* Slots: size and the last time an occupant is alive. */
typedef struct slots {
    int n;
    size_t *bytes;
    int *end;
} slots;

/* The free slot (end < start) that fits best (the smallest that holds need, else
 * the largest), or a new one. -1: out of memory. */
static int take_slot(slots *s, size_t need, int start, int end)
{
    int best = -1;
    for (int k = 0; k < s->n; k++) {
        if (s->end[k] >= start) continue;
        bool fits = s->bytes[k] >= need;
        if (best < 0) {
            best = k;
            continue;
        }
        bool best_fits = s->bytes[best] >= need;
        if (fits ? !best_fits || s->bytes[k] < s->bytes[best]
                 : !best_fits && s->bytes[k] > s->bytes[best])
            best = k;
    }
    if (best < 0) {
        size_t *b = realloc(s->bytes, (size_t)(s->n + 1) * sizeof *b);
        if (b) s->bytes = b;
        int *e = b ? realloc(s->end, (size_t)(s->n + 1) * sizeof *e) : NULL;
        if (!e) return -1;
        s->end = e;
        best = s->n++;
        s->bytes[best] = 0;
    }
    if (need > s->bytes[best]) s->bytes[best] = need;
    s->end[best] = end;
    return best;
}

/* Node i runs in place over its first input: an in-place type whose input's value
 * dies at i's forward, in a slot whose last occupant is that input. */
static int in_place_slot(const pn_arg_plan *p, const node_facts *f, const slots *s,
                         const pn_graph *g, int i)
{
    const pn_graph_node *gn = &g->nodes[i];
    const pn_layer *l = gn->layer;
    if (!l->type->in_place || !l->type->in_place(l) || gn->n_inputs < 1) return -1;
    int x = gn->inputs[0], slot = p->value_slot[x];
    if (slot < 0 || f[x].value_end != i || s->end[slot] != i) return -1;
    for (int k = 1; k < gn->n_inputs; k++)
        if (gn->inputs[k] == x) return -1;
    return pn_shape_bytes(g->nodes[x].layer->out_shape) == pn_shape_bytes(l->out_shape) ? slot
                                                                                         : -1;
}

static int plan_values(pn_arg_plan *p, const node_facts *f, const pn_graph *g, slots *s)
{
    for (int i = 0; i < g->n_nodes; i++) {
        if (!value_shared(f, g, i)) continue;
        p->value_bf16[i] = p->precision == PN_PRECISION_BF16;
        size_t need = slot_bytes(g->nodes[i].layer->out_shape, p->value_bf16[i]);
        int slot = in_place_slot(p, f, s, g, i);
        if (slot >= 0)
            s->end[slot] = f[i].value_end;
        else if ((slot = take_slot(s, need, i, f[i].value_end)) < 0)
            return pn_error_set(PN_ERR_NOMEM, "out of memory planning activations");
        p->value_slot[i] = slot;
    }
    return PN_OK;
}

static int by_start(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

/* Gradients in order of birth: the backward's start (N) for what the stage writes
 * there (a loss's seed, what a later stage sent) or nothing here consumes, else the
 * backward of the last consumer (which runs first). */
static int plan_grads(pn_arg_plan *p, const node_facts *f, const pn_graph *g, slots *s)
{
    int n = g->n_nodes, m = 0;
    int *order = malloc((size_t)(n ? n : 1) * 2 * sizeof *order);
    if (!order) return pn_error_set(PN_ERR_NOMEM, "out of memory planning activations");
    for (int i = 0; i < n; i++) {
        if (!f[i].computed || !has_grad(f, g, i, true)) continue;
        bool at_begin = f[i].outside || f[i].last_use < 0 || g->nodes[i].layer->type->is_loss;
        order[2 * m] = at_begin ? n : 2 * n - f[i].last_use;
        order[2 * m + 1] = i;
        m++;
        /* what the stage writes (a later stage's gradient) or seeds stays fp32 */
        p->grad_bf16[i] = p->precision == PN_PRECISION_BF16 && !f[i].outside &&
                          !g->nodes[i].layer->type->is_loss;
    }
    qsort(order, (size_t)m, 2 * sizeof *order, by_start);
    int rc = PN_OK;
    for (int k = 0; k < m && rc == PN_OK; k++) {
        int i = order[2 * k + 1];
        int slot = take_slot(s, slot_bytes(g->nodes[i].layer->out_shape, p->grad_bf16[i]),
                             order[2 * k], 2 * n - i);
        if (slot < 0) rc = pn_error_set(PN_ERR_NOMEM, "out of memory planning activations");
        p->grad_slot[i] = slot;
    }
    free(order);
    return rc;
}

int pn_arg_plan_make(pn_arg_plan *p, const pn_graph *g, const bool *member, bool with_grad,
                     pn_precision precision)
{
    int n = g->n_nodes;
    *p = (pn_arg_plan){.n_nodes = n, .precision = precision};
    node_facts *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    p->value_slot = malloc((size_t)(n ? n : 1) * sizeof *p->value_slot);
    p->grad_slot = malloc((size_t)(n ? n : 1) * sizeof *p->grad_slot);
    p->held = malloc((size_t)(n ? n : 1) * sizeof *p->held);
    p->value_bf16 = calloc((size_t)(n ? n : 1), sizeof *p->value_bf16);
    p->grad_bf16 = calloc((size_t)(n ? n : 1), sizeof *p->grad_bf16);
    slots vs = {0}, gs = {0};
    int rc = f && p->value_slot && p->grad_slot && p->held && p->value_bf16 && p->grad_bf16
                 ? PN_OK
                 : pn_error_set(PN_ERR_NOMEM, "out of memory planning activations");
    if (rc == PN_OK) {
        for (int i = 0; i < n; i++) p->value_slot[i] = p->grad_slot[i] = -1;
        learn(f, g, member, with_grad);
        for (int i = 0; i < n; i++) p->held[i] = f[i].held;
        rc = plan_values(p, f, g, &vs);
    }
    if (rc == PN_OK && with_grad) rc = plan_grads(p, f, g, &gs);
    free(f);
    free(vs.end);
    free(gs.end);
    p->n_value_slots = vs.n, p->value_slot_bytes = vs.bytes;
    p->n_grad_slots = gs.n, p->grad_slot_bytes = gs.bytes;
    if (rc < 0) pn_arg_plan_free(p);
    return rc;
}

void pn_arg_plan_free(pn_arg_plan *p)
{
    free(p->value_slot);
    free(p->grad_slot);
    free(p->held);
    free(p->value_bf16);
    free(p->grad_bf16);
    free(p->value_slot_bytes);
    free(p->grad_slot_bytes);
    *p = (pn_arg_plan){0};
}

void pn_arg_plan_bytes(const pn_arg_plan *p, const pn_graph *g, bool with_grad, size_t *own,
                       size_t *values, size_t *grads)
{
    *own = *values = *grads = 0;
    for (int j = 0; j < g->n_nodes; j++) {
        const pn_shape *s = &g->nodes[j].layer->out_shape;
        if (!p->held[j] || s->ids || s->sparse || s->width == 0) continue;
        size_t b = pn_shape_bytes(*s);
        bool grad = with_grad && g->nodes[j].needs_grad;
        *own += b + (grad ? b : 0);
        if (p->value_slot[j] < 0) *values += b;
        if (grad && p->grad_slot[j] < 0) *grads += b;
    }
    for (int k = 0; k < p->n_value_slots; k++) *values += p->value_slot_bytes[k];
}

void pn_grad_store_init(pn_grad_store *s, pn_device dev) { *s = (pn_grad_store){.device = dev}; }

int pn_grad_store_reserve(pn_grad_store *s, int i, size_t bytes)
{
    if (i >= s->n) {
        pn_buffer *b = realloc(s->bufs, (size_t)(i + 1) * sizeof *b);
        if (!b) return pn_error_set(PN_ERR_NOMEM, "out of memory for shared gradients");
        for (int k = s->n; k <= i; k++) b[k] = (pn_buffer){0};
        s->bufs = b;
        s->n = i + 1;
    }
    if (s->bufs[i].data && s->bufs[i].bytes >= bytes) return PN_OK; /* others use it */
    return pn_buffer_reserve(&s->bufs[i], s->device, bytes);
}

int pn_grad_store_reserve_work(pn_grad_store *s, size_t bytes)
{
    if (s->work.data && s->work.bytes >= bytes) return PN_OK;
    return pn_buffer_reserve(&s->work, s->device, bytes);
}

size_t pn_grad_store_bytes(const pn_grad_store *s)
{
    size_t bytes = 0;
    for (int k = 0; k < s->n; k++) bytes += s->bufs[k].capacity;
    return bytes;
}

size_t pn_grad_store_work_bytes(const pn_grad_store *s) { return s->work.capacity; }

void pn_grad_store_free(pn_grad_store *s)
{
    pn_buffer_release(&s->work);
    for (int k = 0; k < s->n; k++) pn_buffer_release(&s->bufs[k]);
    free(s->bufs);
    *s = (pn_grad_store){0};
}
