/* The gradients of tied parameters summed over their uses (ties.h). */
#include "pipeline/ties.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "math/ops.h"

typedef struct tie_use {
    int stage;  /* the stage that runs the layer */
    int handle; /* the parameter in this stage's arena, or -1 */
    int row;    /* a use of another stage: its row of `received` */
} tie_use;

/* One tied table: its uses in graph order (the table's own among them). */
typedef struct tie_group {
    int n_uses, rows, cols;
    tie_use *uses;
    int n_send, n_recv;
    pn_matrix *send, *recv;  /* the exchange's messages, in use order */
    int *to, *from;
    pn_buffer received;      /* the other stages' uses' gradients, a row each */
} tie_group;

struct pn_ties {
    pn_params *arena;
    pn_comm *comm;
    int n_groups;
    tie_group *groups;
};

/* The name that parameter decl of node's layer stands for: its own, or the one it
 * copies. */
static int logical_name(const pn_graph *g, int node, int decl, char buf[PN_PARAM_NAME_MAX + 1])
{
    const pn_layer *l = g->nodes[node].layer;
    return pn_layer_param_tie(l, decl, buf) ? PN_OK : pn_layer_param_name(l, decl, buf);
}

/* Fills group's uses: every parameter of g that stands for `name`, in graph order. */
static int collect_uses(tie_group *t, const pn_graph *g, const char *name, const int *stage_of,
                        int stage, const pn_params *arena)
{
    for (int pass = 0; pass < 2; pass++) {
        t->n_uses = 0;
        for (int i = 0; i < g->n_nodes; i++)
            for (int j = 0; j < g->nodes[i].layer->n_params; j++) {
                char stands[PN_PARAM_NAME_MAX + 1], own[PN_PARAM_NAME_MAX + 1];
                PN_TRY(logical_name(g, i, j, stands));
                if (strcmp(stands, name)) continue;
                if (pass == 1) {
                    PN_TRY(pn_layer_param_name(g->nodes[i].layer, j, own));
                    tie_use *u = &t->uses[t->n_uses];
                    u->stage = stage_of ? stage_of[i] : stage;
                    u->handle = u->stage == stage ? pn_params_find(arena, own) : -1;
                    u->row = -1;
                    if (u->stage == stage && u->handle < 0)
                        return pn_error_set(PN_ERR_INTERNAL, "stage %d holds no '%s'", stage, own);
                    t->rows = g->nodes[i].layer->param_decls[j].rows;
                    t->cols = g->nodes[i].layer->param_decls[j].cols;
                }
                t->n_uses++;
            }
        if (pass == 0 && !(t->uses = calloc((size_t)t->n_uses, sizeof *t->uses)))
            return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    return PN_OK;
}

static bool holds(const tie_group *t, int stage)
{
    for (int k = 0; k < t->n_uses; k++)
        if (t->uses[k].stage == stage) return true;
    return false;
}

/* The exchange: each use of this stage goes to every other stage that holds a use,
 * and each use of another stage comes from it, both in use order. */
static int plan_exchange(tie_group *t, const pn_params *arena, int stage, int stages,
                         pn_device dev)
{
    int others = 0, remote = 0;
    for (int s = 0; s < stages; s++) others += s != stage && holds(t, s);
    for (int k = 0; k < t->n_uses; k++) remote += t->uses[k].stage != stage;
    int local = t->n_uses - remote, n_send = local * others;
    t->send = calloc((size_t)(n_send ? n_send : 1), sizeof *t->send);
    t->to = calloc((size_t)(n_send ? n_send : 1), sizeof *t->to);
    t->recv = calloc((size_t)(remote ? remote : 1), sizeof *t->recv);
    t->from = calloc((size_t)(remote ? remote : 1), sizeof *t->from);
    if (!t->send || !t->to || !t->recv || !t->from)
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (remote)
        PN_TRY(pn_buffer_acquire(&t->received, dev,
                                 (size_t)remote * (size_t)t->rows * (size_t)t->cols * sizeof(float)));
    pn_matrix rows = remote ? pn_matrix_on(&t->received, remote, t->rows * t->cols)
                            : (pn_matrix){0};
    for (int k = 0; k < t->n_uses; k++) {
        tie_use *u = &t->uses[k];
        if (u->stage != stage) {
            u->row = t->n_recv;
            t->from[t->n_recv] = u->stage;
            t->recv[t->n_recv++] =
                pn_matrix_reshape(pn_matrix_rows(rows, u->row, 1), t->rows, t->cols);
            continue;
        }
        for (int s = 0; s < stages; s++)
            if (s != stage && holds(t, s)) {
                t->to[t->n_send] = s;
                t->send[t->n_send++] = pn_params_grad(arena, u->handle);
            }
    }
    return PN_OK;
}

/* Names of the parameters some decl of g copies (a parameter is tied when named
 * here), added to *names (count *n) once each. */
static int tied_names(const pn_graph *g, char (**names)[PN_PARAM_NAME_MAX + 1], int *n)
{
    int cap = 0;
    for (int i = 0; i < g->n_nodes; i++) cap += g->nodes[i].layer->n_params;
    *names = calloc((size_t)(cap ? cap : 1), sizeof **names);
    if (!*names) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    *n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].layer->n_params; j++) {
            char tie[PN_PARAM_NAME_MAX + 1];
            if (!pn_layer_param_tie(g->nodes[i].layer, j, tie)) continue;
            bool seen = false;
            for (int k = 0; k < *n && !seen; k++) seen = !strcmp((*names)[k], tie);
            if (!seen) memcpy((*names)[(*n)++], tie, sizeof tie);
        }
    return PN_OK;
}

