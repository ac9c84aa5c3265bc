/* The dataset file of token sequences that the text importers write (docs/formats.md,
 * "Token sequences"): /tokens and /targets int32 [samples, seq], with /lengths int32
 * [samples] for padded samples, chunked by about 1 MiB of ids, and the byte
 * tokenizer's attributes. One writer for import_text.c's windows and
 * import_records.c's records. */
#ifndef PN_TOKEN_FILE_H
#define PN_TOKEN_FILE_H

#include <hdf5.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct pn_token_file {
    const char *path;     /* the caller's, for messages */
    hid_t file, tokens, targets, lengths;
    long chunk_rows;      /* rows per HDF5 chunk (<= samples): write blocks of this many */
    int seq;
} pn_token_file;

/* Creates path with the datasets for samples rows of seq ids (and /lengths when
 * with_lengths); samples >= 1. */
int pn_token_file_create(pn_token_file *f, const char *path, long samples, int seq,
                         bool with_lengths);

/* Writes rows [row, row + n) of tokens and targets ([n, seq] each) and, when the
 * file has them, lengths ([n]). */
int pn_token_file_write(pn_token_file *f, long row, long n, const int32_t *tokens,
                        const int32_t *targets, const int32_t *lengths);

/* Closes the datasets and, when rc is 0, writes the root attributes source, tokenizer
 * ("bytes"), vocab_size and num_classes (256), seq and stride; the file stays open
 * for more attributes (f->file). Returns the first error, rc included. */
int pn_token_file_finish(pn_token_file *f, const char *source, int rc);

/* Closes the file after pn_token_file_finish (or a failed create or write). */
int pn_token_file_close(pn_token_file *f, int rc);

#endif
