/* libnccl.so of pipenet's CUDA stand-in (tools/cuda-sim): NCCL over MPI between the
 * processes of MPI_COMM_WORLD, on the tags from 2^30 up (a communicator's 4 tags come
 * from its id: which rank made it, and a serial number).
 *
 * What NCCL promises and asks is kept, so that code which would hang or race on GPUs
 * does here:
 *  - every operation is queued on its stream and starts once the stream gets there
 *    (libcudart starts it as soon as what it is ordered after has run): it copies its
 *    device buffer to a host buffer, sends it, and writes what it receives into device
 *    memory when the message is complete; the stream goes on after that;
 *  - a send completes only when its receive has been posted (MPI_Issend), so two ranks
 *    that both send first on one stream wait for each other, as on GPUs, unless the
 *    sends and receives are in one ncclGroupStart/End;
 *  - the first send or receive between two ranks of a communicator makes a connection
 *    that needs both ranks (NCCL's lazy connection): on a non-blocking communicator
 *    the call returns ncclInProgress until the peer has called its side too;
 *  - a non-blocking communicator's next call waits for the last to finish
 *    (ncclCommGetAsyncError polled to ncclSuccess), else ncclInvalidUsage;
 *  - making a communicator needs every rank (ncclInProgress until then), two ranks of
 *    one node on one GPU are refused ("Duplicate GPU detected"), an abort cancels what
 *    is in flight;
 *  - collectives add in rank order: every rank gets the same bits.
 * A rank that stops leaves the others' operations incomplete, never blocks their host:
 * the caller's polling (pipenet's stall watchdog) sees it. */
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cuda_sim_api.h"
#include "nccl.h"

namespace nccl_sim {

const uint32_t ID_MAGIC = 0x70e5c0de;
enum { TAG_INIT = 0, TAG_CONNECT = 1, TAG_P2P = 2, TAG_COLL = 3 };

struct id_fields {
    uint32_t magic;
    int creator; /* world rank that made it */
    uint32_t serial;
};

/* What a rank tells the id's maker when it joins, and the answer. */
struct hello {
    int nccl_rank, nranks, pci;
    uint64_t host;
};

struct op_state;

enum comm_state { JOINING, READY, FAILED, ABORTED };

} // namespace nccl_sim

struct ncclComm {
    using hello = nccl_sim::hello;
    using comm_state = nccl_sim::comm_state;
    int nranks = 0, rank = 0, device = 0, pci = 0, world_rank = 0;
    int tag = 0; /* the first of its 4 tags */
    bool blocking = true;
    comm_state state = nccl_sim::JOINING;
    ncclResult_t result = ncclSuccess; /* why it failed */
    bool busy = false;                 /* a non-blocking call not yet polled to its end */
    bool finalizing = false, destroyed = false;
    int pending = 0; /* operations queued and not finished */
    std::vector<int> world;
    /* joining: the maker collects hellos and answers with the member list */
    bool maker = false;
    std::vector<hello> hellos;
    std::vector<MPI_Request> join_reqs;
    std::vector<int> join_reply; /* [result, dup_a, dup_b, world...] */
    hello mine;
    /* connections to peers: 0 none, 1 being made, 2 made */
    std::vector<int> connected;
    std::vector<MPI_Request> connect_reqs; /* 2 per peer */
    std::vector<int> hello_in, hello_out;
    std::vector<nccl_sim::op_state *> ops; /* in flight, for an abort */
    char last_error[512] = "";
};

namespace nccl_sim {

std::vector<ncclComm *> comms;
char global_error[512];
uint32_t serial;
int tag_ub = -1;
bool hooked;

void set_error(ncclComm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void set_error(ncclComm *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c ? c->last_error : global_error, sizeof global_error, fmt, ap);
    va_end(ap);
}

size_t type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    }
    return 0;
}

