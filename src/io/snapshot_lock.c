/* The lock of a snapshot directory (snapshot_lock.h).
 *
 * Why a file created with O_EXCL, and not flock or fcntl: snapshot directories live
 * on cluster file systems, where kernel locks are what a mount option says. Over NFS
 * they need lockd (with `nolock` they hold on one node only, and flock is either
 * emulated by fcntl locks or local), Lustre refuses flock unless mounted with `flock`
 * and keeps it to one node with `localflock`, and a lock held by a process on a
 * failed node lasts until a server notices. An exclusive create is atomic on all of
 * them (NFSv3 and later, Lustre, GPFS, BeeGFS, local disks), and the file can say
 * who holds it, which a kernel lock cannot: the message names the holder, and a run
 * can tell that the holder is gone. The price is that a holder that dies leaves its
 * file; holder_gone's rules take such a file over, and on another host only the
 * batch job can vouch that the holder ended (a requeued Slurm job runs again only
 * after the scheduler has ended every process of its earlier start). */
#include "io/snapshot_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"

enum {
    HOST_CAP = 256,
    RECORD_CAP = 2048,
    READ_TRIES = 20,      /* a lock being written is complete within a few µs */
    READ_PAUSE_MS = 25,
    TAKE_TRIES = 8
};

struct pn_snapshot_lock {
    char path[PATH_MAX];
    dev_t dev; /* the lock file this process made */
    ino_t ino;
};

/* Who holds a lock, as its file says (or as this process would write it). */
typedef struct holder {
    char host[HOST_CAP];
    long pid;
    long long started;              /* seconds since the epoch */
    char boot_id[64];               /* the host's, "" where unknown */
    unsigned long long process_start; /* clock ticks after boot, 0 where unknown */
    char pid_namespace[64];
    char job[128];                  /* "slurm:<id>", "pbs:<id>" or "" */
    long restarts;                  /* SLURM_RESTART_COUNT */
} holder;

/* --- who this process is ---------------------------------------------------------------- */

/* The first line of path into out ("" when it cannot be read). */
static void read_line(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (!fgets(out, (int)cap, f)) out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
}

/* When process pid started (field 22 of /proc/<pid>/stat, after the name in
 * parentheses, which may hold spaces), 0 when it cannot be read: with the pid, it
 * tells a process from a later one that got the same pid. */
static unsigned long long process_start(long pid)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    read_line(path, text, sizeof text);
    const char *p = strrchr(text, ')');
    if (!p) return 0;
    for (int field = 3; field <= 22; field++) { /* to the space before it */
        p = strchr(p + 1, ' ');
        if (!p) return 0;
    }
    return strtoull(p + 1, NULL, 10);
}

/* Whether process pid has exited but is not yet reaped (state Z or X, field 3 of
 * /proc/<pid>/stat): mpirun may return while an aborted rank is a zombie, and where
 * the reaper is slow (a container's init) it stays one a while, holding its pid. */
static bool exited(long pid)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    read_line(path, text, sizeof text);
    const char *p = strrchr(text, ')');
    return p && (p[1] == ' ') && (p[2] == 'Z' || p[2] == 'X');
}

static void describe_me(holder *me)
{
    memset(me, 0, sizeof *me);
    if (gethostname(me->host, sizeof me->host) != 0 || !me->host[0])
        snprintf(me->host, sizeof me->host, "unknown-host");
    me->host[sizeof me->host - 1] = '\0';
    me->pid = (long)getpid();
    me->started = (long long)time(NULL);
    read_line("/proc/sys/kernel/random/boot_id", me->boot_id, sizeof me->boot_id);
    me->process_start = process_start(me->pid);
    ssize_t n = readlink("/proc/self/ns/pid", me->pid_namespace, sizeof me->pid_namespace - 1);
    me->pid_namespace[n > 0 ? n : 0] = '\0';
    const char *slurm = getenv("SLURM_JOB_ID"), *pbs = getenv("PBS_JOBID");
    const char *restarts = getenv("SLURM_RESTART_COUNT");
    if (slurm && slurm[0]) {
        snprintf(me->job, sizeof me->job, "slurm:%s", slurm);
        me->restarts = restarts ? atol(restarts) : 0;
    } else if (pbs && pbs[0]) {
        snprintf(me->job, sizeof me->job, "pbs:%s", pbs);
    }
}

/* --- the lock file's text ----------------------------------------------------------------- */

static void format_record(const holder *h, char *out, size_t cap)
{
    snprintf(out, cap,
             "# pipenet: the run that writes snapshots in this directory; delete this file\n"
             "# only when that run is gone\n"
             "host=%s\npid=%ld\nstarted=%lld\nboot_id=%s\nprocess_start=%llu\n"
             "pid_namespace=%s\njob=%s\nrestarts=%ld\nend\n",
             h->host, h->pid, h->started, h->boot_id, h->process_start, h->pid_namespace,
             h->job, h->restarts);
}

