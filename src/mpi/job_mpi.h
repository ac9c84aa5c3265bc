/* A pn_job over an existing MPI communicator, for code that manages MPI itself
 * (tests that run several layouts on sub-communicators, embedding programs). */
#ifndef PN_JOB_MPI_H
#define PN_JOB_MPI_H

#include <mpi.h>

#include "mpi/job.h"

/* A job whose ranks are those of comm (borrowed: it must outlive the job). */
int pn_job_wrap(MPI_Comm comm, pn_job **out);

/* The communicator behind a job. */
MPI_Comm pn_job_comm(const pn_job *job);

#endif
