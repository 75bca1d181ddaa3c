#!/usr/bin/env bash
# Builds the Python package into a virtual environment (target/pyenv) and runs its tests:
# pandas, matplotlib and Ray from PyPI the first time; each time, the package is installed
# with pip as docs/python.md installs it (maturin is the build backend).
# Where python3 is missing, CI fails and elsewhere the tests are skipped with a line saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v python3 >/dev/null 2>&1 || ! python3 -m venv --help >/dev/null 2>&1; then
    if [ -n "${CI:-}" ]; then
        echo "python/test.sh: python3 with venv is missing in CI" >&2
        exit 1
    fi
    echo "SKIP: python tests: python3 with venv is missing"
    exit 0
fi
env=${MQBLK_PYENV:-target/pyenv}
if [ ! -x "$env/bin/maturin" ] || ! "$env/bin/python" -c 'import pandas, pyarrow, pytest, matplotlib, ray' 2>/dev/null; then
    python3 -m venv "$env"
    "$env/bin/pip" install -q --upgrade pip >/dev/null
    "$env/bin/pip" install -q maturin pandas pyarrow pytest matplotlib "ray>=2.9"
fi
# With the example MQFQ scheduler built in, so the tests run an out-of-tree Rust scheduler by
# name from Python (docs/python.md).
PATH="$PWD/$env/bin:$PATH" MATURIN_PEP517_ARGS="--features mqfq" \
    "$env/bin/pip" install -q --no-deps --no-build-isolation --force-reinstall ./python
MQBLK=${MQBLK:-target/release/mqblk} "$env/bin/python" -m pytest -q python/tests "$@"
