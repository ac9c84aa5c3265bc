/* Snapshot files on disk (snapshot_dir.h): the durable write (temporary name,
 * fsync, rename, fsync of the directory) and the directory of a run's snapshots,
 * scanned by name: snapshot-<step>.h5, and snapshot-*.tmp-<pid> while being written. */
#include "io/snapshot_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"
#include "io/snapshot_file.h"
#include "io/snapshot_parts.h"

static const char SNAPSHOT_PREFIX[] = PN_SNAPSHOT_PREFIX;

/* fsyncs path (a file or, with O_DIRECTORY, a directory). */
static int sync_path(const char *path, int flags, const char *what)
{
    int fd = open(path, O_RDONLY | flags);
    if (fd < 0)
        return pn_error_set(PN_ERR_IO, "cannot open %s '%s' to sync it: %s", what, path,
                            strerror(errno));
    int rc = 0;
    if (fsync(fd) != 0)
        rc = pn_error_set(PN_ERR_IO, "cannot sync %s '%s': %s", what, path, strerror(errno));
    close(fd);
    return rc;
}

/* The directory holding path ("." when path has no '/'). */
static void parent_dir(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, cap, ".");
    else if (slash == path)
        snprintf(out, cap, "/");
    else
        snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

/* Opens what was just written and reads its header: a file HDF5 cannot open must
 * never replace a snapshot (a trimmed file once could not be opened). */
static int check_reads_back(const char *tmp, const char *path, const pn_train_state *st,
                            const char *format)
{
    pn_train_state *back;
    if (pn_snapshot_read_header(tmp, format ? format : st->format, &back) != 0)
        return pn_error_set(PN_ERR_IO, "%s: the file just written does not read back, so it "
                            "does not replace anything: %s", path, pn_error_message());
    pn_train_state_free(back);
    return 0;
}


/* How one file of a snapshot is made under its temporary name, and checked there. */
typedef struct durable_job {
    int (*write)(const struct durable_job *job, const char *tmp);
    int (*check)(const struct durable_job *job, const char *tmp);
    const char *path, *format;
    const pn_train_state *st;
    const pn_snapshot_part *part;
    int parts, n_params;
    const pn_snapshot_index_param *params;
    int (*hook)(void *ctx); /* between the check and the rename, or NULL */
    void *hook_ctx;
} durable_job;

/* Writes job's file as "<path>.tmp-<pid>", checks it, fsyncs it and renames it to
 * path; the temporary is removed on failure (path untouched). */
static int write_durable(const durable_job *job, long pid)
{
    char tmp[PATH_MAX + 32];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%ld", job->path, pid) >= sizeof tmp)
        return pn_error_set(PN_ERR_INVALID, "path too long: %s", job->path);
    int rc = job->write(job, tmp);
    if (rc == 0) rc = job->check(job, tmp);
    if (rc == 0 && job->hook) rc = job->hook(job->hook_ctx);
    if (rc == 0) rc = sync_path(tmp, 0, "file");
    if (rc == 0 && rename(tmp, job->path) != 0)
        rc = pn_error_set(PN_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, job->path,
                          strerror(errno));
    if (rc < 0) unlink(tmp);
    return rc;
}

static int sync_parent(const char *path)
{
    char dir[PATH_MAX];
    parent_dir(path, dir, sizeof dir);
    return sync_path(dir, O_DIRECTORY, "directory");
}

static int write_state(const durable_job *job, const char *tmp)
{
    return pn_snapshot_file_write(tmp, job->st, job->format);
}

static int check_state(const durable_job *job, const char *tmp)
{
    return check_reads_back(tmp, job->path, job->st, job->format);
}

int pn_snapshot_write(const char *path, const pn_train_state *st, const char *format)
{
    durable_job job = {write_state, check_state, path, format, st, NULL, 0, 0, NULL, NULL, NULL};
    PN_TRY(write_durable(&job, (long)getpid()));
    return sync_parent(path);
}

static int write_part(const durable_job *job, const char *tmp)
{
    return pn_snapshot_part_file_write(tmp, job->part);
}

static int check_part(const durable_job *job, const char *tmp)
{
    const pn_snapshot_part *p = job->part;
    if (p->stage < 0) return check_reads_back(tmp, job->path, p->header, PN_FORMAT_SNAPSHOT);
    if (pn_snapshot_part_check(tmp, p->header->step, p->stage, p->replica) != 0)
        return pn_error_set(PN_ERR_IO, "%s: the part just written does not read back: %s",
                            job->path, pn_error_message());
    return 0;
}

void pn_snapshot_part_path(const char *dir, long step, int stage, int replica, char *out,
                           size_t cap)
{
    char name[NAME_MAX + 1];
    pn_snapshot_part_name(step, stage, replica, name, sizeof name);
    snprintf(out, cap, "%s/%s", dir, name);
}

