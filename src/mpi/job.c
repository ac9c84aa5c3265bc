/* The job of a program run: MPI's start, end and abort, and a communicator's ranks. */
#include "mpi/job_mpi.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/error.h"
#include "mpi/mpi_check.h"

struct pn_job {
    MPI_Comm comm;
    int rank, size;
};

int pn_job_wrap(MPI_Comm comm, pn_job **out)
{
    *out = NULL;
    pn_job *j = calloc(1, sizeof *j);
    if (!j) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    j->comm = comm;
    int rc = MPI_Comm_rank(comm, &j->rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(comm, &j->size);
    if (rc != MPI_SUCCESS) {
        free(j);
        return pn_mpi_fail(rc, "MPI_Comm_rank", __FILE__, __LINE__);
    }
    *out = j;
    return PN_OK;
}

MPI_Comm pn_job_comm(const pn_job *job) { return job->comm; }

int pn_job_init(int *argc, char ***argv, pn_job **world)
{
    *world = NULL;
    int rc = MPI_Init(argc, argv);
    if (rc != MPI_SUCCESS) return pn_mpi_fail(rc, "MPI_Init", __FILE__, __LINE__);
    rc = pn_job_wrap(MPI_COMM_WORLD, world);
    if (rc < 0) MPI_Finalize();
    return rc;
}

void pn_job_finalize(pn_job *world)
{
    pn_job_free(world);
    MPI_Finalize();
}

/* How long MPI_Abort may take before this process ends itself: a working abort
 * ends the job within 1-3 s, the launcher killing this rank as well, and a rank the
 * alarm ends first changes nothing; 2 s keeps a cut-off rank under srun within the
 * stall timeout + 10 s (docs/running.md, measured 14.3 s with a stall of 5). */
enum { ABORT_GRACE_S = 2 };

void pn_job_abort(pn_job *job, int code)
{
    /* MPI_Abort asks the launcher to end the job. A rank cut off from it (a link down
     * between hosts) was measured stuck in it under srun (PMIx's abort waits on srun,
     * out of reach, for good), so an alarm, whose default action ends the process,
     * ends this rank anyway. */
    signal(SIGALRM, SIG_DFL);
    alarm(ABORT_GRACE_S);
    MPI_Abort(job ? job->comm : MPI_COMM_WORLD, code);
    exit(code); /* MPI_Abort does not return; this keeps the promise if it did */
}

int pn_job_agree_root(pn_job *job, int rc)
{
    int root_rc = rc;
    PN_MPI_CHECK(MPI_Bcast(&root_rc, 1, MPI_INT, 0, job->comm));
    if (job->rank == 0 || rc < 0) return rc;
    return root_rc < 0 ? pn_error_set(PN_ERR_PEER, "rank 0 failed") : PN_OK;
}

int pn_job_rank(const pn_job *job) { return job->rank; }
int pn_job_size(const pn_job *job) { return job->size; }

int pn_job_node_rank(const pn_job *job, int *node_rank, int *node_size)
{
    MPI_Comm node;
    PN_MPI_CHECK(MPI_Comm_split_type(job->comm, MPI_COMM_TYPE_SHARED, job->rank, MPI_INFO_NULL,
                                     &node));
    int rc = MPI_Comm_rank(node, node_rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(node, node_size);
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS) return pn_mpi_fail(rc, "MPI_Comm_rank", __FILE__, __LINE__);
    return PN_OK;
}

void pn_job_free(pn_job *job) { free(job); }
