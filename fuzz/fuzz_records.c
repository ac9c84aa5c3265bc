/* Fuzz target: text files as `pipenet import text --records` reads them. The input
 * chooses the separator, --seq, the eval fraction, one to three files and their
 * bytes (a prefix of separators and records, then raw bytes), which are written to
 * /dev/shm; the importer writes its two files beside them. A refusal must say why;
 * what it writes must pass the dataset reader as a model with lengths reads it
 * (ids below 256, every length in [1, seq]), holding the samples it reported. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "fuzz_util.h"
#include "io/import_text.h"
#include "io/reader.h"

enum { MAX_FILES = 3 };

static void count_samples(const char *path, long samples, void *ctx)
{
    long *seen = ctx;
    seen[strstr(path, "/test.h5") ? 1 : 0] = samples;
}

/* Reads all of split (samples of seq positions with lengths); aborts if the reader
 * refuses what the importer wrote. */
static void read_back(const char *dir, const char *split, long samples, int seq)
{
    char path[320];
    snprintf(path, sizeof path, "%s/%s", dir, split);
    const pn_reader_field f[] = {{"tokens", {0, seq, true}, "x", 256, "embed", 0, false},
                                 {"targets", {0, seq, true}, "y", 256, "loss", 0, false},
                                 {"lengths", {0, 1, true}, "x", 0, "x", seq, false}};
    pn_reader_options o = {.global_batch = (int)samples, .count = (int)samples};
    pn_reader *r = NULL;
    const pn_batch *b;
    if (pn_reader_open(&r, path, f, 3, &o) < 0 || pn_reader_samples(r) != samples ||
        pn_reader_next(r, &b) < 0) {
        fprintf(stderr, "the importer wrote %s (%ld samples of %d), which the reader refuses: "
                        "%s\n", path, samples, seq, pn_error_message());
        abort();
    }
    pn_reader_close(r);
    remove(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long seqs[] = {4, 1, 2, 16, 0, -1};
    static const long percents[] = {50, 10, 90, 1, 0, 100};
    static const char *const prefixes[] = {"one\n%\ntwo three\n%\n", "", "%\n%\nx\n",
                                           "a%\n%%\n%\r\n", "%"};
    fz_in in = {data, size};
    fz_hdf5_quiet();
    char sep[64] = "%";
    unsigned form = fz_below(&in, 4);
    if (form == 1) sep[0] = '\0';
    if (form == 2) snprintf(sep, sizeof sep, "a\nb");
    if (form == 3) fz_text(&in, sep, sizeof sep);
    int seq = (int)FZ_PICK(&in, seqs);
    double fraction = (double)FZ_PICK(&in, percents) / 100.0;
    int n_files = 1 + (int)fz_below(&in, MAX_FILES);

    char names[MAX_FILES][256], out[256];
    const char *files[MAX_FILES];
    for (int i = 0; i < n_files; i++) {
        char tag[32];
        snprintf(tag, sizeof tag, "records%d.txt", i);
        files[i] = fz_scratch(tag, names[i], sizeof names[i]);
        FILE *f = fopen(names[i], "wb");
        if (!f) return 0;
        fputs(prefixes[fz_below(&in, sizeof prefixes / sizeof *prefixes)], f);
        for (unsigned n = i == n_files - 1 ? (unsigned)in.n : fz_byte(&in); n > 0; n--)
            fputc((int)fz_byte(&in), f);
        fclose(f);
    }
    fz_scratch("records.out", out, sizeof out);

    pn_text_records rec = {.separator = sep};
    long samples[2] = {0, 0};
    pn_error_clear();
    int rc = pn_import_text_records(files, n_files, out, seq, fraction, &rec, count_samples,
                                    samples);
    fz_check_status(rc, "import text --records");
    fz_check_hdf5_closed("import text --records");
    if (rc == 0) {
        if (rec.records[0] < 1 || rec.records[1] < 1 || samples[0] < rec.records[0] ||
            samples[1] < rec.records[1]) {
            fprintf(stderr, "records %ld + %ld gave %ld + %ld samples\n", rec.records[0],
                    rec.records[1], samples[0], samples[1]);
            abort();
        }
        read_back(out, "train.h5", samples[0], seq);
        read_back(out, "test.h5", samples[1], seq);
    }
    rmdir(out);
    for (int i = 0; i < n_files; i++) remove(names[i]);
    return 0;
}
