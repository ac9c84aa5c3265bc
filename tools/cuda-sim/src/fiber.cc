/* Fibers of the CUDA stand-in (sim.h): each GPU thread that must wait for its block or
 * warp keeps a stack of its own, and the block's scheduler switches between them. On
 * x86-64 a switch saves and restores the callee-saved registers (a few nanoseconds, no
 * system call); elsewhere ucontext does it. The
 * stacks come from a pool, each with a guard page below it. In the ThreadSanitizer
 * toolkit, ThreadSanitizer's fiber interface is called too, so that it sees each GPU
 * thread as a thread of its own. */
#include "sim.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

/* ThreadSanitizer's fiber and annotation interface, present when libtsan is loaded. */
extern "C" {
void *__tsan_get_current_fiber(void) __attribute__((weak));
void *__tsan_create_fiber(unsigned flags) __attribute__((weak));
void __tsan_destroy_fiber(void *fiber) __attribute__((weak));
void __tsan_switch_to_fiber(void *fiber, unsigned flags) __attribute__((weak));
void __tsan_acquire(void *addr) __attribute__((weak));
void __tsan_release(void *addr) __attribute__((weak));
void AnnotateNewMemory(const char *file, int line, const volatile void *mem, size_t size)
    __attribute__((weak));
}

namespace sim {

static const size_t STACK_BYTES = 256 * 1024;
static std::vector<fiber_stack> pool;

fiber_stack stack_get()
{
    if (!pool.empty()) {
        fiber_stack s = pool.back();
        pool.pop_back();
        return s;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *m = mmap(nullptr, STACK_BYTES + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) cuda_sim_fatal("no memory for a GPU thread's stack: %s", strerror(errno));
    mprotect(m, page, PROT_NONE); /* a stack overflow faults instead of corrupting */
    return fiber_stack{(char *)m + page, STACK_BYTES};
}

void stack_put(fiber_stack s) { pool.push_back(s); }

#if defined(__x86_64__)

extern "C" void cuda_sim_switch(void **save, void *to);
extern "C" void cuda_sim_entry(void);

/* cuda_sim_switch(save, to): pushes rbp, rbx and r12-r15 on the current stack, stores the
 * stack pointer in *save, takes `to` as the stack pointer and pops the same from it.
 * The floating-point control words are not switched: every fiber starts with the
 * host's and kernels do not change them. cuda_sim_entry starts a new fiber: fn in r13,
 * its argument in r12 (from fiber_make's frame). */
asm(R"(
    .text
    .globl cuda_sim_switch
    .type cuda_sim_switch, @function
cuda_sim_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cuda_sim_switch, .-cuda_sim_switch

    .globl cuda_sim_entry
    .type cuda_sim_entry, @function
cuda_sim_entry:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size cuda_sim_entry, .-cuda_sim_entry
)");

void *fiber_make(fiber_stack s, void (*fn)(void *), void *arg)
{
    uintptr_t top = ((uintptr_t)(s.base + s.bytes)) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 16); /* after ret: rsp 16-aligned at cuda_sim_entry's call */
    *--sp = (uint64_t)cuda_sim_entry;      /* ret of cuda_sim_switch */
    *--sp = 0;                             /* rbp */
    *--sp = 0;                             /* rbx */
    *--sp = (uint64_t)arg;                 /* r12 */
    *--sp = (uint64_t)fn;                  /* r13 */
    *--sp = 0;                             /* r14 */
    *--sp = 0;                             /* r15 */
    return sp;
}

void fiber_switch(void **save, void *to) { cuda_sim_switch(save, to); }

#else

/* Elsewhere: ucontext (a system call per switch for the signal mask: slower). */
struct ucfiber {
    ucontext_t uc;
};

static void trampoline(unsigned lo, unsigned hi, unsigned alo, unsigned ahi)
{
    void (*fn)(void *) = (void (*)(void *))(((uintptr_t)hi << 32) | lo);
    void *arg = (void *)(((uintptr_t)ahi << 32) | alo);
    fn(arg);
    cuda_sim_fatal("a fiber returned");
}

void *fiber_make(fiber_stack s, void (*fn)(void *), void *arg)
{
    ucfiber *f = new ucfiber;
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = s.base;
    f->uc.uc_stack.ss_size = s.bytes;
    f->uc.uc_link = nullptr;
    uintptr_t fp = (uintptr_t)fn, ap = (uintptr_t)arg;
    makecontext(&f->uc, (void (*)())trampoline, 4, (unsigned)fp, (unsigned)(fp >> 32), (unsigned)ap,
                (unsigned)(ap >> 32));
    return f;
}

void fiber_switch(void **save, void *to)
{
    ucfiber *mine = (ucfiber *)*save;
    if (!mine) *save = mine = new ucfiber;
    swapcontext(&mine->uc, &((ucfiber *)to)->uc);
}

#endif

/* --- ThreadSanitizer ------------------------------------------------------------------- */

const bool tsan_loaded = __tsan_create_fiber != nullptr;

void *tsan_fiber_create() { return tsan_loaded ? __tsan_create_fiber(0) : nullptr; }
void tsan_fiber_destroy(void *f)
{
    if (tsan_loaded && f) __tsan_destroy_fiber(f);
}
void *tsan_fiber_current() { return tsan_loaded ? __tsan_get_current_fiber() : nullptr; }
/* No synchronization implied: GPU threads order themselves only by barriers, shuffles
 * and the launch itself, which the scheduler annotates. */
void tsan_switch_to(void *f)
{
    if (f) __tsan_switch_to_fiber(f, 1 /* __tsan_switch_to_fiber_no_sync */);
}
void tsan_acquire_at(void *addr) { __tsan_acquire(addr); }
void tsan_release_at(void *addr) { __tsan_release(addr); }
void tsan_new_memory_at(void *addr, size_t bytes)
{
    if (AnnotateNewMemory) AnnotateNewMemory(__FILE__, __LINE__, addr, bytes);
}

} // namespace sim
