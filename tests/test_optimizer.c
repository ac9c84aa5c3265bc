/* The optimizer: every rule against updates computed here in double precision for
 * three steps on a two-parameter arena (one decayed, one not), gradients zeroed by
 * the step, grad_scale and clipping factors, learning-rate schedules at chosen steps,
 * the JSON reader and its error messages, and no allocation in the update. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "layers/params.h"
#include "math/ops.h"
#include "optim/optimizer.h"
#include "optimizer_ref.h"
#include "testutil.h"

/* fc/w (5 x 7 = 35 floats: two full kernel blocks and a tail) decays; fc/b does not. */
enum { N_PARAMS = 2, MAX_ELEMS = 40, STEPS = 3 };
static const char *const pnames[N_PARAMS] = {"fc/w", "fc/b"};
static const int pshapes[N_PARAMS][2] = {{5, 7}, {1, 5}};
static const bool pdecay[N_PARAMS] = {true, false};

/* Reference state of one parameter, in double. */
typedef struct ref_param {
    int n;
    double w[MAX_ELEMS], s1[MAX_ELEMS], s2[MAX_ELEMS];
} ref_param;

static double init_value(int p, int k) { return 0.3 * sin(1.7 * k + 0.9 * p + 0.4); }

/* Gradient of element k of parameter p at step s: varied signs and sizes. */
static double grad_value(int p, int k, long s)
{
    return 0.2 * cos(0.8 * k + 1.3 * p + 2.1 * (double)s) + 0.01 * (double)(s + 1);
}

static pn_params *make_arena(ref_param *ref)
{
    pn_params *p;
    ck_assert_int_eq(pn_params_create(&p, pn_device_host()), 0);
    for (int i = 0; i < N_PARAMS; i++) {
        int index;
        ck_assert_int_eq(pn_params_declare(p, pnames[i], pshapes[i][0], pshapes[i][1],
                                           (pn_init){PN_INIT_ZEROS, 0}, pdecay[i], &index),
                         0);
        ck_assert_int_eq(index, i);
    }
    ck_assert_int_eq(pn_params_finalize(p), 0);
    for (int i = 0; i < N_PARAMS; i++) {
        pn_matrix w = pn_params_value(p, i);
        ref[i] = (ref_param){.n = (int)pn_matrix_count(w)};
        for (int k = 0; k < ref[i].n; k++) {
            w.data[k] = (float)init_value(i, k);
            ref[i].w[k] = w.data[k];
        }
    }
    return p;
}

static void assert_near(const float *got, const double *want, int n, const char *what,
                        const char *param, long step)
{
    for (int k = 0; k < n; k++)
        ck_assert_msg(tu_close(got[k], want[k], 2e-5, 1e-7),
                      "%s of %s [%d] after step %ld: got %.9g, want %.9g", what, param, k,
                      step, (double)got[k], want[k]);
}

/* Runs STEPS updates of cfg with grad_scale and checks values, slots and gradients
 * against the reference after each. */
static void check_rule(const pn_optimizer_config *cfg, double scale)
{
    ref_param ref[N_PARAMS];
    pn_params *p = make_arena(ref);
    pn_optimizer *o;
    ck_assert_int_eq(pn_optimizer_create(&o, cfg, p), 0);
    int n_slots = cfg->kind == PN_OPT_SGD ? 0 : cfg->kind == PN_OPT_MOMENTUM ? 1 : 2;
    ck_assert_int_eq(pn_params_n_slots(p), n_slots);
    for (long s = 0; s < STEPS; s++) {
        for (int i = 0; i < N_PARAMS; i++) {
            pn_matrix g = pn_params_grad(p, i);
            for (int k = 0; k < ref[i].n; k++) {
                g.data[k] = (float)grad_value(i, k, s);
                ref_update(cfg, s, scale, pdecay[i], g.data[k], &ref[i].w[k], &ref[i].s1[k],
                           &ref[i].s2[k]);
            }
        }
        ck_assert_msg(pn_optimizer_step(o, p, s, scale) == 0, "%s", pn_error_message());
        for (int i = 0; i < N_PARAMS; i++) {
            assert_near(pn_params_value(p, i).data, ref[i].w, ref[i].n, "value", pnames[i], s);
            if (n_slots >= 1)
                assert_near(pn_params_slot(p, 0, i).data, ref[i].s1, ref[i].n, "slot 1",
                            pnames[i], s);
            if (n_slots >= 2)
                assert_near(pn_params_slot(p, 1, i).data, ref[i].s2, ref[i].n, "slot 2",
                            pnames[i], s);
        }
        pn_matrix all = pn_params_all_grads(p);
        for (int k = 0; k < all.cols; k++)
            ck_assert_msg(all.data[k] == 0.0f, "gradient %d is %g after step %ld", k,
                          (double)all.data[k], s);
    }
    pn_optimizer_free(o);
    pn_params_free(p);
}

