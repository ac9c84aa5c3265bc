/* The CPU backend's bfloat16 slots: conversions (math/bf16_math.h) and the GEMM
 * whose operands enter rounded to bf16 with fp32 accumulation. Where OpenBLAS has
 * sbgemm (configure's link test: HAVE_CBLAS_SBGEMM) the GEMM narrows copies of its
 * operands and calls it. Debian's OpenBLAS 0.3.21 has none, so there the GEMM rounds
 * copies of its operands and calls sgemm: the product of two bf16 values is exact in
 * fp32, so this is the bf16 GEMM's arithmetic, not an approximation of it. */
#include "config.h"

#include <cblas.h>
#include <stdlib.h>

#include "base/error.h"
#include "math/bf16_math.h"
#include "math/cpu/cpu_kernels.h"

PN_VECTOR_CLONES
static void round_row(const float *src, float *dst, int n)
{
    for (int j = 0; j < n; j++) dst[j] = pn_bf16_round(src[j]);
}

int pn_cpu_round_bf16(pn_matrix *m)
{
    for (int i = 0; i < m->rows; i++) {
        float *row = m->data + (size_t)i * m->ld;
        round_row(row, row, m->cols);
    }
    return PN_OK;
}

PN_VECTOR_CLONES
int pn_cpu_to_bf16(const pn_matrix *src, uint16_t *dst)
{
    for (int i = 0; i < src->rows; i++) {
        const float *row = src->data + (size_t)i * src->ld;
        uint16_t *out = dst + (size_t)i * src->cols;
        for (int j = 0; j < src->cols; j++) out[j] = pn_bf16_from_float(row[j]);
    }
    return PN_OK;
}

PN_VECTOR_CLONES
int pn_cpu_from_bf16(const uint16_t *src, pn_matrix *dst)
{
    for (int i = 0; i < dst->rows; i++) {
        const uint16_t *in = src + (size_t)i * dst->cols;
        float *row = dst->data + (size_t)i * dst->ld;
        for (int j = 0; j < dst->cols; j++) row[j] = pn_bf16_to_float(in[j]);
    }
    return PN_OK;
}

/* The operands' copies, grown as GEMMs ask (the CPU backend runs on one thread of the
 * caller: one pair serves every GEMM). */
static void *operand_block(int which, size_t bytes)
{
    static void *blocks[2];
    static size_t sizes[2];
    if (bytes > sizes[which]) {
        void *grown = realloc(blocks[which], bytes);
        if (!grown) return NULL;
        blocks[which] = grown;
        sizes[which] = bytes;
    }
    return blocks[which];
}

#ifdef HAVE_CBLAS_SBGEMM
/* m narrowed to a dense bf16 copy (bfloat16 is OpenBLAS's name for uint16_t). */
static const bfloat16 *operand_copy(int which, const pn_matrix *m)
{
    bfloat16 *copy = operand_block(which, pn_matrix_count(*m) * sizeof *copy);
    if (copy) pn_cpu_to_bf16(m, copy);
    return copy;
}
#define OPERAND_GEMM cblas_sbgemm
#else
/* m rounded to bf16, a dense float copy. */
static const float *operand_copy(int which, const pn_matrix *m)
{
    float *copy = operand_block(which, pn_matrix_count(*m) * sizeof *copy);
    if (!copy) return NULL;
    for (int i = 0; i < m->rows; i++)
        round_row(m->data + (size_t)i * m->ld, copy + (size_t)i * m->cols, m->cols);
    return copy;
}
#define OPERAND_GEMM cblas_sgemm
#endif

int pn_cpu_gemm_bf16(bool trans_a, bool trans_b, float alpha, const pn_matrix *a,
                     const pn_matrix *b, float beta, pn_matrix *c)
{
    int k = trans_a ? a->rows : a->cols;
    if (c->rows == 0 || c->cols == 0) return PN_OK;
    if (k == 0) return beta == 0.0f ? pn_cpu_fill(c, 0.0f) : pn_cpu_scale(c, beta);
    const void *ra = operand_copy(0, a), *rb = operand_copy(1, b);
    if (!ra || !rb)
        return pn_error_set(PN_ERR_NOMEM, "gemm_bf16: no memory for the rounded operands "
                                          "(%d x %d, %d x %d)", a->rows, a->cols, b->rows, b->cols);
    OPERAND_GEMM(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                 trans_b ? CblasTrans : CblasNoTrans, c->rows, c->cols, k, alpha, ra, a->cols,
                 rb, b->cols, beta, c->data, c->ld);
    return PN_OK;
}
