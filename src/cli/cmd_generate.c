/* `pipenet generate MODEL.h5 --prompt TEXT --tokens N`: continues a text with a
 * byte-level language model (a model file or snapshot of, e.g., models/char_gpt.json)
 * through the C API (pipenet.h): sampling (temperature, top-k, seed) or beam search.
 * The continuation goes to stdout as raw bytes, timing and its log-probability to
 * stderr. Runs in one process, on the host or one GPU (--device). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "cli/commands.h"
#include "cli/generate_staged.h"
#include "cli/options.h"
#include "math/device.h"
#include "model/model.h"
#include "pipenet.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pipenet generate MODEL.h5 --prompt TEXT --tokens N [options]\n"
            "\n"
            "Continues TEXT with N bytes from MODEL.h5, a byte-level language model (one\n"
            "input of byte ids, vocab 256, and 256 logits per position, such as\n"
            "models/char_gpt.json trained on `pipenet import text` data), and prints them\n"
            "to stdout. A prompt longer than the model's window T keeps its last T bytes;\n"
            "when the window is full, it is cut to its newest T/2 bytes and generation\n"
            "goes on. stderr gets the time taken and the continuation's log-probability.\n"
            "MODEL.h5 may also be a snapshot directory: its newest snapshot that verifies.\n"
            "Under mpirun (or srun) the model is split into P pipeline stages as training\n"
            "splits it, one rank each: a rank reads only its stage's parameters, each\n"
            "position's values go through the stages, and every rank chooses the same\n"
            "bytes as one process (--no-cache is one process only); rank 0 prints.\n"
            "\n"
            "options:\n"
            "  --prompt TEXT      the text to continue (at least one byte; required)\n"
            "  --tokens N         bytes to generate, >= 1 (required)\n"
            "  --temperature X    0: always the most likely byte; else sample from\n"
            "                     softmax(logits / X)                           [1]\n"
            "  --top-k K          sample among the K most likely bytes, 1..256   [all]\n"
            "  --seed S           the same seed gives the same text              [1]\n"
            "  --beam B           beam search of width B (1..256) instead of sampling:\n"
            "                     the continuation of the largest log-probability found;\n"
            "                     ignores --temperature, --top-k and --seed\n"
            "  --no-cache         recompute the whole window for every byte instead of\n"
            "                     one position over the attention key/value cache (the\n"
            "                     same bytes, slower: a reference)\n"
            "  --device D         where the model runs (cuda: the first GPU)      [%s]\n",
            pn_device_request_name(PN_DEVICE_REQUEST_CPU));
    pn_choice_help(out, &pn_device_requests, 21);
    fprintf(out,
            "  -h, --help         this text\n"
            "\n"
            "exit status: 0 done, 1 the model could not be loaded or is not a byte-level\n"
            "language model, 2 a wrong command line\n");
}

enum { OPT_PROMPT = 256, OPT_TOKENS, OPT_TEMPERATURE, OPT_TOP_K, OPT_SEED, OPT_BEAM,
       OPT_NO_CACHE, OPT_DEVICE };

static const struct option longopts[] = {
    {"prompt", required_argument, NULL, OPT_PROMPT},
    {"tokens", required_argument, NULL, OPT_TOKENS},
    {"temperature", required_argument, NULL, OPT_TEMPERATURE},
    {"top-k", required_argument, NULL, OPT_TOP_K},
    {"seed", required_argument, NULL, OPT_SEED},
    {"beam", required_argument, NULL, OPT_BEAM},
    {"no-cache", no_argument, NULL, OPT_NO_CACHE},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct generate_options {
    const char *model, *prompt;
    int tokens;
    int device; /* pn_device_request */
    pn_gen_options gen;
} generate_options;

