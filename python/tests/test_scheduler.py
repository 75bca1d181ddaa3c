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


def test_an_instance_is_refused_with_one_line():
    with pytest.raises(mqblk.MqblkError, match="give the Scheduler class"):
        mqblk.sim(QUICK, scheduler=Fifo())
    with pytest.raises(mqblk.MqblkError, match="give the Scheduler class"):
        mqblk.bench(QUICK, scheduler=Fifo())


BENCH = "--rw=randread --bs=4k --iodepth=8 --numjobs=2 --runtime=300ms --time_based --name=x"


def test_python_schedulers_run_in_real_time_bench_the_tutorials_too():
    r = mqblk.bench(BENCH, scheduler=Fifo)
    q = r.json["mqblk_queue"]
    assert q["sched"]["name"] == "fifo", q["sched"]
    done = sum(h["completed"] for h in q["hctx"])
    assert done > 100 and all(j["error"] == 0 for j in r.json["jobs"]), q
    m = tutorial()
    r = mqblk.bench(
        "[global]\nrw=randread\nbs=4k\niodepth=4\nruntime=300ms\ntime_based\n"
        "[high]\nprio=0\n[low]\nprio=7\n",
        scheduler=m.PrioAging,
        tunables={"aging_ms": 50},
    )
    assert r.json["mqblk_queue"]["sched"]["name"] == "prio-aging"
    assert all(j["read"]["io_bytes"] > 0 for j in r.json["jobs"]), r.json["jobs"]


def test_a_hook_failing_in_bench_ends_the_run_early_with_the_hook_named():
    import time

    class LateRaise(Fifo):
        def init_sched(self):
            super().init_sched()
            self.n = 0

        def dispatch_request(self, hctx):
            self.n += 1
            if self.n == 500:
                raise ZeroDivisionError("at 500")
            return super().dispatch_request(hctx)

    t0 = time.monotonic()
    with pytest.raises(mqblk.SchedulerError, match=r"lateraise\.dispatch_request\(hctx=0\): ZeroDivisionError") as e:
        mqblk.bench(BENCH.replace("300ms", "20"), scheduler=LateRaise)
    assert isinstance(e.value.__cause__, ZeroDivisionError)
    assert time.monotonic() - t0 < 15, "the 20 s run was not ended by the failure"

    class Twice(Fifo):
        def dispatch_request(self, hctx):
            return self.q[0] if self.q else None

    with pytest.raises(mqblk.SchedulerError, match="dispatched twice, or never inserted"):
        mqblk.bench(BENCH.replace("300ms", "20"), scheduler=Twice)
    # The next run is not touched by the failed ones.
    assert mqblk.bench(BENCH, scheduler=Fifo).json["jobs"][0]["read"]["io_bytes"] > 0


def test_a_class_redefined_under_its_name_replaces_it_features_and_tunables_too():
    class Again(Fifo):
        name = "again"

    mqblk.sim(QUICK, scheduler=Again)

    class Again2(Fifo):
        name = "again"
        mq_aware = True
        tunables = {"depth": mqblk.Tunable(8, unit="requests", min=1, max=64)}

    r = mqblk.sim(QUICK, scheduler=Again2, tunables={"depth": 16})
    assert r.json["mqblk_sim"]["requests"] > 0
    listed = {s["name"]: s for s in mqblk.schedulers()}["again"]
    assert listed["mq_aware"] is True, listed
    assert [t["name"] for t in listed["tunables"]] == ["depth"], listed
    with pytest.raises(mqblk.MqblkError, match="already registered, and not by Python"):

        class Deadline(Fifo):
            name = "mq-deadline"

        mqblk.sim(QUICK, scheduler=Deadline)


class Capped(Fifo):
    """A FIFO that sends at most ``max_batch`` requests per dispatch round (a tunable), and
    records the value its hooks read."""

    name = "capped"
    tunables = {
        "max_batch": mqblk.Tunable(2, unit="requests", min=1, max=1024, help="per round"),
        "bare": 7,
    }

    def init_sched(self):
        super().init_sched()
        self.seen = set()

    def dispatch_request(self, hctx):
        self.seen.add(self.tunables["max_batch"])
        return super().dispatch_request(hctx)

    def stats(self):
        return {"max_batch_seen": max(self.seen, default=0), "bare": self.tunables["bare"]}


def test_a_python_schedulers_tunables_have_defaults_take_stores_and_refuse_bad_values():
    figures = lambda r: dict(r.json["mqblk_queue"]["sched"]["figures"])  # noqa: E731
    assert figures(mqblk.sim(QUICK, scheduler=Capped)) == {"max_batch_seen": 2, "bare": 7}
    r = mqblk.sim(QUICK, scheduler=Capped, tunables={"max_batch": 64, "bare": 3})
    assert figures(r) == {"max_batch_seen": 64, "bare": 3}
    listed = {s["name"]: s for s in mqblk.schedulers()}["capped"]["tunables"]
    assert listed[0] == {
        "name": "max_batch",
        "default": 2,
        "unit": "requests",
        "min": 1,
        "max": 1024,
        "help": "per round",
    }, listed
    with pytest.raises(mqblk.MqblkError, match=r"max_batch.*out of range 1..=1024") as e:
        mqblk.sim(QUICK, scheduler=Capped, tunables={"max_batch": 0})
    assert "\n" not in str(e.value)
    with pytest.raises(mqblk.MqblkError, match="unknown tunable 'nope' for capped"):
        mqblk.sim(QUICK, scheduler=Capped, tunables={"nope": 1})

    class Bad(Fifo):
        tunables = {"x": mqblk.Tunable(5, min=10, max=20)}

    with pytest.raises(mqblk.MqblkError, match=r"'bad': tunables: 'x': default 5 outside 10..=20"):
        mqblk.sim(QUICK, scheduler=Bad)


def test_the_tutorials_aging_tunable_lets_the_low_priority_in_sooner():
    m = tutorial()
    low = {}
    for ms in (1000, 10):
        r = mqblk.sim(m.JOB, device="hdd", scheduler=m.PrioAging, tunables={"aging_ms": ms})
        df = r.to_pandas().set_index("job")
        low[ms] = df.loc["low", "iops"] / df.loc["high", "iops"]
    assert low[10] > 1.5 * low[1000], low


def test_an_out_of_tree_rust_scheduler_built_in_runs_by_name():
    # python/test.sh builds the package with examples/mqfq (`--features mqfq`).
    listed = {s["name"]: s for s in mqblk.schedulers()}
    assert "mqfq" in listed and listed["mqfq"]["mq_aware"], sorted(listed)
    job = (
        "[global]\nrw=randread\nruntime=300ms\ntime_based\nsize=1g\niodepth=16\n"
        "[big]\nbs=128k\noffset=0\n[small]\nbs=4k\noffset=2g\n"
    )

    def small_share(sched):
        df = mqblk.sim(job, device="ssd", scheduler=sched).to_pandas().set_index("job")
        return df.loc["small", "bw_bytes"] / df["bw_bytes"].sum()

    # MQFQ's start tags charge a request its size: the 4 KiB flow's share grows.
    assert small_share("mqfq") > 2.5 * small_share("none")
    r = mqblk.bench(BENCH, scheduler="mqfq", tunables={"max_inflight": 8})
    assert r.json["mqblk_queue"]["sched"]["name"] == "mqfq"
    assert r.json["jobs"][0]["read"]["io_bytes"] > 0
