#!/usr/bin/env bash
# A Linux guest whose vhost-user-blk server is killed (SIGKILL) and started again while fio
# writes and verifies in it (about two minutes under TCG):
#   1. `mqblk serve --vhost-user-blk --in-order` serves a file through io_uring; QEMU's
#      chardev reconnects (`reconnect=1`);
#   2. fio in the guest writes a crc32c pattern from one job per virtqueue, rate-limited so
#      that the writes last a while, and then reads every block back and verifies it;
#   3. meanwhile the host kills the server $KILLS times (3 by default) and starts it again
#      on the same file and socket (`--replace-stale-socket`); QEMU takes the rings up from
#      their used index and the new server takes again what was in flight;
#   4. the check: fio's verify passes, the guest's kernel logged no I/O error, and every
#      restart was followed by requests served.
# Prints PASS or the first failure; exits non-zero on failure.
#
#   bash scripts/guest-reconnect.sh [--kills N]
# Needs what guest-test.sh needs (QEMU, busybox, fio, Debian's cloud kernel).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/guest.sh

kills=3
while [ $# -gt 0 ]; do
    case "$1" in
    --kills=*) kills=${1#*=} ;;
    --kills) kills=$2; shift ;;
    *) echo "guest-reconnect.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done

guest_check_setup

work=$(mktemp -d)
server=""
guest=""
cleanup() {
    [ -n "$guest" ] && kill "$guest" 2>/dev/null
    [ -n "$server" ] && kill -9 "$server" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
sock=$work/vhost.sock
nq=2
size_mb=128
starts=0

# Starts the server and waits until it listens (its line on the log).
start_server() {
    starts=$((starts + 1))
    "$mqblk" serve --vhost-user-blk="$sock" --num-queues=$nq --in-order --driver=uring \
        --filename="$work/disk" --size=${size_mb}M --replace-stale-socket \
        --stats="$work/stats-$starts.json" >>"$work/serve.log" 2>&1 &
    server=$!
    for _ in $(seq 200); do
        [ "$(grep -c 'as vhost-user-blk on' "$work/serve.log")" -ge "$starts" ] && return 0
        kill -0 "$server" 2>/dev/null || break
        sleep 0.05
    done
    cat "$work/serve.log"
    fail "server start $starts did not listen on $sock"
}
start_server

cpus=${GUEST_CPUS:-2}
per=$((size_mb / cpus))
cat >"$work/job" <<EOF
cat >/tmp/p.fio <<'FIO'
[global]
filename=/dev/vda
ioengine=libaio
direct=1
iodepth=8
bs=16k
rw=randwrite
size=${per}m
offset_increment=${per}m
numjobs=$cpus
cpus_allowed=0-$((cpus - 1))
cpus_allowed_policy=split
rate=3m
verify=crc32c
verify_fatal=1
do_verify=1
randrepeat=1
group_reporting=1
[pattern]
FIO
echo @@FIO-STARTS
fio --output-format=terse /tmp/p.fio >/tmp/out 2>&1
rc=\$?
echo "@@BEGIN fio"
echo "rc=\$rc"
cat /tmp/out
echo "@@END fio"
echo "@@BEGIN errors"
dmesg | grep -iE 'I/O error|blk_update_request|virtio_blk.*(error|timeout)' || true
echo "@@END errors"
EOF

console=$work/console
# shellcheck disable=SC2046
GUEST_TIMEOUT=${GUEST_TIMEOUT:-900} guest_boot "$work/job" "$console" \
    -chardev "socket,id=vu,path=$sock,reconnect=1" \
    -device "vhost-user-blk-pci,chardev=vu,num-queues=$nq" &
guest=$!
start=$(date +%s)
for _ in $(seq 600); do
    grep -q '@@FIO-STARTS' "$console" 2>/dev/null && break
    kill -0 "$guest" 2>/dev/null || break
    sleep 1
done
grep -q '@@FIO-STARTS' "$console" 2>/dev/null || { cat "$console"; fail "the guest did not start fio"; }
# The writes take about $per MiB / 3 MiB/s per job; the kills fall inside them.
for k in $(seq "$kills"); do
    sleep 4
    kill -0 "$guest" 2>/dev/null || fail "the guest ended before kill $k"
    kill -9 "$server"
    wait "$server" 2>/dev/null
    server=""
    sleep 0.5
    start_server
done
wait "$guest"
rc=$?
guest=""
[ $rc = 0 ] || { tail -50 "$console"; cat "$work/serve.log"; fail "the guest did not finish its job"; }
elapsed=$(($(date +%s) - start))
res=$(guest_result "$console" fio)
echo "$res" | grep -q '^rc=0$' || { echo "$res"; fail "fio's write-and-verify failed in the guest"; }
errs=$(guest_result "$console" errors)
[ -z "$errs" ] || { echo "$errs"; fail "the guest's kernel logged I/O errors"; }

kill -TERM "$server"
wait "$server"
rc=$?
server=""
[ $rc = 0 ] || { cat "$work/serve.log"; fail "the last server exited with $rc after SIGTERM"; }
python3 - "$work/stats-$starts.json" <<'PY' || fail "the last server's statistics"
import json, sys
s = json.load(open(sys.argv[1]))
n = sum(v["requests"] for v in s["virtqueues"])
e = sum(v["errors"] for v in s["virtqueues"])
assert n > 0, "the last server served no request"
assert e == 0, f"{e} errors"
print(f"the last server: {n} requests, no errors")
PY
echo "PASS: fio wrote ${size_mb} MiB with crc32c and verified it while the server was killed $kills times and restarted ($GUEST_ACCEL, ${elapsed}s)"
