/* The transport's choice (mpi/comm.h: pn_transport_choose) from made-up layouts of
 * (node, GPU index, GPU identity, NCCL) per rank: mpi is always mpi; nccl is refused,
 * saying why, without NCCL in the build (or in one rank's CUDA module), with a rank
 * on the cpu, and when two ranks of one
 * pipe or of one stage's replicas use one GPU of a node (by its identity: per-rank
 * masks that show every rank its own GPU as index 0 share nothing, masks that show
 * one GPU under two indices do); auto takes mpi (until NCCL has run on GPUs). */
#include <string.h>

#include "base/error.h"
#include "mpi/comm.h"
#include "testutil.h"

/* A rank on node n with GPU index i, that GPU's identity being i too (-1: the cpu),
 * that has the NCCL transport; and the same without it. */
#define G(n, i) {(n), (i), (i), 1}
#define NO_NCCL(n, i) {(n), (i), (i), 0}

enum { MPI_ = PN_TRANSPORT_REQUEST_MPI, NCCL = PN_TRANSPORT_REQUEST_NCCL,
       AUTO = PN_TRANSPORT_REQUEST_AUTO };

/* The choice for r, *nccl when it is NCCL; the error text when refused. */
static int choose(int r, const pn_rank_gpu *ranks, int size, int stages, bool *nccl)
{
    pn_transport_request chosen = PN_TRANSPORT_REQUEST_AUTO; /* it must set it either way */
    int rc = pn_transport_choose((pn_transport_request)r, ranks, size, stages, &chosen);
    ck_assert_msg(chosen == PN_TRANSPORT_REQUEST_MPI || chosen == PN_TRANSPORT_REQUEST_NCCL,
                  "chose %d, no transport", (int)chosen);
    *nccl = chosen == PN_TRANSPORT_REQUEST_NCCL;
    return rc;
}

static void refused(const pn_rank_gpu *ranks, int size, int stages, const char *why)
{
    bool nccl;
    ck_assert_int_eq(choose(NCCL, ranks, size, stages, &nccl), PN_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(pn_error_message(), why), "'%s' lacks '%s'", pn_error_message(), why);
    ck_assert(!nccl);
    ck_assert_int_eq(choose(AUTO, ranks, size, stages, &nccl), PN_OK);
    ck_assert_msg(!nccl, "auto took nccl where nccl is refused (%s)", why);
    ck_assert_int_eq(choose(MPI_, ranks, size, stages, &nccl), PN_OK);
    ck_assert(!nccl);
}

static void accepted(const pn_rank_gpu *ranks, int size, int stages)
{
    bool nccl;
    ck_assert_int_eq(choose(NCCL, ranks, size, stages, &nccl), PN_OK);
    ck_assert(nccl);
    ck_assert_int_eq(choose(AUTO, ranks, size, stages, &nccl), PN_OK);
    ck_assert_msg(!nccl, "auto took nccl, which has not run on a GPU yet");
    ck_assert_int_eq(choose(MPI_, ranks, size, stages, &nccl), PN_OK);
    ck_assert(!nccl);
}

START_TEST(one_gpu_per_rank_may_take_nccl)
{
    /* 2 replicas x 2 stages on one node of 4 GPUs; and on two nodes of 2 */
    pn_rank_gpu one_node[] = {G(0, 0), G(0, 1), G(0, 2), G(0, 3)};
    accepted(one_node, 4, 2);
    pn_rank_gpu two_nodes[] = {G(0, 0), G(0, 1), G(2, 0), G(2, 1)};
    accepted(two_nodes, 4, 2);
    accepted(two_nodes, 4, 4); /* one pipe of 4 stages */
    accepted(two_nodes, 4, 1); /* 4 replicas of 1 stage */
    pn_rank_gpu lone[] = {G(0, 0)};
    accepted(lone, 1, 1); /* nothing travels: auto stays on mpi */
}
END_TEST

START_TEST(nccl_refused_saying_why)
{
    pn_rank_gpu gpus[] = {NO_NCCL(0, 0), NO_NCCL(0, 1)};
    refused(gpus, 2, 2, "built without NCCL");
    /* one rank's CUDA module without NCCL (another build there): named */
    pn_rank_gpu mixed[] = {G(0, 0), NO_NCCL(1, 0)};
    refused(mixed, 2, 2, "rank 1 has no NCCL transport");
    pn_rank_gpu cpu[] = {G(0, 0), G(0, -1)};
    refused(cpu, 2, 2, "rank 1 trains on the cpu");
    pn_rank_gpu all_cpu[] = {G(0, -1), G(0, -1)};
    refused(all_cpu, 2, 1, "rank 0 trains on the cpu");
    /* 2 ranks on one GPU: as stages of one replica, and as replicas of one stage */
    pn_rank_gpu shared[] = {G(0, 0), G(0, 0)};
    refused(shared, 2, 2, "ranks 0 and 1 share GPU 0 of one node");
    refused(shared, 2, 2, "stages of one replica");
    refused(shared, 2, 1, "both hold one stage");
    /* the same GPU index on two nodes is two GPUs */
    pn_rank_gpu apart[] = {G(0, 0), G(1, 0)};
    accepted(apart, 2, 2);
}
END_TEST

START_TEST(a_gpu_is_known_by_its_identity_not_its_index)
{
    /* per-rank masks (Slurm --gpus-per-task=1): each rank sees its own GPU as index 0 */
    pn_rank_gpu masked[] = {{0, 0, 100, 1}, {0, 0, 200, 1}};
    accepted(masked, 2, 2);
    /* masks in two orders: indices 0 and 1 name one GPU */
    pn_rank_gpu permuted[] = {{0, 0, 300, 1}, {0, 1, 300, 1}};
    refused(permuted, 2, 2, "ranks 0 and 1 share GPU 0");
    /* no identity known: the index decides */
    pn_rank_gpu unknown[] = {{0, 0, -1, 1}, {0, 0, -1, 1}};
    refused(unknown, 2, 1, "both hold one stage");
}
END_TEST

START_TEST(only_ranks_of_one_communicator_must_differ)
{
    /* 2 x 2: ranks 0 and 3 (replica 0 stage 0, replica 1 stage 1) share no pipe and no
     * replica group: one GPU between them is no NCCL communicator's business */
    pn_rank_gpu diagonal[] = {G(0, 0), G(0, 1), G(0, 2), G(0, 0)};
    accepted(diagonal, 4, 2);
    /* ranks 1 and 3 hold stage 1 of both replicas */
    pn_rank_gpu column[] = {G(0, 0), G(0, 1), G(0, 2), G(0, 1)};
    refused(column, 4, 2, "ranks 1 and 3 share GPU 1");
    /* ranks 2 and 3 are the stages of replica 1 */
    pn_rank_gpu row[] = {G(0, 0), G(0, 1), G(0, 2), G(0, 2)};
    refused(row, 4, 2, "ranks 2 and 3 share GPU 2");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("transport");
    TCase *tc = tcase_create("choice");
    tcase_add_test(tc, one_gpu_per_rank_may_take_nccl);
    tcase_add_test(tc, nccl_refused_saying_why);
    tcase_add_test(tc, a_gpu_is_known_by_its_identity_not_its_index);
    tcase_add_test(tc, only_ranks_of_one_communicator_must_differ);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
