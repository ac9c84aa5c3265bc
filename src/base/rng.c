/* splitmix64-based generator and string hash. */
#include "base/rng.h"

#include <math.h>

uint64_t pn_hash_string(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

void pn_rng_init(pn_rng *rng, uint64_t seed, uint64_t key)
{
    rng->state = pn_hash_mix(pn_mix64(seed), key);
    rng->has_spare = 0;
    rng->spare = 0.0;
}

uint64_t pn_rng_next(pn_rng *rng)
{
    rng->state += 0x9e3779b97f4a7c15ULL;
    return pn_mix64(rng->state);
}

double pn_rng_uniform(pn_rng *rng) { return (double)(pn_rng_next(rng) >> 11) * 0x1.0p-53; }

double pn_rng_normal(pn_rng *rng)
{
    if (rng->has_spare) {
        rng->has_spare = 0;
        return rng->spare;
    }
    double u1, u2;
    do u1 = pn_rng_uniform(rng); while (u1 <= 0.0);
    u2 = pn_rng_uniform(rng);
    double r = sqrt(-2.0 * log(u1)), t = 2.0 * M_PI * u2;
    rng->spare = r * sin(t);
    rng->has_spare = 1;
    return r * cos(t);
}
