#!/usr/bin/env bash
# The null-device targets of "many submitters": one job against fio's null engine, and how
# two jobs scale over one, on a hardware queue each and sharing one. 4 KiB random reads at
# QD32, scheduler none, the null device completing inline (irqmode none). Each round runs
# fio's null engine, then mqblk with 1 job, 2 jobs on 2 hardware queues and 2 jobs on 1, back
# to back, so the ratios of a round come from the same minute of this shared machine.
# Prints every round (IOPS, CPU per I/O: bench/measure.py) and then, per ratio, its median
# and its smallest value ("in every run").
#
#   bash bench/null-scaling.sh [RUNTIME_S] [REPS]
#
# fio is installed from Debian's packages if missing. MQBLK=path runs that mqblk binary
# instead of building one. BASE=path also runs one job of that (earlier) mqblk binary right
# after ours in every round and reports ours over it: whether one job regressed, measured
# against a build instead of against fio's null engine, whose own cost here is mostly its
# clock (ARCHITECTURE.md, concurrency).
set -euo pipefail
cd "$(dirname "$0")/.."
runtime=${1:-2}
reps=${2:-3}
base=${BASE:-}
[ -z "$base" ] || [ -x "$base" ] || { echo "null-scaling.sh: BASE=$base is not an executable" >&2; exit 2; }
# shellcheck source=bench/lib.sh
source bench/lib.sh
job="--name=r --rw=randread --bs=4k --iodepth=32 --runtime=$runtime --time_based --output-format=json"

fio_null() { measure fio $job --ioengine=null --size=1g; }
ours() { # $1 = jobs, $2 = hardware queues, $3 = the binary (default: ours)
    measure "${3:-$mqblk}" bench $job --ioscheduler=none --numjobs="$1" --nr_hw_queues="$2"
}

base_one() { # one job of the BASE build, or "0 0 0" without one
    if [ -n "$base" ]; then
        ours 1 1 "$base"
    else
        echo "0 0 0"
    fi
}

one_vs_fio=""; two_on_two=""; two_on_one=""; one_vs_base=""
for r in $(seq "$reps"); do
    # Assigned first, so that a failed run stops the script (set -e).
    fo=$(fio_null); o1=$(ours 1 1); b1=$(base_one); o22=$(ours 2 2); o21=$(ours 2 1)
    # One line for the round; its ratios come back on the last line.
    out=$(python3 - "$r" "$fo" "$o1" "$o22" "$o21" "$b1" <<'PY'
import sys
r = sys.argv[1]
(f, fu, fs), (a, au, as_), (b, _, _), (c, _, _), (d, du, ds) = (
    map(float, x.split()) for x in sys.argv[2:])
x, y, z = a / f, b / a, c / a
w = a / d if d else 0
line = (f"round {r}  fio null {f / 1e6:5.2f}M IOPS ({(fu + fs) * 1e3:3.0f} ns/IO)  "
        f"1 job {a / 1e6:5.2f}M ({(au + as_) * 1e3:3.0f} ns/IO, {x:.2f}x fio)  ")
if d:
    line += f"base 1 job {d / 1e6:5.2f}M ({(du + ds) * 1e3:3.0f} ns/IO; ours {w:.2f}x)  "
print(line + f"2 jobs 2 hctx {b / 1e6:5.2f}M ({y:.2f}x)  2 jobs 1 hctx {c / 1e6:5.2f}M ({z:.2f}x)")
print(f"{x:.2f} {y:.2f} {z:.2f} {w:.2f}")
PY
)
    echo "${out%$'\n'*}"
    read -r x y z w <<<"${out##*$'\n'}"
    one_vs_fio="$one_vs_fio $x"; two_on_two="$two_on_two $y"; two_on_one="$two_on_one $z"
    one_vs_base="$one_vs_base $w"
done
echo
summary() { # $1 = label, rest = ratios
    local label=$1; shift
    python3 -c "import statistics,sys; v=list(map(float, sys.argv[2:])); print(f'{sys.argv[1]:<34} median {statistics.median(v):.2f}  smallest {min(v):.2f}')" "$label" "$@"
}
# shellcheck disable=SC2086 # each ratio is one word
summary "1 job / fio's null engine" $one_vs_fio
# shellcheck disable=SC2086
summary "2 jobs on 2 hctx / 1 job" $two_on_two
# shellcheck disable=SC2086
summary "2 jobs on 1 hctx / 1 job" $two_on_one
if [ -n "$base" ]; then
    # shellcheck disable=SC2086
    summary "1 job / 1 job of BASE" $one_vs_base
fi
