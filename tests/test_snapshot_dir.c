/* Snapshots in a directory: every write reads back (also with many parameters),
 * the newest good snapshot is found past corrupt ones and temporaries, pruning
 * keeps this run's newest, and a writer killed mid-write leaves the previous
 * snapshot intact. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_file.h"
#include "state_fixture.h"

static char dir[PATH_MAX];

static void setup(void) { tu_make_temp_dir(dir, sizeof dir, "snapshot_dir"); }

static void teardown(void) { tu_remove_tree(dir); }

/* The pid of a process that has exited (and been reaped). */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) _exit(0);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return pid;
}

static void touch(const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("half a snapshot", f);
    fclose(f);
}

START_TEST(latest_skips_corrupt_snapshots_and_temporaries)
{
    char path[PATH_MAX + 32], found[PATH_MAX + 32], tmp[64];
    pn_error_clear();
    ck_assert_int_lt(pn_snapshot_latest(dir, false, found, sizeof found), 0);
    ck_assert_msg(strstr(pn_error_message(), "no snapshots in ") &&
                      strstr(pn_error_message(), dir),
                  "%s", pn_error_message());
    strcpy(found, "x"); /* none_ok: a run that has written nothing yet */
    ck_assert_msg(pn_snapshot_latest(dir, true, found, sizeof found) == 0, "%s",
                  pn_error_message());
    ck_assert_str_eq(found, "");

    pn_train_state *st = sf_make_state(PN_FORMAT_SNAPSHOT, 8);
    for (long step = 100; step <= 300; step += 100) {
        st->step = step;
        pn_snapshot_path(dir, step, path, sizeof path);
        sf_write_state(path, st);
    }
    snprintf(tmp, sizeof tmp, "snapshot-0000000400.h5.tmp-%ld", (long)dead_pid());
    touch(tmp);
    touch("snapshot-500.h5");
    ck_assert_msg(pn_snapshot_latest(dir, false, found, sizeof found) == 0, "%s", pn_error_message());
    ck_assert_str_eq(found, path);

    sf_flip_chunk_bit(path, "/params/fc1/b");
    ck_assert_msg(pn_snapshot_latest(dir, false, found, sizeof found) == 0, "%s", pn_error_message());
    pn_snapshot_path(dir, 200, path, sizeof path);
    ck_assert_str_eq(found, path);

    for (long step = 100; step <= 200; step += 100) {
        pn_snapshot_path(dir, step, path, sizeof path);
        ck_assert_int_eq(truncate(path, 1000), 0);
    }
    pn_error_clear();
    ck_assert_int_lt(pn_snapshot_latest(dir, true, found, sizeof found), 0); /* not none */
    const char *msg = pn_error_message();
    ck_assert_msg(strstr(msg, "(3 refused)") && strstr(msg, "snapshot-0000000300.h5") &&
                      strstr(msg, "snapshot-0000000200.h5") &&
                      strstr(msg, "snapshot-0000000100.h5") && strstr(msg, "checksum"),
                  "%s", msg);
    pn_train_state_free(st);
}
END_TEST

START_TEST(prune_keeps_the_newest)
{
    pn_train_state *st;
    char path[PATH_MAX + 32], names[1024], want[1024], tmp[64];
    float v = 1.0f;
    ck_assert_int_eq(pn_train_state_create(&st, PN_FORMAT_SNAPSHOT), 0);
    ck_assert_int_eq(pn_train_state_add(st, "l/w", 1, 1, &v, NULL), 0);
    for (long step = 10; step <= 50; step += 10) {
        st->step = step;
        pn_snapshot_path(dir, step, path, sizeof path);
        sf_write_state(path, st);
    }
    long dead = (long)dead_pid();
    snprintf(tmp, sizeof tmp, "snapshot-0000000060.h5.tmp-%ld", dead);
    touch(tmp);
    snprintf(tmp, sizeof tmp, "snapshot-0000000070.h5.tmp-%ld", (long)getpid());
    touch(tmp);
    snprintf(tmp, sizeof tmp, "snapshot-0000000080.h5.tmp-%ld", (long)getppid());
    touch(tmp);
    touch("notes.txt");
    /* a run that just wrote step 30 (50 and 40 are not its own: kept, a warning) */
    ck_assert_msg(pn_snapshot_prune(dir, 2, 30) == 0, "%s", pn_error_message());
    ck_assert_int_eq(tu_list_dir(dir, names, sizeof names), 0);
    snprintf(want, sizeof want,
             "notes.txt\nsnapshot-0000000020.h5\nsnapshot-0000000030.h5\n"
             "snapshot-0000000040.h5\nsnapshot-0000000050.h5\n"
             "snapshot-0000000070.h5.tmp-%ld\nsnapshot-0000000080.h5.tmp-%ld\n",
             (long)getpid(), (long)getppid());
    ck_assert_str_eq(names, want);
    ck_assert_msg(pn_snapshot_prune(dir, 2, 50) == 0, "%s", pn_error_message());
    ck_assert_int_eq(tu_list_dir(dir, names, sizeof names), 0);
    snprintf(want, sizeof want,
             "notes.txt\nsnapshot-0000000040.h5\nsnapshot-0000000050.h5\n"
             "snapshot-0000000070.h5.tmp-%ld\nsnapshot-0000000080.h5.tmp-%ld\n",
             (long)getpid(), (long)getppid());
    ck_assert_str_eq(names, want);
    ck_assert_msg(pn_snapshot_prune(dir, 5, 50) == 0, "%s", pn_error_message());
    ck_assert_int_eq(tu_list_dir(dir, names, sizeof names), 0);
    ck_assert_str_eq(names, want);
    ck_assert_int_eq(pn_snapshot_prune(dir, -1, 50), PN_ERR_INVALID);
    pn_train_state_free(st);
}
END_TEST

