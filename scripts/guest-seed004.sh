#!/usr/bin/env bash
# Seed "block, bfq: do not merge queues on flash storage with queueing" asked of a real
# kernel, with and without the patch: dbench on ext4 in a Linux guest (Debian's 6.1) on a
# non-rotational scsi_debug disk that queues commands, under BFQ as the kernel has it (no
# queue merging on such a device, `bfqd->nonrot_with_queueing`), under BFQ built from the
# same kernel's source with that flag held false (queue merging as before the patch, and as
# on a disk without queueing: the position tree, `bfq_setup_cooperator`, the delayed stable
# merges), and under mq-deadline; the journal thread (jbd2) at a higher weight (be/0, the
# mail's "journaling daemon enjoying a higher weight") and at the clients' own (be/4).
#
# Both BFQ modules are built here from Debian's linux-source for the guest's kernel, with
# its linux-headers (apt-get), the same way, so they differ only in that flag; the patch
# below is the whole difference (it refuses to run if the source's two assignments of the
# flag are not where it expects them).
#
#   bash scripts/guest-seed004.sh [--clients=6] [--runtime=20] [--rounds=2] [--prios=0,4]
#        [--delay-us=100] [--tags=32] [--vcpus=2] [--merges] [--hw-tag] [--json]
# --delay-us is scsi_debug's response time (ndelay): every command completes that long after
#   it was queued, however many are queued (a RAM disk behind a timer, not a flash chip).
# --tags is the disk's queue depth (scsi_debug's max_queue): above BFQ's threshold of 3
#   requests in the driver (BFQ_HW_QUEUE_THRESHOLD), so BFQ sees a device with queueing.
# --merges counts the queue merges ("merging with queue") and splits BFQ logs in each BFQ
#   run (the `blk` tracer, notify messages only, read from trace_pipe); tracing costs time,
#   so measure throughput without it.
# --hw-tag reads, at every dispatch of each BFQ run, whether BFQ has seen the disk queue
#   commands (`bfqd->hw_tag`: -1 undecided, 0 no, 1 yes, from `bfq_update_hw_tag`) and the
#   flag the patch is about (`bfqd->nonrot_with_queueing`), with a kprobe on
#   `bfq_dispatch_request` whose field offsets gdb reads from the module built here; it
#   reports the last values and the share of dispatches made with the flag set (for the
#   module with merging kept, always 0). The patch can only matter where that share is high.
#
# What differs from the mail: the kernel is 6.1, years after the mail's (which it does not
# name), whose BFQ also merges queues created in a burst even on such a device
# (`bfq_do_or_sched_stable_merge`, "block, bfq: merge bursts of newly-created queues"; the
# log shows these merges in the stock module too); the disk is scsi_debug under a guest under QEMU (TCG on this machine, whose
# emulated CPUs are far slower than the mail's), not a PLEXTOR SSD.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/guest.sh

clients=6 runtime=20 rounds=2 prios=0,4 delay_us=100 tags=32 vcpus=2 merges=0 hw_tag=0 json=0
for a in "$@"; do
    case "$a" in
    --clients=*) clients=${a#*=} ;;
    --runtime=*) runtime=${a#*=} ;;
    --rounds=*) rounds=${a#*=} ;;
    --prios=*) prios=${a#*=} ;;
    --delay-us=*) delay_us=${a#*=} ;;
    --tags=*) tags=${a#*=} ;;
    --vcpus=*) vcpus=${a#*=} ;;
    --merges) merges=1 ;;
    --hw-tag) hw_tag=1 ;;
    --json) json=1 ;;
    *) echo "guest-seed004.sh: unknown argument '$a'" >&2; exit 2 ;;
    esac
done
for v in clients runtime rounds delay_us tags vcpus; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "guest-seed004.sh: --${v//_/-}=${!v}: expected a positive number" >&2; exit 2; }
done
[[ $prios =~ ^[0-7](,[0-7])*$ ]] ||
    { echo "guest-seed004.sh: --prios=$prios: expected best-effort levels 0-7, e.g. 0,4" >&2; exit 2; }

