#!/usr/bin/env bash
# The kernel's CPU cost per request of each I/O scheduler over `none`, measured on this
# machine: fio (io_uring, 4k random reads, one job) on a loop device over a tmpfs file, the
# loop device's scheduler switched between runs, the order rotated every repeat. CPU time is
# read from /proc/stat over all CPUs (the loop device's worker runs where it likes, and the
# scheduler's hooks run in both the submitting task and the worker), minus the machine's idle
# share measured in the same way with nothing running, and divided by the I/Os fio did.
# Prints each run, then per scheduler the median ns per I/O and the median of its per-repeat
# difference from `none`; with --json, one JSON object instead (what `mqblk sim
# --cost-profile=kernel` was set from: see crates/sim/src/cost.rs). Beside it, fio's job's
# own CPU time per I/O (its user and system time, from fio's report): the part of a
# scheduler's cost spent in the submitting task (insert, dispatch from the submitter's queue
# run), where the rest runs in the loop's worker and the completion softirq.
#
# With `perf` installed, one more run per scheduler under `perf record` (all CPUs, cpu-clock at
# 4999 Hz, call graphs) gives the time per I/O spent inside the scheduler's functions that hold
# its lock (inclusive: what they call, and spinning for the lock, counts): `locked_ns_per_io`.
# Sampling adds its own overhead to every function alike, so it is an upper bound.
#
#   bash scripts/kernel-cost.sh [--json] [RUNTIME_S] [REPS] [IODEPTH]    (root; fio)
#
# The loop device and the tmpfs are removed on every exit, Ctrl-C included.
set -euo pipefail
source "$(dirname "$0")/lib/rotate.sh"
json=0
if [ "${1:-}" = "--json" ]; then json=1; shift; fi
runtime=${1:-5}
reps=${2:-3}
depth=${3:-32}
[ "$(id -u)" = 0 ] || { echo "kernel-cost.sh: needs root (losetup, sysfs)" >&2; exit 2; }
command -v fio >/dev/null || { echo "kernel-cost.sh: needs fio (apt-get install fio)" >&2; exit 2; }
log() { [ "$json" = 1 ] || echo "$@"; }

