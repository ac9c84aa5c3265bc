/* The options of `pipenet train` over the model's "train" object: parsed into a
 * set of overrides, then applied to the config read from the model. Apart from
 * cmd_train.c so that fuzz/fuzz_train_config.c reads a config exactly as the
 * program does. */
#ifndef PN_TRAIN_OPTIONS_H
#define PN_TRAIN_OPTIONS_H

#include <stdbool.h>

#include "train/train_config.h"

enum { PN_TRAIN_OPT_MAX = 32 }; /* room for this many long options */

/* Option values, and which ones were given (they override the model's "train"). */
typedef struct pn_train_overrides {
    pn_train_config v;
    bool given[PN_TRAIN_OPT_MAX]; /* by option, in the table's order */
} pn_train_overrides;

/* Parses argv's options into o (zeroed by the caller); returns 0, 1 for --help, -1
 * on misuse (already reported). optind is left at the first non-option. */
int pn_train_options_parse(int argc, char **argv, pn_train_overrides *o);

/* Sets in cfg every value given on the command line. */
void pn_train_options_apply(const pn_train_overrides *o, pn_train_config *cfg);

/* With cfg complete (the model's "train" and the options): PN_ERR_INVALID, naming the
 * option and the path, when --metrics or --trace would replace an input of the run
 * (the model file, the training or evaluation data, the --layer-times file, the
 * snapshot resumed from), is the snapshot directory or a snapshot's name in it, is a
 * directory, or (--trace) is the --metrics file; compared by identity (base/path.h).
 * A stream (/dev/stdout, a FIFO) is a good output. */
int pn_train_outputs_check(const pn_train_config *cfg, const char *model);

/* With cfg complete: PN_ERR_INVALID for options that the model's "train" and the
 * command line together leave without their object (--resume auto, --snapshot-every
 * or --keep with no snapshot directory from either), then pn_train_outputs_check.
 * A command-line error (exit 2), decided by rank 0. */
int pn_train_settings_check(const pn_train_overrides *o, const pn_train_config *cfg,
                            const char *model);

#endif
