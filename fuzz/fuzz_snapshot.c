/* Fuzz target: snapshot and model files as resume, export, inspect and infer read
 * them. The input chooses the file's attributes, config, parameters and slots (each
 * right, missing, misshapen, of another type, or stored outside the file: external
 * or virtual), written with the HDF5 API to /dev/shm; what pipenet reads is written
 * back and must read back the same, infer's model runs a forward, and resume checks
 * the header against a model (README.md). */
#include <hdf5.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/error.h"
#include "fuzz_util.h"
#include "io/hdf5_util.h"
#include "io/snapshot_file.h"
#include "io/train_state.h"
#include "model/model.h"
#include "net/graph.h"
#include "train/resume.h"

/* Where the values of this input's datasets lie, for fz_damage. */
static fz_region regions[FZ_MAX_REGIONS];
static int n_regions;

enum { MAX_PARAMS_MODEL = 1 << 18, TEXT_CAP = 4096 };

static const char *const CONFIGS[] = {
    "{\"name\": \"mlp\", \"inputs\": {\"x\": {\"dataset\": \"features\", \"size\": 4}, "
    "\"y\": {\"dataset\": \"labels\", \"ids\": true}}, \"layers\": ["
    "{\"name\": \"fc1\", \"type\": \"fc\", \"input\": \"x\", \"size\": 3, \"act\": \"relu\"}, "
    "{\"name\": \"out\", \"type\": \"fc\", \"input\": \"fc1\", \"size\": 2}, "
    "{\"name\": \"loss\", \"type\": \"softmax_xent\", \"input\": [\"out\", \"y\"]}]}",
    "{\"inputs\": {\"tok\": {\"dataset\": \"tokens\", \"ids\": true, \"seq\": 3}, "
    "\"t\": {\"dataset\": \"target\", \"size\": 4, \"seq\": 3}}, \"layers\": ["
    "{\"name\": \"emb\", \"type\": \"embedding\", \"input\": \"tok\", \"vocab\": 5, \"size\": 4}, "
    "{\"name\": \"ln\", \"type\": \"layernorm\", \"input\": \"emb\"}, "
    "{\"name\": \"att\", \"type\": \"attention\", \"input\": \"ln\", \"heads\": 2}, "
    "{\"name\": \"loss\", \"type\": \"mse\", \"input\": [\"att\", \"t\"]}]}",
    "{\"inputs\": {\"x\": {\"dataset\": \"x\", \"size\": 2}}, \"layers\": ["
    "{\"name\": \"a\", \"type\": \"act\", \"input\": \"x\", \"act\": \"tanh\"}]}",
    "",
    "not json {",
    "[1, 2]",
};
enum { N_CONFIGS = sizeof CONFIGS / sizeof *CONFIGS };

/* A parameter the file should hold: "<layer>/<param>" and its shape. */
typedef struct param {
    char name[600];
    int rows, cols;
} param;

/* The parameters a config declares, when it is a model (else none). */
static int declared_params(const char *config, param *out, int cap, long *floats)
{
    *floats = 0;
    json_t *root = json_loads(config, JSON_REJECT_DUPLICATES, NULL);
    pn_graph *g = NULL;
    int n = 0;
    if (root && pn_graph_from_json(&g, root, "config") == 0) {
        *floats = pn_graph_param_count(g);
        for (int i = 0; i < g->n_nodes; i++) {
            const pn_layer *l = g->nodes[i].layer;
            for (int k = 0; k < l->n_params && n < cap; k++, n++) {
                snprintf(out[n].name, sizeof out[n].name, "%s/%s", g->nodes[i].name,
                         l->param_decls[k].suffix);
                out[n].rows = l->param_decls[k].rows;
                out[n].cols = l->param_decls[k].cols;
            }
        }
    }
    pn_graph_free(g);
    json_decref(root);
    return n;
}

/* --- writing the file -------------------------------------------------------------- */

