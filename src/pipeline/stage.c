/* The stage runtime (stage.h): one micro-batch's forward and backward through one of
 * the stage's chunks, the step that runs them in schedule order, evaluation, and
 * the sum of the gradients over the replicas; the setup is stage_setup.c's. Every
 * transfer goes through the communication seam (mpi/comm.h); every touch of
 * parameters, gradients or activations through math ops. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/trace.h"
#include "math/ops.h"
#include "pipeline/stage_impl.h"

int pn_stage_create(pn_stage **out, const pn_stage_config *cfg)
{
    *out = NULL;
    pn_stage *s = calloc(1, sizeof *s);
    if (!s) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    *out = s;
    s->cfg = *cfg;
    s->grid = pn_comm_grid(cfg->comm);
    s->micro = cfg->sched->micro;
    return pn_stage_setup(s);
}

void pn_stage_free(pn_stage *s)
{
    if (!s) return;
    pn_stage_teardown(s);
    free(s);
}

pn_params *pn_stage_params(const pn_stage *s) { return s->params; }

void pn_stage_memory(const pn_stage *s, pn_stage_mem *out)
{
    *out = (pn_stage_mem){.scratch_bytes = s->scratch_bytes,
                          .arg_bytes = pn_grad_store_bytes(&s->grads),
                          .work_bytes = pn_grad_store_work_bytes(&s->grads)};
    for (int v = 0; v < s->n_chunks; v++) {
        const stage_chunk *ch = &s->chunks[v];
        out->networks += ch->n_nets;
        out->kept_bytes += pn_kept_inputs_bytes(&ch->kept);
        for (int k = 0; k < ch->n_nets; k++) out->arg_bytes += pn_network_arg_bytes(ch->nets[k]);
    }
}

const pn_reader_field *pn_stage_fields(const pn_stage *s, int *n)
{
    *n = s->n_fields;
    return s->fields;
}

/* --- one micro-batch ------------------------------------------------------------------- */

/* Copies rows [first, first + rows) of the batch into the network's data arguments
 * (those its chunk consumes), and points those with lengths at the rows' lengths. */
/* The sharded tables' rows for a pass, where the stage has any. */
static const pn_row_puller *puller(pn_stage *s)
{
    return s->shard_rows ? pn_shard_rows_puller(s->shard_rows) : NULL;
}

static int feed(pn_stage *s, pn_network *net, const pn_batch *b, int first, int rows)
{
    PN_TRY(pn_network_set_batch(net, rows));
    if (!s->fields_used) return PN_OK;
    for (int f = 0; f < s->n_fields; f++) {
        if (s->field_nodes[f] < 0) continue; /* read only to count positions */
        pn_arg *a = pn_network_arg(net, s->field_nodes[f]);
        if (!a) continue; /* another chunk's input */
        if (s->field_is_lengths[f]) { /* host memory, valid until the next batch is read */
            a->lengths = b->ids[f] + first;
            continue;
        }
        if (a->shape.sparse) {
            PN_TRY(pn_arg_csr_feed(a, &b->csr[f], first, rows));
            continue;
        }
        size_t per = (size_t)a->shape.seq * (a->shape.ids ? 1 : (size_t)a->shape.width);
        size_t bytes = (size_t)rows * per * 4;
        if (a->shape.ids)
            PN_TRY(pn_buffer_write(&a->ids_buf, 0, b->ids[f] + (size_t)first * per, bytes));
        else
            PN_TRY(pn_buffer_write(&a->value_buf, 0, b->values[f] + (size_t)first * per, bytes));
    }
    return PN_OK;
}

/* The network of ch that micro-batch micro takes; a training forward claims it until
 * its backward (schedules keep each chunk's micro-batches in flight consecutive, so
 * micro % n_nets is free; a list that breaks this is an error, not a silent mix-up). */
static int claim(pn_stage *s, stage_chunk *ch, int micro, bool forward, pn_network **net)
{
    int k = micro % ch->n_nets;
    *net = ch->nets[k];
    if (s->cfg.recompute) return PN_OK;
    int want = forward ? -1 : micro;
    if (ch->holder[k] != want)
        return pn_error_set(PN_ERR_INTERNAL, "stage %d chunk %d: the %s of micro-batch %d "
                            "finds network %d holding micro-batch %d", s->grid->stage,
                            ch->model_chunk, forward ? "forward" : "backward", micro, k,
                            ch->holder[k]);
    ch->holder[k] = forward ? micro : -1;
    return PN_OK;
}

