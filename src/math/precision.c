/* The table of precisions and the process's one setting. */
#include "math/precision.h"

static const pn_choice precision_items[] = {
    [PN_PRECISION_FP32] = {"fp32", "every value a 32-bit float"},
    [PN_PRECISION_BF16] = {"bf16", "bfloat16 GEMMs, activations and links; fp32 masters"},
};
_Static_assert(sizeof precision_items / sizeof *precision_items == PN_PRECISION_BF16 + 1,
               "one line per pn_precision");
const pn_choices pn_precisions = {"a precision", PN_PRECISION_BF16 + 1, precision_items};

static pn_precision process_precision = PN_PRECISION_FP32;

void pn_math_set_precision(pn_precision p) { process_precision = p; }
pn_precision pn_math_precision(void) { return process_precision; }
