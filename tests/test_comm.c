/* The communication seam (mpi/comm.h), run under mpirun with 4 ranks
 * (tests/test_comm.sh): the layout of 2 replicas x 2 stages; sums, XORs and "any"
 * over the world, a pipe and a stage's replicas; status agreement naming the
 * failing rank; a link that delivers, adds, and refuses a message for another step
 * or one received before a message sent earlier, with an error naming both sides;
 * a link that carries samples' lengths with the values, and refuses lengths out of
 * range or a sender that sends none (also bf16, its lengths aligned); gradient buckets and the replica gather, also
 * on strided views (which the MPI transport stages through host copies, as it does
 * GPU memory), and the tied-gradient exchange on them; the transport's choice from
 * every rank's device (mpi on the cpu; nccl refused, naming why); and arena images
 * gathered to rank 0 and scattered back (odd sizes, 4 stages, and 2 x 2 with the
 * replica broadcast). Prints one line per check and "N passed, N failed". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "math/ops.h"
#include "mpi/comm.h"
#include "mpi/job_mpi.h"

static int passed, failed, rank;

/* Counts a check that every rank made; rank 0 prints it. */
static void check(pn_comm *c, bool ok, const char *what)
{
    bool bad = false;
    pn_comm_any(c, !ok, &bad);
    if (!ok) fprintf(stderr, "rank %d: FAIL: %s (%s)\n", rank, what, pn_error_message());
    if (rank == 0) printf("%-64s %s\n", what, bad ? "FAIL" : "ok");
    bad ? failed++ : passed++;
}

static void layout_and_scalars(pn_comm *c)
{
    const pn_grid *g = pn_comm_grid(c);
    check(c, g->replicas == 2 && g->stages == 2 && g->stage == rank % 2 && g->replica == rank / 2,
          "4 ranks as 2 replicas x 2 stages: stage = rank % 2");
    double v[2] = {rank + 1, 1};
    pn_comm_sum(c, PN_SCOPE_WORLD, v, 2);
    check(c, v[0] == 10 && v[1] == 4, "sum over the world");
    v[0] = rank + 1;
    pn_comm_sum(c, PN_SCOPE_PIPE, v, 1);
    check(c, v[0] == (g->replica == 0 ? 3 : 7), "sum over a replica's stages (pipe)");
    v[0] = rank + 1;
    pn_comm_sum(c, PN_SCOPE_REPLICAS, v, 1);
    check(c, v[0] == (g->stage == 0 ? 4 : 6), "sum over a stage's replicas");
    uint64_t x = 1ull << rank;
    pn_comm_xor(c, PN_SCOPE_PIPE, &x, 1);
    check(c, x == (g->replica == 0 ? 3u : 12u), "XOR over a pipe");
    bool any = true;
    pn_comm_any(c, false, &any);
    bool some = false;
    pn_comm_any(c, rank == 3, &some);
    check(c, !any && some, "any: false everywhere, true on one rank");
    int most = -1;
    pn_comm_max(c, rank == 2 ? 15 : rank, &most);
    check(c, most == 15, "max over the job");
    char text[32] = "";
    if (rank == 0) snprintf(text, sizeof text, "from rank 0");
    pn_comm_broadcast(c, text, sizeof text);
    check(c, !strcmp(text, "from rank 0"), "broadcast from rank 0");
}

static void agreement(pn_comm *c)
{
    int rc = pn_comm_agree(c, rank == 2 ? pn_error_set(PN_ERR_IO, "disk full on rank 2") : 0);
    bool ok = rank == 2 ? rc == PN_ERR_IO && strstr(pn_error_message(), "disk full")
                        : rc == PN_ERR_PEER && strstr(pn_error_message(), "rank 2 failed");
    check(c, ok, "agree: the failing rank keeps its error, the others name it");
    check(c, pn_comm_agree(c, 0) == 0, "agree: all fine");
    rc = pn_comm_agree_root(c, rank == 0 ? pn_error_set(PN_ERR_IO, "no") : 0, "write it");
    ok = rank == 0 ? rc == PN_ERR_IO
                   : rc == PN_ERR_PEER && strstr(pn_error_message(), "rank 0 could not write it");
    check(c, ok, "agree_root: rank 0's failure reaches everyone");
}

/* Stage 0 sends a 3 x 5 value to stage 1 of its replica: delivered, added, and a
 * message for another step refused. */