/* Points the values chunk ch received for micro at the lengths their messages
 * carried. */
static void take_link_lengths(stage_chunk *ch, pn_network *net, int micro)
{
    for (int i = 0; i < ch->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(ch->links[i]);
        if (l->kind == PN_LINK_VALUE && !l->sends && l->seq > 0)
            pn_network_arg(net, l->node)->lengths = pn_link_lengths(ch->links[i], micro);
    }
}

/* Receives the values chunk ch consumes, runs its layers forward, sends its outputs
 * on; rows from first of the batch, in network slot micro % n_nets. */
static int forward_pass(pn_stage *s, stage_chunk *ch, const pn_batch *b, long step, int micro,
                        int first, int rows, bool training)
{
    pn_network *net = ch->nets[0];
    if (training) PN_TRY(claim(s, ch, micro, true, &net));
    PN_TRY(feed(s, net, b, first, rows));
    for (int i = 0; i < ch->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(ch->links[i]);
        if (l->kind == PN_LINK_VALUE && !l->sends)
            PN_TRY(pn_link_recv(ch->links[i], step, micro, &pn_network_arg(net, l->node)->value,
                                false));
    }
    take_link_lengths(ch, net, micro);
    if (s->cfg.recompute && training)
        PN_TRY(pn_kept_inputs_save(&ch->kept, micro % ch->n_slots, net));
    ch->held = -1;
    pn_pass pass = {training, s->cfg.seed, step, b->sample0 + first, micro, false, puller(s)};
    PN_TRY(pn_network_forward(net, &pass));
    if (s->cfg.recompute && training) ch->held = micro;
    for (int i = 0; i < ch->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(ch->links[i]);
        if (l->kind == PN_LINK_VALUE && l->sends) {
            const pn_arg *a = pn_network_arg(net, l->node);
            PN_TRY(pn_link_send(ch->links[i], step, micro, &a->value, a->lengths));
        }
    }
    return PN_OK;
}

/* Bytes the device's pool hands out now; what a pass adds is its layers' scratch
 * (kept from forward to backward, grown only when a batch is larger). */
static size_t pool_in_use(const pn_stage *s)
{
    pn_pool_stats st;
    pn_pool_stats_get(s->cfg.device, &st);
    return st.bytes_in_use;
}

static void note_growth(pn_stage *s, size_t before)
{
    size_t now = pool_in_use(s);
    if (now > before) s->scratch_bytes += now - before;
}

/* --recompute: puts micro's inputs back into the chunk's one network (the batch's
 * rows, the values kept when they arrived) and runs its forward again, with the same
 * pass as the first time, so dropout draws the same masks; loss statistics stay as
 * they are. */
static int recompute_forward(pn_stage *s, stage_chunk *ch, const pn_batch *b, long step,
                             int micro)
{
    double t0 = PN_TRACE_T0();
    pn_network *net = ch->nets[0];
    int first = micro * s->cfg.micro_rows;
    PN_TRY(feed(s, net, b, first, s->cfg.micro_rows));
    PN_TRY(pn_kept_inputs_restore(&ch->kept, micro % ch->n_slots, net));
    take_link_lengths(ch, net, micro); /* still in the link's slot: received this step */
    pn_pass pass = {true, s->cfg.seed, step, b->sample0 + first, micro, true, puller(s)};
    PN_TRY(pn_network_forward(net, &pass));
    ch->held = micro;
    PN_TRACE("recompute", "micro-batch", NULL, step, micro, t0);
    return PN_OK;
}

/* Trace events of a chunk name it under virtual stages ("chunk 3"), else nothing. */
static const char *chunk_label(const pn_stage *s, const stage_chunk *ch)
{
    return s->n_chunks == 1 ? NULL : ch->label;
}