/* Runs kind with lr, without and with weight decay (and with a grad_scale). */
static void check_kind(pn_opt_kind kind, double lr, bool nesterov)
{
    pn_optimizer_config c;
    pn_optimizer_config_default(&c, kind, lr);
    c.nesterov = nesterov;
    check_rule(&c, 1.0);
    c.weight_decay = 0.1;
    check_rule(&c, 1.0);
    check_rule(&c, 0.5);
}

START_TEST(sgd_matches_reference) { check_kind(PN_OPT_SGD, 0.1, false); }
END_TEST

START_TEST(momentum_matches_reference) { check_kind(PN_OPT_MOMENTUM, 0.05, false); }
END_TEST

START_TEST(nesterov_matches_reference) { check_kind(PN_OPT_MOMENTUM, 0.05, true); }
END_TEST

START_TEST(adam_matches_reference) { check_kind(PN_OPT_ADAM, 0.01, false); }
END_TEST

START_TEST(adamw_matches_reference) { check_kind(PN_OPT_ADAMW, 0.01, false); }
END_TEST

START_TEST(hyperparameters_reach_the_update)
{
    pn_optimizer_config c;
    pn_optimizer_config_default(&c, PN_OPT_MOMENTUM, 0.05);
    c.momentum = 0.5;
    c.weight_decay = 0.3;
    check_rule(&c, 2.0);
    pn_optimizer_config_default(&c, PN_OPT_ADAMW, 0.02);
    c.beta1 = 0.7;
    c.beta2 = 0.95;
    c.eps = 1e-3;
    c.weight_decay = 0.5;
    c.warmup_steps = 2; /* steps 0 and 1 run at lr / 2 and lr */
    check_rule(&c, 0.25);
}
END_TEST

START_TEST(grad_scale_scales_the_gradient)
{
    /* sgd from w = 0 with g = 1: w = -lr * scale exactly */
    pn_params *p;
    int index;
    ck_assert_int_eq(pn_params_create(&p, pn_device_host()), 0);
    ck_assert_int_eq(pn_params_declare(p, "x/w", 3, 3, (pn_init){PN_INIT_ZEROS, 0}, true, &index),
                     0);
    ck_assert_int_eq(pn_params_finalize(p), 0);
    pn_optimizer_config c;
    pn_optimizer_config_default(&c, PN_OPT_SGD, 0.5);
    pn_optimizer *o;
    ck_assert_int_eq(pn_optimizer_create(&o, &c, p), 0);
    pn_matrix g = pn_params_grad(p, 0);
    ck_assert_int_eq(pn_fill(&g, 1.0f), 0);
    ck_assert_int_eq(pn_optimizer_step(o, p, 0, 0.25), 0);
    pn_matrix w = pn_params_value(p, 0);
    for (int k = 0; k < 9; k++) ck_assert_float_eq(w.data[k], -0.125f);
    pn_optimizer_free(o);
    pn_params_free(p);
}
END_TEST

