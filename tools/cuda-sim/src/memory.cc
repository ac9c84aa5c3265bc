/* Device memory of the CUDA stand-in (sim.h): every allocation is fresh pages carved
 * from a region reserved per device, filled with all-ones bytes (NaN as floats and
 * doubles, -1 as integers) and fenced by inaccessible guard pages; freed memory is
 * never handed out again. The pages are inaccessible whenever host code runs: queued
 * work (kernels, copies) opens them, the runtime call that ran it closes them before
 * it returns. So a host dereference, a kernel reading past an allocation, or a use
 * after cudaFree stops at once with a message that names the allocation, instead of
 * giving a wrong number. The data of an allocation ends where its trailing guard page
 * begins (CUDA's 256-byte alignment kept), so an overrun of a full 256-byte multiple
 * faults on its first byte past the end. */
#include "sim.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <map>

namespace sim {

/* Address space reserved per device: cudaMalloc'd bytes over a process's life, freed
 * ones included (never reused). */
static const size_t SPAN = (size_t)64 << 30;

struct region {
    uintptr_t lo = 0, hi = 0, next = 0;
    size_t used = 0; /* live bytes, against settings::memory */
};

static region regions[16];
static std::map<uintptr_t, allocation *> by_base; /* every allocation, by its mapping's start */
static std::vector<allocation *> live;            /* the open/close set */
static bool opened;
static size_t page;

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

bool mem_in_region(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    for (const region &r : regions)
        if (r.lo && a >= r.lo && a < r.hi) return true;
    return false;
}

allocation *mem_find(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    auto it = by_base.upper_bound(a);
    if (it == by_base.begin()) return nullptr;
    --it;
    allocation *al = it->second;
    /* its mapping, and the guard page after it (shared with the next mapping's) */
    return a < al->map + al->map_bytes + page ? al : nullptr;
}

bool mem_inside(const void *p, size_t bytes, int *device)
{
    allocation *al = mem_find(p);
    uintptr_t a = (uintptr_t)p;
    if (!al || !al->live || a < al->base || a + bytes > al->base + al->bytes) return false;
    if (device) *device = al->device;
    return true;
}

size_t mem_used(int device) { return device >= 0 && device < 16 ? regions[device].used : 0; }

static void protect(allocation *al, int prot)
{
    if (mprotect((void *)al->map, al->map_bytes, prot))
        cuda_sim_fatal("mprotect of device memory failed: %s", strerror(errno));
}

cudaError_t mem_alloc(int device, size_t bytes, const void *caller, void **out)
{
    *out = nullptr;
    if (!page) page = (size_t)sysconf(_SC_PAGESIZE);
    if (bytes == 0) return cudaSuccess;
    region &r = regions[device];
    if (!r.lo) {
        void *m =
            mmap(nullptr, SPAN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            cuda_sim_warn("cannot reserve %zu GiB of address space for device %d: %s", SPAN >> 30,
                          device, strerror(errno));
            return cudaErrorMemoryAllocation;
        }
        r.lo = (uintptr_t)m;
        r.hi = r.lo + SPAN;
        r.next = r.lo + page; /* the first guard page */
    }
    size_t data = round_up(bytes, page);
    if (r.used + bytes > config().memory || r.next + data + page > r.hi)
        return cudaErrorMemoryAllocation; /* as a full GPU says it */
    allocation *al = new allocation;
    al->map = r.next;
    al->map_bytes = data;
    al->base = al->map + data - round_up(bytes, 256);
    al->bytes = bytes;
    al->device = device;
    al->caller = caller;
    r.next += data + page;
    r.used += bytes;
    protect(al, PROT_READ | PROT_WRITE);
    memset((void *)al->map, 0xff, al->map_bytes);
    if (!opened) protect(al, PROT_NONE);
    by_base[al->map] = al;
    live.push_back(al);
    *out = (void *)al->base;
    return cudaSuccess;
}

cudaError_t mem_free(void *p, const void *caller)
{
    if (!p) return cudaSuccess;
    allocation *al = mem_find(p);
    if (!al || (uintptr_t)p != al->base) {
        cuda_sim_warn("cudaFree(%p) from %s: not a pointer cudaMalloc returned", p,
                      caller_name(caller).c_str());
        return cudaErrorInvalidValue;
    }
    if (!al->live) {
        cuda_sim_warn("cudaFree(%p) from %s: freed already (an allocation of %zu bytes from %s)", p,
                      caller_name(caller).c_str(), al->bytes, caller_name(al->caller).c_str());
        return cudaErrorInvalidValue;
    }
    al->live = false;
    regions[al->device].used -= al->bytes;
    for (size_t i = 0; i < live.size(); i++)
        if (live[i] == al) {
            live[i] = live.back();
            live.pop_back();
            break;
        }
    protect(al, PROT_NONE);
    madvise((void *)al->map, al->map_bytes, MADV_DONTNEED); /* the pages go back */
    return cudaSuccess;
}

void mem_open()
{
    if (opened) return;
    opened = true;
    for (allocation *al : live) protect(al, PROT_READ | PROT_WRITE);
}

void mem_close()
{
    if (!opened) return;
    opened = false;
    for (allocation *al : live) protect(al, PROT_NONE);
}

/* --- the fault handler --- */

static struct sigaction previous_segv, previous_bus;
static char fault_text[4096];

static void describe_fault(uintptr_t a, bool write, char *out, size_t cap)
{
    std::string who = current_gpu_thread();
    const char *verb = write ? "wrote" : "read";
    allocation *al = mem_in_region((void *)a) ? mem_find((void *)a) : nullptr;
    size_t n = 0;
    if (!who.empty())
        n +=
            snprintf(out + n, cap - n, "%s %s address %#lx: ", who.c_str(), verb, (unsigned long)a);
    else
        n += snprintf(out + n, cap - n, "host code %s device memory at %#lx: ", verb,
                      (unsigned long)a);
    if (n >= cap) return;
    if (!al) {
        snprintf(out + n, cap - n, "%s",
                 who.empty() ? "not in any allocation"
                 : mem_in_region((void *)a)
                     ? "a guard page of device memory, in no allocation"
                     : "not device memory (a host pointer given to a kernel, or a "
                       "wild index)");
        return;
    }
    const char *state = al->live ? "n" : " freed";
    if (a >= al->base && a < al->base + al->bytes)
        snprintf(out + n, cap - n, "byte %lu of a%s allocation of %zu bytes (from %s)%s",
                 (unsigned long)(a - al->base), state, al->bytes, caller_name(al->caller).c_str(),
                 !al->live     ? ": used after cudaFree"
                 : who.empty() ? "; the host may touch device memory only through cudaMemcpy"
                               : "");
    else if (a >= al->base + al->bytes)
        snprintf(out + n, cap - n,
                 "%lu bytes past the end of a%s allocation of %zu bytes (from %s)",
                 (unsigned long)(a - (al->base + al->bytes)), state, al->bytes,
                 caller_name(al->caller).c_str());
    else
        snprintf(out + n, cap - n,
                 "%lu bytes before the start of a%s allocation of %zu bytes (from %s)",
                 (unsigned long)(al->base - a), state, al->bytes, caller_name(al->caller).c_str());
}

static void on_fault(int sig, siginfo_t *info, void *uc_)
{
    uintptr_t a = (uintptr_t)info->si_addr;
    bool ours = mem_in_region((void *)a) || !current_gpu_thread().empty();
    if (!ours) { /* not the stand-in's: whoever handled it before, or the default */
        sigaction(sig, sig == SIGSEGV ? &previous_segv : &previous_bus, nullptr);
        return; /* the access faults again, into that handler */
    }
    bool writing = false;
#if defined(__x86_64__)
    ucontext_t *uc = (ucontext_t *)uc_;
    writing = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
    (void)uc_;
#endif
    int n = snprintf(fault_text, sizeof fault_text, "cuda-sim: ");
    describe_fault(a, writing, fault_text + n, sizeof fault_text - (size_t)n - 2);
    strcat(fault_text, "\n");
    if (write(2, fault_text, strlen(fault_text)) < 0) {}
    static const char trace[] = "cuda-sim: host stack:\n";
    if (write(2, trace, sizeof trace - 1) < 0) {}
    void *frames[32];
    int k = backtrace(frames, 32);
    backtrace_symbols_fd(frames, k, 2);
    signal(SIGABRT, SIG_DFL);
    abort();
}

void mem_install_fault_handler()
{
    static bool done;
    if (done) return;
    done = true;
    stack_t ss;
    ss.ss_size = 256 * 1024;
    ss.ss_sp = malloc(ss.ss_size);
    ss.ss_flags = 0;
    if (ss.ss_sp) sigaltstack(&ss, nullptr);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_segv);
    sigaction(SIGBUS, &sa, &previous_bus);
}

