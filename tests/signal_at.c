/* signal_at [--blocked] MS SIGNAL PROGRAM [ARGS...]: runs PROGRAM and sends it
 * SIGNAL (USR1 or TERM) MS milliseconds after its exec (not after the fork: a
 * signal before the exec would hit this helper's child, not the program). The exec
 * is seen by a close-on-exec pipe reaching its end. --blocked keeps the signal
 * blocked across the exec, as a launcher may. For tests/test_early_stop.sh; under
 * mpirun each rank's helper signals its own rank.
 *
 * Before any code of a dynamically linked program runs, the dynamic loader maps and
 * relocates its libraries (milliseconds for pipenet's ~60), and a signal then takes
 * its default action whatever the program does. So the helper notes, just before
 * signalling, whether the loader was done: the program's RELRO page (PT_GNU_RELRO,
 * made read-only once the program itself is relocated, the loader's last step
 * before the program's .preinit_array) is no longer writable in /proc/PID/maps.
 *
 * After that the loader still has a few steps before it runs the program's
 * .preinit_array, where pipenet installs its handlers: a signal there, rare but seen
 * on a loaded machine, also takes its default action. The helper tells that moment
 * from later ones by whether the program catches the signal yet (SigCgt in
 * /proc/PID/status).
 *
 * Exits as the program did; 128 + the signal when the signal killed it after the
 * program caught it; EXIT_IN_LOADER when it killed it while the loader was at work;
 * EXIT_BEFORE_HANDLER when it killed it after the loader had relocated the program
 * but before the program caught it. Says which on stderr. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_IN_LOADER = 120, EXIT_BEFORE_HANDLER = 121 };

static int usage(void)
{
    fprintf(stderr, "usage: signal_at [--blocked] MS USR1|TERM PROGRAM [ARGS...]\n");
    return 2;
}

/* The PT_GNU_RELRO address of the program pid runs (relative to its load address),
 * or false when it has none or the file cannot be read. */
static bool relro_of(pid_t pid, uint64_t *vaddr)
{
    char exe[64];
    snprintf(exe, sizeof exe, "/proc/%d/exe", (int)pid);
    int fd = open(exe, O_RDONLY);
    if (fd < 0) return false;
    Elf64_Ehdr eh;
    bool found = false;
    if (pread(fd, &eh, sizeof eh, 0) == sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr))
        for (int i = 0; i < eh.e_phnum && !found; i++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph)) !=
                sizeof ph)
                break;
            if (ph.p_type == PT_GNU_RELRO) *vaddr = ph.p_vaddr, found = true;
        }
    close(fd);
    return found;
}

/* Whether the dynamic loader has relocated pid's program: its RELRO page is mapped
 * read-only. False while it is writable, and when that cannot be told. */
static bool loader_done(pid_t pid, uint64_t relro)
{
    char path[64], line[512], exe[512];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    if (n <= 0) return false;
    exe[n] = '\0';
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *maps = fopen(path, "r");
    if (!maps) return false;
    uint64_t base = 0, page = (uint64_t)sysconf(_SC_PAGESIZE);
    bool done = false, have_base = false;
    while (fgets(line, sizeof line, maps)) {
        unsigned long long start, end, offset;
        char perms[8], file[512] = "";
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %511s", &start, &end, perms, &offset,
                   file) < 4 || strcmp(file, exe))
            continue;
        if (!have_base && offset == 0) base = start, have_base = true; /* the first mapping */
        uint64_t at = base + (relro & ~(page - 1));
        if (have_base && at >= start && at < end) {
            done = perms[1] == '-';
            break;
        }
    }
    fclose(maps);
    return done;
}

/* Whether pid catches sig yet (a handler installed: its bit in SigCgt). */
static bool catches(pid_t pid, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    unsigned long long mask = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "SigCgt: %llx", &mask) == 1;
    fclose(f);
    return found && (mask >> (sig - 1) & 1);
}

int main(int argc, char **argv)
{
    int a = 1;
    bool blocked = argc > a && !strcmp(argv[a], "--blocked");
    a += blocked;
    if (argc - a < 3) return usage();
    char *end;
    double ms = strtod(argv[a], &end);
    if (*end || ms < 0) return usage();
    int sig = !strcmp(argv[a + 1], "USR1") ? SIGUSR1 : !strcmp(argv[a + 1], "TERM") ? SIGTERM : 0;
    if (!sig) return usage();
    char **program = argv + a + 2;

    int exec_seen[2];
    if (pipe2(exec_seen, O_CLOEXEC) < 0) return perror("signal_at: pipe2"), 2;
    pid_t pid = fork();
    if (pid < 0) return perror("signal_at: fork"), 2;
    if (pid == 0) {
        close(exec_seen[0]);
        if (blocked) {
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, sig);
            sigprocmask(SIG_BLOCK, &set, NULL);
        }
        execvp(program[0], program);
        int e = errno;
        (void)!write(exec_seen[1], &e, sizeof e);
        _exit(127);
    }
    close(exec_seen[1]);
    int e = 0;
    ssize_t n;
    while ((n = read(exec_seen[0], &e, sizeof e)) < 0 && errno == EINTR) continue;
    if (n > 0) {
        fprintf(stderr, "signal_at: cannot run %s: %s\n", program[0], strerror(e));
        waitpid(pid, NULL, 0);
        return 127;
    }
    uint64_t relro = 0;
    bool can_tell = relro_of(pid, &relro);
    if (ms > 0) {
        long whole = (long)(ms / 1000);
        struct timespec t = {whole, (long)((ms - 1000.0 * (double)whole) * 1e6)};
        while (nanosleep(&t, &t) < 0 && errno == EINTR) continue;
    }
    bool relocated = can_tell && loader_done(pid, relro), caught = catches(pid, sig);
    kill(pid, sig);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return perror("signal_at: waitpid"), 2;
    if (WIFSIGNALED(status) && can_tell && !relocated) {
        fprintf(stderr, "signal_at: %s was killed by signal %d sent while the dynamic loader "
                "was at work, before any code of the program\n", program[0], WTERMSIG(status));
        return EXIT_IN_LOADER;
    }
    if (WIFSIGNALED(status) && can_tell && !caught) {
        fprintf(stderr, "signal_at: %s was killed by signal %d sent after the loader had "
                "relocated the program but before the program caught it\n", program[0],
                WTERMSIG(status));
        return EXIT_BEFORE_HANDLER;
    }
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "signal_at: %s was killed by signal %d\n", program[0], WTERMSIG(status));
        return 128 + WTERMSIG(status);
    }
    fprintf(stderr, "signal_at: %s exited with %d\n", program[0], WEXITSTATUS(status));
    return WEXITSTATUS(status);
}
