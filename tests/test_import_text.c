/* The text importer on small files this test writes: byte ids and next-byte targets
 * of non-overlapping windows read back through the dataset reader, the split sizes
 * and the root attributes; a missing or empty file, a --seq longer than a split and
 * a bad fraction refused with the file named and nothing left in the output
 * directory. With --records: records cut at separator lines and file ends, empty
 * ones skipped, long ones cut into several padded samples whose lengths the reader
 * reads back; a one-byte record, a bad separator and too few records refused. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/hdf5_util.h"
#include "io/import_text.h"
#include "io/reader.h"
#include "testutil.h"

static char dir[PATH_MAX];

static void setup(void) { tu_make_temp_dir(dir, sizeof dir, "import_text"); }

static void teardown(void) { tu_remove_tree(dir); }

/* Writes n bytes of content into dir/name; path receives its path. */
static void write_text(const char *name, const char *content, size_t n, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(content, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

typedef struct seen_files {
    int calls;
    long samples[2];
} seen_files;

static void count_files(const char *path, long samples, void *ctx)
{
    seen_files *seen = ctx;
    ck_assert_ptr_nonnull(strstr(path, seen->calls == 0 ? "/train.h5" : "/test.h5"));
    seen->samples[seen->calls++ % 2] = samples;
}

/* Reads the n samples of path and checks them against the bytes text[0, ...) with
 * seq positions each: ids are bytes kT.., targets the bytes one further. */
static void check_split(const char *path, const unsigned char *text, int n, int seq)
{
    const pn_reader_field f[] = {{"tokens", {0, seq, true}, "x", 256, "embed", 0, false},
                                 {"targets", {0, seq, true}, "y", 256, "loss", 0, false}};
    pn_reader_options o = {.global_batch = n, .first = 0, .count = n, .drop_last = false};
    pn_reader *r;
    ck_assert_msg(pn_reader_open(&r, path, f, 2, &o) == 0, "%s", pn_error_message());
    ck_assert_int_eq(pn_reader_samples(r), n);
    const pn_batch *b;
    ck_assert_msg(pn_reader_next(r, &b) == 0, "%s", pn_error_message());
    ck_assert_int_eq(b->rows, n);
    for (int k = 0; k < n; k++)
        for (int t = 0; t < seq; t++) {
            ck_assert_int_eq(b->ids[0][k * seq + t], text[k * seq + t]);
            ck_assert_int_eq(b->ids[1][k * seq + t], text[k * seq + t + 1]);
        }
    pn_reader_close(r);

    hid_t file;
    char tokenizer[64], source[1024];
    long vocab = 0, classes = 0, file_seq = 0, stride = 0;
    ck_assert_int_eq(pn_hdf5_open_file(path, H5P_DEFAULT, &file), 0);
    ck_assert_int_eq(pn_hdf5_read_attr_string(file, path, "tokenizer", tokenizer,
                                              sizeof tokenizer), 0);
    ck_assert_int_eq(pn_hdf5_read_attr_string(file, path, "source", source, sizeof source), 0);
    ck_assert_int_eq(pn_hdf5_read_attr_int(file, path, "vocab_size", &vocab), 0);
    ck_assert_int_eq(pn_hdf5_read_attr_int(file, path, "num_classes", &classes), 0);
    ck_assert_int_eq(pn_hdf5_read_attr_int(file, path, "seq", &file_seq), 0);
    ck_assert_int_eq(pn_hdf5_read_attr_int(file, path, "stride", &stride), 0);
    ck_assert_int_eq(pn_hdf5_close(file, path), 0);
    ck_assert_str_eq(tokenizer, "bytes");
    ck_assert_int_eq(vocab, 256);
    ck_assert_int_eq(classes, 256);
    ck_assert_int_eq(file_seq, seq);
    ck_assert_int_eq(stride, seq);
    ck_assert_msg(strstr(source, "text: ") && strstr(source, "/one.txt and 1 more file"),
                  "source: %s", source);
}

START_TEST(import_writes_windows_targets_and_attributes)
{
    /* 100 bytes over two files, all 256 values possible: bytes 0..255 cycle. */
    unsigned char text[100];
    for (int k = 0; k < 100; k++) text[k] = (unsigned char)(k * 97 + 200);
    char one[2 * PATH_MAX], two[2 * PATH_MAX], out[PATH_MAX + 16], path[2 * PATH_MAX];
    char names[256];
    write_text("one.txt", (const char *)text, 37, one, sizeof one);
    write_text("two.txt", (const char *)text + 37, 63, two, sizeof two);
    snprintf(out, sizeof out, "%s/out/nested", dir);
    const char *files[] = {one, two};
    seen_files seen = {0};
    /* eval fraction 0.25: test = the last 25 bytes, train = the first 75.
     * seq 6: train holds (75 - 1) / 6 = 12 samples, test (25 - 1) / 6 = 4. */
    ck_assert_msg(pn_import_text(files, 2, out, 6, 0.25, count_files, &seen) == 0, "%s",
                  pn_error_message());
    ck_assert_int_eq(seen.calls, 2);
    ck_assert_int_eq(seen.samples[0], 12);
    ck_assert_int_eq(seen.samples[1], 4);
    snprintf(path, sizeof path, "%s/train.h5", out);
    check_split(path, text, 12, 6);
    snprintf(path, sizeof path, "%s/test.h5", out);
    check_split(path, text + 75, 4, 6);
    ck_assert_int_eq(tu_list_dir(out, names, sizeof names), 0);
    ck_assert_msg(!strcmp(names, "train.h5\ntest.h5\n") || !strcmp(names, "test.h5\ntrain.h5\n"),
                  "out dir holds: %s", names);

    /* The longest --seq both splits hold: test's 25 bytes give one sample of 24. */
    ck_assert_msg(pn_import_text(files, 2, out, 24, 0.25, NULL, NULL) == 0, "%s",
                  pn_error_message());
    snprintf(path, sizeof path, "%s/test.h5", out);
    check_split(path, text + 75, 1, 24);
}
END_TEST

START_TEST(import_refuses_bad_input)
{
    char good[2 * PATH_MAX], empty[2 * PATH_MAX], missing[2 * PATH_MAX];
    char text[100];
    memset(text, 'a', sizeof text);
    write_text("good.txt", text, sizeof text, good, sizeof good);
    write_text("empty.txt", text, 0, empty, sizeof empty);
    snprintf(missing, sizeof missing, "%s/missing.txt", dir);
    static const struct {
        int file; /* 0: good, 1: empty, 2: missing as the second file */
        int seq;
        double fraction;
        const char *words;
        bool names_good; /* the message names good.txt rather than the second file */
    } cases[] = {
        {2, 4, 0.1, "cannot open '", false},
        {1, 4, 0.1, ": empty file, no text to import", false},
        /* 100 bytes at 0.1: train 90, test 10; seq 10 needs 11 bytes in test */
        {0, 10, 0.1, "the test split (its last 10%: 10 of the text's 100 bytes) holds no "
                     "sample of --seq 10", true},
        /* seq 100 is too long for train's 90 bytes as well: train is named first */
        {0, 100, 0.1, "the train split (its first 90%: 90 of the text's 100 bytes) holds no "
                      "sample of --seq 100, which needs 101 bytes", true},
        {0, 4, 0.0, "--eval-fraction 0: expected a number in (0, 1)", false},
        {0, 4, 1.0, "--eval-fraction 1: expected a number in (0, 1)", false},
        {0, 0, 0.1, "--seq 0: expected 1..", false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char out[PATH_MAX + 16], names[256];
        snprintf(out, sizeof out, "%s/out_bad%zu", dir, c);
        const char *second = cases[c].file == 1 ? empty : missing;
        const char *files[] = {good, second};
        int n_files = cases[c].file ? 2 : 1;
        pn_error_clear();
        ck_assert_int_lt(pn_import_text(files, n_files, out, cases[c].seq, cases[c].fraction,
                                        NULL, NULL), 0);
        const char *msg = pn_error_message();
        const char *named = cases[c].names_good ? good : cases[c].file ? second : "";
        ck_assert_msg(strstr(msg, named) && strstr(msg, cases[c].words),
                      "case %zu: message '%s' lacks '%s' or '%s'", c, msg, named,
                      cases[c].words);
        tu_list_dir(out, names, sizeof names); /* "" when never made */
        ck_assert_msg(!names[0], "case %zu: out dir holds %s", c, names);
    }
}
END_TEST

/* Reads the n samples of path (seq positions, with lengths) and checks each against
 * want[k]: its real bytes, the target of each being the next byte. */
static void check_records(const char *path, const char *const *want, int n, int seq)
{
    const pn_reader_field f[] = {{"tokens", {0, seq, true}, "x", 256, "embed", 0, false},
                                 {"targets", {0, seq, true}, "y", 256, "loss", 0, false},
                                 {"lengths", {0, 1, true}, "x", 0, "x", seq, false}};
    pn_reader_options o = {.global_batch = n, .first = 0, .count = n, .drop_last = false};
    pn_reader *r;
    ck_assert_msg(pn_reader_open(&r, path, f, 3, &o) == 0, "%s", pn_error_message());
    ck_assert_int_eq(pn_reader_samples(r), n);
    const pn_batch *b;
    ck_assert_msg(pn_reader_next(r, &b) == 0, "%s", pn_error_message());
    for (int k = 0; k < n; k++) {
        int len = (int)strlen(want[k]) - 1; /* pairs: each byte but the last */
        ck_assert_int_eq(b->ids[2][k], len);
        for (int t = 0; t < seq; t++) {
            ck_assert_int_eq(b->ids[0][k * seq + t], t < len ? (unsigned char)want[k][t] : 0);
            ck_assert_int_eq(b->ids[1][k * seq + t], t < len ? (unsigned char)want[k][t + 1] : 0);
        }
    }
    pn_reader_close(r);
}

START_TEST(records_cut_at_separators_and_file_ends)
{
    /* one.txt: "ab\n", an empty record (two separators), "hello world\n" ended by
     * the file's end; two.txt starts with a separator (another empty record) and
     * ends in "0123456789" without a newline. seq 4: "ab\n" gives 1 sample, the
     * 12 bytes of "hello world\n" 11 pairs in 3 samples, "0123456789" 9 in 3. */
    static const char one_text[] = "ab\n%\n%\nhello world\n", two_text[] = "%\n0123456789";
    char one[2 * PATH_MAX], two[2 * PATH_MAX], out[PATH_MAX + 16], path[2 * PATH_MAX];
    write_text("one.txt", one_text, strlen(one_text), one, sizeof one);
    write_text("two.txt", two_text, strlen(two_text), two, sizeof two);
    snprintf(out, sizeof out, "%s/records", dir);
    const char *files[] = {one, two};
    seen_files seen = {0};
    pn_text_records rec = {.separator = "%"};
    /* 3 records at 0.34: the last round(1.02) = 1 is test's */
    ck_assert_msg(pn_import_text_records(files, 2, out, 4, 0.34, &rec, count_files, &seen) == 0,
                  "%s", pn_error_message());
    ck_assert_int_eq(rec.records[0], 2);
    ck_assert_int_eq(rec.records[1], 1);
    ck_assert_int_eq(rec.empty, 2);
    ck_assert_int_eq(seen.samples[0], 4);
    ck_assert_int_eq(seen.samples[1], 3);
    /* each sample's bytes: its tokens and one more, the last target */
    static const char *const train[] = {"ab\n", "hello", "o wor", "rld\n"};
    static const char *const test[] = {"01234", "45678", "89"};
    snprintf(path, sizeof path, "%s/train.h5", out);
    check_records(path, train, 4, 4);
    snprintf(path, sizeof path, "%s/test.h5", out);
    check_records(path, test, 3, 4);
    hid_t file;
    char sep[16];
    long records = 0;
    ck_assert_int_eq(pn_hdf5_open_file(path, H5P_DEFAULT, &file), 0);
    ck_assert_int_eq(pn_hdf5_read_attr_string(file, path, "record_separator", sep, sizeof sep), 0);
    ck_assert_int_eq(pn_hdf5_read_attr_int(file, path, "records", &records), 0);
    ck_assert_int_eq(pn_hdf5_close(file, path), 0);
    ck_assert_str_eq(sep, "%");
    ck_assert_int_eq(records, 1);
}
END_TEST

START_TEST(records_refuse_bad_input)
{
    static const struct {
        const char *text, *sep, *words;
    } cases[] = {
        {"ab\n%\nc", "%", "bad.txt: line 3: the record that ends here holds 1 byte"},
        {"abc\n%\n%\n", "%", "bad.txt: 1 record between lines '%' (and 1 empty)"},
        {"abc\n%\ndef\n", "", "--records: expected the text of the line"},
        {"abc\n%\ndef\n", "a\nb", "the separator is one line"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char bad[2 * PATH_MAX], out[PATH_MAX + 16], names[256];
        write_text("bad.txt", cases[c].text, strlen(cases[c].text), bad, sizeof bad);
        snprintf(out, sizeof out, "%s/rec_bad%zu", dir, c);
        const char *files[] = {bad};
        pn_text_records rec = {.separator = cases[c].sep};
        pn_error_clear();
        ck_assert_int_lt(pn_import_text_records(files, 1, out, 4, 0.5, &rec, NULL, NULL), 0);
        ck_assert_msg(strstr(pn_error_message(), cases[c].words), "case %zu: '%s' lacks '%s'", c,
                      pn_error_message(), cases[c].words);
        tu_list_dir(out, names, sizeof names);
        ck_assert_msg(!names[0], "case %zu: out dir holds %s", c, names);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("import_text");
    TCase *tc = tcase_create("import");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, import_writes_windows_targets_and_attributes);
    tcase_add_test(tc, import_refuses_bad_input);
    tcase_add_test(tc, records_cut_at_separators_and_file_ends);
    tcase_add_test(tc, records_refuse_bad_input);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
