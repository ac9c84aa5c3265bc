/* Text import for language models: the bytes of one or more text files, concatenated,
 * become dataset HDF5 files (docs/formats.md, "Token sequences") of int32 byte ids:
 * /tokens [N, T] and /targets [N, T], the targets being the tokens shifted by one.
 * The vocabulary is the 256 byte values (no tokenizer to train); the files say so in
 * their root attributes, so that whoever reads them can decode ids back to text. */
#ifndef PN_IMPORT_TEXT_H
#define PN_IMPORT_TEXT_H

#include "io/import_util.h"

/* The default share of the text, from its end, that becomes the test split. */
#define PN_TEXT_EVAL_FRACTION 0.1

/* The vocabulary of the byte tokenizer. */
enum { PN_TEXT_VOCAB = 256 };

/* Reads files[n_files] in order as one text and writes out_dir/train.h5 (its first
 * 1 - eval_fraction) and out_dir/test.h5 (the rest), each with samples of seq
 * positions cut from consecutive non-overlapping windows (stride seq). out_dir is
 * created if missing; each file is written under a temporary name and renamed when
 * complete. A missing, unreadable or empty input file is refused naming it; a
 * split too short for one sample is refused before anything is written.
 * eval_fraction lies in (0, 1); progress may be NULL. */
int pn_import_text(const char *const *files, int n_files, const char *out_dir, int seq,
                   double eval_fraction, pn_import_progress progress, void *ctx);

#endif