int pn_snapshot_write_part(const char *dir, const pn_snapshot_part *part, long pid, char *path,
                           size_t cap)
{
    if (part->stage < 0)
        pn_snapshot_path(dir, part->header->step, path, cap);
    else
        pn_snapshot_part_path(dir, part->header->step, part->stage, part->replica, path, cap);
    durable_job job = {write_part, check_part, path, NULL, NULL, part, 0, 0, NULL, NULL, NULL};
    PN_TRY(write_durable(&job, pid));
    return part->stage < 0 ? sync_parent(path) : 0; /* a part: the index's commit syncs */
}

void pn_snapshot_drop_part(const char *dir, long step, int stage, int replica, long pid)
{
    char path[PATH_MAX], tmp[PATH_MAX + 32], index[PATH_MAX];
    pn_snapshot_part_path(dir, step, stage, replica, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, pid);
    unlink(tmp);
    pn_snapshot_path(dir, step, index, sizeof index);
    struct stat info;
    if (stat(index, &info) != 0) unlink(path); /* a committed snapshot keeps its parts */
}

int pn_snapshot_unpublish(const char *dir, long step)
{
    char index[PATH_MAX], name[NAME_MAX + 1];
    pn_snapshot_path(dir, step, index, sizeof index);
    pn_snapshot_part_name(step, 0, 0, name, sizeof name);
    size_t stem = strlen(name) - strlen("000-000.h5"); /* "snapshot-<step>.part-" */
    struct stat info;
    if (stat(index, &info) != 0) return 0;
    DIR *d = opendir(dir);
    if (!d) return pn_error_set(PN_ERR_IO, "cannot open directory '%s': %s", dir, strerror(errno));
    bool parts = false;
    for (struct dirent *e; !parts && (e = readdir(d));)
        parts = !strncmp(e->d_name, name, stem);
    closedir(d);
    if (!parts) return 0; /* a version 1 file: replaced whole by the rename */
    if (unlink(index) != 0 && errno != ENOENT)
        return pn_error_set(PN_ERR_IO, "cannot delete '%s': %s", index, strerror(errno));
    return sync_path(dir, O_DIRECTORY, "directory");
}

static int write_index(const durable_job *job, const char *tmp)
{
    return pn_snapshot_index_file_write(tmp, job->st, job->parts, job->params, job->n_params);
}

static int check_index(const durable_job *job, const char *tmp)
{
    if (pn_snapshot_check(tmp) != 0)
        return pn_error_set(PN_ERR_IO, "%s: the index just written does not check out, so it "
                            "does not replace anything: %s", job->path, pn_error_message());
    return 0;
}

int pn_snapshot_commit_index(const char *dir, const pn_train_state *header, int parts,
                             const pn_snapshot_index_param *params, int n,
                             int (*hook)(void *ctx), void *hook_ctx, char *path, size_t cap)
{
    pn_snapshot_path(dir, header->step, path, cap);
    PN_TRY(sync_path(dir, O_DIRECTORY, "directory")); /* the parts' renames first */
    durable_job job = {write_index, check_index, path, NULL, header, NULL, parts, n, params,
                       hook, hook_ctx};
    PN_TRY(write_durable(&job, (long)getpid()));
    return sync_parent(path);
}

int pn_snapshot_dir_create(const char *dir)
{
    char path[PATH_MAX];
    if (!dir[0]) return pn_error_set(PN_ERR_INVALID, "snapshot directory: empty path");
    if ((size_t)snprintf(path, sizeof path, "%s", dir) >= sizeof path)
        return pn_error_set(PN_ERR_INVALID, "snapshot directory: path too long: %s", dir);
    /* each parent in turn, then dir itself (mkdir -p) */
    for (char *p = path + 1;; p++) {
        bool last = *p == '\0';
        if (*p != '/' && !last) continue;
        *p = '\0';
        struct stat info;
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return pn_error_set(PN_ERR_IO, "cannot create snapshot directory '%s'%s%s: %s", dir,
                                strcmp(path, dir) ? " at " : "", strcmp(path, dir) ? path : "",
                                strerror(errno));
        if (stat(path, &info) != 0 || !S_ISDIR(info.st_mode))
            return pn_error_set(PN_ERR_IO, "cannot create snapshot directory '%s': '%s' is not "
                                           "a directory", dir, path);
        if (last) break;
        *p = '/';
    }
    return 0;
}

