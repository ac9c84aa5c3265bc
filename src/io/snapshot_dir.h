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
#include "io/train_state.h"

/* What a run's files in its snapshot directory are called: snapshots (and their
 * temporaries while written) start with this; the lock is io/snapshot_lock.h's
 * PN_SNAPSHOT_LOCK_NAME. An output the user names must be neither. */
#define PN_SNAPSHOT_PREFIX "snapshot-"

/* Writes st (as format, NULL: st's own) to path through a temporary name, which is
 * opened and its header read back, fsynced and renamed; the directory is fsynced
 * too. On failure the temporary is removed and whatever path held before is
 * untouched. */
int pn_snapshot_write(const char *path, const pn_train_state *st, const char *format);

/* The same for a state with deferred parameters, which fill writes while the
 * temporary file is open (io/snapshot_file.h). */
int pn_snapshot_write_filled(const char *path, const pn_train_state *st, const char *format,
                             pn_snapshot_fill_fn fill, void *ctx);

/* Creates the snapshot directory dir and its missing parents (mkdir -p). */
int pn_snapshot_dir_create(const char *dir);

/* The same, then checks that a file can be written in dir (a run checks this before
 * it trains, so that no work is lost to a directory it cannot use). */
int pn_snapshot_dir_prepare(const char *dir);

/* Checks that dir's file system has room for a snapshot of bytes (statvfs: the
 * blocks free to unprivileged users; a quota it does not report is found when the
 * snapshot reserves its space). The error names dir, the bytes needed and those
 * free. */
int pn_snapshot_dir_check_room(const char *dir, uint64_t bytes);

/* dir/snapshot-<step, 10 digits>.h5 */
void pn_snapshot_path(const char *dir, long step, char *out, size_t cap);

/* The newest snapshot of dir that opens and verifies (by step), into out; an error
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
 * alone, with a warning, since --resume auto would take them first. */
int pn_snapshot_prune(const char *dir, int keep, long written);

#endif
