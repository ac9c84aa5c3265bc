/* A main for a fuzz target built without libFuzzer: runs the target once on the
 * empty input, then on every file named (a directory: every file in it). `make
 * check` builds each target this way against libpipenet.a and replays its seeds,
 * so the targets compile and their seeds pass in every build. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            uint8_t *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", path);
        return 1;
    }
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int failed = 0, runs = 1;
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *dir = opendir(argv[i]);
            for (struct dirent *e; dir && (e = readdir(dir));) {
                char path[4096];
                snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
                if (e->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
                failed |= run_file(path);
                runs++;
            }
            if (dir) closedir(dir);
        } else {
            failed |= run_file(argv[i]);
            runs++;
        }
    }
    printf("%s: %d inputs replayed\n", argv[0], runs);
    return failed;
}
