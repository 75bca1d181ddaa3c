"""The simulator's speed with schedulers written in Python (docs/results/python.md).

    python examples/python/scheduler_speed.py

Simulates 1 s of randread 4k at QD32 on the null device three times under mq-deadline, a
FIFO written in Python and the tutorial's strict-priority scheduler, and prints the
simulated requests per host second of each run.
"""

import collections
import os
import sys
import time

import mqblk

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prio_aging import PrioAging  # noqa: E402


class Fifo(mqblk.Scheduler):
    def init_sched(self):
        self.q = collections.deque()

    def insert_requests(self, rqs, at_head):
        self.q.extend(rqs)

    def dispatch_request(self, hctx):
        return self.q.popleft() if self.q else None

    def has_work(self, hctx):
        return bool(self.q)


JOB = "--rw=randread --bs=4k --iodepth=32 --runtime=1 --time_based --name=x"

if __name__ == "__main__":
    for rnd in range(3):
        for s in ["mq-deadline", Fifo, PrioAging]:
            t = time.perf_counter()
            r = mqblk.sim(JOB, scheduler=s)
            el = time.perf_counter() - t
            n = r.json["mqblk_sim"]["requests"]
            name = s if isinstance(s, str) else s.__name__
            print(f"round {rnd}: {name:<12} {n} requests in {el:.2f} s = {n / el / 1e3:.0f}K per host second")
