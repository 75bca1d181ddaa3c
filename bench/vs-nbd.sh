#!/usr/bin/env bash
# Side by side: nbdkit (memory and file plugins), qemu-nbd and `mqblk serve` (memory and a
# file through io_uring) on the same backing, driven by fio's nbd engine (randread and
# randwrite 4k QD32, 1 and 2 jobs = connections) and by nbdcopy (a 2 GiB copy out), each
# server started fresh per measurement and the servers alternating. Prints IOPS with the
# server's CPU time per request (user + system, from /proc/PID/stat over the fio run), or
# seconds for nbdcopy, and the ratio of mqblk to nbdkit-memory.
#
#   bash bench/vs-nbd.sh [RUNTIME_S] [REPS] [SCHEDULER]
set -euo pipefail
cd "$(dirname "$0")/.."
runtime=${1:-5}
reps=${2:-3}
sched=${3:-none}
for t in fio:fio nbdkit:nbdkit qemu-nbd:qemu-utils nbdcopy:libnbd-bin; do
    command -v "${t%%:*}" >/dev/null || { apt-get update -q && apt-get install -y -q "${t##*:}"; }
done
cargo build --release -p mqblk >/dev/null
mqblk=$PWD/target/release/mqblk
dir=$(mktemp -d)
mnt=$dir/tmpfs
mkdir -p "$mnt"
mount -t tmpfs -o size=5g tmpfs "$mnt" 2>/dev/null || true
file=$mnt/backing.img
cleanup() { pkill -f "nbd-bench-$$" 2>/dev/null || true; umount "$mnt" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
dd if=/dev/urandom of="$file" bs=1M count=2048 status=none
sock=$dir/nbd.sock
uri="nbd+unix:///?socket=$sock"

start() { # $1 = server name
    rm -f "$sock"
    case $1 in
        nbdkit-memory) nbdkit -f -U "$sock" memory 2048M & ;;
        nbdkit-file)   nbdkit -f -U "$sock" file "$file" & ;;
        qemu-nbd)      qemu-nbd -f raw --socket="$sock" --shared=4 --persistent "$file" & ;;
        mqblk-memory)  "$mqblk" serve --listen="unix:$sock" --driver=memory --size=2g \
                           --hw-queues=2 --ioscheduler="$sched" & ;;
        mqblk-file)    "$mqblk" serve --listen="unix:$sock" --driver=uring --filename="$file" \
                           --hw-queues=2 --ioscheduler="$sched" & ;;
    esac
    server=$!
    for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
    # Memory exports start empty: fill them so reads return real data.
    case $1 in *memory) nbdcopy "$file" "$uri" ;; esac
}
stop() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }

ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }
fio_iops() { # $1 = rw, $2 = jobs; prints "IOPS us-of-server-CPU-per-request"
    local t0 t1 out
    t0=$(ticks)
    out=$(fio --name=j --ioengine=nbd --uri="$uri" --rw="$1" --bs=4k --iodepth=32 --numjobs="$2" \
        --size=2g --runtime="$runtime" --time_based --group_reporting --output-format=json 2>/dev/null)
    t1=$(ticks)
    echo "$out" | python3 -c 'import json,sys,os
t=sys.stdin.read(); d=json.loads(t[t.find("{"):]); j=d["jobs"][0]
ios=j["read"]["total_ios"]+j["write"]["total_ios"]
cpu=(int(sys.argv[2])-int(sys.argv[1]))/os.sysconf("SC_CLK_TCK")
print(j["read"]["iops"]+j["write"]["iops"], f"{cpu*1e6/max(ios,1):.2f}")' "$t0" "$t1"
}
copy_s() {
    local t0 t1; t0=$(date +%s.%N); nbdcopy --connections=4 "$uri" null: ; t1=$(date +%s.%N)
    python3 -c "print(f'{$t1 - $t0:.3f}')"
}

servers="nbdkit-memory nbdkit-file qemu-nbd mqblk-memory mqblk-file"
declare -A res cpu
for r in $(seq "$reps"); do
    for s in $servers; do
        for w in "randread 1" "randread 2" "randwrite 1" "randwrite 2"; do
            start "$s"; read -r v c < <(fio_iops $w); stop
            res["$s $w"]="${res["$s $w"]:-} $v"
            cpu["$s $w"]="${cpu["$s $w"]:-} $c"
            printf 'rep %d %-14s %-12s %10.0f IOPS %6s us/req server CPU\n' "$r" "$s" "$w" "$v" "$c"
        done
        start "$s"; v=$(copy_s); stop
        res["$s copy"]="${res["$s copy"]:-} $v"
        printf 'rep %d %-14s %-12s %10s s (nbdcopy 2 GiB out)\n' "$r" "$s" "copy" "$v"
    done
done
echo
med() { python3 -c "import statistics,sys; print(statistics.median(map(float, sys.argv[1:])))" "$@"; }
printf '%-14s %-12s %12s %10s %18s\n' server workload median "us/req" "mqblk-memory/this"
for w in "randread 1" "randread 2" "randwrite 1" "randwrite 2" "copy"; do
    ours=$(med ${res["mqblk-memory $w"]})
    for s in $servers; do
        m=$(med ${res["$s $w"]})
        if [ "$w" = copy ]; then ratio=$(python3 -c "print(f'{$m / max($ours, 1e-9):.2f}')"); else ratio=$(python3 -c "print(f'{$ours / max($m, 1):.2f}')"); fi
        c=-; [ "$w" = copy ] || c=$(med ${cpu["$s $w"]})
        printf '%-14s %-12s %12s %10s %18s\n' "$s" "$w" "$m" "$c" "$ratio"
    done
done