/* forward_pass as one event of the trace: a micro-batch's, or an evaluation batch's. */
static int forward_micro(pn_stage *s, stage_chunk *ch, const pn_batch *b, long step, int micro,
                         int first, int rows, bool training)
{
    double t0 = PN_TRACE_T0();
    size_t used = pool_in_use(s);
    int rc = forward_pass(s, ch, b, step, micro, first, rows, training);
    note_growth(s, used);
    PN_TRACE(training ? "forward" : "eval forward", training ? "micro-batch" : "eval",
             chunk_label(s, ch), training ? step : -1, micro, t0);
    return rc;
}

/* The bucket [first, end) of the gradient buffer summed on the replicas whose pieces
 * it covers, each its part (a reduce-scatter by the pieces). */
static int reduce_to_pieces(pn_stage *s, size_t first, size_t end)
{
    pn_matrix grads = pn_params_all_grads(s->params);
    size_t piece = pn_params_grad_piece(s->params);
    for (int r = 0; r < s->grid->replicas; r++) {
        size_t a = piece * (size_t)r, b = a + piece;
        if (a < first) a = first;
        if (b > end) b = end;
        if (a >= b) continue;
        pn_matrix part = pn_matrix_cols(grads, (int)a, (int)(b - a));
        PN_TRY(pn_comm_bucket_reduce_start(s->cfg.comm, &part, r));
    }
    return PN_OK;
}

/* A layer's gradients are final for the step: start summing them over the replicas
 * (its dense parameters are one contiguous run of the gradient buffer). */
static int start_bucket(void *ctx, const pn_layer_inst *x)
{
    pn_stage *s = ctx;
    size_t first = SIZE_MAX, end = 0;
    for (int i = 0; i < x->layer->n_params; i++)
        pn_params_grad_span(s->params, x->param_index[i], &first, &end);
    if (end == 0) return PN_OK; /* row-sparse only: summed at the step's end */
    pn_matrix grads = pn_params_all_grads(s->params);
    pn_matrix bucket = pn_matrix_cols(grads, (int)first, (int)(end - first));
    double t0 = PN_TRACE_T0();
    int rc = s->in_pieces ? reduce_to_pieces(s, first, end)
                          : pn_comm_bucket_start(s->cfg.comm, &bucket);
    PN_TRACE("bucket all-reduce start", "allreduce", x->layer->name, -1, -1, t0);
    return rc;
}

/* The chunk's run of the arena's gradients (1 x its length). */
static pn_matrix chunk_grads(const pn_stage *s, const stage_chunk *ch)
{
    pn_matrix grads = pn_params_all_grads(s->params);
    return pn_matrix_cols(grads, (int)ch->grad_first, (int)(ch->grad_end - ch->grad_first));
}

/* Receives the gradients of the chunk's outputs, runs its layers backward, sends the
 * gradients of its inputs back. last: the chunk's last backward of the step, after
 * which its gradients are final. */
static int backward_pass(pn_stage *s, stage_chunk *ch, const pn_batch *b, long step, int micro,
                         bool last)
{
    pn_network *net;
    PN_TRY(claim(s, ch, micro, false, &net));
    if (s->cfg.recompute && ch->held != micro) PN_TRY(recompute_forward(s, ch, b, step, micro));
    ch->held = -1; /* backward may reuse what forward left */
    bool bucketed = last && s->grid->replicas > 1 && !s->cfg.deterministic;
    bool leaf = s->cfg.deterministic && ch->grad_end > ch->grad_first;
    pn_matrix grads = chunk_grads(s, ch);
    pn_network_on_grads_ready(net, bucketed ? start_bucket : NULL, s);
    if (leaf) PN_TRY(pn_fill(&grads, 0.0f)); /* one leaf per micro-batch */
    PN_TRY(pn_network_backward_begin(net, s->cfg.global_batch));
    for (int i = 0; i < ch->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(ch->links[i]);
        if (l->kind == PN_LINK_GRAD && !l->sends) {
            pn_arg *a = pn_network_arg(net, l->node); /* stale: written, not added */
            PN_TRY(pn_link_recv(ch->links[i], step, micro, &a->grad, pn_arg_grad_beta(a) != 0.0f));
        }
    }
    pn_pass pass = {true, s->cfg.seed, step, b->sample0 + (long)micro * s->cfg.micro_rows, micro,
                    false, puller(s)};
    int rc = pn_network_backward_run(net, &pass);
    pn_network_on_grads_ready(net, NULL, NULL);
    PN_TRY(rc);
    /* this micro-batch's row-sparse entries into its partials. The stage seals, not
     * the layers: it alone knows where a micro-batch's backward ends, whatever the
     * schedule or --recompute (which reruns forwards only); a row-sparse table has
     * one layer (ties refuse row-sparse copies), so the entries since the last seal
     * are this micro-batch's, and other chunks' tables have none (a no-op) */
    PN_TRY(pn_params_seal_row_grads(s->params));
    if (leaf) PN_TRY(pn_grad_tree_push(&ch->tree, &grads));
    for (int i = 0; i < ch->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(ch->links[i]);
        if (l->kind == PN_LINK_GRAD && l->sends)
            PN_TRY(pn_link_send(ch->links[i], step, micro, &pn_network_arg(net, l->node)->grad,
                                NULL));
    }
    return PN_OK;
}

