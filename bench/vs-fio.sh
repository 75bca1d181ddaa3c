#!/usr/bin/env bash
# Side by side: fio's io_uring engine against `mqblk bench` (driver=uring, scheduler none) on
# the same file with the same job, alternating runs so both see the same machine state.
# Prints each pair's IOPS and the mqblk/fio ratio, then the median ratio per workload.
#
#   bash bench/vs-fio.sh [FILE] [SIZE] [RUNTIME_S] [REPS]
#
# FILE defaults to a file on a tmpfs mounted for the run (root) or under /tmp. fio is
# installed from Debian's packages if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
file=${1:-}
size=${2:-1g}
runtime=${3:-5}
reps=${4:-3}
command -v fio >/dev/null || { apt-get update -q && apt-get install -y -q fio; }
cargo build --release -p mqblk >/dev/null
mqblk=target/release/mqblk
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

fio_iops() { # $1 = extra fio args
    fio --name=j --filename="$file" --size="$size" --ioengine=io_uring --runtime="$runtime" --time_based \
        --group_reporting --output-format=json $1 \
        | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(j["read"]["iops"] for j in d["jobs"]))'
}
mqblk_iops() { # $1 = extra bench args
    $mqblk bench --output-format=json --driver=uring --filename="$file" --size="$size" --ioscheduler=none \
        --runtime="$runtime" --time_based $1 --name=j \
        | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(j["read"]["iops"] for j in d["jobs"]))'
}

declare -A ratios
run() { # $1 = label, $2 = shared args (both tools understand them), $3 = mqblk-only args
    for r in $(seq "$reps"); do
        f=$(fio_iops "$2")
        m=$(mqblk_iops "$2 $3")
        ratio=$(python3 -c "print(f'{$m / max($f, 1):.3f}')")
        printf '%-28s rep %d  fio %10.0f  mqblk %10.0f  ratio %s\n' "$1" "$r" "$f" "$m" "$ratio"
        ratios[$1]="${ratios[$1]:-} $ratio"
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
for k in "${!ratios[@]}"; do
    median=$(python3 -c "import statistics,sys; print(statistics.median(map(float, sys.argv[1:])))" ${ratios[$k]})
    printf '%-28s median mqblk/fio %s\n' "$k" "$median"
done
