#!/usr/bin/env bash
# Seed "blk-mq: Improve performance of non-mq IO schedulers with multiple HW queues" on real
# kernels: dbench on XFS in a Linux guest whose SCSI disk (scsi_debug) has several hardware
# queues sharing one host-wide tag set (the mail's RAID card with host_tagset) or one
# hardware queue (the mail's SQ). The stock columns run Debian's 5.10 kernel (the mail's MQ
# and SQ were 5.10-rc6; the patch, b6e68ee82585, went into the block tree for 5.12 and was
# in linux-next by 5.11-rc5, January 2021; its 2022 fix went to the 5.18 stable series, none
# to 5.10's that we found), the patched one Debian's 6.1, with 6.1's SQ beside it so each
# kernel is compared with itself; and each scheduler beside `none` on the same disks, so what the disk's queue count
# does by itself (scsi_debug with one queue is slower here, whatever the scheduler) divides
# out: a scheduler's cost of many queues is its MQ/SQ throughput over none's. Prints
# dbench's throughput and latency per case, and what blk-mq's debugfs counted on the disk's
# hardware queues during the run: runs, and how many hardware queues ran.
#
#   bash scripts/guest-seed000.sh [--clients=8] [--runtime=20] [--rounds=1] [--queues=64]
#        [--delay-us=4000] [--tags=64] [--vcpus=2] [--schedulers=bfq,mq-deadline,none]
#        [--json] [--check]
# --queues: scsi_debug gives the disk at most as many hardware queues as the guest has CPUs.
# --delay-us is scsi_debug's response time (ndelay): every command completes that long after
#   it was queued, however many are queued (a RAM disk behind a timer, not a disk's arm).
# --tags is the host-wide tag count (scsi_debug's host_max_queue, the card's can_queue).
# --check exits 1 unless, at the largest client count, the patched kernel's first scheduler
#   loses no more than 10% with many queues beyond what none loses (the mail: the patch
#   "restores the performance").
#
# What differs from the mail: the device is scsi_debug, not a rotating disk (no seeks, no
# single arm: a request's time does not depend on the others'), marked rotational so BFQ
# treats it as a disk; the guest has --vcpus CPUs under QEMU (TCG on this machine, so more
# vCPUs than host cores never run at once) where the mail's machine ran 64 queues' CPUs;
# Debian's dbench has no --show-execute-time, so the mail's "loadfile execution time" is
# not printed and throughput and dbench's per-second latency line stand in for it.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/guest.sh

clients=8 runtime=20 rounds=1 queues=64 delay_us=4000 tags=64 vcpus=2 scheds=bfq,mq-deadline,none json=0 check=0
for a in "$@"; do
    case "$a" in
    --clients=*) clients=${a#*=} ;;
    --runtime=*) runtime=${a#*=} ;;
    --rounds=*) rounds=${a#*=} ;;
    --queues=*) queues=${a#*=} ;;
    --delay-us=*) delay_us=${a#*=} ;;
    --tags=*) tags=${a#*=} ;;
    --vcpus=*) vcpus=${a#*=} ;;
    --schedulers=*) scheds=${a#*=} ;;
    --json) json=1 ;;
    --check) check=1 ;;
    *) echo "guest-seed000.sh: unknown argument '$a'" >&2; exit 2 ;;
    esac
