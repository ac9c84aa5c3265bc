/* The stage runtime's setup (stage_impl.h): each chunk's networks over the stage's
 * one arena, each chunk's run of that arena, the links that carry Arguments between
 * chunks of different stages (or two chunks of this one), the inputs kept under
 * --recompute, and the dataset fields the stage reads. */
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/log.h"
#include "layers/layer_types.h"
#include "pipeline/stage_impl.h"

/* --- networks ---------------------------------------------------------------------------- */

/* Chunk v's members, networks (declaring their parameters in the arena) and holders. */
static int create_chunk(pn_stage *s, stage_chunk *ch, int v)
{
    const pn_graph *g = s->cfg.graph;
    int P = s->grid->stages;
    ch->index = v;
    ch->model_chunk = v * P + s->grid->stage;
    snprintf(ch->label, sizeof ch->label, "chunk %d", ch->model_chunk);
    ch->held = -1;
    if (!(ch->member = calloc((size_t)g->n_nodes, sizeof *ch->member)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) ch->member[i] = s->cfg.plan->chunk_of[i] == ch->model_chunk;
    ch->n_slots = pn_schedule_peak_in_flight_chunk(s->cfg.sched, s->grid->stage, v);
    if (ch->n_slots < 1)
        return pn_error_set(PN_ERR_INTERNAL, "stage %d chunk %d holds no micro-batch",
                            s->grid->stage, ch->model_chunk);
    ch->n_nets = s->cfg.recompute || s->cfg.forward_only ? 1 : ch->n_slots;
    ch->nets = calloc((size_t)ch->n_nets, sizeof *ch->nets);
    ch->holder = malloc((size_t)ch->n_nets * sizeof *ch->holder);
    if (!ch->nets || !ch->holder) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    pn_network_options o = {.member = ch->member, .device = s->cfg.device,
                            .forward_only = s->cfg.forward_only,
                            .share_memory = s->cfg.share_memory, .grads = &s->grads,
                            .precision = s->cfg.forward_only ? PN_PRECISION_FP32
                                                             : s->cfg.precision};
    for (int k = 0; k < ch->n_nets; k++) {
        ch->holder[k] = -1;
        PN_TRY(pn_network_create(&ch->nets[k], g, &o, s->params));
    }
    return PN_OK;
}

/* [first, end) of the arena that chunk's layers' parameters take (empty: 0, 0). */
static int chunk_run(pn_stage *s, stage_chunk *ch)
{
    const pn_graph *g = s->cfg.graph;
    ch->grad_first = SIZE_MAX, ch->grad_end = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!ch->member[i]) continue;
        const pn_layer *l = g->nodes[i].layer;
        for (int j = 0; j < l->n_params; j++) {
            char name[PN_PARAM_NAME_MAX + 1];
            PN_TRY(pn_layer_param_name(l, j, name));
            pn_params_grad_span(s->params, pn_params_find(s->params, name), &ch->grad_first,
                                &ch->grad_end);
        }
    }
    if (ch->grad_end == 0) ch->grad_first = 0;
    return PN_OK;
}

/* Every chunk's networks over one new arena, initialized from the seed (values
 * depend on (seed, name) only, so any layout starts alike); the chunks' runs must
 * not overlap, since each chunk's gradients are summed on their own. */
static int build_networks(pn_stage *s)
{
    PN_TRY(pn_params_create(&s->params, s->cfg.device));
    pn_grad_store_init(&s->grads, s->cfg.device); /* backwards run one at a time */
    /* a table with "shard": "rows" keeps this replica's share of its rows */
    PN_TRY(pn_params_set_shards(s->params, s->grid->replicas, s->grid->replica));
    if (s->cfg.shard_optimizer && s->grid->replicas > 1)
        PN_TRY(pn_params_set_grad_pieces(s->params, s->grid->replicas));
    for (int v = 0; v < s->n_chunks; v++) PN_TRY(create_chunk(s, &s->chunks[v], v));
    PN_TRY(pn_params_finalize(s->params));
    PN_TRY(pn_params_init_values(s->params, s->cfg.seed));
    PN_TRY(pn_params_zero_grads(s->params)); /* the padding between runs too */
    for (int v = 0; v < s->n_chunks; v++) {
        stage_chunk *ch = &s->chunks[v];
        PN_TRY(chunk_run(s, ch));
        for (int u = 0; u < v; u++) {
            const stage_chunk *o = &s->chunks[u];
            if (ch->grad_first < o->grad_end && o->grad_first < ch->grad_end)
                return pn_error_set(PN_ERR_UNSUPPORTED, "stage %d: chunks %d and %d share "
                                    "parameters, which interleaving does not support",
                                    s->grid->stage, o->model_chunk, ch->model_chunk);
        }
        /* slot 0 also runs evaluation: a replica's whole slice at once, or under
         * --recompute micro-batch by micro-batch (pn_stage_evaluate) */
        for (int k = 0; k < ch->n_nets; k++)
            PN_TRY(pn_network_plan(ch->nets[k], k == 0 && !s->cfg.recompute ? s->cfg.eval_rows
                                                                             : s->cfg.micro_rows));
    }
    return PN_OK;
}

