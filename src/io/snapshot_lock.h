/* One run per snapshot directory. Two runs writing snapshots into one directory
 * would prune and replace each other's files, so a run holds DIR/pipenet.lock from
 * before it trains until it ends, and a run that finds another's lock is refused,
 * told who holds it. The lock is a file created with O_EXCL that names its holder
 * (host, pid, when it started, the batch job); the .c says why a file and not
 * flock or fcntl. Only the process that writes the snapshots (rank 0) takes it. */
#ifndef PN_SNAPSHOT_LOCK_H
#define PN_SNAPSHOT_LOCK_H

/* The lock file of a snapshot directory. */
#define PN_SNAPSHOT_LOCK_NAME "pipenet.lock"

typedef struct pn_snapshot_lock pn_snapshot_lock;

/* Takes the lock of dir (an existing directory) for this process into *out. A lock
 * whose holder is surely gone is taken over, with a warning naming that holder:
 *  - on this host (and pid namespace): its pid no longer exists, is now another
 *    process (its start time differs), or the host has restarted since;
 *  - on any host: it is an earlier start of this batch job, which the scheduler
 *    ended before starting it again: a Slurm job requeued (the same SLURM_JOB_ID,
 *    a higher SLURM_RESTART_COUNT) or a PBS job rerun (the same PBS_JOBID).
 * Any other holder is alive, or may be (a process on another host cannot be seen
 * from here): PN_ERR_INVALID, with a message naming the holder and the lock file. */
int pn_snapshot_lock_take(const char *dir, pn_snapshot_lock **out);

/* Gives the lock back: deletes the lock file if it is still this one. NULL is a
 * no-op. */
void pn_snapshot_lock_release(pn_snapshot_lock *lock);

#endif
