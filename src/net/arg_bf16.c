/* Layer calls over bf16-stored arguments (arg_bf16.h): which matrices a call sees
 * through the work area, the area's size, and the widening and narrowing around a
 * call. One list of views (views_of) serves the size and the calls, so the area
 * always holds what a call asks of it. */
#include "net/arg_bf16.h"

#include <stdint.h>

#include "base/error.h"
#include "math/ops.h"

/* The first input position of g's node gi that is node x (a node may be an input
 * twice: add(x, x)). */
static int first_input(const pn_graph_node *gn, int x)
{
    int k = 0;
    while (gn->inputs[k] != x) k++;
    return k;
}

/* Whether the backward of gn reads the value of its input x at any position. */
static bool reads_input(const pn_graph_node *gn, int x)
{
    for (int k = 0; k < gn->n_inputs; k++)
        if (gn->inputs[k] == x && pn_arg_plan_reads(gn->layer, k)) return true;
    return false;
}

static int views_of(const pn_arg_plan *p, const pn_graph *g, int node, bool backward,
                    pn_bf16_view *v)
{
    const pn_graph_node *gn = &g->nodes[node];
    int n = 0;
    for (int k = 0; k < gn->n_inputs; k++) {
        int x = gn->inputs[k];
        if (first_input(gn, x) != k) continue;
        if (p->value_bf16[x] && (!backward || reads_input(gn, x)))
            v[n++] = (pn_bf16_view){.node = x, .read = true};
        if (backward && p->grad_bf16[x]) v[n++] = (pn_bf16_view){.node = x, .grad = true};
    }
    if (p->value_bf16[node] && (!backward || pn_arg_plan_reads(gn->layer, -1)))
        v[n++] = (pn_bf16_view){.node = node, .read = backward};
    if (backward && p->grad_bf16[node]) v[n++] = (pn_bf16_view){.node = node, .grad = true};
    return n;
}

/* Bytes of a view of `floats` floats in the work area: whole 64-byte lines, so that
 * every view starts aligned as a block of its own would. */
static size_t view_bytes(size_t floats) { return (floats + 15) / 16 * 16 * sizeof(float); }

size_t pn_arg_plan_work_bytes(const pn_arg_plan *p, const pn_graph *g, int batch)
{
    size_t most = 0;
    pn_bf16_view v[PN_BF16_MAX_VIEWS];
    for (int i = 0; i < g->n_nodes; i++) {
        for (int pass = 0; pass < 2; pass++) {
            int n = views_of(p, g, i, pass == 1, v);
            size_t bytes = 0;
            for (int k = 0; k < n; k++) {
                const pn_shape *s = &g->nodes[v[k].node].layer->out_shape;
                bytes += view_bytes((size_t)batch * (size_t)s->seq * (size_t)s->width);
            }
            if (bytes > most) most = bytes;
        }
    }
    return most;
}

static pn_matrix *matrix_of(pn_arg *args, const pn_bf16_view *v)
{
    return v->grad ? &args[v->node].grad : &args[v->node].value;
}

int pn_bf16_call_begin(pn_bf16_frame *f, const pn_arg_plan *p, const pn_graph *g,
                       pn_arg *args, int node, bool backward, const pn_buffer *work)
{
    int n = p ? views_of(p, g, node, backward, f->v) : 0;
    size_t used = 0;
    int rc = PN_OK;
    for (f->n = 0; f->n < n && rc == PN_OK; f->n++) {
        pn_bf16_view *v = &f->v[f->n];
        pn_matrix *m = matrix_of(args, v);
        size_t bytes = view_bytes((size_t)m->rows * (size_t)m->cols);
        if (used + bytes > work->bytes) {
            rc = pn_error_set(PN_ERR_INTERNAL, "layer '%s': its bf16 arguments want %zu bytes "
                              "of a work area of %zu", g->nodes[node].name, used + bytes,
                              work->bytes);
            break;
        }
        v->stored = m->data;
        m->data = (float *)((char *)work->data + used);
        used += bytes;
        if (v->grad) v->read = !args[v->node].grad_stale;
        if (v->read) rc = pn_from_bf16(v->stored, m);
    }
    if (rc < 0) pn_bf16_call_end(f, g, args, node, backward, false);
    return rc;
}

/* What the call wrote into m (node's value or gradient): narrowed into its slot when
 * it is a view, else rounded where it is. */
static int settle(const pn_bf16_frame *f, pn_arg *args, int node, bool grad)
{
    for (int k = 0; k < f->n; k++)
        if (f->v[k].node == node && f->v[k].grad == grad)
            return pn_to_bf16(matrix_of(args, &f->v[k]), f->v[k].stored);
    pn_matrix *m = grad ? &args[node].grad : &args[node].value;
    return m->data && m->cols > 0 ? pn_round_bf16(m) : PN_OK;
}

int pn_bf16_call_end(pn_bf16_frame *f, const pn_graph *g, pn_arg *args, int node,
                     bool backward, bool ok)
{
    int rc = PN_OK;
    const pn_graph_node *gn = &g->nodes[node];
    if (ok && !backward) rc = settle(f, args, node, false);
    for (int k = 0; ok && backward && rc == PN_OK && k < gn->n_inputs; k++) {
        int x = gn->inputs[k];
        if (first_input(gn, x) == k && args[x].grad.data && !args[x].grad_stale)
            rc = settle(f, args, x, true);
    }
    for (int k = 0; k < f->n; k++) matrix_of(args, &f->v[k])->data = f->v[k].stored;
    f->n = 0;
    return rc;
}