static int backward_micro(pn_stage *s, stage_chunk *ch, const pn_batch *b, long step, int micro,
                          bool last)
{
    double t0 = PN_TRACE_T0();
    size_t used = pool_in_use(s);
    int rc = backward_pass(s, ch, b, step, micro, last);
    note_growth(s, used);
    PN_TRACE("backward", "micro-batch", chunk_label(s, ch), step, micro, t0);
    return rc;
}

/* --- a step ---------------------------------------------------------------------------- */

/* Posts the receives of a step on every incoming link. MPI matches messages of one
 * sender and tag to receives in posting order, so each link's receives are posted
 * in the order the peer sends: its schedule's forwards (values) or backwards
 * (gradients) of the peer's chunk; each lands in its micro-batch's buffer. */
static int post_step_receives(pn_stage *s)
{
    const pn_schedule *sched = s->cfg.sched;
    for (int v = 0; v < s->n_chunks; v++) {
        const stage_chunk *ch = &s->chunks[v];
        for (int i = 0; i < ch->n_links; i++) {
            const pn_link_spec *l = pn_link_spec_of(ch->links[i]);
            if (l->sends) continue;
            pn_pass_kind sent_in = l->kind == PN_LINK_VALUE ? PN_PASS_FORWARD : PN_PASS_BACKWARD;
            for (int k = 0; k < sched->count[l->peer]; k++) {
                pn_action a = sched->actions[l->peer][k];
                if (a.pass == sent_in && a.chunk == ch->peer_chunk[i])
                    PN_TRY(pn_link_post_recv(ch->links[i], a.micro));
            }
        }
    }
    return PN_OK;
}

static int wait_sends(pn_stage *s)
{
    for (int v = 0; v < s->n_chunks; v++) {
        const stage_chunk *ch = &s->chunks[v];
        for (int i = 0; i < ch->n_links; i++)
            if (pn_link_spec_of(ch->links[i])->sends) PN_TRY(pn_link_wait_sends(ch->links[i]));
    }
    return PN_OK;
}

/* --deterministic with a sharded optimizer: each replica receives every replica's
 * copy of its own piece of the gradient buffer, adds them in the replica tree (the
 * same additions, element by element, as on the whole buffer) and the summed pieces
 * are gathered back: the bits of the whole sum, moving and holding the arena about
 * twice instead of D times. */
static int sum_pieces(pn_stage *s)
{
    int d = s->grid->replicas;
    size_t piece = pn_params_grad_piece(s->params);
    pn_matrix grads = pn_params_all_grads(s->params);
    pn_matrix room = {grads.data, d, (int)piece, (int)piece, grads.device};
    pn_matrix copies = pn_matrix_on(&s->replica_sums, d, (int)piece);
    pn_matrix own = pn_matrix_rows(room, s->grid->replica, 1);
    PN_TRY(pn_comm_exchange_replicas(s->cfg.comm, &room, &copies));
    PN_TRY(pn_grad_tree_sum_blocks(&copies, &own));
    return pn_comm_gather_replicas(s->cfg.comm, &own, &room);
}

/* The arena's gradients = the tree sum of every micro-batch of the step over all
 * replicas: each chunk's tree into its run, then (D > 1) the replicas' arenas added
 * in the replica tree. Every element is summed in the same tree as on one process. */
