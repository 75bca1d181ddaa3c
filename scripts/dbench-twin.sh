#!/usr/bin/env bash
# `bfq-no-merge`'s experiment on this machine's kernel: dbench (6 clients) on a fresh ext4 on a loop
# device with direct I/O over a file on the machine's disk, marked non-rotational, under each
# scheduler, with the journal thread (jbd2) at the clients' I/O priority (be/4) and at a
# higher one (be/0, the seed's "journaling daemon enjoying a higher weight"). Prints dbench's
# throughput per run and the median per case. Needs root (losetup, mount) and dbench.
#
#   bash scripts/dbench-twin.sh [--json] [--merges] [--device-stats] [--rotational]
#                               [--wbt-lat-usec=N] [--iosched=KEY=VALUE ...]
#                               [SECONDS [ROUNDS [SCHEDULERS]]]
#                                   (default: 10 3 "bfq mq-deadline")
#
# --json: the medians as JSON on stdout (the runs on stderr).
# --merges: under BFQ, count the queue merges BFQ makes in each run, from its own log (the
#   `blk` tracer on the loop device: "merging with queue" messages, read as they come from
#   trace_pipe). Tracing slows dbench by a fifth, so throughput is best taken without it.
#   On this machine's kernel (Linux 6.18), non-rotational, BFQ merges only dbench's clients,
#   whose queues are made together (stable merging), at their start: 4-6 merges a run;
#   marked rotational it also merges queues by position, and splits them (150 a run).
#   Also counted: the shared queues those merges made (the queues merged into while still
#   one process's), which decide BFQ's be/0 result here: all six clients in one shared
#   queue keep it near mq-deadline, two shared queues (or a client left alone) preempt each
#   other thousands of times a run (ARCHITECTURE, "BFQ with a heavier journal").
# --device-stats: capture each run with `mqblk trace capture` (target/release/mqblk, built
#   by `cargo build --release`) and report what `mqblk trace stats` makes of it: the loop
#   device's mean time per write and per flush or FUA write, and the share of time it was
#   busy and idle with requests waiting in the scheduler (BFQ plugging it).
# --rotational: mark the loop device rotational (BFQ's heuristics for disks) instead.
# --wbt-lat-usec=N: writeback throttling's latency target on the loop device (its
#   `wbt_lat_usec`; 0 turns it off). Loop devices come with it off on this machine's kernel
#   (6.18: debugfs `rqos/wbt/enabled` 4, min_lat_nsec 0). Set after the scheduler, so it
#   holds under BFQ too (which turns the default off when it starts, `bfq_init_queue`).
#   The value the device had is in the report.
# --iosched=KEY=VALUE: set the scheduler's tunable KEY (/sys/block/DEV/queue/iosched/KEY)
#   for every run of a scheduler that has it (e.g. BFQ's slice_idle=0 or low_latency=0);
#   repeatable. The report gives each tunable as read back after it was set (one no
#   scheduler of the run has is left out).
# A round runs every case once, in turn, so a drift of the machine lands on all of them.
set -euo pipefail
json=0
merges=0
devstats=0
rot=0
wbt=
wbt_now=
tunables=()
declare -A applied
while [[ "${1:-}" == --* ]]; do
    case "$1" in
        --json) json=1 ;;
        --merges) merges=1 ;;
        --device-stats) devstats=1 ;;
        --rotational) rot=1 ;;
        --wbt-lat-usec=*) wbt=${1#*=} ;;
        --iosched=*=*) tunables+=("${1#--iosched=}") ;;
        *) echo "dbench-twin: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
