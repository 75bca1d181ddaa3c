#!/usr/bin/env bash
# Seed 004's experiment on this machine's kernel: dbench (6 clients) on a fresh ext4 on a loop
# device with direct I/O over a file on the machine's disk, marked non-rotational, under each
# scheduler, with the journal thread (jbd2) at the clients' I/O priority (be/4) and at a
# higher one (be/0, the seed's "journaling daemon enjoying a higher weight"). Prints dbench's
# throughput per run and the median per case. Needs root (losetup, mount) and dbench.
#
#   bash scripts/dbench-twin.sh [--json] [SECONDS [ROUNDS [SCHEDULERS]]]    (default: 10 3 "bfq mq-deadline")
#
# --json: the medians as JSON on stdout (the runs on stderr).
# A round runs every case once, in turn, so a drift of the machine lands on all of them.
set -euo pipefail
json=0
if [ "${1:-}" = "--json" ]; then json=1; shift; fi
secs=${1:-10}
rounds=${2:-3}
scheds=${3:-bfq mq-deadline}
command -v dbench >/dev/null || { echo "dbench-twin: dbench is not installed (apt-get install dbench)" >&2; exit 2; }
work=$(mktemp -d)
loop=
cleanup() {
    umount "$work/mnt" 2>/dev/null || true
    [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/mnt"
declare -A got
for round in $(seq "$rounds"); do
    for s in $scheds; do
        for prio in 4 0; do
            rm -f "$work/fs.img"
            truncate -s 2G "$work/fs.img"
            loop=$(losetup -f --show --direct-io=on "$work/fs.img")
            dev=$(basename "$loop")
            echo 0 > "/sys/block/$dev/queue/rotational"
            echo "$s" > "/sys/block/$dev/queue/scheduler"
            mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$loop"
            mount "$loop" "$work/mnt"
            jbd=$(pgrep -f "jbd2/$dev" | head -1)
            ionice -c2 -n"$prio" -p "$jbd"
            mbs=$(dbench -t "$secs" -D "$work/mnt" 6 2>/dev/null | awk '/^Throughput/ {print $2}')
            [ -n "$mbs" ] || { echo "dbench-twin: dbench printed no throughput ($s, jbd2 be/$prio)" >&2; exit 1; }
            echo "round $round: $s jbd2 be/$prio: $mbs MB/s ($(ionice -p "$jbd"))" >&2
            got["$s $prio"]+="$mbs "
            umount "$work/mnt"
            losetup -d "$loop"
            loop=
        done
    done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
if [ "$json" = 1 ]; then
    printf '{"seconds": %s, "rounds": %s, "schedulers": {' "$secs" "$rounds"
    sep=""
    for s in $scheds; do
        printf '%s"%s": {"journal_be4_mbs": %s, "journal_be0_mbs": %s}' "$sep" "$s" \
            "$(median "${got["$s 4"]}")" "$(median "${got["$s 0"]}")"
        sep=", "
    done
    echo '}}'
else
    echo "median of $rounds rounds, dbench 6 clients, ${secs} s, ext4 on a non-rotational loop device (direct I/O):"
    for s in $scheds; do
        for prio in 4 0; do
            echo "$s jbd2 be/$prio: $(median "${got["$s $prio"]}") MB/s"
        done
    done
fi