static void write_string_attr(fz_in *in, hid_t file, const char *name, const char *value)
{
    unsigned how = fz_below(in, 8); /* 0: as pipenet writes it */
    if (how == 7) return;            /* missing */
    if (how == 6) {                  /* an integer instead */
        long v = 1;
        hid_t s = H5Screate(H5S_SCALAR);
        hid_t a = H5Acreate2(file, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0) H5Awrite(a, H5T_NATIVE_LONG, &v), H5Aclose(a);
        H5Sclose(s);
        return;
    }
    hid_t t = H5Tcopy(H5T_C_S1);
    bool variable = how == 1;
    size_t len = strlen(value);
    H5Tset_size(t, variable ? H5T_VARIABLE : how == 2 ? len + 8 : how == 3 && len ? len : len + 1);
    H5Tset_strpad(t, how == 4 ? H5T_STR_SPACEPAD : how == 2 ? H5T_STR_NULLPAD : H5T_STR_NULLTERM);
    H5Tset_cset(t, how == 5 ? H5T_CSET_ASCII : H5T_CSET_UTF8);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(file, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        char *padded = calloc(len + 9, 1);
        if (padded) {
            memcpy(padded, value, len);
            H5Awrite(a, t, variable ? (const void *)&value : (const void *)padded);
            free(padded);
        }
        H5Aclose(a);
    }
    H5Sclose(s);
    H5Tclose(t);
}

static void write_int_attr(fz_in *in, hid_t file, const char *name, long normal)
{
    static const long odd[] = {0, -1, 2, 1L << 40, LONG_MAX, LONG_MIN};
    unsigned how = fz_below(in, 8);
    if (how == 7) return;
    long v = how == 1 ? FZ_PICK(in, odd) : normal;
    hid_t types[] = {H5T_STD_I64LE, H5T_STD_I64LE, H5T_STD_U64LE, H5T_STD_I32BE, H5T_STD_U8LE,
                     H5T_IEEE_F64LE, H5T_STD_U32LE};
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(file, name, types[how], s, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) H5Awrite(a, H5T_NATIVE_LONG, &v), H5Aclose(a);
    H5Sclose(s);
}

/* Writes float dataset name (rank 1 when rows is 1) as pipenet does, or otherwise. */
static void write_array(fz_in *in, hid_t file, const char *name, int rows, int cols)
{
    unsigned how = fz_below(in, 18);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hsize_t dims[3] = {(hsize_t)rows, (hsize_t)cols, 2}, chunk[3] = {1, 1, 1};
    int rank = rows == 1 ? 1 : 2;
    if (rank == 1) dims[0] = (hsize_t)cols;
    hid_t type = H5T_IEEE_F32LE;
    switch (how) {
    case 1: H5Pclose(lcpl), H5Pclose(dcpl); return; /* missing */
    case 2: /* transposed */
        dims[2] = dims[0], dims[0] = dims[1], dims[1] = dims[2], dims[2] = 2, rank = 2;
        break;
    case 3: dims[0] = (hsize_t)rows * (hsize_t)cols, rank = 1; break; /* flattened */
    case 4: rank = 3; break;
    case 5: type = H5T_IEEE_F64LE; break;
    case 6: type = H5T_STD_I32LE; break;
    case 7: dims[0] = 0; break;
    case 8: H5Gclose(H5Gcreate2(file, name, lcpl, H5P_DEFAULT, H5P_DEFAULT));
        H5Pclose(lcpl), H5Pclose(dcpl);
        return;
    case 9: rank = 0; break;
    case 10: dims[0] = (hsize_t)1 << (20 + fz_below(in, 12)), rank = 2, dims[1] = 1 + fz_below(in, 4); break;
    case 11: type = H5T_IEEE_F32BE; break;
    default: break;
    }
    bool checksum = how != 12, contiguous = how == 13 || how >= 16;
    hsize_t n = 1;
    for (int k = 0; k < rank; k++) n *= dims[k];
    char other[256]; /* 16: values in an external raw file, 17: a VDS over another file */
    fz_scratch(how == 16 ? "external.raw" : "source.h5", other, sizeof other);
    if (how == 16) H5Pset_external(dcpl, other, 0, n * 4);
    if (how == 17) {
        hid_t all = H5Screate_simple(rank, dims, NULL);
        H5Pset_virtual(dcpl, all, other, "/params/w", all);
        H5Sclose(all);
    }
    for (int k = 0; k < rank; k++) chunk[k] = dims[k] ? (dims[k] > 64 ? 64 : dims[k]) : 1;
    if (!contiguous && rank > 0) H5Pset_chunk(dcpl, rank, chunk);
    if (checksum && !contiguous && rank > 0) H5Pset_fletcher32(dcpl);
    hid_t space = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(file, name, type, space, lcpl, dcpl, H5P_DEFAULT);
    if (d >= 0 && n <= (1u << 16) && how != 14) { /* 14: declared, never written */
        float *v = malloc((n ? n : 1) * sizeof *v);
        if (v) {
            for (hsize_t k = 0; k < n; k++) v[k] = (float)k / 8.0f - 0.5f;
            if (how == 15 && n) v[fz_uint(in, 2) % n] = NAN;
            H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
            free(v);
        }
    }
    if (d >= 0) fz_note_values(d, regions, &n_regions), H5Dclose(d);
    H5Sclose(space);
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    H5Eclear2(H5E_DEFAULT);
}