mnt=$(mktemp -d)
dev=""
cleanup() {
    [ -n "$dev" ] && losetup -d "$dev" 2>/dev/null || true
    umount "$mnt" 2>/dev/null || true
    rmdir "$mnt" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mount -t tmpfs -o size=700m tmpfs "$mnt"
dd if=/dev/zero of="$mnt/disk" bs=1M count=512 status=none
dev=$(losetup --find --show "$mnt/disk")
name=$(basename "$dev")
scheds=$(sed 's/[][]//g' "/sys/block/$name/queue/scheduler")
hz=$(getconf CLK_TCK)

# Busy and total jiffies of all CPUs: user, nice, system, irq and softirq are busy; idle and
# iowait are not, nor is steal (time the hypervisor gave to others).
cpu_jiffies() { awk '/^cpu /{b=$2+$3+$4+$7+$8; print b, b+$5+$6}' /proc/stat; }

run() { # $1 = scheduler; prints "ios busy_ns job_ns_per_io"
    echo "$1" > "/sys/block/$name/queue/scheduler"
    read -r b0 t0 < <(cpu_jiffies)
    # fio's usr_cpu and sys_cpu are percentages of the job's runtime (job_runtime, ms).
    read -r ios job < <(fio --name=k --filename="$dev" --ioengine=io_uring --rw=randread --bs=4k \
        --iodepth="$depth" --direct=1 --runtime="$runtime" --time_based --output-format=json \
        | python3 -c 'import json,sys; j = json.load(sys.stdin)["jobs"][0]; n = j["read"]["total_ios"]
print(n, int((j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] * 1e6 / max(n, 1)))')
    read -r b1 t1 < <(cpu_jiffies)
    echo "$ios $(( (b1 - b0) * 1000000000 / hz )) $job"
}

# The machine's own background load over the same time, charged to nobody.
read -r b0 t0 < <(cpu_jiffies); sleep "$runtime"; read -r b1 t1 < <(cpu_jiffies)
idle_busy_ns=$(( (b1 - b0) * 1000000000 / hz ))
log "loop device $dev over tmpfs; schedulers: $scheds; background $((idle_busy_ns / 1000000)) ms CPU per ${runtime} s"

results=""
for r in $(seq "$reps"); do
    for s in $(rotated "$r" $scheds); do
        read -r ios busy job < <(run "$s")
        ns=$(( (busy - idle_busy_ns) / (ios > 0 ? ios : 1) ))
        log "repeat $r  $(printf '%-12s' "$s") $ios I/Os  $ns ns CPU per I/O, $job in fio's job"
        results="$results$r $s $ios $ns $job"$'\n'
    done
done
# The functions that run under each scheduler's lock: mq-deadline's `dd->lock` (insert,
# dispatch, bio merge; `dd_finish_request` is an atomic), kyber's per-hctx and per-ctx locks
# (dispatch; insert and bio merge), BFQ's `bfqd->lock` (insert, dispatch, bio merge, and the
# completion in `bfq_finish_requeue_request`).
locked_fns() {
    case $1 in
        mq-deadline) echo dd_insert_requests dd_dispatch_request dd_bio_merge ;;
        kyber) echo kyber_insert_requests kyber_dispatch_request kyber_bio_merge ;;
        bfq) echo bfq_insert_requests bfq_dispatch_request bfq_bio_merge bfq_finish_requeue_request ;;
    esac
}
hz_perf=4999
locked=""
if command -v perf >/dev/null; then
    for s in $scheds; do
        fns=$(locked_fns "$s")
        [ -n "$fns" ] || continue
        echo "$s" > "/sys/block/$name/queue/scheduler"
        ios=$(perf record -q -a -g -F "$hz_perf" -e cpu-clock -o "$mnt/perf.data" -- \
            fio --name=k --filename="$dev" --ioengine=io_uring --rw=randread --bs=4k \
            --iodepth="$depth" --direct=1 --runtime="$runtime" --time_based --output-format=json \
            2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["read"]["total_ios"])')
        # Inclusive share of each function, and the total samples (the self samples summed).
        report=$(perf report -i "$mnt/perf.data" --children --sort sym --stdio -g none -n 2>/dev/null)
        samples=$(awk '!/^#/ && NF >= 4 { s += $3 } END { print s + 0 }' <<< "$report")
        share=$(for f in $fns; do awk -v f="$f" '$NF == f { sub("%", "", $1); print $1 }' <<< "$report"; done \
            | awk '{ s += $1 } END { print s + 0 }')
        ns=$(awk -v sh="$share" -v n="$samples" -v hz="$hz_perf" -v ios="$ios" \
            'BEGIN { printf "%d", sh / 100 * n * 1e9 / hz / (ios > 0 ? ios : 1) }')
        log "perf: $(printf '%-12s' "$s") $ios I/Os, $share% of $samples samples in $fns: $ns ns per I/O under its lock"
        locked="$locked$s $ns"$'\n'
        rm -f "$mnt/perf.data"
    done
fi
echo none > "/sys/block/$name/queue/scheduler"

python3 - "$json" "$runtime" "$reps" "$depth" "$idle_busy_ns" <<EOF
import json, statistics, sys
as_json, runtime, reps, depth, idle = sys.argv[1] == "1", *map(int, sys.argv[2:])
rows = [l.split() for l in """$results""".strip().splitlines()]
per, job = {}, {}
for r, s, ios, ns, jns in rows:
    per.setdefault(s, {})[int(r)] = int(ns)
    job.setdefault(s, {})[int(r)] = int(jns)
out = {"workload": f"fio io_uring randread 4k QD{depth}, one job, loop over tmpfs, {runtime} s",
       "repeats": reps, "background_cpu_ns": idle, "schedulers": {}}
locked = dict(l.split() for l in """$locked""".strip().splitlines())
for s, by_rep in per.items():
    over = [by_rep[r] - per["none"][r] for r in by_rep if r in per.get("none", {})]
    job_over = [job[s][r] - job["none"][r] for r in job[s] if r in job.get("none", {})]
    out["schedulers"][s] = {
        "ns_per_io": statistics.median(by_rep.values()),
        "over_none_ns": statistics.median(over) if over else None,
        # The job's own CPU time per I/O, and its median difference from none's.
        "job_ns_per_io": statistics.median(job[s].values()),
        "job_over_none_ns": statistics.median(job_over) if job_over else None,
        "runs": sorted(by_rep.values()),
        # None without perf, and for none, which has no lock of its own.
        "locked_ns_per_io": int(locked[s]) if s in locked else None,
    }
if as_json:
    print(json.dumps(out, indent=2))
else:
    print()
    for s, v in out["schedulers"].items():
        lk = v["locked_ns_per_io"]
        print(f"{s:12} {v['ns_per_io']:8.0f} ns per I/O (median), over none {v['over_none_ns']:+8.0f} ns"
              + f", in fio's job {v['job_over_none_ns']:+6.0f} ns"
              + (f", {lk} ns under its lock" if lk is not None else ""))
EOF
