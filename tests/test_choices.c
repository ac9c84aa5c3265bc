/* The tables of choices (base/choices.h) that --device, --transport, --schedule and
 * --precision, the model file's train section, --help and the messages all read. For
 * every name of each table: it round-trips through its enum and has a summary; the
 * option parser and the train section take it; what they say when refusing another
 * name lists it; --help shows it with its summary. No name is written here: the
 * tables are enumerated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "cli/options.h"
#include "math/device.h"
#include "math/precision.h"
#include "mpi/comm.h"
#include "plan/schedule.h"
#include "train/train_config.h"
#include "testutil.h"

typedef struct table {
    const pn_choices *choices;
    const char *option; /* --device, and the train section's key of the same name */
    int (*from_name)(const char *name);
    const char *(*name_of)(int i);
    int *(*field)(pn_train_config *cfg);
} table;

static const char *device_name(int i) { return pn_device_request_name((pn_device_request)i); }
static const char *transport_name(int i)
{
    return pn_transport_request_name((pn_transport_request)i);
}
static const char *schedule_name(int i) { return pn_schedule_kind_name((pn_schedule_kind)i); }
static int *device_field(pn_train_config *cfg) { return &cfg->device_request; }
static int *transport_field(pn_train_config *cfg) { return &cfg->transport_request; }
static int *schedule_field(pn_train_config *cfg) { return &cfg->schedule; }
/* precision has no functions of its own: the table's */
static int precision_of(const char *name) { return pn_choice_find(&pn_precisions, name); }
static const char *precision_name(int i) { return pn_choice_name(&pn_precisions, i); }
static int *precision_field(pn_train_config *cfg) { return &cfg->precision; }

static const table tables[] = {
    {&pn_device_requests, "device", pn_device_request_from_name, device_name, device_field},
    {&pn_transport_requests, "transport", pn_transport_request_from_name, transport_name,
     transport_field},
    {&pn_schedule_kinds, "schedule", pn_schedule_kind_from_name, schedule_name, schedule_field},
    {&pn_precisions, "precision", precision_of, precision_name, precision_field},
};
enum { N_TABLES = sizeof tables / sizeof *tables };

/* A name in no table. */
static const char *const UNKNOWN = "gloo-gpu";

START_TEST(every_name_round_trips_and_says_what_it_is)
{
    for (int t = 0; t < N_TABLES; t++) {
        const pn_choices *c = tables[t].choices;
        ck_assert_int_ge(c->n, 2);
        for (int i = 0; i < c->n; i++) {
            const char *name = c->items[i].name;
            ck_assert_int_eq(tables[t].from_name(name), i);
            ck_assert_str_eq(tables[t].name_of(i), name);
            ck_assert_msg(c->items[i].summary && c->items[i].summary[0], "%s: no summary", name);
            for (int j = 0; j < i; j++) ck_assert_str_ne(c->items[j].name, name);
        }
        ck_assert_int_eq(tables[t].from_name(UNKNOWN), -1);
        ck_assert_str_eq(tables[t].name_of(c->n), "?");
    }
}
END_TEST

/* What fn printed on stderr while it ran, into out. */
static int with_stderr(char *out, size_t cap, int (*fn)(const table *, const char *),
                       const table *t, const char *text)
{
    char path[] = "/tmp/pn_choices.XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    ck_assert(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, 2);
    int rc = fn(t, text);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, out, cap - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return rc;
}

static int parse_option(const table *t, const char *text)
{
    int got = -2;
    int rc = pn_opt_choice(t->option, t->choices, text, &got);
    return rc == 0 ? got : rc;
}

