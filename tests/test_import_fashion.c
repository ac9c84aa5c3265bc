/* The Fashion-MNIST importer on small IDX files this test writes: features scaled
 * to [0, 1], labels and attributes read back through the dataset reader; corrupt,
 * truncated or inconsistent input refused with the file named and nothing left in
 * the output directory. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/error.h"
#include "io/hdf5_util.h"
#include "io/import_fashion.h"
#include "io/reader.h"
#include "testutil.h"

enum { PIXELS = 784 };

static char dir[PATH_MAX];

static void setup(void) { tu_make_temp_dir(dir, sizeof dir, "import"); }

static void teardown(void) { tu_remove_tree(dir); }

static unsigned char pixel(int k, int p) { return (unsigned char)((k * 37 + p * 11) % 256); }

static int label(int k) { return (k * 3) % 10; }

/* What to spoil in a source directory. */
typedef enum spoil {
    SPOIL_NONE,
    SPOIL_TRUNCATE_GZIP,   /* train images: the gzip file cut in half */
    SPOIL_SHORT_DATA,      /* train images: one image fewer than the header says */
    SPOIL_CRC,             /* train images: gzip CRC trailer damaged */
    SPOIL_MAGIC,           /* train images: magic 0x804 */
    SPOIL_LABEL_12,        /* train labels: label 12 */
    SPOIL_COUNT_MISMATCH   /* test labels: one label fewer than images */
} spoil;

static void put_be32(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

static void write_gz(const char *path, const unsigned char *bytes, size_t n)
{
    gzFile gz = gzopen(path, "wb");
    ck_assert_ptr_nonnull(gz);
    ck_assert_int_eq(gzwrite(gz, bytes, (unsigned)n), (int)n);
    ck_assert_int_eq(gzclose(gz), Z_OK);
}

static void damage_crc(const char *path)
{
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, -8, SEEK_END);
    int c = fgetc(f);
    fseek(f, -8, SEEK_END);
    fputc(c ^ 0x5a, f);
    fclose(f);
}

/* Writes the IDX pair prefix-{images,labels} with n samples into src. */
static void write_split(const char *src, const char *prefix, int n, spoil s, bool train)
{
    char path[2 * PATH_MAX];
    unsigned char *img = malloc(16 + (size_t)n * PIXELS), lab[8 + 16];
    put_be32(img, train && s == SPOIL_MAGIC ? 0x804 : 0x803);
    put_be32(img + 4, (unsigned)n);
    put_be32(img + 8, 28), put_be32(img + 12, 28);
    for (int k = 0; k < n; k++)
        for (int p = 0; p < PIXELS; p++) img[16 + k * PIXELS + p] = pixel(k, p);
    put_be32(lab, 0x801);
    int labels = !train && s == SPOIL_COUNT_MISMATCH ? n - 1 : n;
    put_be32(lab + 4, (unsigned)labels);
    for (int k = 0; k < labels; k++) lab[8 + k] = (unsigned char)label(k);
    if (train && s == SPOIL_LABEL_12) lab[8 + 2] = 12;
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte.gz", src, prefix);
    write_gz(path, img, 16 + (size_t)(train && s == SPOIL_SHORT_DATA ? n - 1 : n) * PIXELS);
    if (train && s == SPOIL_TRUNCATE_GZIP) {
        struct stat st;
        stat(path, &st);
        ck_assert_int_eq(truncate(path, st.st_size / 2), 0);
    }
    if (train && s == SPOIL_CRC) damage_crc(path);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte.gz", src, prefix);
    write_gz(path, lab, 8 + (size_t)labels);
    free(img);
}

static void make_source(const char *src, spoil s)
{
    ck_assert_int_eq(mkdir(src, 0777), 0);
    write_split(src, "train", 5, s, true);
    write_split(src, "t10k", 3, s, false);
}

typedef struct seen_files {
    int calls;
    long samples[2];
} seen_files;

static void count_files(const char *path, long samples, void *ctx)
{
    seen_files *seen = ctx;
    ck_assert_ptr_nonnull(strstr(path, seen->calls == 0 ? "train.h5" : "test.h5"));
    seen->samples[seen->calls++ % 2] = samples;
}

