/* The in-memory training state (train_state.h): names checked as they come in,
 * parameters pointing into owned blocks. */
#include "io/train_state.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/names.h"

static bool known_format(const char *format)
{
    return !strcmp(format, PN_FORMAT_SNAPSHOT) || !strcmp(format, PN_FORMAT_MODEL);
}

int pn_train_state_create(pn_train_state **out, const char *format)
{
    *out = NULL;
    if (!format || !known_format(format))
        return pn_error_set(PN_ERR_INVALID, "unknown state format '%s' (expected %s or %s)",
                            format ? format : "(null)", PN_FORMAT_SNAPSHOT, PN_FORMAT_MODEL);
    pn_train_state *st = calloc(1, sizeof *st);
    if (!st) return pn_error_set(PN_ERR_NOMEM, "out of memory for a training state");
    snprintf(st->format, sizeof st->format, "%s", format);
    *out = st;
    return 0;
}

void pn_train_state_free(pn_train_state *st)
{
    if (!st) return;
    for (int i = 0; i < st->n_params; i++) free(st->params[i].name);
    free(st->params);
    for (int b = 0; b < st->n_blocks; b++) free(st->blocks[b]);
    free(st->blocks);
    for (int s = 0; s < st->n_slot_names; s++) free(st->slot_names[s]);
    free(st->slot_names);
    free(st->config);
    free(st);
}

int pn_train_state_valid_slot_name(const char *name)
{
    return name[0] && strlen(name) <= PN_SUFFIX_MAX && !strpbrk(name, ",/") &&
           strcmp(name, ".") && strcmp(name, "..");
}

int pn_train_state_set_slots(pn_train_state *st, int n, const char *const *names)
{
    if (strcmp(st->format, PN_FORMAT_SNAPSHOT) && n > 0)
        return pn_error_set(PN_ERR_INVALID, "a %s holds no optimizer slots", st->format);
    if (st->n_params > 0)
        return pn_error_set(PN_ERR_INTERNAL, "slot names set after %d parameters were added",
                            st->n_params);
    if (n < 0) return pn_error_set(PN_ERR_INTERNAL, "%d slot names", n);
    if (n > PN_STATE_MAX_SLOTS)
        return pn_error_set(PN_ERR_INVALID, "%d optimizer slots, at most %d are supported", n,
                            PN_STATE_MAX_SLOTS);
    for (int s = 0; s < n; s++) {
        if (!pn_train_state_valid_slot_name(names[s]))
            return pn_error_set(PN_ERR_INVALID, "bad optimizer slot name '%.*s' (empty, '.', "
                                "'..', holding ',' or '/', or longer than %d bytes)",
                                PN_SUFFIX_MAX + 1, names[s], PN_SUFFIX_MAX);
        for (int t = 0; t < s; t++)
            if (!strcmp(names[s], names[t]))
                return pn_error_set(PN_ERR_INVALID, "optimizer slot '%s' named twice", names[s]);
    }
    char **copy = n ? calloc((size_t)n, sizeof *copy) : NULL;
    if (n && !copy) return pn_error_set(PN_ERR_NOMEM, "out of memory for slot names");
    for (int s = 0; s < n; s++)
        if (!(copy[s] = strdup(names[s]))) {
            for (int t = 0; t < s; t++) free(copy[t]);
            free(copy);
            return pn_error_set(PN_ERR_NOMEM, "out of memory for slot names");
        }
    for (int s = 0; s < st->n_slot_names; s++) free(st->slot_names[s]);
    free(st->slot_names);
    st->slot_names = copy;
    st->n_slot_names = n;
    return 0;
}

int pn_train_state_set_config(pn_train_state *st, const char *config)
{
    char *copy = strdup(config ? config : "");
    if (!copy) return pn_error_set(PN_ERR_NOMEM, "out of memory for the config text");
    free(st->config);
    st->config = copy;
    return 0;
}

/* "<layer>/<param>": two non-empty link names, neither "." nor "..", no longer than
 * base/names.h allows. */
static bool valid_param_name(const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash || slash == name || !slash[1] || strchr(slash + 1, '/')) return false;
    size_t layer = (size_t)(slash - name);
    if (layer > PN_NAME_MAX || strlen(slash + 1) > PN_SUFFIX_MAX) return false;
    bool dots = (layer == 1 && name[0] == '.') || (layer == 2 && !strncmp(name, "..", 2));
    return !dots && strcmp(slash + 1, ".") && strcmp(slash + 1, "..");
}

