/* Layout invariance, run under mpirun with 4 ranks (tests/test_layouts.sh): a small
 * MLP, a network whose skip connection crosses stages, and a sequence model over
 * padded samples (their lengths cross every stage link) train for 20 steps under
 * every layout (replicas D, stages P, micro-batches M) of the list and both
 * schedules, on sub-communicators of the world; every step's loss must equal the
 * one-process run's within a relative 1e-5 and every final parameter within 1e-4.
 * Then with --deterministic, 50 steps under every layout with micro-batches of 4
 * samples, both schedules and a repeated run must give one parameter hash.
 * Then --recompute (pipeline/kept_inputs.h): a model with dropout and a skip
 * connection across stages, and the sequence model, must end with the same
 * parameter hash as without it,
 * under each of several layouts and both schedules, and under --deterministic the
 * same hash as every layout of the plain run.
 * Then the interleaved schedule (virtual stages V, chunk c on stage c mod P): the
 * same losses and parameters as the one-process run, under --deterministic the one
 * hash of every layout with micro-batches of 4, and under --recompute the plain
 * run's hash; 2 stages x 2 or 3 virtual stages, alone and as 2 replicas.
 * Every run above plans its activation memory (the default); last, with the planner
 * off (--no-share-memory), every model under the --deterministic layouts, both
 * schedules, interleaved and --recompute must give the planned runs' hash.
 * Prints a table of the largest differences, the hashes, and "N passed, N failed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/rng.h"
#include "io/hdf5_util.h"
#include "mpi/job_mpi.h"
#include "net/graph.h"
#include "plan/schedule.h"
#include "train/trainer.h"

#include "model_files.h"

enum { SAMPLES = 320, WIDTH = 12, CLASSES = 5, STEPS = 20, DET_STEPS = 50, MAX_PARAMS = 64,
       SEQ = 8, VOCAB = 11 };

#define MLP mf_text("mlp_three_hidden")

/* h1 feeds the add three layers later: with 4 stages it crosses two boundaries. */
#define SKIP mf_text("skip_across_stages")

/* SKIP with dropout before and after the connection that crosses stages: masks
 * drawn again by a recomputed forward must be the first forward's. */
#define DROP mf_text("skip_across_stages_dropout")

/* Samples of 1..8 tokens padded to 8 (lengths from the data): every layer's output
 * carries the lengths, so a stage boundary anywhere sends them over a link; the loss
 * averages over the batch's real positions, which the last stage must count like
 * one process does. */
#define PADDED mf_text("padded_lstm_attention")

typedef struct layout {
    int replicas, stages, micro;
    int virtual_stages; /* > 0: the interleaved schedule with this many */
} layout;

static const layout layouts[] = {{1, 1, 1, 0}, {1, 2, 4, 0}, {2, 1, 2, 0}, {2, 2, 4, 0}, {1, 4, 8, 0}};
enum { N_LAYOUTS = sizeof layouts / sizeof *layouts };

/* Layouts whose micro-batches hold 4 of the batch's 32 samples. */
static const layout det_layouts[] = {{1, 1, 8, 0}, {1, 2, 8, 0}, {2, 1, 4, 0}, {2, 2, 4, 0}, {1, 4, 8, 0}};
enum { N_DET = sizeof det_layouts / sizeof *det_layouts };

/* --recompute against the plain run: layouts whose stages hold several micro-batches
 * in flight under at least one schedule (1 stage under gpipe: every forward first). */
static const layout rc_layouts[] = {{1, 1, 4, 0}, {1, 2, 4, 0}, {2, 2, 4, 0}, {1, 4, 8, 0}};
enum { N_RC = sizeof rc_layouts / sizeof *rc_layouts };

/* Interleaved layouts (D, P, M, V): of models with 5 layers or more (V = 2), or 7 or
 * more (V = 3); and those whose micro-batches hold 4 samples (--deterministic). */
static const layout il_layouts[] = {{1, 2, 4, 2}, {2, 2, 4, 2}, {1, 2, 2, 3}, {2, 2, 2, 3}};
static const layout il_det_layouts[] = {{1, 2, 8, 2}, {2, 2, 4, 2}, {1, 2, 8, 3}};
enum { N_IL = sizeof il_layouts / sizeof *il_layouts, N_IL_DET = 3 };

