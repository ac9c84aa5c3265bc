/* Snapshot benchmark: the time to save (every stage writes its part, rank 0 the
 * index: write, fsync, rename) and to load (every rank reads and verifies its own
 * parameters) the training state of a model, default models/fashion_mlp.json with
 * adam (values and two slots, 3 x 1.86M floats). Under `mpirun -np P` the model is
 * cut into P stages, each writing its own part (docs/snapshots.md); with one rank
 * one file is written. Prints medians of several
 * rounds; the directory (default /dev/shm, where the file system costs little and
 * the ranks show) decides what the write costs. Between save and load the arena
 * is overwritten, and after the load it must hold the saved bits again.
 *
 * usage: [mpirun -np P] bench_snapshot [MODEL.json] [--dir DIR] [--rounds R] */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "bench_util.h"
#include "math/ops.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_file.h"
#include "mpi/comm.h"
#include "mpi/job_mpi.h"
#include "train/checkpoint.h"
#include "net/graph.h"
#include "net/network.h"
#include "optim/optimizer.h"
#include "plan/plan.h"
#include "train/train_config.h"

#define CHECK(call)                                                                       \
    do {                                                                                  \
        if ((call) < 0) {                                                                 \
            fprintf(stderr, "bench_snapshot: %s: %s\n", #call, pn_error_message());       \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
        }                                                                                 \
    } while (0)

/* Folds one matrix's bytes into the checksum h. */
static unsigned long long fold(unsigned long long h, const pn_matrix *m, float *host)
{
    CHECK(pn_matrix_read(m, host));
    const unsigned char *b = (const unsigned char *)host;
    for (size_t i = 0; i < (size_t)m->rows * (size_t)m->cols * sizeof *host; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

/* A checksum of this rank's state: each parameter's values and slots (the alignment
 * padding between parameters is not state and no snapshot restores it). */
static unsigned long long state_sum(const pn_params *p)
{
    float *host = malloc(pn_params_size(p) * sizeof *host + 1);
    unsigned long long h = 1469598103934665603ULL;
    for (int i = 0; i < pn_params_count(p); i++) {
        pn_matrix value = pn_params_value(p, i);
        h = fold(h, &value, host);
        for (int s = 0; s < pn_params_n_slots(p); s++) {
            pn_matrix slot = pn_params_slot(p, s, i);
            h = fold(h, &slot, host);
        }
    }
    free(host);
    return h;
}

/* Overwrites the arena, so that a load has to bring everything back. */
static void scramble(pn_params *p)
{
    for (int a = -1; a < pn_params_n_slots(p); a++) {
        pn_matrix m = a < 0 ? pn_params_all_values(p) : pn_params_all_slot(p, a);
        CHECK(pn_fill(&m, 0.5f));
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const char *model = "models/fashion_mlp.json", *base = "/dev/shm";
    int rounds = 9, rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) base = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (argv[i][0] != '-') model = argv[i];
        else {
            if (rank == 0)
                fprintf(stderr, "usage: bench_snapshot [MODEL.json] [--dir DIR] [--rounds R]\n");
            MPI_Finalize();
            return 2;
        }
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/pipenet-bench-snapshot-%d", base, (int)getppid());

    pn_graph *g;
    pn_train_config cfg;
    pn_train_config_default(&cfg);
    CHECK(pn_graph_load(&g, model));
    CHECK(pn_train_config_from_json(pn_graph_train_spec(g), model, &cfg));
    cfg.optimizer.total_steps = 1000;
    pn_plan *plan;
    pn_job *job;
    pn_comm *comm;
    CHECK(pn_plan_build(&plan, g, size));
    CHECK(pn_job_wrap(MPI_COMM_WORLD, &job));
    CHECK(pn_comm_create(&comm, job, size));
    const pn_grid *grid = pn_comm_grid(comm);

    /* This rank's stage: its layers over one arena, with the optimizer's slots. */
    bool *member = calloc((size_t)g->n_nodes, sizeof *member);
    for (int i = 0; i < g->n_nodes; i++) member[i] = plan->stage_of[i] == grid->stage;
    pn_params *params;
    pn_network *net;
    pn_optimizer *opt;
    pn_network_options o = {.member = member, .device = pn_device_host(), .init = true, .seed = 1};
    CHECK(pn_network_build(g, &o, &params, &net));
    CHECK(pn_optimizer_create(&opt, &cfg.optimizer, params));
    /* slots that are not all zero, so that loading them is checked too */
    for (int s = 0; s < pn_params_n_slots(params); s++) {
        pn_matrix slot = pn_params_all_slot(params, s), values = pn_params_all_values(params);
        CHECK(pn_copy(&values, &slot));
        CHECK(pn_scale(&slot, (float)(s + 2)));
    }
    unsigned long long saved = state_sum(params);
    long floats = (long)pn_params_elements(params), total = 0;
    MPI_Allreduce(&floats, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    char *config = json_dumps(g->root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    double *save = calloc((size_t)rounds, sizeof *save);
    double *load = calloc((size_t)rounds, sizeof *load);
    char path[1200] = "";
    for (int r = 0; r < rounds; r++) {
        pn_progress_mark mark = {r + 1, 0, 0}, got;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = pn_now();
        pn_run_settings run = {config, 1, 64};
        CHECK(pn_checkpoint_save(comm, params, NULL, run, mark, dir, 2, path, sizeof path));
        MPI_Barrier(MPI_COMM_WORLD);
        save[r] = pn_now() - t0;
        char used[1200];
        scramble(params);
        MPI_Barrier(MPI_COMM_WORLD);
        double t1 = pn_now();
        CHECK(pn_checkpoint_find(comm, "auto", dir, used, sizeof used)); /* as --resume auto */
        CHECK(pn_checkpoint_load(comm, params, NULL, used, &got));
        MPI_Barrier(MPI_COMM_WORLD);
        load[r] = pn_now() - t1;
        if (state_sum(params) != saved) {
            fprintf(stderr, "bench_snapshot: rank %d: the loaded state differs from the "
                            "saved one\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    if (rank == 0) {
        printf("snapshot of %s: %ld parameters x %d arrays (values + %d slots) = %.1f MB, "
               "%d stage(s) on %d rank(s), %s, median of %d rounds\n",
               model, total, 1 + pn_params_n_slots(params), pn_params_n_slots(params),
               (double)total * (1 + pn_params_n_slots(params)) * 4 / 1e6, size, size, base,
               rounds);
        double save_min = save[0], load_min = load[0];
        for (int r = 1; r < rounds; r++) {
            if (save[r] < save_min) save_min = save[r];
            if (load[r] < load_min) load_min = load[r];
        }
        printf("save (parts + index): median %.1f ms (min %.1f)\n",
               1e3 * bench_median(save, rounds), 1e3 * save_min);
        printf("load (read + verify + set): median %.1f ms (min %.1f)\n",
               1e3 * bench_median(load, rounds), 1e3 * load_min);
        CHECK(pn_snapshot_prune(dir, 0, LONG_MAX));
        rmdir(dir);
    }
    free(save);
    free(load);
    free(config);
    free(member);
    pn_optimizer_free(opt);
    pn_network_free(net);
    pn_params_free(params);
    pn_plan_free(plan);
    pn_comm_free(comm);
    pn_job_free(job);
    pn_graph_free(g);
    MPI_Finalize();
    return 0;
}
