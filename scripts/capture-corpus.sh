#!/usr/bin/env bash
# Captures the trace corpus in testdata/traces/ with `mqblk trace capture`: real programs on a
# fresh ext4 file system on a loop device, one trace each. Needs root (losetup, mount, tracefs).
#
#   bash scripts/capture-corpus.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-testdata/traces}
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
capture git-clone git clone -q "$work" "$work/mnt/clone"
capture grep-tree bash -c "grep -r 'fn ' '$work/mnt/clone/crates' > /dev/null"
capture file-copy bash -c "dd if=/dev/urandom of='$work/mnt/big' bs=1M count=24 status=none && cp '$work/mnt/big' '$work/mnt/big2'"
ls -la "$out"
