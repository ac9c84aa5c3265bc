/* `pipenet train MODEL.json`: training defaults from the model's "train" object,
 * overridden by options, then the trainer. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "base/stop_signal.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/train_options.h"
#include "mpi/comm.h"
#include "mpi/job.h"
#include "net/graph.h"
#include "plan/schedule.h"
#include "train/trainer.h"

static void usage(FILE *out)
{
    char schedules[128];
    pn_train_config d; /* the defaults, for the [train.KEY, default] of the choices */
    pn_train_config_default(&d);
    fprintf(out,
            "usage: pipenet train MODEL.json [options]\n"
            "\n"
            "Trains the model described by MODEL.json. Defaults come from the model's\n"
            "\"train\" object; options override them.\n"
            "\n"
            "options:\n"
            "  --data FILE      training set (dataset HDF5)           [train.data]\n"
            "  --eval FILE      evaluated after each epoch (\"\": none) [train.eval]\n"
            "  --eval-every N   also evaluate every N steps; 0: only at epoch ends\n"
            "                                                         [train.eval_every, 0]\n"
            "  --epochs N       passes over the training set; given here, it replaces\n"
            "                   the model's train.steps              [train.epochs, 1]\n"
            "  --steps N        stop when the global step count reaches N (overrides\n"
            "                   --epochs)                             [train.steps]\n"
            "  --batch B        samples per step                      [train.batch, 64]\n"
            "  --lr X           base learning rate                    [train.optimizer.lr]\n"
            "  --seed S         seeds initialization, shuffling, dropout [train.seed, 1]\n"
            "  --metrics FILE   write JSON lines: one per step, one per evaluation; a\n"
            "                   resume trims a regular file to its step, and appends to a\n"
            "                   stream (a FIFO, /dev/stdout)\n"
            "  --trace FILE     write every rank's timeline (passes per micro-batch and\n"
            "                   layer, transfers, waits, all-reduces, optimizer, data,\n"
            "                   evaluation, snapshots) as Chrome trace-event JSON; open it\n"
            "                   in https://ui.perfetto.dev or chrome://tracing\n"
            "                   (neither may be an input of the run, the snapshot\n"
            "                   directory or a directory: exit 2; the trace is written\n"
            "                   whole and renamed into place, a stream in place)\n"
            "  --threads N      BLAS threads per rank (default: $OPENBLAS_NUM_THREADS, else\n"
            "                   the node's cores divided among this job's ranks on it)\n"
            "  --log-every S    seconds between progress lines when not on a terminal [10]\n"
            "  --data-cache MB  read a dataset file into memory when it fits in MB [1024];\n"
            "                   0 reads every batch from the file\n"
            "  --device D       where each rank's stage runs             [train.device, %s]\n",
            pn_device_request_name((pn_device_request)d.device_request));
    pn_choice_help(out, &pn_device_requests, 19);
    fprintf(out,
            "                   cuda takes GPU (node-local rank mod visible GPUs); CUDA\n"
            "                   training has run on one GPU, never on several (docs/running.md)\n"
            "\n"
            "pipeline and data parallelism (under mpirun or srun; D = ranks / P):\n"
            "  --stages P       pipeline stages (default: the layers' \"stage\" attributes, else 1)\n"
            "  --layer-times FILE  balance the stages by the layer times of FILE (from\n"
            "                   `pipenet plan --measure --save-times FILE`) instead of FLOPs\n"
            "  --micro-batches M  micro-batches per step and replica (default: the largest\n"
            "                   divisor of the replica's batch up to 4 P; interleaved:\n"
            "                   the largest such multiple of P)\n"
            "  --schedule S     %-40s[train.schedule, %s]\n"
            "  --transport T    what moves activations and gradients between ranks\n"
            "                                                        [train.transport, %s]\n",
            pn_choice_list(&pn_schedule_kinds, schedules, sizeof schedules),
            pn_schedule_kind_name((pn_schedule_kind)d.schedule),
            pn_transport_request_name((pn_transport_request)d.transport_request));
    pn_choice_help(out, &pn_transport_requests, 19);
    fprintf(out,
            "  --precision P    the number format of the GEMMs, of the values between layers\n"
            "                   and of what stages send; parameters, their gradients and the\n"
            "                   optimizer stay fp32 (docs/training.md)  [train.precision, %s]\n",
            pn_choice_name(&pn_precisions, d.precision));
    pn_choice_help(out, &pn_precisions, 19);
    fprintf(out,
            "  --virtual-stages V  with --schedule interleaved: cut the model into P x V\n"
            "                   chunks, chunk c on stage c mod P, so a micro-batch goes\n"
            "                   round the pipe V times and the bubble shrinks V times\n"
            "                   (V >= 2, P >= 2, M a multiple of P) [train.virtual_stages, 2]\n"
            "  --recompute      keep only each stage's inputs of the micro-batches in flight\n"
            "                   and run a micro-batch's forward again before its backward:\n"
            "                   one network's activations per stage instead of one per\n"
            "                   micro-batch in flight, for about one more forward per\n"
            "                   micro-batch (same results)             [train.recompute]\n"
            "  --shard-optimizer  with D replicas, each keeps the optimizer slots (adam's m\n"
            "                   and v, momentum's v) of 1/D of the stage's dense parameters,\n"
            "                   updates that part and gathers the others' values after each\n"
            "                   step (ZeRO stage 1; same results and snapshots)\n"
            "                                                    [train.shard_optimizer]\n"
            "  --no-share-memory  give every activation and gradient a block of its own\n"
            "                   instead of sharing blocks between those whose lifetimes\n"
            "                   do not overlap (same results; to compare) [train.share_memory]\n"
            "\n"
            "snapshots (HDF5, one file per snapshot, layout independent):\n"
            "  --snapshot-dir DIR  write DIR/snapshot-<step>.h5 at the end, every\n"
            "                   --snapshot-every steps, and on SIGTERM or SIGUSR1 (then exit 3;\n"
            "                   without it such a stop saves nothing and exits 4, and the\n"
            "                   trained model is not kept: a warning says so at the start).\n"
            "                   One run per DIR: the run holds DIR/pipenet.lock, and another\n"
            "                   run given DIR is refused (a dead holder's lock is taken over);\n"
            "                   DIR must have room for one snapshot before training starts;\n"
            "                   \"\": none                              [train.snapshot_dir]\n"
            "  --snapshot-every N  steps between snapshots; 0: end and signals only\n"
            "                                                         [train.snapshot_every, 0]\n"
            "  --keep K         snapshots kept in DIR                 [train.keep, 3]\n"
            "  --resume PATH    continue from a snapshot file, a directory's newest valid\n"
            "                   snapshot (as export and infer read one), or `auto`: the\n"
            "                   newest valid one in the run's snapshot directory (none yet:\n"
            "                   start at step 0). Any layout resumes any other's; the seed\n"
            "                   and batch are the snapshot's\n"
            "  --resume-override  resume even when --seed, --batch or the model's inputs and\n"
            "                   layers differ from the snapshot's (refused without it; warned)\n"
            "\n"
            "  --stall-timeout S  end the job when a rank waits S seconds on others during a\n"
            "                   step or an evaluation (a stalled rank); 0: never [max(20 s,\n"
            "                   20 x the median step time)]; given or not, at least 300 s\n"
            "                   until the first step is done\n"
            "  --deterministic  add gradients in a fixed tree over micro-batches of a fixed\n"
            "                   size: every layout with that size gives identical bits\n"
            "                   (M must be a power of two)\n"
            "  -h, --help       this text\n"
            "\n"
            "exit status: 0 finished; 1 error (snapshots already written are kept);\n"
            "2 wrong command line; 3 stopped early by SIGTERM or SIGUSR1, its state in\n"
            "--snapshot-dir (--resume auto finishes); 4 stopped early by SIGTERM or\n"
            "SIGUSR1 with no --snapshot-dir: nothing was saved (running again starts over)\n");
}

