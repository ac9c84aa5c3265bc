/* Kernels of the CPU backend, shared between its files and its table. */
#ifndef PN_CPU_KERNELS_H
#define PN_CPU_KERNELS_H

#include "math/backend.h"

int pn_cpu_gemm_bf16(bool trans_a, bool trans_b, float alpha, const pn_matrix *a,
                     const pn_matrix *b, float beta, pn_matrix *c);
int pn_cpu_round_bf16(pn_matrix *m);
int pn_cpu_to_bf16(const pn_matrix *src, uint16_t *dst);
int pn_cpu_from_bf16(const uint16_t *src, pn_matrix *dst);
int pn_cpu_fill(pn_matrix *m, float value);
int pn_cpu_copy(const pn_matrix *src, pn_matrix *dst);
int pn_cpu_scale(pn_matrix *m, float alpha);
int pn_cpu_axpy(float alpha, const pn_matrix *x, pn_matrix *y);
int pn_cpu_mul(const pn_matrix *a, const pn_matrix *b, float beta, pn_matrix *c);
int pn_cpu_act_forward(pn_act act, const pn_matrix *x, pn_matrix *y);
int pn_cpu_act_backward(pn_act act, const pn_matrix *x, const pn_matrix *y,
                        const pn_matrix *dy, float beta, pn_matrix *dx);
int pn_cpu_dropout_forward(const pn_matrix *x, float rate, uint64_t key, long row0,
                           pn_matrix *mask, pn_matrix *y);

int pn_cpu_add_row_vector(const pn_matrix *v, pn_matrix *m);
int pn_cpu_col_sums(const pn_matrix *m, float beta, pn_matrix *out);
int pn_cpu_sum_squares(const pn_matrix *m, double *out);
int pn_cpu_softmax_rows(const pn_matrix *x, float scale, int causal_period, pn_matrix *y);
int pn_cpu_xent_forward(const pn_matrix *probs, const int *labels, pn_matrix *loss,
                        double *correct);
int pn_cpu_xent_backward(const pn_matrix *probs, const int *labels, const pn_matrix *dloss,
                         float beta, pn_matrix *dlogits);
int pn_cpu_mse_forward(const pn_matrix *p, const pn_matrix *t, pn_matrix *loss);
int pn_cpu_mse_backward(const pn_matrix *p, const pn_matrix *t, const pn_matrix *dloss,
                        pn_matrix *dp, pn_matrix *dt);
int pn_cpu_layernorm_forward(const pn_matrix *x, const pn_matrix *gamma,
                             const pn_matrix *beta, float eps, pn_matrix *y, pn_matrix *mean,
                             pn_matrix *rstd);
int pn_cpu_layernorm_backward(const pn_matrix *x, const pn_matrix *gamma,
                              const pn_matrix *mean, const pn_matrix *rstd, const pn_matrix *dy,
                              pn_matrix *dx, pn_matrix *dgamma, pn_matrix *dbeta);
int pn_cpu_gather_rows(const pn_matrix *table, const int *ids, pn_matrix *out);
int pn_cpu_scatter_add_rows(const pn_matrix *dout, const int *ids, pn_matrix *dtable);
int pn_cpu_seq_max_forward(const pn_matrix *x, int period, const int *lengths, pn_matrix *y,
                           int *arg);
int pn_cpu_seq_max_backward(const pn_matrix *dy, const int *arg, pn_matrix *dx);
int pn_cpu_optimizer_update_rows(const pn_update_hparams *hp, pn_matrix *w, const int *ids,
                                 pn_matrix *g, pn_matrix *slot1, pn_matrix *slot2);
int pn_cpu_optimizer_update(const pn_update_hparams *hp, pn_matrix *w, pn_matrix *g,
                            pn_matrix *slot1, pn_matrix *slot2);

/* Memory-bound work split over the threads of pn_math_set_threads (cpu_workers.c):
 * fn(ctx, part, parts) runs once for every part, on the calling thread or a helper;
 * work (in floats) under PN_CPU_SPLIT_MIN runs as one part on the calling thread. */
typedef void (*pn_cpu_task)(void *ctx, int part, int parts);
enum { PN_CPU_SPLIT_MIN = 1 << 16 };
void pn_cpu_set_parts(int threads);
void pn_cpu_split(pn_cpu_task fn, void *ctx, size_t work);
/* Part part of [0, n) in parts pieces of whole 64-byte lines of floats. */
void pn_cpu_split_range(size_t n, int part, int parts, size_t *first, size_t *end);

/* Hot loops get AVX2 and AVX-512 versions picked at load time (the build targets
 * baseline x86-64, whose SSE loops leave half the vector unit idle). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PN_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PN_VECTOR_CLONES
#endif

/* Row i of m. */
static inline float *pn_cpu_row(const pn_matrix *m, int i) { return m->data + (size_t)i * (size_t)m->ld; }

#endif
