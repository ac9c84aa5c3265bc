/* The byte tokenizer of text datasets: a token is one of the 256 byte values. The
 * token files say so in their attributes (token_file.c) and generation draws a byte
 * from as many logits (model/generate.c); no HDF5 here, so that floors above src/io
 * read it without HDF5's header. */
#ifndef PN_TEXT_VOCAB_H
#define PN_TEXT_VOCAB_H

enum { PN_TEXT_VOCAB = 256 };

#endif