/* Parses argv; returns 0, 1 for --help, -1 on misuse (already reported). */
static int parse_options(int argc, char **argv, generate_options *o)
{
    int c, rc = 0;
    uint64_t seed;
    optind = 1;
    while (rc == 0 && (c = pn_opt_next(argc, argv, longopts)) != -1) {
        switch (c) {
        case OPT_PROMPT: o->prompt = optarg; break;
        case OPT_TOKENS: rc = pn_opt_int("tokens", optarg, 1, 1 << 30, &o->tokens); break;
        case OPT_TEMPERATURE:
            rc = pn_opt_double("temperature", optarg, 0.0, 1e6, &o->gen.temperature);
            break;
        case OPT_TOP_K: rc = pn_opt_int("top-k", optarg, 1, 256, &o->gen.top_k); break;
        case OPT_BEAM: rc = pn_opt_int("beam", optarg, 1, 256, &o->gen.beam); break;
        case OPT_SEED:
            rc = pn_opt_u64("seed", optarg, &seed);
            o->gen.seed = seed;
            break;
        case OPT_NO_CACHE: o->gen.no_cache = 1; break;
        case OPT_DEVICE:
            rc = pn_opt_choice("device", &pn_device_requests, optarg, &o->device);
            break;
        case 'h': return 1;
        default: return -1; /* pn_opt_next said why */
        }
    }
    if (rc < 0) return rc;
    const char *missing = optind != argc - 1 ? NULL
                          : !o->prompt       ? "--prompt TEXT"
                          : !o->prompt[0]    ? "a --prompt of at least one byte"
                          : !o->tokens       ? "--tokens N"
                                             : NULL;
    if (optind != argc - 1 || missing) {
        if (optind != argc - 1)
            pn_opt_report("generate takes exactly one MODEL.h5 (got %d)\n", argc - optind);
        else
            pn_opt_report("generate needs %s\n", missing);
        usage(stderr);
        return -1;
    }
    o->model = argv[optind];
    return 0;
}

/* Generates from m, whole or one stage's part (every rank of a split model runs this
 * alike); print: this process writes the text and the summary line. */
static int run_generation(void *ctx, pn_model *m, bool print)
{
    const generate_options *o = ctx;
    int window = pn_model_gen_window(m), rc = window < 0 ? -1 : 0;
    int len = (int)strnlen(o->prompt, 1 << 30);
    if (rc == 0 && len > window && print)
        fprintf(stderr, "pipenet: note: the prompt has %d bytes, more than the model's window "
                        "of %d: generating from its last %d\n", len, window, window);
    unsigned char *out = rc == 0 ? malloc((size_t)o->tokens) : NULL;
    if (rc == 0 && !out)
        rc = pn_error_set(PN_ERR_NOMEM, "out of memory for %d tokens", o->tokens);
    double logprob = 0.0, t0 = pn_now();
    if (rc == 0)
        rc = pn_model_generate(m, (const unsigned char *)o->prompt, len, o->tokens, &o->gen, out,
                               &logprob);
    double seconds = pn_now() - t0;
    if (rc == 0 && print) {
        fwrite(out, 1, (size_t)o->tokens, stdout);
        /* under mpirun stdout is the launcher's pseudo-terminal, whatever the user's is:
         * the bytes alone, as to a file */
        if (isatty(fileno(stdout)) && pn_cli_launcher_ranks() == 1) fputc('\n', stdout);
        fflush(stdout);
        const char *dev = pn_model_device(m);
        bool gpu = pn_model_device_of(m).kind != PN_DEVICE_HOST;
        fprintf(stderr, "generated %d tokens in %.3f s (%.1f tokens/s, %s, %s%s%s), log-prob "
                        "%.4f (%.4f per token)\n", o->tokens, seconds,
                seconds > 0 ? o->tokens / seconds : 0.0,
                o->gen.no_cache ? "no cache" : "cached",
                o->gen.beam > 0 ? "beam search" : o->gen.temperature == 0.0 ? "greedy"
                                                                             : "sampled",
                gpu ? ", device " : "", gpu ? dev : "",
                logprob, logprob / o->tokens);
    }
    free(out);
    return rc;
}

static int generate(const generate_options *o)
{
    pn_model *m;
    if (pn_model_load_on(&m, o->model, pn_device_request_name((pn_device_request)o->device)) < 0)
        return -1;
    int rc = run_generation((void *)o, m, true);
    pn_model_free(m);
    return rc;
}

int pn_cmd_generate(int argc, char **argv)
{
    generate_options o = {.gen = {.temperature = 1.0, .seed = 1}};
    int parsed = parse_options(argc, argv, &o);
    if (parsed > 0) {
        usage(stdout);
        return 0;
    }
    if (parsed < 0) return PN_EXIT_USAGE;
    if (pn_cli_launcher_ranks() > 1) /* across stages, one rank each */
        return generate_staged(o.model, o.device, run_generation, &o);
    if (generate(&o) < 0) return pn_cli_fail(pn_model_error());
    return 0;
}