static int deterministic_sum(pn_stage *s)
{
    pn_matrix grads = pn_params_all_grads(s->params);
    if (grads.cols == 0) return PN_OK;
    for (int v = 0; v < s->n_chunks; v++) {
        stage_chunk *ch = &s->chunks[v];
        if (ch->grad_end == ch->grad_first) continue;
        pn_matrix mine = pn_grad_tree_result(&ch->tree), run = chunk_grads(s, ch);
        if (mine.data) PN_TRY(pn_copy(&mine, &run));
    }
    if (s->grid->replicas == 1) return PN_OK;
    if (s->cfg.shard_optimizer) return sum_pieces(s);
    pn_matrix all = pn_matrix_on(&s->replica_sums, s->grid->replicas, grads.cols);
    PN_TRY(pn_comm_gather_replicas(s->cfg.comm, &grads, &all));
    return pn_grad_tree_sum_blocks(&all, &grads);
}

/* Whether parameter i's gradient goes to its rows' owners (a table sharded across
 * more than one replica), the first PN_OWNER_SLOTS of them started early: the slot
 * of its push, -1 for none. */
static int push_slot(const pn_stage *s, int i)
{
    if (!s->shard_rows || !pn_params_split(s->params, pn_params_get(s->params, i))) return -1;
    int slot = 0;
    for (int k = 0; k < i; k++) slot += pn_params_split(s->params, pn_params_get(s->params, k));
    return slot;
}

static int check_sealed(const pn_row_grad *rg, int i)
{
    return rg->sealed == rg->n /* a partial per micro-batch, or layouts would differ */
               ? PN_OK
               : pn_error_set(PN_ERR_INTERNAL, "row-sparse gradient %d: %d entries not sealed "
                              "by a micro-batch", i, rg->n - rg->sealed);
}

/* Starts the pushes of the sharded tables' gradients, final once the step's passes
 * are done, so that they move while the dense gradients' all-reduce and sums finish
 * (sum_row_grads waits for them). */
static int start_row_pushes(pn_stage *s)
{
    for (int i = 0; i < pn_params_count(s->params); i++) {
        pn_row_grad *rg = pn_params_row_grad(s->params, i);
        int slot = push_slot(s, i);
        if (!rg || slot < 0 || slot >= PN_OWNER_SLOTS) continue;
        PN_TRY(check_sealed(rg, i));
        PN_TRY(pn_shard_rows_push_start(s->shard_rows, slot, rg));
    }
    return PN_OK;
}

/* Each row-sparse gradient: every replica's partials (one entry per micro-batch and
 * id, sealed after each backward) in replica order, each replica's in micro-batch
 * order: the global micro-batch order; then one merge that adds each row's partials
 * in that order: the additions of one process, on every layout. A sharded table's
 * partials go to their owners instead, received in the same order. */
static int sum_row_grads(pn_stage *s)
{
    int d = s->grid->replicas;
    for (int i = 0; i < pn_params_count(s->params); i++) {
        pn_row_grad *rg = pn_params_row_grad(s->params, i);
        if (!rg) continue;
        PN_TRY(check_sealed(rg, i));
        int slot = push_slot(s, i);
        if (slot >= PN_OWNER_SLOTS) { /* past the slots started early: now, one at a time */
            PN_TRY(pn_shard_rows_push_start(s->shard_rows, 0, rg));
            slot = 0;
        }
        if (slot >= 0) {
            PN_TRY(pn_shard_rows_push_finish(s->shard_rows, slot, rg));
            continue;
        }
        if (d > 1) {
            PN_TRY(pn_comm_replica_counts(s->cfg.comm, rg->n, s->row_counts));
            long total = 0;
            for (int r = 0; r < d; r++) total += s->row_counts[r];
            if (total > INT_MAX)
                return pn_error_set(PN_ERR_UNSUPPORTED, "a row-sparse gradient of %ld rows", total);
            int *ids;
            pn_matrix rows;
            PN_TRY(pn_row_grad_incoming(rg, (int)total, &ids, &rows));
            pn_matrix mine = pn_row_grad_entries(rg); /* after the reserve, which may move it */
            if (!pn_row_grad_on_device(rg)) {
                PN_TRY(pn_comm_gather_rows(s->cfg.comm, s->row_counts, rg->ids, &mine, ids, &rows));
            } else if (total > 0) { /* MPI reads host memory: the rows through rg's host staging */
                size_t row_bytes = (size_t)rg->width * sizeof(float);
                pn_matrix own = pn_matrix_on(&rg->staging, mine.rows, rg->width);
                pn_matrix all = pn_matrix_rows(pn_matrix_on(&rg->staging, 2 * rg->cap, rg->width),
                                               rg->cap, (int)total);
                PN_TRY(pn_buffer_read(&rg->rows, 0, own.data, (size_t)mine.rows * row_bytes));
                PN_TRY(pn_comm_gather_rows(s->cfg.comm, s->row_counts, rg->ids, &own, ids, &all));
                PN_TRY(pn_buffer_write(&rg->sums, 0, all.data, (size_t)total * row_bytes));
            }
            pn_row_grad_adopt(rg, (int)total);
        }
        PN_TRY(pn_row_grad_merge(rg));
    }
    return PN_OK;
}

