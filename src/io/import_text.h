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

/* Reads files[n_files] in order as one text and writes out_dir/train.h5 (its first
 * 1 - eval_fraction) and out_dir/test.h5 (the rest), each with samples of seq
 * positions cut from consecutive non-overlapping windows (stride seq). out_dir is
 * created if missing; each file is written under a temporary name and renamed when
 * complete. A missing, unreadable or empty input file is refused naming it; a
 * split too short for one sample is refused before anything is written.
 * eval_fraction lies in (0, 1); progress may be NULL. */
int pn_import_text(const char *const *files, int n_files, const char *out_dir, int seq,
                   double eval_fraction, pn_import_progress progress, void *ctx);

/* Records for pn_import_text_records: what separates them, and what was found. */
typedef struct pn_text_records {
    const char *separator; /* a line equal to it (without its newline) ends a record */
    long records[2];       /* out: records in train.h5, test.h5 */
    long empty;            /* out: empty records skipped (separators in a row, or one
                            * that starts a file; one that ends a file ends its last
                            * record and is no empty record) */
} pn_text_records;

/* The same files cut into records instead of windows (import_records.c): a record
 * is the bytes of the lines between two separator lines (or a file's start or end;
 * no record spans two files), newlines included. A record of L bytes gives L - 1
 * (token, target) pairs, cut into ceil((L - 1) / seq) samples of seq positions;
 * a sample's positions past its pairs are padding (0 in tokens and targets), and
 * /lengths int32 [N] holds its pairs, in [1, seq]. train.h5 takes the first records,
 * test.h5 the last round(eval_fraction x records) (at least one each). Refused,
 * naming the file and line: a record of one byte (no target); and an empty or
 * multi-line separator, fewer than 2 records. */
int pn_import_text_records(const char *const *files, int n_files, const char *out_dir, int seq,
                           double eval_fraction, pn_text_records *records,
                           pn_import_progress progress, void *ctx);

#endif
