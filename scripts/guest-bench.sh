#!/usr/bin/env bash
# fio inside a Linux guest against a virtio-blk disk served three ways, alternating:
#   mqblk   mqblk serve --vhost-user-blk (memory driver, or --driver=uring on the file)
#   qemu    QEMU's own virtio-blk on a file (aio=io_uring)
#   qsd     qemu-storage-daemon --export type=vhost-user-blk on the same file
# For each backend and virtqueue count the guest boots once and runs the job at every
# --numjobs; each row is the median of --rounds boots. Host CPU per request is the CPU time
# of the threads that serve the disk (the whole mqblk or qemu-storage-daemon process; for
# QEMU's own virtio-blk, its threads other than the vCPUs) over the requests fio completed.
#
#   bash scripts/guest-bench.sh [--backends=mqblk,qemu,qsd] [--num-queues=1,2] [--numjobs=2,4]
#        [--iodepth=64] [--bs=4k] [--runtime=5] [--rounds=2] [--vcpus=4] [--size=256]
#        [--ioscheduler=none] [--driver=memory|uring] [--vq-threads=N] [--dir=/dev/shm] [--json]
# --size is MiB; the file (for qemu, qsd and --driver=uring) is made in --dir and filled with
# random data, and the guest fills mqblk's memory device with random data before measuring.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/guest.sh

backends=mqblk,qemu,qsd nqs=1,2 numjobs=2,4 iodepth=64 bs=4k runtime=5 rounds=2 vcpus=4
size=256 sched=none driver=memory dir=/dev/shm json=0 vqthreads=""
for a in "$@"; do
    case "$a" in
    --backends=*) backends=${a#*=} ;;
    --num-queues=*) nqs=${a#*=} ;;
    --numjobs=*) numjobs=${a#*=} ;;
    --iodepth=*) iodepth=${a#*=} ;;
    --bs=*) bs=${a#*=} ;;
    --runtime=*) runtime=${a#*=} ;;
    --rounds=*) rounds=${a#*=} ;;
    --vcpus=*) vcpus=${a#*=} ;;
    --size=*) size=${a#*=} ;;
    --ioscheduler=*) sched=${a#*=} ;;
    --driver=*) driver=${a#*=} ;;
    --vq-threads=*) vqthreads=${a#*=} ;;
    --dir=*) dir=${a#*=} ;;
    --json) json=1 ;;
    *) echo "guest-bench.sh: unknown argument '$a'" >&2; exit 2 ;;
    esac
done
case "$driver" in memory | uring) ;; *) echo "guest-bench.sh: --driver=$driver: expected memory or uring" >&2; exit 2 ;; esac

mqblk=${MQBLK:-target/release/mqblk}
[ -x "$mqblk" ] || cargo build --release -q -p mqblk || exit 1
guest_prepare || exit 1
command -v qemu-storage-daemon >/dev/null || [[ $backends != *qsd* ]] ||
    { echo "guest-bench.sh: qemu-storage-daemon missing (apt-get install qemu-system-common)" >&2; exit 1; }
guest_accel
export GUEST_CPUS=$vcpus GUEST_MEM=1G