/* Losses over padded samples are means over the real positions of the whole global
 * batch: this replica's rows' lengths (the graph's first input with lengths, which
 * every stage reads, add_count_field), summed over the stage's replicas, which all
 * read the same fields. */
static int count_positions(pn_stage *s, const pn_batch *b)
{
    int f = s->count_field;
    if (f < 0) return PN_OK;
    double n = 0.0;
    for (int k = 0; k < b->rows; k++) n += b->ids[f][k];
    if (s->grid->replicas > 1) PN_TRY(pn_comm_sum(s->cfg.comm, PN_SCOPE_REPLICAS, &n, 1));
    for (int v = 0; v < s->n_chunks; v++)
        for (int k = 0; k < s->chunks[v].n_nets; k++)
            pn_network_set_positions(s->chunks[v].nets[k], n);
    return PN_OK;
}

bool pn_stage_grads_in_pieces(const pn_stage *s) { return s->in_pieces; }

int pn_stage_step(pn_stage *s, const pn_batch *b, long step)
{
    if (s->cfg.forward_only)
        return pn_error_set(PN_ERR_INTERNAL, "a training step on a forward-only stage");
    PN_TRY(count_positions(s, b));
    PN_TRY(post_step_receives(s));
    int stage = s->grid->stage, n = s->cfg.sched->count[stage];
    for (int v = 0; v < s->n_chunks; v++) {
        s->chunks[v].held = -1;
        pn_grad_tree_reset(&s->chunks[v].tree);
    }
    int rc = PN_OK;
    for (int i = 0; i < n && rc == PN_OK; i++) {
        pn_action a = s->cfg.sched->actions[stage][i];
        stage_chunk *ch = &s->chunks[a.chunk];
        rc = pn_stage_ahead_seam(s, b, step, i); /* later forwards' pulls move on */
        if (rc == PN_OK && a.pass == PN_PASS_FORWARD) {
            rc = pn_stage_ahead_take(s, i);
            if (rc == PN_OK)
                rc = forward_micro(s, ch, b, step, a.micro, a.micro * s->cfg.micro_rows,
                                   s->cfg.micro_rows, true);
            if (rc == PN_OK) rc = pn_stage_ahead_done(s);
        } else if (rc == PN_OK) { /* every schedule runs a chunk's backwards in micro-batch order */
            rc = backward_micro(s, ch, b, step, a.micro, a.micro == s->micro - 1);
        }
    }
    if (rc == PN_OK) rc = start_row_pushes(s);
    if (rc == PN_OK) rc = wait_sends(s);
    if (rc == PN_OK) rc = pn_comm_buckets_wait(s->cfg.comm);
    if (rc == PN_OK && s->cfg.deterministic) rc = deterministic_sum(s);
    if (rc == PN_OK) rc = sum_row_grads(s);
    if (rc < 0) { /* no push or pull left in flight to write into what the error path
                     frees; after a stall the job ends, freeing nothing (trainer.c) */
        if (s->shard_rows && rc != PN_ERR_STALL) pn_shard_rows_abandon(s->shard_rows);
        return rc;
    }
    return pn_ties_sum_grads(s->ties); /* a tied table's uses, in every layout alike */
}