/* Parameters of a whole model gathered by name on rank 0 of a run. */
typedef struct param_set {
    int n;
    char names[MAX_PARAMS][64];
    float *values[MAX_PARAMS];
    int counts[MAX_PARAMS];
} param_set;

typedef struct gather_ctx {
    MPI_Comm comm;
    param_set *out; /* filled on rank 0 */
} gather_ctx;

static void keep(param_set *set, const char *name, const float *v, int count)
{
    if (set->n >= MAX_PARAMS) return;
    snprintf(set->names[set->n], sizeof set->names[0], "%s", name);
    set->values[set->n] = malloc((size_t)count * sizeof(float));
    memcpy(set->values[set->n], v, (size_t)count * sizeof(float));
    set->counts[set->n++] = count;
}

/* Every rank sends (name, values) of each parameter of its stage to rank 0; a
 * replica other than the first holds copies, which rank 0 also compares. */
static int gather_params(void *arg, const pn_params *params)
{
    gather_ctx *g = arg;
    int rank, size;
    MPI_Comm_rank(g->comm, &rank);
    MPI_Comm_size(g->comm, &size);
    int n = pn_params_count(params);
    if (rank != 0) {
        MPI_Send(&n, 1, MPI_INT, 0, 1, g->comm);
        for (int i = 0; i < n; i++) {
            const pn_param *p = pn_params_get(params, i);
            char name[64];
            snprintf(name, sizeof name, "%s", p->name);
            int count = p->rows * p->cols;
            MPI_Send(name, 64, MPI_CHAR, 0, 2, g->comm);
            MPI_Send(&count, 1, MPI_INT, 0, 3, g->comm);
            float *v = malloc((size_t)count * sizeof(float));
            pn_matrix m = pn_params_value(params, i);
            pn_matrix_read(&m, v);
            MPI_Send(v, count, MPI_FLOAT, 0, 4, g->comm);
            free(v);
        }
        return PN_OK;
    }
    for (int i = 0; i < n; i++) {
        const pn_param *p = pn_params_get(params, i);
        keep(g->out, p->name, pn_params_value(params, i).data, p->rows * p->cols);
    }
    for (int r = 1; r < size; r++) {
        int m;
        MPI_Recv(&m, 1, MPI_INT, r, 1, g->comm, MPI_STATUS_IGNORE);
        for (int i = 0; i < m; i++) {
            char name[64];
            int count;
            MPI_Recv(name, 64, MPI_CHAR, r, 2, g->comm, MPI_STATUS_IGNORE);
            MPI_Recv(&count, 1, MPI_INT, r, 3, g->comm, MPI_STATUS_IGNORE);
            float *v = malloc((size_t)count * sizeof(float));
            MPI_Recv(v, count, MPI_FLOAT, r, 4, g->comm, MPI_STATUS_IGNORE);
            keep(g->out, name, v, count);
            free(v);
        }
    }
    return PN_OK;
}

static void free_set(param_set *set)
{
    for (int i = 0; i < set->n; i++) free(set->values[i]);
    set->n = 0;
}

/* Writes the dataset on rank 0: features uniform in [-1, 1], labels from a fixed
 * random linear map, so that the task is learnable. */
/* The padded sequences: a walk t -> (3t + 1) mod 11 from a random start, of a random
 * length in 1..8, zeros past it; next holds each position's successor. */
static int write_sequences(hid_t file, const char *path)
{
    int *tokens = calloc(SAMPLES * SEQ, sizeof(int)), *next = calloc(SAMPLES * SEQ, sizeof(int));
    int *lengths = malloc(sizeof(int) * SAMPLES);
    pn_rng rng;
    pn_rng_init(&rng, 77, 1);
    for (int s = 0; s < SAMPLES; s++) {
        lengths[s] = 1 + (int)(pn_rng_uniform(&rng) * SEQ) % SEQ;
        int t = (int)(pn_rng_uniform(&rng) * VOCAB) % VOCAB;
        for (int k = 0; k < lengths[s]; k++) {
            tokens[s * SEQ + k] = t;
            next[s * SEQ + k] = t = (3 * t + 1) % VOCAB;
        }
    }
    hsize_t dt[2] = {SAMPLES, SEQ}, dl[1] = {SAMPLES};
    int rc = pn_hdf5_write_dataset(file, path, "tokens", PN_HDF5_INT32, 2, dt, 64, tokens);
    if (rc == 0) rc = pn_hdf5_write_dataset(file, path, "next", PN_HDF5_INT32, 2, dt, 64, next);
    if (rc == 0)
        rc = pn_hdf5_write_dataset(file, path, "lengths", PN_HDF5_INT32, 1, dl, 64, lengths);
    free(tokens), free(next), free(lengths);
    return rc;
}