/* "function (file.c:123)" through addr2line where the object has debug information,
 * else "object+0xoffset"; called only to write a message. */
std::string caller_name(const void *ra)
{
    if (!ra) return "?";
    Dl_info info;
    char buf[2048];
    if (!dladdr(ra, &info) || !info.dli_fname) {
        snprintf(buf, sizeof buf, "%p", ra);
        return buf;
    }
    /* a return address points after the call: look one byte back */
    unsigned long off = (unsigned long)((const char *)ra - (const char *)info.dli_fbase) - 1;
    const char *file = strrchr(info.dli_fname, '/');
    file = file ? file + 1 : info.dli_fname;
    snprintf(buf, sizeof buf, "%s+%#lx", file, off);
    std::string name = buf;
    char cmd[1200];
    /* -i: the inlined frames too, innermost first; the last is the real caller's */
    snprintf(cmd, sizeof cmd, "addr2line -f -i -C -s -e '%s' %#lx 2>/dev/null", info.dli_fname,
             off);
    FILE *p = popen(cmd, "r");
    if (!p) return name;
    char fn[512], where[512];
    while (fgets(fn, sizeof fn, p) && fgets(where, sizeof where, p)) {
        if (fn[0] == '?') continue;
        fn[strcspn(fn, "\n")] = 0;
        where[strcspn(where, "\n")] = 0;
        snprintf(buf, sizeof buf, "%s (%s)", fn, where[0] != '?' ? where : file);
        name = buf;
    }
    pclose(p);
    return name;
}

} // namespace sim
