/* PN_MPI_CHECK: turns a failed MPI call into a pn_status with the call, the MPI
 * error text and the file:line. Communicators are set to MPI_ERRORS_RETURN. */
#ifndef PN_MPI_CHECK_H
#define PN_MPI_CHECK_H

#include <mpi.h>

#include "base/error.h"

/* Records the failure of call (an MPI return code) and returns PN_ERR_MPI. */
int pn_mpi_fail(int code, const char *call, const char *file, int line);

#define PN_MPI_CHECK(call)                                                  \
    do {                                                                    \
        int pn_mpi_rc_ = (call);                                            \
        if (pn_mpi_rc_ != MPI_SUCCESS)                                      \
            return pn_mpi_fail(pn_mpi_rc_, #call, __FILE__, __LINE__);      \
    } while (0)

#endif
