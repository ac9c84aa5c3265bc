/* The trace file of a run (tracing.h): the clocks compared at the start, each
 * rank's events as text in memory at the end, sent to rank 0 one rank at a time and
 * written there between the file's header and its tail. */
#include "pipeline/tracing.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/trace.h"

enum { TRACE_PATH_MAX = 1024 + 64 }; /* a --trace path and its suffixes */

/* "<path>.tmp-<pid>": where the file is written before it takes its name. */
static int temp_name(char *tmp, size_t size, const char *path)
{
    if ((size_t)snprintf(tmp, size, "%s.tmp-%ld", path, (long)getpid()) >= size)
        return pn_error_set(PN_ERR_INVALID, "--trace %s: the path is too long", path);
    return PN_OK;
}

static int cannot_write(const char *path, const char *what)
{
    return pn_error_set(PN_ERR_IO, "--trace %s: cannot %s: %s", path, what, strerror(errno));
}

static void label_of(const pn_grid *g, char *label, size_t size)
{
    snprintf(label, size, "rank %d: stage %d, replica %d", g->rank, g->stage, g->replica);
}

int pn_tracing_start(pn_comm *c, const char *path)
{
    const pn_grid *g = pn_comm_grid(c);
    int rc = PN_OK;
    if (g->rank == 0) { /* a bad path fails now, not after the run */
        char tmp[TRACE_PATH_MAX];
        FILE *f = NULL;
        rc = temp_name(tmp, sizeof tmp, path);
        if (rc == PN_OK && !(f = fopen(tmp, "w"))) rc = cannot_write(path, "create a file there");
        if (f) fclose(f), remove(tmp);
    }
    PN_TRY(pn_comm_agree_root(c, rc, "create the trace file"));
    const char *env = getenv("PIPENET_TRACE_EVENTS");
    long max = env ? atol(env) : 0;
    double offset, origin;
    PN_TRY(pn_comm_clock_offset(c, &offset, &origin));
    rc = pn_trace_start(max > 0 ? (size_t)max : 0);
    pn_trace_set_clock(offset, origin);
    rc = pn_comm_agree(c, rc);
    if (rc < 0) pn_trace_reset();
    return rc;
}

/* Rank 0's file, while the ranks' events arrive. */
typedef struct trace_file {
    FILE *f;
    const char *path;
    bool any; /* an event written: the next one needs a comma */
} trace_file;

static int take(void *ctx, int rank, const void *bytes, size_t n)
{
    trace_file *tf = ctx;
    if (!tf->f) return PN_ERR_IO; /* the file could not be opened: already reported */
    if (n == 0) return PN_OK;
    if (tf->any) fputs(",\n", tf->f);
    tf->any = true;
    if (fwrite(bytes, 1, n, tf->f) != n) return cannot_write(tf->path, "write");
    return PN_OK;
}

/* This process's events as text (malloc'd, the caller's to free). */
static int events_text(const pn_grid *g, char **text, size_t *len)
{
    char label[64];
    label_of(g, label, sizeof label);
    *text = NULL;
    FILE *m = open_memstream(text, len);
    if (!m) return pn_error_set(PN_ERR_NOMEM, "out of memory for the trace");
    int bad = pn_trace_write_events(m, g->rank, label);
    if (fclose(m) != 0 || bad) {
        free(*text);
        *text = NULL;
        return pn_error_set(PN_ERR_NOMEM, "out of memory for the trace");
    }
    return PN_OK;
}

static int file_open(trace_file *tf, char *tmp, size_t size, const char *path)
{
    tf->path = path;
    PN_TRY(temp_name(tmp, size, path));
    if (!(tf->f = fopen(tmp, "w"))) return cannot_write(path, "create a file there");
    fputs("{\"traceEvents\":[\n", tf->f);
    return PN_OK;
}

/* Writes the tail, closes and renames; removes the temporary file on failure. */
static int file_close(trace_file *tf, const char *tmp, int rc, int ranks, double dropped)
{
    if (!tf->f) return rc;
    fprintf(tf->f, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"format\":"
                   "\"pipenet-trace\",\"version\":1,\"ranks\":%d,\"dropped_events\":%.0f}}\n",
            ranks, dropped);
    if (rc == PN_OK && (ferror(tf->f) || fflush(tf->f) != 0)) rc = cannot_write(tf->path, "write");
    if (fclose(tf->f) != 0 && rc == PN_OK) rc = cannot_write(tf->path, "write");
    if (rc == PN_OK && rename(tmp, tf->path) != 0) rc = cannot_write(tf->path, "rename it");
    if (rc != PN_OK) remove(tmp);
    return rc;
}

int pn_tracing_finish(pn_comm *c, const char *path)
{
    const pn_grid *g = pn_comm_grid(c);
    pn_trace_stop();
    pn_comm_watch(c, 0, "the trace"); /* its length follows the events, not a step's */
    char *text = NULL;
    size_t len = 0;
    int rc = events_text(g, &text, &len);
    double dropped = (double)pn_trace_dropped();
    pn_trace_reset();
    int agreed = pn_comm_agree(c, rc);
    if (agreed == PN_OK) agreed = pn_comm_sum(c, PN_SCOPE_WORLD, &dropped, 1);
    if (agreed < 0) {
        free(text);
        return agreed;
    }
    trace_file tf = {0};
    char tmp[TRACE_PATH_MAX];
    rc = g->rank == 0 ? file_open(&tf, tmp, sizeof tmp, path) : PN_OK;
    int sent = pn_comm_gather_each(c, text, len, take, &tf);
    free(text);
    if (g->rank == 0) rc = file_close(&tf, tmp, rc < 0 ? rc : sent, g->size, dropped);
    return pn_comm_agree_root(c, rc, "write the trace");
}

int pn_tracing_write_alone(const pn_grid *g, const char *path)
{
    char *text = NULL, alone[TRACE_PATH_MAX], tmp[TRACE_PATH_MAX + 32];
    size_t len = 0;
    pn_trace_stop();
    if ((size_t)snprintf(alone, sizeof alone, "%s.rank%d", path, g->rank) >= sizeof alone)
        return pn_error_set(PN_ERR_INVALID, "--trace %s: the path is too long", path);
    int rc = events_text(g, &text, &len);
    double dropped = (double)pn_trace_dropped();
    pn_trace_reset();
    trace_file tf = {0};
    if (rc == PN_OK) rc = file_open(&tf, tmp, sizeof tmp, alone);
    if (rc == PN_OK) rc = take(&tf, g->rank, text, len);
    free(text);
    return file_close(&tf, tmp, rc, 1, dropped);
}
