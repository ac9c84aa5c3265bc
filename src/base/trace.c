/* The timeline recorder (trace.h): one growable array of fixed-size events per
 * process, filled by the main thread, and the text of those events in Chrome's
 * trace-event format. */
#include "base/trace.h"

#include <stdlib.h>

#include "base/error.h"

bool pn_trace_on = false;

typedef struct trace_event {
    double t0, t1;    /* local monotonic clock, seconds */
    const char *name; /* a fixed string or a layer's name */
    const char *cat;
    const char *node; /* NULL: none */
    long step;        /* -1: none */
    int micro;        /* -1: none */
} trace_event;

enum { FIRST_CAP = 1 << 12 };

static struct {
    trace_event *ev;
    size_t n, cap, max, dropped;
    double offset, origin;
} T;

int pn_trace_start(size_t max_events)
{
    pn_trace_reset();
    T.max = max_events ? max_events : PN_TRACE_DEFAULT_CAP;
    T.cap = T.max < FIRST_CAP ? T.max : FIRST_CAP;
    if (!(T.ev = malloc(T.cap * sizeof *T.ev)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory for the trace's %zu events", T.cap);
    pn_trace_on = true;
    return PN_OK;
}

void pn_trace_stop(void) { pn_trace_on = false; }

void pn_trace_reset(void)
{
    pn_trace_on = false;
    free(T.ev);
    T.ev = NULL;
    T.n = T.cap = T.max = T.dropped = 0;
}

void pn_trace_set_clock(double offset, double origin)
{
    T.offset = offset;
    T.origin = origin;
}

/* Doubles the buffer up to the cap; false when it is full. */
static bool grow(void)
{
    if (T.cap >= T.max) return false;
    size_t cap = T.cap * 2 < T.max ? T.cap * 2 : T.max;
    trace_event *ev = realloc(T.ev, cap * sizeof *ev);
    if (!ev) return false;
    T.ev = ev;
    T.cap = cap;
    return true;
}

void pn_trace_add(const char *name, const char *cat, const char *node, long step, int micro,
                  double t0)
{
    double t1 = pn_now();
    if (T.n == T.cap && !grow()) {
        T.dropped++;
        return;
    }
    T.ev[T.n++] = (trace_event){t0, t1, name, cat, node, step, micro};
}

size_t pn_trace_count(void) { return T.n; }
size_t pn_trace_dropped(void) { return T.dropped; }

void pn_trace_write_string(FILE *out, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    putc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            putc('\\', out);
            putc(*p, out);
        } else if (*p < 0x20) {
            fprintf(out, "\\u00%c%c", hex[*p >> 4], hex[*p & 15]);
        } else {
            putc(*p, out); /* UTF-8 passes through */
        }
    }
    putc('"', out);
}

static double micros(double t) { return (t + T.offset - T.origin) * 1e6; }

int pn_trace_write_events(FILE *out, int pid, const char *label)
{
    fprintf(out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":",
            pid);
    pn_trace_write_string(out, label);
    fprintf(out, "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":1,"
                 "\"args\":{\"sort_index\":%d}},\n"
                 "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":1,"
                 "\"args\":{\"name\":\"main\"}}",
            pid, pid, pid);
    double last = T.origin - T.offset;
    for (size_t i = 0; i < T.n; i++) {
        const trace_event *e = &T.ev[i];
        double dur = e->t1 > e->t0 ? (e->t1 - e->t0) * 1e6 : 0.0;
        fputs(",\n{\"ph\":\"X\",\"name\":", out);
        pn_trace_write_string(out, e->name);
        fputs(",\"cat\":", out);
        pn_trace_write_string(out, e->cat);
        fprintf(out, ",\"pid\":%d,\"tid\":1,\"ts\":%.3f,\"dur\":%.3f,\"args\":{", pid,
                micros(e->t0), dur);
        const char *sep = "";
        if (e->step >= 0) fprintf(out, "\"step\":%ld", e->step), sep = ",";
        if (e->micro >= 0) fprintf(out, "%s\"micro\":%d", sep, e->micro), sep = ",";
        if (e->node) {
            fprintf(out, "%s\"node\":", sep);
            pn_trace_write_string(out, e->node);
        }
        fputs("}}", out);
        if (e->t1 > last) last = e->t1;
    }
    if (T.dropped)
        fprintf(out, ",\n{\"ph\":\"i\",\"s\":\"p\",\"name\":\"trace events dropped\","
                     "\"cat\":\"trace\",\"pid\":%d,\"tid\":1,\"ts\":%.3f,"
                     "\"args\":{\"dropped\":%zu,\"kept\":%zu}}",
                pid, micros(last), T.dropped, T.n);
    return ferror(out) ? -1 : 0;
}
