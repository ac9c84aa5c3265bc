/* CUDA kernels that index rows by integer arrays on the device: gather and
 * scatter-add of rows (embeddings, the recurrent layers' batch layout, seq_pool's
 * last), and sequence max pooling. A bad id or length is recorded in the fault record
 * and reported after the kernel with the CPU's message (cuda_common.h).
 * scatter_add_rows has two variants: atomic adds (fast, the order of the adds to one
 * row varies from run to run) and, under pn_math_set_deterministic, one thread per
 * (column, block of table rows) that adds the rows in index order: the CPU's order,
 * so the CPU's bits. Never run on a GPU yet. */
#include "math/cuda/cuda_common.h"

static int id_error(int row, int id, int rows)
{
    return pn_error_set(PN_ERR_INVALID, "id %d at row %d is outside [0, %d)", id, row, rows);
}

/* The fault, if the kernels just launched recorded one, as pn_error_set. */
#define TAKE_FAULT(report)                               \
    do {                                                 \
        bool hit_;                                       \
        int row_, value_;                                \
        PN_TRY(pn_cuda_fault_take(&hit_, &row_, &value_)); \
        if (hit_) return report(row_, value_);           \
    } while (0)

struct gather_op {
    pn_matrix table, out;
    const int *ids;
    unsigned long long *fault;
    __device__ void operator()(long i, long j) const
    {
        int id = ids[i];
        if (id < 0 || id >= table.rows) {
            if (j == 0) pn_cuda_fault(fault, (int)i, id);
            return;
        }
        pn_at(out, i, j) = pn_at(table, id, j);
    }
};

int pn_cuda_gather_rows(const pn_matrix *table, const int *ids, pn_matrix *out)
{
    unsigned long long *fault;
    if (out->rows == 0) return PN_OK;
    PN_TRY(pn_cuda_fault_ptr(&fault));
    PN_TRY(pn_map2d(out->rows, out->cols, gather_op{*table, *out, ids, fault}));
    int rows = table->rows;
    auto report = [rows](int row, int id) { return id_error(row, id, rows); };
    TAKE_FAULT(report);
    return PN_OK;
}

struct scatter_atomic_op {
    pn_matrix dout, dtable;
    const int *ids;
    unsigned long long *fault;
    __device__ void operator()(long i, long j) const
    {
        int id = ids[i];
        if (id < 0 || id >= dtable.rows) {
            if (j == 0) pn_cuda_fault(fault, (int)i, id);
            return;
        }
        atomicAdd(&pn_at(dtable, id, j), pn_at(dout, i, j));
    }
};

enum { SCATTER_COLS = 128, SCATTER_CHUNKS = 64 };

/* Thread (column j, chunk c) owns dtable's rows [c * per, (c + 1) * per) at column j
 * and adds every dout row whose id falls there, in index order. */
__global__ static void __launch_bounds__(SCATTER_COLS)
scatter_ordered_kernel(pn_matrix dout, const int *ids, pn_matrix dtable, int per,
                       unsigned long long *fault)
{
    int j = blockIdx.x * SCATTER_COLS + threadIdx.x;
    int lo = blockIdx.y * per, hi = lo + per;
    bool checker = blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0;
    for (int i = 0; i < dout.rows; i++) {
        int id = ids[i];
        if (checker && (id < 0 || id >= dtable.rows)) pn_cuda_fault(fault, i, id);
        if (j < dout.cols && id >= lo && id < hi) pn_at(dtable, id, j) += pn_at(dout, i, j);
    }
}

int pn_cuda_scatter_add_rows(const pn_matrix *dout, const int *ids, pn_matrix *dtable)
{
    unsigned long long *fault;
    if (dout->rows == 0) return PN_OK;
    PN_TRY(pn_cuda_fault_ptr(&fault));
    if (pn_math_deterministic()) {
        cudaStream_t s;
        PN_TRY(pn_cuda_stream(&s));
        int chunks = dtable->rows < SCATTER_CHUNKS ? (dtable->rows > 0 ? dtable->rows : 1)
                                                   : SCATTER_CHUNKS;
        int per = (dtable->rows + chunks - 1) / chunks;
        if (per < 1) per = 1;
        dim3 grid((dout->cols + SCATTER_COLS - 1) / SCATTER_COLS, chunks);
        if (grid.x == 0) grid.x = 1; /* still check the ids */
        scatter_ordered_kernel<<<grid, SCATTER_COLS, 0, s>>>(*dout, ids, *dtable, per, fault);
        CUDA_LAUNCHED();
    } else {
        PN_TRY(pn_map2d(dout->rows, dout->cols, scatter_atomic_op{*dout, *dtable, ids, fault}));
    }
    int rows = dtable->rows;
    auto report = [rows](int row, int id) { return id_error(row, id, rows); };
    TAKE_FAULT(report);
    return PN_OK;
}

/* Thread (b, j): the max over sample b's real rows at column j, the first on ties. */
struct seq_max_op {
    pn_matrix x, y;
    int period;
    const int *lengths;
    int *arg;
    unsigned long long *fault;
    __device__ void operator()(long b, long j) const
    {
        int len = lengths ? lengths[b] : period;
        if (len < 1 || len > period) {
            if (j == 0) pn_cuda_fault(fault, (int)b, len);
            return;
        }
        long first = b * period, best_row = first;
        float best = pn_at(x, first, j);
        for (int t = 1; t < len; t++) {
            float v = pn_at(x, first + t, j);
            if (v > best) best = v, best_row = first + t;
        }
        pn_at(y, b, j) = best;
        arg[b * y.cols + j] = (int)best_row;
    }
};

int pn_cuda_seq_max_forward(const pn_matrix *x, int period, const int *lengths, pn_matrix *y,
                            int *arg)
{
    unsigned long long *fault;
    if (y->rows == 0) return PN_OK;
    PN_TRY(pn_cuda_fault_ptr(&fault));
    PN_TRY(pn_map2d(y->rows, y->cols, seq_max_op{*x, *y, period, lengths, arg, fault}));
    auto report = [period](int b, int len) {
        return pn_error_set(PN_ERR_INVALID, "seq_max: sample %d has length %d, outside [1, %d]",
                            b, len, period);
    };
    TAKE_FAULT(report);
    return PN_OK;
}

/* dx[arg, j] += dy[b, j]; a valid arg (from the forward) gives each (b, j) its own
 * element of dx, the atomic add only guards against an arg that does not. */
struct seq_max_back_op {
    pn_matrix dy, dx;
    const int *arg;
    unsigned long long *fault;
    __device__ void operator()(long b, long j) const
    {
        long k = b * dy.cols + j;
        int r = arg[k];
        if (r < 0 || r >= dx.rows) {
            pn_cuda_fault(fault, (int)k, r);
            return;
        }
        atomicAdd(&pn_at(dx, r, j), pn_at(dy, b, j));
    }
};

int pn_cuda_seq_max_backward(const pn_matrix *dy, const int *arg, pn_matrix *dx)
{
    unsigned long long *fault;
    if (dy->rows == 0) return PN_OK;
    PN_TRY(pn_cuda_fault_ptr(&fault));
    PN_TRY(pn_map2d(dy->rows, dy->cols, seq_max_back_op{*dy, *dx, arg, fault}));
    int rows = dx->rows;
    auto report = [rows](int k, int r) {
        return pn_error_set(PN_ERR_INVALID, "seq_max_backward: row %d outside [0, %d)", r, rows);
    };
    TAKE_FAULT(report);
    return PN_OK;
}
