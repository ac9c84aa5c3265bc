/* The trace file of a run (tracing.h): the clocks compared at the start, each
 * rank's events as text in memory at the end, sent to rank 0 one rank at a time and
 * written there between the file's header and its tail, into a file put in place
 * whole (base/out_file.h). */
#include "train/tracing.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "base/out_file.h"
#include "base/path.h"
#include "base/trace.h"

enum { TRACE_PATH_MAX = 1024 + 64 }; /* a --trace path and its suffixes */

static void label_of(const pn_grid *g, char *label, size_t size)
{
    snprintf(label, size, "rank %d: stage %d, replica %d", g->rank, g->stage, g->replica);
}

int pn_tracing_start(pn_comm *c, const char *path)
{
    const pn_grid *g = pn_comm_grid(c);
    int rc = PN_OK;
    if (g->rank == 0) rc = pn_out_check(path, "--trace"); /* a bad path fails now */
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
    pn_out_file out;
    bool open;
    bool any; /* an event written: the next one needs a comma */
} trace_file;

static int take(void *ctx, int rank, const void *bytes, size_t n)
{
    trace_file *tf = ctx;
    if (!tf->open) return PN_ERR_IO; /* the file could not be opened: already reported */
    if (n == 0) return PN_OK;
    if (tf->any) fputs(",\n", tf->out.f);
    tf->any = true;
    if (fwrite(bytes, 1, n, tf->out.f) != n)
        return pn_error_set(PN_ERR_IO, "--trace %s: cannot write: %s", tf->out.path,
                            strerror(errno));
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

static int file_open(trace_file *tf, const char *path)
{
    PN_TRY(pn_out_open(&tf->out, path, "--trace"));
    tf->open = true;
    fputs("{\"traceEvents\":[\n", tf->out.f);
    return PN_OK;
}

/* Writes the tail and puts the file in place; on failure the path keeps what it held. */
static int file_close(trace_file *tf, int rc, int ranks, double dropped)
{
    if (!tf->open) return rc;
    tf->open = false;
    fprintf(tf->out.f, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"format\":"
                       "\"pipenet-trace\",\"version\":1,\"ranks\":%d,\"dropped_events\":%.0f}}\n",
            ranks, dropped);
    if (rc < 0) {
        pn_out_abandon(&tf->out);
        return rc;
    }
    return pn_out_commit(&tf->out);
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
    rc = g->rank == 0 ? file_open(&tf, path) : PN_OK;
    int sent = pn_comm_gather_each(c, text, len, take, &tf);
    free(text);
    if (g->rank == 0) rc = file_close(&tf, rc < 0 ? rc : sent, g->size, dropped);
    return pn_comm_agree_root(c, rc, "write the trace");
}

int pn_tracing_write_alone(const pn_grid *g, const char *path)
{
    char *text = NULL, alone[TRACE_PATH_MAX];
    size_t len = 0;
    pn_trace_stop();
    if (pn_path_is_stream(path)) { /* "<stream>.rank<N>" would be a file beside a device */
        pn_trace_reset();
        pn_log_warn("--trace %s is not a regular file: rank %d's own track is not written",
                    path, g->rank);
        return PN_OK;
    }
    if ((size_t)snprintf(alone, sizeof alone, "%s.rank%d", path, g->rank) >= sizeof alone)
        return pn_error_set(PN_ERR_INVALID, "--trace %s: the path is too long", path);
    int rc = events_text(g, &text, &len);
    double dropped = (double)pn_trace_dropped();
    pn_trace_reset();
    trace_file tf = {0};
    if (rc == PN_OK) rc = file_open(&tf, alone);
    if (rc == PN_OK) rc = take(&tf, g->rank, text, len);
    free(text);
    return file_close(&tf, rc, 1, dropped);
}