tools="dbench:dbench mkfs.ext4:e2fsprogs make:make gcc:gcc perl:perl"
[ $hw_tag = 1 ] && tools="$tools gdb:gdb"
guest_host_tools $tools || exit 1
base=${MQBLK_GUEST_DIR:-$PWD/target/guest}
export GUEST_DIR=$base/seed004-6.1 GUEST_KERNEL_INDEX=""
export GUEST_EXTRA_MODULES="scsi_debug sd_mod"
export GUEST_EXTRA_FILES="$(command -v dbench) /usr/share/dbench/client.txt $(command -v mkfs.ext4)"
guest_prepare || exit 1
kver=$(basename "$GUEST_KERNEL")
kver=${kver#vmlinuz-}

# The two BFQ modules for kernel $kver, kept in $GUEST_DIR/bfq/{stock,merging}/bfq.ko.
build_bfq() {
    local out=$GUEST_DIR/bfq v src deb series d
    # Kept while both are built for this kernel (a newer guest kernel needs them again).
    local modinfo
    modinfo=$(command -v modinfo || echo /sbin/modinfo)
    if [ -s "$out/stock/bfq.ko" ] && [ -s "$out/merging/bfq.ko" ] &&
        "$modinfo" -F vermagic "$out/stock/bfq.ko" | grep -q "^$kver " &&
        "$modinfo" -F vermagic "$out/merging/bfq.ko" | grep -q "^$kver "; then
        return 0
    fi
    guest_log "building BFQ for $kver (linux-headers-$kver, linux-source)"
    if [ ! -d "/usr/src/linux-headers-$kver" ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "linux-headers-$kver" >/dev/null ||
            { guest_log "could not install linux-headers-$kver"; return 1; }
    fi
    v=$(dpkg-query -W -f '${Version}' "linux-headers-$kver") || return 1
    series=$(echo "$kver" | grep -o '^[0-9]*\.[0-9]*')
    src=$(mktemp -d)
    (cd "$src" && apt-get download "linux-source-$series=$v" >/dev/null 2>&1) ||
        { guest_log "apt-get download linux-source-$series=$v failed"; rm -rf "$src"; return 1; }
    deb=$(ls "$src"/linux-source-*.deb)
    dpkg-deb --fsys-tarfile "$deb" | tar -xO "./usr/src/linux-source-$series.tar.xz" |
        tar -xJ -C "$src" "linux-source-$series/block" ||
        { guest_log "could not unpack block/ from $deb"; rm -rf "$src"; return 1; }
    for d in stock merging; do
        rm -rf "$out/$d"
        mkdir -p "$out/$d"
        cp "$src/linux-source-$series"/block/*.h "$src/linux-source-$series"/block/bfq-*.c "$out/$d/"
        printf 'obj-m := bfq.o\nbfq-y := bfq-iosched.o bfq-wf2q.o bfq-cgroup.o\n' >"$out/$d/Kbuild"
    done
    # The whole patch: both places that set the flag set it false.
    perl -0pi -e 's/(bfqd->nonrot_with_queueing =)\s*blk_queue_nonrot\(bfqd->queue\)( && bfqd->hw_tag)?;/$1 false;/g' \
        "$out/merging/bfq-iosched.c"
    local left set_false
    left=$(grep -c 'nonrot_with_queueing =.*blk_queue_nonrot\|nonrot_with_queueing =$' "$out/merging/bfq-iosched.c")
    set_false=$(grep -c 'nonrot_with_queueing = false;' "$out/merging/bfq-iosched.c")
    if [ "$left" != 0 ] || [ "$set_false" != 2 ]; then
        guest_log "bfq-iosched.c of $v: expected two assignments of nonrot_with_queueing, patched $set_false, left $left"
        rm -rf "$src" "$out"
        return 1
    fi
    for d in stock merging; do
        make -C "/usr/src/linux-headers-$kver" M="$out/$d" modules >"$out/$d/build.log" 2>&1 ||
            { tail -20 "$out/$d/build.log" >&2; guest_log "building the $d BFQ failed"; rm -rf "$src"; return 1; }
    done
    rm -rf "$src"
}
build_bfq || exit 1

# --hw-tag: the kprobe's fetch of a bfq_data field at offset $1 from the hctx in %di
# (hctx->queue->elevator->elevator_data), offsets from the stock module's debug info.
probe_args=""
if [ $hw_tag = 1 ]; then
    offsetof() {
        gdb -batch -ex "print/x (unsigned long) &((struct $1 *) 0)->$2" "$GUEST_DIR/bfq/stock/bfq.ko" 2>/dev/null |
            awk '/^\$1 = 0x/ {print $3}'
    }
    o_queue=$(offsetof blk_mq_hw_ctx queue) o_elv=$(offsetof request_queue elevator)
    o_data=$(offsetof elevator_queue elevator_data) o_hw=$(offsetof bfq_data hw_tag)
    o_nrq=$(offsetof bfq_data nonrot_with_queueing)
    for o in o_queue o_elv o_data o_hw o_nrq; do
        [[ ${!o} =~ ^0x[0-9a-f]+$ ]] || { guest_log "--hw-tag: gdb found no offset for $o in bfq.ko"; exit 1; }
    done
    bfqd="+$o_data(+$o_elv(+$o_queue(%di)))"
    probe_args="hw=+$o_hw($bfqd):s32 nrq=+$o_nrq($bfqd):u8"
fi
guest_accel
n_runs=$((rounds * 3 * $(echo "${prios//,/ }" | wc -w)))
export GUEST_CPUS=$vcpus GUEST_MEM=2G GUEST_TIMEOUT=$((600 + 3 * (runtime + 40) * n_runs))
export GUEST_BOOT_FILES="$GUEST_DIR/bfq/stock/bfq.ko $GUEST_DIR/bfq/merging/bfq.ko"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
    cat <<EOF
mkdir -p /mnt /sys/kernel/tracing
for m in \$(cat /lib/modules/extra.order); do
    [ \$m = scsi_debug ] || insmod /lib/modules/\$m.ko || echo "@@ERROR insmod \$m"
done
insmod /lib/modules/scsi_debug.ko dev_size_mb=1024 max_queue=$tags ndelay=$((delay_us * 1000)) || echo "@@ERROR insmod scsi_debug"
i=0
while [ ! -b /dev/sda ] && [ \$i -lt 100 ]; do sleep 0.1; i=\$((i + 1)); done
echo 0 > /sys/block/sda/queue/rotational
T=/sys/kernel/tracing
[ $merges = 1 ] || [ $hw_tag = 1 ] && { mount -t tracefs none \$T || echo "@@ERROR tracefs"; }
# BFQ built as the kernel has it (stock) or with merging kept (merging); a scheduler
# switched through none, so every run starts a fresh instance.
use() {
    echo none > /sys/block/sda/queue/scheduler
    if [ "\$1" != mq-deadline ]; then
        rmmod bfq 2>/dev/null
        insmod $GUEST_DIR/bfq/\$1/bfq.ko || echo "@@ERROR insmod the \$1 bfq"
        module=\$(md5sum $GUEST_DIR/bfq/\$1/bfq.ko | cut -c1-12)
        echo bfq > /sys/block/sda/queue/scheduler || echo "@@ERROR scheduler bfq"
    else
        module=built-in
        echo mq-deadline > /sys/block/sda/queue/scheduler || echo "@@ERROR scheduler mq-deadline"
    fi
}
EOF
    for r in $(seq "$rounds"); do
        for p in ${prios//,/ }; do
            for c in stock merging mq-deadline; do
                cat <<EOF
use $c
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 /dev/sda || echo "@@ERROR mkfs.ext4"
mount -t ext4 /dev/sda /mnt || echo "@@ERROR mount"
jbd=\$(pidof jbd2/sda-8)
ionice -c 2 -n $p -p \$jbd || echo "@@ERROR ionice jbd2"
traced=0
if [ $merges = 1 ] || [ $hw_tag = 1 ] && [ $c != mq-deadline ]; then
    traced=1
    echo 0 > \$T/tracing_on; echo > \$T/trace
    if [ $merges = 1 ]; then
        echo blk > \$T/current_tracer
        echo notify > /sys/block/sda/trace/act_mask
        echo 1 > /sys/block/sda/trace/enable
    fi
    if [ $hw_tag = 1 ]; then
        echo 'p:bfqhw bfq:bfq_dispatch_request $probe_args' > \$T/kprobe_events || echo "@@ERROR kprobe on bfq_dispatch_request"
        echo 1 > \$T/events/kprobes/bfqhw/enable || echo "@@ERROR kprobe enable"
    fi
    awk -v merges=$merges -v hw=$hw_tag '
        /merging with queue/ {m++} /splitting queue/ {s++}
        /bfqhw:/ { for (i = 1; i <= NF; i++) { split(\$i, kv, "="); if (kv[1] == "hw") h = kv[2]; if (kv[1] == "nrq") f = kv[2] }
                   n++; if (f == 1) nf++ }
        END { if (merges) print "merges", m + 0, "splits", s + 0
              if (hw) print "hw_tag", (n ? h : "none"), "nonrot_with_queueing", (n ? f : "none"), "dispatches", n + 0, "with_flag", nf + 0 }' < \$T/trace_pipe > /tmp/merges &
    reader=\$!
    echo 1 > \$T/tracing_on
fi
sync
echo 3 > /proc/sys/vm/drop_caches
dbench -c /usr/share/dbench/client.txt -D /mnt -t $runtime $clients >/tmp/out 2>&1
if [ \$traced = 1 ]; then
    echo 0 > \$T/tracing_on; sleep 1
    [ $merges = 1 ] && echo 0 > /sys/block/sda/trace/enable
    if [ $hw_tag = 1 ]; then
        echo 0 > \$T/events/kprobes/bfqhw/enable
        echo '-:bfqhw' >> \$T/kprobe_events
    fi
    kill \$reader; wait \$reader 2>/dev/null
fi
echo "@@BEGIN $r+$c+$p"
echo "jbd2 \$(ionice -p \$jbd | tr ' ' _) rotational \$(cat /sys/block/sda/queue/rotational) module \$module"
[ \$traced = 1 ] && cat /tmp/merges
tr '\r' '\n' </tmp/out
echo "@@END $r+$c+$p"
umount /mnt
EOF
            done
        done
    done
} >"$work/job.sh"

guest_log "Linux $kver: $n_runs dbench runs of ${runtime} s"
guest_boot "$work/job.sh" "$work/console" || { tail -20 "$work/console" >&2; exit 1; }
if grep -q '^@@ERROR' "$work/console"; then
    grep '^@@ERROR' "$work/console" >&2
    exit 1
fi
for n in $(tr -d '\r' <"$work/console" | awk '/^@@BEGIN / {print $2}'); do
    guest_result "$work/console" "$n" >"$work/out-$n"
done

python3 - "$work" "$json" "$clients" "$runtime" "$rounds" "$prios" "$delay_us" "$tags" "$vcpus" "$kver" "$GUEST_ACCEL" "$merges" "$hw_tag" <<'PY'
import glob, json, os, re, statistics, sys
work, as_json, clients, runtime, rounds, prios, delay_us, tags, vcpus, kver, accel, merges, hw_tag = sys.argv[1:]
prios = [int(p) for p in prios.split(",")]
CASES = {"stock": "BFQ (the kernel's: no merging here)", "merging": "BFQ with queue merging kept",
         "mq-deadline": "mq-deadline"}
runs = {}
for path in glob.glob(os.path.join(work, "out-*")):
    name = path.rsplit("out-", 1)[1]
    r, case, p = name.split("+")
    text = open(path).read()
    tp = re.search(r"Throughput ([0-9.]+) MB/sec", text)
    if not tp or float(tp.group(1)) <= 0:
        sys.exit(f"guest-seed004.sh: no dbench throughput for {case}, jbd2 be/{p}, round {r}:\n{text[-600:]}")
    cls = re.search(r"jbd2 (\S+) rotational (\d)", text)
    if not cls or cls.group(1) != f"best-effort:_prio_{p}" or cls.group(2) != "0":
        sys.exit(f"guest-seed004.sh: {case}, round {r}: jbd2 or the disk not as set: {cls.group(0) if cls else text[:200]}")
    m = re.search(r"merges (\d+) splits (\d+)", text)
    hw = re.search(r"hw_tag (\S+) nonrot_with_queueing (\S+) dispatches (\d+) with_flag (\d+)", text)
    if hw_tag == "1" and case != "mq-deadline" and (not hw or hw.group(3) == "0"):
        sys.exit(f"guest-seed004.sh: --hw-tag: the kprobe saw no dispatch of {case}, round {r}: {hw.group(0) if hw else 'no report'}")
    mod = re.search(r"module (\S+)", text)
    # dbench's table of operations: its `fsync`s are "Flush", counted over the run.
    fl = re.search(r"^\s*Flush\s+(\d+)\s", text, re.M)
    runs.setdefault((case, int(p)), []).append({
        "module": mod.group(1) if mod else None,
        "mb_per_s": float(tp.group(1)),
        "fsyncs_per_s": int(fl.group(1)) / int(runtime) if fl else None,
        "merges": int(m.group(1)) if m else None,
        "splits": int(m.group(2)) if m else None,
        # At the run's last dispatch, and the share of dispatches made with the flag set.
        "hw_tag": int(hw.group(1)) if hw else None,
        "nonrot_with_queueing": int(hw.group(2)) if hw else None,
        "flag_share": int(hw.group(4)) / int(hw.group(3)) if hw else None,
    })
rows = []
for p in prios:
    for case in CASES:
        rs = runs.get((case, p), [])
        if len(rs) != int(rounds):
            sys.exit(f"guest-seed004.sh: {len(rs)} runs of {case} at be/{p}, expected {rounds}")
        mb = [x["mb_per_s"] for x in rs]
        fs = [x["fsyncs_per_s"] for x in rs if x["fsyncs_per_s"] is not None]
        mg = [x["merges"] for x in rs if x["merges"] is not None]
        sp = [x["splits"] for x in rs if x["splits"] is not None]
        fl = [x["flag_share"] for x in rs if x["flag_share"] is not None]
        rows.append({"case": case, "jbd2_prio": p, "module": rs[0]["module"],
                     "mb_per_s": statistics.median(mb), "runs": mb,
                     "fsyncs_per_s": statistics.median(fs) if fs else None,
                     "merges": statistics.median(mg) if mg else None, "merge_runs": mg,
                     "splits": statistics.median(sp) if sp else None,
                     "hw_tag": [x["hw_tag"] for x in rs] if fl else None,
                     "nonrot_with_queueing": [x["nonrot_with_queueing"] for x in rs] if fl else None,
                     "flag_share": round(statistics.median(fl), 3) if fl else None})
get = {(r["case"], r["jbd2_prio"]): r for r in rows}
verdict = {}
for p in prios:
    st, mg, dl = (get[(c, p)]["mb_per_s"] for c in CASES)
    verdict[f"be{p}"] = {"without_over_with_merging": round(st / mg, 3),
                         "without_merging_over_mq_deadline": round(st / dl, 3),
                         "with_merging_over_mq_deadline": round(mg / dl, 3)}
setup = {"kernel": kver, "clients": int(clients), "runtime_s": int(runtime), "rounds": int(rounds),
         "device": "scsi_debug, non-rotational", "delay_us": int(delay_us), "tags": int(tags),
         "vcpus": int(vcpus), "accel": accel, "fs": "ext4", "merges_counted": merges == "1",
         "hw_tag_read": hw_tag == "1"}
if as_json == "1":
    print(json.dumps({"setup": setup, "rows": rows, "verdict": verdict}, indent=1))
    sys.exit(0)
print(f"dbench, {clients} clients, {runtime} s, on ext4 over scsi_debug ({delay_us} us a command, "
      f"{tags} tags, non-rotational), Linux {kver} in a guest of {vcpus} vCPUs under {accel}; "
      f"medians of {rounds} round{'' if rounds == '1' else 's'}")
print(f"{'scheduler':>38} {'jbd2':>5} | {'MB/s':>7} {'fsyncs/s':>8}  runs"
      f"{'  merges splits' if merges == '1' else ''}{'  hw_tag flag share' if hw_tag == '1' else ''}")
for r in rows:
    extra = f"  {r['merges']:>6.0f} {r['splits']:>6.0f}" if r["merges"] is not None else ""
    if r["flag_share"] is not None:
        extra += f"  {','.join(map(str, r['hw_tag'])):>6} {','.join(map(str, r['nonrot_with_queueing'])):>4} {r['flag_share']:>5.2f}"
    runs_s = " ".join(f"{x:.1f}" for x in r["runs"])
    fsy = f"{r['fsyncs_per_s']:>8.1f}" if r["fsyncs_per_s"] is not None else f"{'-':>8}"
    print(f"{CASES[r['case']]:>38} be/{r['jbd2_prio']} | {r['mb_per_s']:>7.2f} {fsy}  {runs_s}{extra}")
for p in prios:
    v = verdict[f"be{p}"]
    print(f"jbd2 be/{p}: without merging over with it {v['without_over_with_merging']} (the mail: 200 / 150 = 1.33); "
          f"over mq-deadline {v['without_merging_over_mq_deadline']} (the mail: about 1), "
          f"with merging {v['with_merging_over_mq_deadline']}")
PY
