/* The owner exchange (mpi/comm.h: pn_comm_owner_counts, pn_comm_owner_exchange), run
 * under mpirun with 2 and 4 ranks (tests/test_comm_owner.sh), on every layout of the
 * ranks (stages 1, 2, 4 where they divide them: replica groups of D = 4, 2, 1). Row id
 * belongs to replica id mod D. Each replica's micro-batch touches ids with repeats and
 * uneven counts; it sends its unique ids to their owners (a pull), which answer with
 * rows made from their local table (row[k] = id * 10 + k); the requester must get
 * exactly its rows, in its order. Then a push of (id, gradient row) partials: each
 * owner must receive them grouped by source in replica order, with their contents.
 * Both with rows 1 and 16 wide, with one replica sending nothing, and with every
 * replica sending nothing; two pulls' requests in flight at once, in halves, as a
 * stage's pulls ahead post them. Shapes and counts that cannot travel are refused before
 * anything is sent. Check suite, CK_FORK=no; every rank runs the same tests, and
 * each test's checks are agreed on over the job before asserting, so the ranks fail
 * together and their collectives stay in step.
 * With --stall (tests/test_comm_owner.sh, 2 ranks): replica 1 never joins a push,
 * and replica 0's watched wait must end the job with a message naming it. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "mpi/comm.h"
#include "mpi/job.h"

enum { MAX_D = 4, MAX_IDS = 64, MAX_LAYOUTS = 3, N_WIDTHS = 2, N_MODES = 3 };
static const int WIDTHS[N_WIDTHS] = {1, 16};

/* Who sends: every replica, every replica but the last, none. */
typedef enum mode { EVERYONE = 0, LAST_EMPTY, ALL_EMPTY } mode;
static const char *const MODE_NAMES[N_MODES] = {"everyone sends", "the last replica sends "
                                                "nothing", "nobody sends"};

static pn_job *world;
static pn_comm *layouts[MAX_LAYOUTS]; /* stages 1, 2, 4 where they divide the ranks */
static int n_layouts;

/* What one replica sends in a pull or push: its micro-batch's ids, their unique
 * ids grouped by owner (owner 0's first, each owner's in order of first use), how
 * many go to each owner, and where each of the batch's ids sits among them. */
typedef struct plan {
    int n_batch, batch[MAX_IDS];
    int n_unique, ids[MAX_IDS], counts[MAX_D];
    int pos[MAX_IDS];
} plan;

/* Replica r of d: uneven counts (replica 0 the most), repeats, every owner hit
 * somewhere, ids in [0, 4 d + 5). */
static plan make_plan(int r, int d, mode m)
{
    plan p = {0};
    if (m == ALL_EMPTY || (m == LAST_EMPTY && r == d - 1)) return p;
    p.n_batch = r == 0 ? 23 : 3 + 4 * r;
    int uniq[MAX_IDS], n = 0;
    for (int j = 0; j < p.n_batch; j++) {
        int id = (j * j * 3 + r * 7 + j) % (4 * d + 5), k = 0;
        p.batch[j] = id;
        while (k < n && uniq[k] != id) k++;
        if (k == n) uniq[n++] = id;
    }
    for (int o = 0; o < d; o++)
        for (int k = 0; k < n; k++)
            if (uniq[k] % d == o) {
                p.ids[p.n_unique++] = uniq[k];
                p.counts[o]++;
            }
    for (int j = 0; j < p.n_batch; j++)
        for (int k = 0; k < p.n_unique; k++)
            if (p.ids[k] == p.batch[j]) p.pos[j] = k;
    return p;
}

/* The first of replica r's ids for owner o, and how many. */
static const int *block(const plan *p, int o, int *n)
{
    int at = 0;
    for (int q = 0; q < o; q++) at += p->counts[q];
    *n = p->counts[o];
    return p->ids + at;
}

/* A rank's verdict in a test: the first thing that went wrong, or "" */
typedef struct verdict {
    char first[256];
} verdict;