static void links(pn_comm *c)
{
    const pn_grid *g = pn_comm_grid(c);
    pn_link_spec spec = {PN_LINK_VALUE, g->stage == 0, 4, "h1", 1 - g->stage, 5, 6, 2, 0, 0, 1};
    pn_link *l;
    check(c, pn_link_create(c, &spec, &l) == 0, "link created on both sides");
    float data[15], got[15];
    for (int i = 0; i < 15; i++) data[i] = (float)(g->replica * 100 + i);
    pn_matrix m = pn_matrix_host(data, 3, 5), into = pn_matrix_host(got, 3, 5);
    bool ok = true;
    if (g->stage == 0) {
        ok = pn_link_send(l, 7, 1, &m, NULL) == 0 && pn_link_send(l, 7, 0, &m, NULL) == 0 &&
             pn_link_wait_sends(l) == 0;
    } else {
        ok = pn_link_post_recv(l, 1) == 0 && pn_link_post_recv(l, 0) == 0 &&
             pn_link_recv(l, 7, 1, &into, false) == 0 && !memcmp(got, data, sizeof got) &&
             pn_link_recv(l, 7, 0, &into, true) == 0;
        for (int i = 0; ok && i < 15; i++) ok = got[i] == 2 * data[i];
    }
    check(c, ok, "link: micro-batches land in their slots, copied or added");
    if (g->stage == 0) {
        ok = pn_link_send(l, 7, 0, &m, NULL) == 0 && pn_link_wait_sends(l) == 0;
    } else {
        ok = pn_link_post_recv(l, 0) == 0 && pn_link_recv(l, 8, 0, &into, false) == PN_ERR_MPI &&
             strstr(pn_error_message(), "expected the value of 'h1' for step 8") &&
             strstr(pn_error_message(), "step 7");
    }
    check(c, ok, "link: a message for another step is an error naming both");
    pn_link_free(l);
    /* micro-batches 0 and 1 sent in that order, received 1 first: refused (NCCL would
     * match the first payload sent with the first receive) */
    check(c, pn_link_create(c, &spec, &l) == 0, "link created again");
    if (g->stage == 0) {
        ok = pn_link_send(l, 9, 0, &m, NULL) == 0 && pn_link_send(l, 9, 1, &m, NULL) == 0 &&
             pn_link_wait_sends(l) == 0;
    } else {
        ok = pn_link_post_recv(l, 0) == 0 && pn_link_post_recv(l, 1) == 0 &&
             pn_link_recv(l, 9, 1, &into, false) == PN_ERR_MPI &&
             strstr(pn_error_message(), "message 1 of its link from stage 0, where message 0") &&
             strstr(pn_error_message(), "in the order they were sent");
        pn_link_cancel(l);
    }
    check(c, ok, "link: a micro-batch received before one sent earlier is an error");
    pn_link_free(l);
}

/* A bf16 link with lengths where the payload is an odd number of bf16 values (3
 * samples of seq 3, 3 columns: 27): the values arrive, and so do the lengths that
 * follow the payload in the MPI message, at an address an int may be read at (they
 * are handed to the layers as int arrays). */
static void bf16_link_with_lengths(pn_comm *c)
{
    const pn_grid *g = pn_comm_grid(c);
    bool sender = g->stage == 0;
    pn_link_spec spec = {PN_LINK_VALUE, sender, 7, "gru1", 1 - g->stage, 3, 9, 1, 3, 0, 1};
    spec.bf16 = true;
    pn_link *l;
    check(c, pn_link_create(c, &spec, &l) == 0, "bf16 link with lengths created");
    float data[27], got[27];
    for (int i = 0; i < 27; i++) data[i] = (float)(g->replica * 100 + i); /* exact in bf16 */
    int lengths[3] = {3, 1 + g->replica, 2};
    pn_matrix m = pn_matrix_host(data, 9, 3), into = pn_matrix_host(got, 9, 3);
    bool ok;
    if (sender) {
        ok = pn_link_send(l, 5, 0, &m, lengths) == 0 && pn_link_wait_sends(l) == 0;
    } else {
        ok = pn_link_post_recv(l, 0) == 0 && pn_link_recv(l, 5, 0, &into, false) == 0 &&
             !memcmp(got, data, sizeof got);
        const int *at = pn_link_lengths(l, 0);
        ok = ok && at && (uintptr_t)at % _Alignof(int) == 0 && at[0] == 3 &&
             at[1] == 1 + g->replica && at[2] == 2;
    }
    check(c, ok, "link: bf16 values of an odd count, their lengths aligned after them");
    pn_link_free(l);
}

/* Stage 0 sends 2 samples of seq 3 (6 x 2) with their lengths to stage 1: they
 * arrive with the payload; a length past seq, and a message without lengths where
 * they were expected, are errors naming both sides. */
