"""``python -m mqblk sweep GRID.toml`` (what ``mqblk sweep`` runs): a sweep from a file.

A grid file in TOML::

    base = "--rw=randread --bs=4k --runtime=1 --time_based --name=r"   # or job = "x.fio"
    seeds = [1, 2, 3]
    [options]              # fio options for every point (optional)
    device = "hdd"
    [grid]                 # option name -> the values to sweep
    ioscheduler = ["none", "mq-deadline", "kyber", "bfq"]
    iodepth = [1, 8, 32]

writes one row per point, seed, job and direction to ``--output`` (.csv, .json or
.parquet; default: a table on stdout), with a progress line on stderr.
"""

from __future__ import annotations

import argparse
import sys

from . import MqblkError, sweep


def _load(path: str) -> dict:
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            g = tomllib.load(f)
    except OSError as e:
        raise MqblkError(f"{path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise MqblkError(f"{path}: {e}") from None
    known = {"base", "job", "seeds", "options", "grid"}
    unknown = sorted(set(g) - known)
    if unknown:
        raise MqblkError(f"{path}: unknown key '{unknown[0]}' (known: {', '.join(sorted(known))})")
    grid = g.get("grid", {})
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise MqblkError(f"{path}: grid.{k}: expected a non-empty list of values")
    seeds = g.get("seeds", [1])
    if not isinstance(seeds, list) or not all(isinstance(s, int) for s in seeds):
        raise MqblkError(f"{path}: seeds: expected a list of integers")
    return g


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="mqblk sweep", description="Runs a grid of simulations.")
    p.add_argument("grid", help="the grid file (TOML)")
    p.add_argument("--backend", choices=["local", "ray"], default="local")
    p.add_argument("--address", help="a running Ray cluster (default: start a local one)")
    p.add_argument("--workers", type=int, help="parallel simulations (default: the CPUs)")
    p.add_argument("--output", help="results file: .csv, .json or .parquet")
    a = p.parse_args(argv)
    try:
        g = _load(a.grid)
        if a.output and not a.output.endswith((".csv", ".json", ".parquet")):
            raise MqblkError(f"--output={a.output}: expected a .csv, .json or .parquet file")
        df = sweep(g.get("job") or g.get("base"), grid=g.get("grid", {}), seeds=g.get("seeds", [1]),
                   backend=a.backend, address=a.address, workers=a.workers,
                   progress=True, **g.get("options", {}))
    except MqblkError as e:
        print(f"mqblk sweep: {e}", file=sys.stderr)
        return 2
    if not a.output:
        cols = [c for c in df.columns if c.startswith("param.")] + ["seed", "job", "direction", "iops"]
        print(df[cols].to_string(index=False))
    elif a.output.endswith(".csv"):
        df.to_csv(a.output, index=False)
    elif a.output.endswith(".json"):
        df.to_json(a.output, orient="records", indent=1)
    else:
        try:
            df.to_parquet(a.output, index=False)
        except ImportError as e:
            print(f"mqblk sweep: --output={a.output}: {e}", file=sys.stderr)
            return 2
    if a.output:
        print(f"mqblk sweep: {len(df)} rows written to {a.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "sweep":
        sys.exit(main(sys.argv[2:]))
    print("usage: python -m mqblk sweep GRID.toml [--backend=local|ray] [--output=FILE]",
          file=sys.stderr)
    sys.exit(2)
