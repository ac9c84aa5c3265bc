/* A float's bit pattern and back, for the tests that check bf16 conversions to the bit
 * (test_bf16.c, backend_ops_bf16.c). */
#ifndef PN_TEST_FLOAT_BITS_H
#define PN_TEST_FLOAT_BITS_H

#include <stdint.h>
#include <string.h>

static inline uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
