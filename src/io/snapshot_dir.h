/* Snapshot files on disk: writing one so that a crash never leaves a half file
 * under its final name (a temporary name "<path>.tmp-<pid>", fsync, rename, fsync of
 * the directory), and the snapshot directory of a run: dir/snapshot-<step>.h5, the
 * newest one that verifies, pruning old ones and dead writers' temporaries. */
#ifndef PN_SNAPSHOT_DIR_H
#define PN_SNAPSHOT_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/snapshot_file.h"
#include "io/snapshot_parts.h"
#include "io/train_state.h"

/* What a run's files in its snapshot directory are called: snapshots, their parts
 * (and their temporaries while written) start with PN_SNAPSHOT_PREFIX
 * (io/snapshot_file.h); the lock is io/snapshot_lock.h's PN_SNAPSHOT_LOCK_NAME. An
 * output the user names must be neither. */

/* Writes st (as format, NULL: st's own) to path through a temporary name, which is
 * opened and its header read back, fsynced and renamed; the directory is fsynced
 * too. On failure the temporary is removed and whatever path held before is
 * untouched. */
int pn_snapshot_write(const char *path, const pn_train_state *st, const char *format);

/* A snapshot of several writers (io/snapshot_parts.h). Each writer calls
 * pn_snapshot_write_part: its part as dir/snapshot-<step>.part-SSS-RRR.h5 through
 * the temporary name "<path>.tmp-<pid>" (pid: rank 0's, so that rank 0's rule for
 * dead writers' temporaries covers every part), read back, fsynced and renamed; a
 * part of stage < 0 is the whole version 1 file dir/snapshot-<step>.h5, and the
 * directory is fsynced too. path receives the final name. */
int pn_snapshot_write_part(const char *dir, const pn_snapshot_part *part, long pid, char *path,
                           size_t cap);

/* Before the parts of step are written: when dir already holds a snapshot of parts
 * of that step (a run that went back to an older snapshot and trains past it again),
 * deletes its index, so that the parts written over its own never show through it
 * as a mix of two saves; a version 1 file of that step stays until the new index
 * replaces it. */
int pn_snapshot_unpublish(const char *dir, long step);

/* dir/snapshot-<step>.part-SSS-RRR.h5 */
void pn_snapshot_part_path(const char *dir, long step, int stage, int replica, char *out,
                           size_t cap);

/* After a failed save: removes a writer's temporary and, unless the index of step is
 * there (a snapshot committed before, whose part this is), its part. */
void pn_snapshot_drop_part(const char *dir, long step, int stage, int replica, long pid);

/* Once every part is in place: fsyncs dir, writes the index (io/snapshot_parts.h) under
 * a temporary name, checks it (every dataset over parts that are there, whole and of
 * its shape: pn_snapshot_check), fsyncs it, renames it to dir/snapshot-<step>.h5 (into
 * path) and fsyncs dir: the commit. hook (or NULL) runs between the check and the
 * rename (the fault tests' way in). Without it the parts are orphans, which
 * pn_snapshot_prune deletes. */
int pn_snapshot_commit_index(const char *dir, const pn_train_state *header, int parts,
                             const pn_snapshot_index_param *params, int n,
                             int (*hook)(void *ctx), void *hook_ctx, char *path, size_t cap);

/* Creates the snapshot directory dir and its missing parents (mkdir -p). */
int pn_snapshot_dir_create(const char *dir);

/* The same, then checks that a file can be written in dir (a run checks this before
 * it trains, so that no work is lost to a directory it cannot use). */
int pn_snapshot_dir_prepare(const char *dir);

/* Whether ranks see one directory: with create, makes a marker file in dir, its name
 * into name (cap bytes); without, checks that the marker called name is there (an
 * error names dir and says why it matters). pn_snapshot_dir_unmark deletes it. */
int pn_snapshot_dir_mark(const char *dir, char *name, size_t cap, bool create);
void pn_snapshot_dir_unmark(const char *dir, const char *name);

/* Checks that dir's file system has room for a snapshot of bytes (statvfs: the
 * blocks free to unprivileged users; a quota it does not report is found when the
 * snapshot reserves its space). The error names dir, the bytes needed and those
 * free. */
int pn_snapshot_dir_check_room(const char *dir, uint64_t bytes);

/* dir/snapshot-<step, 10 digits>.h5 */
void pn_snapshot_path(const char *dir, long step, char *out, size_t cap);

/* The newest snapshot of dir that opens and verifies (by step; pn_snapshot_verify:
 * every value read, one dataset at a time), into out; an error
 * when there is none (the message lists what was refused and why), except that with
 * none_ok a dir without any snapshot file gives out "" (a run not started yet). Each
 * newer file it skips is named, with the reason, in a warning. */
int pn_snapshot_latest(const char *dir, bool none_ok, char *out, size_t cap);

/* The snapshot a user names, into out: path itself when it is not a directory, else
 * the newest snapshot of that directory that verifies (pn_snapshot_latest, an error
 * when there is none). `export`, `infer`, the C API and `train --resume` all read a
 * path through this, so that a snapshot directory means the same everywhere. */
int pn_snapshot_resolve(const char *path, char *out, size_t cap);

/* After a run wrote dir's snapshot of step `written`: deletes the older snapshots
 * but the newest keep (the one written counts), and the temporary files
 * snapshot-*.tmp-<pid> whose writer process is gone (on this host). Snapshots of
 * later steps are not this run's (a stale or another run's file): they are left
 * alone, with a warning, since --resume auto would take them first. Then deletes the
 * part files of steps up to written whose index is not there (pruned, or never
 * committed). */
int pn_snapshot_prune(const char *dir, int keep, long written);

#endif
