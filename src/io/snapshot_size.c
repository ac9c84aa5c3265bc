/* The size of a snapshot or model file (snapshot_size.h), object by object, from the
 * file format HDF5 writes for it. pn_hdf5_create_file pins HDF5 1.10's format
 * (version 3 superblock, version 2 object headers, new-style groups), so the size of
 * each object follows from its names and shapes; the constants below were measured
 * with HDF5 1.10.8 (H5Oget_info: every object's header, index and heap). The file is
 * the superblock, the root group (its attributes and the config text), the groups
 * /params/<layer> and /optimizer/<layer>/<param>, and one dataset per parameter and
 * slot: its header, its chunks (each with a 4-byte checksum) and, when it has more
 * than one chunk, their index. Only one part does not follow from the contents:
 * what HDF5 leaves unused in the 2 KiB blocks it packs small objects into (SLACK).
 *
 * Against the snapshots of real models the result is 1.8 to 12 KB above the file:
 * 0.0006% of GPT-2 small's 1.95 GB, 0.02% of fashion_mlp's 22.4 MB, 5% of a 55 KB
 * file (the table: docs/running.md). It never came out below the file, over
 * those, tests/test_snapshot_size.c and 1,900 random models of 1 to 400 layers. */
#include "io/snapshot_size.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

enum {
    CHUNK_FLOATS = 1 << 18,     /* at most 1 MiB of float32 per chunk */
    SUPERBLOCK = 48,
    /* the root group's header with its attributes (format, version, counters, seed,
     * batch, config_crc32, config and, in a snapshot, slots, both empty here) and
     * its link to /params; the config text and the slot names come on top */
    ROOT_SNAPSHOT = 557,
    ROOT_MODEL = 522,
    /* a group's header, with room for HDF5's estimate of 4 links of 8-byte names;
     * a link takes 15 bytes and its name in it, and one that does not fit then takes
     * 45 and its name: a new header chunk and the continuation that points to it */
    GROUP_HEADER = 147,
    GROUP_LINK_ROOM = 4 * (15 + 8),
    LINK_BYTES = 15,
    LINK_OVERFLOW = 45,
    /* past 8 links (HDF5's default) a group keeps them in a fractal heap indexed by
     * a v2 B-tree of its names' hashes. The heap: a header, then blocks of 512 bytes
     * (8 of them), then rows of 4 blocks each twice the size of the row before; a
     * link takes its name and up to 12 bytes in it. The B-tree: a header and 512-byte
     * nodes; a leaf holds up to 45 links, and after splits about 2/3 to 3/4 of that */
    MAX_COMPACT_LINKS = 8,
    HEAP_HEADER = 254,
    HEAP_BLOCK = 512,
    HEAP_BLOCK_HEADER = 24,
    HEAP_LINK = 12,
    HEAP_INDIRECT = 64,
    HEAP_INDIRECT_ENTRY = 16,
    INDEX_HEADER = 38,
    INDEX_NODE = 512,
    NODE_LINKS_ALONE = 40,      /* what one leaf surely holds */
    NODE_LINKS = 34,            /* links per leaf after splits */
    INNER_CHILDREN = 20,
    /* a dataset's header: dataspace, float32, chunked layout, fletcher32, fill value */
    DATASET_HEADER = 284,
    /* the index of a dataset of several chunks (a fixed array): header, 16 bytes per
     * chunk, and a bitmap and checksum per page of 1024 chunks */
    CHUNK_INDEX = 46,
    CHUNK_ENTRY = 16,
    CHUNK_PAGE = 1024,
    CHUNK_PAGE_BYTES = 8,
    CHUNK_CHECKSUM = 4,
    /* the unused ends of the 2 KiB blocks for metadata and for small arrays, and
     * the pieces of blocks left behind when a large array took the end of the file
     * (up to 2.8% of the metadata seen, 31 KB of 1.1 MB) */
    SLACK = 4096,
    SLACK_SHARE = 32
};

static uint64_t even_piece(uint64_t n, uint64_t cap)
{
    uint64_t pieces = (n + cap - 1) / cap;
    return (n + pieces - 1) / pieces;
}