done
for v in runtime rounds queues delay_us tags vcpus; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "guest-seed000.sh: --${v//_/-}=${!v}: expected a positive number" >&2; exit 2; }
done
[[ $clients =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
    { echo "guest-seed000.sh: --clients=$clients: expected client counts, e.g. 1,8" >&2; exit 2; }
for s in ${scheds//,/ }; do
    case "$s" in bfq | mq-deadline | kyber | none) ;; *)
        echo "guest-seed000.sh: --schedulers: '$s': expected bfq, mq-deadline, kyber or none" >&2; exit 2 ;;
    esac
done

guest_host_tools dbench:dbench mkfs.xfs:xfsprogs || exit 1

base=${MQBLK_GUEST_DIR:-$PWD/target/guest}
# Every scheduler goes in (a built-in one is left out), so one initramfs serves each.
export GUEST_EXTRA_MODULES="scsi_debug sd_mod xfs bfq kyber-iosched mq-deadline"
export GUEST_EXTRA_FILES="$(command -v dbench) /usr/share/dbench/client.txt $(command -v mkfs.xfs)"
# Each kernel gets a directory of its own: the stock one from Debian 11's security suite
# (5.10), the patched one from this machine's own suite (Debian 12: 6.1).
prepare() {
    GUEST_DIR=$base/seed000-$1
    if [ "$1" = 5.10 ]; then
        GUEST_KERNEL_INDEX="http://deb.debian.org/debian-security bullseye-security"
    else
        GUEST_KERNEL_INDEX=""
    fi
    export GUEST_DIR GUEST_KERNEL_INDEX
    guest_prepare || return 1
    ls "$GUEST_DIR"/kernel/boot/vmlinuz-"$1".* >/dev/null 2>&1 ||
        { guest_log "$GUEST_DIR holds $(basename "$GUEST_KERNEL"), not $1"; return 1; }
}
prepare 5.10 || exit 1
prepare 6.1 || exit 1
guest_accel
n_runs=$(($(echo "${clients//,/ }" | wc -w) * $(echo "${scheds//,/ }" | wc -w)))
export GUEST_CPUS=$vcpus GUEST_MEM=2G GUEST_TIMEOUT=$((600 + 4 * (runtime + 60) * n_runs))

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The guest's job: per mode (name:hardware queues), a fresh scsi_debug disk with XFS on it,
# then dbench under each scheduler at each client count, each with the hardware queues'
# debugfs counters before and after.
job() {
    local mode q c s
    cat <<EOF
mkdir -p /sys/kernel/debug /mnt
mount -t debugfs none /sys/kernel/debug
for m in \$(cat /lib/modules/extra.order); do
    [ \$m = scsi_debug ] || insmod /lib/modules/\$m.ko || echo "@@ERROR insmod \$m"
done
counters() {
    local r=0 n=0 h v
    for h in /sys/kernel/debug/block/sda/hctx*; do
        v=\$(cat \$h/run)
        r=\$((r + v))
        [ "\$v" -gt 0 ] && n=\$((n + 1))
    done
    echo "\$r \$n"
}
EOF
    for mode in "$@"; do
        q=${mode#*:}
        cat <<EOF
insmod /lib/modules/scsi_debug.ko dev_size_mb=1024 submit_queues=$q host_max_queue=$tags max_queue=$tags ndelay=$((delay_us * 1000)) || echo "@@ERROR insmod scsi_debug"
i=0
while [ ! -b /dev/sda ] && [ \$i -lt 100 ]; do sleep 0.1; i=\$((i + 1)); done
echo 1 > /sys/block/sda/queue/rotational
mkfs.xfs -f -q /dev/sda || echo "@@ERROR mkfs.xfs"
mount -t xfs /dev/sda /mnt || echo "@@ERROR mount"
EOF
        for c in ${clients//,/ }; do
            for s in ${scheds//,/ }; do
                cat <<EOF
echo $s > /sys/block/sda/queue/scheduler || echo "@@ERROR scheduler $s"
rm -rf /mnt/clients
sync
echo 3 > /proc/sys/vm/drop_caches
before=\$(counters)
dbench -c /usr/share/dbench/client.txt -D /mnt -t $runtime $c >/tmp/out 2>&1
after=\$(counters)
echo "@@BEGIN ${mode%%:*}+$s+$c"
echo "hctxs \$(ls -d /sys/kernel/debug/block/sda/hctx* | wc -l) before \$before after \$after"
echo "write_cache \$(cat /sys/block/sda/queue/write_cache | tr ' ' _) fua \$(cat /sys/block/sda/queue/fua 2>/dev/null || echo -)"
tr '\r' '\n' </tmp/out
echo "@@END ${mode%%:*}+$s+$c"
EOF
            done
        done
        echo "umount /mnt; rmmod scsi_debug"
    done
}
job "MQ:$queues" "SQ:1" >"$work/job-5.10.sh"
job "MQ-patched:$queues" "SQ-6.1:1" >"$work/job-6.1.sh"

results=$work/results
: >"$results"
for r in $(seq "$rounds"); do
    for k in 5.10 6.1; do
        export GUEST_DIR=$base/seed000-$k
        GUEST_KERNEL=$(ls "$GUEST_DIR"/kernel/boot/vmlinuz-* | head -1)
        guest_log "round $r of $rounds, Linux $k"
        guest_boot "$work/job-$k.sh" "$work/console-$k" || { tail -20 "$work/console-$k" >&2; exit 1; }
        if grep -q '^@@ERROR' "$work/console-$k"; then
            grep '^@@ERROR' "$work/console-$k" >&2
            exit 1
        fi
        for n in $(tr -d '\r' <"$work/console-$k" | awk '/^@@BEGIN / {print $2}'); do
            guest_result "$work/console-$k" "$n" >"$work/out-$n-$r"
            echo "$k $n $work/out-$n-$r" >>"$results"
        done
    done
done

python3 - "$results" "$json" "$check" "$clients" "$queues" "$delay_us" "$tags" "$vcpus" "$scheds" "$GUEST_ACCEL" <<'PY'
import json, re, statistics, sys
path, as_json, check, clients, queues, delay_us, tags, vcpus, scheds, accel = sys.argv[1:]
clients = [int(c) for c in clients.split(",")]
scheds = scheds.split(",")
MODES = ["MQ", "SQ", "MQ-patched", "SQ-6.1"]
runs = {}
for line in open(path):
    kernel, name, out = line.split()
    text = open(out).read()
    tp = re.search(r"Throughput ([0-9.]+) MB/sec", text)
    h = re.search(r"hctxs (\d+) before (\d+) (\d+) after (\d+) (\d+)", text)
    if not tp or not h:
        sys.exit(f"guest-seed000.sh: no dbench throughput or counters for {name} (Linux {kernel}):\n{text[-600:]}")
    if float(tp.group(1)) <= 0:
        sys.exit(f"guest-seed000.sh: dbench measured nothing for {name} (Linux {kernel}): "
                 f"its first second is warm-up, give it a longer --runtime")
    lat = [float(x) for x in re.findall(r"latency ([0-9.]+) ms", text)]
    maxlat = re.search(r"max_latency=([0-9.]+) ms", text)
    wc = re.search(r"write_cache (\S+) fua (\S+)", text)
    mode, sched, c = name.split("+")
    runs.setdefault((mode, sched, int(c)), []).append({
        "kernel": kernel,
        "mb_per_s": float(tp.group(1)),
        "latency_ms": statistics.mean(lat) if lat else None,
        "max_latency_ms": float(maxlat.group(1)) if maxlat else None,
        "hctxs": int(h.group(1)),
        "hctx_runs": int(h.group(4)) - int(h.group(2)),
        "hctxs_run": int(h.group(5)),
        "write_cache": wc.group(1).replace("_", " ") if wc else None,
        "fua": wc.group(2) if wc else None,
    })


def med(rs, k):
    v = [r[k] for r in rs if r[k] is not None]
    return statistics.median(v) if v else None


rows = []
for (mode, sched, c), rs in sorted(runs.items(), key=lambda kv: (kv[0][2], scheds.index(kv[0][1]), MODES.index(kv[0][0]))):
    rows.append({"mode": mode, "kernel": rs[0]["kernel"], "scheduler": sched, "clients": c, "rounds": len(rs),
                 **{k: med(rs, k) for k in ("mb_per_s", "latency_ms", "max_latency_ms", "hctx_runs", "hctxs_run")},
                 "hctxs": rs[0]["hctxs"], "write_cache": rs[0]["write_cache"], "fua": rs[0]["fua"]})
get = {(r["mode"], r["scheduler"], r["clients"]): r for r in rows}
top = max(clients)


def ratio(mq, sq, s):
    return get[(mq, s, top)]["mb_per_s"] / get[(sq, s, top)]["mb_per_s"]


first = scheds[0]
verdict = {"clients": top, "scheduler": first, "stock_5_10": {}, "patched_6_1": {}}
for s in scheds:
    verdict["stock_5_10"][s] = round(ratio("MQ", "SQ", s), 3)
    verdict["patched_6_1"][s] = round(ratio("MQ-patched", "SQ-6.1", s), 3)
normalised = "none" in scheds and first != "none"
if normalised:
    verdict["stock_5_10_over_none"] = {s: round(ratio("MQ", "SQ", s) / ratio("MQ", "SQ", "none"), 3)
                                       for s in scheds if s != "none"}
    verdict["patched_6_1_over_none"] = {s: round(ratio("MQ-patched", "SQ-6.1", s) / ratio("MQ-patched", "SQ-6.1", "none"), 3)
                                        for s in scheds if s != "none"}
    holds = verdict["patched_6_1_over_none"][first] >= 0.9
else:
    holds = verdict["patched_6_1"][first] >= 0.9
verdict["patched_keeps_sq_performance"] = holds
setup = {"schedulers": scheds, "queues": int(queues), "hctxs": get[("MQ", first, top)]["hctxs"],
         "delay_us": int(delay_us), "tags": int(tags), "vcpus": int(vcpus), "accel": accel,
         "write_cache": rows[0]["write_cache"], "fua": rows[0]["fua"],
         "device": "scsi_debug, marked rotational", "fs": "xfs"}
if as_json == "1":
    print(json.dumps({"setup": setup, "rows": rows, "verdict": verdict}, indent=1))
else:
    print(f"dbench on XFS, scsi_debug ({delay_us} us per command, {tags} host-wide tags, marked rotational) "
          f"with {setup['hctxs']} hardware queues (MQ) or 1 (SQ), write cache: {setup['write_cache']}, "
          f"FUA: {setup['fua']}; a guest of {vcpus} vCPUs under {accel}")
    print(f"{'mode':>10} {'kernel':>6} {'scheduler':>11} {'clients':>7} | {'MB/s':>7} {'latency ms':>10} "
          f"{'max ms':>8} | {'hctx runs':>9} {'hctxs run':>9}")
    f = lambda v, w, p=1: f"{v:>{w}.{p}f}" if v is not None else f"{'-':>{w}}"
    for r in rows:
        print(f"{r['mode']:>10} {r['kernel']:>6} {r['scheduler']:>11} {r['clients']:>7} | {f(r['mb_per_s'], 7, 2)} "
              f"{f(r['latency_ms'], 10)} {f(r['max_latency_ms'], 8)} | {r['hctx_runs']:>9.0f} "
              f"{r['hctxs_run']:>5.0f}/{r['hctxs']}")
    print(f"at {top} clients, MB/s with many hardware queues over one (the mail, BFQ on 5.10-rc6: "
          f"363.86 / 610.95 ms of execution time, 0.60):")
    for s in scheds:
        print(f"  {s}: Linux 5.10 (stock) {verdict['stock_5_10'][s]}, Linux 6.1 (patched) {verdict['patched_6_1'][s]}")
    if normalised:
        for s in verdict["stock_5_10_over_none"]:
            print(f"  {s} over none: Linux 5.10 {verdict['stock_5_10_over_none'][s]}, "
                  f"Linux 6.1 {verdict['patched_6_1_over_none'][s]}")
    print(f"the patched kernel's {first} with many queues keeps one queue's performance "
          f"({'beyond none' + chr(39) + 's difference, ' if normalised else ''}within 10%): "
          f"{'yes' if holds else 'NO'}")
sys.exit(1 if check == "1" and not holds else 0)
PY