/* Checks a new parameter and makes room for it (and for `blocks` more blocks). */
static int check_new(pn_train_state *st, const char *name, int rows, int cols, int blocks)
{
    if (!valid_param_name(name))
        return pn_error_set(PN_ERR_INVALID, "bad parameter name '%.*s%s' (expected "
                            "<layer>/<param>, at most %d and %d bytes)", PN_PARAM_NAME_MAX, name,
                            strlen(name) > PN_PARAM_NAME_MAX ? "..." : "", PN_NAME_MAX,
                            PN_SUFFIX_MAX);
    if (rows < 1 || cols < 1)
        return pn_error_set(PN_ERR_INVALID, "parameter '%s': empty shape %d x %d", name, rows,
                            cols);
    if (pn_train_state_find(st, name))
        return pn_error_set(PN_ERR_INVALID, "parameter '%s' added twice", name);
    int n = st->n_params;
    if ((n & (n - 1)) == 0) {
        pn_state_param *grown = realloc(st->params, (size_t)(n ? 2 * n : 1) * sizeof *grown);
        if (!grown) return pn_error_set(PN_ERR_NOMEM, "out of memory for parameter '%s'", name);
        st->params = grown;
    }
    if (blocks == 0) return 0;
    void **more = realloc(st->blocks, (size_t)(st->n_blocks + blocks) * sizeof *more);
    if (!more) return pn_error_set(PN_ERR_NOMEM, "out of memory for parameter '%s'", name);
    st->blocks = more;
    return 0;
}

int pn_train_state_add(pn_train_state *st, const char *name, int rows, int cols,
                       const float *value, const float *const *slots)
{
    PN_TRY(check_new(st, name, rows, cols, 1));
    if (st->n_slot_names > 0 && !slots)
        return pn_error_set(PN_ERR_INVALID, "parameter '%s': no values for its %d optimizer slots",
                            name, st->n_slot_names);
    size_t count = (size_t)rows * (size_t)cols, arrays = 1 + (size_t)st->n_slot_names;
    pn_state_param p = {.name = strdup(name), .rows = rows, .cols = cols};
    float *block = malloc(arrays * count * sizeof *block);
    if (!p.name || !block) {
        free(p.name);
        free(block);
        return pn_error_set(PN_ERR_NOMEM, "out of memory for parameter '%s' (%d x %d)", name,
                            rows, cols);
    }
    p.value = block;
    memcpy(p.value, value, count * sizeof *block);
    for (int s = 0; s < st->n_slot_names; s++) {
        p.slots[s] = block + (1 + (size_t)s) * count;
        memcpy(p.slots[s], slots[s], count * sizeof *block);
    }
    st->blocks[st->n_blocks++] = block;
    st->params[st->n_params++] = p;
    return 0;
}

int pn_train_state_keep(pn_train_state *st, void *block)
{
    void **more = realloc(st->blocks, (size_t)(st->n_blocks + 1) * sizeof *more);
    if (!more) {
        free(block);
        return pn_error_set(PN_ERR_NOMEM, "out of memory for a training state");
    }
    st->blocks = more;
    st->blocks[st->n_blocks++] = block;
    return 0;
}

int pn_train_state_adopt(pn_train_state *st, const pn_param *index, int count,
                         const float *image, size_t stride)
{
    int rc = 0;
    for (int i = 0; rc == 0 && i < count; i++) {
        const pn_param *q = &index[i];
        rc = check_new(st, q->name, q->rows, q->cols, 0);
        if (rc == 0 && q->offset + (size_t)q->rows * (size_t)q->cols > stride)
            rc = pn_error_set(PN_ERR_INTERNAL, "parameter '%s' lies past its image", q->name);
        pn_state_param p = {.name = strdup(q->name), .rows = q->rows, .cols = q->cols,
                            .value = (float *)image + q->offset};
        for (int s = 0; s < st->n_slot_names; s++)
            p.slots[s] = (float *)image + (1 + (size_t)s) * stride + q->offset;
        if (rc == 0 && !p.name) rc = pn_error_set(PN_ERR_NOMEM, "out of memory for names");
        if (rc == 0)
            st->params[st->n_params++] = p;
        else
            free(p.name);
    }
    return rc;
}

const pn_state_param *pn_train_state_find(const pn_train_state *st, const char *name)
{
    for (int i = 0; i < st->n_params; i++)
        if (!strcmp(st->params[i].name, name)) return &st->params[i];
    return NULL;
}
