/* A resume's settings (resume.h): rank 0 reads the snapshot's root attributes and
 * model text (not its parameters), compares them with the options and the model
 * file, and every rank takes the seed and batch it settles on. */
#include "train/resume.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/json_read.h"
#include "base/log.h"
#include "io/snapshot_file.h"
#include "train/checkpoint.h"

#define OVERRIDE "--resume-override"

/* Where the snapshot's model text and the model file first differ: the place, and
 * the values there (NULL: missing). */
typedef struct difference {
    pn_json_at at;
    const json_t *snap, *file;
} difference;

/* Whether key is one of skip (NULL-terminated; NULL: none). */
static bool skipped(const char *key, const char *const *skip)
{
    for (int i = 0; skip && skip[i]; i++)
        if (!strcmp(key, skip[i])) return true;
    return false;
}

/* Finds the first place at or under at where a (the snapshot's) and b (the model
 * file's) differ; numbers compare by value (1 and 1.0 are equal). skip: keys left
 * out of the comparison of a and b themselves (NULL: none). */
static bool differ(const json_t *a, const json_t *b, const pn_json_at *at,
                   const char *const *skip, difference *d)
{
    if (json_is_object(a) && json_is_object(b)) {
        const char *key;
        json_t *v;
        json_object_foreach ((json_t *)a, key, v) {
            pn_json_at in = pn_json_field(at, key);
            if (!skipped(key, skip) && differ(v, json_object_get(b, key), &in, NULL, d))
                return true;
        }
        json_object_foreach ((json_t *)b, key, v) {
            pn_json_at in = pn_json_field(at, key);
            if (!skipped(key, skip) && !json_object_get(a, key))
                return differ(NULL, v, &in, NULL, d);
        }
        return false;
    }
    if (json_is_array(a) && json_is_array(b)) {
        size_t n = json_array_size(a) > json_array_size(b) ? json_array_size(a)
                                                           : json_array_size(b);
        for (size_t i = 0; i < n; i++) {
            pn_json_at in = pn_json_item(at, i);
            if (differ(json_array_get(a, i), json_array_get(b, i), &in, NULL, d)) return true;
        }
        return false;
    }
    bool same = json_is_number(a) && json_is_number(b)
                    ? json_number_value(a) == json_number_value(b)
                    : (!a && !b) || (a && b && json_equal((json_t *)a, (json_t *)b));
    if (!same) *d = (difference){*at, a, b};
    return !same;
}

/* The layer of list called name, or NULL. */
static const json_t *layer_named(const json_t *list, const char *name)
{
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *layer = json_array_get(list, i);
        const char *its = json_string_value(json_object_get(layer, "name"));
        if (its && !strcmp(its, name)) return layer;
    }
    return NULL;
}

/* Layers match by name, wherever they are in the list, and without their placement:
 * "stage", and "shard" (a snapshot holds every table whole however it was sharded). */
static bool layers_differ(const json_t *a, const json_t *b, const pn_json_at *at, difference *d)
{
    static const char *const placement[] = {"stage", "shard", NULL};
    if (!json_is_array(a) || !json_is_array(b)) return differ(a, b, at, NULL, d);
    for (int pass = 0; pass < 2; pass++) { /* the file's layers, then the snapshot's */
        const json_t *list = pass ? a : b, *other = pass ? b : a;
        for (size_t i = 0; i < json_array_size(list); i++) {
            const json_t *layer = json_array_get(list, i);
            const char *name = json_string_value(json_object_get(layer, "name"));
            const json_t *match = name ? layer_named(other, name) : json_array_get(other, i);
            pn_json_at in = pn_json_item(at, i);
            if (name) pn_json_about(&in, "layer '%s'%s", name, pass ? " of the snapshot" : "");
            if (pass == 0 && differ(match, layer, &in, placement, d)) return true;
            if (pass == 1 && !match) return differ(layer, NULL, &in, NULL, d);
        }
    }
    return false;
}

/* "at layers[1].act (layer 'fc2'): "relu" in the snapshot, "tanh" in FILE" */
static const char *describe(const difference *d, const char *fname, char *buf, size_t cap)
{
    char a[64], b[64];
    snprintf(buf, cap, "at %s%s%s%s: %s in the snapshot, %s in %s", d->at.path,
             d->at.subject[0] ? " (" : "", d->at.subject, d->at.subject[0] ? ")" : "",
             d->snap ? pn_json_show(d->snap, a, sizeof a) : "nothing",
             d->file ? pn_json_show(d->file, b, sizeof b) : "nothing", fname);
    return buf;
}

/* Compares what makes the network, inputs and layers, in the snapshot's model text
 * (snap) and g's document: an error at the first difference, or with the override
 * a warning. The model's name and its "train" object may change. */
static int check_model(const json_t *snap, const char *path, const pn_graph *g, bool over)
{
    pn_json_at top = pn_json_root(g->file), inputs = pn_json_field(&top, "inputs"),
               layers = pn_json_field(&top, "layers");
    difference d;
    if (!differ(json_object_get(snap, "inputs"), json_object_get(g->root, "inputs"), &inputs,
                NULL, &d) &&
        !layers_differ(json_object_get(snap, "layers"), json_object_get(g->root, "layers"),
                       &layers, &d))
        return PN_OK;
    char text[sizeof(pn_json_at) + 256]; /* a whole place: path and subject */
    describe(&d, g->file, text, sizeof text);
    if (!over)
        return pn_error_set(PN_ERR_INVALID, "%s: was written by another model than %s: %s (give "
                                            OVERRIDE " to resume with %s anyway)",
                            path, g->file, text, g->file);
    pn_log_warn("resuming %s with another model than its own (" OVERRIDE "): %s", path, text);
    return PN_OK;
}