void pn_snapshot_chunk_shape(int rows, int cols, int *rank, uint64_t dims[2], uint64_t chunk[2])
{
    if (rows == 1) {
        *rank = 1;
        dims[0] = (uint64_t)cols;
        chunk[0] = even_piece(dims[0], CHUNK_FLOATS);
        dims[1] = chunk[1] = 1;
        return;
    }
    *rank = 2;
    dims[0] = (uint64_t)rows;
    dims[1] = (uint64_t)cols;
    chunk[1] = even_piece(dims[1], CHUNK_FLOATS);
    chunk[0] = even_piece(dims[0], CHUNK_FLOATS / chunk[1] ? CHUNK_FLOATS / chunk[1] : 1);
}

/* One dataset of rows x cols: its header and, with several chunks, their index into
 * *metadata; its chunks with their checksums (HDF5 stores an edge chunk whole) into
 * *data. */
static void add_dataset(int rows, int cols, uint64_t *metadata, uint64_t *data)
{
    int rank;
    uint64_t dims[2], chunk[2];
    pn_snapshot_chunk_shape(rows, cols, &rank, dims, chunk);
    uint64_t chunks =
        ((dims[0] + chunk[0] - 1) / chunk[0]) * ((dims[1] + chunk[1] - 1) / chunk[1]);
    *data += chunks * (4 * chunk[0] * chunk[1] + CHUNK_CHECKSUM);
    *metadata += DATASET_HEADER;
    if (chunks > 1)
        *metadata += CHUNK_INDEX + CHUNK_ENTRY * chunks +
                     CHUNK_PAGE_BYTES * ((chunks + CHUNK_PAGE - 1) / CHUNK_PAGE);
}

/* The links of a group, as they are added. */
typedef struct group_links {
    int links;
    uint64_t name_bytes;   /* of all links */
    size_t longest;        /* name */
    uint64_t in_first;     /* bytes of the links in the header's first chunk */
    uint64_t overflow;     /* bytes of the first 8 links beyond it */
} group_links;

static void add_link(group_links *g, size_t name_len)
{
    if (name_len > g->longest) g->longest = name_len;
    g->name_bytes += name_len;
    if (++g->links > MAX_COMPACT_LINKS) return;
    if (g->overflow == 0 && g->in_first + LINK_BYTES + name_len <= GROUP_LINK_ROOM)
        g->in_first += LINK_BYTES + name_len;
    else
        g->overflow += LINK_OVERFLOW + name_len;
}

/* The size of block number `block` of a fractal heap: rows of 4 blocks, the first
 * two rows 512 bytes, each later row twice the one before. */
static uint64_t heap_block(uint64_t block)
{
    return block < 8 ? HEAP_BLOCK : (uint64_t)HEAP_BLOCK << ((block - 8) / 4 + 1);
}

/* A dense group's heap: header, blocks filled in turn (a link never spans two: a
 * block's end may stay unused), and past one block, the indirect block that lists
 * them. */
static uint64_t heap_bytes(const group_links *g)
{
    uint64_t links = g->name_bytes + HEAP_LINK * (uint64_t)g->links, placed = 0, blocks = 0;
    uint64_t bytes = HEAP_HEADER;
    while (placed < links) {
        uint64_t size = heap_block(blocks++);
        placed += size - HEAP_BLOCK_HEADER - (g->longest + HEAP_LINK);
        bytes += size;
    }
    return blocks > 1 ? bytes + HEAP_INDIRECT + HEAP_INDIRECT_ENTRY * blocks : bytes;
}

/* A dense group's B-tree over its links' names. */
static uint64_t index_bytes(const group_links *g)
{
    uint64_t links = (uint64_t)g->links;
    if (links <= NODE_LINKS_ALONE) return INDEX_HEADER + INDEX_NODE;
    uint64_t leaves = (links + NODE_LINKS - 1) / NODE_LINKS + 1;
    uint64_t inner = (leaves + INNER_CHILDREN - 1) / INNER_CHILDREN;
    return INDEX_HEADER + INDEX_NODE * (leaves + inner);
}

