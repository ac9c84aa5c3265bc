/* Streams and events of the CUDA stand-in (sim.h). Work queued on a stream runs only
 * when the host must see it: a synchronize, a query (after answering "not ready" once),
 * a copy to the host, an event another stream waits on. So a missing stream or event
 * wait gives the wrong result every time, not once in a thousand runs. The exception is
 * asynchronous work (NCCL's messages): it starts as soon as everything its stream
 * orders before it has run, as a GPU would start it, because another process may be
 * waiting for it; that pulls in exactly the work it was ordered after, nothing more.
 * A stream made without cudaStreamNonBlocking is ordered with its device's legacy
 * default stream both ways, as CUDA's legacy stream semantics say. */
#include "sim.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <unordered_set>

namespace sim {

static std::vector<stream *> streams;
static std::unordered_set<stream *> known;
static stream *legacy[16];
static std::vector<void (*)(void)> hooks;
static int next_id = 1;
static int scope_depth;

double now()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

std::vector<stream *> &all_streams() { return streams; }

stream *stream_new(int device, bool blocking)
{
    stream *s = new stream;
    s->device = device;
    s->blocking = blocking;
    s->id = next_id++;
    streams.push_back(s);
    known.insert(s);
    return s;
}

/* A destroyed stream whose work has all run leaves the lists; its struct is kept (a
 * few bytes), since waits queued on other streams may still read its count. */
static void forget(stream *s)
{
    streams.erase(std::remove(streams.begin(), streams.end(), s), streams.end());
    known.erase(s);
}


stream *stream_get(cudaStream_t handle, cudaError_t *err)
{
    *err = cudaSuccess;
    if (!handle || handle == cudaStreamLegacy || handle == cudaStreamPerThread) {
        int d = current_device_index();
        if (!legacy[d]) {
            legacy[d] = stream_new(d, true);
            legacy[d]->is_default = true;
        }
        return legacy[d];
    }
    stream *s = (stream *)handle;
    if (!known.count(s) || s->destroyed) {
        *err = cudaErrorInvalidResourceHandle;
        return nullptr;
    }
    return s;
}

static void push(stream *s, op *o)
{
    o->seq = ++s->enqueued;
    if (o->kind == op::ASYNC) s->pending_async++;
    s->q.push_back(o);
}

static op *wait_op(stream *on, uint64_t until)
{
    op *w = new op;
    w->kind = op::WAIT;
    w->on = on;
    w->until = until;
    w->what = "a wait for stream " + std::to_string(on->id);
    return w;
}

void enqueue(stream *s, op *o)
{
    /* legacy semantics: the default stream after every blocking stream of its device,
     * and a blocking stream after the default stream */
    if (s->is_default) {
        for (stream *b : streams)
            if (b != s && b->device == s->device && b->blocking && !b->destroyed &&
                b->enqueued > b->completed)
                push(s, wait_op(b, b->enqueued));
    } else if (s->blocking) {
        stream *d = legacy[s->device];
        if (d && d->enqueued > d->completed) push(s, wait_op(d, d->enqueued));
    }
    push(s, o);
}

static void retire(stream *s, op *o)
{
    s->q.pop_front();
    s->completed = o->seq;
    if (o->destroy) o->destroy(o->ctx);
    delete o;
}

/* Runs the head of s once: false when it must wait (a message, or a stream it waits
 * for that must wait). */
static bool step_head(stream *s, bool block)
{
    op *o = s->q.front();
    switch (o->kind) {
    case op::WORK:
        mem_open();
        o->run(o->ctx);
        break;
    case op::RECORD:
        if (o->stamp) *o->stamp = now();
        break;
    case op::WAIT:
        if (o->on->completed < o->until && !run_stream(o->on, o->until, block)) return false;
        break;
    case op::ASYNC:
        mem_open();
        if (!o->started) {
            if (!o->async->start(o->ctx)) return false;
            o->started = true;
        }
        if (!o->async->test(o->ctx)) return false;
        mem_open();
        o->async->finish(o->ctx);
        s->pending_async--;
        break;
    }
    retire(s, o);
    return true;
}

static bool step(stream *s, bool block)
{
    if (s->running) return false; /* a wait inside its head's run came back to it */
    s->running = true;
    bool ran = step_head(s, block);
    s->running = false;
    return ran;
}

/* What s waits for at its head, following waits on other streams: for a message. */
static std::string blocked_on(stream *s)
{
    for (int hops = 0; hops < 64 && !s->q.empty(); hops++) {
        op *o = s->q.front();
        if (o->kind == op::WAIT) {
            s = o->on;
            continue;
        }
        char buf[512] = "";
        if (o->kind == op::ASYNC && o->async->describe) o->async->describe(o->ctx, buf, sizeof buf);
        return std::string(buf[0] ? buf : o->what.c_str()) + " on stream " + std::to_string(s->id) +
               " (queued by " + caller_name(o->caller) + ")";
    }
    return "?";
}

static void nap()
{
    struct timespec ts = {0, 20000};
    nanosleep(&ts, nullptr);
}

bool run_stream(stream *s, uint64_t until, bool block)
{
    double since = 0;
    bool warned = false;
    long polls = 0;
    while (s->completed < until) {
        if (s->q.empty())
            cuda_sim_fatal("internal: stream %d has run dry at %lu of %lu", s->id,
                           (unsigned long)s->completed, (unsigned long)until);
        if (step(s, block)) continue;
        if (!block) return false;
        /* blocked by a message: move messages, and report a long wait once */
        progress();
        double t = now();
        if (!since) since = t;
        if (!warned && t - since > config().sync_warn_s) {
            cuda_sim_warn("a synchronizing call has waited %.0f s for %s", t - since,
                          blocked_on(s).c_str());
            warned = true;
        }
        if (++polls > 1000) nap(); /* other ranks may need this core */
    }
    return true;
}

void run_device(int device)
{
    /* a copy of the list: a destroyed stream that drains is forgotten meanwhile */
    std::vector<stream *> list = streams;
    for (stream *s : list)
        if (known.count(s) && (device < 0 || s->device == device)) run_stream(s, s->enqueued, true);
    for (stream *s : list)
        if (known.count(s) && s->destroyed && s->completed == s->enqueued) forget(s);
}

void stream_destroy(stream *s)
{
    s->destroyed = true;
    run_stream(s, s->enqueued, false); /* a GPU runs it anyway: no reason to keep it */
    if (s->completed == s->enqueued) forget(s);
}

void add_progress_hook(void (*fn)(void)) { hooks.push_back(fn); }

void progress()
{
    static bool busy;
    if (busy) return;
    busy = true;
    for (void (*fn)(void) : hooks) fn();
    std::vector<stream *> list;
    for (stream *s : streams)
        if (s->pending_async > 0) list.push_back(s);
    for (stream *s : list) {
        if (!known.count(s) || s->running) continue;
        uint64_t last = 0; /* the last asynchronous work queued: start it if it may */
        for (op *o : s->q)
            if (o->kind == op::ASYNC) last = o->seq;
        if (last) run_stream(s, last, false);
        if (s->destroyed && s->completed == s->enqueued) forget(s);
    }
    busy = false;
}

api_scope::api_scope()
{
    if (scope_depth++ == 0) progress();
}

api_scope::~api_scope()
{
    if (--scope_depth == 0) mem_close();
}

} // namespace sim