work=$(mktemp -d "$dir/mqblk-guest-bench.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
file=$work/disk
head -c $((size << 20)) /dev/urandom >"$file"

# The guest's job: fill the disk once (a memory device starts empty), then the measured
# randread at each numjobs, each result between markers.
{
    echo "fio --name=fill --filename=/dev/vda --rw=write --bs=1m --direct=1 --ioengine=libaio --iodepth=4 >/dev/null 2>&1"
    for j in ${numjobs//,/ }; do
        cat <<EOF
fio --name=r --filename=/dev/vda --rw=randread --bs=$bs --iodepth=$iodepth --numjobs=$j \
    --ioengine=libaio --direct=1 --runtime=$runtime --time_based --group_reporting \
    --cpus_allowed=0-$((vcpus - 1)) --output-format=json >/tmp/out 2>/tmp/err
echo "@@BEGIN jobs$j"
cat /tmp/out /tmp/err
echo "@@END jobs$j"
EOF
    done
} >"$work/job.sh"

# CPU ticks of process $1, threads that have exited included.
cpu_proc() {
    awk '{print $14 + $15}' /proc/"$1"/stat
}

# CPU ticks of pid $1's live threads, leaving out QEMU's vCPU threads.
cpu_of() {
    local t sum=0 comm ticks
    for t in /proc/"$1"/task/*; do
        comm=$(cat "$t/comm" 2>/dev/null) || continue
        [[ $comm == CPU\ * ]] && continue
        ticks=$(awk '{print $14 + $15}' "$t/stat" 2>/dev/null) || continue
        sum=$((sum + ticks))
    done
    echo "$sum"
}

# Runs one boot for backend $1 with $2 virtqueues; prints "numjobs iops cpu_us_per_req" rows.
run_one() {
    local be=$1 nq=$2 sock=$work/vu.sock con=$work/console server="" sampler="" qargs
    rm -f "$sock" "$work/cpu" "$work/server.log"
    case "$be" in
    mqblk)
        local dargs=(--driver=memory --size=${size}M)
        [ "$driver" = uring ] && dargs=(--driver=uring --filename="$file")
        # --vq-threads=N, at most one per virtqueue.
        [ -n "$vqthreads" ] && dargs+=(--vq-threads=$((vqthreads < nq ? vqthreads : nq)))
        "$mqblk" serve --vhost-user-blk="$sock" --num-queues="$nq" --ioscheduler="$sched" \
            "${dargs[@]}" >"$work/server.log" 2>&1 &
        server=$!
        ;;
    qsd)
        qemu-storage-daemon --blockdev "driver=file,node-name=f,filename=$file,aio=io_uring,cache.direct=off" \
            --export "type=vhost-user-blk,id=e,node-name=f,addr.type=unix,addr.path=$sock,num-queues=$nq,writable=on" \
            >"$work/server.log" 2>&1 &
        server=$!
        ;;
    esac
    if [ -n "$server" ]; then
        pids+=("$server")
        for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
        qargs=$(guest_vhost_args "$sock" "$nq")
    else
        qargs=$(guest_drive_args "$file" "$nq" writeback)
    fi
    # QEMU's own serving threads' CPU, sampled until the guest is gone (they vanish with
    # it, so the last sample is the total); an external server is read at the end.
    if [ -z "$server" ]; then
        (
            while :; do
                p=$(pgrep -n -f "^qemu-system-x86_64 .*$work/")
                [ -n "$p" ] && cpu_of "$p" >"$work/cpu.new" && mv "$work/cpu.new" "$work/cpu"
                sleep 0.2
            done
        ) >/dev/null 2>&1 &
        sampler=$!
    fi
    local c0=0
    [ -n "$server" ] && c0=$(cpu_proc "$server")
    # shellcheck disable=SC2086
    guest_boot "$work/job.sh" "$con" $qargs
    local ok=$?
    if [ -n "$sampler" ]; then
        kill "$sampler" 2>/dev/null
        wait "$sampler" 2>/dev/null
    fi
    local c1
    c1=$(cat "$work/cpu" 2>/dev/null || echo 0)
    if [ -n "$server" ]; then
        c1=$(cpu_proc "$server")
        kill "$server" 2>/dev/null
        wait "$server" 2>/dev/null
    fi
    if [ $ok != 0 ]; then
        echo "guest-bench.sh: $be nq=$nq: the guest failed; its console's last lines, then the server's:" >&2
        [ -f "$con" ] && tail -n 20 "$con" >&2
        [ -f "$work/server.log" ] && tail -n 20 "$work/server.log" >&2
        return 1
    fi
    local hz
    hz=$(getconf CLK_TCK)
    local total_ios=0 rows=""
    for j in ${numjobs//,/ }; do
        local r
        r=$(guest_result "$con" "jobs$j" | python3 -c '
import json, sys
t = sys.stdin.read()
d = json.loads(t[t.index("{"):t.rindex("}") + 1])
r = d["jobs"][0]["read"]
print(r["iops"], r["total_ios"])') || { echo "guest-bench.sh: $be nq=$nq jobs=$j: no fio result" >&2; return 1; }
        rows="$rows$j ${r%% *}\n"
        total_ios=$((total_ios + ${r##* }))
    done
    # The fill pass is counted too: its 1 MiB writes are few next to the reads.
    local us
    us=$(python3 -c "print(round(($c1 - $c0) / $hz * 1e6 / max($total_ios, 1), 2))")
    printf "$rows" | while read -r j iops; do echo "$j $iops $us"; done
}

results=$work/results
: >"$results"
# A boot that fails is reported (above) and leaves its row out; the script then exits 1
# after printing what the others measured.
failed=0
for round in $(seq "$rounds"); do
    for nq in ${nqs//,/ }; do
        for be in ${backends//,/ }; do
            guest_log "round $round: $be, $nq virtqueue(s)"
            if ! run_one "$be" "$nq" | while read -r j iops us; do
                echo "$be $nq $j $iops $us" >>"$results"
            done; then
                failed=1
            fi
        done
    done
done

python3 - "$results" "$json" "$GUEST_ACCEL" "$bs" "$iodepth" "$vcpus" <<'PY'
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
groups = {}
for be, nq, j, iops, us in rows:
    groups.setdefault((be, int(nq), int(j)), []).append((float(iops), float(us)))
out = []
for (be, nq, j), v in sorted(groups.items()):
    out.append({"backend": be, "num_queues": nq, "numjobs": j,
                "iops": statistics.median(x[0] for x in v),
                "host_cpu_us_per_req": statistics.median(x[1] for x in v),
                "runs": [x[0] for x in v]})
if sys.argv[2] == "1":
    print(json.dumps({"accel": sys.argv[3], "bs": sys.argv[4], "iodepth": int(sys.argv[5]),
                      "vcpus": int(sys.argv[6]), "rows": out}, indent=1))
else:
    print(f"randread {sys.argv[4]} QD{sys.argv[5]}, {sys.argv[6]} vCPUs, {sys.argv[3]}; medians of {len(next(iter(groups.values())))} boots")
    print(f"{'backend':8} {'vqs':>4} {'jobs':>5} {'IOPS':>10} {'host us/req':>12}  runs")
    for r in out:
        print(f"{r['backend']:8} {r['num_queues']:>4} {r['numjobs']:>5} {r['iops']:>10.0f} {r['host_cpu_us_per_req']:>12.2f}  "
              + " ".join(f"{x:.0f}" for x in r["runs"]))
PY
exit $failed
