#!/usr/bin/env python3
"""Runs one benchmark that prints fio's JSON (`fio --output-format=json ...` or
`mqblk bench --output-format=json ...`) and prints one line: the IOPS of all its jobs
(reads and writes) and the CPU time the whole run spent per I/O, in microseconds, user and
system apart. The CPU time is the finished process tree's (getrusage of the children), so it
counts every thread, io_uring's io-wq workers included (they are threads of the process that
owns the ring), and fio's job processes; it is less noisy than IOPS on a shared machine and
says where a gap is.

    python3 bench/measure.py CMD [ARGS...]   ->   "IOPS USER_US SYS_US"
"""
import json
import resource
import subprocess
import sys


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: measure.py CMD [ARGS...]")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        sys.exit(f"measure.py: {sys.argv[1]} exited {run.returncode}: {run.stderr.strip()[-400:]}")
    try:
        jobs = json.loads(run.stdout)["jobs"]
    except (ValueError, KeyError) as e:
        sys.exit(f"measure.py: {sys.argv[1]} printed no fio JSON ({e}): {run.stdout[:200]!r}")
    dirs = ("read", "write")
    iops = sum(j[d]["iops"] for j in jobs for d in dirs)
    ios = sum(j[d]["total_ios"] for j in jobs for d in dirs)
    if ios == 0:
        sys.exit(f"measure.py: {sys.argv[1]} did no I/O")
    user = (after.ru_utime - before.ru_utime) / ios * 1e6
    system = (after.ru_stime - before.ru_stime) / ios * 1e6
    print(f"{iops:.0f} {user:.3f} {system:.3f}")


if __name__ == "__main__":
    main()
