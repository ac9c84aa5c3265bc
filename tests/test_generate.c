/* Generation through pipenet.h on a tiny byte-level GPT (window 8, 2 blocks, random
 * values large enough to give peaked distributions) written as a model file, and on
 * tiny lstm and gru models: the cached step network and the full-window recompute
 * give the same tokens and logits within 1e-5 across several window cuts, for
 * sampling and beam search; a seed fixes the text, greedy ignores it, beam 1 is
 * greedy, a beam's continuation replays to its score and (on the GPT) scores at
 * least greedy's; misuse, and a reverse lstm, are refused with a message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_file.h"
#include "net/graph.h"
#include "net/network.h"
#include "pipenet.h"
#include "model_files.h"
#include "testutil.h"

#define TINY_GPT mf_text("tiny_gpt_window8")

/* The other per-row types (act, concat) and attention without positions. */
#define MIXED mf_text("mixed_attention_concat")

/* The recurrent layers carry their state from step to step (window 8). */
#define TINY_LSTM mf_text("tiny_lstm_lm")
#define TINY_GRU mf_text("tiny_gru_lm")

/* A reverse lstm reads positions generation has not made yet: refused when stepped. */
#define REVERSE_LSTM mf_text("reverse_lstm_lm")

/* Floats in, not byte ids: refused. */
#define MLP mf_text("float_input_logits")

/* Ids of another vocabulary: refused. */
#define WORDS mf_text("word_ids_vocab300")

static char dir[512], path[600];
static const unsigned char PROMPT[] = "the cat";
enum { PROMPT_LEN = 7, N = 30 };

/* Writes json's parameters with uniform values in +-0.6 (seeded) to path as a model. */
static void write_model(const char *json, const char *file)
{
    pn_graph *g = tu_graph_of(json);
    pn_network_options o = {.device = pn_device_host(), .forward_only = true};
    pn_params *params;
    pn_network *net;
    ck_assert_int_eq(pn_network_build(g, &o, &params, &net), 0);
    pn_train_state *st;
    ck_assert_int_eq(pn_train_state_create(&st, PN_FORMAT_MODEL), 0);
    ck_assert_int_eq(pn_train_state_set_config(st, json), 0);
    pn_rng rng;
    pn_rng_init(&rng, 5, 0);
    for (int k = 0; k < pn_params_count(params); k++) {
        const pn_param *p = pn_params_get(params, k);
        pn_matrix v = pn_params_value(params, k);
        tu_fill_uniform(&v, &rng, 0.6f);
        ck_assert_int_eq(pn_train_state_add(st, p->name, v.rows, v.cols, v.data, NULL), 0);
    }
    int rc = pn_snapshot_write(file, st, NULL);
    ck_assert_msg(rc == 0, "%s", pn_error_message());
    pn_train_state_free(st);
    pn_network_free(net);
    pn_params_free(params);
    pn_graph_free(g);
}

static pn_model *load(void)
{
    pn_model *m;
    int rc = pn_model_load(&m, path);
    ck_assert_msg(rc == 0, "%s", pn_model_error());
    return m;
}

static void setup(void)
{
    tu_make_temp_dir(dir, sizeof dir, "generate");
    snprintf(path, sizeof path, "%s/gpt.h5", dir);
    write_model(TINY_GPT, path);
}

static void teardown(void) { tu_remove_tree(dir); }

/* Model k of the loop tests: 0 the GPT (written by setup), then the others into dir. */
static void use_model(int k)
{
    const char *const jsons[] = {NULL, MIXED, TINY_LSTM, TINY_GRU};
    static const char *const names[] = {"gpt", "mixed", "lstm", "gru"};
    snprintf(path, sizeof path, "%s/%s.h5", dir, names[k]);
    if (k > 0) write_model(jsons[k], path);
}

static double generate(pn_model *m, pn_gen_options o, unsigned char *out)
{
    double lp;
    int rc = pn_model_generate(m, PROMPT, PROMPT_LEN, N, &o, out, &lp);
    ck_assert_msg(rc == 0, "%s", pn_model_error());
    return lp;
}

START_TEST(test_window)
{
    pn_model *m = load();
    ck_assert_int_eq(pn_model_gen_window(m), 8);
    pn_model_free(m);
}
END_TEST

/* Token by token, the cached step and the full recompute: same logits, same draws,
 * across the cuts of a window of 8 (N = 30 tokens after a prompt of 7); on a model of
 * the other per-row types, window 6; and on an lstm and a gru model, whose stepped
 * state starts again at every cut as the recompute of the cut window does. */
