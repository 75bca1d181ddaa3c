# Sourced by the benchmark scripts (run from the repository's root): sets `mqblk` to the
# binary to measure: $MQBLK if given, else this tree's release build, built now.
if [ -z "${MQBLK:-}" ]; then
    cargo build --release -p mqblk >/dev/null
fi
mqblk=${MQBLK:-target/release/mqblk}
