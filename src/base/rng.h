/* Deterministic random numbers keyed by names and indices, never by rank or order.
 * Parameter init draws from a stream keyed by (seed, parameter name); dropout masks
 * hash (seed, layer, step, global row, column) so any rank computes the same mask. */
#ifndef PN_RNG_H
#define PN_RNG_H

#include <stdint.h>

#include "base/hash.h" /* pn_hash_mix, pn_hash_to_unit */

typedef struct pn_rng {
    uint64_t state;
    int has_spare;      /* Box-Muller yields normals in pairs */
    double spare;
} pn_rng;

/* 64-bit FNV-1a hash of a string. */
uint64_t pn_hash_string(const char *s);

/* A stream determined only by (seed, key). */
void pn_rng_init(pn_rng *rng, uint64_t seed, uint64_t key);

uint64_t pn_rng_next(pn_rng *rng);

/* Uniform in [0, 1). */
double pn_rng_uniform(pn_rng *rng);

/* Standard normal. */
double pn_rng_normal(pn_rng *rng);

#endif
