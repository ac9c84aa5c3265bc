/* Kernels of the CUDA stand-in (sim.h): a launch's checks, and its blocks run one after
 * another, the threads of a block as fibers under a scheduler.
 *
 * A block starts its threads in the configured order (PN_CUDA_SIM_ORDER); each runs
 * until it ends or waits at __syncthreads or a warp primitive. Threads that never wait
 * run one after another on one stack (a kernel without barriers costs a call per
 * thread); a thread that waits keeps its stack, and the next thread starts on a fresh
 * one. Once every thread has ended or waits, the scheduler releases what can go on: a
 * warp primitive when every lane its mask names waits at the same call, a barrier when
 * every thread of the block that has not ended waits at the same __syncthreads; then
 * it resumes them in the same order. What a GPU leaves undefined stops the process with
 * a message naming kernel, block and thread: a barrier some threads never reach (they
 * ended, or wait elsewhere), a mask naming a lane that has ended or does not exist, a
 * lane reading from one its mask leaves out, a block that cannot go on. */
#include "sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <map>

cuda_sim_thread_ids *cuda_sim_cur;

namespace sim {

struct gpu_thread {
    cuda_sim_thread_ids ids;
    int linear = 0;
    enum state_t { NEW, RUNNING, AT_BARRIER, AT_WARP, RUNNABLE, DONE } state = NEW;
    void *ctx = nullptr;
    /* where it waits, and for a warp primitive what it brings and gets */
    const char *file = nullptr;
    int line = 0;
    unsigned mask = 0;
    cuda_sim_shfl_kind kind = CUDA_SIM_SHFL_IDX;
    uint64_t value = 0, result = 0;
    int arg = 0, width = 32;
    void *tsan = nullptr;
};

struct block_run {
    launch *l = nullptr;
    uint3 idx;
    int n = 0;
    std::vector<gpu_thread> t;
    std::vector<int> order;
    int next_new = 0;
    void *sched = nullptr;      /* the scheduler's context while a fiber runs */
    void *tsan_sched = nullptr; /* the scheduler's ThreadSanitizer fiber */
    fiber_stack fresh;          /* the stack a new runner starts on */
    fiber_stack dead;           /* a runner's stack to return to the pool */
    bool has_dead = false;
    char barrier_sync, launch_end; /* addresses for ThreadSanitizer's happens-before */
    char warp_sync[32];
};

static block_run *cur_block;
static gpu_thread *cur_thread;
static uint64_t launches;

/* --- shared memory --- */

/* A block's __shared__ variables live in one arena of 48 KiB (a GPU block's static
 * shared memory), followed by a guard page: the rewriter makes each declaration a
 * reference to its slot (cuda_sim_shared_slot), given out in the order a launch's
 * threads first ask, the same for every block of the launch. Every block finds its
 * slots all-ones (poisoned), nothing another block left. Under ThreadSanitizer the
 * arena is mapped anew for every block, so that no block's accesses look ordered
 * with, or racing against, another's through memory a GPU would not share. */
enum { SHARED_BYTES = 48 * 1024 };

struct shared_slot {
    const void *key;
    size_t offset, bytes;
};

static char *arena;
static size_t arena_used; /* bytes given out in this launch */
static std::vector<shared_slot> slots;
static char shared_sync; /* ThreadSanitizer: the arena's mapping before the threads */

/* All-ones bytes, written so that ThreadSanitizer does not see them (a volatile loop,
 * not memset, which it intercepts): the poison is the stand-in's, not the program's. */
static void poison(void *addr, size_t bytes)
{
    volatile unsigned char *p = (volatile unsigned char *)addr;
    for (size_t i = 0; i < bytes; i++) p[i] = 0xff;
}

static void map_arena(bool fresh)
{
    static size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t bytes = (SHARED_BYTES + page - 1) / page * page;
    if (!arena) {
        void *m = mmap(nullptr, bytes + page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            cuda_sim_fatal("cannot map a block's shared memory: %s", strerror(errno));
        arena = (char *)m + bytes - SHARED_BYTES; /* it ends where the guard page begins */
        fresh = true;
    }
    if (fresh) {
        char *start = arena + SHARED_BYTES - bytes;
        if (mmap(start, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                 0) == MAP_FAILED)
            cuda_sim_fatal("cannot map a block's shared memory: %s", strerror(errno));
        poison(arena, SHARED_BYTES);
    } else {
        poison(arena, arena_used);
    }
}

/* A launch starts with no slots; a block with its slots poisoned. */
static void shared_for_launch()
{
    slots.clear();
    arena_used = 0;
    map_arena(false);
}

static void shared_for_block()
{
    map_arena(tsan_on());
    tsan_release(&shared_sync);
}

/* --- where we are, for messages --- */

static std::string kernel_name(const launch *l)
{
    char buf[512];
    const char *file = strrchr(l->site.file, '/');
    snprintf(buf, sizeof buf, "kernel %s (launched at %s:%d)", l->site.kernel,
             file ? file + 1 : l->site.file, l->site.line);
    return buf;
}

static std::string thread_name(const block_run *b, const gpu_thread *t)
{
    char buf[640];
    snprintf(buf, sizeof buf, "%s block (%u,%u,%u) thread (%u,%u,%u)", kernel_name(b->l).c_str(),
             b->idx.x, b->idx.y, b->idx.z, t->ids.thread_idx.x, t->ids.thread_idx.y,
             t->ids.thread_idx.z);
    return buf;
}

std::string current_gpu_thread()
{
    return cur_block && cur_thread ? thread_name(cur_block, cur_thread) : std::string();
}

static const char *base_name(const char *file)
{
    const char *s = file ? strrchr(file, '/') : nullptr;
    return s ? s + 1 : file ? file : "?";
}

/* --- orders --- */

uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void make_order(std::vector<int> &o, int n, uint64_t key)
{
    o.resize((size_t)n);
    for (int i = 0; i < n; i++) o[(size_t)i] = i;
    const settings &s = config();
    if (s.run_order == order::reverse) {
        std::reverse(o.begin(), o.end());
    } else if (s.run_order == order::random) {
        uint64_t r = mix(s.seed ^ mix(key));
        for (int i = n - 1; i > 0; i--) {
            r = mix(r);
            int j = (int)(r % (uint64_t)(i + 1));
            std::swap(o[(size_t)i], o[(size_t)j]);
        }
    }
}

/* --- fibers of a block --- */

static void enter(block_run *b, gpu_thread *t)
{
    cur_thread = t;
    cuda_sim_cur = &t->ids;
    (void)b;
}

/* Runs new threads of cur_block one after another on this fiber's stack until one waits
 * (it keeps the stack) or none is left. Under ThreadSanitizer one thread per fiber, so
 * that each GPU thread is a thread of its own to it. */
static void runner(void *arg)
{
    block_run *b = (block_run *)arg;
    fiber_stack mine = b->fresh;
    bool one = tsan_on();
    while (b->next_new < b->n) {
        gpu_thread *t = &b->t[(size_t)b->order[(size_t)b->next_new++]];
        t->state = gpu_thread::RUNNING;
        if (one) {
            t->tsan = tsan_fiber_create();
            tsan_switch(t->tsan);
            tsan_acquire(b->l);
            tsan_acquire(&shared_sync);
        }
        enter(b, t);
        b->l->invoke(b->l->pack);
        t->state = gpu_thread::DONE;
        if (one) {
            tsan_release(&b->launch_end);
            tsan_switch(b->tsan_sched);
            tsan_fiber_destroy(t->tsan);
            t->tsan = nullptr;
            break;
        }
    }
    cur_thread = nullptr;
    cuda_sim_cur = nullptr;
    b->dead = mine;
    b->has_dead = true;
    tsan_switch(b->tsan_sched);
    void *gone;
    fiber_switch(&gone, b->sched);
    cuda_sim_fatal("a finished fiber was resumed");
}

/* The running thread waits: back to the scheduler until it is released. */
static void wait_here(gpu_thread *t, void *sync_addr)
{
    block_run *b = cur_block;
    tsan_release(sync_addr);
    tsan_switch(b->tsan_sched);
    cur_thread = nullptr;
    cuda_sim_cur = nullptr;
    fiber_switch(&t->ctx, b->sched);
    enter(b, t);
    tsan_acquire(sync_addr);
}

static void reclaim(block_run *b)
{
    if (b->has_dead) {
        stack_put(b->dead);
        b->has_dead = false;
    }
}

/* The lane a warp primitive of lane `lane` reads, CUDA's rules; -1: its own value. */
static int source_lane(const gpu_thread *t, int lane)
{
    int w = t->width > 0 && t->width <= 32 ? t->width : 32;
    int seg = lane / w * w, in_seg = lane - seg;
    switch (t->kind) {
    case CUDA_SIM_SHFL_IDX: return seg + ((t->arg % w) + w) % w;
    case CUDA_SIM_SHFL_UP: return in_seg - t->arg < 0 ? -1 : lane - t->arg;
    case CUDA_SIM_SHFL_DOWN: return in_seg + t->arg >= w ? -1 : lane + t->arg;
    case CUDA_SIM_SHFL_XOR: {
        int src = lane ^ t->arg;
        return src >= seg + w ? -1 : src; /* later segments: own value; earlier ones may be read */
    }
    default: return -1;
    }
}

static std::string where_waits(const gpu_thread *t)
{
    char buf[256];
    if (t->state == gpu_thread::DONE) return "has ended";
    snprintf(buf, sizeof buf, "waits at %s %s:%d",
             t->state == gpu_thread::AT_BARRIER ? "__syncthreads" : "a warp primitive",
             base_name(t->file), t->line);
    return buf;
}

/* Releases the warp primitives every named lane waits at, then the barrier if the whole
 * block waits there; stops with a message where the block cannot go on. */
static void resolve(block_run *b)
{
    bool progress = false;
    int n = b->n;
    for (int i = 0; i < n; i++) {
        gpu_thread *t = &b->t[(size_t)i];
        if (t->state != gpu_thread::AT_WARP) continue;
        int warp = i / 32, lane = i % 32;
        if (!(t->mask >> lane & 1u))
            cuda_sim_fatal("%s: a warp primitive at %s:%d with mask %#x, which does not name the "
                           "calling lane %d",
                           thread_name(b, t).c_str(), base_name(t->file), t->line, t->mask, lane);
        bool complete = true;
        for (int l = 0; l < 32 && complete; l++) {
            if (!(t->mask >> l & 1u)) continue;
            int k = warp * 32 + l;
            if (k >= n)
                cuda_sim_fatal(
                    "%s: the mask %#x of the warp primitive at %s:%d names lane %d, which "
                    "this block of %d threads does not have",
                    thread_name(b, t).c_str(), t->mask, base_name(t->file), t->line, l, n);
            gpu_thread *o = &b->t[(size_t)k];
            if (o->state == gpu_thread::DONE)
                cuda_sim_fatal(
                    "%s: the warp primitive at %s:%d (mask %#x) names lane %d, which has "
                    "ended",
                    thread_name(b, t).c_str(), base_name(t->file), t->line, t->mask, l);
            if (o->state != gpu_thread::AT_WARP || o->line != t->line || o->file != t->file ||
                o->mask != t->mask || o->kind != t->kind)
                complete = false; /* not there yet, or elsewhere: the deadlock check names it */
        }
        if (!complete) continue;
        uint64_t ballot = 0;
        for (int l = 0; l < 32; l++)
            if (t->mask >> l & 1u && b->t[(size_t)(warp * 32 + l)].value) ballot |= 1ull << l;
        for (int l = 0; l < 32; l++) {
            if (!(t->mask >> l & 1u)) continue;
            gpu_thread *o = &b->t[(size_t)(warp * 32 + l)];
            if (o->kind == CUDA_SIM_VOTE_BALLOT) {
                o->result = ballot;
            } else {
                int src = source_lane(o, l);
                if (src < 0) {
                    o->result = o->value;
                } else if (!(t->mask >> src & 1u)) {
                    cuda_sim_fatal(
                        "%s: the shuffle at %s:%d reads lane %d, which its mask %#x leaves "
                        "out (its value is undefined)",
                        thread_name(b, o).c_str(), base_name(o->file), o->line, src, t->mask);
                } else {
                    o->result = b->t[(size_t)(warp * 32 + src)].value;
                }
            }
            o->state = gpu_thread::RUNNABLE;
        }
        progress = true;
    }
    if (progress) return;
    /* the barrier: every thread that has not ended waits at the same __syncthreads */
    gpu_thread *first = nullptr, *ended = nullptr, *other = nullptr;
    for (int i = 0; i < n; i++) {
        gpu_thread *t = &b->t[(size_t)i];
        if (t->state == gpu_thread::DONE && !ended) ended = t;
        if (t->state == gpu_thread::AT_BARRIER && !first) first = t;
    }
    for (int i = 0; first && i < n && !other; i++) {
        gpu_thread *t = &b->t[(size_t)i];
        if (t->state != gpu_thread::DONE && (t->state != gpu_thread::AT_BARRIER ||
                                             t->line != first->line || t->file != first->file))
            other = t;
    }
    if (first && !other && !ended) {
        for (int i = 0; i < n; i++) b->t[(size_t)i].state = gpu_thread::RUNNABLE;
        return;
    }
    if (first && ended)
        cuda_sim_fatal("%s: divergent __syncthreads at %s:%d: thread (%u,%u,%u) of the block has "
                       "ended and never reaches it (every thread of a block must)",
                       thread_name(b, first).c_str(), base_name(first->file), first->line,
                       ended->ids.thread_idx.x, ended->ids.thread_idx.y, ended->ids.thread_idx.z);
    if (first && other)
        cuda_sim_fatal("%s: divergent __syncthreads at %s:%d: thread (%u,%u,%u) %s",
                       thread_name(b, first).c_str(), base_name(first->file), first->line,
                       other->ids.thread_idx.x, other->ids.thread_idx.y, other->ids.thread_idx.z,
                       where_waits(other).c_str());
    /* warp primitives whose lanes wait at different calls */
    for (int i = 0; i < n; i++) {
        gpu_thread *t = &b->t[(size_t)i];
        if (t->state != gpu_thread::AT_WARP) continue;
        for (int l = 0; l < 32; l++) {
            if (!(t->mask >> l & 1u)) continue;
            gpu_thread *o = &b->t[(size_t)(i / 32 * 32 + l)];
            if (o != t && (o->state != gpu_thread::AT_WARP || o->line != t->line ||
                           o->file != t->file || o->mask != t->mask))
                cuda_sim_fatal(
                    "%s: the warp primitive at %s:%d (mask %#x) waits for lane %d, which "
                    "%s%s: divergent warp",
                    thread_name(b, t).c_str(), base_name(t->file), t->line, t->mask, l,
                    where_waits(o).c_str(),
                    o->state == gpu_thread::AT_WARP && o->mask != t->mask ? " with another mask"
                                                                          : "");
        }
    }
    cuda_sim_fatal("%s: the block cannot go on (no barrier or warp primitive can complete)",
                   kernel_name(b->l).c_str());
}

static void run_block(launch *l, block_run *b, uint3 idx, uint64_t key)
{
    b->l = l;
    b->idx = idx;
    b->n = (int)(l->block.x * l->block.y * l->block.z);
    b->t.assign((size_t)b->n, gpu_thread());
    for (int i = 0; i < b->n; i++) {
        gpu_thread *t = &b->t[(size_t)i];
        t->linear = i;
        t->ids.thread_idx = uint3{(unsigned)i % l->block.x, (unsigned)i / l->block.x % l->block.y,
                                  (unsigned)i / (l->block.x * l->block.y)};
        t->ids.block_idx = idx;
        t->ids.block_dim = l->block;
        t->ids.grid_dim = l->grid;
    }
    make_order(b->order, b->n, key);
    b->next_new = 0;
    shared_for_block();
    for (;;) {
        while (b->next_new < b->n) {
            b->fresh = stack_get();
            void *ctx = fiber_make(b->fresh, runner, b);
            fiber_switch(&b->sched, ctx);
            reclaim(b);
        }
        int done = 0;
        for (const gpu_thread &t : b->t) done += t.state == gpu_thread::DONE;
        if (done == b->n) break;
        resolve(b);
        for (int k : b->order) {
            gpu_thread *t = &b->t[(size_t)k];
            if (t->state != gpu_thread::RUNNABLE) continue;
            t->state = gpu_thread::RUNNING;
            tsan_switch(t->tsan);
            fiber_switch(&b->sched, t->ctx);
            reclaim(b);
        }
    }
}

/* PN_CUDA_SIM_PROFILE=1: at exit, the kernels that took the stand-in's time. */
struct profile_entry {
    long launches = 0, threads = 0;
    double seconds = 0;
};
static std::map<std::string, profile_entry> *profile;

static void print_profile()
{
    std::vector<std::pair<std::string, profile_entry>> v(profile->begin(), profile->end());
    std::sort(v.begin(), v.end(),
              [](const auto &a, const auto &b) { return a.second.seconds > b.second.seconds; });
    double total = 0;
    for (const auto &e : v) total += e.second.seconds;
    fprintf(stderr, "cuda-sim profile: %.3f s in kernels\n", total);
    for (size_t i = 0; i < v.size() && i < 15; i++)
        fprintf(stderr, "  %7.3f s %8ld launches %12ld threads  %s\n", v[i].second.seconds,
                v[i].second.launches, v[i].second.threads, v[i].first.c_str());
}

void run_launch(launch *l)
{
    static const bool profiling =
        getenv("PN_CUDA_SIM_PROFILE") && getenv("PN_CUDA_SIM_PROFILE")[0] == '1';
    double t0 = profiling ? now() : 0;
    static block_run b; /* its vectors keep their room from launch to launch */
    uint64_t serial = ++launches;
    block_run *outer = cur_block;
    cur_block = &b;
    shared_for_launch();
    b.tsan_sched = tsan_fiber_current();
    tsan_release(l);
    long blocks = (long)l->grid.x * l->grid.y * l->grid.z;
    if (blocks > (1L << 26)) /* the order is a vector of ints: 256 MiB of them at most */
        cuda_sim_fatal("%s: %ld blocks, more than the stand-in runs (2^26)",
                       kernel_name(l).c_str(), blocks);
    std::vector<int> border;
    make_order(border, (int)blocks, mix(serial));
    for (long k = 0; k < blocks; k++) {
        long i = border[(size_t)k];
        uint3 idx = {(unsigned)(i % l->grid.x), (unsigned)(i / l->grid.x % l->grid.y),
                     (unsigned)(i / ((long)l->grid.x * l->grid.y))};
        run_block(l, &b, idx, mix(serial * 1000003u + (uint64_t)i));
    }
    tsan_acquire(&b.launch_end);
    cur_block = outer;
    if (profiling) {
        if (!profile) {
            profile = new std::map<std::string, profile_entry>;
            atexit(print_profile);
        }
        profile_entry &e = (*profile)[kernel_name(l)];
        e.launches++;
        e.threads += blocks * (long)(l->block.x * l->block.y * l->block.z);
        e.seconds += now() - t0;
    }
}

} // namespace sim

using namespace sim;

/* --- what a running GPU thread calls --- */

static gpu_thread *need_thread(const char *what, const char *file, int line)
{
    if (!cur_block || !cur_thread)
        cuda_sim_fatal("%s at %s:%d called outside a kernel", what, file, line);
    return cur_thread;
}

extern "C" void cuda_sim_syncthreads(const char *file, int line)
{
    gpu_thread *t = need_thread("__syncthreads", file, line);
    t->state = gpu_thread::AT_BARRIER;
    t->file = file;
    t->line = line;
    wait_here(t, &cur_block->barrier_sync);
}

extern "C" uint64_t cuda_sim_shfl(const char *file, int line, cuda_sim_shfl_kind kind,
                                  unsigned mask, uint64_t value, int lane_arg, int width)
{
    gpu_thread *t = need_thread("a warp primitive", file, line);
    t->state = gpu_thread::AT_WARP;
    t->file = file;
    t->line = line;
    t->mask = mask;
    t->kind = kind;
    t->value = value;
    t->arg = lane_arg;
    t->width = width;
    wait_here(t, &cur_block->warp_sync[t->linear / 32 % 32]);
    return t->result;
}

extern "C" void cuda_sim_syncwarp(const char *file, int line, unsigned mask)
{
    cuda_sim_shfl(file, line, CUDA_SIM_SHFL_IDX, mask, 0, 0, 32);
}

extern "C" unsigned cuda_sim_activemask(void)
{
    gpu_thread *t = need_thread("__activemask", "?", 0);
    unsigned m = 0;
    int warp = t->linear / 32;
    for (int l = 0; l < 32; l++) {
        int k = warp * 32 + l;
        if (k < cur_block->n && cur_block->t[(size_t)k].state != gpu_thread::DONE) m |= 1u << l;
    }
    return m;
}

extern "C" void *cuda_sim_shared_slot(const void *key, size_t bytes, size_t align)
{
    if (!cur_block || !cur_thread) cuda_sim_fatal("a __shared__ variable used outside a kernel");
    for (const shared_slot &sl : slots)
        if (sl.key == key) return arena + sl.offset;
    size_t at = (arena_used + align - 1) / align * align;
    if (at + bytes > SHARED_BYTES)
        cuda_sim_fatal("%s: its __shared__ variables take more than %d bytes, a block's static "
                       "shared memory",
                       thread_name(cur_block, cur_thread).c_str(), SHARED_BYTES);
    slots.push_back(shared_slot{key, at, bytes});
    arena_used = at + bytes;
    return arena + at;
}

extern "C" void cuda_sim_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
