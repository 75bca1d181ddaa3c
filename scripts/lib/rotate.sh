# Sourced by the kernel measurement scripts.
# rotated REP ITEM...: the items in the order repeat REP runs them, rotated by one place each
# repeat so that none always runs first (or always right after the same other one).
rotated() {
    local r=$1
    shift
    local n=$# i idx
    for ((i = 0; i < n; i++)); do
        idx=$(( (i + r - 1) % n + 1 ))
        printf '%s\n' "${!idx}"
    done
}