static void links_with_lengths(pn_comm *c)
{
    const pn_grid *g = pn_comm_grid(c);
    bool sender = g->stage == 0;
    pn_link_spec spec = {PN_LINK_VALUE, sender, 6, "lstm1", 1 - g->stage, 2, 12, 1, 3, 0, 1};
    pn_link_spec bare = spec; /* the same node, no lengths: a mismatched sender */
    bare.seq = 0;
    pn_link *l, *plain;
    check(c, pn_link_create(c, &spec, &l) == 0 && pn_link_create(c, sender ? &bare : &spec,
                                                                 &plain) == 0,
          "link with lengths created on both sides");
    float data[12], got[12];
    for (int i = 0; i < 12; i++) data[i] = (float)(g->replica * 100 + i);
    int lengths[2] = {3, 1 + g->replica}, too_long[2] = {2, 4};
    pn_matrix m = pn_matrix_host(data, 6, 2), into = pn_matrix_host(got, 6, 2);
    bool ok = true;
    if (sender) {
        ok = pn_link_send(l, 3, 0, &m, NULL) == PN_ERR_INTERNAL && /* lengths required */
             pn_link_send(l, 3, 0, &m, lengths) == 0 && pn_link_wait_sends(l) == 0;
    } else {
        ok = pn_link_post_recv(l, 0) == 0 && pn_link_lengths(l, 0) == NULL &&
             pn_link_recv(l, 3, 0, &into, false) == 0 && !memcmp(got, data, sizeof got);
        const int *at = pn_link_lengths(l, 0);
        ok = ok && at && at[0] == 3 && at[1] == 1 + g->replica;
    }
    check(c, ok, "link: the samples' lengths travel with the values");
    if (sender) {
        ok = pn_link_send(l, 4, 0, &m, too_long) == 0 && pn_link_wait_sends(l) == 0;
    } else {
        ok = pn_link_post_recv(l, 0) == 0 && pn_link_recv(l, 4, 0, &into, false) == PN_ERR_MPI &&
             strstr(pn_error_message(), "'lstm1'") && strstr(pn_error_message(), "stage 0") &&
             strstr(pn_error_message(), "length 4, outside 1..3") && !pn_link_lengths(l, 0);
    }
    check(c, ok, "link: a length past seq is an error naming both sides");
    if (sender) {
        ok = pn_link_send(plain, 5, 0, &m, NULL) == 0 && pn_link_wait_sends(plain) == 0;
    } else {
        ok = pn_link_post_recv(plain, 0) == 0 &&
             pn_link_recv(plain, 5, 0, &into, false) == PN_ERR_MPI &&
             strstr(pn_error_message(), "(6 x 2 of 4 bytes, 2 lengths) from stage 0") &&
             strstr(pn_error_message(), "(6 x 2 of 4 bytes, 0 lengths");
    }
    check(c, ok, "link: a message without the lengths expected is an error naming both");
    pn_link_spec grad = spec;
    grad.kind = PN_LINK_GRAD;
    pn_link *refused = NULL;
    check(c, pn_link_create(c, &grad, &refused) == PN_ERR_INTERNAL && !refused,
          "link: gradients carry no lengths");
    pn_link_free(l);
    pn_link_free(plain);
}

/* Interleaving (2 stages x 2 virtual stages): stage 0's node 4 feeds chunks 1 and 3,
 * both on stage 1, over two links between the same ranks, sent in the opposite
 * order to the receives; and chunk 0's node 5 feeds chunk 2 on stage 0 itself. Each
 * message lands on its own link. */