static int write_data(const char *path)
{
    float *x = malloc(sizeof(float) * SAMPLES * WIDTH);
    int *y = malloc(sizeof(int) * SAMPLES);
    pn_rng rng;
    pn_rng_init(&rng, 99, 1);
    float w[WIDTH][CLASSES];
    for (int i = 0; i < WIDTH; i++)
        for (int c = 0; c < CLASSES; c++) w[i][c] = (float)pn_rng_normal(&rng);
    for (int s = 0; s < SAMPLES; s++) {
        int best = 0;
        float score[CLASSES] = {0};
        for (int i = 0; i < WIDTH; i++) {
            x[s * WIDTH + i] = (float)(2 * pn_rng_uniform(&rng) - 1);
            for (int c = 0; c < CLASSES; c++) score[c] += x[s * WIDTH + i] * w[i][c];
        }
        for (int c = 1; c < CLASSES; c++)
            if (score[c] > score[best]) best = c;
        y[s] = best;
    }
    hid_t file;
    hsize_t dx[2] = {SAMPLES, WIDTH}, dy[1] = {SAMPLES};
    int rc = pn_hdf5_create_file(path, false, &file);
    if (rc == 0) rc = pn_hdf5_write_dataset(file, path, "features", PN_HDF5_FLOAT32, 2, dx, 64, x);
    if (rc == 0) rc = pn_hdf5_write_dataset(file, path, "labels", PN_HDF5_INT32, 1, dy, 64, y);
    if (rc == 0) rc = write_sequences(file, path);
    if (rc == 0) rc = pn_hdf5_close(file, path);
    free(x);
    free(y);
    return rc;
}

typedef struct outcome {
    double losses[DET_STEPS];
    param_set params;
    unsigned long long hash;
} outcome;

/* The runs of unshared(): every argument in a block of its own (--no-share-memory). */
static bool planner_off;

/* Trains model under one layout on the first D*P ranks; fills out on world rank 0. */
static int run_layout(const char *model, const char *data, layout l, int schedule,
                      bool deterministic, bool recompute, outcome *out)
{
    int rank, ranks = l.replicas * l.stages;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, rank < ranks ? 0 : MPI_UNDEFINED, rank, &comm);
    int rc = PN_OK;
    if (comm != MPI_COMM_NULL) {
        json_t *root = json_loads(model, 0, NULL);
        pn_graph *g = NULL;
        rc = pn_graph_from_json(&g, root, "test.json");
        json_decref(root);
        pn_train_config cfg;
        pn_train_config_default(&cfg);
        if (rc == PN_OK) rc = pn_train_config_from_json(pn_graph_train_spec(g), "test.json", &cfg);
        snprintf(cfg.data, sizeof cfg.data, "%s", data);
        cfg.steps = deterministic ? DET_STEPS : STEPS;
        cfg.deterministic = deterministic;
        cfg.recompute = recompute;
        cfg.share_memory = !planner_off;
        cfg.seed = 5;
        cfg.threads = 1;
        cfg.stages = l.stages;
        cfg.micro_batches = l.micro;
        cfg.schedule = l.virtual_stages > 0 ? PN_SCHEDULE_INTERLEAVED : schedule;
        cfg.virtual_stages = l.virtual_stages;
        cfg.log_every_s = 1e9;
        gather_ctx ctx = {comm, &out->params};
        pn_train_hooks hooks = {1, gather_params, &ctx};
        pn_train_result result = {0};
        pn_job *job = NULL;
        if (rc == PN_OK) rc = pn_job_wrap(comm, &job);
        if (rc == PN_OK) rc = pn_train(g, &cfg, job, &hooks, &result);
        pn_job_free(job);
        if (rc < 0 && rc != PN_ERR_PEER) fprintf(stderr, "rank %d: %s\n", rank, pn_error_message());
        for (int s = 0; result.losses && s < cfg.steps; s++) out->losses[s] = result.losses[s];
        out->hash = result.param_hash;
        free(result.losses);
        pn_graph_free(g);
        MPI_Comm_free(&comm);
    }
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return rc;
}

