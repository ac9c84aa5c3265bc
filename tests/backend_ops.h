/* What the runner of tests/test_backend_ops.c and its cases (tests/backend_ops_cases.c)
 * share: one run of a case on one backend (its buffers and outputs), the helpers a
 * case builds inputs and reads outputs with, and the table of cases. */
#ifndef PN_TEST_BACKEND_OPS_H
#define PN_TEST_BACKEND_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/rng.h"
#include "math/backend.h"
#include "math/buffer.h"

enum { MAX_BUFS = 32, MAX_OUTS = 24 };

typedef enum out_kind { OUT_NEAR, OUT_EXACT } out_kind;

typedef struct out_val {
    char name[48];
    out_kind kind;
    bool ints;     /* data holds ints (compared exactly), else floats or one double */
    bool is_double;
    size_t n;
    void *data;
} out_val;

typedef struct ctx {
    const pn_backend *be;
    pn_device dev;
    pn_rng rng;
    pn_buffer bufs[MAX_BUFS];
    int n_bufs;
    out_val outs[MAX_OUTS];
    int n_outs;
    char error[512]; /* the first failure of this run */
} ctx;

typedef struct shape {
    int rows, cols, pad;
} shape;

typedef void (*case_fn)(ctx *c, shape s, int variant);

typedef struct op_case {
    const char *name;
    const char *slots; /* the slots it covers, spaces between */
    int variants;
    case_fn run;
} op_case;

extern const op_case backend_op_cases[];
extern const int backend_op_n_cases;

/* Records the first failure of a run; check_rc records a non-zero rc with the error. */
void fail(ctx *c, const char *what);
void check_rc(ctx *c, int rc, const char *what);

/* Frees what a run acquired and read back. */
void ctx_release(ctx *c);

/* The helpers of the cases (backend_ops_cases.c), for the cases kept in other files:
 * a block on the run's device; a uniform draw; a rows x cols view with ld = cols +
 * pad filled from host (NULL: uniform in [lo, hi); the padding always so); an output
 * slot; a view read back as an output (its padding as a second, exact one); n ints
 * (or elements of elem bytes) read back as an exact output. */
void *dev_block(ctx *c, size_t bytes);
float uniform(ctx *c, float lo, float hi);
pn_matrix mat_from(ctx *c, int rows, int cols, int pad, const float *host, float lo, float hi);
pn_matrix mat(ctx *c, int rows, int cols, int pad, float lo, float hi);
out_val *new_out(ctx *c, const char *name, out_kind kind);
void out_mat(ctx *c, const char *name, const pn_matrix *m, out_kind kind);
void out_ints(ctx *c, const char *name, const void *dev_ptr, size_t n, size_t elem);

/* The bfloat16 slots' cases (backend_ops_bf16.c). */
void case_gemm_bf16(ctx *c, shape s, int variant);
void case_round_bf16(ctx *c, shape s, int variant);
void case_to_bf16(ctx *c, shape s, int variant);
void case_from_bf16(ctx *c, shape s, int variant);

#endif
