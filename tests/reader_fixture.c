/* Helpers of the dataset reader's tests (reader_fixture.h). */
#include "reader_fixture.h"

#include <check.h>
#include <string.h>

#include "base/error.h"

float rf_feature(long i, int j) { return (float)i + (float)j / 1000.0f; }

const pn_batch *rf_next_batch(pn_reader *r)
{
    const pn_batch *b;
    ck_assert_msg(pn_reader_next(r, &b) == 0, "%s", pn_error_message());
    return b;
}

void rf_expect_open_error(const char *path, pn_reader_field field, int code, const char *want)
{
    pn_reader_options o = {.global_batch = 10, .first = 0, .count = 10, .shuffle = true,
                           .seed = 1, .drop_last = true};
    pn_reader *r = NULL;
    pn_error_clear();
    ck_assert_int_eq(pn_reader_open(&r, path, &field, 1, &o), code);
    ck_assert_ptr_null(r);
    ck_assert_str_eq(pn_error_message(), want);
}

void rf_expect_bad_value(const char *path, pn_reader_field field, bool cached, const char *want)
{
    pn_reader_options o = {.global_batch = 10, .first = 0, .count = 10, .shuffle = true,
                           .seed = 3, .drop_last = false,
                           .cache_bytes = cached ? (size_t)1 << 30 : 0};
    pn_reader *r = NULL;
    int rc = pn_reader_open(&r, path, &field, 1, &o);
    for (int i = 0; rc == 0 && i < 11; i++) {
        const pn_batch *b;
        rc = pn_reader_next(r, &b);
    }
    ck_assert_int_eq(rc, PN_ERR_INVALID);
    ck_assert_msg(strstr(pn_error_message(), want), "'%s' lacks '%s'", pn_error_message(), want);
    if (r) pn_reader_close(r);
}