/* --- links --------------------------------------------------------------------------------- */

/* A link of chunk ch; a value that carries lengths (lengths) takes them along. Its
 * M slots hold a training micro-batch each; evaluation's batch (a replica's whole
 * slice, in slot 0: pn_stage_evaluate) is its largest message. */
static int add_link(pn_stage *s, stage_chunk *ch, pn_link_kind kind, bool sends, int node,
                    int peer, int consumer, int peer_chunk, bool lengths)
{
    const pn_graph_node *n = &s->cfg.graph->nodes[node];
    pn_shape shape = n->layer->out_shape;
    pn_link_spec spec = {kind, sends, node, n->name, peer, shape.width,
                         s->cfg.eval_rows * shape.seq, s->micro,
                         lengths && kind == PN_LINK_VALUE ? shape.seq : 0, consumer,
                         s->n_chunks, s->cfg.micro_rows * shape.seq,
                         s->cfg.precision == PN_PRECISION_BF16};
    ch->peer_chunk[ch->n_links] = peer_chunk;
    return pn_link_create(s->cfg.comm, &spec, &ch->links[ch->n_links++]);
}

/* Which nodes' outputs carry sample lengths (graph nodes are in topological order):
 * an input with a lengths dataset, or a layer with an input of the same seq that
 * carries them (network.c's rule). */
static void mark_lengths(const pn_graph *g, bool *carries)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const pn_graph_node *n = &g->nodes[i];
        carries[i] = n->is_input && pn_data_layer_lengths(n->layer) != NULL;
        for (int k = 0; k < n->n_inputs; k++)
            if (carries[n->inputs[k]] &&
                g->nodes[n->inputs[k]].layer->out_shape.seq == n->layer->out_shape.seq)
                carries[i] = true;
    }
}

/* Node p of chunk cp feeds chunk cc its value: the sending side or the receiving
 * side, whichever this stage holds (both when the two chunks are this stage's); the
 * value with its lengths when it carries them. */
static int link_value(pn_stage *s, int p, int cp, int cc, bool lengths)
{
    int P = s->grid->stages, self = s->grid->stage;
    if (self == cp % P)
        PN_TRY(add_link(s, &s->chunks[cp / P], PN_LINK_VALUE, true, p, cc % P, cc, cc / P,
                        lengths));
    if (self == cc % P)
        PN_TRY(add_link(s, &s->chunks[cc / P], PN_LINK_VALUE, false, p, cp % P, cc, cp / P,
                        lengths));
    return PN_OK;
}

/* Chunk from, a consumer of node p, sends p's gradient to chunk to (the previous
 * consumer chunk, or p's producer); the link is named by the sending chunk, which
 * sends p's gradient on one link only. */
static int link_grad(pn_stage *s, int p, int from, int to)
{
    int P = s->grid->stages, self = s->grid->stage;
    if (self == from % P)
        PN_TRY(add_link(s, &s->chunks[from / P], PN_LINK_GRAD, true, p, to % P, from, to / P,
                        false));
    if (self == to % P)
        PN_TRY(add_link(s, &s->chunks[to / P], PN_LINK_GRAD, false, p, from % P, from,
                        from / P, false));
    return PN_OK;
}

