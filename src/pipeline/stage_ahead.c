/* Pulls ahead (stage_impl.h): the rows of the sharded tables a training forward
 * pulls are asked for a few passes before it, so that the exchange moves while the
 * stage computes the passes between, instead of stopping the forward.
 *
 * A step's batch is known when it starts, so a micro-batch's distinct ids are too
 * (the layer's pull_ids, from the data's CSR rows); the table's rows do not change
 * until the step's update, so rows pulled early in a step are the rows its forward
 * would pull. Nothing is pulled ahead across a step's end (the update changes them).
 *
 * Forward action i of the stage's schedule runs the three parts of its pulls
 * (pn_shard_rows_ahead_*) at the seams before actions i - 3 (ask: the counts
 * posted), i - 2 (send: the ids posted) and i - 1 (answer: the owner's rows
 * gathered and posted), seam 0 for those before the step's first; its forward
 * takes the rows. With one stage (F0 B0 F1 B1 ...) micro-batch m + 1's rows are on
 * their way during m's backward. Every replica of a stage runs the same schedule
 * over the same graph, so all post the same collectives in the same order; the
 * seams between also test what is in flight, since Open MPI moves a nonblocking
 * collective only inside an MPI call. */
#include "base/error.h"
#include "pipeline/stage_impl.h"

enum {
    AHEAD_SEAMS = 3,                                    /* seams before its forward */
    AHEAD_RING = AHEAD_SEAMS + 1,                       /* forwards in flight at most */
    AHEAD_TABLES = PN_OWNER_AHEAD_SLOTS / AHEAD_RING,   /* pulls a forward, at most */
};

/* The seam (before action ...) at which forward action i runs part `part` (1..3). */
static int seam_of(int i, int part)
{
    int at = i - AHEAD_SEAMS - 1 + part;
    return at > 0 ? at : 0;
}

/* The data field feeding input node `node` with CSR rows, or -1. */
static int field_of(const pn_stage *s, int node)
{
    for (int f = 0; node >= 0 && f < s->n_fields; f++)
        if (s->field_nodes[f] == node && !s->field_is_lengths[f]) return f;
    return -1;
}

/* Whether the stage pulls ahead: it has sharded tables, and every pull of every
 * chunk is a layer that says its ids (pull_ids) over a data field, at most
 * AHEAD_TABLES a chunk. Otherwise its forwards pull as they run. Asked once. */
static int usable(pn_stage *s, bool *on)
{
    if (s->ahead_state == 0) {
        s->ahead_state = -1;
        if (!s->shard_rows || !s->fields_used) goto done;
        for (int v = 0; v < s->n_chunks; v++) {
            pn_network *net = s->chunks[v].nets[0];
            const int *pulls;
            int n, input;
            const pn_layer_inst *x;
            PN_TRY(pn_network_pulls(net, &pulls, &n));
            if (n > AHEAD_TABLES) goto done;
            for (int k = 0; k < n; k++) {
                PN_TRY(pn_network_pull_source(net, k, &x, &input));
                if (!x->layer->type->pull_ids || field_of(s, input) < 0) goto done;
            }
        }
        s->ahead_state = 1;
    }
done:
    *on = s->ahead_state > 0;
    return PN_OK;
}

/* Part `part` of the pulls of forward action a, the ordinal-th forward of the step. */
static int run_part(pn_stage *s, const pn_batch *b, long step, pn_action a, int ordinal,
                    int part)
{
    pn_network *net = s->chunks[a.chunk].nets[0];
    const int *pulls;
    int n;
    PN_TRY(pn_network_pulls(net, &pulls, &n));
    for (int k = 0; k < n; k++) {
        int e = (ordinal % AHEAD_RING) * AHEAD_TABLES + k, input, rc;
        const pn_layer_inst *x;
        PN_TRY(pn_network_pull_source(net, k, &x, &input));
        if (part == 1) {
            const int *ids;
            int n_ids, rows = s->cfg.micro_rows, first = a.micro * rows;
            const pn_csr *csr = &b->csr[field_of(s, input)];
            rc = first + rows > csr->rows
                     ? pn_error_set(PN_ERR_INTERNAL, "rows %d..%d of a batch of %d", first,
                                    first + rows, csr->rows)
                     : x->layer->type->pull_ids(x->layer, csr, first, rows, &s->ahead_work, &ids,
                                                &n_ids);
            if (rc == PN_OK)
                rc = pn_shard_rows_ahead_ask(s->shard_rows, e, pulls[k], ids, n_ids, step,
                                             a.micro);
        } else {
            rc = part == 2 ? pn_shard_rows_ahead_send(s->shard_rows, e)
                           : pn_shard_rows_ahead_answer(s->shard_rows, s->params, e);
        }
        /* named as a forward's waits are: where a stalled replica stops this one */
        if (rc < 0)
            return pn_error_wrap(rc, "layer '%s' pull ahead of micro-batch %d", x->layer->name,
                                 a.micro);
    }
    return PN_OK;
}

int pn_stage_ahead_seam(pn_stage *s, const pn_batch *b, long step, int at)
{
    bool on;
    PN_TRY(usable(s, &on));
    if (!on) return PN_OK;
    int stage = s->grid->stage, n = s->cfg.sched->count[stage], ordinal = 0;
    for (int i = 0; i < n && i <= at + AHEAD_SEAMS; i++) {
        pn_action a = s->cfg.sched->actions[stage][i];
        if (a.pass != PN_PASS_FORWARD) continue;
        for (int part = 1; part <= 3 && i >= at; part++)
            if (seam_of(i, part) == at) PN_TRY(run_part(s, b, step, a, ordinal, part));
        ordinal++;
    }
    return pn_shard_rows_progress(s->shard_rows);
}

int pn_stage_ahead_take(pn_stage *s, int at)
{
    bool on;
    PN_TRY(usable(s, &on));
    if (!on) return PN_OK;
    int stage = s->grid->stage, ordinal = 0;
    for (int i = 0; i < at; i++)
        ordinal += s->cfg.sched->actions[stage][i].pass == PN_PASS_FORWARD;
    const int *pulls;
    int n;
    PN_TRY(pn_network_pulls(s->chunks[s->cfg.sched->actions[stage][at].chunk].nets[0], &pulls,
                            &n));
    pn_shard_rows_take(s->shard_rows, (ordinal % AHEAD_RING) * AHEAD_TABLES, n);
    return PN_OK;
}

int pn_stage_ahead_done(pn_stage *s)
{
    return s->ahead_state > 0 ? pn_shard_rows_take_done(s->shard_rows) : PN_OK;
}