START_TEST(clip_scale_limits_the_norm)
{
    pn_optimizer_config c;
    pn_optimizer_config_default(&c, PN_OPT_SGD, 0.1);
    ck_assert_double_eq(pn_optimizer_clip_scale(&c, 1e6), 1.0); /* off */
    c.clip_norm = 2.0;
    ck_assert_double_eq_tol(pn_optimizer_clip_scale(&c, 16.0), 0.5, 1e-15);  /* norm 4 */
    ck_assert_double_eq_tol(pn_optimizer_clip_scale(&c, 100.0), 0.2, 1e-15); /* norm 10 */
    ck_assert_double_eq(pn_optimizer_clip_scale(&c, 1.0), 1.0);              /* norm 1 */
    ck_assert_double_eq(pn_optimizer_clip_scale(&c, 4.0), 1.0);              /* at the limit */
    ck_assert_double_eq(pn_optimizer_clip_scale(&c, 0.0), 1.0);
    ck_assert_double_eq(pn_optimizer_clip_scale(&c, INFINITY), 1.0);
    ck_assert_double_eq(pn_optimizer_clip_scale(&c, NAN), 1.0);
}
END_TEST

static void check_lr(const pn_optimizer_config *c, long step, double want)
{
    double got = pn_optimizer_lr(c, step);
    ck_assert_msg(tu_close(got, want, 1e-12, 1e-15), "lr at step %ld: got %.15g, want %.15g",
                  step, got, want);
}

START_TEST(schedules_at_chosen_steps)
{
    pn_optimizer_config c;
    pn_optimizer_config_default(&c, PN_OPT_SGD, 0.1);
    check_lr(&c, 0, 0.1);
    check_lr(&c, 12345, 0.1);

    c.warmup_steps = 4; /* constant with warm-up */
    check_lr(&c, 0, 0.025);
    check_lr(&c, 1, 0.05);
    check_lr(&c, 2, 0.075);
    check_lr(&c, 3, 0.1);
    check_lr(&c, 4, 0.1);
    check_lr(&c, 100, 0.1);

    c.schedule = PN_LR_STEP; /* warm-up 2, then halve every 3 steps */
    c.warmup_steps = 2;
    c.step_size = 3;
    c.gamma = 0.5;
    check_lr(&c, 0, 0.05);
    check_lr(&c, 1, 0.1);
    check_lr(&c, 2, 0.1);
    check_lr(&c, 4, 0.1);
    check_lr(&c, 5, 0.05);
    check_lr(&c, 7, 0.05);
    check_lr(&c, 8, 0.025);
    check_lr(&c, 11, 0.0125);

    c.schedule = PN_LR_COSINE; /* warm-up 10, then 100 steps from 0.1 down to 0.01 */
    c.warmup_steps = 10;
    c.total_steps = 110;
    c.min_lr = 0.01;
    check_lr(&c, 0, 0.01);
    check_lr(&c, 4, 0.05);
    check_lr(&c, 9, 0.1);
    check_lr(&c, 10, 0.1);
    check_lr(&c, 35, 0.01 + 0.045 * (1 + sqrt(0.5))); /* a quarter: cos(pi/4) */
    check_lr(&c, 60, 0.055);                           /* half way */
    check_lr(&c, 85, 0.01 + 0.045 * (1 - sqrt(0.5)));
    check_lr(&c, 110, 0.01);
    check_lr(&c, 500, 0.01);

    c.warmup_steps = 0; /* cosine to zero */
    c.total_steps = 100;
    c.min_lr = 0.0;
    check_lr(&c, 0, 0.1);
    check_lr(&c, 50, 0.05);
    check_lr(&c, 100, 0.0);
}
END_TEST

static json_t *parse(const char *text)
{
    json_error_t err;
    json_t *v = json_loads(text, 0, &err);
    ck_assert_msg(v != NULL, "bad test JSON %s: %s", text, err.text);
    return v;
}

