/* The embedding API's tests (test_model.c, test_model_losses.c): a network run
 * directly on random values beside the model file written from it. */
#ifndef PN_TEST_MODEL_FIXTURE_H
#define PN_TEST_MODEL_FIXTURE_H

#include "layers/layer.h"
#include "layers/params.h"
#include "net/graph.h"
#include "net/network.h"
#include "pipenet.h"

enum { MAX_INPUTS = 4 };

/* A network over json run directly on random values and inputs. */
typedef struct direct {
    pn_graph *graph;
    pn_network *net;
    pn_params *params;
    int batch;
    int n_inputs;
    void *inputs[MAX_INPUTS]; /* host data of each graph input, in graph order */
    pn_layer_stats stats;     /* of the loss layer after the forward */
} direct;

/* The test's temporary directory and the model file's path in it (setup, teardown:
 * a checked fixture). */
extern char dir[512], path[600];
void setup(void);
void teardown(void);

/* Builds json's network for batch samples with random values (not the init's) and
 * random inputs, and runs it forward. */
void direct_init(direct *d, const char *json, int batch);
void direct_free(direct *d);
/* The values of layer name after the forward. */
const float *direct_output(direct *d, const char *name);
/* Writes d's parameters (all but skip; bad_shape one of them transposed, extra adds
 * one more) to path as a model, or as a snapshot with one zero optimizer slot. */
void write_file(const direct *d, const char *json, const char *format, const char *skip,
                const char *bad_shape, const char *extra);
/* pn_model_load of path, which must succeed. */
pn_model *load_ok(void);
/* pn_model_load of path fails saying want. */
void assert_load_fails(const char *want);

#endif
