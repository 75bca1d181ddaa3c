#!/usr/bin/env bash
# Captures the trace corpus in testdata/traces/ with `mqblk trace capture`: real programs on a
# fresh ext4 file system on a loop device, one trace each. Needs root (losetup, mount, tracefs)
# and, for the dbench trace, dbench (apt-get install dbench).
#
#   bash scripts/capture-corpus.sh [OUTDIR [NAME...]]
#        (NAME: git-clone grep-tree file-copy dbench6 dbench1-ext4 dbench8-xfs dbench1-xfs)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-testdata/traces}
shift || true
only=" $* "
want() { [ "$only" = "  " ] || [[ "$only" == *" $1 "* ]]; }
mkdir -p "$out"
cargo build --release -p mqblk >/dev/null
mqblk=$PWD/target/release/mqblk
work=$(mktemp -d)
img=$work/fs.img
truncate -s 128M "$img"
loop=$(losetup -f --show "$img")
cleanup() { umount "$work/mnt" 2>/dev/null || true; losetup -d "$loop" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
mkfs.ext4 -q "$loop"
mkdir "$work/mnt"
mount "$loop" "$work/mnt"
# Source material: this repository's sources, as a git repository of its own.
git -C . archive --format=tar HEAD crates | tar -x -C "$work"
git -C "$work" init -q && git -C "$work" add -A crates && git -C "$work" -c user.name=t -c user.email=t@t commit -qm corpus

capture() { # $1 = trace name, $2... = the workload
    local name=$1; shift
    sync; echo 3 > /proc/sys/vm/drop_caches
    "$mqblk" trace capture --device="$loop" -o "$out/$name" &
    local pid=$!
    sleep 0.5
    "$@"
    sync
    sleep 0.5
    kill -INT "$pid"
    wait "$pid"
}
want git-clone || want grep-tree && capture git-clone git clone -q "$work" "$work/mnt/clone"
want grep-tree && capture grep-tree bash -c "grep -r 'fn ' '$work/mnt/clone/crates' > /dev/null"
want file-copy && capture file-copy bash -c "dd if=/dev/urandom of='$work/mnt/big' bs=1M count=24 status=none && cp '$work/mnt/big' '$work/mnt/big2'"
# `bfq-no-merge`'s workload: dbench, 6 clients, for one second, on ext4 with its journal (jbd2 is
# one of the traced processes), on a loop device with direct I/O so the journal's and the
# clients' writes reach the block layer as they would a disk. Its own 2 GiB file system:
# dbench's files do not fit the small one, and lazy initialisation is done at mkfs so that
# only dbench, jbd2 and the flusher write.
# dbench1-ext4 is one client for two seconds on the same kind of file system: `bfq-no-merge`'s
# clients and journal as a model (Ext4DbenchClient and Jbd2 in
# crates/sim/src/workload/ext4.rs derive them from it).
fresh_ext4() {
    umount "$work/mnt" 2>/dev/null || true
    losetup -d "$loop"
    rm -f "$img"
    truncate -s 2G "$img"
    loop=$(losetup -f --show --direct-io=on "$img")
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$loop"
    mount "$loop" "$work/mnt"
}
if want dbench6; then
    fresh_ext4
    capture dbench6 dbench -t 1 -D "$work/mnt" 6
fi
if want dbench1-ext4; then
    fresh_ext4
    capture dbench1-ext4 dbench -t 2 -D "$work/mnt" 1
fi
# `single-hctx-dispatch`'s workloads, on XFS, the seed's file system, on a fresh 2 GiB loop device with
# direct I/O (XFS's log worker and flusher are among the traced processes):
# - dbench8-xfs, the kernel twin's (scripts/guest-seed000.sh): dbench, 8 clients, two
#   seconds (its first is warm-up);
# - dbench1-xfs, one client for two seconds: the scenario's clients are its loadfile as
#   measured here (XfsDbenchClient in crates/sim/src/workload.rs derives them from it).
fresh_xfs() {
    umount "$work/mnt" 2>/dev/null || true
    losetup -d "$loop"
    rm -f "$img"
    truncate -s 2G "$img"
    loop=$(losetup -f --show --direct-io=on "$img")
    mkfs.xfs -q -f "$loop"
    mount "$loop" "$work/mnt"
}
if want dbench8-xfs; then
    fresh_xfs
    capture dbench8-xfs dbench -t 2 -D "$work/mnt" 8
fi
if want dbench1-xfs; then
    fresh_xfs
    capture dbench1-xfs dbench -t 2 -D "$work/mnt" 1
fi
ls -la "$out"