static void expect(verdict *v, bool ok, const char *fmt, ...)
{
    if (ok || v->first[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->first, sizeof v->first, fmt, ap);
    va_end(ap);
}

/* A watchdog's stall leaves requests in flight: the job ends here (comm.h). */
static void must(int rc, verdict *v, const char *what)
{
    if (rc == PN_ERR_STALL) {
        fprintf(stderr, "rank %d: %s\n", pn_job_rank(world), pn_error_message());
        pn_job_abort(world, 1);
    }
    expect(v, rc == PN_OK, "%s: %s", what, pn_error_message());
}

/* Every rank's verdict over the job, then the assertion: all ranks fail together. */
static void agree(pn_comm *c, const verdict *v, const char *test)
{
    bool bad = false;
    ck_assert_int_eq(pn_comm_any(c, v->first[0] != 0, &bad), PN_OK);
    if (v->first[0]) fprintf(stderr, "rank %d: %s: %s\n", pn_job_rank(world), test, v->first);
    ck_assert_msg(!bad, "%s failed on some rank (see stderr)", test);
}

/* Loop index -> layout, width, mode. */
static pn_comm *pick(int i, int *width, mode *m)
{
    *m = (mode)(i % N_MODES);
    *width = WIDTHS[i / N_MODES % N_WIDTHS];
    return layouts[i / (N_MODES * N_WIDTHS)];
}

/* recv_counts[r] = what replica r sends this one (pn_comm_owner_counts), checked
 * against r's plan and agreed on, so that no rank goes on to size its buffers by a
 * wrong count while the others exchange; returns their sum. */
static int owner_counts(pn_comm *c, const plan *mine, mode m, int *recv_counts,
                        const char *test)
{
    const pn_grid *g = pn_comm_grid(c);
    verdict v = {""};
    must(pn_comm_owner_counts(c, mine->counts, recv_counts), &v, "owner counts");
    int n = 0;
    for (int r = 0; r < g->replicas; r++) {
        plan theirs = make_plan(r, g->replicas, m);
        expect(&v, recv_counts[r] == theirs.counts[g->replica], "replica %d sends %d, counted %d",
               r, theirs.counts[g->replica], recv_counts[r]);
        n += theirs.counts[g->replica];
    }
    agree(c, &v, test);
    return n;
}

/* The pull: counts, ids to their owners, owners' rows back, in the batch's order. */
static void pull(int i)
{
    int width;
    mode m;
    pn_comm *c = pick(i, &width, &m);
    const pn_grid *g = pn_comm_grid(c);
    int d = g->replicas, me = g->replica;
    char test[96];
    snprintf(test, sizeof test, "pull: D %d, width %d, %s", d, width, MODE_NAMES[m]);
    verdict v = {""};
    plan mine = make_plan(me, d, m);

    int recv_counts[MAX_D] = {0}, n_in = owner_counts(c, &mine, m, recv_counts, test);
    /* the request: ids only; a rank with none passes its (empty) arrays all the same */
    int asked[MAX_D * MAX_IDS];
    must(pn_comm_owner_exchange(c, mine.counts, mine.ids, NULL, recv_counts, asked, NULL), &v,
         "the request");
    for (int r = 0, at = 0; r < d; r++) { /* grouped by source, in replica order */
        plan theirs = make_plan(r, d, m);
        int n;
        const int *want = block(&theirs, me, &n);
        for (int k = 0; k < n; k++, at++)
            expect(&v, asked[at] == want[k], "request %d (from replica %d): id %d, sent %d", at,
                   r, asked[at], want[k]);
    }

    /* the owner's table: local row id / d of the ids it owns, row[k] = id * 10 + k */
    int local_rows = (4 * d + 5) / d + 1;
    float *table = malloc((size_t)local_rows * width * sizeof *table);
    float *reply = malloc(((size_t)n_in + 1) * width * sizeof *reply);
    float *got = malloc(((size_t)mine.n_unique + 1) * width * sizeof *got);
    ck_assert(table && reply && got);
    for (int lr = 0; lr < local_rows; lr++)
        for (int k = 0; k < width; k++) table[lr * width + k] = (float)((lr * d + me) * 10 + k);
    for (int j = 0; j < n_in; j++) {
        expect(&v, asked[j] % d == me, "asked for id %d, owned by replica %d", asked[j],
               asked[j] % d);
        memcpy(reply + (size_t)j * width, table + (size_t)(asked[j] / d) * width,
               (size_t)width * sizeof *reply);
    }

    /* the reply: rows only, the counts swapped */
    pn_matrix out = pn_matrix_host(reply, n_in, width);
    pn_matrix in = pn_matrix_host(got, mine.n_unique, width);
    must(pn_comm_owner_exchange(c, recv_counts, NULL, &out, mine.counts, NULL, &in), &v,
         "the reply");
    for (int j = 0; j < mine.n_batch; j++) { /* the batch's rows, in its order */
        const float *row = got + (size_t)mine.pos[j] * width;
        for (int k = 0; k < width; k++)
            expect(&v, row[k] == (float)(mine.batch[j] * 10 + k),
                   "batch row %d (id %d), column %d: %g", j, mine.batch[j], k, row[k]);
    }
    free(table);
    free(reply);
    free(got);
    agree(c, &v, test);
}

/* A partial of replica r's gradient for id: exact in float. */
static float partial(int id, int r, int k) { return (float)(id * 1000 + r * 100 + k); }

/* The push: (id, gradient row) partials to the owners, grouped by source there. */
static void push(int i)
{
    int width;
    mode m;
    pn_comm *c = pick(i, &width, &m);
    const pn_grid *g = pn_comm_grid(c);
    int d = g->replicas, me = g->replica;
    char test[96];
    snprintf(test, sizeof test, "push: D %d, width %d, %s", d, width, MODE_NAMES[m]);
    verdict v = {""};
    plan mine = make_plan(me, d, m);

    int recv_counts[MAX_D] = {0}, n_in = owner_counts(c, &mine, m, recv_counts, test);
    float *grads = malloc(((size_t)mine.n_unique + 1) * width * sizeof *grads);
    float *got = malloc(((size_t)n_in + 1) * width * sizeof *got);
    ck_assert(grads && got);
    for (int j = 0; j < mine.n_unique; j++)
        for (int k = 0; k < width; k++) grads[j * width + k] = partial(mine.ids[j], me, k);
    int ids_in[MAX_D * MAX_IDS];
    pn_matrix out = pn_matrix_host(grads, mine.n_unique, width);
    pn_matrix in = pn_matrix_host(got, n_in, width);
    must(pn_comm_owner_exchange(c, mine.counts, mine.ids, &out, recv_counts, ids_in, &in), &v,
         "the push");
    int at = 0;
    for (int r = 0; r < d; r++) { /* replica 0's partials first, each in its order */
        plan theirs = make_plan(r, d, m);
        int n;
        const int *want = block(&theirs, me, &n);
        for (int k = 0; k < n; k++, at++) {
            expect(&v, ids_in[at] == want[k], "partial %d (from replica %d): id %d, sent %d", at,
                   r, ids_in[at], want[k]);
            for (int q = 0; q < width; q++)
                expect(&v, got[at * width + q] == partial(want[k], r, q),
                       "partial %d (id %d from replica %d), column %d: %g", at, want[k], r, q,
                       got[at * width + q]);
        }
    }
    free(grads);
    free(got);
    agree(c, &v, test);
}

/* Refused on every rank alike before anything travels (so no collective is left
 * half-started): missing halves, wrong shapes, device memory, negative counts, and
 * counts whose floats pass MPI's int. */
static void refusals(int i)
{
    pn_comm *c = layouts[i];
    int d = pn_comm_grid(c)->replicas;
    verdict v = {""};
    int counts[MAX_D] = {0}, ids[4] = {0}, back[4];
    float f[4 * 16];
    pn_matrix rows = pn_matrix_host(f, 0, 16), into = pn_matrix_host(f, 0, 16);
    struct {
        const char *what, *says;
        const int *sc, *ids;
        const pn_matrix *rows;
        int *ri;
        pn_matrix *rr;
    } cases[] = {
        {"nothing to move", "absent", counts, NULL, NULL, NULL, NULL},
        {"ids without a place to receive", "absent", counts, ids, NULL, NULL, NULL},
        {"rows without a place to receive", "absent", counts, NULL, &rows, NULL, NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        int rc = pn_comm_owner_exchange(c, cases[k].sc, cases[k].ids, cases[k].rows, counts,
                                        cases[k].ri, cases[k].rr);
        expect(&v, rc == PN_ERR_INTERNAL && strstr(pn_error_message(), cases[k].says),
               "%s: %d (%s)", cases[k].what, rc, pn_error_message());
    }
    pn_matrix narrow = pn_matrix_host(f, 0, 8);
    int rc = pn_comm_owner_exchange(c, counts, ids, &rows, counts, back, &narrow);
    expect(&v, rc == PN_ERR_INTERNAL, "16 columns into 8: %d", rc);
    counts[0] = 2; /* two rows announced, none given */
    rc = pn_comm_owner_exchange(c, counts, ids, &rows, counts, back, &into);
    expect(&v, rc == PN_ERR_INTERNAL && strstr(pn_error_message(), "0 rows for 2 entries"),
           "2 entries in 0 rows: %d (%s)", rc, pn_error_message());
    pn_matrix two = pn_matrix_host(f, 2, 16), gpu = two;
    gpu.device = pn_device_cuda(0);
    rc = pn_comm_owner_exchange(c, counts, ids, &gpu, counts, back, &two);
    expect(&v, rc == PN_ERR_INTERNAL && strstr(pn_error_message(), "not dense host"),
           "rows on a GPU: %d (%s)", rc, pn_error_message());
    counts[0] = -1;
    rc = pn_comm_owner_exchange(c, counts, ids, NULL, counts, back, NULL);
    expect(&v, rc == PN_ERR_INTERNAL && strstr(pn_error_message(), "below 0"),
           "a negative count: %d (%s)", rc, pn_error_message());
    /* 2^27 + 1 rows of 16 floats: more than INT_MAX floats (never allocated) */
    counts[0] = (1 << 27) + 1;
    pn_matrix huge = pn_matrix_host(NULL, counts[0], 16), none = pn_matrix_host(f, 0, 16);
    int zero[MAX_D] = {0};
    rc = pn_comm_owner_exchange(c, counts, ids, &huge, zero, back, &none);
    expect(&v, rc == PN_ERR_INTERNAL && strstr(pn_error_message(), "2147483647 entries times"),
           "2^31 floats: %d (%s)", rc, pn_error_message());
    if (d > 1) { /* ids alone: their own number past INT_MAX */
        counts[0] = 1 << 30, counts[1] = 1 << 30;
        rc = pn_comm_owner_exchange(c, zero, ids, NULL, counts, back, NULL);
        expect(&v, rc == PN_ERR_INTERNAL && strstr(pn_error_message(), "2147483647 entries "
                                                   "sent or received"),
               "2^31 ids: %d (%s)", rc, pn_error_message());
    }
    agree(c, &v, "refusals");
}

/* The requests of two pulls in flight at once, in halves (pn_comm_owner_counts_start,
 * pn_comm_owner_exchange_start/_finish, what a stage's pulls ahead do): both posted
 * before either is waited for, progressed in between, finished in the other order;
 * each owner gets each pull's ids as the blocking pull gives them. A slot started
 * twice, and one past the last, are refused. */
static void ahead(int i)
{
    int width;
    mode m;
    pn_comm *c = pick(i, &width, &m);
    const pn_grid *g = pn_comm_grid(c);
    int d = g->replicas, me = g->replica;
    char test[96];
    snprintf(test, sizeof test, "two pulls in halves: D %d, %s", d, MODE_NAMES[m]);
    verdict v = {""};
    plan mine[2] = {make_plan(me, d, m), make_plan(me, d, (mode)((m + 1) % N_MODES))};
    int recv[2][MAX_D] = {{0}}, asked[2][MAX_D * MAX_IDS], slot[2] = {PN_OWNER_SLOTS,
                                                                     PN_OWNER_ALL - 1};
    for (int p = 0; p < 2; p++)
        must(pn_comm_owner_counts_start(c, slot[p], mine[p].counts, recv[p]), &v, "counts");
    int rc = pn_comm_owner_counts_start(c, slot[0], mine[0].counts, recv[0]);
    expect(&v, rc == PN_ERR_INTERNAL && strstr(pn_error_message(), "started twice"),
           "a slot started twice: %d (%s)", rc, pn_error_message());
    rc = pn_comm_owner_counts_start(c, PN_OWNER_ALL, mine[0].counts, recv[0]);
    expect(&v, rc == PN_ERR_INTERNAL && strstr(pn_error_message(), "slot"),
           "slot %d: %d (%s)", PN_OWNER_ALL, rc, pn_error_message());
    must(pn_comm_owner_progress(c), &v, "progress");
    for (int p = 1; p >= 0; p--) must(pn_comm_owner_exchange_finish(c, slot[p]), &v, "counts");
    for (int p = 0; p < 2; p++)
        must(pn_comm_owner_exchange_start(c, slot[p], mine[p].counts, mine[p].ids, NULL,
                                          recv[p], asked[p], NULL), &v, "the request");
    must(pn_comm_owner_progress(c), &v, "progress");
    for (int p = 1; p >= 0; p--) must(pn_comm_owner_exchange_finish(c, slot[p]), &v, "request");
    for (int p = 0; p < 2; p++)
        for (int r = 0, at = 0; r < d; r++) {
            plan theirs = make_plan(r, d, (mode)((m + p) % N_MODES));
            int n;
            const int *want = block(&theirs, me, &n);
            expect(&v, recv[p][r] == n, "pull %d: replica %d sends %d, counted %d", p, r, n,
                   recv[p][r]);
            for (int k = 0; k < n && recv[p][r] == n; k++, at++)
                expect(&v, asked[p][at] == want[k], "pull %d, request %d (from replica %d): "
                       "id %d, sent %d", p, at, r, asked[p][at], want[k]);
        }
    (void)width;
    agree(c, &v, test);
}

START_TEST(test_ahead) { ahead(_i); }
END_TEST

START_TEST(test_pull) { pull(_i); }
END_TEST

START_TEST(test_push) { push(_i); }
END_TEST

START_TEST(test_refusals) { refusals(_i); }
END_TEST

/* --stall: replica 1 of 2 never joins the push; replica 0's wait, watched for 2 s,
 * must end the job (must() aborts it) with the watchdog's message. */
static int stall(void)
{
    pn_comm *c = layouts[0];
    const pn_grid *g = pn_comm_grid(c);
    if (g->replicas != 2) {
        if (g->rank == 0) puts("SKIP: --stall runs with 2 ranks");
        return 77;
    }
    pn_comm_watch(c, 2, "the stall check");
    if (g->replica == 1) {
        sleep(60); /* stopped, as far as the others can tell; the abort ends it */
        return 1;
    }
    plan mine = make_plan(0, 2, EVERYONE);
    /* what replica 1 would have said (pn_comm_owner_counts would wait on it too) */
    int recv_counts[MAX_D] = {mine.counts[0], make_plan(1, 2, EVERYONE).counts[0]};
    int ids_in[2 * MAX_IDS];
    float grads[MAX_IDS] = {0}, got[2 * MAX_IDS];
    pn_matrix out = pn_matrix_host(grads, mine.n_unique, 1);
    pn_matrix in = pn_matrix_host(got, recv_counts[0] + recv_counts[1], 1);
    verdict v = {""};
    must(pn_comm_owner_exchange(c, mine.counts, mine.ids, &out, recv_counts, ids_in, &in), &v,
         "the push");
    fprintf(stderr, "the push without replica 1 returned: %s\n", v.first);
    return 1;
}

int main(int argc, char **argv)
{
    if (pn_job_init(&argc, &argv, &world) < 0) return 1;
    int rank = pn_job_rank(world), size = pn_job_size(world);
    for (int stages = 1; stages <= 4; stages *= 2) {
        if (size % stages) continue;
        if (pn_comm_create(&layouts[n_layouts], world, stages) < 0) {
            fprintf(stderr, "rank %d: %s\n", rank, pn_error_message());
            pn_job_abort(world, 1);
        }
        if (size / stages > MAX_D) { /* more replicas than the plans are made for */
            pn_comm_free(layouts[n_layouts]);
            continue;
        }
        /* a wait that hangs ends the job with the watchdog's message (must()) */
        pn_comm_watch(layouts[n_layouts++], 60, "test_comm_owner");
    }
    int status;
    if (argc > 1 && !strcmp(argv[1], "--stall")) {
        status = stall();
    } else {
        Suite *suite = suite_create("owner exchange");
        TCase *tc = tcase_create("exchange");
        int cases = n_layouts * N_WIDTHS * N_MODES;
        tcase_add_loop_test(tc, test_pull, 0, cases);
        tcase_add_loop_test(tc, test_push, 0, cases);
        tcase_add_loop_test(tc, test_ahead, 0, cases);
        tcase_add_loop_test(tc, test_refusals, 0, n_layouts);
        suite_add_tcase(suite, tc);
        SRunner *runner = srunner_create(suite);
        srunner_set_fork_status(runner, CK_NOFORK); /* MPI and fork do not mix */
        srunner_run_all(runner, rank == 0 ? CK_ENV : CK_SILENT); /* CK_VERBOSITY */
        status = srunner_ntests_failed(runner) ? 1 : 0;
        srunner_free(runner);
    }
    for (int l = 0; l < n_layouts; l++) pn_comm_free(layouts[l]);
    pn_job_finalize(world);
    return status;
}
