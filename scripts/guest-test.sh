#!/usr/bin/env bash
# A Linux guest on `mqblk serve --vhost-user-blk`, end to end (about a minute under TCG):
#   1. the guest sees the device with as many blk-mq hardware queues as virtqueues
#      (/sys/block/vda/mq/*), and its capacity;
#   2. fio in the guest writes a pattern with verify=crc32c from one job per vCPU (each on
#      its own virtqueue), fsyncs, and the guest powers off;
#   3. a second boot (a new vhost-user connection to the same server) verifies every block,
#      then discards a MiB with blkdiscard and reads it back as zeroes;
#   4. the server exits cleanly on SIGTERM after its final flush, and its statistics show
#      every virtqueue served requests with no errors.
# Prints PASS or the first failure; exits non-zero on failure.
#
#   bash scripts/guest-test.sh [--num-queues N] [--driver memory|uring|null] [--ioscheduler S]
# Installs QEMU, busybox and fio with apt-get if missing; the guest kernel is Debian's cloud
# kernel, downloaded and unpacked under target/guest (MQBLK_GUEST_DIR). KVM is used where a
# probe boot works, else TCG (MQBLK_GUEST_ACCEL=kvm|tcg forces one).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/guest.sh

nq=2
driver=memory
sched=none
while [ $# -gt 0 ]; do
    case "$1" in
    --num-queues=*) nq=${1#*=} ;;
    --num-queues) nq=$2; shift ;;
    --driver=*) driver=${1#*=} ;;
    --driver) driver=$2; shift ;;
    --ioscheduler=*) sched=${1#*=} ;;
    --ioscheduler) sched=$2; shift ;;
    *) echo "guest-test.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done

guest_check_setup

work=$(mktemp -d)
server=""
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
sock=$work/vhost.sock
size_mb=256
args=(--vhost-user-blk="$sock" --num-queues="$nq" --ioscheduler="$sched" --stats="$work/stats.json")
if [ "$driver" = uring ]; then
    args+=(--driver=uring --filename="$work/disk" --size=${size_mb}M)
else
    # memory keeps the data; null drops it (the verify pass then fails: the check's own test)
    args+=(--driver="$driver" --size=${size_mb}M)
fi
"$mqblk" serve "${args[@]}" >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || { cat "$work/serve.log"; fail "the server did not create $sock"; }

# One fio job per vCPU, pinned (cpus_allowed_policy=split), each on its own region: the
# guest's blk-mq maps CPU i to virtqueue i, so every virtqueue carries one job's writes.
cpus=${GUEST_CPUS:-2}
fio_job() {
    cat <<EOF
[global]
filename=/dev/vda
ioengine=libaio
direct=1
iodepth=8
bs=16k
rw=randwrite
size=$((size_mb / cpus))m
offset_increment=$((size_mb / cpus))m
numjobs=$cpus
cpus_allowed=0-$((cpus - 1))
cpus_allowed_policy=split
verify=crc32c
verify_fatal=1
randrepeat=1
group_reporting=1
[pattern]
EOF
}
fio_job >"$work/pattern.fio"

# The guest's part of a pass: run the pattern job with $2 added, print its exit status and
# terse output as result $1.
fio_pass() {
    cat <<EOF
cat >/tmp/p.fio <<'FIO'
$(cat "$work/pattern.fio")
$2
FIO
fio --output-format=terse /tmp/p.fio >/tmp/out 2>&1
rc=\$?
echo "@@BEGIN $1"
echo "rc=\$rc"
cat /tmp/out
echo "@@END $1"
EOF
}
cat >"$work/write.sh" <<EOF
echo "@@BEGIN mq"
ls -1 /sys/block/vda/mq
echo "@@END mq"
echo "@@BEGIN size"
cat /sys/block/vda/size
echo "@@END size"
EOF
fio_pass write "$(printf 'do_verify=0\nend_fsync=1')" >>"$work/write.sh"
fio_pass verify verify_only=1 >"$work/verify.sh"
# Then the guest discards the first MiB (VIRTIO_BLK_T_DISCARD from Linux's own driver): it
# reads back as zeroes on the memory and uring drivers.
cat >>"$work/verify.sh" <<'EOF'
echo "@@BEGIN discard"
cat /sys/block/vda/queue/discard_max_bytes /sys/block/vda/queue/write_zeroes_max_bytes
blkdiscard -o 0 -l 1048576 /dev/vda && echo discarded
dd if=/dev/vda bs=1048576 count=1 iflag=direct 2>/dev/null | md5sum
echo "@@END discard"
EOF

vargs=$(guest_vhost_args "$sock" "$nq")
start=$(date +%s)
# shellcheck disable=SC2086
guest_boot "$work/write.sh" "$work/c1" $vargs || { cat "$work/c1" "$work/serve.log"; fail "first boot"; }
mq=$(guest_result "$work/c1" mq | wc -l)
[ "$mq" = "$nq" ] || fail "the guest sees $mq hardware queues (/sys/block/vda/mq), expected $nq"
sectors=$(guest_result "$work/c1" size)
[ "$sectors" = $((size_mb * 2048)) ] || fail "the guest sees $sectors sectors, expected $((size_mb * 2048))"
guest_result "$work/c1" write | grep -q '^rc=0$' ||
    { guest_result "$work/c1" write; fail "fio's write pass failed in the guest"; }
# shellcheck disable=SC2086
guest_boot "$work/verify.sh" "$work/c2" $vargs || { cat "$work/c2" "$work/serve.log"; fail "second boot"; }
guest_result "$work/c2" verify | grep -q '^rc=0$' ||
    { guest_result "$work/c2" verify; fail "fio's verify pass failed after the reboot"; }
disc=$(guest_result "$work/c2" discard)
echo "$disc" | head -2 | grep -qx 0 && fail "the guest sees no discard or write-zeroes support: $disc"
echo "$disc" | grep -q '^discarded$' || fail "blkdiscard failed in the guest: $disc"
# md5 of one MiB of zeroes.
echo "$disc" | grep -q '^b6d81b360a5672d80c27430f39153e2c' ||
    fail "a discarded MiB does not read back as zeroes: $disc"
elapsed=$(($(date +%s) - start))

kill -TERM "$server"
wait "$server"
rc=$?
server=""
[ $rc = 0 ] || { cat "$work/serve.log"; fail "the server exited with $rc after SIGTERM"; }
grep -q "final flush ok" "$work/serve.log" || { cat "$work/serve.log"; fail "no final flush"; }
python3 - "$work/stats.json" "$nq" <<'PY' || fail "server statistics"
import json, sys
s = json.load(open(sys.argv[1]))
vqs = s["virtqueues"]
assert len(vqs) == int(sys.argv[2]), f"{len(vqs)} virtqueues in the statistics"
for v in vqs:
    assert v["requests"] > 0, f"virtqueue {v['queue']} served no request"
    assert v["errors"] == 0, f"virtqueue {v['queue']}: {v['errors']} errors"
print("virtqueues:", ", ".join(f"{v['queue']}->hctx {v['hctx']}: {v['requests']} requests" for v in vqs))
PY
echo "PASS: $nq virtqueues, ${size_mb} MiB written and verified across a reboot, a MiB discarded ($GUEST_ACCEL, ${elapsed}s)"
