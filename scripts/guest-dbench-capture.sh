#!/usr/bin/env bash
# Captures dbench inside a kernel twin's guest: Debian's 6.1 in a QEMU guest, a scsi_debug
# disk of one hardware queue whose every command takes --delay-us, dbench with --clients
# for --runtime seconds, traced with `mqblk trace capture` in the guest. The trace comes
# back through a virtio disk of its own and lands as OUT.blktrace.CPU files. The point is
# the clients' own time between their I/Os where the twin runs them (under TCG here, far
# slower than this machine's CPU), which the simulator's twin then replays
# (`XfsLoadfile::from_trace`, `Ext4Loadfile::from_trace`). The defaults are `single-hctx-dispatch`'s
# twin (scripts/guest-seed000.sh: XFS, 4 ms a command, marked rotational); `bfq-no-merge`'s
# (scripts/guest-seed004.sh) is --fs=ext4 --rotational=0 --delay-us=100 --tags=32.
#
#   bash scripts/guest-dbench-capture.sh [--clients=1] [--runtime=2] [--delay-us=4000]
#        [--fs=xfs|ext4] [--rotational=1|0] [--tags=N] [--vcpus=2] OUT
# --tags is the disk's queue depth (scsi_debug's max_queue; its own default when not given).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/guest.sh

clients=1 runtime=2 delay_us=4000 vcpus=2 fs=xfs rot=1 tags="" out=""
for a in "$@"; do
    case "$a" in
    --clients=*) clients=${a#*=} ;;
    --runtime=*) runtime=${a#*=} ;;
    --delay-us=*) delay_us=${a#*=} ;;
    --vcpus=*) vcpus=${a#*=} ;;
    --fs=xfs | --fs=ext4) fs=${a#*=} ;;
    --rotational=0 | --rotational=1) rot=${a#*=} ;;
    --tags=*) tags=${a#*=} ;;
    --*) echo "guest-dbench-capture.sh: unknown argument '$a'" >&2; exit 2 ;;
    *) out=$a ;;
    esac
done
[ -n "$out" ] || { echo "guest-dbench-capture.sh: give the output name (OUT.blktrace.CPU files)" >&2; exit 2; }
for v in clients runtime delay_us vcpus ${tags:+tags}; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "guest-dbench-capture.sh: --${v//_/-}=${!v}: expected a positive number" >&2; exit 2; }
done

guest_host_tools dbench:dbench mkfs.xfs:xfsprogs mkfs.ext4:e2fsprogs || exit 1
# $MQBLK names the binary to put in the guest (the tests' own); otherwise it is built.
mqblk=${MQBLK:-}
if [ -z "$mqblk" ]; then
    cargo build --release -p mqblk >/dev/null || exit 1
    mqblk=target/release/mqblk
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The guest gets mqblk without its debug information (a fifth of the size).
mkdir -p "$work/bin"
strip -o "$work/bin/mqblk" "$mqblk" || exit 1

# A guest directory of its own; mqblk, this run's, comes with the boot.
base=${MQBLK_GUEST_DIR:-$PWD/target/guest}
export GUEST_DIR=$base/seed000-6.1-capture GUEST_KERNEL_INDEX=""
export GUEST_EXTRA_MODULES="scsi_debug sd_mod xfs"
export GUEST_EXTRA_FILES="$(command -v dbench) /usr/share/dbench/client.txt $(command -v mkfs.xfs) $(command -v mkfs.ext4)"
export GUEST_BOOT_FILES="$work/bin/mqblk"
guest_prepare || exit 1
guest_accel
export GUEST_CPUS=$vcpus GUEST_MEM=2G GUEST_TIMEOUT=$((300 + 10 * runtime))

truncate -s 64M "$work/out.img"
cat >"$work/job.sh" <<EOF
mkdir -p /mnt /sys/kernel/tracing /out
mount -t tracefs none /sys/kernel/tracing || echo "@@ERROR tracefs"
for m in \$(cat /lib/modules/extra.order); do
    [ \$m = scsi_debug ] || insmod /lib/modules/\$m.ko || echo "@@ERROR insmod \$m"
done
insmod /lib/modules/scsi_debug.ko dev_size_mb=1024 submit_queues=1 ndelay=$((delay_us * 1000)) ${tags:+max_queue=$tags} || echo "@@ERROR insmod scsi_debug"
i=0
while [ ! -b /dev/sda ] && [ \$i -lt 100 ]; do sleep 0.1; i=\$((i + 1)); done
echo $rot > /sys/block/sda/queue/rotational
if [ $fs = xfs ]; then
    mkfs.xfs -f -q /dev/sda || echo "@@ERROR mkfs.xfs"
else
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 /dev/sda || echo "@@ERROR mkfs.ext4"
fi
mount -t $fs /dev/sda /mnt || echo "@@ERROR mount"
mqblk=$work/bin/mqblk
sync
\$mqblk trace capture --device=/dev/sda -o /out/t > /tmp/capture.log 2>&1 &
pid=\$!
sleep 2
dbench -c /usr/share/dbench/client.txt -D /mnt -t $runtime $clients > /tmp/dbench.log 2>&1 || echo "@@ERROR dbench"
sync
sleep 1
kill -INT \$pid
wait \$pid
echo "@@BEGIN log"
cat /tmp/capture.log /tmp/dbench.log | tail -5
ls -l /out
echo "@@END log"
cd /out && tar -cf /dev/vda t.blktrace.* || echo "@@ERROR tar"
sync
EOF
guest_log "capturing dbench ($clients clients, $runtime s, $fs) on Linux 6.1 ($GUEST_ACCEL)"
guest_boot "$work/job.sh" "$work/console" $(guest_drive_args "$work/out.img" 1) ||
    { tail -20 "$work/console" >&2; exit 1; }
guest_result "$work/console" log >&2
if grep -q '^@@ERROR' "$work/console"; then
    grep '^@@ERROR' "$work/console" >&2
    exit 1
fi
mkdir -p "$(dirname "$out")"
tar -xf "$work/out.img" -C "$work" || exit 1
for f in "$work"/t.blktrace.*; do
    cp "$f" "$out.blktrace.${f##*.}"
done
ls -l "$out".blktrace.*
