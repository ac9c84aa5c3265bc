/* What attention.c (the layer: forward, backward) and attention_cache.c (its
 * incremental forward for generation, over a key/value cache) share: the parsed
 * attributes, the per-instance scratch and the order of the parameters. Private to
 * the two files. */
#ifndef PN_ATTENTION_H
#define PN_ATTENTION_H

#include "layers/layer.h"

typedef struct attention_attrs {
    int heads;
} attention_attrs;

/* The key/value cache of generation: keys and values of every position stepped so
 * far, sequence i's positions at rows i*T .. i*T + T - 1 of kv [n*T, 2C] (keys in
 * columns 0..C-1, values in C..2C-1), and the work of one step. */
typedef struct attention_cache {
    pn_buffer kv, spare;        /* spare: kv's double, swapped in by a reorder */
    pn_buffer qkv, scores, ctx; /* [n, 3C], [1, T], [n, C] */
    int n;                      /* sequences kv holds */
} attention_cache;

typedef struct attention_scratch {
    pn_buffer qkv, probs, ctx;    /* kept from forward */
    pn_buffer dqkv, dctx, dscore; /* backward work */
    attention_cache cache;        /* generation only */
} attention_scratch;

enum { ATTN_QKV_W, ATTN_QKV_B, ATTN_OUT_W, ATTN_OUT_B };

/* The layer type's step and step_reorder (layers/layer.h). */
int pn_attention_step(pn_layer_inst *x, int pos, pn_arg *const *in, pn_arg *out);
int pn_attention_step_reorder(pn_layer_inst *x, const int *from, int n, int len);

/* Releases the cache's buffers. */
void pn_attention_cache_release(attention_cache *c);

#endif