START_TEST(json_full_configs)
{
    pn_optimizer_config c;
    json_t *v = parse("{\"type\": \"adamw\", \"lr\": 0.002, \"beta1\": 0.8, \"beta2\": 0.99,"
                      " \"eps\": 1e-6, \"weight_decay\": 0.01, \"clip_norm\": 1.5,"
                      " \"schedule\": {\"type\": \"cosine\", \"warmup_steps\": 10,"
                      " \"total_steps\": 110, \"min_lr\": 0.0001}}");
    ck_assert_msg(pn_optimizer_config_from_json(v, "m.json", &c) == 0, "%s", pn_error_message());
    ck_assert_int_eq(c.kind, PN_OPT_ADAMW);
    ck_assert_double_eq(c.lr, 0.002);
    ck_assert_double_eq(c.beta1, 0.8);
    ck_assert_double_eq(c.beta2, 0.99);
    ck_assert_double_eq(c.eps, 1e-6);
    ck_assert_double_eq(c.weight_decay, 0.01);
    ck_assert_double_eq(c.clip_norm, 1.5);
    ck_assert_int_eq(c.schedule, PN_LR_COSINE);
    ck_assert_int_eq(c.warmup_steps, 10);
    ck_assert_int_eq(c.total_steps, 110);
    ck_assert_double_eq(c.min_lr, 0.0001);
    json_decref(v);

    /* cosine without total_steps: 0, replaced by the run's length by the trainer */
    v = parse("{\"type\": \"adam\", \"lr\": 0.001, \"schedule\": {\"type\": \"cosine\"}}");
    ck_assert_msg(pn_optimizer_config_from_json(v, "m.json", &c) == 0, "%s", pn_error_message());
    ck_assert_int_eq(c.schedule, PN_LR_COSINE);
    ck_assert_int_eq(c.total_steps, 0);
    json_decref(v);

    v = parse("{\"type\": \"momentum\", \"lr\": 1, \"momentum\": 0.95, \"nesterov\": true,"
              " \"schedule\": {\"type\": \"step\", \"step_size\": 1000, \"gamma\": 0.5}}");
    ck_assert_msg(pn_optimizer_config_from_json(v, "m.json", &c) == 0, "%s", pn_error_message());
    ck_assert_int_eq(c.kind, PN_OPT_MOMENTUM);
    ck_assert_double_eq(c.lr, 1.0); /* an integer is a number */
    ck_assert_double_eq(c.momentum, 0.95);
    ck_assert(c.nesterov);
    ck_assert_int_eq(c.schedule, PN_LR_STEP);
    ck_assert_int_eq(c.step_size, 1000);
    ck_assert_double_eq(c.gamma, 0.5);
    ck_assert_int_eq(c.warmup_steps, 0);
    json_decref(v);

    /* what is left out takes the type's defaults, whatever cfg held before */
    c.weight_decay = 5;
    c.clip_norm = 3;
    v = parse("{\"type\": \"adam\", \"lr\": 0.001}");
    ck_assert_int_eq(pn_optimizer_config_from_json(v, "m.json", &c), 0);
    ck_assert_int_eq(c.kind, PN_OPT_ADAM);
    ck_assert_double_eq(c.beta1, 0.9);
    ck_assert_double_eq(c.beta2, 0.999);
    ck_assert_double_eq(c.eps, 1e-8);
    ck_assert_double_eq(c.weight_decay, 0.0);
    ck_assert_double_eq(c.clip_norm, 0.0);
    ck_assert_int_eq(c.schedule, PN_LR_CONSTANT);
    json_decref(v);
}
END_TEST