/* Reads a record into h; false unless it is whole (up to its "end" line). */
static bool parse_record(char *text, holder *h)
{
    memset(h, 0, sizeof *h);
    bool end = false;
    char *rest;
    for (char *line = strtok_r(text, "\n", &rest); line; line = strtok_r(NULL, "\n", &rest)) {
        char *value = strchr(line, '=');
        if (!strcmp(line, "end")) end = true;
        if (!value) continue;
        *value++ = '\0';
        if (!strcmp(line, "host")) snprintf(h->host, sizeof h->host, "%s", value);
        if (!strcmp(line, "pid")) h->pid = atol(value);
        if (!strcmp(line, "started")) h->started = atoll(value);
        if (!strcmp(line, "boot_id")) snprintf(h->boot_id, sizeof h->boot_id, "%s", value);
        if (!strcmp(line, "process_start")) h->process_start = strtoull(value, NULL, 10);
        if (!strcmp(line, "pid_namespace"))
            snprintf(h->pid_namespace, sizeof h->pid_namespace, "%s", value);
        if (!strcmp(line, "job")) snprintf(h->job, sizeof h->job, "%s", value);
        if (!strcmp(line, "restarts")) h->restarts = atol(value);
    }
    return end && h->host[0] && h->pid > 0;
}

/* "pipenet pid 12 on host n7, started 2025-01-02 03:04:05 UTC, Slurm job 99" */
static void describe(const holder *h, char *out, size_t cap)
{
    char when[64] = "at an unknown time";
    time_t started = (time_t)h->started;
    struct tm tm;
    if (h->started > 0 && localtime_r(&started, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %Z", &tm);
    char job[160] = "";
    if (!strncmp(h->job, "slurm:", 6))
        snprintf(job, sizeof job, ", Slurm job %s (restart %ld)", h->job + 6, h->restarts);
    else if (!strncmp(h->job, "pbs:", 4))
        snprintf(job, sizeof job, ", PBS job %s", h->job + 4);
    snprintf(out, cap, "pipenet pid %ld on host %s, started %s%s", h->pid, h->host, when, job);
}

/* --- whether the holder is gone ------------------------------------------------------------ */

/* Whether h's pid means a process of this host and pid namespace (a namespace not
 * known on either side counts as this one). */
static bool seen_from_here(const holder *h, const holder *me)
{
    return !strcmp(h->host, me->host) &&
           (!h->pid_namespace[0] || !me->pid_namespace[0] ||
            !strcmp(h->pid_namespace, me->pid_namespace));
}

/* True, with the reason in why, when h surely no longer runs (see snapshot_lock.h). */
static bool holder_gone(const holder *h, const holder *me, char *why, size_t cap)
{
    if (seen_from_here(h, me)) {
        if (h->boot_id[0] && me->boot_id[0] && strcmp(h->boot_id, me->boot_id))
            return snprintf(why, cap, "host %s has restarted since", h->host), true;
        if (kill((pid_t)h->pid, 0) != 0 && errno == ESRCH)
            return snprintf(why, cap, "no process %ld runs on this host", h->pid), true;
        unsigned long long started = process_start(h->pid); /* 0: not ours to read */
        if (h->process_start && started && started != h->process_start)
            return snprintf(why, cap, "pid %ld is now another process", h->pid), true;
        if (exited(h->pid))
            return snprintf(why, cap, "process %ld has exited (not yet reaped)", h->pid), true;
        return false;
    }
    if (!h->job[0] || strcmp(h->job, me->job)) return false;
    if (!strncmp(me->job, "slurm:", 6) && me->restarts > h->restarts)
        return snprintf(why, cap, "Slurm job %s has been requeued since (restart %ld, the "
                        "lock's %ld)", me->job + 6, me->restarts, h->restarts), true;
    if (!strncmp(me->job, "pbs:", 4))
        return snprintf(why, cap, "PBS job %s runs again", me->job + 4), true;
    return false;
}

static int refuse(const char *dir, const char *path, const holder *h, const holder *me)
{
    char who[HOST_CAP + 512], elsewhere[PATH_MAX + HOST_CAP + 128] = "";
    describe(h, who, sizeof who);
    if (!seen_from_here(h, me))
        snprintf(elsewhere, sizeof elsewhere, " (pipenet cannot see from host %s whether a "
                 "process of another host%s lives: if that run is gone, delete %s)", me->host,
                 strcmp(h->host, me->host) ? "" : " or container", path);
    return pn_error_set(PN_ERR_INVALID, "snapshot directory '%s' is in use by another run: %s, "
                        "holds %s%s. Two runs in one directory would delete and replace each "
                        "other's snapshots: give this run another --snapshot-dir, or let that "
                        "run end first", dir, who, path, elsewhere);
}

/* --- the file --------------------------------------------------------------------------- */

/* Creates the lock file with record: 0, 1 when one exists already, or an error. */
static int create(pn_snapshot_lock *lock, const char *record)
{
    int fd = open(lock->path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 && errno == EEXIST) return 1;
    if (fd < 0)
        return pn_error_set(PN_ERR_IO, "cannot create the lock file %s: %s", lock->path,
                            strerror(errno));
    size_t len = strlen(record);
    struct stat st;
    /* synced, so that the next run finds a whole record even after a crash */
    bool ok = write(fd, record, len) == (ssize_t)len && fsync(fd) == 0 && fstat(fd, &st) == 0;
    int saved = errno;
    close(fd);
    if (!ok) {
        unlink(lock->path);
        return pn_error_set(PN_ERR_IO, "cannot write the lock file %s: %s", lock->path,
                            strerror(saved));
    }
    lock->dev = st.st_dev;
    lock->ino = st.st_ino;
    return 0;
}

/* Reads the lock file at path into h and *st: 0, 1 when it is gone, or an error.
 * A record without its end is being written: it is read again a few times. */
static int read_holder(const char *dir, const char *path, holder *h, struct stat *st)
{
    for (int tries = 0;; tries++) {
        char text[RECORD_CAP];
        int fd = open(path, O_RDONLY);
        if (fd < 0 && errno == ENOENT) return 1;
        if (fd < 0 || fstat(fd, st) != 0) {
            int saved = errno;
            if (fd >= 0) close(fd);
            return pn_error_set(PN_ERR_IO, "cannot read the lock file %s: %s", path,
                                strerror(saved));
        }
        ssize_t n = read(fd, text, sizeof text - 1);
        close(fd);
        text[n > 0 ? n : 0] = '\0';
        if (parse_record(text, h)) return 0;
        if (tries == READ_TRIES)
            return pn_error_set(PN_ERR_INVALID, "snapshot directory '%s' has a lock file, %s, "
                                "that does not say which run holds it: if no run uses the "
                                "directory, delete it", dir, path);
        nanosleep(&(struct timespec){0, READ_PAUSE_MS * 1000000L}, NULL);
    }
}

/* Removes the stale lock file stale describes, and only it: it is moved aside (an
 * atomic rename) and checked to be that file; one that another run made after this
 * one looked is put back. */
static int remove_stale(const char *path, const struct stat *stale)
{
    char aside[PATH_MAX + 64];
    snprintf(aside, sizeof aside, "%s.stale-%ld", path, (long)getpid());
    if (rename(path, aside) != 0)
        return errno == ENOENT ? 0 : pn_error_set(PN_ERR_IO, "cannot move the stale lock file "
                                                  "%s aside: %s", path, strerror(errno));
    struct stat moved;
    if (stat(aside, &moved) == 0 && moved.st_dev == stale->st_dev &&
        moved.st_ino == stale->st_ino) {
        unlink(aside);
        return 0;
    }
    if (link(aside, path) == 0) { /* never over a third run's lock */
        unlink(aside);
        return 0;
    }
    return pn_error_set(PN_ERR_IO, "lost a race for the lock file %s with two other runs: "
                        "another run's lock is now %s", path, aside);
}

int pn_snapshot_lock_take(const char *dir, pn_snapshot_lock **out)
{
    *out = NULL;
    pn_snapshot_lock *lock = calloc(1, sizeof *lock);
    if (!lock) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    if ((size_t)snprintf(lock->path, sizeof lock->path, "%s/%s", dir, PN_SNAPSHOT_LOCK_NAME) >=
        sizeof lock->path) {
        free(lock);
        return pn_error_set(PN_ERR_INVALID, "snapshot directory: path too long: %s", dir);
    }
    holder me, h;
    char record[RECORD_CAP], why[HOST_CAP + 256], who[HOST_CAP + 512];
    describe_me(&me);
    format_record(&me, record, sizeof record);
    int rc = 1;
    for (int tries = 0; rc == 1 && tries < TAKE_TRIES; tries++) {
        struct stat st;
        if ((rc = create(lock, record)) != 1) break;
        if ((rc = read_holder(dir, lock->path, &h, &st)) != 0) continue; /* 1: gone, try again */
        if (!holder_gone(&h, &me, why, sizeof why)) {
            rc = refuse(dir, lock->path, &h, &me);
            break;
        }
        describe(&h, who, sizeof who);
        pn_log_warn("snapshot directory '%s': taking over the lock of a run that is gone (%s): "
                    "%s", dir, who, why);
        rc = remove_stale(lock->path, &st);
        if (rc == 0) rc = 1;
    }
    if (rc == 1)
        rc = pn_error_set(PN_ERR_IO, "cannot take the lock file %s: other runs keep taking it",
                          lock->path);
    if (rc < 0) {
        free(lock);
        return rc;
    }
    *out = lock;
    return PN_OK;
}

void pn_snapshot_lock_release(pn_snapshot_lock *lock)
{
    if (!lock) return;
    struct stat st; /* not a lock that replaced this one (taken over as stale) */
    if (stat(lock->path, &st) == 0 && st.st_dev == lock->dev && st.st_ino == lock->ino)
        unlink(lock->path);
    free(lock);
}
