/* pn_job: the processes that run one training together, seen as ranks 0 .. size-1
 * (under MPI, a communicator; the program's job is MPI_COMM_WORLD). The program
 * starts and ends MPI through it, and ends every rank when one of them fails in a
 * way the others cannot know of. pn_train takes a job and lays its ranks out as
 * replicas x stages (mpi/comm.h). Code that already has an MPI communicator (tests,
 * programs embedding pipenet) wraps it with mpi/job_mpi.h. */
#ifndef PN_JOB_H
#define PN_JOB_H

typedef struct pn_job pn_job;

/* Starts MPI and returns the job of all its processes (free with pn_job_finalize). */
int pn_job_init(int *argc, char ***argv, pn_job **world);

/* Ends MPI (after the last use of any job) and frees world. */
void pn_job_finalize(pn_job *world);

/* Ends every rank of the job now, with exit status code (after a failure on this
 * rank that its peers may be waiting on). Does not return: where the launcher is out
 * of reach, this rank ends itself 3 s later (SIGALRM). */
void pn_job_abort(pn_job *job, int code) __attribute__((noreturn));

/* Collective over the job: rank 0's status rc for every rank. Rank 0 and a rank
 * whose own rc failed get theirs back; the others PN_OK, or PN_ERR_PEER when rank 0
 * failed (it reports why). For what rank 0 alone decides, before any other work. */
int pn_job_agree_root(pn_job *job, int rc);

int pn_job_rank(const pn_job *job);
int pn_job_size(const pn_job *job);

/* This rank's place among the job's ranks on its node (MPI_Comm_split_type with
 * MPI_COMM_TYPE_SHARED, so whatever started the job: mpirun, srun, PBS), and how many
 * share the node. Collective over the job. */
int pn_job_node_rank(const pn_job *job, int *node_rank, int *node_size);

/* Frees a job that wraps a communicator (not the communicator itself). */
void pn_job_free(pn_job *job);

#endif