int pn_snapshot_dir_prepare(const char *dir)
{
    PN_TRY(pn_snapshot_dir_create(dir));
    char probe[PATH_MAX + 64];
    snprintf(probe, sizeof probe, "%s/.pipenet-write-test-%ld", dir, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    bool written = fd >= 0 && write(fd, "x", 1) == 1;
    int saved = errno;
    if (fd >= 0) close(fd);
    unlink(probe);
    if (!written)
        return pn_error_set(PN_ERR_IO, "snapshot directory '%s' is not writable: %s", dir,
                            strerror(saved));
    return 0;
}

int pn_snapshot_dir_mark(const char *dir, char *name, size_t cap, bool create)
{
    char path[PATH_MAX + 64];
    if (create) snprintf(name, cap, ".pipenet-seen-%ld", (long)getpid());
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!create) {
        struct stat info;
        if (stat(path, &info) == 0) return 0;
        return pn_error_set(PN_ERR_IO, "snapshot directory '%s' is not the one rank 0 writes to "
                            "(it lacks rank 0's '%s'): every rank that writes a part of a "
                            "snapshot must see the same directory (a shared file system, not "
                            "a node-local path)", dir, name);
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return pn_error_set(PN_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    close(fd);
    return 0;
}

void pn_snapshot_dir_unmark(const char *dir, const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

int pn_snapshot_dir_check_room(const char *dir, uint64_t bytes)
{
    struct statvfs fs;
    if (statvfs(dir, &fs) != 0)
        return pn_error_set(PN_ERR_IO, "cannot tell the free space of snapshot directory '%s': %s",
                            dir, strerror(errno));
    uint64_t block = fs.f_frsize ? fs.f_frsize : fs.f_bsize;
    if (fs.f_blocks == 0 || block == 0) return 0; /* a file system that does not say */
    uint64_t needed = (bytes + block - 1) / block * block, free = (uint64_t)fs.f_bavail * block;
    if (needed <= free) return 0;
    return pn_error_set(PN_ERR_IO, "snapshot directory '%s' has %llu bytes free (%.1f MB), and "
                        "one snapshot of this model takes %llu (%.1f MB): free some space there "
                        "or give another --snapshot-dir", dir, (unsigned long long)free,
                        (double)free / 1e6, (unsigned long long)needed, (double)needed / 1e6);
}

void pn_snapshot_path(const char *dir, long step, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s%010ld.h5", dir, SNAPSHOT_PREFIX, step);
}

/* One snapshot-<step>.h5 of a directory. */
typedef struct snap_file {
    long step;
    char name[NAME_MAX + 1];
} snap_file;

/* The step of file name when it is exactly what pn_snapshot_path makes, else -1. */
static long snapshot_step(const char *name)
{
    size_t prefix = sizeof SNAPSHOT_PREFIX - 1;
    if (strncmp(name, SNAPSHOT_PREFIX, prefix) || name[prefix] < '0' || name[prefix] > '9')
        return -1;
    char *end, canonical[NAME_MAX + 1];
    errno = 0;
    long step = strtol(name + prefix, &end, 10);
    if (errno || strcmp(end, ".h5")) return -1;
    snprintf(canonical, sizeof canonical, "%s%010ld.h5", SNAPSHOT_PREFIX, step);
    return strcmp(canonical, name) ? -1 : step;
}

/* The pid of a temporary file snapshot-*.tmp-<pid>, else -1. */
static long temporary_pid(const char *name)
{
    const char *tag = strstr(name, ".tmp-");
    if (strncmp(name, SNAPSHOT_PREFIX, sizeof SNAPSHOT_PREFIX - 1) || !tag) return -1;
    while (strstr(tag + 1, ".tmp-")) tag = strstr(tag + 1, ".tmp-");
    char *end;
    errno = 0;
    long pid = strtol(tag + 5, &end, 10);
    return errno || end == tag + 5 || *end || pid <= 0 ? -1 : pid;
}

static int newest_first(const void *a, const void *b)
{
    long x = ((const snap_file *)a)->step, y = ((const snap_file *)b)->step;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The snapshots of dir, newest first (*files malloc'd), and optionally the dead
 * writers' temporary files deleted on the way. */
static int list_snapshots(const char *dir, snap_file **files, int *n, bool drop_temporaries)
{
    *files = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return pn_error_set(PN_ERR_IO, "cannot open directory '%s': %s", dir, strerror(errno));
    int cap = 0, rc = 0;
    for (struct dirent *e; rc == 0 && (errno = 0, e = readdir(d));) {
        long pid = drop_temporaries ? temporary_pid(e->d_name) : -1;
        if (pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
            char path[PATH_MAX + NAME_MAX + 2];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (unlink(path) != 0 && errno != ENOENT)
                rc = pn_error_set(PN_ERR_IO, "cannot delete '%s': %s", path, strerror(errno));
            continue;
        }
        long step = snapshot_step(e->d_name);
        if (step < 0) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            snap_file *grown = realloc(*files, (size_t)cap * sizeof *grown);
            if (!grown) {
                rc = pn_error_set(PN_ERR_NOMEM, "out of memory listing '%s'", dir);
                break;
            }
            *files = grown;
        }
        (*files)[*n].step = step;
        snprintf((*files)[*n].name, sizeof (*files)[*n].name, "%s", e->d_name);
        (*n)++;
    }
    if (rc == 0 && errno)
        rc = pn_error_set(PN_ERR_IO, "cannot list directory '%s': %s", dir, strerror(errno));
    closedir(d);
    if (rc == 0 && *n > 1) qsort(*files, (size_t)*n, sizeof **files, newest_first);
    if (rc < 0) {
        free(*files);
        *files = NULL;
        *n = 0;
    }
    return rc;
}

int pn_snapshot_latest(const char *dir, bool none_ok, char *out, size_t cap)
{
    snap_file *files;
    int n;
    if (cap) out[0] = '\0';
    PN_TRY(list_snapshots(dir, &files, &n, false));
    if (n == 0) {
        free(files);
        return none_ok ? 0 : pn_error_set(PN_ERR_IO, "no snapshots in %s", dir);
    }
    char refused[1024] = "";
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + NAME_MAX + 2];
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        if (pn_snapshot_verify(path) == 0) { /* one dataset at a time, none kept */
            if (used) pn_log_warn("%s: skipped newer snapshots that do not verify: %s", dir, refused);
            free(files);
            if ((size_t)snprintf(out, cap, "%s", path) >= cap)
                return pn_error_set(PN_ERR_INVALID, "path too long: %s", path);
            pn_error_clear();
            return 0;
        }
        if (used < sizeof refused) {
            int k = snprintf(refused + used, sizeof refused - used, "%s%s", used ? "; " : "",
                             pn_error_message());
            used += k > 0 ? (size_t)k : 0;
        }
    }
    free(files);
    return pn_error_set(PN_ERR_IO, "no usable snapshot in %s (%d refused): %s", dir, n, refused);
}

int pn_snapshot_resolve(const char *path, char *out, size_t cap)
{
    struct stat info;
    if (stat(path, &info) == 0 && S_ISDIR(info.st_mode))
        return pn_snapshot_latest(path, false, out, cap);
    if ((size_t)snprintf(out, cap, "%s", path) >= cap)
        return pn_error_set(PN_ERR_INVALID, "path too long: %s", path);
    return 0; /* a file, or nothing: opening it says why */
}

/* The step of a part file snapshot-<step>.part-SSS-RRR.h5 (not a temporary), else -1. */
static long part_step(const char *name)
{
    size_t prefix = sizeof SNAPSHOT_PREFIX - 1, n = strlen(name);
    if (strncmp(name, SNAPSHOT_PREFIX, prefix) || n < prefix + 10 + 6 + 3 ||
        strncmp(name + prefix + 10, ".part-", 6) || strcmp(name + n - 3, ".h5"))
        return -1;
    long step = 0;
    for (size_t k = prefix; k < prefix + 10; k++) {
        if (name[k] < '0' || name[k] > '9') return -1;
        step = step * 10 + (name[k] - '0');
    }
    return step;
}

/* Deletes the parts of steps up to written whose index is gone: pruned, or never
 * committed (a save that failed or was killed between its parts and its index). */
static int drop_orphan_parts(const char *dir, long written)
{
    DIR *d = opendir(dir);
    if (!d)
        return pn_error_set(PN_ERR_IO, "cannot open directory '%s': %s", dir, strerror(errno));
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        long step = part_step(e->d_name);
        char path[PATH_MAX + NAME_MAX + 2], index[PATH_MAX];
        struct stat info;
        if (step < 0 || step > written) continue; /* a later step: not this run's */
        pn_snapshot_path(dir, step, index, sizeof index);
        if (stat(index, &info) == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0 && errno != ENOENT)
            rc = pn_error_set(PN_ERR_IO, "cannot delete '%s': %s", path, strerror(errno));
    }
    closedir(d);
    return rc;
}

int pn_snapshot_prune(const char *dir, int keep, long written)
{
    if (keep < 0) return pn_error_set(PN_ERR_INVALID, "cannot keep %d snapshots", keep);
    snap_file *files;
    int n, rc = 0, kept = 0;
    PN_TRY(list_snapshots(dir, &files, &n, true));
    for (int i = 0; rc == 0 && i < n; i++) { /* newest first */
        if (files[i].step > written) {
            pn_log_warn("%s/%s is newer than this run's snapshot of step %ld and is not this "
                        "run's: --resume auto would take it first (move it away if it is stale)",
                        dir, files[i].name, written);
            continue;
        }
        if (kept++ < keep) continue;
        char path[PATH_MAX + NAME_MAX + 2];
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        if (unlink(path) != 0 && errno != ENOENT)
            rc = pn_error_set(PN_ERR_IO, "cannot delete '%s': %s", path, strerror(errno));
    }
    free(files);
    return rc == 0 ? drop_orphan_parts(dir, written) : rc; /* an index first, then its parts */
}