START_TEST(test_cached_matches_recompute)
{
    use_model(_i);
    pn_model *a = load(), *b = load();
    pn_gen_options cached = {.temperature = 1.0, .seed = 3}, full = cached;
    full.no_cache = 1;
    ck_assert_int_eq(pn_model_gen_start(a, PROMPT, PROMPT_LEN, &cached), 0);
    ck_assert_int_eq(pn_model_gen_start(b, PROMPT, PROMPT_LEN, &full), 0);
    double worst = 0.0;
    for (int s = 0; s < N; s++) {
        float la[256], lb[256];
        ck_assert_msg(pn_model_gen_logits(a, la) == 0, "%s", pn_model_error());
        ck_assert_msg(pn_model_gen_logits(b, lb) == 0, "%s", pn_model_error());
        for (int j = 0; j < 256; j++) {
            double d = fabs((double)la[j] - lb[j]) / fmax(1.0, fabs((double)lb[j]));
            if (d > worst) worst = d;
            ck_assert_msg(d < 1e-5, "token %d, logit %d: %g cached, %g recomputed", s, j, la[j],
                          lb[j]);
        }
        int ta, tb;
        ck_assert_int_eq(pn_model_gen_next(a, &ta, NULL), 0);
        ck_assert_int_eq(pn_model_gen_next(b, &tb, NULL), 0);
        ck_assert_int_eq(ta, tb);
    }
    printf("%s: cached vs recomputed logits over %d tokens: largest relative difference %.2g\n",
           path + strlen(dir) + 1, N, worst);
    pn_model_free(a);
    pn_model_free(b);
}
END_TEST

START_TEST(test_seeds)
{
    pn_model *m = load();
    unsigned char x[N], y[N], z[N], g1[N], g2[N];
    generate(m, (pn_gen_options){.temperature = 1.0, .seed = 1}, x);
    generate(m, (pn_gen_options){.temperature = 1.0, .seed = 1}, y);
    generate(m, (pn_gen_options){.temperature = 1.0, .seed = 2}, z);
    ck_assert_mem_eq(x, y, N);
    ck_assert_msg(memcmp(x, z, N) != 0, "seeds 1 and 2 drew the same %d bytes", N);
    double l1 = generate(m, (pn_gen_options){.temperature = 0.0, .seed = 1}, g1);
    double l2 = generate(m, (pn_gen_options){.temperature = 0.0, .seed = 9, .top_k = 5}, g2);
    ck_assert_mem_eq(g1, g2, N);
    ck_assert(l1 == l2);
    /* top-k 1 is greedy too, at any temperature */
    generate(m, (pn_gen_options){.temperature = 2.0, .seed = 4, .top_k = 1}, g2);
    ck_assert_mem_eq(g1, g2, N);
    pn_model_free(m);
}
END_TEST

/* The sum of log-probabilities of out after PROMPT, replayed byte by byte. */
static double replay(pn_model *m, const unsigned char *out)
{
    pn_gen_options o = {.no_cache = 1};
    ck_assert_int_eq(pn_model_gen_start(m, PROMPT, PROMPT_LEN, &o), 0);
    double sum = 0.0;
    for (int s = 0; s < N; s++) {
        float z[256];
        ck_assert_int_eq(pn_model_gen_logits(m, z), 0);
        double max = z[0], e = 0.0;
        for (int j = 1; j < 256; j++) max = fmax(max, z[j]);
        for (int j = 0; j < 256; j++) e += exp(z[j] - max);
        sum += z[out[s]] - max - log(e);
        ck_assert_int_eq(pn_model_gen_append(m, out[s]), 0);
    }
    return sum;
}

START_TEST(test_beam)
{
    use_model(_i);
    pn_model *m = load();
    unsigned char greedy[N], b1[N], b4[N], b4full[N];
    double lg = generate(m, (pn_gen_options){0}, greedy);
    double l1 = generate(m, (pn_gen_options){.beam = 1}, b1);
    ck_assert_mem_eq(greedy, b1, N);
    ck_assert_msg(fabs(l1 - lg) < 1e-9, "beam 1 %.9f, greedy %.9f", l1, lg);
    double l4 = generate(m, (pn_gen_options){.beam = 4, .seed = 8, .temperature = 3}, b4);
    double l4full = generate(m, (pn_gen_options){.beam = 4, .no_cache = 1}, b4full);
    ck_assert_mem_eq(b4, b4full, N);
    ck_assert_msg(fabs(l4 - l4full) < 1e-6 * fabs(l4), "%.9f cached, %.9f recomputed", l4,
                  l4full);
    /* a beam need not beat greedy (a prefix it drops may lead to the best); on the GPT
     * it does, which a beam that kept the wrong hypotheses would likely not */
    if (_i == 0) ck_assert_msg(l4 >= lg - 1e-9, "beam 4 %.6f below greedy %.6f", l4, lg);
    double r = replay(m, b4);
    ck_assert_msg(fabs(r - l4) < 1e-4, "beam 4 says %.6f, its bytes replay to %.6f", l4, r);
    ck_assert_msg(fabs(replay(m, greedy) - lg) < 1e-4, "greedy does not replay to its score");
    printf("%s: log-prob of %d bytes: greedy %.4f, beam 4 %.4f\n", path + strlen(dir) + 1, N,
           lg, l4);
    pn_model_free(m);
}
END_TEST

