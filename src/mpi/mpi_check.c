/* Messages for failed MPI calls (mpi_check.h). */
#include "mpi/mpi_check.h"

#include <stdio.h>

int pn_mpi_fail(int code, const char *call, const char *file, int line)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "code %d", code);
    return pn_error_set(PN_ERR_MPI, "%s failed: %s (%s:%d)", call, text, file, line);
}
