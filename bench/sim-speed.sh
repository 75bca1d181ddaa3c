#!/usr/bin/env bash
# The simulator's speed target: simulated requests per host second on the command the
# simulator's guide gives (4 KiB random reads at QD32 on the default null model), per
# scheduler. The machines here change speed from one hour to the next, so a figure alone says
# little: with BASE=path every round also runs that (earlier) mqblk build right after ours and
# reports ours over it, and INSTRUCTIONS=1 also counts the instructions per simulated request
# under valgrind (the difference of a short and a longer run over the requests between them,
# so start-up cancels), which the machine's mood does not move.
#
#   bash bench/sim-speed.sh [RUNTIME] [REPS]      (RUNTIME in virtual time, as fio writes it: 3s, 500ms)
#
# MQBLK=path measures that mqblk binary instead of building one; SCHEDULERS="none kyber"
# picks the schedulers (default: none mq-deadline); INSTR_RUNTIMES="50ms 150ms" sets the two
# virtual run times of the count.
set -euo pipefail
cd "$(dirname "$0")/.."
runtime=${1:-3s}
reps=${2:-3}
base=${BASE:-}
scheds=${SCHEDULERS:-none mq-deadline}
read -r short long <<<"${INSTR_RUNTIMES:-50ms 150ms}"
[ -z "$base" ] || [ -x "$base" ] || { echo "sim-speed.sh: BASE=$base is not an executable" >&2; exit 2; }
if [ "${INSTRUCTIONS:-0}" = 1 ] && ! command -v valgrind >/dev/null; then
    echo "sim-speed.sh: INSTRUCTIONS=1 needs valgrind (apt-get install valgrind)" >&2
    exit 2
fi
# shellcheck source=bench/mqblk.sh
source bench/mqblk.sh

job() { # $1 = scheduler, $2 = virtual run time
    echo "sim --ioscheduler=$1 --rw=randread --bs=4k --iodepth=32 --runtime=$2 --time_based --name=x"
}

# M simulated requests per host second of one run ("sim speed: ... = X M ...", on stderr).
speed() { # $1 = binary, $2 = scheduler
    local line
    # shellcheck disable=SC2046 # the job is words
    line=$("$1" $(job "$2" "$runtime") 2>&1 >/dev/null | grep '^sim speed:') ||
        { echo "sim-speed.sh: $1 printed no speed line for $2" >&2; exit 1; }
    sed -n 's/.*= \([0-9.]*\) M simulated.*/\1/p' <<<"$line"
}

# Instructions per simulated request: "REQUESTS INSTRUCTIONS" of a run under valgrind.
counted() { # $1 = binary, $2 = scheduler, $3 = virtual run time
    # shellcheck disable=SC2046
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" $(job "$2" "$3") 2>&1 >/dev/null |
        awk '/^sim speed:/ {r = $3} /I +refs:/ {gsub(",", "", $NF); i = $NF} END {print r, i}'
}
per_request() { # $1 = binary, $2 = scheduler
    local r1 i1 r2 i2
    read -r r1 i1 <<<"$(counted "$1" "$2" "$short")"
    read -r r2 i2 <<<"$(counted "$1" "$2" "$long")"
    if [ -z "$i1" ] || [ -z "$i2" ] || [ "$r2" -le "$r1" ]; then
        echo "sim-speed.sh: valgrind counted nothing for $1 ($2)" >&2
        exit 1
    fi
    echo $(((i2 - i1) / (r2 - r1)))
}

declare -A ours_all base_all
for r in $(seq "$reps"); do
    line="round $r"
    for s in $scheds; do
        o=$(speed "$mqblk" "$s")
        ours_all[$s]="${ours_all[$s]:-} $o"
        line="$line  $s ${o}M"
        if [ -n "$base" ]; then
            b=$(speed "$base" "$s")
            base_all[$s]="${base_all[$s]:-} $b"
            line="$line (base ${b}M, ours $(python3 -c "print(f'{$o / $b:.2f}')")x)"
        fi
    done
    echo "$line"
done
echo
for s in $scheds; do
    # shellcheck disable=SC2086 # each figure is one word
    python3 - "$s" "${ours_all[$s]}" "${base_all[$s]:-}" <<'PY'
import statistics, sys
name, ours, base = sys.argv[1], list(map(float, sys.argv[2].split())), sys.argv[3].split()
line = f"{name:<12} median {statistics.median(ours):.2f} M simulated requests per host second"
if base:
    ratios = [o / float(b) for o, b in zip(ours, base)]
    line += (f"; over BASE median {statistics.median(ratios):.2f}x, "
             f"smallest {min(ratios):.2f}x")
print(line)
PY
done
if [ "${INSTRUCTIONS:-0}" = 1 ]; then
    for s in $scheds; do
        o=$(per_request "$mqblk" "$s")
        line="$s: $o instructions per simulated request"
        if [ -n "$base" ]; then
            b=$(per_request "$base" "$s")
            line="$line (BASE $b, ours $(python3 -c "print(f'{$o / $b:.3f}')")x)"
        fi
        echo "$line"
    done
fi