static void chunk_links(pn_comm *c)
{
    const pn_grid *g = pn_comm_grid(c);
    bool sender = g->stage == 0;
    pn_link_spec to1 = {PN_LINK_VALUE, sender, 4, "h1", 1 - g->stage, 2, 2, 1, 0, 1, 2};
    pn_link_spec to3 = to1;
    to3.chunk = 3;
    pn_link_spec self_send = {PN_LINK_VALUE, true, 5, "h2", 0, 2, 2, 1, 0, 2, 2};
    pn_link_spec self_recv = self_send;
    self_recv.sends = false;
    pn_link *l1, *l3, *ss = NULL, *sr = NULL;
    bool ok = pn_link_create(c, &to1, &l1) == 0 && pn_link_create(c, &to3, &l3) == 0;
    if (sender) ok = ok && pn_link_create(c, &self_send, &ss) == 0 &&
                     pn_link_create(c, &self_recv, &sr) == 0;
    float one[4] = {1, 1, 1, 1}, three[4] = {3, 3, 3, 3}, five[4] = {5, 5, 5, 5}, got[4];
    pn_matrix m1 = pn_matrix_host(one, 2, 2), m3 = pn_matrix_host(three, 2, 2);
    pn_matrix m5 = pn_matrix_host(five, 2, 2), into = pn_matrix_host(got, 2, 2);
    if (sender) {
        ok = ok && pn_link_post_recv(sr, 0) == 0 && pn_link_send(l3, 2, 0, &m3, NULL) == 0 &&
             pn_link_send(l1, 2, 0, &m1, NULL) == 0 && pn_link_send(ss, 2, 0, &m5, NULL) == 0 &&
             pn_link_recv(sr, 2, 0, &into, false) == 0 && got[0] == 5.0f &&
             pn_link_wait_sends(l1) == 0 && pn_link_wait_sends(l3) == 0 &&
             pn_link_wait_sends(ss) == 0;
    } else {
        ok = ok && pn_link_post_recv(l1, 0) == 0 && pn_link_post_recv(l3, 0) == 0 &&
             pn_link_recv(l1, 2, 0, &into, false) == 0 && got[3] == 1.0f &&
             pn_link_recv(l3, 2, 0, &into, false) == 0 && got[3] == 3.0f;
    }
    check(c, ok, "links: two chunks of one stage, and a chunk of the same stage, apart");
    pn_link_free(l1);
    pn_link_free(l3);
    pn_link_free(ss);
    pn_link_free(sr);
}

static void replicas(pn_comm *c)
{
    const pn_grid *g = pn_comm_grid(c);
    float grads[10], mine[7], all[2 * 7];
    for (int i = 0; i < 10; i++) grads[i] = (float)(g->replica + 1) * (float)i;
    pn_matrix first = pn_matrix_host(grads, 1, 4), rest = pn_matrix_host(grads + 4, 1, 6);
    bool ok = pn_comm_bucket_start(c, &rest) == 0 && pn_comm_bucket_start(c, &first) == 0 &&
              pn_comm_buckets_wait(c) == 0;
    for (int i = 0; ok && i < 10; i++) ok = grads[i] == 3.0f * (float)i;
    check(c, ok, "buckets: each summed over the stage's replicas");
    for (int i = 0; i < 7; i++) mine[i] = (float)(g->replica * 10 + i);
    pn_matrix m = pn_matrix_host(mine, 1, 7), a = pn_matrix_host(all, 2, 7);
    ok = pn_comm_gather_replicas(c, &m, &a) == 0;
    for (int r = 0; ok && r < 2; r++)
        for (int i = 0; ok && i < 7; i++) ok = all[r * 7 + i] == (float)(r * 10 + i);
    check(c, ok, "replica gather: row r is replica r's");
}

/* Views with a stride (columns 1 .. 2 of 3 x 4): MPI cannot move them in place, so
 * they go through the transport's host copies, the path of GPU memory. */
static void staged(pn_comm *c)
{
    const pn_grid *g = pn_comm_grid(c);
    float grads[12], all[2 * 5], tied[12], mine[3];
    for (int i = 0; i < 12; i++) grads[i] = (float)(g->replica + 1) * (float)i;
    pn_matrix block = pn_matrix_host(grads, 3, 4);
    block.data += 1, block.cols = 2; /* ld stays 4 */
    bool ok = pn_comm_bucket_start(c, &block) == 0 && pn_comm_buckets_wait(c) == 0;
    for (int i = 0; ok && i < 12; i++) /* summed inside the view, untouched outside */
        ok = grads[i] == (float)(i % 4 == 1 || i % 4 == 2 ? 3 : g->replica + 1) * (float)i;
    check(c, ok, "buckets on a strided view: summed through a host copy");
    for (int i = 0; i < 10; i++) all[i] = -1;
    for (int i = 0; i < 3; i++) mine[i] = (float)(g->replica * 10 + i);
    pn_matrix m = pn_matrix_host(mine, 1, 3), a = pn_matrix_host(all, 2, 5);
    a.cols = 3; /* ld 5 */
    ok = pn_comm_gather_replicas(c, &m, &a) == 0;
    for (int r = 0; ok && r < 2; r++)
        for (int i = 0; ok && i < 5; i++)
            ok = all[r * 5 + i] == (i < 3 ? (float)(r * 10 + i) : -1.0f);
    check(c, ok, "replica gather into a strided view: rows in place, padding untouched");
    /* stage 0 sends its view to stage 1 and receives stage 1's into the same place */
    for (int i = 0; i < 12; i++) tied[i] = (float)(100 * g->stage + i);
    pn_matrix t = pn_matrix_host(tied, 3, 4);
    t.data += 1, t.cols = 2;
    float sent[12];
    memcpy(sent, tied, sizeof sent);
    int peer = 1 - g->stage;
    pn_matrix recv = pn_matrix_host(tied, 3, 4);
    recv.data += 2, recv.cols = 2; /* overlaps what is sent: staged before it is posted */
    ok = pn_comm_pipe_exchange(c, 1, &t, &peer, 1, &recv, &peer) == 0;
    for (int i = 0; ok && i < 12; i++) {
        int r = i / 4, col = i % 4;
        float want = col >= 2 ? (float)(100 * peer + r * 4 + col - 1) : sent[i];
        ok = tied[i] == want;
    }
    check(c, ok, "tied gradients between strided views: through host copies");
}