/* The pulls of a forward piece this replica does not have (pieces beyond its rows):
 * each chunk's sharded tables in the order its forward pulls them, asking nothing,
 * so the replicas that have the piece get their rows from this one. */
static int idle_pulls(pn_stage *s, int pieces)
{
    const pn_row_puller *p = puller(s);
    for (int k = 0; k < pieces; k++)
        for (int v = 0; v < s->n_chunks; v++) {
            const int *params;
            int n;
            PN_TRY(pn_network_pulls(s->chunks[v].nets[0], &params, &n));
            for (int i = 0; i < n; i++) PN_TRY(p->pull(p->ctx, s->params, params[i], NULL, 0, NULL));
        }
    return PN_OK;
}

/* Forward of b in pieces of piece rows, piece k in link slot k (at most M of them),
 * fn seeing each on each chunk; the sends are waited for by the caller. */
static int forward_pieces(pn_stage *s, const pn_batch *b, long tag, int piece,
                          pn_stage_piece_fn fn, void *ctx)
{
    int pieces = (b->rows + piece - 1) / piece;
    if (pieces > s->micro)
        return pn_error_set(PN_ERR_INTERNAL, "a forward of %d pieces over links of %d slots",
                            pieces, s->micro);
    for (int v = 0; v < s->n_chunks; v++) {
        const stage_chunk *ch = &s->chunks[v];
        for (int i = 0; i < ch->n_links; i++) {
            const pn_link_spec *l = pn_link_spec_of(ch->links[i]);
            if (!l->sends && l->kind == PN_LINK_VALUE)
                for (int k = 0; k < pieces; k++) PN_TRY(pn_link_post_recv(ch->links[i], k));
        }
    }
    for (int k = 0; k < pieces; k++) {
        int first = k * piece, rows = b->rows - first < piece ? b->rows - first : piece;
        for (int v = 0; v < s->n_chunks; v++) {
            PN_TRY(forward_micro(s, &s->chunks[v], b, tag, k, first, rows, false));
            if (fn) PN_TRY(fn(ctx, s->chunks[v].nets[0], first, rows));
        }
    }
    for (int v = 0; v < s->n_chunks; v++) s->chunks[v].held = -1;
    return PN_OK;
}

int pn_stage_evaluate(pn_stage *s, const pn_batch *b, long tag, int most_rows)
{
    /* one batch in micro-batch slot 0 of each chunk, the chunks in order; under
     * --recompute, whose one network holds a micro-batch, in pieces of a micro-batch
     * in slots 0, 1, ... (at most M) */
    int piece = s->cfg.recompute ? s->cfg.micro_rows : most_rows;
    int pieces = (b->rows + piece - 1) / piece, most = (most_rows + piece - 1) / piece;
    if (b->rows == 0) return s->shard_rows ? idle_pulls(s, most) : PN_OK;
    PN_TRY(forward_pieces(s, b, tag, piece, NULL, NULL));
    if (s->shard_rows && most > pieces) PN_TRY(idle_pulls(s, most - pieces));
    return wait_sends(s);
}

int pn_stage_infer(pn_stage *s, const pn_batch *b, long step, int piece, pn_stage_piece_fn fn,
                   void *ctx)
{
    if (step < 0 || piece < 1)
        return pn_error_set(PN_ERR_INTERNAL, "pn_stage_infer: step %ld, pieces of %d", step, piece);
    if (b->rows == 0) return PN_OK;
    PN_TRY(forward_pieces(s, b, step, piece, fn, ctx));
    return wait_sends(s);
}

void pn_stage_take_stats(pn_stage *s, double out[3], pn_auc *auc)
{
    out[0] = out[1] = out[2] = 0.0;
    for (int v = 0; v < s->n_chunks; v++)
        for (int k = 0; k < s->chunks[v].n_nets; k++) {
            pn_network *net = s->chunks[v].nets[k];
            pn_layer_stats st;
            pn_network_stats(net, &st);
            if (auc) pn_network_auc(net, auc);
            pn_network_reset_stats(net);
            out[0] += st.loss_sum, out[1] += st.correct, out[2] += st.rows;
        }
}
