/* A test-only cblas_sbgemm (scripts/test_sbgemm.sh), for checking pipenet's sbgemm
 * path where the system's OpenBLAS lacks it (Debian 12's 0.3.21): the bf16 operands
 * widened to float (exact), then OpenBLAS's sgemm. It counts its calls and prints the
 * count at exit under SBSHIM_VERBOSE=1; SBSHIM_WRONG=1 drops the last significand bit
 * of every value of A, a fault the tests must report. Never linked into pipenet. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long calls;

static void report(void)
{
    if (getenv("SBSHIM_VERBOSE")) fprintf(stderr, "sbgemm shim: %ld cblas_sbgemm calls\n", calls);
}

__attribute__((constructor)) static void init(void) { atexit(report); }

static float *widen(const bfloat16 *p, size_t n, int wrong)
{
    float *out = malloc((n ? n : 1) * sizeof *out);
    for (size_t k = 0; k < n; k++) {
        unsigned int bits = (unsigned int)(p[k] & (wrong ? 0xfffe : 0xffff)) << 16;
        memcpy(&out[k], &bits, sizeof bits);
    }
    return out;
}

void cblas_sbgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta,
                  const enum CBLAS_TRANSPOSE tb, const blasint M, const blasint N, const blasint K,
                  const float alpha, const bfloat16 *A, const blasint lda, const bfloat16 *B,
                  const blasint ldb, const float beta, float *C, const blasint ldc)
{
    calls++;
    int row = order == CblasRowMajor;
    int a_rows = ta == CblasNoTrans ? M : K, a_cols = ta == CblasNoTrans ? K : M;
    int b_rows = tb == CblasNoTrans ? K : N, b_cols = tb == CblasNoTrans ? N : K;
    /* the elements the operands span, first to last */
    size_t na = (size_t)((row ? a_rows : a_cols) - 1) * lda + (row ? a_cols : a_rows);
    size_t nb = (size_t)((row ? b_rows : b_cols) - 1) * ldb + (row ? b_cols : b_rows);
    const char *wrong = getenv("SBSHIM_WRONG");
    float *a = widen(A, na, wrong && *wrong == '1'), *b = widen(B, nb, 0);
    cblas_sgemm(order, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, C, ldc);
    free(a);
    free(b);
}