static void write_file(fz_in *in, hid_t file, const char *config, const char *slots_text,
                       const param *params, int n_params)
{
    static const char *const formats[] = {PN_FORMAT_SNAPSHOT, PN_FORMAT_MODEL, "pipenet-data",
                                          "", PN_FORMAT_SNAPSHOT "\n"};
    write_string_attr(in, file, "format", formats[fz_below(in, 5)]);
    write_int_attr(in, file, "version", 1);
    write_int_attr(in, file, "step", 12);
    write_int_attr(in, file, "epoch", 1);
    write_int_attr(in, file, "batch_index", 3);
    write_int_attr(in, file, "seed", 7);
    write_string_attr(in, file, "config", config);
    uLong crc = crc32_z(crc32_z(0, Z_NULL, 0), (const Bytef *)config, strlen(config));
    write_int_attr(in, file, "config_crc32", fz_below(in, 8) == 7 ? (long)crc ^ 1 : (long)crc);
    write_string_attr(in, file, "slots", slots_text);
    for (unsigned a = fz_below(in, 3); a > 0; a--) fz_write_root_attr(in, file);

    char slots[TEXT_CAP], path[2 * TEXT_CAP];
    snprintf(slots, sizeof slots, "%s", slots_text);
    for (int i = 0; i < n_params; i++) {
        snprintf(path, sizeof path, "/params/%.599s", params[i].name);
        write_array(in, file, path, params[i].rows, params[i].cols);
        char *save = NULL;
        for (char *s = strtok_r(slots, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
            snprintf(path, sizeof path, "/optimizer/%.599s/%s", params[i].name, s);
            write_array(in, file, path, params[i].rows, params[i].cols);
        }
        snprintf(slots, sizeof slots, "%s", slots_text);
    }
    for (unsigned extra = fz_below(in, 4); extra > 0; extra--) { /* objects nobody declared */
        static const char *const names[] = {"/params/stray/w", "/params/x", "/optimizer/a/b/c",
                                            "/params/fc1/w/deeper", "/other"};
        unsigned k = fz_below(in, 6);
        if (k < 5) {
            snprintf(path, sizeof path, "%s", names[k]);
        } else {
            char text[300];
            fz_text(in, text, sizeof text);
            snprintf(path, sizeof path, "/params/%s", text);
        }
        write_array(in, file, path, 1 + (int)fz_below(in, 3), 2);
    }
}

/* --- reading it back ----------------------------------------------------------------- */

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz: %s: %s\n", what, detail);
    abort();
}

/* The state a reader returns must be whole: every parameter named, shaped, filled. */
static void check_state(const pn_train_state *st)
{
    if (strcmp(st->format, PN_FORMAT_SNAPSHOT) && strcmp(st->format, PN_FORMAT_MODEL))
        fail("state", "unknown format");
    if (!st->config) fail("state", "no config");
    for (int i = 0; i < st->n_params; i++) {
        const pn_state_param *p = &st->params[i];
        if (!p->name || p->rows < 1 || p->cols < 1 || !p->value) fail("state", "a bad parameter");
        for (int s = 0; s < st->n_slot_names; s++)
            if (!p->slots[s]) fail("state", "a missing slot");
    }
}