/* Node p's links: its value to every chunk that consumes it, and its gradient back as
 * a chain through those chunks in reverse order, the last one's to the one before
 * (which holds p as a supplied input: it writes what it receives into that input's
 * gradient before its backward, and its consumers add to it), ... the first one's
 * to the producer. Chunks are contiguous ranges of the layers' order (automatic
 * placement; "stage" attributes that never go down the list, else a warning), so
 * the contributions are added in reverse layer order, a left fold, as one process
 * adds them: the same bits on every layout, whatever the fan-out. (Each consumer
 * chunk's gradient sent straight to the producer would be summed there in another
 * order; floating-point addition is not associative.) Schedules run a chunk's
 * backward of a micro-batch after every later chunk's, so the chain waits on
 * nothing the producer did not already wait on. scratch: [2 x chunks] ints. */
static int link_node(pn_stage *s, int p, bool lengths, int *scratch)
{
    const pn_graph *g = s->cfg.graph;
    const int *chunk_of = s->cfg.plan->chunk_of;
    int chunks = s->cfg.plan->chunks, cp = chunk_of[p], n = 0;
    int *reads = scratch, *consumers = scratch + chunks;
    int top = -1, back = -1, above = -1; /* the highest chunk of a reader so far; the
                                            first reader below one, and that one's */
    for (int c = 0; c < chunks; c++) reads[c] = 0;
    for (int j = 0; j < g->n_nodes; j++)
        for (int k = 0; k < g->nodes[j].n_inputs; k++)
            if (g->nodes[j].inputs[k] == p) {
                reads[chunk_of[j]] = 1;
                if (chunk_of[j] < top && back < 0) back = j, above = top;
                if (chunk_of[j] > top) top = chunk_of[j];
            }
    for (int c = 0; c < chunks; c++)
        if (reads[c] && c != cp) consumers[n++] = c; /* ascending; all after cp */
    for (int i = 0; i < n; i++) PN_TRY(link_value(s, p, cp, consumers[i], lengths));
    if (!g->nodes[p].needs_grad || s->cfg.forward_only) return PN_OK;
    const char *u = s->n_chunks > 1 ? "chunk" : "stage";
    if (back >= 0 && s->cfg.deterministic && s->grid->replica == 0 &&
        s->grid->stage == cp % s->grid->stages)
        pn_log_warn("layer '%s' is read by '%s' on %s %d after a reader on %s %d: stages that "
                    "go down the list of layers add its gradient in another order than one "
                    "process, so --deterministic's bits depend on the layout",
                    g->nodes[p].name, g->nodes[back].name, u, chunk_of[back], u, above);
    for (int i = n - 1; i >= 0; i--)
        PN_TRY(link_grad(s, p, consumers[i], i > 0 ? consumers[i - 1] : cp));
    return PN_OK;
}

/* A value link per consuming chunk for every Argument that crosses chunks (with its
 * lengths where it carries them), and its gradient's chain (link_node). */
