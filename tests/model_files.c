/* Reads tests/models/NAME.json for the C tests (model_files.h). Plain C, no Check:
 * the MPI tests (test_layouts) read their models through it too. */
#include "model_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_FILES = 32 };

/* The texts read so far (kept reachable: read once, freed by the exit). */
static struct {
    char name[64];
    char *text;
} files[MAX_FILES];
static int n_files;

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        if (size >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)size + 1))) {
            if (fread(text, 1, (size_t)size, f) == (size_t)size) {
                text[size] = '\0';
            } else {
                free(text);
                text = NULL;
            }
        }
    }
    fclose(f);
    return text;
}

const char *mf_text(const char *name)
{
    for (int i = 0; i < n_files; i++)
        if (!strcmp(files[i].name, name)) return files[i].text;
    if (strlen(name) >= sizeof files[0].name || n_files == MAX_FILES) {
        fprintf(stderr, "test model %s: more than %d models or a name over %zu bytes "
                        "(tests/model_files.c)\n", name, MAX_FILES, sizeof files[0].name - 1);
        exit(1);
    }
    const char *srcdir = getenv("srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/models/%s.json", srcdir && *srcdir ? srcdir : ".", name);
    char *text = read_all(path);
    if (!text) {
        fprintf(stderr, "%s: cannot read this test model (run from the build directory "
                        "or set srcdir to the source tree)\n", path);
        exit(1);
    }
    strcpy(files[n_files].name, name);
    files[n_files].text = text;
    return files[n_files++].text;
}
