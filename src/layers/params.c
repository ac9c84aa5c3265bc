/* The parameter arena: declarations, allocation, deterministic init, views, and the
 * packed index that travels with its buffers. */
#include "layers/params.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/names.h"
#include "base/rng.h"
#include "math/ops.h"

enum { PARAM_ALIGN = 16 }; /* floats: each slice starts on a 64-byte boundary */

typedef struct slot {
    char *name;
    pn_buffer buf;
} slot;

struct pn_params {
    pn_device device;
    pn_param *items;
    int count, cap;
    size_t total; /* floats, with padding */
    size_t grad_total; /* floats of the gradient buffer: dense parameters only */
    pn_row_grad *row_grads; /* [count] after finalize: row-sparse parameters' gradients */
    bool finalized;
    pn_buffer values, grads;
    slot *slots;
    int n_slots;
    int shards, shard; /* sharded parameters keep rows id mod shards = shard */
    int grad_pieces;   /* the gradient buffer holds grad_pieces equal pieces (>= 1) */
};

int pn_params_create(pn_params **out, pn_device dev)
{
    pn_params *p = calloc(1, sizeof *p);
    if (!p) return pn_error_set(PN_ERR_NOMEM, "out of memory creating a parameter arena");
    p->device = dev;
    p->shards = 1;
    p->grad_pieces = 1;
    *out = p;
    return PN_OK;
}

void pn_params_free(pn_params *p)
{
    if (!p) return;
    for (int i = 0; i < p->count; i++) {
        free(p->items[i].name);
        free(p->items[i].tie);
    }
    for (int s = 0; s < p->n_slots; s++) {
        free(p->slots[s].name);
        pn_buffer_release(&p->slots[s].buf);
    }
    for (int i = 0; p->row_grads && i < p->count; i++) pn_row_grad_release(&p->row_grads[i]);
    free(p->row_grads);
    pn_buffer_release(&p->values);
    pn_buffer_release(&p->grads);
    free(p->items);
    free(p->slots);
    free(p);
}

int pn_params_find(const pn_params *p, const char *name)
{
    for (int i = 0; i < p->count; i++)
        if (!strcmp(p->items[i].name, name)) return i;
    return -1;
}