/* A prompt longer than the window keeps its last 8 bytes. */
START_TEST(test_long_prompt)
{
    pn_model *m = load();
    const unsigned char longer[] = "xxxxxxxxxxxxthe cat";
    unsigned char a[N], b[N];
    pn_gen_options o = {.temperature = 1.0, .seed = 6};
    ck_assert_int_eq(pn_model_generate(m, longer, 19, N, &o, a, NULL), 0);
    ck_assert_int_eq(pn_model_generate(m, longer + 11, 8, N, &o, b, NULL), 0);
    ck_assert_mem_eq(a, b, N);
    pn_model_free(m);
}
END_TEST

static void expect_error(int rc, const char *part)
{
    ck_assert_int_lt(rc, 0);
    ck_assert_msg(strstr(pn_model_error(), part), "'%s' not in '%s'", part, pn_model_error());
}

START_TEST(test_refusals)
{
    char other[700];
    const char *const jsons[] = {MLP, WORDS};
    const char *const why[] = {"which holds floats", "not bytes"};
    for (int i = 0; i < 2; i++) {
        snprintf(other, sizeof other, "%s/other%d.h5", dir, i);
        write_model(jsons[i], other);
        pn_model *m;
        ck_assert_int_eq(pn_model_load(&m, other), 0);
        ck_assert_int_eq(pn_model_gen_window(m), -1);
        ck_assert_msg(strstr(pn_model_error(), "not a byte-level language model") &&
                          strstr(pn_model_error(), why[i]) && strstr(pn_model_error(), other),
                      "%s", pn_model_error());
        expect_error(pn_model_gen_start(m, PROMPT, PROMPT_LEN, NULL), "not a byte-level");
        pn_model_free(m);
    }
    snprintf(other, sizeof other, "%s/reverse.h5", dir);
    write_model(REVERSE_LSTM, other);
    pn_model *m;
    ck_assert_int_eq(pn_model_load(&m, other), 0);
    unsigned char out[N];
    float z[256];
    ck_assert_int_eq(pn_model_gen_start(m, PROMPT, PROMPT_LEN, NULL), 0);
    expect_error(pn_model_gen_logits(m, z), "layer 'back' step at position 0: lstm with "
                                            "\"reverse\": true cannot generate");
    expect_error(pn_model_generate(m, PROMPT, PROMPT_LEN, 3, &(pn_gen_options){.beam = 2}, out,
                                   NULL),
                 "layer 'back' step at position 0: lstm with \"reverse\"");
    pn_model_free(m);
    m = load();
    int tok;
    expect_error(pn_model_gen_next(m, &tok, NULL), "no generation started");
    expect_error(pn_model_gen_start(m, PROMPT, 0, NULL), "the prompt is empty");
    expect_error(pn_model_gen_start(m, PROMPT, 3, &(pn_gen_options){.top_k = 300}), "top_k");
    expect_error(pn_model_gen_start(m, PROMPT, 3, &(pn_gen_options){.temperature = -1}),
                 "temperature");
    ck_assert_int_eq(pn_model_gen_start(m, PROMPT, 3, &(pn_gen_options){.beam = 2}), 0);
    expect_error(pn_model_gen_next(m, &tok, NULL), "beam search");
    expect_error(pn_model_generate(m, PROMPT, 3, -1, NULL, out, NULL), "negative");
    ck_assert_int_eq(pn_model_gen_start(m, PROMPT, 3, NULL), 0);
    expect_error(pn_model_gen_append(m, 256), "outside 0..255");
    pn_model_free(m);
}
END_TEST

static Suite *generate_suite(void)
{
    Suite *s = suite_create("generate");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_window);
    tcase_add_loop_test(tc, test_cached_matches_recompute, 0, 4);
    tcase_add_test(tc, test_seeds);
    tcase_add_loop_test(tc, test_beam, 0, 4);
    tcase_add_test(tc, test_long_prompt);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(generate_suite()); }
