/* dist.c — whether `nabla` runs under mpirun, and starting MPI when it does. */
#include "cli.h"

#include <stdlib.h>

int cli_dist_start(const char *cmd, int *argc, char ***argv, int *rank, int *world) {
    *rank = 0;
    *world = 1;
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK")) return CLI_OK;
    if (!nb_dist_available())
        return cli_error(cmd, CLI_FAIL, "started by mpirun, but this build of nabla has no MPI (install libopenmpi-dev "
                         "and rebuild; `nabla doctor` says)");
    if (nb_dist_init(argc, argv) != NB_OK) return cli_nb_error(cmd, "starting MPI");
    *rank = nb_dist_rank();
    *world = nb_dist_world_size();
    return CLI_OK;
}