secs=${1:-10}
rounds=${2:-3}
scheds=${3:-bfq mq-deadline}
# Each scheduler asked for must be one this kernel has (every blk-mq device lists them all).
have=$(echo $(cat /sys/block/*/queue/scheduler 2>/dev/null | tr -d '[]' | awk 'NF > 1 { print; exit }'))
for s in $scheds; do
    case " $have " in
        *" $s "*) ;;
        *) echo "dbench-twin: the kernel has no '$s' I/O scheduler (it has: $have)" >&2; exit 2 ;;
    esac
done
command -v dbench >/dev/null || { echo "dbench-twin: dbench is not installed (apt-get install dbench)" >&2; exit 2; }
mqblk=$(cd "$(dirname "$0")/.." && pwd)/target/release/mqblk
if [ "$devstats" = 1 ] && [ ! -x "$mqblk" ]; then
    echo "dbench-twin: --device-stats needs $mqblk (cargo build --release)" >&2
    exit 2
fi
work=$(mktemp -d)
capturer=
loop=
T=/sys/kernel/tracing
reader=
mounted_tracefs=
cleanup() {
    # A run cut short puts back the loop device's wbt too (it outlives the attachment).
    [ -n "${loop:-}" ] && [ -n "${wbt_orig:-}" ] && echo "$wbt_orig" > "/sys/block/$(basename "$loop")/queue/wbt_lat_usec" 2>/dev/null
    if [ "$merges" = 1 ]; then
        echo 0 > "$T/tracing_on" 2>/dev/null || true
        echo nop > "$T/current_tracer" 2>/dev/null || true
        [ -n "$reader" ] && kill "$reader" 2>/dev/null || true
    fi
    [ -n "$capturer" ] && kill -INT "$capturer" 2>/dev/null && wait "$capturer" 2>/dev/null
    umount "$work/mnt" 2>/dev/null || true
    [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null || true
    rm -rf "$work"
    [ -n "$mounted_tracefs" ] && umount "$T" 2>/dev/null || true
}
trap cleanup EXIT
mkdir "$work/mnt"
# BFQ's log comes through tracefs, which a fresh machine may not have mounted yet (it is
# unmounted again at the end, as `mqblk trace capture` does).
if [ "$merges" = 1 ] && [ ! -e "$T/trace_pipe" ]; then
    mount -t tracefs nodev "$T" 2>/dev/null || {
        echo "dbench-twin: --merges needs tracefs at $T and could not mount it" >&2
        exit 2
    }
    mounted_tracefs=1
fi
declare -A got
for round in $(seq "$rounds"); do
    for s in $scheds; do
        for prio in 4 0; do
            rm -f "$work/fs.img"
            truncate -s 2G "$work/fs.img"
            loop=$(losetup -f --show --direct-io=on "$work/fs.img")
            dev=$(basename "$loop")
            echo "$rot" > "/sys/block/$dev/queue/rotational"
            # Through `none`, so every run gets a fresh scheduler instance: a loop device keeps
            # its queue, and its scheduler's state, from one attachment to the next, and a
            # BFQ instance that served earlier runs here went on to hold a lone reader to one
            # request in flight ("too many requests: allocated 1 limit 1" in its log).
            echo none > "/sys/block/$dev/queue/scheduler"
            echo "$s" > "/sys/block/$dev/queue/scheduler"
            # A loop device keeps its queue's settings from one attachment to the next:
            # what this run sets is put back after it.
            wbt_orig=$(cat "/sys/block/$dev/queue/wbt_lat_usec")
            [ -n "$wbt" ] && echo "$wbt" > "/sys/block/$dev/queue/wbt_lat_usec"
            for t in "${tunables[@]}"; do
                f="/sys/block/$dev/queue/iosched/${t%%=*}"
                if [ -e "$f" ]; then
                    echo "${t#*=}" > "$f"
                    applied[${t%%=*}]=$(cat "$f")
                fi
            done
            wbt_now=$(cat "/sys/block/$dev/queue/wbt_lat_usec")
            mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$loop"
            mount "$loop" "$work/mnt"
            jbd=$(pgrep -f "jbd2/$dev" | head -1)
            ionice -c2 -n"$prio" -p "$jbd"
            traced=0
            if [ "$merges" = 1 ] && [ "$s" = bfq ]; then
                traced=1
                echo 0 > "$T/tracing_on"
                echo > "$T/trace"
                echo blk > "$T/current_tracer"
                echo 1 > "/sys/block/$dev/trace/enable"
                echo 0 0 > "$work/merges"
                # A merge into a queue one process still owns makes a shared queue; later
                # merges into it name it -1 (2^64 - 1 as printed).
                awk -v f="$work/merges" '/merging with queue/ {n++; if ($NF != "-1" && $NF != "18446744073709551615") made++; print n, made + 0 > f; close(f)}' < "$T/trace_pipe" &
                reader=$!
                echo 1 > "$T/tracing_on"
            fi
            if [ "$devstats" = 1 ]; then
                rm -f "$work"/cap.blktrace.*
                "$mqblk" trace capture --device="$loop" -o "$work/cap" >"$work/cap.log" 2>&1 &
                capturer=$!
                # The capture is live once its instance is set up.
                for _ in $(seq 50); do grep -q capturing "$work/cap.log" && break; sleep 0.1; done
            fi
            mbs=$(dbench -t "$secs" -D "$work/mnt" 6 2>/dev/null | awk '/^Throughput/ {print $2}')
            [ -n "$mbs" ] || { echo "dbench-twin: dbench printed no throughput ($s, jbd2 be/$prio)" >&2; exit 1; }
            note=""
            if [ "$traced" = 1 ]; then
                echo 0 > "$T/tracing_on"
                sleep 0.5
                kill "$reader" 2>/dev/null || true
                wait "$reader" 2>/dev/null || true
                reader=
                echo 0 > "/sys/block/$dev/trace/enable"
                echo nop > "$T/current_tracer"
                read -r n made < "$work/merges"
                got["merges $prio"]+="$n "
                got["shared $prio"]+="$made "
                note=", $n queue merges into $made shared queues"
            fi
            if [ "$devstats" = 1 ]; then
                kill -INT "$capturer"
                wait "$capturer" || { cat "$work/cap.log" >&2; exit 1; }
                capturer=
                st=$("$mqblk" trace stats "$work/cap" --output-format=json | python3 -c '
import json, sys
d = json.load(sys.stdin)["devices"][0]
f = lambda v: "null" if v is None else f"{v:.1f}"
print(f(d["d2c_write_us"]), f(d["d2c_flush_fua_us"]), f(100 * d["busy"]), f(100 * d["waiting"]))')
                read -r w fl busy waiting <<<"$st"
                got["write $s $prio"]+="$w "
                got["flush $s $prio"]+="$fl "
                got["busy $s $prio"]+="$busy "
                got["waiting $s $prio"]+="$waiting "
                note="$note, the device ${w} us a write, ${fl} us a flush, busy ${busy}%, idle with requests waiting ${waiting}%"
            fi
            echo "round $round: $s jbd2 be/$prio: $mbs MB/s ($(ionice -p "$jbd")$note)" >&2
            got["$s $prio"]+="$mbs "
            umount "$work/mnt"
            echo "$wbt_orig" > "/sys/block/$dev/queue/wbt_lat_usec"
            losetup -d "$loop"
            loop=
        done
    done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
if [ "$json" = 1 ]; then
    set_json=$(for k in "${!applied[@]}"; do printf '"%s": "%s"\n' "$k" "${applied[$k]}"; done | sort | paste -sd, -)
    printf '{"seconds": %s, "rounds": %s, "rotational": %s, "wbt_lat_usec": %s, "iosched": {%s}, "schedulers": {' \
        "$secs" "$rounds" "$rot" "$wbt_now" "$set_json"
    sep=""
    for s in $scheds; do
        printf '%s"%s": {"journal_be4_mbs": %s, "journal_be0_mbs": %s' "$sep" "$s" \
            "$(median "${got["$s 4"]}")" "$(median "${got["$s 0"]}")"
        if [ "$merges" = 1 ] && [ "$s" = bfq ]; then
            printf ', "queue_merges_be4": %s, "queue_merges_be0": %s' \
                "$(median "${got["merges 4"]}")" "$(median "${got["merges 0"]}")"
            printf ', "shared_queues_be4": [%s], "shared_queues_be0": [%s]' \
                "$(tr ' ' '\n' <<<"${got["shared 4"]}" | grep . | paste -sd,)" \
                "$(tr ' ' '\n' <<<"${got["shared 0"]}" | grep . | paste -sd,)"
        fi
        if [ "$devstats" = 1 ]; then
            for prio in 4 0; do
                printf ', "device_be%s": {"write_us": %s, "flush_fua_us": %s, "busy_pct": %s, "waiting_pct": %s}' "$prio" \
                    "$(median "${got["write $s $prio"]}")" "$(median "${got["flush $s $prio"]}")" \
                    "$(median "${got["busy $s $prio"]}")" "$(median "${got["waiting $s $prio"]}")"
            done
        fi
        printf '}'
        sep=", "
    done
    echo '}}'
else
    kind=non-rotational
    [ "$rot" = 1 ] && kind=rotational
    echo "median of $rounds rounds, dbench 6 clients, ${secs} s, ext4 on a $kind loop device (direct I/O, wbt_lat_usec $wbt_now at the last run${tunables[*]:+, iosched ${tunables[*]}}):"
    for s in $scheds; do
        for prio in 4 0; do
            extra=""
            [ "$merges" = 1 ] && [ "$s" = bfq ] && extra=", $(median "${got["merges $prio"]}") queue merges (shared queues made per run: ${got["shared $prio"]% })"
            [ "$devstats" = 1 ] && extra="$extra; the device $(median "${got["write $s $prio"]}") us a write, $(median "${got["flush $s $prio"]}") us a flush, busy $(median "${got["busy $s $prio"]}")%, idle with requests waiting $(median "${got["waiting $s $prio"]}")%"
            echo "$s jbd2 be/$prio: $(median "${got["$s $prio"]}") MB/s$extra"
        done
    done
fi