START_TEST(the_option_takes_every_name_and_lists_them_when_refusing)
{
    for (int t = 0; t < N_TABLES; t++) {
        const pn_choices *c = tables[t].choices;
        char said[512], list[256], want[512];
        for (int i = 0; i < c->n; i++)
            ck_assert_int_eq(with_stderr(said, sizeof said, parse_option, &tables[t],
                                         c->items[i].name), i);
        ck_assert_int_eq(with_stderr(said, sizeof said, parse_option, &tables[t], UNKNOWN), -1);
        snprintf(want, sizeof want, "pipenet: error: --%s: expected %s, got '%s'\n",
                 tables[t].option, pn_choice_list(c, list, sizeof list), UNKNOWN);
        ck_assert_str_eq(said, want);
        for (int i = 0; i < c->n; i++) ck_assert_ptr_nonnull(strstr(said, c->items[i].name));
    }
}
END_TEST

START_TEST(the_train_section_takes_every_name_and_lists_them_when_refusing)
{
    for (int t = 0; t < N_TABLES; t++) {
        const pn_choices *c = tables[t].choices;
        for (int i = 0; i <= c->n; i++) {
            const char *name = i < c->n ? c->items[i].name : UNKNOWN;
            json_t *train = json_pack("{ss}", tables[t].option, name);
            pn_train_config cfg;
            pn_train_config_default(&cfg);
            int rc = pn_train_config_from_json(train, "m.json", &cfg);
            json_decref(train);
            if (i < c->n) {
                ck_assert_msg(rc == 0, "%s: %s", name, pn_error_message());
                ck_assert_int_eq(*tables[t].field(&cfg), i);
                continue;
            }
            ck_assert_int_eq(rc, PN_ERR_INVALID);
            char want[128];
            snprintf(want, sizeof want, "m.json: train.%s: expected %s: one of ", tables[t].option,
                     c->what);
            ck_assert_msg(strstr(pn_error_message(), want), "%s", pn_error_message());
            for (int j = 0; j < c->n; j++) {
                char quoted[64];
                snprintf(quoted, sizeof quoted, "\"%s\"", c->items[j].name);
                ck_assert_msg(strstr(pn_error_message(), quoted), "%s", pn_error_message());
            }
        }
    }
}
END_TEST

START_TEST(help_shows_every_name_with_its_summary)
{
    for (int t = 0; t < N_TABLES; t++) {
        const pn_choices *c = tables[t].choices;
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        ck_assert_ptr_nonnull(f);
        pn_choice_help(f, c, 6);
        fclose(f);
        const char *line = text;
        for (int i = 0; i < c->n; i++) {
            const char *end = strchr(line, '\n');
            ck_assert_ptr_nonnull(end);
            ck_assert_int_eq(strspn(line, " "), 6);
            ck_assert_int_eq(strncmp(line + 6, c->items[i].name, strlen(c->items[i].name)), 0);
            const char *summary = strstr(line, c->items[i].summary);
            ck_assert_msg(summary && summary < end, "line %d of '%s'", i, text);
            line = end + 1;
        }
        ck_assert_str_eq(line, "");
        free(text);
    }
}
END_TEST

START_TEST(a_list_reads_as_words)
{
    static const pn_choice abc[] = {{"a", "1"}, {"b", "2"}, {"c", "3"}};
    char buf[64];
    ck_assert_str_eq(pn_choice_list(&(pn_choices){"x", 1, abc}, buf, sizeof buf), "a");
    ck_assert_str_eq(pn_choice_list(&(pn_choices){"x", 2, abc}, buf, sizeof buf), "a or b");
    ck_assert_str_eq(pn_choice_list(&(pn_choices){"x", 3, abc}, buf, sizeof buf), "a, b or c");
    ck_assert_str_eq(pn_choice_list(&(pn_choices){"x", 3, abc}, buf, 5), "a, b");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("choices");
    TCase *tc = tcase_create("tables");
    tcase_add_test(tc, every_name_round_trips_and_says_what_it_is);
    tcase_add_test(tc, the_option_takes_every_name_and_lists_them_when_refusing);
    tcase_add_test(tc, the_train_section_takes_every_name_and_lists_them_when_refusing);
    tcase_add_test(tc, help_shows_every_name_with_its_summary);
    tcase_add_test(tc, a_list_reads_as_words);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
