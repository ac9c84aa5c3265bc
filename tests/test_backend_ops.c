/* Every slot of the backend table on every available backend against the CPU's, in
 * the spirit of ggml's test-backend-ops: each case (tests/backend_ops_cases.c) builds
 * random inputs (the same for every backend: one stream keyed by case, shape and
 * variant) in several shapes, odd sizes, strided views, rows longer than a block and
 * a tall narrow matrix among them, calls the slot through the backend's table, and
 * reads its outputs back; a backend's outputs must match the CPU's within a normalized
 * mean squared error of 1e-6 (fp32), or exactly for masks, ids, counts, the
 * deterministic scatter-add and the padding of strided outputs (left untouched).
 *
 * The table is enumerated (PN_BACKEND_SLOTS in math/backend.h): the test fails when
 * the list and the struct disagree, when a slot has no case, or when a table this
 * build has (the CPU's; the CUDA module's, through its loader, when built with CUDA:
 * a module that does not load fails the test) leaves a slot empty. That part and the
 * cases on the CPU alone run everywhere; without a second backend to compare the
 * test then exits 77 (skip).
 *
 * `test_backend_ops CASE...` runs only the cases named (e.g. softmax layernorm_forward;
 * an unknown name is an error): one kernel in other block and thread orders, or
 * under the CUDA stand-in's ThreadSanitizer toolkit (tools/cuda-sim/README.md). */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "backend_ops.h"
#include "math/cuda_module.h"

enum { SKIP = 77 };
static const double NMSE_MAX = 1e-6;

/* Odd sizes, a single element, strided views (pad > 0), one larger than a block, rows
 * longer than the 1024 threads of a row kernel, and a tall narrow one (many blocks of
 * rows, column sums over many rows, scatter chunks of several table rows). */
static const shape shapes[] = {{1, 1, 0},   {3, 5, 1},      {17, 33, 0},
                               {64, 128, 3}, {130, 257, 0}, {5, 2051, 2},
                               {1100, 3, 1}};
enum { N_SHAPES = sizeof shapes / sizeof *shapes };

/* ---- the slots --------------------------------------------------------------------- */

typedef struct slot_info {
    const char *name;
    size_t offset;
} slot_info;

#define SLOT_INFO(s) {#s, offsetof(pn_backend, s)},
static const slot_info slots[] = {PN_BACKEND_SLOTS(SLOT_INFO)};
enum { N_SLOTS = sizeof slots / sizeof *slots };

static const void *slot_of(const pn_backend *be, const slot_info *s)
{
    const void *p;
    memcpy(&p, (const char *)be + s->offset, sizeof p);
    return p;
}

/* ---- coverage ----------------------------------------------------------------------- */