/* One setting of the run that the snapshot fixes (seed, batch): *use gets the
 * snapshot's value (had) unless the user asks for another, on the command line
 * (given) or by changing the model file's train.<key>; a value that differs is an
 * error naming both, or with the override a warning. */
typedef struct setting {
    const char *key, *label; /* "batch", "global batch" */
    bool given, in_file;     /* asked for on the command line, in the model file */
    unsigned long long had, asked;
} setting;

static int settle_one(const setting *s, const char *path, const char *fname, bool over,
                      unsigned long long *use)
{
    *use = s->given || s->in_file ? s->asked : s->had;
    if (*use == s->had) return PN_OK;
    char source[PN_PATH_MAX + 64], undo[PN_PATH_MAX + 64];
    if (s->given) {
        snprintf(source, sizeof source, "--%s gives", s->key);
        snprintf(undo, sizeof undo, "leave out --%s", s->key);
    } else {
        snprintf(source, sizeof source, "%s has train.%s", fname, s->key);
        snprintf(undo, sizeof undo, "restore train.%s in %s", s->key, fname);
    }
    if (!over)
        return pn_error_set(PN_ERR_INVALID, "%s: the snapshot's run has %s %llu, %s %llu (%s to "
                                            "continue that run, or give " OVERRIDE " to resume "
                                            "with %s %llu)",
                            path, s->label, s->had, source, s->asked, undo, s->label, s->asked);
    pn_log_warn("resuming %s with %s %llu, its run had %llu (" OVERRIDE ")", path, s->label,
                s->asked, s->had);
    return PN_OK;
}

/* Whether the model file's train.<key> differs from the snapshot's model text's. */
static bool changed_in_file(const json_t *snap, const pn_graph *g, const char *key)
{
    pn_json_at at = pn_json_root(g->file);
    difference d;
    return snap && differ(json_object_get(json_object_get(snap, "train"), key),
                          json_object_get(json_object_get(g->root, "train"), key), &at, NULL,
                          &d);
}

/* pn_resume_check, also giving the global batch the snapshot's run had (*had, 0
 * when not recorded). */
static int check_header(const char *path, const pn_graph *g, const pn_train_config *cfg,
                        uint64_t *seed, long *batch, long *had)
{
    pn_train_state *st;
    PN_TRY(pn_snapshot_read_header(path, PN_FORMAT_SNAPSHOT, &st));
    *had = st->batch;
    bool over = cfg->resume_override;
    json_error_t jerr;
    json_t *snap = st->config && st->config[0] ? json_loads(st->config, 0, &jerr) : NULL;
    int rc = PN_OK;
    if (st->config && st->config[0] && !snap) {
        if (!over)
            rc = pn_error_set(PN_ERR_INVALID, "%s: attribute 'config' is not JSON (line %d: %s): "
                                              "cannot tell whether %s wrote it (give " OVERRIDE
                                              " to resume anyway)",
                              path, jerr.line, jerr.text, g->file);
        else
            pn_log_warn("resuming %s, whose model text is not JSON, with %s (" OVERRIDE ")",
                        path, g->file);
    }
    setting s = {"seed", "seed", cfg->seed_given, changed_in_file(snap, g, "seed"), st->seed,
                 cfg->seed};
    unsigned long long use = st->seed;
    if (rc == PN_OK) rc = settle_one(&s, path, g->file, over, &use);
    *seed = use;
    *batch = cfg->batch;
    if (st->batch > 0) { /* older snapshots did not record it */
        s = (setting){"batch", "global batch", cfg->batch_given, changed_in_file(snap, g, "batch"),
                      (unsigned long long)st->batch, (unsigned long long)cfg->batch};
        if (rc == PN_OK) rc = settle_one(&s, path, g->file, over, &use);
        *batch = (long)use;
    }
    if (rc == PN_OK && snap) rc = check_model(snap, path, g, over);
    json_decref(snap);
    pn_train_state_free(st);
    return rc;
}

int pn_resume_check(const char *path, const pn_graph *g, const pn_train_config *cfg,
                    uint64_t *seed, long *batch)
{
    long had;
    return check_header(path, g, cfg, seed, batch, &had);
}

int pn_resume_settings(pn_comm *c, const pn_graph *g, pn_train_config *cfg, char *path,
                       size_t cap, long *snapshot_batch)
{
    *snapshot_batch = 0;
    PN_TRY(pn_checkpoint_find(c, cfg->resume, cfg->snapshot_dir, path, cap));
    if (!path[0]) return PN_OK; /* --resume auto before the first snapshot */
    struct {
        uint64_t seed;
        long batch, had;
    } got = {cfg->seed, cfg->batch, 0};
    int rc = pn_comm_grid(c)->rank == 0
                 ? check_header(path, g, cfg, &got.seed, &got.batch, &got.had)
                 : PN_OK;
    PN_TRY(pn_comm_agree_root(c, rc, "check the snapshot's settings"));
    PN_TRY(pn_comm_broadcast(c, &got, sizeof got));
    if (got.batch < 1 || got.batch > 1 << 24)
        return pn_error_set(PN_ERR_INVALID, "%s: global batch %ld is out of range", path,
                            got.batch);
    cfg->seed = got.seed;
    cfg->batch = (int)got.batch;
    *snapshot_batch = got.had;
    return PN_OK;
}