static double loss_diff(const outcome *a, const outcome *b)
{
    double worst = 0;
    for (int s = 0; s < STEPS; s++)
        worst = fmax(worst, fabs(a->losses[s] - b->losses[s]) / fabs(a->losses[s]));
    return worst;
}

/* Largest relative difference over every parameter of b against a (by name);
 * infinity when a parameter is missing. */
static double param_diff(const param_set *a, const param_set *b)
{
    double worst = 0;
    for (int j = 0; j < b->n; j++) {
        int i = 0;
        while (i < a->n && strcmp(a->names[i], b->names[j])) i++;
        if (i == a->n || a->counts[i] != b->counts[j]) return INFINITY;
        for (int k = 0; k < a->counts[i]; k++) {
            double x = a->values[i][k], y = b->values[j][k];
            worst = fmax(worst, fabs(x - y) / fmax(fmax(fabs(x), fabs(y)), 1e-2));
        }
    }
    for (int i = 0; i < a->n; i++) { /* and b lacks none of a's */
        int j = 0;
        while (j < b->n && strcmp(a->names[i], b->names[j])) j++;
        if (j == b->n) return INFINITY;
    }
    return worst;
}

/* Prints one row and counts it. */
static void report(const char *model, layout l, const char *what, bool ok, int *passed,
                   int *failed)
{
    printf("%-5s (%d,%d,%d) V=%d interleaved %s  %s\n", model, l.replicas, l.stages, l.micro,
           l.virtual_stages, what, ok ? "ok" : "FAIL");
    ok ? (*passed)++ : (*failed)++;
}

/* The interleaved schedule against the one-process run: losses and parameters,
 * --deterministic hashes, --recompute hashes. */
static void interleaved(const char *data, int *passed, int *failed)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *const models[] = {MLP, SKIP, DROP};
    const char *const names[] = {"mlp", "skip", "drop"};
    const int layers[] = {5, 7, 9};
    outcome *ref = calloc(1, sizeof *ref), *got = calloc(1, sizeof *got);
    char what[160];
    for (int m = 0; m < 2; m++) {
        int r0 = run_layout(models[m], data, layouts[0], PN_SCHEDULE_1F1B, false, false, ref);
        for (int l = 0; l < N_IL; l++) {
            layout lay = il_layouts[l];
            if (lay.stages * lay.virtual_stages > layers[m]) continue;
            free_set(&got->params);
            int r = run_layout(models[m], data, lay, 0, false, false, got);
            if (rank != 0) continue;
            double dl = r0 < 0 || r < 0 ? INFINITY : loss_diff(ref, got);
            double dp = r0 < 0 || r < 0 ? INFINITY : param_diff(&ref->params, &got->params);
            snprintf(what, sizeof what, "loss diff %.3g, param diff %.3g", dl, dp);
            report(names[m], lay, what, dl <= 1e-5 && dp <= 1e-4, passed, failed);
        }
        free_set(&ref->params);
        free_set(&got->params);
    }
    /* one hash: the one-process run's with micro-batches of 4, every model */
    for (int m = 0; m < 3; m++) {
        int r0 = run_layout(models[m], data, det_layouts[0], PN_SCHEDULE_1F1B, true, false, ref);
        free_set(&ref->params);
        for (int l = 0; l < N_IL_DET; l++) {
            layout lay = il_det_layouts[l];
            if (lay.stages * lay.virtual_stages > layers[m]) continue;
            int r = run_layout(models[m], data, lay, 0, true, m == 2, got);
            free_set(&got->params);
            if (rank != 0) continue;
            snprintf(what, sizeof what, "deterministic%s, hash %016llx, 1 process %016llx",
                     m == 2 ? " recompute" : "", got->hash, ref->hash);
            report(names[m], lay, what, r0 == 0 && r == 0 && got->hash == ref->hash, passed,
                   failed);
        }
    }
    /* --recompute gives the plain run's bits */
    for (int l = 0; l < N_IL; l++) {
        layout lay = il_layouts[l];
        int r = run_layout(DROP, data, lay, 0, false, false, ref);
        r |= run_layout(DROP, data, lay, 0, false, true, got);
        free_set(&ref->params), free_set(&got->params);
        if (rank != 0) continue;
        snprintf(what, sizeof what, "recompute, hash %016llx, plain %016llx", got->hash,
                 ref->hash);
        report("drop", lay, what, r == 0 && got->hash == ref->hash, passed, failed);
    }
    free(ref);
    free(got);
}

