/* `pipenet layers`: the registered layer types with their inputs and a summary. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "layers/layer.h"

static void describe_inputs(const pn_layer_type *t, char *buf, size_t cap)
{
    if (t->max_inputs == t->min_inputs)
        snprintf(buf, cap, "%d", t->min_inputs);
    else if (t->max_inputs < 0)
        snprintf(buf, cap, "%d+", t->min_inputs);
    else
        snprintf(buf, cap, "%d-%d", t->min_inputs, t->max_inputs);
}

int pn_cmd_layers(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: pipenet layers\n\n"
               "Lists the layer types a model JSON can use in its \"type\" fields,\n"
               "with how many inputs each takes and what it computes.\n");
        return 0;
    }
    if (argc > 1) return pn_cli_misuse("`pipenet layers` takes no arguments (see --help)");
    printf("%-14s %-7s %s\n", "type", "inputs", "description");
    for (int i = 0; i < pn_layer_type_count(); i++) {
        const pn_layer_type *t = pn_layer_type_at(i);
        char inputs[16];
        describe_inputs(t, inputs, sizeof inputs);
        printf("%-14s %-7s %s\n", t->name, inputs, t->summary);
    }
    return 0;
}
