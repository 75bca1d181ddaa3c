# Sourced by the comparisons with fio (run from the repository's root): installs fio from
# Debian's packages if it is missing, and sets `mqblk` to the binary to measure
# (bench/mqblk.sh).
command -v fio >/dev/null || { apt-get update -q && apt-get install -y -q fio; }
# shellcheck source=bench/mqblk.sh
source bench/mqblk.sh
# One run of a command printing fio's JSON: "IOPS USER_US SYS_US" (bench/measure.py).
measure() { python3 bench/measure.py "$@"; }