int world_rank()
{
    int r = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

uint64_t host_hash()
{
    char name[256] = "";
    gethostname(name, sizeof name - 1);
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

bool test_all(std::vector<MPI_Request> &reqs)
{
    if (reqs.empty()) return true;
    int flag = 0;
    MPI_Testall((int)reqs.size(), reqs.data(), &flag, MPI_STATUSES_IGNORE);
    return flag != 0;
}

void cancel_all(std::vector<MPI_Request> &reqs)
{
    for (MPI_Request &r : reqs)
        if (r != MPI_REQUEST_NULL) {
            MPI_Cancel(&r);
            MPI_Request_free(&r);
        }
}

/* --- joining --- */

void join_progress(ncclComm *c)
{
    if (c->state != JOINING) return;
    if (c->maker && c->join_reply.empty()) {
        /* every hello in: check them, then answer each member with the member list */
        std::vector<MPI_Status> st(c->join_reqs.size());
        int flag = 0;
        MPI_Testall((int)c->join_reqs.size(), c->join_reqs.data(), &flag, st.data());
        if (!flag) return;
        std::vector<int> world((size_t)c->nranks, -1);
        std::vector<hello> all((size_t)c->nranks);
        world[(size_t)c->rank] = c->world_rank;
        all[(size_t)c->rank] = c->mine;
        int result = ncclSuccess, dup_a = -1, dup_b = -1;
        for (size_t i = 0; i < c->hellos.size(); i++) {
            const hello &h = c->hellos[i];
            if (h.nranks != c->nranks || h.nccl_rank < 0 || h.nccl_rank >= c->nranks ||
                world[(size_t)h.nccl_rank] != -1) {
                result = ncclInvalidUsage;
                continue;
            }
            world[(size_t)h.nccl_rank] = st[i].MPI_SOURCE;
            all[(size_t)h.nccl_rank] = h;
        }
        for (int a = 0; a < c->nranks && result == ncclSuccess; a++)
            for (int b = a + 1; b < c->nranks && dup_a < 0; b++)
                if (all[(size_t)a].host == all[(size_t)b].host &&
                    all[(size_t)a].pci == all[(size_t)b].pci) {
                    result = ncclInvalidUsage;
                    dup_a = a, dup_b = b;
                }
        c->join_reply = {result, dup_a, dup_b};
        c->join_reply.insert(c->join_reply.end(), world.begin(), world.end());
        c->join_reqs.assign(0, MPI_REQUEST_NULL);
        for (int r = 0; r < c->nranks; r++)
            if (r != c->rank && world[(size_t)r] >= 0) {
                c->join_reqs.push_back(MPI_REQUEST_NULL);
                MPI_Isend(c->join_reply.data(), (int)c->join_reply.size(), MPI_INT,
                          world[(size_t)r], c->tag + TAG_INIT, MPI_COMM_WORLD,
                          &c->join_reqs.back());
            }
        return;
    }
    if (!test_all(c->join_reqs)) return;
    /* the answer is here (a member), or sent (the maker) */
    int result = c->join_reply[0];
    c->world.assign(c->join_reply.begin() + 3, c->join_reply.end());
    if (result != ncclSuccess) {
        c->state = FAILED;
        c->result = (ncclResult_t)result;
        if (c->join_reply[1] >= 0)
            set_error(c,
                      "Duplicate GPU detected: ranks %d and %d of the communicator use one GPU "
                      "(bus %#x) of one node",
                      c->join_reply[1], c->join_reply[2], c->pci);
        else
            set_error(c, "the ranks joining the communicator disagree on its size or their ranks");
        return;
    }
    c->state = READY;
    c->connected.assign((size_t)c->nranks, 0);
    c->connected[(size_t)c->rank] = 2;
    c->connect_reqs.assign(2 * (size_t)c->nranks, MPI_REQUEST_NULL);
    c->hello_out.assign((size_t)c->nranks, 1);
    c->hello_in.assign((size_t)c->nranks, 0);
}

/* --- connections --- */

void connect_to(ncclComm *c, int peer)
{
    if (c->connected[(size_t)peer]) return;
    c->connected[(size_t)peer] = 1;
    MPI_Isend(&c->hello_out[(size_t)peer], 1, MPI_INT, c->world[(size_t)peer], c->tag + TAG_CONNECT,
              MPI_COMM_WORLD, &c->connect_reqs[2 * (size_t)peer]);
    MPI_Irecv(&c->hello_in[(size_t)peer], 1, MPI_INT, c->world[(size_t)peer], c->tag + TAG_CONNECT,
              MPI_COMM_WORLD, &c->connect_reqs[2 * (size_t)peer + 1]);
}

bool connecting(ncclComm *c)
{
    bool any = false;
    for (int p = 0; p < c->nranks; p++) {
        if (c->connected[(size_t)p] != 1) continue;
        int flag = 0;
        MPI_Testall(2, &c->connect_reqs[2 * (size_t)p], &flag, MPI_STATUSES_IGNORE);
        if (flag)
            c->connected[(size_t)p] = 2;
        else
            any = true;
    }
    return any;
}

void hook();

/* A non-blocking communicator's state (ncclCommGetAsyncError); for a blocking one the
 * callers loop on it. */
ncclResult_t state_of(ncclComm *c)
{
    if (c->state == ABORTED) return ncclInvalidUsage;
    join_progress(c);
    if (c->state == FAILED) return c->result;
    if (c->state == JOINING) return ncclInProgress;
    if (connecting(c)) return ncclInProgress;
    if (c->finalizing && c->pending > 0) return ncclInProgress;
    c->busy = false;
    return ncclSuccess;
}

void hook()
{
    for (ncclComm *c : comms)
        if (c->state == JOINING || c->state == READY) state_of(c);
}

void ensure_hooked()
{
    if (!hooked) {
        hooked = true;
        cuda_sim_add_progress_hook(hook);
    }
}

/* Blocking communicators: the call returns when it is done. */
ncclResult_t finish_call(ncclComm *c)
{
    ncclResult_t r = state_of(c);
    if (c->blocking)
        while (r == ncclInProgress) {
            cuda_sim_progress();
            r = state_of(c);
        }
    if (r == ncclInProgress) c->busy = true;
    return r;
}

ncclResult_t usable(ncclComm *c, const char *call)
{
    if (!c) {
        set_error(nullptr, "%s: a NULL communicator", call);
        return ncclInvalidArgument;
    }
    if (c->state == ABORTED || c->destroyed) {
        set_error(c, "%s on a communicator that was aborted or destroyed", call);
        return ncclInvalidUsage;
    }
    if (c->state == FAILED) return c->result;
    if (c->busy && state_of(c) == ncclInProgress) {
        set_error(c,
                  "%s while the previous call on this non-blocking communicator is in "
                  "progress (poll ncclCommGetAsyncError until ncclSuccess first)",
                  call);
        return ncclInvalidUsage;
    }
    if (c->state == JOINING) {
        set_error(c,
                  "%s before the communicator is made (ncclCommGetAsyncError says "
                  "ncclInProgress until then)",
                  call);
        return ncclInvalidUsage;
    }
    return ncclSuccess;
}

/* --- operations --- */

struct part {
    ncclComm *comm;
    bool send;
    void *dev;
    size_t bytes;
    int peer;
    std::vector<char> staging;
    MPI_Request req = MPI_REQUEST_NULL;
};

enum op_kind { P2P, ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST };

struct op_state {
    op_kind kind = P2P;
    std::vector<part> parts; /* P2P */
    /* collectives */
    ncclComm *comm = nullptr;
    const void *send = nullptr;
    void *recv = nullptr;
    size_t count =
        0; /* per rank: the receive count of reducescatter, the send count of allgather */
    ncclDataType_t type = ncclFloat;
    ncclRedOp_t redop = ncclSum;
    int root = 0;
    std::vector<std::vector<char>> bufs; /* per rank */
    std::vector<MPI_Request> reqs;
    bool aborted = false;
    const void *caller = nullptr; /* the code that called NCCL, for messages */
};

bool comm_gone(const ncclComm *c) { return c->state == ABORTED || c->state == FAILED; }

std::vector<ncclComm *> comms_of(const op_state *o)
{
    std::vector<ncclComm *> cs;
    if (o->kind == P2P)
        for (const part &p : o->parts) cs.push_back(p.comm);
    else
        cs.push_back(o->comm);
    return cs;
}

void forget_op(op_state *o)
{
    for (ncclComm *c : comms_of(o)) {
        for (size_t i = 0; i < c->ops.size(); i++)
            if (c->ops[i] == o) {
                c->ops.erase(c->ops.begin() + (long)i);
                c->pending--;
                break;
            }
    }
}

int post(void *buf, size_t bytes, bool send, bool sync, int to, int tag, MPI_Request *req)
{
    if (bytes > (size_t)0x7fffffff)
        cuda_sim_fatal("NCCL stand-in: a message of %zu bytes (at most 2^31 - 1 here)", bytes);
    if (!send) return MPI_Irecv(buf, (int)bytes, MPI_BYTE, to, tag, MPI_COMM_WORLD, req);
    return sync ? MPI_Issend(buf, (int)bytes, MPI_BYTE, to, tag, MPI_COMM_WORLD, req)
                : MPI_Isend(buf, (int)bytes, MPI_BYTE, to, tag, MPI_COMM_WORLD, req);
}

int op_start(void *ctx)
{
    op_state *o = (op_state *)ctx;
    for (ncclComm *c : comms_of(o)) {
        if (comm_gone(c)) {
            o->aborted = true;
            return 1;
        }
        if (c->state != READY) return 0;
    }
    if (o->kind == P2P) {
        for (part &p : o->parts)
            if (p.comm->connected[(size_t)p.peer] != 2) return 0; /* its connection first */
        for (part &p : o->parts) {
            p.staging.resize(p.bytes ? p.bytes : 1);
            if (p.send && p.bytes) memcpy(p.staging.data(), p.dev, p.bytes);
            post(p.staging.data(), p.bytes, p.send, true, p.comm->world[(size_t)p.peer],
                 p.comm->tag + TAG_P2P, &p.req);
        }
        return 1;
    }
    ncclComm *c = o->comm;
    size_t es = type_size(o->type), n = (size_t)c->nranks, me = (size_t)c->rank;
    size_t chunk = o->count * es;
    o->bufs.assign(n, std::vector<char>());
    o->reqs.clear();
    int tag = c->tag + TAG_COLL;
    auto to_all = [&](std::vector<char> &b, size_t off, size_t bytes) {
        for (size_t r = 0; r < n; r++)
            if (r != me) {
                o->reqs.push_back(MPI_REQUEST_NULL);
                post(b.data() + off, bytes, true, false, c->world[r], tag, &o->reqs.back());
            }
    };
    auto from_all = [&](size_t bytes) {
        for (size_t r = 0; r < n; r++)
            if (r != me) {
                o->bufs[r].resize(bytes ? bytes : 1);
                o->reqs.push_back(MPI_REQUEST_NULL);
                post(o->bufs[r].data(), bytes, false, false, c->world[r], tag, &o->reqs.back());
            }
    };
    switch (o->kind) {
    case ALLREDUCE:
    case ALLGATHER:
        o->bufs[me].resize(chunk ? chunk : 1);
        if (chunk) memcpy(o->bufs[me].data(), o->send, chunk);
        from_all(chunk);
        to_all(o->bufs[me], 0, chunk);
        break;
    case REDUCESCATTER:
        o->bufs[me].resize(chunk * n > 0 ? chunk * n : 1);
        if (chunk) memcpy(o->bufs[me].data(), o->send, chunk * n);
        from_all(chunk);
        for (size_t r = 0; r < n; r++)
            if (r != me) {
                o->reqs.push_back(MPI_REQUEST_NULL);
                post(o->bufs[me].data() + r * chunk, chunk, true, false, c->world[r], tag,
                     &o->reqs.back());
            }
        break;
    case BROADCAST:
        o->bufs[me].resize(chunk ? chunk : 1);
        if (me == (size_t)o->root) {
            if (chunk) memcpy(o->bufs[me].data(), o->send, chunk);
            to_all(o->bufs[me], 0, chunk);
        } else {
            o->reqs.push_back(MPI_REQUEST_NULL);
            post(o->bufs[me].data(), chunk, false, false, c->world[(size_t)o->root], tag,
                 &o->reqs.back());
        }
        break;
    case P2P: break;
    }
    return 1;
}

int op_test(void *ctx)
{
    op_state *o = (op_state *)ctx;
    for (ncclComm *c : comms_of(o))
        if (comm_gone(c)) o->aborted = true;
    if (o->aborted) return 1;
    if (o->kind == P2P) {
        std::vector<MPI_Request> reqs;
        for (part &p : o->parts) reqs.push_back(p.req);
        bool done = test_all(reqs);
        for (size_t i = 0; i < reqs.size(); i++) o->parts[i].req = reqs[i];
        return done;
    }
    return test_all(o->reqs);
}

template <class T>
void reduce(const op_state *o, const std::vector<const char *> &in, size_t n, char *out)
{
    size_t ranks = in.size();
    for (size_t i = 0; i < n; i++) {
        T acc;
        memcpy(&acc, in[0] + i * sizeof(T), sizeof acc);
        for (size_t r = 1; r < ranks; r++) {
            T v;
            memcpy(&v, in[r] + i * sizeof(T), sizeof v);
            switch (o->redop) {
            case ncclSum:
            case ncclAvg: acc = acc + v; break;
            case ncclProd: acc = acc * v; break;
            case ncclMax: acc = v > acc ? v : acc; break;
            case ncclMin: acc = v < acc ? v : acc; break;
            }
        }
        if (o->redop == ncclAvg) acc = (T)(acc / (T)ranks);
        memcpy(out + i * sizeof(T), &acc, sizeof acc);
    }
}

void reduce_any(const op_state *o, const std::vector<const char *> &in, size_t n, char *out)
{
    switch (o->type) {
    case ncclInt8: reduce<int8_t>(o, in, n, out); break;
    case ncclUint8: reduce<uint8_t>(o, in, n, out); break;
    case ncclInt32: reduce<int32_t>(o, in, n, out); break;
    case ncclUint32: reduce<uint32_t>(o, in, n, out); break;
    case ncclInt64: reduce<int64_t>(o, in, n, out); break;
    case ncclUint64: reduce<uint64_t>(o, in, n, out); break;
    case ncclFloat32: reduce<float>(o, in, n, out); break;
    case ncclFloat64: reduce<double>(o, in, n, out); break;
    case ncclFloat16: cuda_sim_fatal("NCCL stand-in: ncclFloat16 reductions are not supported");
    }
}

void op_finish(void *ctx)
{
    op_state *o = (op_state *)ctx;
    if (!o->aborted) {
        if (o->kind == P2P) {
            for (part &p : o->parts)
                if (!p.send && p.bytes) memcpy(p.dev, p.staging.data(), p.bytes);
        } else {
            ncclComm *c = o->comm;
            size_t es = type_size(o->type), n = (size_t)c->nranks, me = (size_t)c->rank;
            size_t chunk = o->count * es;
            std::vector<const char *> in(n);
            switch (o->kind) {
            case ALLREDUCE: /* in rank order: the same bits on every rank */
                for (size_t r = 0; r < n; r++) in[r] = o->bufs[r].data();
                reduce_any(o, in, o->count, (char *)o->recv);
                break;
            case REDUCESCATTER:
                for (size_t r = 0; r < n; r++)
                    in[r] = r == me ? o->bufs[me].data() + me * chunk : o->bufs[r].data();
                reduce_any(o, in, o->count, (char *)o->recv);
                break;
            case ALLGATHER:
                for (size_t r = 0; r < n; r++)
                    if (chunk) memcpy((char *)o->recv + r * chunk, o->bufs[r].data(), chunk);
                break;
            case BROADCAST:
                if (chunk) memcpy(o->recv, o->bufs[me].data(), chunk);
                break;
            case P2P: break;
            }
        }
    }
    forget_op(o);
}

void op_describe(void *ctx, char *out, size_t cap)
{
    op_state *o = (op_state *)ctx;
    static const char *const names[] = {"ncclSend/ncclRecv", "ncclAllReduce", "ncclAllGather",
                                        "ncclReduceScatter", "ncclBroadcast"};
    if (o->kind == P2P) {
        size_t n = 0;
        n += snprintf(out + n, cap - n, "NCCL group of");
        for (const part &p : o->parts) {
            if (n >= cap) break;
            n += snprintf(out + n, cap - n, " %s %zu bytes %s rank %d (world rank %d)%s",
                          p.send ? "ncclSend" : "ncclRecv", p.bytes, p.send ? "to" : "from", p.peer,
                          p.comm->world[(size_t)p.peer],
                          p.comm->connected[(size_t)p.peer] == 2 ? "" : ", not connected yet");
        }
        return;
    }
    snprintf(out, cap, "%s of %zu elements over %d ranks%s", names[o->kind], o->count,
             o->comm->nranks, o->comm->state == READY ? "" : " (communicator not made yet)");
}

void op_destroy(void *ctx) { delete (op_state *)ctx; }

const cuda_sim_async_ops ops_table = {op_start, op_test, op_finish, op_describe, op_destroy};

/* The group being assembled by ncclGroupStart/End: its operations by stream. */
struct grouped {
    op_state *o;
    cudaStream_t stream;
};
int group_depth;
std::vector<grouped> group;

ncclResult_t submit(op_state *o, cudaStream_t stream)
{
    for (ncclComm *c : comms_of(o)) {
        c->pending++;
        c->ops.push_back(o);
    }
    if (cuda_sim_enqueue_async(stream, &ops_table, o, o->caller) != cudaSuccess) {
        set_error(nullptr, "the stream of an NCCL call is not a valid stream");
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

/* The end of a group (or of one call outside a group): point-to-point parts on one stream
 * become one operation that posts all of them at once; connections are started. */
ncclResult_t flush_group()
{
    std::vector<grouped> todo;
    todo.swap(group);
    ncclResult_t r = ncclSuccess;
    std::vector<ncclComm *> touched;
    for (size_t i = 0; i < todo.size(); i++) {
        op_state *o = todo[i].o;
        if (!o) continue;
        if (o->kind == P2P) /* gather the others of this stream */
            for (size_t k = i + 1; k < todo.size(); k++)
                if (todo[k].o && todo[k].o->kind == P2P && todo[k].stream == todo[i].stream) {
                    for (part &p : todo[k].o->parts) o->parts.push_back(p);
                    delete todo[k].o;
                    todo[k].o = nullptr;
                }
        if (o->kind == P2P)
            for (part &p : o->parts) connect_to(p.comm, p.peer);
        for (ncclComm *c : comms_of(o)) {
            bool seen = false;
            for (ncclComm *t : touched) seen |= t == c;
            if (!seen) touched.push_back(c);
        }
        ncclResult_t s = submit(o, todo[i].stream);
        if (s != ncclSuccess) r = s;
    }
    for (ncclComm *c : touched) {
        ncclResult_t s = finish_call(c);
        if (r == ncclSuccess && s != ncclSuccess) r = s;
    }
    return r;
}

ncclResult_t add(op_state *o, cudaStream_t stream)
{
    group.push_back(grouped{o, stream});
    return group_depth > 0 ? ncclSuccess : flush_group();
}

/* Device memory of the communicator's GPU, count elements of type long. */
ncclResult_t buffer_ok(ncclComm *c, const char *call, const char *what, const void *p, size_t bytes)
{
    if (bytes == 0) return ncclSuccess;
    int live = 0, dev = cuda_sim_device_of(p, bytes, &live);
    if (dev == c->device && live) return ncclSuccess;
    set_error(c, "%s: the %s buffer %p (%zu bytes) is %s", call, what, p, bytes,
              dev < 0            ? "not device memory"
              : dev != c->device ? "on another GPU than the communicator"
                                 : "not inside one live allocation");
    cuda_sim_warn("%s", c->last_error);
    return ncclInvalidArgument;
}

ncclResult_t stream_ok(ncclComm *c, const char *call, cudaStream_t s)
{
    int dev = cuda_sim_stream_device(s);
    if (dev == c->device) return ncclSuccess;
    set_error(c, "%s: the stream is %s", call, dev < 0 ? "not a valid stream" : "another GPU's");
    return ncclInvalidArgument;
}

} // namespace nccl_sim

using namespace nccl_sim;

/* --- the API --- */

extern "C" ncclResult_t ncclGetVersion(int *version)
{
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

extern "C" ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
        set_error(nullptr, "the NCCL stand-in runs over MPI: MPI_Init first");
        return ncclSystemError;
    }
    memset(id, 0, sizeof *id);
    id_fields f = {ID_MAGIC, world_rank(), serial++};
    memcpy(id->internal, &f, sizeof f);
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id,
                                               int rank, ncclConfig_t *config)
{
    *out = nullptr;
    id_fields f;
    memcpy(&f, id.internal, sizeof f);
    if (f.magic != ID_MAGIC) {
        set_error(nullptr, "ncclCommInitRank: the id was not made by ncclGetUniqueId");
        return ncclInvalidArgument;
    }
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        set_error(nullptr, "ncclCommInitRank: rank %d of %d", rank, nranks);
        return ncclInvalidArgument;
    }
    if (tag_ub < 0) {
        int *ub, found = 0;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
        tag_ub = found ? *ub : 32767;
    }
    long tag = (1L << 30) + (((long)(f.creator & 0x3fff) << 14) | (f.serial & 0x3fff)) * 4;
    if (tag + 3 > tag_ub || f.creator > 0x3fff || f.serial > 0x3fff) {
        set_error(nullptr,
                  "NCCL stand-in: this MPI's tags (up to %d) or the number of "
                  "communicators cannot hold communicator %u of rank %d",
                  tag_ub, f.serial, f.creator);
        return ncclSystemError;
    }
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        set_error(nullptr, "ncclCommInitRank: no current CUDA device");
        return ncclUnhandledCudaError;
    }
    ensure_hooked();
    ncclComm *c = new ncclComm;
    c->nranks = nranks;
    c->rank = rank;
    c->device = dev;
    c->pci = cuda_sim_pci_bus(dev);
    c->world_rank = world_rank();
    c->tag = (int)tag;
    c->blocking = !config || config->blocking == NCCL_CONFIG_UNDEF_INT || config->blocking != 0;
    c->mine = hello{rank, nranks, c->pci, host_hash()};
    c->maker = f.creator == c->world_rank;
    comms.push_back(c);
    *out = c;
    if (nranks == 1) {
        c->join_reply = {ncclSuccess, -1, -1, c->world_rank};
        c->join_reqs.clear();
        c->maker = false;
    } else if (c->maker) {
        c->hellos.assign((size_t)nranks - 1, hello());
        c->join_reqs.assign((size_t)nranks - 1, MPI_REQUEST_NULL);
        for (int k = 0; k < nranks - 1; k++)
            MPI_Irecv(&c->hellos[(size_t)k], (int)sizeof(hello), MPI_BYTE, MPI_ANY_SOURCE,
                      c->tag + TAG_INIT, MPI_COMM_WORLD, &c->join_reqs[(size_t)k]);
    } else {
        c->join_reply.assign(3 + (size_t)nranks, 0);
        c->join_reqs.assign(2, MPI_REQUEST_NULL);
        MPI_Isend(&c->mine, (int)sizeof(hello), MPI_BYTE, f.creator, c->tag + TAG_INIT,
                  MPI_COMM_WORLD, &c->join_reqs[0]);
        MPI_Irecv(c->join_reply.data(), 3 + nranks, MPI_INT, f.creator, c->tag + TAG_INIT,
                  MPI_COMM_WORLD, &c->join_reqs[1]);
    }
    return finish_call(c);
}

