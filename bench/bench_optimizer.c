/* Times pn_optimizer_step (the fused update over the whole arena) for sgd, momentum
 * and adam on the parameters of models/fashion_mlp.json (1.86M floats), cold (caches
 * flushed before each run, the worst a real step can see) and warm (arrays left in
 * cache by the previous run, closer to a step whose backward just wrote them), and
 * prints median times and the memory rates they imply (GB/s of arrays read + written).
 * Built and run by `make bench`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "bench_util.h"
#include "layers/params.h"
#include "optim/optimizer.h"

enum { RUNS = 41, FLUSH_BYTES = 64 << 20 };

static const struct {
    const char *name;
    int rows, cols;
    bool decay;
} shapes[] = {{"fc1/w", 784, 1024, true},  {"fc1/b", 1, 1024, false},
              {"fc2/w", 1024, 1024, true}, {"fc2/b", 1, 1024, false},
              {"out/w", 1024, 10, true},   {"out/b", 1, 10, false}};

static int die(void)
{
    fprintf(stderr, "bench_optimizer: %s\n", pn_error_message());
    return 1;
}

/* Median seconds of one step of kind over a fresh arena, flushing the caches first
 * when flush is not NULL; *elements gets the arena's size. */
static int time_kind(pn_opt_kind kind, char *flush, double *median, size_t *elements)
{
    pn_params *p;
    if (pn_params_create(&p, pn_device_host()) < 0) return -1;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        int index;
        if (pn_params_declare(p, shapes[i].name, shapes[i].rows, shapes[i].cols,
                              (pn_init){PN_INIT_UNIFORM, 0.05f}, shapes[i].decay, &index) < 0)
            return -1;
    }
    pn_optimizer_config cfg;
    pn_optimizer_config_default(&cfg, kind, 0.01);
    cfg.weight_decay = 1e-4;
    pn_optimizer *o;
    if (pn_params_finalize(p) < 0 || pn_params_init_values(p, 1) < 0 ||
        pn_optimizer_create(&o, &cfg, p) < 0)
        return -1;
    pn_matrix g = pn_params_all_grads(p);
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        for (int k = 0; k < g.cols; k++) g.data[k] = 1e-3f * (float)((k + r) % 7 - 3);
        if (flush)
            for (size_t k = 0; k < FLUSH_BYTES; k += 64) flush[k] += (char)r; /* evicts */
        double t0 = pn_now();
        if (pn_optimizer_step(o, p, r, 1.0) < 0) return -1;
        t[r] = pn_now() - t0;
    }
    *median = bench_median(t, RUNS);
    *elements = pn_params_elements(p);
    pn_optimizer_free(o);
    pn_params_free(p);
    return 0;
}

int main(void)
{
    static const struct {
        pn_opt_kind kind;
        int streams; /* arrays read plus arrays written */
    } kinds[] = {{PN_OPT_SGD, 4}, {PN_OPT_MOMENTUM, 6}, {PN_OPT_ADAM, 8}};
    char *flush = calloc(FLUSH_BYTES, 1);
    if (!flush) return 1;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        double cold, warm;
        size_t n;
        if (time_kind(kinds[i].kind, flush, &cold, &n) < 0 ||
            time_kind(kinds[i].kind, NULL, &warm, &n) < 0)
            return die();
        double bytes = (double)kinds[i].streams * sizeof(float) * (double)n;
        printf("%-9s %zu floats: cold %6.3f ms %5.1f GB/s   warm %6.3f ms %5.1f GB/s"
               "  (medians of %d)\n",
               pn_opt_kind_name(kinds[i].kind), n, cold * 1e3, bytes / cold / 1e9, warm * 1e3,
               bytes / warm / 1e9, RUNS);
    }
    free(flush);
    return 0;
}