START_TEST(json_mistakes_name_file_and_field)
{
    static const struct {
        const char *json, *field, *says;
    } cases[] = {
        {"{\"type\": \"adagrad\", \"lr\": 0.1}", "type",
         "expected an optimizer: one of \"sgd\", \"momentum\", \"adam\", \"adamw\", found \"adagrad\""},
        {"{\"type\": \"adam\", \"lr\": 0.1, \"beta1\": 1.5}", "beta1",
         "expected a number in [0, 1), found 1.5"},
        {"{\"lr\": 0.1}", "type", "(required), found nothing"},
        {"{\"type\": 3, \"lr\": 0.1}", "type", "\"adamw\", found 3"},
        {"{\"type\": \"sgd\"}", "lr", "expected a number in [1e-12, 1e+06] (required), found nothing"},
        {"{\"type\": \"sgd\", \"lr\": -0.1}", "lr", "found -0.1"},
        {"{\"type\": \"sgd\", \"lr\": 1e30}", "lr", "expected a number in [1e-12, 1e+06], found 1e30"},
        {"{\"type\": \"sgd\", \"lr\": \"fast\"}", "lr", "found \"fast\""},
        {"{\"type\": \"momentum\", \"lr\": 0.1, \"momentum\": 1}", "momentum",
         "expected a number in [0, 1), found 1"},
        {"{\"type\": \"momentum\", \"lr\": 0.1, \"nesterov\": 1}", "nesterov",
         "expected true or false, found 1"},
        {"{\"type\": \"adam\", \"lr\": 0.1, \"beta2\": -0.5}", "beta2", "[0, 1)"},
        {"{\"type\": \"adam\", \"lr\": 0.1, \"eps\": 0}", "eps", "expected a number > 0"},
        {"{\"type\": \"sgd\", \"lr\": 0.1, \"weight_decay\": -1}", "weight_decay",
         "expected a number >= 0, found -1"},
        {"{\"type\": \"sgd\", \"lr\": 0.1, \"clip_norm\": \"big\"}", "clip_norm",
         "expected a number >= 0, found \"big\""},
        {"{\"type\": \"sgd\", \"lr\": 0.1, \"lr_decay\": 0.5}", "lr_decay",
         "expected one of the keys type, lr, momentum, nesterov, beta1, beta2, eps, weight_decay, "
         "clip_norm, schedule, found an unknown key"},
        {"{\"type\": \"sgd\", \"lr\": 0.1, \"beta1\": 0.9}", "beta1",
         "expected no beta1 with sgd (adam, adamw only), found 0.9"},
        {"{\"type\": \"adam\", \"lr\": 0.1, \"momentum\": 0.9}", "momentum",
         "expected no momentum with adam (momentum only), found 0.9"},
        {"{\"type\": \"sgd\", \"lr\": 0.1, \"schedule\": [1]}", "schedule",
         "expected an object, found [1]"},
        {"{\"type\": \"sgd\", \"lr\": 0.1, \"schedule\": {\"type\": \"poly\"}}",
         "schedule.type",
         "expected a schedule: one of \"constant\", \"step\", \"cosine\", found \"poly\""},
        {"{\"type\": \"sgd\", \"lr\": 0.1, \"schedule\": {\"decay\": 1}}", "schedule.decay",
         "found an unknown key"},
        {"{\"type\": \"sgd\", \"lr\": 0.1, \"schedule\": {\"warmup_steps\": 1.5}}",
         "schedule.warmup_steps", "expected an integer >= 0, found 1.5"},
        {"{\"type\": \"sgd\", \"lr\": 0.1, \"schedule\": {\"type\": \"step\"}}",
         "schedule.step_size", "expected an integer >= 1 (required), found nothing"},
        {"{\"type\": \"sgd\", \"lr\": 0.1, \"schedule\": {\"type\": \"step\", \"step_size\": 0}}",
         "schedule.step_size", "expected an integer >= 1, found 0"},
        {"{\"type\": \"sgd\", \"lr\": 0.1, \"schedule\": {\"type\": \"step\", \"step_size\": 5,"
         " \"gamma\": 0}}",
         "schedule.gamma", "expected a number in (0, 1], found 0"},
        {"{\"type\": \"sgd\", \"lr\": 0.1, \"schedule\": {\"type\": \"constant\", \"gamma\": 0.5}}",
         "schedule.gamma", "expected no gamma with constant (the step schedule only)"},
        {"{\"type\": \"sgd\", \"lr\": 0.1, \"schedule\": {\"type\": \"cosine\","
         " \"warmup_steps\": 100, \"total_steps\": 50}}",
         "schedule.total_steps", "expected an integer > warmup_steps (100), found 50"},
        {"{\"type\": \"sgd\", \"lr\": 0.1, \"schedule\": {\"type\": \"cosine\","
         " \"total_steps\": 50, \"min_lr\": 1}}",
         "schedule.min_lr", "expected a number in [0, 0.1], found 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pn_optimizer_config c;
        pn_optimizer_config_default(&c, PN_OPT_SGD, 0.125);
        json_t *v = parse(cases[i].json);
        pn_error_clear();
        int rc = pn_optimizer_config_from_json(v, "models/x.json", &c);
        json_decref(v);
        const char *msg = pn_error_message();
        char prefix[128];
        snprintf(prefix, sizeof prefix, "models/x.json: train.optimizer.%s: ", cases[i].field);
        ck_assert_msg(rc == PN_ERR_INVALID, "%s: accepted (rc %d)", cases[i].json, rc);
        ck_assert_msg(!strncmp(msg, prefix, strlen(prefix)), "%s: message '%s' lacks '%s'",
                      cases[i].json, msg, prefix);
        ck_assert_msg(strstr(msg + strlen(prefix), cases[i].says), "%s: message '%s' lacks '%s'",
                      cases[i].json, msg, cases[i].says);
        ck_assert_double_eq(c.lr, 0.125); /* cfg untouched */
    }
    /* the two messages of the documentation, exactly */
    pn_optimizer_config c;
    json_t *v = parse(cases[1].json);
    ck_assert_int_eq(pn_optimizer_config_from_json(v, "models/x.json", &c), PN_ERR_INVALID);
    ck_assert_str_eq(pn_error_message(),
                     "models/x.json: train.optimizer.beta1: expected a number in [0, 1), found 1.5");
    json_decref(v);
    v = parse(cases[0].json);
    ck_assert_int_eq(pn_optimizer_config_from_json(v, "models/x.json", &c), PN_ERR_INVALID);
    ck_assert_str_eq(pn_error_message(), "models/x.json: train.optimizer.type: expected an "
                                         "optimizer: one of \"sgd\", \"momentum\", \"adam\", "
                                         "\"adamw\", found \"adagrad\"");
    json_decref(v);
    v = parse("[1]");
    ck_assert_int_eq(pn_optimizer_config_from_json(v, "models/x.json", &c), PN_ERR_INVALID);
    ck_assert_str_eq(pn_error_message(),
                     "models/x.json: train.optimizer: expected an object, found [1]");
    json_decref(v);
}
END_TEST

START_TEST(create_checks_config_and_names_slots)
{
    ref_param ref[N_PARAMS];
    pn_params *p = make_arena(ref);
    pn_optimizer_config c;
    pn_optimizer *o;
    pn_optimizer_config_default(&c, PN_OPT_ADAM, 0.0);
    ck_assert_int_eq(pn_optimizer_create(&o, &c, p), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "lr"));
    pn_optimizer_config_default(&c, PN_OPT_MOMENTUM, 0.1);
    c.momentum = 1.0;
    ck_assert_int_eq(pn_optimizer_create(&o, &c, p), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "momentum"));
    pn_optimizer_config_default(&c, PN_OPT_SGD, 0.1);
    c.schedule = PN_LR_STEP; /* step_size left at 0 */
    ck_assert_int_eq(pn_optimizer_create(&o, &c, p), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "step_size"));
    ck_assert_int_eq(pn_params_n_slots(p), 0);

    pn_optimizer_config_default(&c, PN_OPT_ADAMW, 0.1);
    ck_assert_int_eq(pn_optimizer_create(&o, &c, p), 0);
    ck_assert_int_eq(pn_params_n_slots(p), 2);
    ck_assert_str_eq(pn_params_slot_name(p, 0), "adam_m");
    ck_assert_str_eq(pn_params_slot_name(p, 1), "adam_v");
    ck_assert_int_eq(pn_optimizer_config_of(o)->kind, PN_OPT_ADAMW);
    pn_optimizer_free(o);
    pn_optimizer_config_default(&c, PN_OPT_MOMENTUM, 0.1);
    ck_assert_int_eq(pn_optimizer_create(&o, &c, p), 0);
    ck_assert_str_eq(pn_params_slot_name(p, 2), "momentum");
    pn_params *other = make_arena(ref);
    ck_assert_int_eq(pn_optimizer_step(o, other, 0, 1.0), PN_ERR_INTERNAL);
    ck_assert_int_eq(pn_optimizer_step(o, p, -1, 1.0), PN_ERR_INTERNAL);
    pn_optimizer_free(o);
    pn_params_free(other);
    pn_params_free(p);

    ck_assert_str_eq(pn_opt_kind_name(PN_OPT_ADAMW), "adamw");
    ck_assert_int_eq(pn_opt_kind_from_name("momentum"), PN_OPT_MOMENTUM);
    ck_assert_int_eq(pn_opt_kind_from_name("adagrad"), -1);
}
END_TEST

