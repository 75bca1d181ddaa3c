"""Schedulers written in Python: run by the simulator, compared on a sweep, their errors
raised as Python exceptions, their broken invariants found by the fuzzer."""

import collections
import importlib.util
from pathlib import Path

import pytest

import mqblk

REPO = Path(__file__).resolve().parents[2]
QUICK = "--rw=randread --bs=4k --iodepth=4 --runtime=20ms --time_based --name=x"


def tutorial():
    spec = importlib.util.spec_from_file_location(
        "prio_aging", REPO / "examples" / "python" / "prio_aging.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Fifo(mqblk.Scheduler):
    def init_sched(self):
        self.q = collections.deque()

    def insert_requests(self, rqs, at_head):
        if at_head:
            self.q.extendleft(reversed(rqs))
        else:
            self.q.extend(rqs)

    def dispatch_request(self, hctx):
        return self.q.popleft() if self.q else None

    def has_work(self, hctx):
        return bool(self.q)


def test_the_tutorials_scheduler_serves_the_high_priority_first_and_ages_the_low():
    m = tutorial()
    table = m.compare(seeds=[1])
    high, low = table.loc["prio-aging", "high"], table.loc["prio-aging", "low"]
    # none serves both alike; strict priority favours level 0, aging keeps level 7 going.
    assert table.loc["none", "high"] / table.loc["none", "low"] < 1.2
    assert high > 2 * low, table
    assert low > 0.1 * high, table
    r = mqblk.sim(m.JOB, device="hdd", scheduler=m.PrioAging)
    sched = r.json["mqblk_queue"]["sched"]
    assert sched["scheduler"] == "other" and sched["name"] == "prio-aging", sched
    assert dict(sched["figures"])["aged"] > 0, sched


def test_a_fifo_in_python_completes_every_request_it_is_given():
    r = mqblk.sim(QUICK, scheduler=Fifo)
    n = r.json["mqblk_sim"]["requests"]
    ref = mqblk.sim(QUICK, scheduler="none").json["mqblk_sim"]["requests"]
    assert n > 0.5 * ref, (n, ref)


def test_a_hook_that_raises_comes_back_as_the_exception_with_the_hook():
    class Raises(Fifo):
        calls = 0

        def dispatch_request(self, hctx):
            self.calls += 1
            if self.calls == 3:
                raise KeyError("third")
            return super().dispatch_request(hctx)

    with pytest.raises(mqblk.SchedulerError, match=r"raises\.dispatch_request\(hctx=0\): KeyError") as e:
        mqblk.sim(QUICK, scheduler=Raises)
    assert isinstance(e.value.__cause__, KeyError)

    class BadInsert(Fifo):
        def insert_requests(self, rqs, at_head):
            raise RuntimeError("no room")

    with pytest.raises(mqblk.SchedulerError, match=r"badinsert\.insert_requests\(requests \[\d+"):
        mqblk.sim(QUICK, scheduler=BadInsert)


def test_a_request_dispatched_twice_is_named():
    class Twice(Fifo):
        def dispatch_request(self, hctx):
            return self.q[0] if self.q else None

    with pytest.raises(mqblk.SchedulerError, match="dispatched twice, or never inserted"):
        mqblk.sim(QUICK, scheduler=Twice)
    # A good run afterwards is not touched by the failed one.
    assert mqblk.sim(QUICK, scheduler=Fifo).json["mqblk_sim"]["requests"] > 0


def test_the_fuzzer_finds_a_scheduler_that_loses_requests_and_passes_a_sound_one():
    class Lossy(Fifo):
        def init_sched(self):
            super().init_sched()
            self.k = 0

        def insert_requests(self, rqs, at_head):
            for rq in rqs:
                self.k += 1
                if self.k % 97:
                    self.q.append(rq)

    fails = mqblk.fuzz(scheduler=Lossy, seed=1, runs=20)
    assert fails, "a scheduler losing every 97th request went unnoticed"
    assert {"seed", "error", "config"} <= set(fails[0])
    assert mqblk.fuzz(scheduler=Fifo, seed=1, runs=30) == []


def test_an_instance_and_a_real_time_run_are_refused_with_one_line():
    with pytest.raises(mqblk.MqblkError, match="give the Scheduler class"):
        mqblk.sim(QUICK, scheduler=Fifo())
    with pytest.raises(mqblk.MqblkError, match="run in the simulator only"):
        mqblk.bench(QUICK, scheduler=Fifo)


def test_a_class_redefined_under_its_name_replaces_it_but_may_not_change_mq_aware():
    class Again(Fifo):
        name = "again"

    mqblk.sim(QUICK, scheduler=Again)

    class Again2(Fifo):
        name = "again"

    assert mqblk.sim(QUICK, scheduler=Again2).json["mqblk_sim"]["requests"] > 0

    class AgainMq(Fifo):
        name = "again"
        mq_aware = True

    with pytest.raises(mqblk.MqblkError, match="registered with mq_aware=False"):
        mqblk.sim(QUICK, scheduler=AgainMq)