/* Without a snapshot directory the trained parameters end with the process: said
 * once (rank 0) before any work, naming both ways to give one. */
static void warn_unkept(const pn_train_config *cfg, const char *model)
{
    if (cfg->snapshot_dir[0]) return;
    pn_log_warn("no snapshot directory: nothing of this run will be kept, neither the trained "
                "model nor a state to resume (give --snapshot-dir DIR, or \"snapshot_dir\" in "
                "the train section of %s)", model);
}

/* path as one shell word: as it is when it needs no quotes, else in single quotes. */
static void print_shell_word(const char *path)
{
    if (path[strspn(path, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                          "_./+-=:,@%")] == '\0') {
        fputs(path, stdout);
        return;
    }
    putchar('\'');
    for (const char *p = path; *p; p++) {
        if (*p == '\'') fputs("'\\'", stdout); /* ends the quotes, a quote, opens again */
        putchar(*p);
    }
    putchar('\'');
}

/* The run's last line (rank 0): the snapshot that holds its parameters and the
 * command that makes a model file of it, or that nothing was kept. */
static void say_what_is_kept(const pn_train_config *cfg, const pn_train_result *r)
{
    if (r->snapshot[0]) {
        fputs(r->stopped_by_signal ? "newest snapshot: " : "final snapshot: ", stdout);
        print_shell_word(r->snapshot);
        fputs("; export it with: pipenet export ", stdout);
        print_shell_word(r->snapshot);
        puts(" --out MODEL.h5");
    } else if (!cfg->snapshot_dir[0]) {
        puts("nothing kept: no snapshot directory (--snapshot-dir DIR, or \"snapshot_dir\" in "
             "the model's train section)");
    }
    fflush(stdout);
}

