/* The CPU backend's table: host memory for the pool, OpenBLAS for GEMM, and the
 * kernels of cpu_elementwise.c, cpu_rowwise.c, cpu_optimizer.c and cpu_bf16.c. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "math/cpu/cpu_kernels.h"

enum { HOST_ALIGN = 64 };

static void *host_alloc(int device_index, size_t bytes)
{
    (void)device_index;
    size_t rounded = (bytes + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
    return aligned_alloc(HOST_ALIGN, rounded);
}

static void host_free(int device_index, void *ptr)
{
    (void)device_index;
    free(ptr);
}

static int host_zero(void *ptr, size_t bytes)
{
    memset(ptr, 0, bytes);
    return PN_OK;
}

static int host_copy(void *dst, const void *src, size_t bytes)
{
    memmove(dst, src, bytes);
    return PN_OK;
}

static int cpu_gemm(bool trans_a, bool trans_b, float alpha, const pn_matrix *a,
                    const pn_matrix *b, float beta, pn_matrix *c)
{
    int k = trans_a ? a->rows : a->cols;
    if (c->rows == 0 || c->cols == 0) return PN_OK;
    if (k == 0) return beta == 0.0f ? pn_cpu_fill(c, 0.0f) : pn_cpu_scale(c, beta);
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, c->rows, c->cols, k, alpha, a->data,
                a->ld, b->data, b->ld, beta, c->data, c->ld);
    return PN_OK;
}

void pn_math_set_threads(int threads)
{
    openblas_set_num_threads(threads > 0 ? threads : 1);
    pn_cpu_set_parts(threads);
}

const pn_backend pn_cpu_backend = {
    .name = "cpu",
    .memory = {.alloc = host_alloc,
               .free = host_free,
               .zero = host_zero,
               .copy_from_host = host_copy,
               .copy_to_host = host_copy},
    .gemm = cpu_gemm,
    .gemm_bf16 = pn_cpu_gemm_bf16,
    .round_bf16 = pn_cpu_round_bf16,
    .to_bf16 = pn_cpu_to_bf16,
    .from_bf16 = pn_cpu_from_bf16,
    .fill = pn_cpu_fill,
    .copy = pn_cpu_copy,
    .scale = pn_cpu_scale,
    .axpy = pn_cpu_axpy,
    .mul = pn_cpu_mul,
    .act_forward = pn_cpu_act_forward,
    .act_backward = pn_cpu_act_backward,
    .dropout_forward = pn_cpu_dropout_forward,
    .add_row_vector = pn_cpu_add_row_vector,
    .col_sums = pn_cpu_col_sums,
    .sum_squares = pn_cpu_sum_squares,
    .softmax_rows = pn_cpu_softmax_rows,
    .xent_forward = pn_cpu_xent_forward,
    .xent_backward = pn_cpu_xent_backward,
    .mse_forward = pn_cpu_mse_forward,
    .mse_backward = pn_cpu_mse_backward,
    .layernorm_forward = pn_cpu_layernorm_forward,
    .layernorm_backward = pn_cpu_layernorm_backward,
    .gather_rows = pn_cpu_gather_rows,
    .scatter_add_rows = pn_cpu_scatter_add_rows,
    .seq_max_forward = pn_cpu_seq_max_forward,
    .seq_max_backward = pn_cpu_seq_max_backward,
    .optimizer_update = pn_cpu_optimizer_update,
    .optimizer_update_rows = pn_cpu_optimizer_update_rows,
};