static bool case_covers(const op_case *oc, const char *slot)
{
    size_t n = strlen(slot);
    for (const char *p = oc->slots; (p = strstr(p, slot)); p += n)
        if ((p == oc->slots || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
    return false;
}

/* The list against the struct, a case for every slot, every slot of a linked table
 * filled. Returns the failures. */
static int check_coverage(const pn_backend *const *tables, int n_tables)
{
    int failures = 0;
    size_t want = sizeof(const char *) + N_SLOTS * sizeof(void (*)(void));
    if (sizeof(pn_backend) != want) {
        printf("FAIL: pn_backend is %zu bytes but PN_BACKEND_SLOTS lists %d slots (%zu): "
               "add the new slot to the list in math/backend.h\n",
               sizeof(pn_backend), (int)N_SLOTS, want);
        failures++;
    }
    for (int k = 0; k < N_SLOTS; k++) {
        if (k > 0 && slots[k].offset <= slots[k - 1].offset) {
            printf("FAIL: PN_BACKEND_SLOTS lists %s out of the struct's order\n", slots[k].name);
            failures++;
        }
        bool covered = false;
        for (int c = 0; c < backend_op_n_cases && !covered; c++) covered = case_covers(&backend_op_cases[c], slots[k].name);
        if (!covered) {
            printf("FAIL: slot %s has no case in tests/test_backend_ops.c\n", slots[k].name);
            failures++;
        }
        for (int t = 0; t < n_tables; t++)
            if (!slot_of(tables[t], &slots[k])) {
                printf("FAIL: the %s backend leaves slot %s empty\n", tables[t]->name,
                       slots[k].name);
                failures++;
            }
    }
    printf("coverage: %d slots, %d cases, %d tables linked%s\n", (int)N_SLOTS, (int)backend_op_n_cases,
           n_tables, failures ? "" : ": every slot has a case and every table fills it");
    return failures;
}

/* ---- comparison --------------------------------------------------------------------- */

static double value_at(const out_val *o, size_t k)
{
    return o->is_double ? ((const double *)o->data)[k] : ((const float *)o->data)[k];
}

/* Normalized mean squared error of got against want: sum (g - w)^2 / sum w^2 (the
 * numerator alone when want is all zeros). */
static double nmse(const out_val *got, const out_val *want)
{
    double num = 0.0, den = 0.0;
    for (size_t k = 0; k < want->n; k++) {
        double w = value_at(want, k), d = value_at(got, k) - w;
        num += d * d;
        den += w * w;
    }
    return den > 0.0 ? num / den : num;
}

static bool same_bits(const out_val *got, const out_val *want)
{
    size_t bytes = want->ints ? want->n : want->n * (want->is_double ? sizeof(double) : sizeof(float));
    return !memcmp(got->data, want->data, bytes);
}

/* Compares one run with the CPU's; prints and counts what differs. */
static int compare(const ctx *got, const ctx *want, const char *label, const char *tag)
{
    int failures = 0;
    for (int k = 0; k < want->n_outs; k++) {
        const out_val *w = &want->outs[k], *g = &got->outs[k];
        if (k >= got->n_outs || g->n != w->n) {
            printf("%s: %s: output %s missing or of another size\n", tag, label, w->name);
            failures++;
            continue;
        }
        double e = w->ints ? 0.0 : nmse(g, w);
        bool ok = w->kind == OUT_EXACT ? same_bits(g, w) : e <= NMSE_MAX && !isnan(e);
        if (!ok) {
            printf("%s: %s: %s differs from the CPU's (%s, nmse %.3g)\n", tag, label, w->name,
                   w->kind == OUT_EXACT ? "must be exact" : "limit 1e-6", e);
            failures++;
        }
    }
    return failures;
}

/* ---- driver --------------------------------------------------------------------------- */

/* A table that gets three slots wrong, for the self-check: scale by 1% too much (a
 * normalized error of 1e-4), dropout with another key (a different mask), and fill
 * that also fills the padding of a strided view (right values, wrong memory). */
static int wrong_scale(pn_matrix *m, float alpha) { return pn_cpu_backend.scale(m, alpha * 1.01f); }

static int wrong_dropout(const pn_matrix *x, float rate, uint64_t key, long row0,
                         pn_matrix *mask, pn_matrix *y)
{
    return pn_cpu_backend.dropout_forward(x, rate, key + 1, row0, mask, y);
}

static int wrong_fill(pn_matrix *m, float value)
{
    pn_matrix past_end = *m;
    past_end.cols = m->ld;
    return pn_cpu_backend.fill(&past_end, value);
}

/* The wrong slots, each with the case, shape and variant that must catch it. */
static const struct {
    const char *what, *case_name;
    int shape, variant;
} self_checks[] = {{"scale", "copy/scale/axpy", 2, 1},
                   {"dropout mask", "dropout", 2, 1},
                   {"fill into the padding", "fill", 3, 0}};
enum { N_SELF_CHECKS = sizeof self_checks / sizeof *self_checks };

static void run_case(ctx *c, const pn_backend *be, pn_device dev, const op_case *oc, int shape_i,
                     int variant)
{
    memset(c, 0, sizeof *c);
    c->be = be;
    c->dev = dev;
    pn_rng_init(&c->rng, 20240611, pn_hash_mix(pn_hash_string(oc->name),
                                               (uint64_t)(shape_i * 64 + variant)));
    oc->run(c, shapes[shape_i], variant);
}

/* Whether the command line asks for case `name` (none named: every case). */
static bool wanted(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return true;
    return argc < 2;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        int known = 0;
        for (int oc = 0; oc < backend_op_n_cases; oc++)
            known += !strcmp(argv[i], backend_op_cases[oc].name);
        if (!known) {
            printf("FAIL: no case '%s'; the cases:", argv[i]);
            for (int oc = 0; oc < backend_op_n_cases; oc++) printf(" %s", backend_op_cases[oc].name);
            printf("\n");
            return 2;
        }
    }
    const pn_backend *tables[2] = {&pn_cpu_backend};
    pn_device devices[2] = {pn_device_host()};
    int n_tables = 1, n_devices = 1;
    if (pn_cuda_module_built()) {
        const pn_cuda_module *m;
        if (pn_cuda_module_get(&m) < 0) {
            printf("FAIL: %s\n", pn_error_message());
            return 1;
        }
        tables[n_tables++] = m->backend;
        if (m->device_count() > 0) devices[n_devices++] = pn_device_cuda(0);
    }
    int failures = check_coverage(tables, n_tables);

    /* Self-check of the comparison, on any machine: the wrong table must be caught. */
    pn_backend wrong = pn_cpu_backend;
    wrong.name = "wrong-cpu";
    wrong.scale = wrong_scale;
    wrong.dropout_forward = wrong_dropout;
    wrong.fill = wrong_fill;
    int caught = 0;
    for (int k = 0; k < N_SELF_CHECKS; k++)
        for (int oc = 0; oc < backend_op_n_cases; oc++) {
            if (strcmp(backend_op_cases[oc].name, self_checks[k].case_name)) continue;
            ctx want, got;
            int si = self_checks[k].shape, v = self_checks[k].variant;
            run_case(&want, &pn_cpu_backend, pn_device_host(), &backend_op_cases[oc], si, v);
            run_case(&got, &wrong, pn_device_host(), &backend_op_cases[oc], si, v);
            printf("self-check (a wrong %s is expected to be reported):\n", self_checks[k].what);
            caught += compare(&got, &want, self_checks[k].what, "  caught") > 0;
            ctx_release(&want);
            ctx_release(&got);
        }
    if (caught != N_SELF_CHECKS) {
        printf("FAIL: the comparison missed a deliberately wrong slot (%d of %d caught)\n", caught,
               (int)N_SELF_CHECKS);
        failures++;
    }

    int runs = 0;
    for (int oc = 0; oc < backend_op_n_cases; oc++)
        for (int si = 0; si < N_SHAPES && wanted(argc, argv, backend_op_cases[oc].name); si++)
            for (int v = 0; v < backend_op_cases[oc].variants; v++) {
                char label[128];
                snprintf(label, sizeof label, "%s [%dx%d+%d, variant %d]", backend_op_cases[oc].name,
                         shapes[si].rows, shapes[si].cols, shapes[si].pad, v);
                ctx want, got;
                run_case(&want, &pn_cpu_backend, devices[0], &backend_op_cases[oc], si, v);
                if (want.error[0]) {
                    printf("FAIL: %s on cpu: %s\n", label, want.error);
                    failures++;
                }
                for (int d = 1; d < n_devices; d++) {
                    const pn_backend *be;
                    if (pn_backend_for(devices[d], &be) != PN_OK) continue;
                    run_case(&got, be, devices[d], &backend_op_cases[oc], si, v);
                    char where[160];
                    snprintf(where, sizeof where, "%s on %s", label, be->name);
                    if (got.error[0]) {
                        printf("FAIL: %s: %s\n", where, got.error);
                        failures++;
                    } else if (!want.error[0]) {
                        failures += compare(&got, &want, where, "FAIL");
                    }
                    ctx_release(&got);
                }
                ctx_release(&want);
                runs++;
            }
    printf("%d case runs (case x shape x variant) on %d device(s), %d failure(s)\n", runs,
           n_devices, failures);
    if (failures) return 1;
    if (n_devices == 1) {
        puts("SKIP: no backend besides the CPU to compare (coverage checked, every case ran "
             "on the CPU)");
        return SKIP;
    }
    return 0;
}