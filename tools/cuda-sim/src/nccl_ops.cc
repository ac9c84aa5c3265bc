/* The NCCL stand-in's operations (tools/cuda-sim, nccl_impl.h): sends, receives and
 * collectives queued on their streams as asynchronous work (cuda_sim_enqueue_async)
 * that copies device memory to host buffers, moves them over MPI and writes what came
 * back; ncclGroupStart/End posting a stream's sends and receives together; the calls
 * checked (device memory of the communicator's GPU, its stream, a usable
 * communicator). Collectives add in rank order. */
#include "nccl_impl.h"

#include <stdio.h>
#include <string.h>

namespace nccl_sim {

/* --- operations --- */

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
    case REDUCE: /* every rank's to the root, which adds them in rank order */
        o->bufs[me].resize(chunk ? chunk : 1);
        if (chunk) memcpy(o->bufs[me].data(), o->send, chunk);
        if (me == (size_t)o->root) {
            from_all(chunk);
        } else {
            o->reqs.push_back(MPI_REQUEST_NULL);
            post(o->bufs[me].data(), chunk, true, false, c->world[(size_t)o->root], tag,
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
            case REDUCE: /* the root only: the others' receive buffer is not theirs */
                if (me != (size_t)o->root) break;
                for (size_t r = 0; r < n; r++) in[r] = o->bufs[r].data();
                reduce_any(o, in, o->count, (char *)o->recv);
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
                                        "ncclReduceScatter", "ncclBroadcast", "ncclReduce"};
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
    bool receives = kind != REDUCE || c->rank == root;
    if ((sends && (r = buffer_ok(c, call, "send", send, send_elems * es)) != ncclSuccess) ||
        (receives && (r = buffer_ok(c, call, "receive", recv, recv_elems * es)) != ncclSuccess) ||
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

extern "C" ncclResult_t ncclReduce(const void *send, void *recv, size_t count,
                                   ncclDataType_t type, ncclRedOp_t op, int root, ncclComm_t c,
                                   cudaStream_t stream)
{
    return collective(REDUCE, send, recv, count, count, count, type, op, root, c, stream,
                      "ncclReduce", __builtin_return_address(0));
}

extern "C" ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                                      ncclDataType_t type, int root, ncclComm_t c,
                                      cudaStream_t stream)
{
    return collective(BROADCAST, send, recv, count, count, count, type, ncclSum, root, c, stream,
                      "ncclBroadcast", __builtin_return_address(0));
}
