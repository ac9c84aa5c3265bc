/* Tied parameters in the graph (graph.h): each tied copy a layer declares (an fc's
 * "tie") must name an embedding of the graph whose table has the copy's shape; the
 * copy then takes that table's init and decay, so that every copy starts equal to
 * the table and is updated the same way. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "layers/attrs.h"
#include "net/graph.h"

/* The decl of layer l named suffix, or -1. */
static int find_decl(const pn_layer *l, const char *suffix)
{
    for (int i = 0; i < l->n_params; i++)
        if (!strcmp(l->param_decls[i].suffix, suffix)) return i;
    return -1;
}

/* The layer of g named name, or NULL (graph.c's loader calls in here, so this file
 * does not call back into it). */
static const pn_layer *layer_named(const pn_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, name)) return g->nodes[i].layer;
    return NULL;
}

static int check_tie(pn_graph *g, pn_layer *l, pn_param_decl *d)
{
    char found[PN_NAME_MAX + 96];
    const pn_layer *s = layer_named(g, d->tie_layer);
    if (!s || strcmp(s->type->name, "embedding")) {
        if (s)
            snprintf(found, sizeof found, "\"%s\", a layer of type %s", d->tie_layer,
                     s->type->name);
        else
            snprintf(found, sizeof found, "\"%s\", which names no layer", d->tie_layer);
        return pn_attr_error(l, "tie", found, "the name of an embedding layer");
    }
    int k = find_decl(s, d->tie_suffix);
    if (k < 0)
        return pn_error_set(PN_ERR_INTERNAL, "layer '%s' has no parameter '%s' to tie to",
                            s->name, d->tie_suffix);
    const pn_param_decl *t = &s->param_decls[k];
    if (t->rows != d->rows || t->cols != d->cols) {
        snprintf(found, sizeof found, "\"%s\" of vocab %d and size %d", s->name, t->rows,
                 t->cols);
        return pn_attr_error(l, "tie", found,
                             "an embedding of vocab %d (this layer's size) and size %d (its "
                             "input width)", d->rows, d->cols);
    }
    d->init = t->init;
    d->decay = t->decay;
    return PN_OK;
}

int pn_graph_resolve_ties(pn_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        pn_layer *l = g->nodes[i].layer;
        for (int j = 0; j < l->n_params; j++)
            if (l->param_decls[j].tie_layer) PN_TRY(check_tie(g, l, &l->param_decls[j]));
    }
    return PN_OK;
}

bool pn_graph_is_tied_copy(const pn_graph *g, int node, int decl)
{
    return g->nodes[node].layer->param_decls[decl].tie_layer != NULL;
}