/* --no-share-memory against the planned runs: under --deterministic, every model,
 * layout and schedule, interleaved and --recompute give the planned hash. */
static void unshared(const char *data, int *passed, int *failed)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *const models[] = {MLP, SKIP, PADDED, DROP};
    const char *const names[] = {"mlp", "skip", "pad", "drop"};
    const int layers[] = {5, 7, 5, 9};
    outcome *o = calloc(1, sizeof *o);
    for (int m = 0; m < 4; m++) {
        planner_off = false;
        int r0 = run_layout(models[m], data, det_layouts[0], PN_SCHEDULE_1F1B, true, false, o);
        unsigned long long planned = o->hash;
        free_set(&o->params);
        planner_off = true;
        for (int l = 0; l < N_DET + N_IL_DET; l++)
            for (int sched = 0; sched < 2; sched++)
                for (int re = 0; re < 2; re++) {
                    layout lay = l < N_DET ? det_layouts[l] : il_det_layouts[l - N_DET];
                    if ((lay.virtual_stages > 0 && sched == 1) ||
                        lay.stages * (lay.virtual_stages ? lay.virtual_stages : 1) > layers[m])
                        continue;
                    int r = run_layout(models[m], data, lay, sched, true, re, o);
                    free_set(&o->params);
                    if (rank != 0) continue;
                    bool ok = r0 == 0 && r == 0 && o->hash == planned;
                    printf("%-5s (%d,%d,%d) V=%d %-6s no-share-memory%s, hash %016llx, planned "
                           "%016llx  %s\n", names[m], lay.replicas, lay.stages, lay.micro,
                           lay.virtual_stages,
                           lay.virtual_stages ? "inter" : pn_schedule_kind_name(sched),
                           re ? " recompute" : "", o->hash, planned, ok ? "ok" : "FAIL");
                    ok ? (*passed)++ : (*failed)++;
                }
    }
    planner_off = false;
    free(o);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 4) {
        if (rank == 0) puts("SKIP: run with 4 ranks (mpirun -np 4)");
        MPI_Finalize();
        return 77;
    }
    char dir[64] = "/tmp/pipenet-layouts-XXXXXX", data[128];
    int rc = 0;
    if (rank == 0) rc = mkdtemp(dir) ? 0 : -1;
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    snprintf(data, sizeof data, "%s/train.h5", dir);
    if (rank == 0 && rc == 0) rc = write_data(data);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc < 0) {
        if (rank == 0) fprintf(stderr, "cannot write %s: %s\n", data, pn_error_message());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const char *const models[] = {MLP, SKIP, PADDED};
    const char *const names[] = {"mlp", "skip", "pad"};
    enum { N_MODELS = sizeof models / sizeof *models };
    int passed = 0, failed = 0;
    if (rank == 0)
        printf("%-5s %-9s %-6s %14s %14s\n", "model", "(D,P,M)", "sched", "max loss diff",
               "max param diff");
    for (int m = 0; m < N_MODELS; m++) {
        outcome *ref = calloc(1, sizeof *ref), *got = calloc(1, sizeof *got);
        if (run_layout(models[m], data, layouts[0], PN_SCHEDULE_1F1B, false, false, ref) < 0) failed++;
        for (int l = 1; l < N_LAYOUTS; l++)
            for (int sched = 0; sched < 2; sched++) {
                free_set(&got->params);
                int r = run_layout(models[m], data, layouts[l], sched, false, false, got);
                if (rank != 0) continue;
                double dl = r < 0 ? INFINITY : loss_diff(ref, got);
                double dp = r < 0 ? INFINITY : param_diff(&ref->params, &got->params);
                bool ok = dl <= 1e-5 && dp <= 1e-4;
                printf("%-5s (%d,%d,%d)   %-6s %14.3g %14.3g  %s\n", names[m], layouts[l].replicas,
                       layouts[l].stages, layouts[l].micro,
                       pn_schedule_kind_name((pn_schedule_kind)sched), dl, dp, ok ? "ok" : "FAIL");
                ok ? passed++ : failed++;
            }
        free_set(&got->params);
        free_set(&ref->params);
        free(ref);
        free(got);
    }
    /* bit-exact layouts under --deterministic */
    for (int m = 0; m < N_MODELS; m++) {
        outcome *o = calloc(1, sizeof *o);
        unsigned long long first = 0;
        for (int l = 0; l <= N_DET; l++)
            for (int sched = 0; sched < 2; sched++) {
                layout lay = l < N_DET ? det_layouts[l] : det_layouts[0]; /* then a repeat */
                int r = run_layout(models[m], data, lay, sched, true, false, o);
                free_set(&o->params);
                if (rank != 0) continue;
                if (l == 0 && sched == 0) first = o->hash;
                bool ok = r == 0 && o->hash == first;
                printf("%-5s (%d,%d,%d)   %-6s deterministic, hash %016llx  %s%s\n", names[m],
                       lay.replicas, lay.stages, lay.micro,
                       pn_schedule_kind_name((pn_schedule_kind)sched), o->hash,
                       l == N_DET ? "(repeat) " : "", ok ? "ok" : "FAIL");
                ok ? passed++ : failed++;
            }
        free(o);
    }
    /* --recompute: the plain run's bits, layout by layout; and under --deterministic
     * the one hash of every layout */
    outcome *plain = calloc(1, sizeof *plain), *re = calloc(1, sizeof *re);
    const char *const rc_models[] = {DROP, PADDED}, *const rc_names[] = {"drop", "pad"};
    for (int m = 0; m < 2; m++)
    for (int l = 0; l < N_RC; l++)
        for (int sched = 0; sched < 2; sched++) {
            int r = run_layout(rc_models[m], data, rc_layouts[l], sched, false, false, plain);
            r |= run_layout(rc_models[m], data, rc_layouts[l], sched, false, true, re);
            free_set(&plain->params), free_set(&re->params);
            if (rank != 0) continue;
            bool ok = r == 0 && re->hash == plain->hash;
            printf("%-5s (%d,%d,%d)   %-6s recompute, hash %016llx, plain %016llx  %s\n",
                   rc_names[m], rc_layouts[l].replicas, rc_layouts[l].stages, rc_layouts[l].micro,
                   pn_schedule_kind_name((pn_schedule_kind)sched), re->hash, plain->hash,
                   ok ? "ok" : "FAIL");
            ok ? passed++ : failed++;
        }
    int r0 = run_layout(DROP, data, det_layouts[0], PN_SCHEDULE_1F1B, true, false, plain);
    free_set(&plain->params);
    for (int l = 0; l < N_DET; l++)
        for (int sched = 0; sched < 2; sched++) {
            int r = run_layout(DROP, data, det_layouts[l], sched, true, true, re);
            free_set(&re->params);
            if (rank != 0) continue;
            bool ok = r0 == 0 && r == 0 && re->hash == plain->hash;
            printf("drop  (%d,%d,%d)   %-6s deterministic recompute, hash %016llx  %s\n",
                   det_layouts[l].replicas, det_layouts[l].stages, det_layouts[l].micro,
                   pn_schedule_kind_name((pn_schedule_kind)sched), re->hash, ok ? "ok" : "FAIL");
            ok ? passed++ : failed++;
        }
    free(plain), free(re);
    interleaved(data, &passed, &failed);
    unshared(data, &passed, &failed);
    if (rank == 0) {
        remove(data);
        rmdir(dir);
        printf("%d passed, %d failed\n", passed, failed);
    }
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return failed ? 1 : 0;
}
