/* Inside the NCCL stand-in (tools/cuda-sim: nccl_comm.cc, communicators; nccl_ops.cc,
 * operations): what the two files share. */
#ifndef CUDA_SIM_NCCL_IMPL_H
#define CUDA_SIM_NCCL_IMPL_H

#include <mpi.h>
#include <stdint.h>

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

struct part {
    ncclComm *comm;
    bool send;
    void *dev;
    size_t bytes;
    int peer;
    std::vector<char> staging;
    MPI_Request req = MPI_REQUEST_NULL;
};

enum op_kind { P2P, ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST, REDUCE };

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

extern std::vector<ncclComm *> comms;

void set_error(ncclComm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t type_size(ncclDataType_t t);
bool test_all(std::vector<MPI_Request> &reqs);
void cancel_all(std::vector<MPI_Request> &reqs);
/* Starts the connection to peer (both ranks' first message between them). */
void connect_to(ncclComm *c, int peer);
/* A non-blocking communicator's state (ncclCommGetAsyncError). */
ncclResult_t state_of(ncclComm *c);
/* The end of a call: a blocking communicator waits for it, a non-blocking one is busy
 * until it is polled to its end. */
ncclResult_t finish_call(ncclComm *c);
/* Whether a call may be made on c now; else the error, with its message set. */
ncclResult_t usable(ncclComm *c, const char *call);

} // namespace nccl_sim

#endif