START_TEST(op_checks_and_strided_views)
{
    /* momentum through the op on 3 x 20 views inside 3 x 25 allocations */
    pn_matrix w = tu_alloc(3, 20, 5), g = tu_alloc(3, 20, 5), v = tu_alloc(3, 20, 5);
    double want_w[60], want_v[60];
    for (int i = 0; i < 3; i++) {
        g.data[i * g.ld + 20] = 7.0f; /* padding must survive */
        for (int j = 0; j < 20; j++) {
            int k = i * 20 + j;
            w.data[i * w.ld + j] = (float)init_value(0, k);
            g.data[i * g.ld + j] = (float)grad_value(0, k, 0);
            v.data[i * v.ld + j] = 0.5f;
            double gk = 2.0 * g.data[i * g.ld + j] + 0.1 * w.data[i * w.ld + j];
            want_v[k] = 0.9 * 0.5 + gk;
            want_w[k] = w.data[i * w.ld + j] - 0.01 * want_v[k];
        }
    }
    pn_update_hparams hp = {.rule = PN_UPDATE_MOMENTUM, .lr = 0.01f, .momentum = 0.9f,
                            .weight_decay = 0.1f, .grad_scale = 2.0f};
    ck_assert_int_eq(pn_optimizer_update(&hp, &w, &g, &v, NULL), 0);
    tu_assert_matrix_near(&w, want_w, 1e-6, 1e-8, "w");
    tu_assert_matrix_near(&v, want_v, 1e-6, 1e-8, "v");
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 20; j++) ck_assert_float_eq(g.data[i * g.ld + j], 0.0f);
        ck_assert_float_eq(g.data[i * g.ld + 20], 7.0f);
    }

    ck_assert_int_eq(pn_optimizer_update(&hp, &w, &g, NULL, NULL), PN_ERR_INTERNAL);
    ck_assert_int_eq(pn_optimizer_update(&hp, &w, &g, &v, &v), PN_ERR_INTERNAL);
    pn_matrix narrow = pn_matrix_cols(v, 0, 19);
    ck_assert_int_eq(pn_optimizer_update(&hp, &w, &g, &narrow, NULL), PN_ERR_INTERNAL);
    hp.rule = PN_UPDATE_ADAM; /* bias corrections left at 0 */
    ck_assert_int_eq(pn_optimizer_update(&hp, &w, &g, &v, &g), PN_ERR_INTERNAL);
    tu_free(&w), tu_free(&g), tu_free(&v);
}
END_TEST