static int build(pn_ties *t, const pn_graph *g, const int *stage_of, int stage)
{
    char (*names)[PN_PARAM_NAME_MAX + 1] = NULL;
    int n = 0;
    PN_TRY(tied_names(g, &names, &n));
    int rc = PN_OK, stages = t->comm ? pn_comm_grid(t->comm)->stages : 1;
    t->groups = calloc((size_t)(n ? n : 1), sizeof *t->groups);
    if (!t->groups) rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int k = 0; rc == PN_OK && k < n; k++) {
        tie_group *grp = &t->groups[t->n_groups++];
        rc = collect_uses(grp, g, names[k], stage_of, stage, t->arena);
        if (rc == PN_OK && !holds(grp, stage)) { /* nothing of it here */
            free(grp->uses);
            *grp = (tie_group){0};
            t->n_groups--;
            continue;
        }
        for (int u = 0; rc == PN_OK && u < grp->n_uses; u++)
            if (grp->uses[u].stage != stage && !t->comm)
                rc = pn_error_set(PN_ERR_INTERNAL, "'%s' is used on stage %d of a single stage",
                                  names[k], grp->uses[u].stage);
        if (rc == PN_OK)
            rc = plan_exchange(grp, t->arena, stage, stages, pn_params_device(t->arena));
    }
    free(names);
    return rc;
}

int pn_ties_create(pn_ties **out, const pn_graph *g, const int *stage_of, int stage,
                   pn_params *arena, pn_comm *comm)
{
    *out = NULL;
    pn_ties *t = calloc(1, sizeof *t);
    if (!t) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    t->arena = arena;
    t->comm = comm;
    int rc = build(t, g, stage_of, stage);
    if (rc < 0 || t->n_groups == 0) {
        pn_ties_free(t);
        return rc;
    }
    *out = t;
    return PN_OK;
}

void pn_ties_free(pn_ties *t)
{
    if (!t) return;
    for (int k = 0; t->groups && k < t->n_groups; k++) {
        tie_group *grp = &t->groups[k];
        free(grp->uses);
        free(grp->send);
        free(grp->to);
        free(grp->recv);
        free(grp->from);
        pn_buffer_release(&grp->received);
    }
    free(t->groups);
    free(t);
}

/* Use k's gradient: the arena's, or the row received from its stage. */
static pn_matrix use_grad(const pn_ties *t, const tie_group *grp, int k)
{
    const tie_use *u = &grp->uses[k];
    return u->handle >= 0 ? pn_params_grad(t->arena, u->handle) : grp->recv[u->row];
}

/* The sum builds up in use 0's gradient (the arena's or the received row), adding
 * use 1, 2, ... in order, then goes to every other use of this stage. */
static int sum_group(pn_ties *t, tie_group *grp)
{
    if (grp->n_send || grp->n_recv)
        PN_TRY(pn_comm_pipe_exchange(t->comm, grp->n_send, grp->send, grp->to, grp->n_recv,
                                     grp->recv, grp->from));
    pn_matrix sum = use_grad(t, grp, 0);
    for (int k = 1; k < grp->n_uses; k++) {
        pn_matrix g = use_grad(t, grp, k);
        PN_TRY(pn_axpy(1.0f, &g, &sum));
    }
    for (int k = 1; k < grp->n_uses; k++)
        if (grp->uses[k].handle >= 0) {
            pn_matrix g = pn_params_grad(t->arena, grp->uses[k].handle);
            PN_TRY(pn_copy(&sum, &g));
        }
    return PN_OK;
}

int pn_ties_sum_grads(pn_ties *t)
{
    for (int k = 0; t && k < t->n_groups; k++) PN_TRY(sum_group(t, &t->groups[k]));
    return PN_OK;
}
