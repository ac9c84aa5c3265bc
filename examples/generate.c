/* generate: continues a text with a pipenet byte-level language model (e.g.
 * models/char_gpt.json, trained and exported), using only pipenet.h. Streams each
 * byte as it is chosen (pn_model_gen_start, then pn_model_gen_next per byte) and
 * ends with the continuation's log-probability on stderr.
 * Build:  mpicc generate.c $(pkg-config --cflags --libs pipenet)
 * usage: generate MODEL.h5 PROMPT [N [TEMPERATURE [SEED]]]   (N = 100, 0.8, 1) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pipenet.h>

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 6) {
        fprintf(stderr, "usage: %s MODEL.h5 PROMPT [N [TEMPERATURE [SEED]]]\n", argv[0]);
        return 2;
    }
    int n = argc > 3 ? atoi(argv[3]) : 100;
    pn_gen_options o = {.temperature = argc > 4 ? atof(argv[4]) : 0.8,
                        .seed = argc > 5 ? strtoull(argv[5], NULL, 10) : 1};
    pn_model *model;
    if (pn_model_load(&model, argv[1]) != 0) {
        fprintf(stderr, "generate: %s\n", pn_model_error());
        return 1;
    }
    int window = pn_model_gen_window(model), len = (int)strlen(argv[2]);
    if (window < 0 || pn_model_gen_start(model, (const unsigned char *)argv[2], len, &o) != 0) {
        fprintf(stderr, "generate: %s\n", pn_model_error());
        pn_model_free(model);
        return 1;
    }
    if (len > window)
        fprintf(stderr, "generate: the prompt has %d bytes; the model reads the last %d\n", len,
                window);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        int byte;
        double logprob;
        if (pn_model_gen_next(model, &byte, &logprob) != 0) {
            fprintf(stderr, "generate: %s\n", pn_model_error());
            pn_model_free(model);
            return 1;
        }
        putchar(byte);
        fflush(stdout);
        sum += logprob;
    }
    fprintf(stderr, "\n%d bytes, log-probability %.4f\n", n, sum);
    pn_model_free(model);
    return 0;
}
