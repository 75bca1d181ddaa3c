#!/usr/bin/env bash
# Does the I/O scheduler change how long `find` takes on a cold cache? The question of
# "[PATCH 00/16] multiqueue for MMC/SD third try", whose find went from 3.61 s to 4.13 s when
# the card moved from the legacy block layer (with a scheduler) to blk-mq (with none), asked
# of the kernel on this machine: an ext4 filesystem in a file on the real disk, attached as a
# loop device with direct I/O (every read reaches the disk), a tree of small files, and for
# each repeat and scheduler (order rotated every repeat): unmount, drop the caches, set the
# loop device's scheduler and nr_requests (the card's queue depth, 2 by default; the kernel
# raises anything below BLKDEV_MIN_RQ to 4, and the value it took is reported), mount, time
# `find . > /dev/null`. The loop device's /sys/block/*/stat gives the reads find made and
# their mean service time, so a difference in time can be told apart from a difference in I/O,
# and the mean number of reads in flight (what a scheduler could reorder or merge).
# Prints each run, then per scheduler the median time, reads and ratio over none; with
# --json, one JSON object instead.
#
#   bash scripts/find-twin.sh [--json] [FILES] [REPS] [DEPTH]    (root; mkfs.ext4, losetup)
#
# The image lives in a fresh directory under /var/tmp (on the real disk, not tmpfs); it, the
# mount and the loop device are removed on every exit, Ctrl-C included.
set -euo pipefail
source "$(dirname "$0")/lib/rotate.sh"
json=0
if [ "${1:-}" = "--json" ]; then json=1; shift; fi
files=${1:-20000}
reps=${2:-3}
depth=${3:-2}
[ "$(id -u)" = 0 ] || { echo "find-twin.sh: needs root (losetup, mount, drop_caches)" >&2; exit 2; }
command -v mkfs.ext4 >/dev/null || { echo "find-twin.sh: needs mkfs.ext4 (apt-get install e2fsprogs)" >&2; exit 2; }
log() { [ "$json" = 1 ] || echo "$@"; }

work=$(mktemp -d /var/tmp/find-twin.XXXXXX)
mnt="$work/mnt"
dev=""
orig=""
cleanup() {
    umount "$mnt" 2>/dev/null || true
    if [ -n "$dev" ]; then
        # A loop device keeps its queue after `losetup -d`, and nr_requests written under
        # none resizes the driver tags' bitmap, which no later scheduler switch undoes: give
        # the next user of this device all its tags back (the kernel ignores a write of the
        # value it shows, so one below first).
        q="/sys/block/$(basename "$dev")"
        tags=$(cat "$q/mq/0/nr_tags" 2>/dev/null || echo 0)
        if [ "$tags" -gt 4 ]; then
            echo none > "$q/queue/scheduler" 2>/dev/null || true
            echo $((tags - 1)) > "$q/queue/nr_requests" 2>/dev/null || true
            echo "$tags" > "$q/queue/nr_requests" 2>/dev/null || true
            [ -n "$orig" ] && echo "$orig" > "$q/queue/scheduler" 2>/dev/null || true
        fi
        losetup -d "$dev" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir "$mnt"
truncate -s 1G "$work/fs.img"
# One inode per 4 KiB (room for 250,000 files); inode tables and the journal written now, so
# no lazy init runs while find is timed.
mkfs.ext4 -q -i 4096 -E lazy_itable_init=0,lazy_journal_init=0 "$work/fs.img"
dev=$(losetup --find --show --direct-io=on "$work/fs.img")
name=$(basename "$dev")
orig=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "/sys/block/$name/queue/scheduler")
mount -o noatime "$dev" "$mnt"
# The tree: 40 top directories, each with one subdirectory per 400 files, 10 files in each
# (a root filesystem's shape: many small directories, so find's reads are mostly directories).
python3 - "$mnt" "$files" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, f"d{i % 40:02}", f"s{i // 400:04}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i:06}"), "w") as f:
        f.write("x")
EOF
sync
umount "$mnt"
scheds=$(sed 's/[][]//g' "/sys/block/$name/queue/scheduler")
log "loop device $dev (direct I/O) over $work/fs.img on $(df --output=source /var/tmp | tail -1); $files files; depth $depth; schedulers: $scheds"

# Reads completed and milliseconds spent on them, from the block device's stat file.
reads() { awk '{print $1, $4}' "/sys/block/$name/stat"; }

run() { # $1 = scheduler; prints "ns reads read_ms nr_requests"
    echo "$1" > "/sys/block/$name/queue/scheduler"
    echo "$depth" > "/sys/block/$name/queue/nr_requests"
    local took
    took=$(cat "/sys/block/$name/queue/nr_requests")
    sync
    echo 3 > /proc/sys/vm/drop_caches
    mount -o noatime,ro "$dev" "$mnt"
    read -r r0 ms0 < <(reads)
    t0=$(date +%s%N)
    (cd "$mnt" && find . > /dev/null)
    t1=$(date +%s%N)
    read -r r1 ms1 < <(reads)
    umount "$mnt"
    echo "$((t1 - t0)) $((r1 - r0)) $((ms1 - ms0)) $took"
}

results=""
for r in $(seq "$reps"); do
    for s in $(rotated "$r" $scheds); do
        read -r ns rd ms took < <(run "$s")
        log "repeat $r  $(printf '%-12s' "$s") $(awk -v n="$ns" 'BEGIN{printf "%.3f", n/1e9}') s  $rd reads  $ms ms reading  nr_requests $took"
        results="$results$r $s $ns $rd $ms $took"$'\n'
    done
done

python3 - "$json" "$files" "$reps" "$depth" <<EOF
import json, statistics, sys
as_json, files, reps, depth = sys.argv[1] == "1", *map(int, sys.argv[2:])
rows = [l.split() for l in """$results""".strip().splitlines()]
per = {}
took = {}
for r, s, ns, rd, ms, nr in rows:
    per.setdefault(s, []).append((int(r), int(ns) / 1e9, int(rd), int(ms)))
    took[s] = int(nr)
out = {"workload": f"find . on a cold cache, ext4 on a loop device (direct I/O), {files} files, nr_requests {depth} asked",
       "device": "$name", "repeats": reps, "schedulers": {}}
none = statistics.median(t for _, t, _, _ in per.get("none", [])) if "none" in per else None
for s, runs in per.items():
    t = statistics.median(x[1] for x in runs)
    rd = statistics.median(x[2] for x in runs)
    ms = sum(x[3] for x in runs)
    out["schedulers"][s] = {
        "find_s": t,
        "reads": rd,
        "mean_read_us": 1000.0 * ms / max(1, sum(x[2] for x in runs)),
        # Time spent reading over elapsed time: how many reads find keeps in flight on
        # average (below 1: one dependent read at a time, nothing for a scheduler to order).
        "mean_in_flight": ms / 1000.0 / max(1e-9, sum(x[1] for x in runs)),
        "over_none": t / none if none else None,
        # What the kernel set when asked for the depth (at least BLKDEV_MIN_RQ, 4).
        "nr_requests": took[s],
        "runs_s": sorted(x[1] for x in runs),
    }
if as_json:
    print(json.dumps(out, indent=2))
else:
    print()
    for s, v in out["schedulers"].items():
        print(f"{s:12} {v['find_s']:7.3f} s (median), {v['reads']:6.0f} reads, "
              f"{v['mean_read_us']:6.0f} us per read, {v['mean_in_flight']:.2f} in flight, "
              f"x{v['over_none']:.3f} of none")
EOF
