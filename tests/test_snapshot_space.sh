#!/bin/sh
# A snapshot's room, with a tiny GPT (adam: a 0.2 MB snapshot of 90 arrays):
#  1. under a file-size limit of 4 MiB, far above the snapshot and far below the
#     1 MiB + 128 KiB per array once reserved, the run writes its snapshots;
#  2. on a small file system (a tmpfs: root only, else the test skips, 77, after
#     case 1) with room for two snapshots, the run writes them;
#  3. on one without room for a single snapshot, the run is refused before it trains,
#     with the directory, the bytes needed and those free.
set -u
. "$(dirname "$0")/script_fixture.sh"
. "$(dirname "$0")/lm_fixture.sh"
mnt=$tmp/small
trap 'umount "$mnt" 2>/dev/null; rm -rf "$tmp"' EXIT
import_times_table 600
tiny_gpt 256 '{"batch": 16, "seed": 3, "optimizer": {"type": "adam", "lr": 0.01}}' >"$tmp/gpt.json"

# train DIR [options]: 10 steps with a snapshot every 5, output in $tmp/out
train() {
    dir=$1
    shift
    timeout 120 "$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" --threads 1 \
        --log-every 1000 --steps 10 --snapshot-every 5 --snapshot-dir "$dir" "$@"
}

# 1. 4 MiB: 8192 blocks of 512 bytes, as sh counts them (bash: of 1 KiB, 8 MiB); MPI's
# start needs a few MiB of files
(ulimit -f 8192; expect 0 "snapshot at step 10: $tmp/limited/snapshot-0000000010.h5" \
     train "$tmp/limited") || exit 1
size=$(wc -c <"$tmp/limited/snapshot-0000000010.h5")
echo "ok: under a 4 MiB file-size limit, snapshots of $size bytes are written"

if [ "$(id -u)" -ne 0 ] || ! mkdir "$mnt" || ! mount -t tmpfs -o size=512k tmpfs "$mnt" 2>/dev/null; then
    echo "SKIP: the small file system cases need root (mount -t tmpfs)"
    exit 77
fi
# 2. 512 KiB: room for two snapshots (the one kept and the one being written)
expect 0 "snapshot at step 10: $mnt/snaps/snapshot-0000000010.h5" train "$mnt/snaps" --keep 1
[ "$(ls "$mnt/snaps")" = "snapshot-0000000010.h5" ] || fail "512 KiB: $(ls "$mnt/snaps")"
echo "ok: on a 512 KiB file system, snapshots of $size bytes are written"
umount "$mnt"

# 3. 64 KiB: not one snapshot; refused before the data is read
mount -t tmpfs -o size=64k tmpfs "$mnt" || fail "mount"
expect 1 "snapshot directory '$mnt/snaps' has [0-9]* bytes free ([0-9.]* MB), and one snapshot of this model takes [0-9]* ([0-9.]* MB): free some space there or give another --snapshot-dir" \
    train "$mnt/snaps"
grep -q '^training\|^step\|^epoch' "$tmp/out" && fail "64 KiB: the run trained: $(cat "$tmp/out")"
echo "ok: on a 64 KiB file system, the run is refused before it trains: $(sed -n 's/.*error: //p' "$tmp/out")"
echo "PASS: snapshot space"
