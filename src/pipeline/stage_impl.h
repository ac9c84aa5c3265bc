/* Inside the stage runtime (stage.h), shared by its two files: stage_setup.c (the
 * chunks' networks over one arena, their links, the fields read) and stage.c (the
 * passes and the step). Private to them.
 *
 * A stage holds one chunk of the model, or under the interleaved schedule V chunks
 * (its virtual stages v = 0 .. V-1 are the model's chunks v P + stage). Each chunk
 * has its own networks (one per micro-batch it holds in flight), its own links
 * (a chunk's links to another chunk are its own, even between the same two ranks)
 * and its own run of the stage's one parameter arena, so that the optimizer,
 * clipping, the replicas' sums and snapshots see one arena per rank whatever V is. */
#ifndef PN_STAGE_IMPL_H
#define PN_STAGE_IMPL_H

#include "pipeline/grad_tree.h"
#include "pipeline/kept_inputs.h"
#include "net/network.h"
#include "pipeline/shard_rows.h"
#include "pipeline/stage.h"
#include "pipeline/ties.h"

typedef struct stage_chunk {
    int index;                  /* v: the stage's virtual stage */
    int model_chunk;            /* v P + stage: its place in the model */
    char label[24];             /* "chunk <model_chunk>", for trace events */
    bool *member;               /* [n_nodes] layers computed in this chunk */
    int n_slots;                /* micro-batches in flight at the peak */
    int n_nets;                 /* n_slots, or 1 under --recompute */
    pn_network **nets;          /* [n_nets]: a network per micro-batch in flight */
    int *holder;                /* [n_nets] micro-batch a network holds from its forward
                                   to its backward, or -1 (a busy network is an error) */
    pn_kept_inputs kept;        /* --recompute: received inputs per micro-batch in flight */
    int held;                   /* --recompute: the micro-batch nets[0] holds, or -1 */
    pn_link **links;
    int *peer_chunk;            /* [n_links] the other side's virtual stage */
    int n_links;
    size_t grad_first, grad_end;/* its parameters' run of the arena, [first, end) */
    pn_grad_tree tree;          /* --deterministic: this step's micro-batch sums */
} stage_chunk;

struct pn_stage {
    pn_stage_config cfg;
    const pn_grid *grid;
    int micro;                  /* M */
    int n_chunks;               /* V */
    stage_chunk *chunks;        /* [n_chunks] */
    size_t scratch_bytes;       /* pool growth during passes: layer scratch */
    pn_params *params;          /* every chunk's parameters */
    pn_reader_field *fields;
    int *field_nodes, n_fields; /* the input node each field feeds */
    bool *field_is_lengths;     /* the field holds its node's sample lengths */
    int count_field;            /* the lengths that count the loss's positions, or -1 */
    bool fields_used;           /* false: the stage reads only to count rows */
    pn_grad_store grads;        /* the shared argument gradients (share_memory) */
    pn_buffer replica_sums;     /* --deterministic, D > 1: every replica's sum [D, arena] */
    pn_ties *ties;              /* tied tables with a use here, or NULL */
    bool in_pieces;             /* --shard-optimizer without --deterministic: each bucket
                                   summed on the replicas whose pieces it covers only */
    int *row_counts;            /* [replicas]: a row-sparse gradient's entries per replica */
    pn_shard_rows *shard_rows;  /* tables sharded across the replicas: their pull and
                                   push (NULL: none here, or one replica) */
    int ahead_state;            /* pulls ahead: 0 not yet asked, 1 on, -1 off */
    pn_buffer ahead_work;       /* host: a micro-batch's ids pulled ahead */
};

/* Builds s's chunks (networks over one arena, links, kept inputs) and fields; s->cfg,
 * s->grid and s->micro are set. What it leaves on failure pn_stage_free frees. */
int pn_stage_setup(pn_stage *s);

/* Pulls ahead of the training forwards (stage_ahead.c), where the stage's sharded
 * tables allow: _seam runs, before action `at` of the step's schedule, the parts of
 * later forwards' pulls due there; _take makes the forward of action `at` take its
 * rows, _done checks after it that it took them all. */
int pn_stage_ahead_seam(pn_stage *s, const pn_batch *b, long step, int at);
int pn_stage_ahead_take(pn_stage *s, int at);
int pn_stage_ahead_done(pn_stage *s);

/* Frees what pn_stage_setup built. */
void pn_stage_teardown(pn_stage *s);

#endif