static int build_links(pn_stage *s)
{
    const pn_graph *g = s->cfg.graph;
    int chunks = s->cfg.plan->chunks, cap = 1;
    for (int p = 0; p < g->n_nodes; p++) cap += 4 * g->nodes[p].n_consumers;
    for (int v = 0; v < s->n_chunks; v++) {
        stage_chunk *ch = &s->chunks[v];
        ch->links = calloc((size_t)cap, sizeof *ch->links);
        ch->peer_chunk = calloc((size_t)cap, sizeof *ch->peer_chunk);
        if (!ch->links || !ch->peer_chunk) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    int *scratch = calloc(2 * (size_t)chunks, sizeof *scratch);
    bool *carries = calloc((size_t)g->n_nodes, sizeof *carries);
    if (!scratch || !carries) {
        free(scratch);
        free(carries);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    mark_lengths(g, carries);
    int rc = PN_OK;
    for (int p = 0; rc == PN_OK && p < g->n_nodes; p++)
        if (!g->nodes[p].is_input) rc = link_node(s, p, carries[p], scratch);
    free(scratch);
    free(carries);
    return rc;
}

/* --recompute: a slot per micro-batch in flight for each value a chunk receives. */
static int keep_inputs(pn_stage *s, stage_chunk *ch)
{
    pn_kept_inputs_init(&ch->kept, s->cfg.device, ch->n_slots);
    if (!s->cfg.recompute) return PN_OK;
    for (int i = 0; i < ch->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(ch->links[i]);
        if (l->kind != PN_LINK_VALUE || l->sends) continue;
        const pn_arg *a = pn_network_arg(ch->nets[0], l->node);
        PN_TRY(pn_kept_inputs_add(&ch->kept, l->node, s->cfg.micro_rows * a->shape.seq,
                                  a->shape.width));
    }
    return PN_OK;
}

/* --- fields -------------------------------------------------------------------------------- */

/* Whether any chunk of the stage consumes input node i. */
static bool consumed(const pn_stage *s, int i)
{
    for (int v = 0; v < s->n_chunks; v++)
        if (pn_network_arg(s->chunks[v].nets[0], i)) return true;
    return false;
}

/* Whether this rank's reader says that input i's dataset is converted (reader.h):
 * on the first replica's lowest stage that consumes it, so that a run says it once. */
static bool says_types(const pn_stage *s, int i)
{
    const pn_graph *g = s->cfg.graph;
    int lowest = -1;
    for (int j = 0; j < g->n_nodes; j++)
        for (int k = 0; k < g->nodes[j].n_inputs; k++)
            if (g->nodes[j].inputs[k] == i &&
                (lowest < 0 || s->cfg.plan->stage_of[j] < lowest))
                lowest = s->cfg.plan->stage_of[j];
    return s->grid->replica == 0 && lowest == s->grid->stage;
}

/* The lengths that count the real positions a loss averages over: the graph's first
 * input with lengths (what one process counts by). Every stage reads them, also one
 * that gets its lengths over a link or reads only to count rows; such a field feeds
 * no argument (node -1). */
static int add_count_field(pn_stage *s)
{
    const pn_graph *g = s->cfg.graph;
    s->count_field = -1;
    int first = 0;
    while (first < g->n_nodes &&
           !(g->nodes[first].is_input && pn_data_layer_lengths(g->nodes[first].layer)))
        first++;
    if (first == g->n_nodes) return PN_OK;
    for (int f = 0; f < s->n_fields; f++)
        if (s->fields_used && s->field_is_lengths[f] && s->field_nodes[f] == first) {
            s->count_field = f;
            return PN_OK;
        }
    const pn_layer *in = g->nodes[first].layer;
    s->fields[s->n_fields] =
        pn_reader_lengths_field(g->nodes[first].name, pn_data_layer_lengths(in),
                                in->out_shape.seq);
    s->fields[s->n_fields].quiet = true; /* its input's consumer says it */
    s->field_is_lengths[s->n_fields] = true;
    s->field_nodes[s->n_fields] = -1;
    s->count_field = s->n_fields++;
    return PN_OK;
}

/* The data inputs this stage's chunks consume; a stage that consumes none still reads
 * the first one, so that every stage of a replica sees the same batch sizes. */
static int collect_fields(pn_stage *s)
{
    const pn_graph *g = s->cfg.graph;
    size_t cap = 2 * (size_t)g->n_nodes + 1; /* an input and its lengths; the count's */
    s->fields = calloc(cap, sizeof *s->fields);
    s->field_nodes = calloc(cap, sizeof *s->field_nodes);
    s->field_is_lengths = calloc(cap, sizeof *s->field_is_lengths);
    if (!s->fields || !s->field_nodes || !s->field_is_lengths)
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int pass = 0; pass < 2 && s->n_fields == 0; pass++)
        for (int i = 0; i < g->n_nodes; i++) {
            if (!g->nodes[i].is_input || (pass == 0 && !consumed(s, i))) continue;
            const pn_graph_node *user;
            int limit = pn_graph_id_limit(g, i, &user);
            bool quiet = pass == 1 || !says_types(s, i);
            s->fields[s->n_fields] = (pn_reader_field){
                .dataset = pn_data_layer_dataset(g->nodes[i].layer),
                .shape = g->nodes[i].layer->out_shape, .input = g->nodes[i].name,
                .id_limit = limit, .id_user = user ? user->name : NULL, .quiet = quiet};
            s->field_nodes[s->n_fields++] = i;
            s->fields_used = pass == 0;
            if (pass == 1) break;
            const char *lengths = pn_data_layer_lengths(g->nodes[i].layer);
            if (!lengths) continue;
            s->fields[s->n_fields] = pn_reader_lengths_field(
                g->nodes[i].name, lengths, g->nodes[i].layer->out_shape.seq);
            s->fields[s->n_fields].quiet = quiet;
            s->field_is_lengths[s->n_fields] = true;
            s->field_nodes[s->n_fields++] = i;
        }
    return add_count_field(s);
}

/* Logs the notes of this stage's layers (ids hashed...), once a run: on the first
 * replica. */
static void say_notes(const pn_stage *s)
{
    const pn_graph *g = s->cfg.graph;
    char note[256];
    for (int i = 0; s->grid->replica == 0 && i < g->n_nodes; i++) {
        const pn_layer *l = g->nodes[i].layer;
        if (g->nodes[i].is_input || s->cfg.plan->stage_of[i] != s->grid->stage || !l->type->note)
            continue;
        l->type->note(l, note, sizeof note);
        if (note[0]) pn_log_info("layer '%s' (%s): %s", l->name, l->type->name, note);
    }
}

/* --- all of it ------------------------------------------------------------------------------ */

int pn_stage_setup(pn_stage *s)
{
    const pn_plan *plan = s->cfg.plan;
    int v = s->cfg.sched->virtual_stages > 0 ? s->cfg.sched->virtual_stages : 1;
    if (plan->virtual_stages != v || plan->stages != s->grid->stages)
        return pn_error_set(PN_ERR_INTERNAL, "the plan (%d stages x %d) and the schedule or "
                            "layout (%d stages x %d) differ", plan->stages,
                            plan->virtual_stages, s->grid->stages, v);
    s->n_chunks = v;
    if (!(s->chunks = calloc((size_t)v, sizeof *s->chunks)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    PN_TRY(build_networks(s));
    say_notes(s);
    PN_TRY(build_links(s));
    for (int k = 0; k < v; k++) PN_TRY(keep_inputs(s, &s->chunks[k]));
    PN_TRY(collect_fields(s));
    if (!s->cfg.forward_only) /* ties sum gradients: inference has none */
        PN_TRY(pn_ties_create(&s->ties, s->cfg.graph, plan->stage_of, s->grid->stage, s->params,
                              s->cfg.comm));
    if (!(s->row_counts = calloc((size_t)s->grid->replicas, sizeof *s->row_counts)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    bool sharded = false;
    for (int i = 0; i < pn_params_count(s->params); i++)
        sharded |= pn_params_split(s->params, pn_params_get(s->params, i));
    if (sharded)
        PN_TRY(pn_shard_rows_create(&s->shard_rows, s->cfg.comm));
    /* tied tables sum their uses' whole gradients after the step (ties.h) */
    s->in_pieces = s->cfg.shard_optimizer && s->grid->replicas > 1 && !s->cfg.deterministic &&
                   !s->ties && pn_comm_can_reduce_buckets(s->cfg.comm);
    if (!s->cfg.deterministic) return PN_OK;
    for (int k = 0; k < v; k++) {
        stage_chunk *ch = &s->chunks[k];
        PN_TRY(pn_grad_tree_init(&ch->tree, s->cfg.device,
                                 (int)(ch->grad_end - ch->grad_first), s->micro));
    }
    int n = (int)pn_params_grad_size(s->params);
    if (s->cfg.shard_optimizer) /* every replica's copy of its own piece only */
        n = (int)pn_params_grad_piece(s->params);
    size_t bytes = (size_t)s->grid->replicas * (size_t)(n ? n : 1) * sizeof(float);
    if (s->grid->replicas > 1) PN_TRY(pn_buffer_acquire(&s->replica_sums, s->cfg.device, bytes));
    return PN_OK;
}

void pn_stage_teardown(pn_stage *s)
{
    for (int v = 0; s->chunks && v < s->n_chunks; v++) {
        stage_chunk *ch = &s->chunks[v];
        for (int i = 0; i < ch->n_links; i++) pn_link_free(ch->links[i]);
        free(ch->links);
        free(ch->peer_chunk);
        for (int k = 0; ch->nets && k < ch->n_nets; k++) pn_network_free(ch->nets[k]);
        free(ch->nets);
        free(ch->holder);
        pn_kept_inputs_free(&ch->kept);
        free(ch->member);
        pn_grad_tree_free(&ch->tree);
    }
    free(s->chunks);
    pn_params_free(s->params);
    free(s->fields);
    free(s->field_nodes);
    free(s->field_is_lengths);
    pn_buffer_release(&s->replica_sums);
    pn_grad_store_free(&s->grads);
    free(s->row_counts);
    pn_shard_rows_free(s->shard_rows);
    pn_buffer_release(&s->ahead_work);
    pn_ties_free(s->ties);
}
