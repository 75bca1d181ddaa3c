#!/usr/bin/env bash
# Side by side: fio's io_uring engine against `mqblk bench` (driver=uring, scheduler none) on
# the same file with the same job, alternating runs so both see the same machine state.
# Prints each pair's IOPS, the CPU time each spent per I/O (user + system, of the whole process
# with its io-wq workers: bench/measure.py) and the mqblk/fio ratio of IOPS, then the median
# ratios per workload, of IOPS and of CPU per I/O.
#
#   bash bench/vs-fio.sh [FILE] [SIZE] [RUNTIME_S] [REPS]
#
# FILE defaults to a file on a tmpfs mounted for the run (root) or under /tmp. fio is
# installed from Debian's packages if missing. MQBLK=path runs that mqblk binary instead of
# building one.
set -euo pipefail
cd "$(dirname "$0")/.."
file=${1:-}
size=${2:-1g}
runtime=${3:-5}
reps=${4:-3}
# shellcheck source=bench/lib.sh
source bench/lib.sh
mnt=""
if [ -z "$file" ]; then
    mnt=$(mktemp -d)
    if mount -t tmpfs -o size=$((2 * $(numfmt --from=iec "${size^^}") ))  tmpfs "$mnt" 2>/dev/null; then
        file=$mnt/vs-fio.dat
    else
        rmdir "$mnt"; mnt=""; file=$(mktemp /tmp/vs-fio.XXXXXX)
    fi
fi
cleanup() { if [ -n "$mnt" ]; then umount "$mnt" || true; rmdir "$mnt" || true; fi; }
trap cleanup EXIT
# Lay the file out once, fully written, so both tools read real data.
fio --name=layout --filename="$file" --size="$size" --rw=write --bs=1m --direct=0 --output=/dev/null

fio_run() { # $1 = extra fio args
    measure fio --name=j --filename="$file" --size="$size" --ioengine=io_uring --runtime="$runtime" \
        --time_based --group_reporting --output-format=json $1
}
mqblk_run() { # $1 = extra bench args
    measure $mqblk bench --output-format=json --driver=uring --filename="$file" --size="$size" \
        --ioscheduler=none --runtime="$runtime" --time_based $1 --name=j
}

declare -A ratios cpu_ratios
run() { # $1 = label, $2 = shared args (both tools understand them), $3 = mqblk-only args
    for r in $(seq "$reps"); do
        # Assigned first, so that a failed run stops the script (set -e).
        fo=$(fio_run "$2")
        mo=$(mqblk_run "$2 $3")
        read -r f fu fs <<<"$fo"
        read -r m mu ms <<<"$mo"
        read -r ratio cpu <<<"$(python3 -c "print(f'{$m / max($f, 1):.3f}', f'{($mu + $ms) / max($fu + $fs, 1e-9):.3f}')")"
        printf '%-30s rep %d  fio %9.0f IOPS %5.2f+%5.2f us/IO  mqblk %9.0f IOPS %5.2f+%5.2f us/IO  ratio %s  cpu %s\n' \
            "$1" "$r" "$f" "$fu" "$fs" "$m" "$mu" "$ms" "$ratio" "$cpu"
        ratios[$1]="${ratios[$1]:-} $ratio"
        cpu_ratios[$1]="${cpu_ratios[$1]:-} $cpu"
    done
}
run "randread 4k qd32 1 job"  "--rw=randread --bs=4k --iodepth=32 --direct=1 --numjobs=1" "--nr_hw_queues=1"
run "randread 4k qd32 2 jobs" "--rw=randread --bs=4k --iodepth=32 --direct=1 --numjobs=2" "--nr_hw_queues=2"
# Several submitters on one hardware queue, as on the kernel's single-queue devices.
run "randread 4k qd32 2 jobs 1 hctx" "--rw=randread --bs=4k --iodepth=32 --direct=1 --numjobs=2" "--nr_hw_queues=1"
run "randread 4k qd4 4 jobs 1 hctx"  "--rw=randread --bs=4k --iodepth=4 --direct=1 --numjobs=4" "--nr_hw_queues=1"
run "read 128k qd8 1 job"     "--rw=read --bs=128k --iodepth=8 --direct=1 --numjobs=1"    "--nr_hw_queues=1"
# Registered buffers on both sides (fio's io_uring `fixedbufs`, ours the same option).
run "randread 4k qd32 fixedbufs" "--rw=randread --bs=4k --iodepth=32 --direct=1 --numjobs=1 --fixedbufs" "--nr_hw_queues=1"
echo
median() { python3 -c "import statistics,sys; print(statistics.median(map(float, sys.argv[1:])))" "$@"; }
for k in "${!ratios[@]}"; do
    # shellcheck disable=SC2086 # the ratios are one word each
    printf '%-30s median mqblk/fio %s  cpu per I/O %s\n' "$k" "$(median ${ratios[$k]})" "$(median ${cpu_ratios[$k]})"
done