/* The transport from every rank's device: on the cpu, auto and mpi take mpi; nccl is
 * refused on every rank, and so is a GPU that ranks of one pipe would share (every
 * rank claims GPU 0 of its node: no CUDA call is made for that). */
static void transport_choice(pn_comm *c)
{
    bool ok = pn_comm_use_transport(c, PN_TRANSPORT_REQUEST_AUTO, pn_device_host()) == 0 &&
              !strcmp(pn_comm_transport_name(c), "mpi") &&
              pn_comm_use_transport(c, PN_TRANSPORT_REQUEST_MPI, pn_device_host()) == 0 &&
              pn_comm_links_ready(c) == 0;
    check(c, ok, "transport: auto on cpu ranks is mpi");
    ok = pn_comm_use_transport(c, PN_TRANSPORT_REQUEST_NCCL, pn_device_host()) ==
             PN_ERR_UNSUPPORTED &&
         strstr(pn_error_message(), pn_transport_have_nccl() ? "rank 0 trains on the cpu"
                                                             : "built without NCCL");
    check(c, ok, "transport: nccl on cpu ranks refused, saying why");
    ok = pn_comm_use_transport(c, PN_TRANSPORT_REQUEST_NCCL, pn_device_cuda(0)) ==
             PN_ERR_UNSUPPORTED &&
         strstr(pn_error_message(), pn_transport_have_nccl() ? "ranks 0 and 1 share GPU 0"
                                                             : "built without NCCL") &&
         !strcmp(pn_comm_transport_name(c), "mpi");
    check(c, ok, "transport: nccl on one GPU shared by a pipe refused");
}

/* Every stage of the first replica sends 5 s + 3 floats of value 1000 s + i. */
static bool gather_stages(pn_comm *c)
{
    const pn_grid *g = pn_comm_grid(c);
    size_t count = 5 * (size_t)g->stage + 3;
    float *mine = malloc(count * sizeof *mine), *all = NULL;
    size_t counts[4] = {0};
    for (size_t i = 0; i < count; i++) mine[i] = (float)(1000 * g->stage + (int)i);
    bool ok = pn_comm_gather_stages(c, mine, count, PN_COMM_FLOATS, (void **)&all,
                                    g->rank == 0 ? counts : NULL) == 0;
    if (ok && g->rank == 0) { /* stages 1 .. P-1 back to back, stage 0 not copied */
        size_t at = 0;
        for (int s = 0; ok && s < g->stages; s++) ok = counts[s] == 5 * (size_t)s + 3;
        for (int s = 1; ok && s < g->stages; s++)
            for (size_t i = 0; i < counts[s]; i++, at++)
                ok = ok && all[at] == (float)(1000 * s + (int)i);
    }
    free(mine);
    free(all);
    return ok;
}

int main(int argc, char **argv)
{
    pn_job *world;
    if (pn_job_init(&argc, &argv, &world) < 0) return 1;
    rank = pn_job_rank(world);
    if (pn_job_size(world) != 4) {
        if (rank == 0) puts("SKIP: run with 4 ranks (mpirun -np 4)");
        pn_job_finalize(world);
        return 77;
    }
    pn_comm *c;
    if (pn_comm_create(&c, world, 2) < 0) pn_job_abort(world, 1);
    layout_and_scalars(c);
    agreement(c);
    links(c);
    links_with_lengths(c);
    bf16_link_with_lengths(c);
    chunk_links(c);
    replicas(c);
    staged(c);
    transport_choice(c);
    check(c, gather_stages(c), "images: gathered to rank 0 (2 x 2)");
    pn_comm_free(c);
    if (pn_comm_create(&c, world, 4) < 0) pn_job_abort(world, 1);
    check(c, gather_stages(c), "images: gathered to rank 0 and scattered (4 stages)");
    pn_comm_free(c);
    if (rank == 0) printf("%d passed, %d failed\n", passed, failed);
    pn_job_finalize(world);
    return failed ? 1 : 0;
}
