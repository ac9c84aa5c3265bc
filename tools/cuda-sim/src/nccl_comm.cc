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
 * the caller's polling (pipenet's stall watchdog) sees it.
 *
 * This file: communicators (ids, joining, connections, state, end) and their calls;
 * the operations are nccl_ops.cc. */
#include "nccl_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>

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