START_TEST(step_allocates_nothing)
{
    ref_param ref[N_PARAMS];
    pn_params *p = make_arena(ref);
    pn_optimizer_config c;
    pn_optimizer_config_default(&c, PN_OPT_ADAMW, 0.01);
    c.weight_decay = 0.1;
    pn_optimizer *o;
    ck_assert_int_eq(pn_optimizer_create(&o, &c, p), 0);
    pn_pool_stats before, after;
    pn_pool_stats_get(pn_device_host(), &before);
    for (long s = 0; s < 5; s++) ck_assert_int_eq(pn_optimizer_step(o, p, s, 0.5), 0);
    pn_pool_stats_get(pn_device_host(), &after);
    ck_assert_uint_eq(after.system_allocs, before.system_allocs);
    ck_assert_uint_eq(after.reuses, before.reuses);
    ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);
    ck_assert_uint_eq(after.bytes_cached, before.bytes_cached);
    pn_optimizer_free(o);
    pn_params_free(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optimizer");
    TCase *rules = tcase_create("rules");
    tcase_add_test(rules, sgd_matches_reference);
    tcase_add_test(rules, momentum_matches_reference);
    tcase_add_test(rules, nesterov_matches_reference);
    tcase_add_test(rules, adam_matches_reference);
    tcase_add_test(rules, adamw_matches_reference);
    tcase_add_test(rules, hyperparameters_reach_the_update);
    tcase_add_test(rules, grad_scale_scales_the_gradient);
    tcase_add_test(rules, op_checks_and_strided_views);
    tcase_add_test(rules, step_allocates_nothing);
    suite_add_tcase(s, rules);
    TCase *config = tcase_create("config");
    tcase_add_test(config, clip_scale_limits_the_norm);
    tcase_add_test(config, schedules_at_chosen_steps);
    tcase_add_test(config, json_full_configs);
    tcase_add_test(config, json_mistakes_name_file_and_field);
    tcase_add_test(config, create_checks_config_and_names_slots);
    suite_add_tcase(s, config);
    return tu_run_suite(s);
}
