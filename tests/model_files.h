/* The model files of tests/models/ (one file a model, named for what it is), read by
 * the C tests that build networks from a model's JSON text. */
#ifndef PN_TEST_MODEL_FILES_H
#define PN_TEST_MODEL_FILES_H

/* The text of tests/models/NAME.json under the source tree ($srcdir, which make check
 * sets; the current directory otherwise), read once and kept until the program ends.
 * A file that cannot be read ends the program (exit 1) with a message naming it. */
const char *mf_text(const char *name);

#endif