static bool same_floats(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

/* Writes st as format to a scratch file and reads it back: everything must survive. */
static void round_trip(const pn_train_state *st, const char *format)
{
    char path[256];
    fz_scratch("export.h5", path, sizeof path);
    pn_error_clear();
    int rc = pn_snapshot_file_write(path, st, format);
    fz_check_status(rc, "pn_snapshot_file_write");
    pn_train_state *back = NULL;
    if (rc == 0) {
        pn_error_clear();
        rc = pn_snapshot_read(path, format, &back);
        if (rc < 0) fail("a written state does not read back", pn_error_message());
        bool model = !strcmp(format, PN_FORMAT_MODEL);
        if (back->n_params != st->n_params || strcmp(back->config, st->config) ||
            back->seed != st->seed || (!model && (back->step != st->step ||
                                                  back->n_slot_names != st->n_slot_names)))
            fail("round trip", "the state changed");
        for (int i = 0; i < st->n_params; i++) {
            const pn_state_param *p = pn_train_state_find(st, back->params[i].name);
            const pn_state_param *q = &back->params[i];
            size_t n = (size_t)q->rows * (size_t)q->cols;
            if (!p || p->rows != q->rows || p->cols != q->cols || !same_floats(p->value, q->value, n))
                fail("round trip", q->name);
            for (int s = 0; !model && s < st->n_slot_names; s++)
                if (!same_floats(p->slots[s], q->slots[s], n)) fail("round trip slot", q->name);
        }
    }
    pn_train_state_free(back);
    unlink(path);
}

/* What infer does with a model file: the model, and a forward of two samples. */
static void infer(fz_in *in, const pn_train_state *st, const char *path)
{
    param unused[1];
    long floats;
    declared_params(st->config, unused, 0, &floats);
    if (floats > MAX_PARAMS_MODEL) return;
    pn_model *m = NULL;
    pn_error_clear();
    int rc = pn_model_from_state(&m, st, path);
    fz_check_status(rc, "pn_model_from_state");
    if (rc < 0) return;
    int n = pn_model_input_count(m);
    void *inputs[8] = {0};
    for (int i = 0; i < n && i < 8; i++) {
        int size = pn_model_input_size(m, i);
        if (size < 1 || size > 4096) goto done;
        int *v = calloc(2 * (size_t)size, sizeof(int));
        if (!v) goto done;
        for (int k = 0; k < 2 * size; k++) {
            static const long ids[] = {0, 1, 2, 3, 4, -1, INT_MAX};
            if (pn_model_input_is_ids(m, i)) v[k] = (int)FZ_PICK(in, ids);
            else ((float *)v)[k] = (float)k / 4.0f;
        }
        inputs[i] = v;
    }
    if (n <= 8) {
        const char *output = pn_model_output_name(m);
        int out_size = pn_model_output_size(m, output);
        float *out = out_size > 0 ? malloc(2 * (size_t)out_size * sizeof *out) : NULL;
        if (out) {
            pn_error_clear();
            fz_check_status(pn_model_forward(m, 2, (const void *const *)inputs, output, out),
                            "pn_model_forward");
        }
        free(out);
    }
done:
    for (int i = 0; i < 8; i++) free(inputs[i]);
    pn_model_free(m);
}

/* What a resume checks before it builds anything: the snapshot's header against a
 * model file (the snapshot's own model, or another) and the command line. */
static void resume(fz_in *in, const char *path, const char *own_config)
{
    unsigned which = fz_below(in, 3);
    const char *text = which == 0 ? own_config : CONFIGS[which - 1];
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    pn_graph *g = NULL;
    if (root && pn_graph_from_json(&g, root, "model.json") == 0) {
        pn_train_config cfg;
        pn_train_config_default(&cfg);
        unsigned flags = fz_below(in, 8);
        cfg.seed_given = flags & 1, cfg.batch_given = flags & 2, cfg.resume_override = flags & 4;
        if (cfg.seed_given) cfg.seed = fz_uint(in, 8);
        if (cfg.batch_given) cfg.batch = 1 + (int)fz_below(in, 255);
        uint64_t seed;
        long batch;
        pn_error_clear();
        fz_check_status(pn_resume_check(path, g, &cfg, &seed, &batch), "pn_resume_check");
    }
    pn_graph_free(g);
    json_decref(root);
}

static int ignore_dataset(void *ctx, const pn_hdf5_dataset_info *d) { return 0; }
static int ignore_attr(void *ctx, const char *n, const char *t, const char *v) { return 0; }

/* `pipenet inspect`: the format attribute decides between a summary and a listing. */
static void inspect(const char *path)
{
    hid_t file;
    pn_error_clear();
    int rc = pn_hdf5_open_file(path, H5P_DEFAULT, &file);
    fz_check_status(rc, "pn_hdf5_open_file");
    if (rc < 0) return;
    char format[64] = "";
    long version = 0;
    pn_error_clear();
    int has = pn_hdf5_attr_exists(file, path, "format");
    fz_check_status(has < 0 ? has : 0, "pn_hdf5_attr_exists");
    if (has > 0) {
        pn_error_clear();
        rc = pn_hdf5_read_attr_string(file, path, "format", format, sizeof format);
        fz_check_status(rc, "pn_hdf5_read_attr_string");
    }
    if (rc == 0 && (!strcmp(format, PN_FORMAT_SNAPSHOT) || !strcmp(format, PN_FORMAT_MODEL))) {
        pn_error_clear();
        fz_check_status(pn_hdf5_read_attr_int(file, path, "version", &version),
                        "pn_hdf5_read_attr_int");
    }
    pn_error_clear();
    fz_check_status(pn_hdf5_list_datasets(file, path, ignore_dataset, NULL), "list datasets");
    pn_error_clear();
    fz_check_status(pn_hdf5_list_attrs(file, path, ignore_attr, NULL), "list attributes");
    pn_hdf5_close(file, path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const slot_sets[] = {"adam_m,adam_v", "", "momentum", ",", "a,,b",
                                            "x/y", "1,2,3,4,5,6,7,8,9", "adam_m,adam_m"};
    static param params[32];
    fz_in in = {data, size};
    fz_hdf5_quiet();
    char path[256], text[TEXT_CAP], slots[TEXT_CAP];
    fz_scratch("snapshot.h5", path, sizeof path);

    unsigned c = fz_below(&in, N_CONFIGS + 1);
    if (c < N_CONFIGS) snprintf(text, sizeof text, "%s", CONFIGS[c]);
    else fz_text(&in, text, sizeof text);
    unsigned k = fz_below(&in, sizeof slot_sets / sizeof *slot_sets + 1);
    if (k < sizeof slot_sets / sizeof *slot_sets) snprintf(slots, sizeof slots, "%s", slot_sets[k]);
    else fz_text(&in, slots, sizeof slots);
    long floats;
    int n_params = declared_params(text, params, 32, &floats);

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), fcpl = H5Pcreate(H5P_FILE_CREATE);
    unsigned version = fz_below(&in, 3); /* 0: as pipenet writes (1.10, compact attributes) */
    if (version == 0) {
        H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
        H5Pset_attr_phase_change(fcpl, 16, 14);
    } else if (version == 2) {
        H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
    }
    n_regions = 0;
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl);
    H5Pclose(fapl);
    H5Pclose(fcpl);
    if (file < 0) return 0;
    write_file(&in, file, text, slots, params, n_params);
    H5Fclose(file);
    fz_damage(&in, path, regions, n_regions);

    static const char *const expect[] = {NULL, PN_FORMAT_SNAPSHOT, PN_FORMAT_MODEL};
    pn_train_state *st = NULL;
    pn_error_clear();
    int rc = pn_snapshot_read(path, expect[fz_below(&in, 3)], &st);
    fz_check_status(rc, "pn_snapshot_read");
    if (rc == 0) {
        check_state(st);
        round_trip(st, st->format);
        if (strcmp(st->format, PN_FORMAT_MODEL)) round_trip(st, PN_FORMAT_MODEL); /* export */
        infer(&in, st, path);
    }
    pn_train_state_free(st);
    resume(&in, path, text);
    inspect(path);
    fz_check_hdf5_closed("reading a snapshot");
    unlink(path);
    unlink(fz_scratch("external.raw", path, sizeof path));
    return 0;
}