/* Reads all n samples of an imported file and checks pixels, labels and attributes. */
static void check_imported(const char *path, int n)
{
    const pn_reader_field f[] = {{"features", {PIXELS, 1, false}, "x", 0, NULL, 0, false},
                                 {"labels", {0, 1, true}, "y", 0, NULL, 0, false}};
    pn_reader_options o = {.global_batch = n, .first = 0, .count = n, .drop_last = false};
    pn_reader *r;
    ck_assert_msg(pn_reader_open(&r, path, f, 2, &o) == 0, "%s", pn_error_message());
    ck_assert_int_eq(pn_reader_samples(r), n);
    const pn_batch *b;
    ck_assert_msg(pn_reader_next(r, &b) == 0, "%s", pn_error_message());
    ck_assert_int_eq(b->rows, n);
    for (int k = 0; k < n; k++) {
        ck_assert_int_eq(b->ids[1][k], label(k));
        for (int p = 0; p < PIXELS; p++) {
            float v = b->values[0][k * PIXELS + p];
            ck_assert_float_eq(v, pixel(k, p) / 255.0f);
            ck_assert(v >= 0.0f && v <= 1.0f);
        }
    }
    pn_reader_close(r);
    hid_t file;
    char source[1024];
    long classes = 0;
    ck_assert_int_eq(pn_hdf5_open_file(path, H5P_DEFAULT, &file), 0);
    ck_assert_int_eq(pn_hdf5_read_attr_string(file, path, "source", source, sizeof source), 0);
    ck_assert_int_eq(pn_hdf5_read_attr_int(file, path, "num_classes", &classes), 0);
    ck_assert_int_eq(pn_hdf5_read_attr_int(file, path, "no_such", &classes), PN_ERR_INVALID);
    ck_assert_int_eq(pn_hdf5_close(file, path), 0);
    ck_assert_int_eq(classes, 10);
    ck_assert_ptr_nonnull(strstr(source, "Fashion-MNIST IDX from "));
    ck_assert_ptr_nonnull(strstr(source, n == 5 ? "/train-images-idx3-ubyte.gz" : "/t10k-"));
}

START_TEST(import_writes_scaled_features_labels_and_attributes)
{
    char src[PATH_MAX + 16], out[PATH_MAX + 16], path[2 * PATH_MAX], names[256];
    snprintf(src, sizeof src, "%s/src_ok", dir);
    snprintf(out, sizeof out, "%s/out/nested", dir);
    make_source(src, SPOIL_NONE);
    seen_files seen = {0};
    ck_assert_msg(pn_import_fashion_mnist(src, out, count_files, &seen) == 0, "%s",
                  pn_error_message());
    ck_assert_int_eq(seen.calls, 2);
    ck_assert_int_eq(seen.samples[0], 5);
    ck_assert_int_eq(seen.samples[1], 3);
    snprintf(path, sizeof path, "%s/train.h5", out);
    check_imported(path, 5);
    snprintf(path, sizeof path, "%s/test.h5", out);
    check_imported(path, 3);
    ck_assert_int_eq(tu_list_dir(out, names, sizeof names), 0);
    ck_assert_msg(!strcmp(names, "train.h5\ntest.h5\n") || !strcmp(names, "test.h5\ntrain.h5\n"),
                  "out dir holds: %s", names);
}
END_TEST

START_TEST(import_refuses_corrupt_input)
{
    static const struct {
        spoil s;
        const char *file, *words;
    } cases[] = {
        {SPOIL_TRUNCATE_GZIP, "train-images-idx3-ubyte.gz", "truncated"},
        {SPOIL_SHORT_DATA, "train-images-idx3-ubyte.gz",
         "truncated: the header announces 5 images of 28x28 but the data ends early"},
        {SPOIL_CRC, "train-images-idx3-ubyte.gz", "corrupt gzip data (incorrect data check)"},
        {SPOIL_MAGIC, "train-images-idx3-ubyte.gz", "bad magic 0x00000804, expected 0x00000803"},
        {SPOIL_LABEL_12, "train-labels-idx1-ubyte.gz", "label 12 of sample 2 is outside 0..9"},
        {SPOIL_COUNT_MISMATCH, "t10k-labels-idx1-ubyte.gz", "holds 3 images but"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char src[PATH_MAX + 16], out[PATH_MAX + 16], file[2 * PATH_MAX], names[256];
        snprintf(src, sizeof src, "%s/src_bad%zu", dir, c);
        snprintf(out, sizeof out, "%s/out_bad%zu", dir, c);
        make_source(src, cases[c].s);
        snprintf(file, sizeof file, "%s/%s", src, cases[c].file);
        pn_error_clear();
        ck_assert_int_lt(pn_import_fashion_mnist(src, out, NULL, NULL), 0);
        const char *msg = pn_error_message();
        ck_assert_msg(strstr(msg, file) && strstr(msg, cases[c].words),
                      "case %zu: message '%s' lacks '%s' or '%s'", c, msg, file, cases[c].words);
        ck_assert_int_eq(tu_list_dir(out, names, sizeof names), 0);
        ck_assert_msg(!strstr(names, ".tmp"), "case %zu left %s", c, names);
        ck_assert_msg(cases[c].s == SPOIL_COUNT_MISMATCH ? !strcmp(names, "train.h5\n")
                                                         : !names[0],
                      "case %zu: out dir holds %s", c, names);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("import_fashion");
    TCase *tc = tcase_create("import");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, import_writes_scaled_features_labels_and_attributes);
    tcase_add_test(tc, import_refuses_corrupt_input);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