/* Snapshots of many parameters read back: HDF5 allocated 12 more bytes while closing
 * a file of 54 (char_gpt's), and the space reserved for the file was trimmed to the
 * end seen before the close, so the snapshot could not be opened. */
START_TEST(snapshots_of_many_parameters_read_back)
{
    static const int counts[] = {1, 9, 17, 33, 54, 65, 130};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        pn_train_state *st, *back;
        ck_assert_int_eq(pn_train_state_create(&st, PN_FORMAT_SNAPSHOT), 0);
        ck_assert_int_eq(pn_train_state_set_slots(st, 2, sf_slot_names), 0);
        ck_assert_int_eq(pn_train_state_set_config(st, sf_config_text), 0);
        for (int p = 0; p < counts[c]; p++) {
            char name[32];
            snprintf(name, sizeof name, "layer%03d/%s", p, p % 2 ? "b" : "w");
            sf_add_param(st, p, name, p % 2 ? 1 : 7 + p % 5, 16 + p % 3);
        }
        char path[PATH_MAX + 32];
        pn_snapshot_path(dir, 1000 + (long)c, path, sizeof path);
        ck_assert_msg(pn_snapshot_write(path, st, NULL) == 0, "%d parameters: %s", counts[c],
                      pn_error_message());
        ck_assert_msg(pn_snapshot_read(path, PN_FORMAT_SNAPSHOT, &back) == 0,
                      "%d parameters: %s", counts[c], pn_error_message());
        sf_assert_same_state(back, st);
        pn_train_state_free(back);
        pn_train_state_free(st);
    }
}
END_TEST

/* A 48 MB state: one 2048 x 2048 parameter and two slots. */
static pn_train_state *big_state(void)
{
    pn_train_state *st;
    ck_assert_int_eq(pn_train_state_create(&st, PN_FORMAT_SNAPSHOT), 0);
    ck_assert_int_eq(pn_train_state_set_slots(st, 2, sf_slot_names), 0);
    st->step = 200;
    sf_add_param(st, 7, "big/w", 2048, 2048);
    return st;
}

static off_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

START_TEST(kill_during_write_keeps_the_previous_snapshot)
{
    pn_train_state *good = sf_make_state(PN_FORMAT_SNAPSHOT, 20), *big = big_state(), *back;
    char path[PATH_MAX + 32], tmp[PATH_MAX + 64], found[PATH_MAX + 32];
    pn_snapshot_path(dir, 100, path, sizeof path);
    sf_write_state(path, good);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) _exit(pn_snapshot_write(path, big, NULL) == 0 ? 0 : 1);
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)child);
    struct timespec pause = {0, 200 * 1000};
    off_t started = (off_t)1 << 20; /* bytes written by the child, in either file */
    for (int i = 0; i < 50000 && file_size(tmp) < started && file_size(path) < started; i++)
        nanosleep(&pause, NULL);
    ck_assert_int_eq(kill(child, SIGKILL), 0);
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "the writer finished before it was killed (status %d)", status);

    ck_assert_msg(pn_snapshot_read(path, PN_FORMAT_SNAPSHOT, &back) == 0, "%s",
                  pn_error_message());
    sf_assert_same_state(back, good);
    pn_train_state_free(back);
    /* the writer reserves the file's space first, so its size says nothing about
     * progress; what matters is that the half-written file is refused */
    ck_assert_msg(file_size(tmp) >= (off_t)1 << 20, "no temporary file: %s", tmp);
    ck_assert_int_ne(pn_snapshot_read(tmp, PN_FORMAT_SNAPSHOT, &back), 0);
    ck_assert_msg(pn_snapshot_latest(dir, false, found, sizeof found) == 0, "%s", pn_error_message());
    ck_assert_str_eq(found, path);
    ck_assert_int_eq(pn_snapshot_prune(dir, 3, 100), 0);
    ck_assert_int_eq(file_size(tmp), -1);
    ck_assert_int_gt(file_size(path), 0);
    pn_train_state_free(good);
    pn_train_state_free(big);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("snapshot_dir");
    TCase *tc = tcase_create("snapshot_dir");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, snapshots_of_many_parameters_read_back);
    tcase_add_test(tc, latest_skips_corrupt_snapshots_and_temporaries);
    tcase_add_test(tc, prune_keeps_the_newest);
    tcase_add_test(tc, kill_during_write_keeps_the_previous_snapshot);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