int pn_cmd_train(int argc, char **argv)
{
    pn_train_overrides o = {0};
    int parsed = pn_train_options_parse(argc, argv, &o);
    if (parsed > 0) {
        usage(stdout);
        return 0;
    }
    if (parsed < 0) return PN_EXIT_USAGE;
    const char *path;
    if (pn_opt_model_argument(argc, argv, "train", usage, &path)) return PN_EXIT_USAGE;
    pn_job *job;
    if (pn_job_init(NULL, NULL, &job) < 0) return pn_cli_fail(pn_error_message());
    int rank = pn_job_rank(job);
    pn_graph *g;
    int rc = pn_graph_load(&g, path); /* the same file, so the same outcome on every rank */
    if (rc < 0) return pn_cli_fail_job(job, rank == 0 ? rc : PN_ERR_PEER, true, PN_EXIT_ERROR);
    pn_train_config cfg;
    pn_train_config_default(&cfg);
    rc = pn_train_config_from_json(pn_graph_train_spec(g), path, &cfg);
    pn_train_result result = {.failed_together = 1};
    if (rc < 0 && rank != 0) rc = PN_ERR_PEER;
    if (rc == PN_OK) {
        pn_train_options_apply(&o, &cfg);
        /* rank 0 alone writes the outputs: its view of the paths decides, before any
         * work; an output that would replace an input, or an option left without the
         * snapshot directory it needs, is a wrong command line */
        rc = pn_job_agree_root(job, rank == 0 ? pn_train_settings_check(&o, &cfg, path) : PN_OK);
        if (rc < 0) {
            pn_graph_free(g);
            return pn_cli_fail_job(job, rc, true, rc == PN_ERR_MPI ? PN_EXIT_ERROR : PN_EXIT_USAGE);
        }
        if (rank == 0) warn_unkept(&cfg, path);
        rc = pn_train(g, &cfg, job, NULL, &result);
        free(result.losses);
    }
    pn_graph_free(g);
    if (rc < 0) return pn_cli_fail_job(job, rc, result.failed_together, PN_EXIT_ERROR);
    if (rank == 0) say_what_is_kept(&cfg, &result);
    pn_job_finalize(job);
    if (result.stopped_unsaved) return PN_EXIT_STOPPED_UNSAVED;
    return result.stopped_by_signal ? PN_EXIT_STOPPED : PN_EXIT_FINISHED;
}