int pn_params_declare(pn_params *p, const char *name, int rows, int cols, pn_init init,
                      bool decay, int *index)
{
    int found = pn_params_find(p, name);
    if (found >= 0) {
        const pn_param *q = &p->items[found];
        if (q->table_rows != rows || q->cols != cols)
            return pn_error_set(PN_ERR_INVALID,
                                "parameter '%s' declared as %d x %d and again as %d x %d", name,
                                q->table_rows, q->cols, rows, cols);
        *index = found;
        return PN_OK;
    }
    if (p->finalized)
        return pn_error_set(PN_ERR_INTERNAL, "parameter '%s' declared after finalize", name);
    if (strlen(name) > PN_PARAM_NAME_MAX) /* the packed index and snapshots hold no more */
        return pn_error_set(PN_ERR_INVALID, "parameter '%.40s...': a name of %zu bytes (at most "
                            "%d)", name, strlen(name), PN_PARAM_NAME_MAX);
    if (rows <= 0 || cols <= 0)
        return pn_error_set(PN_ERR_INVALID, "parameter '%s' has empty shape %d x %d", name,
                            rows, cols);
    if (p->count == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        pn_param *items = realloc(p->items, (size_t)cap * sizeof *items);
        if (!items) return pn_error_set(PN_ERR_NOMEM, "out of memory declaring '%s'", name);
        p->items = items;
        p->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return pn_error_set(PN_ERR_NOMEM, "out of memory declaring '%s'", name);
    size_t n = (size_t)rows * (size_t)cols;
    p->items[p->count] = (pn_param){copy, rows, cols, p->total, init, decay, NULL, false, 0,
                                    false, rows};
    p->total += (n + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    *index = p->count++;
    return PN_OK;
}

int pn_params_tie(pn_params *p, int index, const char *source)
{
    pn_param *q = &p->items[index];
    if (q->tie && !strcmp(q->tie, source)) return PN_OK; /* another instance of its layer */
    if (q->tie)
        return pn_error_set(PN_ERR_INVALID, "parameter '%s' tied to '%s' and to '%s'", q->name,
                            q->tie, source);
    if (p->finalized)
        return pn_error_set(PN_ERR_INTERNAL, "parameter '%s' tied after finalize", q->name);
    if (strlen(source) > PN_PARAM_NAME_MAX || !strcmp(source, q->name))
        return pn_error_set(PN_ERR_INVALID, "parameter '%s' cannot copy '%.40s'", q->name,
                            source);
    if (!(q->tie = strdup(source)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory tying '%s'", q->name);
    return PN_OK;
}

int pn_params_set_row_sparse(pn_params *p, int index)
{
    pn_param *q = &p->items[index];
    if (q->row_sparse || p->finalized) return PN_OK; /* a forward-only network over a
                                                      * finished arena: no gradient */
    if (q->tie)
        return pn_error_set(PN_ERR_UNSUPPORTED, "parameter '%s': a tied copy cannot be "
                            "row-sparse", q->name);
    q->row_sparse = true;
    return PN_OK;
}

int pn_params_set_sharded(pn_params *p, int index)
{
    pn_param *q = &p->items[index];
    if (q->sharded || p->finalized) return PN_OK; /* a forward-only network's: whole */
    if (!q->row_sparse)
        return pn_error_set(PN_ERR_INTERNAL, "parameter '%s': only a row-sparse table is "
                            "sharded", q->name);
    q->sharded = true;
    return PN_OK;
}

int pn_params_set_shards(pn_params *p, int shards, int shard)
{
    if (p->finalized || shards < 1 || shard < 0 || shard >= shards)
        return pn_error_set(PN_ERR_INTERNAL, "arena shard %d of %d%s", shard, shards,
                            p->finalized ? " after finalize" : "");
    p->shards = shards;
    p->shard = shard;
    return PN_OK;
}

void pn_params_shards(const pn_params *p, int *shards, int *shard)
{
    *shards = p->shards;
    *shard = p->shard;
}

bool pn_params_split(const pn_params *p, const pn_param *q) { return q->sharded && p->shards > 1; }

/* Value offsets: every parameter's slice in declaration order, aligned, a sharded
 * one holding this shard's rows in the room of the largest shard's (shard 0's), so
 * that every shard of a stage has one layout: a snapshot's load copies the first
 * replica's arena image to the others before each takes its own rows. */
static int lay_out_values(pn_params *p)
{
    p->total = 0;
    for (int i = 0; i < p->count; i++) {
        pn_param *q = &p->items[i];
        int room_rows = q->rows;
        if (q->sharded) {
            if (q->table_rows < p->shards)
                return pn_error_set(PN_ERR_INVALID, "parameter '%s': a table of %d rows cannot "
                                    "be sharded across %d replicas (fewer rows than replicas)",
                                    q->name, q->table_rows, p->shards);
            q->rows = pn_shard_row_count(q->table_rows, p->shards, p->shard);
            room_rows = pn_shard_row_count(q->table_rows, p->shards, 0);
        }
        q->offset = p->total;
        size_t n = (size_t)room_rows * (size_t)q->cols;
        p->total += (n + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    }
    return PN_OK;
}

/* Gradient offsets: the dense parameters' slices in declaration order, aligned. */
static void lay_out_grads(pn_params *p)
{
    p->grad_total = 0;
    for (int i = 0; i < p->count; i++) {
        pn_param *q = &p->items[i];
        q->grad_offset = p->grad_total;
        if (q->row_sparse) continue;
        size_t n = (size_t)q->rows * (size_t)q->cols;
        p->grad_total += (n + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    }
}

int pn_params_finalize(pn_params *p)
{
    if (p->finalized) return PN_OK;
    for (int i = 0; i < p->count; i++)
        if (p->items[i].row_sparse && p->items[i].tie)
            return pn_error_set(PN_ERR_UNSUPPORTED, "parameter '%s': a tied copy cannot be "
                                "row-sparse", p->items[i].name);
    PN_TRY(lay_out_values(p));
    if (p->total > INT_MAX) /* whole-arena views are matrices of int dimensions */
        return pn_error_set(PN_ERR_UNSUPPORTED, "a stage of %zu parameters: at most %d per stage "
                                                "(split the model into more stages)",
                            p->total, INT_MAX);
    size_t bytes = (p->total ? p->total : 1) * sizeof(float);
    PN_TRY(pn_buffer_acquire(&p->values, p->device, bytes));
    lay_out_grads(p);
    size_t room = pn_params_grad_room(p);
    PN_TRY(pn_buffer_acquire(&p->grads, p->device, (room ? room : 1) * sizeof(float)));
    if (!(p->row_grads = calloc(p->count ? (size_t)p->count : 1, sizeof *p->row_grads)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory for the row-sparse gradients");
    for (int i = 0; i < p->count; i++)
        pn_row_grad_init(&p->row_grads[i], p->items[i].table_rows, p->items[i].cols, p->device);
    p->finalized = true;
    return PN_OK;
}

int pn_params_add_slot(pn_params *p, const char *name, int *slot_index)
{
    if (!p->finalized)
        return pn_error_set(PN_ERR_INTERNAL, "slot '%s' added before finalize", name);
    if (strlen(name) > PN_SUFFIX_MAX)
        return pn_error_set(PN_ERR_INTERNAL, "slot '%s': a name of at most %d bytes", name,
                            PN_SUFFIX_MAX);
    for (int s = 0; s < p->n_slots; s++)
        if (!strcmp(p->slots[s].name, name)) {
            *slot_index = s;
            return PN_OK;
        }
    slot *slots = realloc(p->slots, (size_t)(p->n_slots + 1) * sizeof *slots);
    if (!slots) return pn_error_set(PN_ERR_NOMEM, "out of memory adding slot '%s'", name);
    p->slots = slots;
    slot *s = &p->slots[p->n_slots];
    *s = (slot){strdup(name), {0}};
    if (!s->name) return pn_error_set(PN_ERR_NOMEM, "out of memory adding slot '%s'", name);
    int rc = pn_buffer_acquire(&s->buf, p->device, p->values.bytes);
    if (rc < 0) {
        free(s->name);
        return rc;
    }
    *slot_index = p->n_slots++;
    return PN_OK;
}

int pn_params_init_values(pn_params *p, uint64_t seed)
{
    if (!p->finalized) return pn_error_set(PN_ERR_INTERNAL, "init before finalize");
    for (int i = 0; i < p->count; i++) {
        const pn_param *q = &p->items[i];
        size_t n = (size_t)q->rows * (size_t)q->cols;
        float *host = malloc(n * sizeof *host);
        if (!host) return pn_error_set(PN_ERR_NOMEM, "out of memory initializing '%s'", q->name);
        pn_rng rng;
        pn_rng_init(&rng, seed, pn_hash_string(q->tie ? q->tie : q->name));
        /* a shard draws the whole table's stream and keeps its rows: the values of
         * the unsharded table, in memory for its own rows only */
        int shards = q->sharded ? p->shards : 1, shard = q->sharded ? p->shard : 0;
        size_t cols = (size_t)q->cols, kept = 0;
        for (int row = 0; row < q->table_rows; row++)
            for (size_t c = 0; c < cols; c++) {
                float v = 0.0f;
                switch (q->init.kind) {
                case PN_INIT_ZEROS: v = 0.0f; break;
                case PN_INIT_ONES: v = 1.0f; break;
                case PN_INIT_UNIFORM:
                    v = (float)((2.0 * pn_rng_uniform(&rng) - 1.0) * q->init.scale);
                    break;
                case PN_INIT_NORMAL: v = (float)(pn_rng_normal(&rng) * q->init.scale); break;
                }
                if (row % shards == shard) host[kept++] = v;
            }
        int rc = pn_buffer_write(&p->values, q->offset * sizeof(float), host, n * sizeof *host);
        free(host);
        PN_TRY(rc);
    }
    return PN_OK;
}

int pn_params_zero_grads(pn_params *p)
{
    pn_matrix g = pn_params_all_grads(p);
    return pn_fill(&g, 0.0f);
}

int pn_params_count(const pn_params *p) { return p->count; }
const pn_param *pn_params_get(const pn_params *p, int index) { return &p->items[index]; }
pn_device pn_params_device(const pn_params *p) { return p->device; }
size_t pn_params_size(const pn_params *p) { return p->total; }
size_t pn_params_grad_size(const pn_params *p) { return p->grad_total; }

int pn_params_set_grad_pieces(pn_params *p, int pieces)
{
    if (p->finalized || pieces < 1)
        return pn_error_set(PN_ERR_INTERNAL, "gradient pieces %d %s", pieces,
                            p->finalized ? "after finalize" : "(expected >= 1)");
    p->grad_pieces = pieces;
    return PN_OK;
}

size_t pn_params_grad_piece(const pn_params *p)
{
    size_t d = (size_t)p->grad_pieces, per = (p->grad_total + d - 1) / d;
    return (per + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
}

size_t pn_params_grad_room(const pn_params *p)
{
    return p->grad_pieces > 1 ? pn_params_grad_piece(p) * (size_t)p->grad_pieces : p->grad_total;
}

bool pn_params_piece_run(size_t first, size_t count, size_t piece, int r, size_t *a,
                         size_t *b)
{
    size_t lo = piece * (size_t)r, hi = lo + piece, end = first + count;
    *a = first > lo ? first : lo;
    *b = end < hi ? end : hi;
    return *a < *b;
}

void pn_params_grad_own(const pn_params *p, size_t *lo, size_t *hi)
{
    size_t piece = pn_params_grad_piece(p);
    *lo = piece * (size_t)(p->grad_pieces > 1 ? p->shard : 0);
    *hi = *lo + piece < p->grad_total ? *lo + piece : p->grad_total;
    if (*hi < *lo) *hi = *lo;
}

void pn_params_grad_span(const pn_params *p, int index, size_t *first, size_t *end)
{
    const pn_param *q = &p->items[index];
    if (q->row_sparse) return;
    size_t last = q->grad_offset + (size_t)q->rows * (size_t)q->cols;
    if (q->grad_offset < *first) *first = q->grad_offset;
    if (last > *end) *end = last;
}

pn_row_grad *pn_params_row_grad(const pn_params *p, int index)
{
    return p->row_grads && p->items[index].row_sparse ? &p->row_grads[index] : NULL;
}

int pn_params_seal_row_grads(pn_params *p)
{
    for (int i = 0; p->row_grads && i < p->count; i++)
        if (p->items[i].row_sparse) PN_TRY(pn_row_grad_seal(&p->row_grads[i]));
    return PN_OK;
}

void pn_params_reset_row_grads(pn_params *p)
{
    for (int i = 0; p->row_grads && i < p->count; i++)
        if (p->items[i].row_sparse) pn_row_grad_reset(&p->row_grads[i]);
}

size_t pn_params_elements(const pn_params *p)
{
    size_t n = 0;
    for (int i = 0; i < p->count; i++) n += (size_t)p->items[i].rows * (size_t)p->items[i].cols;
    return n;
}

int pn_params_n_slots(const pn_params *p) { return p->n_slots; }
const char *pn_params_slot_name(const pn_params *p, int s) { return p->slots[s].name; }

static pn_matrix slice(const pn_params *p, const pn_buffer *buf, int index)
{
    const pn_param *q = &p->items[index];
    return (pn_matrix){(float *)buf->data + q->offset, q->rows, q->cols, q->cols, p->device};
}

pn_matrix pn_params_value(const pn_params *p, int index) { return slice(p, &p->values, index); }
pn_matrix pn_params_grad(const pn_params *p, int index)
{
    const pn_param *q = &p->items[index];
    return (pn_matrix){(float *)p->grads.data + q->grad_offset, q->row_sparse ? 0 : q->rows,
                       q->cols, q->cols, p->device};
}
pn_matrix pn_params_slot(const pn_params *p, int s, int index)
{
    return slice(p, &p->slots[s].buf, index);
}

/* --- the packed index: "pnix", count, floats, the gradient piece, then per parameter
 * rows, cols, offset, gradient offset (all ones: row-sparse), table rows and whether
 * the table is split across shards, name length and the name's bytes, tie length (0:
 * none) and the tie's bytes (native byte order: the ranks of a job share it) */

enum { INDEX_MAGIC = 0x78696e70 };

static void put(char **at, const void *v, size_t n)
{
    memcpy(*at, v, n);
    *at += n;
}

int pn_params_pack_index(const pn_params *p, char **out, size_t *bytes)
{
    size_t n = 2 * sizeof(uint32_t) + 2 * sizeof(uint64_t);
    for (int i = 0; i < p->count; i++)
        n += 4 * sizeof(int32_t) + 2 * sizeof(uint64_t) + 2 * sizeof(uint32_t) +
             strlen(p->items[i].name) + (p->items[i].tie ? strlen(p->items[i].tie) : 0);
    char *buf = malloc(n), *at = buf;
    if (!buf) return pn_error_set(PN_ERR_NOMEM, "out of memory packing the arena's index");
    uint32_t magic = INDEX_MAGIC, count = (uint32_t)p->count;
    uint64_t total = p->total, piece = pn_params_grad_piece(p);
    put(&at, &magic, sizeof magic);
    put(&at, &count, sizeof count);
    put(&at, &total, sizeof total);
    put(&at, &piece, sizeof piece);
    for (int i = 0; i < p->count; i++) {
        const pn_param *q = &p->items[i];
        int32_t shape[2] = {q->rows, q->cols};
        int32_t table[2] = {q->table_rows, pn_params_split(p, q)};
        uint64_t offset = q->offset, grad_offset = q->row_sparse ? UINT64_MAX : q->grad_offset;
        uint32_t len = (uint32_t)strlen(q->name);
        put(&at, shape, sizeof shape);
        put(&at, &offset, sizeof offset);
        put(&at, &grad_offset, sizeof grad_offset);
        put(&at, table, sizeof table);
        put(&at, &len, sizeof len);
        put(&at, q->name, len);
        uint32_t tie_len = q->tie ? (uint32_t)strlen(q->tie) : 0;
        put(&at, &tie_len, sizeof tie_len);
        if (tie_len) put(&at, q->tie, tie_len);
    }
    *out = buf;
    *bytes = n;
    return PN_OK;
}

/* Copies n bytes at *at into v when they lie before end. */
static bool take(const char **at, const char *end, void *v, size_t n)
{
    if ((size_t)(end - *at) < n) return false;
    memcpy(v, *at, n);
    *at += n;
    return true;
}

int pn_params_unpack_index(const char *in, size_t bytes, pn_param **params, int *count,
                           size_t *floats, size_t *grad_piece)
{
    const char *at = in, *end = in + bytes;
    uint32_t magic = 0, n = 0;
    uint64_t total = 0, piece = 0;
    *params = NULL;
    *count = 0;
    if (!take(&at, end, &magic, sizeof magic) || magic != INDEX_MAGIC ||
        !take(&at, end, &n, sizeof n) || !take(&at, end, &total, sizeof total) ||
        !take(&at, end, &piece, sizeof piece) || n > bytes / 28)
        return pn_error_set(PN_ERR_INTERNAL, "malformed arena index (%zu bytes)", bytes);
    pn_param *items = calloc(n ? n : 1, sizeof *items);
    if (!items) return pn_error_set(PN_ERR_NOMEM, "out of memory unpacking an arena index");
    int rc = PN_OK;
    for (uint32_t i = 0; rc == PN_OK && i < n; i++) {
        int32_t shape[2], table[2];
        uint64_t offset, grad_offset;
        uint32_t len;
        if (!take(&at, end, shape, sizeof shape) || !take(&at, end, &offset, sizeof offset) ||
            !take(&at, end, &grad_offset, sizeof grad_offset) ||
            !take(&at, end, table, sizeof table) || !take(&at, end, &len, sizeof len) ||
            (size_t)(end - at) < len || shape[0] <= 0 || shape[1] <= 0 ||
            table[0] < shape[0] || (!table[1] && table[0] != shape[0]) ||
            offset + (uint64_t)shape[0] * (uint64_t)shape[1] > total) {
            rc = pn_error_set(PN_ERR_INTERNAL, "malformed arena index at parameter %u", i);
            break;
        }
        if (!(items[i].name = strndup(at, len))) {
            rc = pn_error_set(PN_ERR_NOMEM, "out of memory unpacking an arena index");
            break;
        }
        at += len;
        uint32_t tie_len;
        if (!take(&at, end, &tie_len, sizeof tie_len) || (size_t)(end - at) < tie_len) {
            rc = pn_error_set(PN_ERR_INTERNAL, "malformed arena index at parameter %u", i);
            break;
        }
        if (tie_len && !(items[i].tie = strndup(at, tie_len))) {
            rc = pn_error_set(PN_ERR_NOMEM, "out of memory unpacking an arena index");
            break;
        }
        at += tie_len;
        items[i].rows = shape[0];
        items[i].cols = shape[1];
        items[i].offset = (size_t)offset;
        items[i].row_sparse = grad_offset == UINT64_MAX;
        items[i].grad_offset = items[i].row_sparse ? 0 : (size_t)grad_offset;
        items[i].table_rows = table[0];
        items[i].sharded = table[1] != 0;
    }
    if (rc < 0) {
        pn_params_free_index(items, (int)n);
        return rc;
    }
    *params = items;
    *count = (int)n;
    *floats = (size_t)total;
    if (grad_piece) *grad_piece = (size_t)piece;
    return PN_OK;
}

void pn_params_free_index(pn_param *params, int count)
{
    for (int i = 0; params && i < count; i++) {
        free(params[i].name);
        free(params[i].tie);
    }
    free(params);
}

static pn_matrix whole(const pn_params *p, const pn_buffer *buf)
{
    return (pn_matrix){(float *)buf->data, 1, (int)p->total, (int)p->total, p->device};
}

pn_matrix pn_params_all_values(const pn_params *p) { return whole(p, &p->values); }
pn_matrix pn_params_all_grads(const pn_params *p)
{
    return (pn_matrix){(float *)p->grads.data, 1, (int)p->grad_total, (int)p->grad_total,
                       p->device};
}
pn_matrix pn_params_all_slot(const pn_params *p, int s) { return whole(p, &p->slots[s].buf); }
