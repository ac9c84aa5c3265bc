/* Tables of names (choices.h): lookup, the list for messages, the lines for --help. */
#include "base/choices.h"

#include <string.h>

int pn_choice_find(const pn_choices *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(name, c->items[i].name)) return i;
    return -1;
}

const char *pn_choice_name(const pn_choices *c, int i)
{
    return i >= 0 && i < c->n ? c->items[i].name : "?";
}

const char *pn_choice_list(const pn_choices *c, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->n && at < cap; i++) {
        const char *sep = i == 0 ? "" : i == c->n - 1 ? " or " : ", ";
        int k = snprintf(buf + at, cap - at, "%s%s", sep, c->items[i].name);
        if (k < 0) break;
        at += (size_t)k;
    }
    return buf;
}

void pn_choice_help(FILE *out, const pn_choices *c, int indent)
{
    int width = 0;
    for (int i = 0; i < c->n; i++)
        if ((int)strlen(c->items[i].name) > width) width = (int)strlen(c->items[i].name);
    for (int i = 0; i < c->n; i++)
        fprintf(out, "%*s%-*s  %s\n", indent, "", width, c->items[i].name, c->items[i].summary);
}