extern "C" ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

extern "C" ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *st)
{
    if (!c) return ncclInvalidArgument;
    cuda_sim_progress();
    *st = state_of(c);
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommFinalize(ncclComm_t c)
{
    ncclResult_t r = usable(c, "ncclCommFinalize");
    if (r != ncclSuccess) return r;
    c->finalizing = true;
    return finish_call(c);
}

extern "C" ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    if (!c) return ncclInvalidArgument;
    if (c->pending > 0 && c->state != ABORTED)
        cuda_sim_warn("ncclCommDestroy: %d operations of the communicator have not finished "
                      "(ncclCommFinalize and wait first)",
                      c->pending);
    c->destroyed = true;
    cancel_all(c->join_reqs);
    cancel_all(c->connect_reqs);
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommAbort(ncclComm_t c)
{
    if (!c) return ncclInvalidArgument;
    c->state = ABORTED;
    cancel_all(c->join_reqs);
    cancel_all(c->connect_reqs);
    /* what is in flight: cancelled; its host buffers stay (MPI may still hold them) */
    for (op_state *o : c->ops) {
        o->aborted = true;
        for (part &p : o->parts)
            if (p.req != MPI_REQUEST_NULL) {
                MPI_Cancel(&p.req);
                MPI_Request_free(&p.req);
            }
        cancel_all(o->reqs);
        for (part &p : o->parts) new std::vector<char>(std::move(p.staging));
        for (auto &b : o->bufs) new std::vector<char>(std::move(b));
    }
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommCount(const ncclComm_t c, int *count)
{
    if (!c) return ncclInvalidArgument;
    *count = c->nranks;
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommCuDevice(const ncclComm_t c, int *device)
{
    if (!c) return ncclInvalidArgument;
    *device = c->device;
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommUserRank(const ncclComm_t c, int *rank)
{
    if (!c) return ncclInvalidArgument;
    *rank = c->rank;
    return ncclSuccess;
}

extern "C" const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

extern "C" const char *ncclGetLastError(ncclComm_t c)
{
    return c && c->last_error[0] ? c->last_error : global_error;
}

extern "C" ncclResult_t ncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}

extern "C" ncclResult_t ncclGroupEnd(void)
{
    if (group_depth == 0) {
        set_error(nullptr, "ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    return --group_depth > 0 ? ncclSuccess : flush_group();
}

static ncclResult_t p2p(bool send, void *buf, size_t count, ncclDataType_t type, int peer,
                        ncclComm_t c, cudaStream_t stream, const char *call, const void *caller)
{
    ncclResult_t r = usable(c, call);
    if (r != ncclSuccess) return r;
    size_t es = type_size(type);
    if (!es || peer < 0 || peer >= c->nranks) {
        set_error(c, "%s: %s", call, es ? "peer outside the communicator" : "unknown data type");
        return ncclInvalidArgument;
    }
    if ((r = buffer_ok(c, call, send ? "send" : "receive", buf, count * es)) != ncclSuccess ||
        (r = stream_ok(c, call, stream)) != ncclSuccess)
        return r;
    op_state *o = new op_state;
    o->kind = P2P;
    o->caller = caller;
    part p;
    p.comm = c;
    p.send = send;
    p.dev = buf;
    p.bytes = count * es;
    p.peer = peer;
    o->parts.push_back(p);
    return add(o, stream);
}

extern "C" ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type, int peer,
                                 ncclComm_t c, cudaStream_t stream)
{
    return p2p(true, (void *)buf, count, type, peer, c, stream, "ncclSend",
               __builtin_return_address(0));
}

extern "C" ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer,
                                 ncclComm_t c, cudaStream_t stream)
{
    return p2p(false, buf, count, type, peer, c, stream, "ncclRecv", __builtin_return_address(0));
}

static ncclResult_t collective(op_kind kind, const void *send, void *recv, size_t count,
                               size_t send_elems, size_t recv_elems, ncclDataType_t type,
                               ncclRedOp_t redop, int root, ncclComm_t c, cudaStream_t stream,
                               const char *call, const void *caller)
{
    ncclResult_t r = usable(c, call);
    if (r != ncclSuccess) return r;
    size_t es = type_size(type);
    if (!es || redop < ncclSum || redop > ncclAvg || root < 0 || root >= c->nranks) {
        set_error(c, "%s: an unknown data type or reduction, or a root outside the communicator",
                  call);
        return ncclInvalidArgument;
    }
    bool sends = kind != BROADCAST || c->rank == root;
    if ((sends && (r = buffer_ok(c, call, "send", send, send_elems * es)) != ncclSuccess) ||
        (r = buffer_ok(c, call, "receive", recv, recv_elems * es)) != ncclSuccess ||
        (r = stream_ok(c, call, stream)) != ncclSuccess)
        return r;
    op_state *o = new op_state;
    o->kind = kind;
    o->caller = caller;
    o->comm = c;
    o->send = send;
    o->recv = recv;
    o->count = count;
    o->type = type;
    o->redop = redop;
    o->root = root;
    return add(o, stream);
}

extern "C" ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                                      ncclDataType_t type, ncclRedOp_t op, ncclComm_t c,
                                      cudaStream_t stream)
{
    return collective(ALLREDUCE, send, recv, count, count, count, type, op, 0, c, stream,
                      "ncclAllReduce", __builtin_return_address(0));
}

extern "C" ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount,
                                          ncclDataType_t type, ncclRedOp_t op, ncclComm_t c,
                                          cudaStream_t stream)
{
    size_t n = c ? (size_t)c->nranks : 1;
    return collective(REDUCESCATTER, send, recv, recvcount, recvcount * n, recvcount, type, op, 0,
                      c, stream, "ncclReduceScatter", __builtin_return_address(0));
}

extern "C" ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount,
                                      ncclDataType_t type, ncclComm_t c, cudaStream_t stream)
{
    size_t n = c ? (size_t)c->nranks : 1;
    return collective(ALLGATHER, send, recv, sendcount, sendcount, sendcount * n, type, ncclSum, 0,
                      c, stream, "ncclAllGather", __builtin_return_address(0));
}

extern "C" ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                                      ncclDataType_t type, int root, ncclComm_t c,
                                      cudaStream_t stream)
{
    return collective(BROADCAST, send, recv, count, count, count, type, ncclSum, root, c, stream,
                      "ncclBroadcast", __builtin_return_address(0));
}
