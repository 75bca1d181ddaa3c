# Sourced by the comparisons with fio (run from the repository's root): installs fio from
# Debian's packages if it is missing, and sets `mqblk` to the binary to measure: $MQBLK if
# given, else this tree's release build, built now.
command -v fio >/dev/null || { apt-get update -q && apt-get install -y -q fio; }
if [ -z "${MQBLK:-}" ]; then
    cargo build --release -p mqblk >/dev/null
fi
mqblk=${MQBLK:-target/release/mqblk}
# One run of a command printing fio's JSON: "IOPS USER_US SYS_US" (bench/measure.py).
measure() { python3 bench/measure.py "$@"; }
