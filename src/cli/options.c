/* Parsing of option values: strict numbers (the whole text must parse, and start
 * with the number itself: strto* would skip leading blanks, and strtoull reads " -1"
 * as 2^64 - 1) and names from a table of choices. */
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

int pn_opt_report(const char *fmt, ...)
{
    if (quiet) return -1;
    va_list ap;
    va_start(ap, fmt);
    fputs("pipenet: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
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
        return 2;
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