/* A group: its header and links, and for a dense one the heap, the index and the
 * header chunks its first links took, freed and left unused when it turned dense. */
static uint64_t group_bytes(const group_links *g)
{
    uint64_t bytes = GROUP_HEADER + g->overflow;
    return g->links <= MAX_COMPACT_LINKS ? bytes : bytes + heap_bytes(g) + index_bytes(g);
}

/* The length of the layer part of "<layer>/<param>". */
static size_t layer_len(const char *name)
{
    const char *slash = strchr(name, '/');
    return slash ? (size_t)(slash - name) : strlen(name);
}

static const char *param_part(const char *name)
{
    const char *slash = strchr(name, '/');
    return slash ? slash + 1 : "";
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const pn_snapshot_array *const *)a)->name,
                  (*(const pn_snapshot_array *const *)b)->name);
}

int pn_snapshot_file_bytes(const pn_snapshot_contents *c, uint64_t *bytes)
{
    int n = c->n_params, slots = c->snapshot ? c->n_slots : 0;
    const pn_snapshot_array **sorted = malloc((size_t)(n ? n : 1) * sizeof *sorted);
    if (!sorted) return pn_error_set(PN_ERR_NOMEM, "out of memory sizing a snapshot");
    for (int i = 0; i < n; i++) sorted[i] = &c->params[i];
    qsort(sorted, (size_t)n, sizeof *sorted, by_name); /* a layer's parameters together */

    uint64_t metadata = SUPERBLOCK + c->config_bytes, data = 0;
    metadata += c->snapshot ? ROOT_SNAPSHOT : ROOT_MODEL;
    for (int s = 0; s < slots; s++) metadata += strlen(c->slot_names[s]) + 1;
    if (slots > 0) metadata += LINK_OVERFLOW + strlen("optimizer");
    group_links layers = {0}, slot_group = {0};
    for (int s = 0; s < slots; s++) add_link(&slot_group, strlen(c->slot_names[s]));
    for (int i = 0; i < n;) {
        size_t len = layer_len(sorted[i]->name);
        group_links layer = {0};
        int first = i;
        for (; i < n && layer_len(sorted[i]->name) == len &&
               !strncmp(sorted[i]->name, sorted[first]->name, len); i++) {
            const pn_snapshot_array *a = sorted[i];
            add_link(&layer, strlen(param_part(a->name)));
            if (!a->no_values) add_dataset(a->rows, a->cols, &metadata, &data);
            for (int s = 0; a->run >= 0 && s < slots; s++)
                add_dataset(a->run ? 1 : a->rows, a->run ? (int)a->run : a->cols, &metadata,
                            &data);
            if (slots > 0 && a->run >= 0) /* /optimizer/<layer>/<param> */
                metadata += group_bytes(&slot_group);
        }
        add_link(&layers, len);
        metadata += (slots > 0 ? 2 : 1) * group_bytes(&layer); /* and /optimizer/<layer> */
    }
    metadata += (slots > 0 ? 2 : 1) * group_bytes(&layers); /* /params, /optimizer */
    uint64_t total = metadata + data + SLACK + metadata / SLACK_SHARE;
    free(sorted);
    *bytes = total;
    return PN_OK;
}

int pn_snapshot_state_bytes(const pn_train_state *st, bool snapshot, uint64_t *bytes)
{
    int n = st->n_params;
    pn_snapshot_array *arrays = malloc((size_t)(n ? n : 1) * sizeof *arrays);
    if (!arrays) return pn_error_set(PN_ERR_NOMEM, "out of memory sizing a snapshot");
    for (int i = 0; i < n; i++)
        arrays[i] = (pn_snapshot_array){st->params[i].name, st->params[i].rows,
                                        st->params[i].cols, 0, false};
    pn_snapshot_contents c = {arrays, n, st->n_slot_names, (const char *const *)st->slot_names,
                              st->config ? strlen(st->config) : 0, snapshot};
    int rc = pn_snapshot_file_bytes(&c, bytes);
    free(arrays);
    return rc;
}
