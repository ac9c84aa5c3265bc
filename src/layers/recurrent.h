/* What lstm and gru share: their attributes ("size", "reverse"), the checks of their
 * input, their parameters wx [in, G*H], wh [H, G*H], b [1, G*H] for G gates of H
 * units each (lstm: 4, gru: 3), the input projection, and the state that generation
 * carries from one step to the next (pn_recurrent_state). */
#ifndef PN_RECURRENT_H
#define PN_RECURRENT_H

#include <jansson.h>
#include <stdbool.h>

#include "layers/layer.h"
#include "math/buffer.h"

typedef struct pn_recurrent_attrs {
    int size;     /* H */
    bool reverse; /* read every sample from its last real position to its first */
} pn_recurrent_attrs;

/* The parameters' indices in the instance (pn_layer_param). */
enum { PN_RECURRENT_WX, PN_RECURRENT_WH, PN_RECURRENT_B };

extern const char *const pn_recurrent_attr_names[];

int pn_recurrent_parse(pn_layer *l, const json_t *spec);

/* Float input; the output has H floats per position of the input's seq. */
int pn_recurrent_infer(pn_layer *l, int gates);

/* wx and wh uniform in ±sqrt(6/(in+H)) and ±sqrt(3/H), weight-decayed; b zeros. */
void pn_recurrent_declare(pn_layer *l, int gates);

/* gates = in wx + b: the input projection, of all positions at once in the forward,
 * of one position per sequence in a step. */
int pn_recurrent_project(const pn_layer_inst *x, const pn_matrix *in, pn_matrix *gates);

/* The input projection's backward: dwx += xb^T dg, db += dg's column sums, and when
 * the input takes a gradient, its rows (index[r]: the input row of batch row r) += the
 * rows of dg wx^T, made in the scratch dxb. */
int pn_recurrent_project_backward(const pn_layer_inst *x, const pn_matrix *xb,
                                  const pn_matrix *dg, const int *index, pn_buffer *dxb,
                                  pn_arg *in);

/* Forward + backward FLOPs per sample of a layer of G gates, and the bytes kept per
 * sample from forward to backward: the input and `per_unit` floats per unit and
 * position. */
double pn_recurrent_flops(const pn_layer *l, int gates);
double pn_recurrent_saved_bytes(const pn_layer *l, int per_unit);

/* What a recurrent layer carries between generation steps: one row per sequence of
 * `width` floats (gru: h; lstm: [h c]), the state after the position last stepped.
 * Two buffers take turns: a step reads the state from one and writes the next into
 * the other, and so does a reorder. */
typedef struct pn_recurrent_state {
    pn_buffer buf[2];
    int cur;  /* the buffer holding the state */
    int held; /* sequences it holds */
} pn_recurrent_state;

/* Starts the step at position pos of out->batch sequences: *prev is the state after pos - 1
 * (data NULL at pos 0, where every sequence starts again from zero state: the first
 * position, or the first after generation cut its window) and *next the n rows the
 * step writes. Refuses a "reverse" layer (pn_layer_step names it): its output at a
 * position depends on the positions after it, which generation has not produced yet. */
int pn_recurrent_step_begin(const pn_layer_inst *x, pn_recurrent_state *st, int pos,
                            const pn_arg *out, int width, pn_matrix *prev, pn_matrix *next);
/* Makes the state the step wrote the one held, for n sequences. */
void pn_recurrent_step_end(pn_recurrent_state *st, int n);

/* Sequence i (i < n) takes sequence from[i]'s state (beam search). */
int pn_recurrent_step_reorder(const pn_layer_inst *x, pn_recurrent_state *st, const int *from,
                              int n, int width);

void pn_recurrent_state_release(pn_recurrent_state *st);

#endif
