"""A scheduler in Python: strict priority with aging (docs/python.md, "A scheduler in Python").

Requests are served by I/O priority, class first (rt, then be, then idle), then level
(0 first), and in arrival order within one; a request that has waited longer than its
tunable ``aging_ms`` goes before all of them, so that low priorities are delayed, never
starved.

    python examples/python/prio_aging.py

compares it with none, mq-deadline and BFQ on a simulated disk: two random readers, one
at best-effort level 0 and one at level 7, eight requests in flight each, three seeds.
"""

import collections

import mqblk

CLASS_RANK = {"rt": 0, "be": 1, "none": 1, "idle": 2}


class PrioAging(mqblk.Scheduler):
    """Strict priority by I/O class and level; a request older than aging_ms goes first."""

    name = "prio-aging"
    tunables = {
        "aging_ms": mqblk.Tunable(
            100, unit="ms", min=1, max=60_000, help="a request this old goes first"
        ),
    }

    def init_sched(self):
        self.by_rank = collections.defaultdict(collections.deque)
        self.fifo = collections.deque()  # every queued request, oldest first
        self.queued = {}  # id -> request, for what is still to dispatch
        self.aged = 0

    def insert_requests(self, rqs, at_head):
        for rq in rqs:
            q = self.by_rank[(CLASS_RANK[rq.ioprio_class], rq.ioprio_level)]
            if at_head:
                q.appendleft(rq)
            else:
                q.append(rq)
            self.fifo.append(rq)
            self.queued[rq.id] = rq

    def _first(self, q):
        # Requests dispatched through the other list are dropped here, lazily.
        while q and q[0].id not in self.queued:
            q.popleft()
        return q[0] if q else None

    def dispatch_request(self, hctx):
        oldest = self._first(self.fifo)
        age_ns = self.tunables["aging_ms"] * 1_000_000
        if oldest is not None and self.now_ns - oldest.alloc_ns > age_ns:
            self.aged += 1
            return self.queued.pop(oldest.id)
        for rank in sorted(self.by_rank):
            rq = self._first(self.by_rank[rank])
            if rq is not None:
                self.by_rank[rank].popleft()
                return self.queued.pop(rq.id)
        return None

    def has_work(self, hctx):
        return bool(self.queued)

    def stats(self):
        return {"aged": self.aged}


JOB = """
[global]
rw=randread
bs=4k
iodepth=8
runtime=2
time_based
size=1g
[high]
prio=0
offset=0
[low]
prio=7
offset=2g
"""


def compare(seeds=range(1, 4)):
    """IOPS of each job under each scheduler, the median over ``seeds``."""
    df = mqblk.sweep(
        JOB,
        grid={"scheduler": ["none", "mq-deadline", "bfq", PrioAging]},
        seeds=seeds,
        device="hdd",
    )
    return df.groupby(["param.scheduler", "job"])["iops"].median().unstack()


if __name__ == "__main__":
    table = compare()
    print(table.round(1).to_string())
