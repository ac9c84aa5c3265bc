/* Helpers of the dataset reader's tests (test_reader.c, test_reader_types.c). */
#ifndef PN_TEST_READER_FIXTURE_H
#define PN_TEST_READER_FIXTURE_H

#include <stdbool.h>

#include "io/reader.h"

/* The value the test files hold at sample i, column j. */
float rf_feature(long i, int j);

/* The reader's next batch, which must come. */
const pn_batch *rf_next_batch(pn_reader *r);

/* Opening path with one field fails with code and exactly the message want. */
void rf_expect_open_error(const char *path, pn_reader_field field, int code, const char *want);

/* Reading field of path fails with a message containing want: at open when cached,
 * else at some batch of the first epoch (every batch is read). */
void rf_expect_bad_value(const char *path, pn_reader_field field, bool cached, const char *want);

#endif
