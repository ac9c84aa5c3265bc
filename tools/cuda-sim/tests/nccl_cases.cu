/* The NCCL stand-in's own cases (tools/cuda-sim/tests/run.sh), under mpirun -np 2:
 * `nccl_cases NAME`. Rank r uses GPU r (GPU 0 for both in duplicate-gpu). Prints
 * "rank R: ..." lines; exit 0 when the case behaved as NCCL does. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

static int rank;

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            printf("rank %d: %s: %s\n", rank, #call, cudaGetErrorString(e_));                      \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                          \
        }                                                                                          \
    } while (0)

static double now()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Polls a non-blocking communicator to the end of its last call. */
static ncclResult_t settle(ncclComm_t c, ncclResult_t r)
{
    while (r == ncclInProgress) ncclCommGetAsyncError(c, &r);
    return r;
}

static ncclResult_t make_comm(ncclComm_t *c, bool blocking)
{
    ncclUniqueId id;
    if (rank == 0) ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = blocking ? 1 : 0;
    ncclResult_t r = ncclCommInitRankConfig(c, 2, id, rank, &config);
    return settle(*c, r);
}

static float *device_floats(const float *host, int n)
{
    float *d;
    CHECK(cudaMalloc(&d, n * sizeof(float)));
    CHECK(cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

static void read_back(float *host, const float *d, int n)
{
    CHECK(cudaMemcpy(host, d, n * sizeof(float), cudaMemcpyDeviceToHost));
}

/* Element k of the sum over the 2 ranks, added in rank order as the stand-in does. */
static float summed(int k)
{
    return (0.1f * (float)(k % 17) + 0.0f) + (0.1f * (float)(k % 17) + 1.0f);
}

static int collectives(ncclComm_t c, cudaStream_t s)
{
    enum { N = 1000 };
    static float host[2 * N], got[2 * N];
    for (int i = 0; i < 2 * N; i++) host[i] = 0.1f * (float)(i % 17) + (float)rank;
    float *x = device_floats(host, 2 * N), *all = device_floats(host, 2 * N);
    bool right = true;
    right &= settle(c, ncclAllReduce(x, x, N, ncclFloat, ncclSum, c, s)) == ncclSuccess;
    right &= settle(c, ncclAllGather(x, all, N, ncclFloat, c, s)) == ncclSuccess;
    CHECK(cudaStreamSynchronize(s));
    read_back(got, all, 2 * N);
    for (int i = 0; i < N; i++) right &= got[i] == summed(i) && got[N + i] == summed(i);
    float *part;
    CHECK(cudaMalloc(&part, N / 2 * sizeof(float)));
    right &=
        settle(c, ncclReduceScatter(all, part, N / 2, ncclFloat, ncclMax, c, s)) == ncclSuccess;
    right &= settle(c, ncclBroadcast(x, x, N, ncclFloat, 1, c, s)) == ncclSuccess;
    CHECK(cudaStreamSynchronize(s));
    read_back(got, part, N / 2);
    for (int i = 0; i < N / 2; i++) right &= got[i] == summed(rank * N / 2 + i);
    /* in place on the root (rank 1); rank 0's buffer stays as it was */
    float *y = device_floats(host, N);
    right &= settle(c, ncclReduce(y, y, N, ncclFloat, ncclSum, 1, c, s)) == ncclSuccess;
    CHECK(cudaStreamSynchronize(s));
    read_back(got, y, N);
    for (int i = 0; i < N; i++) right &= got[i] == (rank == 1 ? summed(i) : host[i]);
    printf("rank %d: collectives %s\n", rank, right ? "right" : "wrong");
    return right ? 0 : 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *name = argc > 1 ? argv[1] : "";
    bool dup = !strcmp(name, "duplicate-gpu");
    CHECK(cudaSetDevice(dup ? 0 : rank));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ncclComm_t c = NULL;
    bool blocking = !strcmp(name, "ungrouped-sends");
    ncclResult_t r = make_comm(&c, blocking);
    int status = 0;
    if (dup) {
        printf("rank %d: init: %s: %s\n", rank, ncclGetErrorString(r), ncclGetLastError(c));
        status = r == ncclInvalidUsage ? 0 : 1;
    } else if (r != ncclSuccess) {
        printf("rank %d: init failed: %s\n", rank, ncclGetErrorString(r));
        status = 1;
    } else if (!strcmp(name, "collectives")) {
        status = collectives(c, s);
    } else if (!strcmp(name, "grouped-sends") || !strcmp(name, "ungrouped-sends")) {
        /* both ranks send first, then receive, on one stream: in one group that is
         * fine; as two calls each rank's send waits for a receive never posted */
        float mine[4] = {1.0f + rank, 2, 3, 4}, theirs[4];
        float *a = device_floats(mine, 4), *b = device_floats(mine, 4);
        bool group = !strcmp(name, "grouped-sends");
        if (group) ncclGroupStart();
        r = ncclSend(a, 4, ncclFloat, 1 - rank, c, s);
        if (!group) r = settle(c, r);
        ncclResult_t r2 = ncclRecv(b, 4, ncclFloat, 1 - rank, c, s);
        if (group) r2 = settle(c, ncclGroupEnd());
        CHECK(cudaStreamSynchronize(s));
        read_back(theirs, b, 4);
        printf("rank %d: got %g from rank %d (%s, %s)\n", rank, theirs[0], 1 - rank,
               ncclGetErrorString(r), ncclGetErrorString(r2));
        status = theirs[0] == 2.0f - rank ? 0 : 1;
    } else if (!strcmp(name, "lazy-connect")) {
        /* the first message between two ranks connects them: rank 0's send is in
         * progress until rank 1, a second late, calls its receive */
        float v[1] = {42}, *d = device_floats(v, 1);
        if (rank == 1) sleep(1);
        double t0 = now();
        r = rank == 0 ? ncclSend(d, 1, ncclFloat, 1, c, s) : ncclRecv(d, 1, ncclFloat, 0, c, s);
        bool in_progress = r == ncclInProgress;
        r = settle(c, r);
        double waited = now() - t0;
        CHECK(cudaStreamSynchronize(s));
        if (rank == 0) {
            printf("rank 0: the first send returned %s and connected after %.1f s\n",
                   in_progress ? "ncclInProgress" : "at once", waited);
            status = in_progress && waited > 0.8 ? 0 : 1;
        }
    } else if (!strcmp(name, "busy-comm")) {
        /* a second call before the first (connecting) was polled to its end */
        float v[1] = {1}, *d = device_floats(v, 1);
        if (rank == 0) {
            r = ncclSend(d, 1, ncclFloat, 1, c, s);
            ncclResult_t r2 = ncclSend(d, 1, ncclFloat, 1, c, s);
            printf("rank 0: %s, then %s: %s\n", ncclGetErrorString(r), ncclGetErrorString(r2),
                   ncclGetLastError(c));
            status = r == ncclInProgress && r2 == ncclInvalidUsage ? 0 : 1;
            settle(c, r);
        } else {
            sleep(1);
            settle(c, ncclRecv(d, 1, ncclFloat, 0, c, s));
        }
        CHECK(cudaStreamSynchronize(s));
    } else if (!strcmp(name, "abort")) {
        /* rank 0 waits for a message rank 1 never sends; an abort ends the wait */
        float v[1] = {1}, *d = device_floats(v, 1), *d2 = device_floats(v, 1);
        cudaEvent_t e;
        CHECK(cudaEventCreate(&e));
        ncclGroupStart(); /* connected first: a first message waits for its connection */
        ncclSend(d, 1, ncclFloat, 1 - rank, c, s);
        ncclRecv(d2, 1, ncclFloat, 1 - rank, c, s);
        settle(c, ncclGroupEnd());
        CHECK(cudaStreamSynchronize(s));
        if (rank == 0) {
            settle(c, ncclRecv(d, 1, ncclFloat, 1, c, s));
            CHECK(cudaEventRecord(e, s));
            double t0 = now();
            while (cudaEventQuery(e) == cudaErrorNotReady && now() - t0 < 1.0) {}
            bool waiting = cudaEventQuery(e) == cudaErrorNotReady;
            ncclCommAbort(c);
            while (cudaEventQuery(e) == cudaErrorNotReady) {}
            printf("rank 0: the receive %s after 1 s; after ncclCommAbort the stream went on\n",
                   waiting ? "still waited" : "had ended");
            status = waiting ? 0 : 1;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
        return status;
    } else {
        printf("rank %d: no case '%s'\n", rank, name);
        status = 2;
    }
    if (c && !dup) {
        settle(c, ncclCommFinalize(c));
        ncclCommDestroy(c);
    }
    MPI_Finalize();
    return status;
}
