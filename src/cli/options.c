/* Parsing of option values: strict numbers (the whole text must parse, and start
 * with the number itself: strto* would skip leading blanks, and strtoull reads " -1"
 * as 2^64 - 1) and names from a table of choices; and the one voice and exit status
 * (2) of every command-line mistake, getopt's own included. */
#include "cli/options.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool quiet; /* another rank of the same job reports command-line mistakes */

void pn_opt_quiet_unless_first_rank(void)
{
    static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                            "SLURM_PROCID", NULL};
    for (const char *const *v = rank_vars; *v; v++) {
        const char *r = getenv(*v);
        if (r) {
            quiet = atoi(r) != 0;
            break;
        }
    }
    opterr = !quiet;
}

static void vreport(const char *fmt, va_list ap)
{
    if (quiet) return;
    fputs("pipenet: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

long pn_cli_launcher_ranks(void)
{
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && atol(v) > 1) return atol(v);
    }
    return 1;
}

int pn_opt_report(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
    return -1;
}

int pn_cli_misuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
    return PN_EXIT_USAGE;
}

/* Why getopt_long refused arg ("--name[=value]", or a short option): the options
 * whose names start with its name say whether it is unknown, ambiguous, or given a
 * value it does not take. */
static int refused_option(const char *arg, const struct option *longopts)
{
    if (strncmp(arg, "--", 2) != 0) return pn_opt_report("unknown option '%s'", arg);
    const char *name = arg + 2;
    size_t len = strcspn(name, "=");
    char matches[256] = "";
    int n = 0, exact = -1;
    for (int i = 0; longopts[i].name; i++) {
        if (strncmp(longopts[i].name, name, len) != 0) continue;
        if (strlen(longopts[i].name) == len) exact = i;
        size_t used = strlen(matches);
        snprintf(matches + used, sizeof matches - used, "%s--%s", n++ ? ", " : "",
                 longopts[i].name);
    }
    if (exact >= 0 || n == 1) /* known: the value is what is wrong */
        return pn_opt_report("option '--%.*s' takes no value (found '%s')", (int)len, name, arg);
    if (n > 1)
        return pn_opt_report("option '--%.*s' is ambiguous: it could be %s", (int)len, name,
                             matches);
    return pn_opt_report("unknown option '--%.*s'", (int)len, name);
}

int pn_opt_next(int argc, char **argv, const struct option *longopts)
{
    opterr = 0; /* reported here, in pipenet's words */
    int c = getopt_long(argc, argv, ":h", longopts, NULL);
    if (c == ':') {
        pn_opt_report("option '%s' needs a value", argv[optind - 1]);
        return '?';
    }
    if (c == '?') {
        if (optopt > 0 && optopt < 256 && optopt != 'h' && isprint(optopt)) /* "-x" */
            pn_opt_report("unknown option '-%c'", optopt);
        else
            refused_option(argv[optind - 1], longopts);
    }
    return c;
}

static int bad(const char *name, const char *what, const char *text)
{
    return pn_opt_report("--%s: expected %s, got '%s'", name, what, text);
}

/* Whether text starts like a number: a digit, or a sign or point and then one. */
static bool starts_number(const char *text)
{
    const char *p = text + (text[0] == '-' || text[0] == '+');
    if (*p == '.') p++;
    return isdigit((unsigned char)*p);
}

int pn_opt_long(const char *name, const char *text, long min, long max, long *out)
{
    char *end, what[96];
    errno = 0;
    long v = strtol(text, &end, 10);
    snprintf(what, sizeof what, "an integer in [%ld, %ld]", min, max);
    if (errno || !starts_number(text) || *end || v < min || v > max)
        return bad(name, what, text);
    *out = v;
    return 0;
}

int pn_opt_int(const char *name, const char *text, int min, int max, int *out)
{
    long v;
    if (pn_opt_long(name, text, min, max, &v) < 0) return -1;
    *out = (int)v;
    return 0;
}

int pn_opt_double(const char *name, const char *text, double min, double max, double *out)
{
    char *end, what[96];
    errno = 0;
    double v = strtod(text, &end);
    snprintf(what, sizeof what, "a number in [%g, %g]", min, max);
    if (errno || !starts_number(text) || *end || !(v >= min && v <= max))
        return bad(name, what, text);
    *out = v;
    return 0;
}

int pn_opt_u64(const char *name, const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || !isdigit((unsigned char)text[0]) || *end)
        return bad(name, "a non-negative integer", text);
    *out = (uint64_t)v;
    return 0;
}

int pn_opt_path(const char *name, const char *text, char *out, int cap)
{
    if ((int)strlen(text) >= cap) return bad(name, "a shorter path", text);
    strcpy(out, text);
    return 0;
}

int pn_opt_model_argument(int argc, char **argv, const char *command,
                          void (*usage)(FILE *out), const char **path)
{
    extern int optind;
    if (optind != argc - 1) {
        pn_opt_report("%s takes exactly one MODEL.json (got %d)\n", command, argc - optind);
        if (!quiet) usage(stderr);
        return PN_EXIT_USAGE;
    }
    *path = argv[optind];
    return 0;
}

int pn_opt_choice(const char *name, const pn_choices *choices, const char *text, int *out)
{
    char list[256];
    *out = pn_choice_find(choices, text);
    return *out < 0 ? bad(name, pn_choice_list(choices, list, sizeof list), text) : 0;
}
