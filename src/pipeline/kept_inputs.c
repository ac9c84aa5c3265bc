/* The inputs a stage keeps per micro-batch under --recompute (kept_inputs.h). */
#include "pipeline/kept_inputs.h"

#include <stdlib.h>

#include "base/error.h"
#include "math/ops.h"

void pn_kept_inputs_init(pn_kept_inputs *k, pn_device dev, int slots)
{
    *k = (pn_kept_inputs){.device = dev, .slots = slots};
}

int pn_kept_inputs_add(pn_kept_inputs *k, int node, int rows, int cols)
{
    int n = k->n + 1;
    int *nodes = realloc(k->node, (size_t)n * sizeof *nodes);
    if (nodes) k->node = nodes;
    int *r = realloc(k->rows, (size_t)n * sizeof *r);
    if (r) k->rows = r;
    int *c = realloc(k->cols, (size_t)n * sizeof *c);
    if (c) k->cols = c;
    pn_buffer *b = realloc(k->bufs, (size_t)n * (size_t)k->slots * sizeof *b);
    if (b) k->bufs = b;
    if (!nodes || !r || !c || !b) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    k->node[k->n] = node, k->rows[k->n] = rows, k->cols[k->n] = cols;
    pn_buffer *mine = &k->bufs[(size_t)k->n * (size_t)k->slots];
    for (int s = 0; s < k->slots; s++) mine[s] = (pn_buffer){0};
    k->n = n; /* counted before acquiring, so that pn_kept_inputs_free releases them */
    size_t bytes = (size_t)rows * (size_t)cols * sizeof(float);
    for (int s = 0; s < k->slots; s++)
        PN_TRY(pn_buffer_acquire(&mine[s], k->device, bytes ? bytes : sizeof(float)));
    return PN_OK;
}

/* The kept matrix i of slot, shaped like the network's value of that node. */
static int slot_matrix(pn_kept_inputs *k, int i, int slot, const pn_matrix *like,
                       pn_matrix *out)
{
    if (slot < 0 || slot >= k->slots || like->rows > k->rows[i] || like->cols != k->cols[i])
        return pn_error_set(PN_ERR_INTERNAL,
                            "kept input %d: %d x %d in slot %d does not fit %d x %d of %d slots",
                            k->node[i], like->rows, like->cols, slot, k->rows[i], k->cols[i],
                            k->slots);
    *out = pn_matrix_on(&k->bufs[(size_t)i * (size_t)k->slots + (size_t)slot], like->rows,
                        like->cols);
    return PN_OK;
}

int pn_kept_inputs_save(pn_kept_inputs *k, int slot, pn_network *net)
{
    for (int i = 0; i < k->n; i++) {
        pn_matrix *v = &pn_network_arg(net, k->node[i])->value, kept;
        PN_TRY(slot_matrix(k, i, slot, v, &kept));
        PN_TRY(pn_copy(v, &kept));
    }
    return PN_OK;
}

int pn_kept_inputs_restore(pn_kept_inputs *k, int slot, pn_network *net)
{
    for (int i = 0; i < k->n; i++) {
        pn_matrix *v = &pn_network_arg(net, k->node[i])->value, kept;
        PN_TRY(slot_matrix(k, i, slot, v, &kept));
        PN_TRY(pn_copy(&kept, v));
    }
    return PN_OK;
}

size_t pn_kept_inputs_bytes(const pn_kept_inputs *k)
{
    size_t bytes = 0;
    for (size_t i = 0; i < (size_t)k->n * (size_t)k->slots; i++) bytes += k->bufs[i].capacity;
    return bytes;
}

void pn_kept_inputs_free(pn_kept_inputs *k)
{
    for (size_t i = 0; k->bufs && i < (size_t)k->n * (size_t)k->slots; i++)
        pn_buffer_release(&k->bufs[i]);
    free(k->node), free(k->rows), free(k->cols), free(k->bufs);
    *k = (pn_kept_inputs){0};
}
