"""mqblk from Python: the simulator, the seed scenarios and parameter sweeps.

Every function runs what the ``mqblk`` command runs, with the same options (fio's names)
and the same results; reports come back as :class:`Result` objects with ``to_pandas()``.

>>> import mqblk
>>> r = mqblk.sim("--rw=randread --iodepth=32 --runtime=1")
>>> r.to_pandas()[["job", "direction", "iops"]]           # doctest: +SKIP
>>> df = mqblk.sweep("--rw=randread --runtime=200ms",
...                  grid={"ioscheduler": ["none", "mq-deadline"], "iodepth": [1, 32]},
...                  seeds=range(1, 3))                    # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Mapping, Optional, Sequence

from . import _mqblk, plot
from ._mqblk import MqblkError, Request, SchedulerError, TunableValues

__all__ = [
    "MqblkError",
    "Request",
    "Scheduler",
    "SchedulerError",
    "Tunable",
    "TunableValues",
    "fuzz",
    "bench",
    "replay",
    "plot",
    "Result",
    "scenario",
    "scenarios",
    "schedulers",
    "sim",
    "sweep",
]
__version__ = _mqblk.__version__

_DIRECTIONS = ("read", "write", "trim")


def _option(name: str, value: Any) -> Optional[str]:
    """One fio option as a command-line argument (``True`` a bare flag, ``False`` none)."""
    if value is True:
        return f"--{name}"
    if value is False or value is None:
        return None
    return f"--{name}={value}"


def _arguments(job: Optional[str], options: Mapping[str, Any], tmp: str) -> list:
    """The ``mqblk sim`` arguments for a job and keyword options.

    ``job`` is a fio job file's text (it has a ``[section]``), a path to one, or fio
    command-line options in one string; ``options`` are fio options by name.
    """
    args: list = []
    if job:
        text = job.strip()
        if text.startswith("[") or "\n[" in text:
            path = os.path.join(tmp, "job.fio")
            with open(path, "w") as f:
                f.write(job)
            args.append(path)
        elif os.path.exists(text):
            args.append(text)
        else:
            args.extend(shlex.split(text))
    for name, value in options.items():
        a = _option(name, value)
        if a:
            args.append(a)
    return args


class Result:
    """One simulation's report: fio's JSON (``json``) with mqblk's own section."""

    def __init__(self, report: dict):
        self.json = report

    @property
    def jobs(self) -> list:
        """fio's per-job objects."""
        return self.json["jobs"]

    @property
    def queue(self) -> dict:
        """The request queue's settings and counters at the end, the scheduler's statistics
        (``sched``) among them: the same object from ``bench`` and ``sim``."""
        return self.json.get("mqblk_queue", {})

    @property
    def sim(self) -> dict:
        """The simulator's section: virtual time, CPUs, locks, the driver and the device
        model's counters."""
        return self.json.get("mqblk_sim", {})

    def rows(self) -> list:
        """One dict per job and direction that moved data (what ``to_pandas`` holds)."""
        sim = self.sim
        extra = {}
        for k, v in _flatten(self.queue.get("sched", {})).items():
            extra[f"sched.{k}"] = v
        for k, v in sim.get("device", {}).items():
            extra[f"device.{k}"] = v
        if "virtual_time_ns" in sim:
            extra["virtual_time_ns"] = sim["virtual_time_ns"]
        rows = []
        for j in self.jobs:
            for d in _DIRECTIONS:
                s = j.get(d)
                if not s or not s.get("total_ios"):
                    continue
                clat = s.get("clat_ns", {})
                pct = clat.get("percentile", {})
                row = {
                    "job": j["jobname"],
                    "direction": d,
                    "ios": s["total_ios"],
                    "iops": s["iops"],
                    "bw_bytes": s["bw_bytes"],
                    "lat_mean_ns": s.get("lat_ns", {}).get("mean"),
                    "clat_mean_ns": clat.get("mean"),
                    "clat_max_ns": clat.get("max"),
                }
                for p, v in pct.items():
                    row[f"clat_p{float(p):g}_ns"] = v
                row["errors"] = j.get("error", 0)
                row.update(extra)
                rows.append(row)
        return rows

    def to_pandas(self):
        """A DataFrame: one row per job and direction."""
        import pandas as pd

        return pd.DataFrame(self.rows())

    def __repr__(self) -> str:
        parts = [f"{r['job']}/{r['direction']} {r['iops']:.0f} IOPS" for r in self.rows()]
        return f"<mqblk.Result {', '.join(parts) or 'no I/O'}>"


def _flatten(d: Mapping, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        elif isinstance(v, (int, float, str, bool)):
            out[key] = v
    return out


class Tunable:
    """A Python scheduler's tunable, declared in its class's ``tunables`` dict: an integer
    with the unit its sysfs file would have, its default and the range a store keeps (a
    value outside it is refused with one line, as the kernel's store refuses it)."""

    __slots__ = ("default", "unit", "min", "max", "help")

    def __init__(
        self, default: int, unit: str = "", min: int = 0, max: int = 2**31 - 1, help: str = ""
    ) -> None:
        self.default = default
        self.unit = unit
        self.min = min
        self.max = max
        self.help = help

    def __repr__(self) -> str:
        return (
            f"Tunable({self.default}, unit={self.unit!r}, min={self.min}, max={self.max})"
        )


class Scheduler:
    """An I/O scheduler written in Python: subclass it, then pass the class as
    ``scheduler=`` to :func:`sim` or :func:`fuzz` (or in a :func:`sweep` grid).

    The hooks are the kernel's ``elevator_mq_ops`` under their names, called by mqblk's
    block layer in the simulator as its built-in schedulers' are:

    - ``insert_requests(rqs, at_head)``: take ownership of the :class:`Request` s in
      ``rqs`` (all for one hardware queue, ``rq.hctx``); ``at_head`` for requeued ones;
    - ``dispatch_request(hctx)``: the next request to send to the device from hardware
      queue ``hctx`` (a :class:`Request` or its ``id``), or ``None``. Each request inserted
      must be dispatched exactly once; a scheduler with ``mq_aware = False`` may hand out
      any queue's request, one with ``mq_aware = True`` only ``hctx``'s own;
    - ``has_work(hctx)``: whether ``dispatch_request(hctx)`` could return something (a
      ``True`` followed by ``None`` makes the block layer try again a little later).

    ``now_ns``, the run's time in ns, is set on the instance before each
    ``insert_requests`` and ``dispatch_request``. Optional: ``init_sched()``
    (``nr_hw_queues`` and ``nr_requests`` are set on the instance before), ``completed_request(rq, now_ns)``, ``requeue_request(rq)``,
    ``finish_request(rq)`` and ``stats()`` (a ``dict`` of ``str`` to ``int``, in reports).
    An instance is made for each queue the scheduler is attached to.

    Tunables: the class's ``tunables`` dict declares them by sysfs name, each a
    :class:`Tunable` (or a bare default, ``Tunable(default)``). ``tunables=`` of :func:`sim` and :func:`bench`
    (``--sched.NAME=VALUE`` on the command line) sets them, and the instance reads the
    current values in its hooks as ``self.tunables["name"]`` (stores come after
    ``init_sched``, as sysfs writes come after the kernel's ``init_sched``).

    A hook that raises, a request dispatched twice or never, ends the run with
    :class:`SchedulerError` naming the scheduler, the hook and the request, the hook's
    exception as its cause. ``name`` is how reports and ``ioscheduler=`` call it (default:
    the class name in lower case).
    """

    name: Optional[str] = None
    mq_aware: bool = False
    tunables: Any = {}
    nr_hw_queues: int = 1
    nr_requests: int = 0
    now_ns: int = 0

    def insert_requests(self, rqs: list, at_head: bool) -> None:
        raise NotImplementedError("insert_requests")

    def dispatch_request(self, hctx: int):
        raise NotImplementedError("dispatch_request")

    def has_work(self, hctx: int) -> bool:
        raise NotImplementedError("has_work")


def _scheduler_name(scheduler: Any) -> Any:
    """A :class:`Scheduler` subclass registered under its name (returned); a name as is."""
    if isinstance(scheduler, type) and issubclass(scheduler, Scheduler):
        name = scheduler.name or scheduler.__name__.lower()
        _mqblk.register_scheduler(scheduler, name)
        return name
    if isinstance(scheduler, Scheduler):
        raise MqblkError("scheduler=: give the Scheduler class, not an instance of it")
    return scheduler


def fuzz(*, scheduler: Any, seed: int = 1, runs: int = 100) -> list:
    """Runs ``mqblk sim --fuzz`` with ``scheduler`` (a name or a :class:`Scheduler`
    subclass) forced: ``runs`` random configurations from consecutive seeds, the queue's
    invariants checked after every event. Returns the failures (``seed``, ``error``,
    ``config``); an empty list means every run held."""
    name = _scheduler_name(scheduler)
    return json.loads(_mqblk.fuzz(name, seed, runs))


def sim(
    job: Optional[str] = None,
    *,
    device: Optional[str] = None,
    scheduler: Optional[str] = None,
    tunables: Optional[Mapping[str, Any]] = None,
    seed: int = 1,
    cost_profile: Optional[str] = None,
    cpus: Optional[int] = None,
    **options: Any,
) -> Result:
    """Simulates fio jobs in virtual time, as ``mqblk sim`` does.

    ``job`` is a fio job file's text, a path to one, or fio command-line options in one
    string; keyword ``options`` are fio options by their fio names (``iodepth=32``,
    ``time_based=True``). ``device`` is the device model (``"hdd,ncq=32"``), ``scheduler``
    the I/O scheduler, ``tunables`` its sysfs tunables by name, ``seed`` the run's seed.
    Raises :class:`MqblkError` with ``mqblk``'s one-line message on bad input.
    """
    opts = dict(options)
    if device is not None:
        opts["device"] = device
    if scheduler is not None:
        opts["ioscheduler"] = scheduler
    if "ioscheduler" in opts:
        opts["ioscheduler"] = _scheduler_name(opts["ioscheduler"])
    for name, value in (tunables or {}).items():
        opts[f"sched.{name}"] = value
    head = [f"--seed={seed}"]
    if cost_profile is not None:
        head.append(f"--cost-profile={cost_profile}")
    if cpus is not None:
        head.append(f"--cpus={cpus}")
    with tempfile.TemporaryDirectory(prefix="mqblk-") as tmp:
        args = head + _arguments(job, opts, tmp) + ["--output-format=json"]
        return Result(json.loads(_mqblk.sim(args)))


def bench(
    job: Optional[str] = None,
    *,
    scheduler: Optional[str] = None,
    tunables: Optional[Mapping[str, Any]] = None,
    **options: Any,
) -> Result:
    """Runs fio jobs on a real device through mqblk's threaded runtime, as ``mqblk bench``
    does (``filename=`` a file or block device through io_uring; without one, the null
    driver). Arguments as for :func:`sim`; the report has no ``mqblk_sim`` section. A
    :class:`Scheduler` subclass runs too, its hooks called from the job threads with the
    GIL taken in turn (at a fraction of a built-in scheduler's speed); a hook that fails
    ends the run early with :class:`SchedulerError`."""
    opts = dict(options)
    if scheduler is not None:
        opts["ioscheduler"] = scheduler
    if "ioscheduler" in opts:
        opts["ioscheduler"] = _scheduler_name(opts["ioscheduler"])
    for name, value in (tunables or {}).items():
        opts[f"sched.{name}"] = value
    with tempfile.TemporaryDirectory(prefix="mqblk-") as tmp:
        args = _arguments(job, opts, tmp) + ["--output-format=json"]
        return Result(json.loads(_mqblk.bench(args)))


def replay(trace: str, **options: Any) -> Result:
    """Replays a blktrace capture (``trace`` as ``mqblk replay`` takes it: the files'
    common prefix) through the simulator or a driver, as ``mqblk replay`` does. Options by
    the command's names with ``_`` for ``-`` (``device="ssd"``, ``ioscheduler="bfq"``,
    ``mode="open"``, ``speed=2``); ``.json["mqblk_replay"]`` has the trace's and the
    replay's latency percentiles."""
    args = [str(trace)]
    for name, value in options.items():
        a = _option(name.replace("_", "-"), value)
        if a:
            args.append(a)
    return Result(json.loads(_mqblk.replay(args + ["--output-format=json"])))


def scenario(name: str, *, seed: int = 1, quick: bool = False, cost_profile: str = "kernel") -> dict:
    """Runs one seed scenario (``mqblk scenario NAME --json``) and returns its report."""
    return json.loads(_mqblk.scenario(name, seed, quick, cost_profile))


def scenarios() -> list:
    """The seed scenarios: dicts of name, the kernel mail's subject (`mail`) and what each shows."""
    return [dict(name=n, mail=m, about=a) for n, m, a in _mqblk.scenarios()]


def schedulers() -> list:
    """The I/O schedulers with their tunables (name, default, unit, range)."""
    return json.loads(_mqblk.schedulers())


def _points(grid: Mapping[str, Sequence[Any]], seeds: Iterable[int]) -> list:
    keys = list(grid)
    pts = []
    for values in itertools.product(*(list(grid[k]) for k in keys)):
        for s in seeds:
            pts.append((dict(zip(keys, values)), s))
    return pts


def _label(value: Any) -> Any:
    """A sweep parameter's value as its column shows it (a Scheduler class by its name)."""
    if isinstance(value, type) and issubclass(value, Scheduler):
        return value.name or value.__name__.lower()
    return value


def _run_point(base: Optional[str], point: dict, seed: int, common: dict) -> list:
    """One sweep point: its rows, each with the point's parameters and seed."""
    kw = dict(common)
    kw.update(point)
    rows = sim(base, seed=seed, **kw).rows()
    for r in rows:
        r.update({f"param.{k}": _label(v) for k, v in point.items()})
        r["seed"] = seed
    return rows


def sweep(
    base: Optional[str] = None,
    grid: Optional[Mapping[str, Sequence[Any]]] = None,
    seeds: Iterable[int] = (1,),
    *,
    backend: str = "local",
    address: Optional[str] = None,
    workers: Optional[int] = None,
    progress: bool = False,
    **common: Any,
):
    """Runs ``base`` at every point of ``grid`` (option name -> values) and every seed.

    Returns one DataFrame: the rows of :meth:`Result.to_pandas` for every point, with the
    point's values as ``param.NAME`` columns and its ``seed``, in grid order. Each point is
    one deterministic simulation, so the result is the same whichever backend ran it:
    ``"local"`` (threads of this process, ``workers`` of them, default the CPUs) or
    ``"ray"`` (a Ray cluster at ``address``, or a local one started for the sweep).
    ``common`` options apply to every point (``device=``, ``scheduler=``, fio options).
    """
    import pandas as pd

    pts = _points(grid or {}, list(seeds))
    if backend == "local":
        n = workers or os.cpu_count() or 1
        done = 0
        with ThreadPoolExecutor(max_workers=n) as ex:
            futs = [ex.submit(_run_point, base, p, s, common) for p, s in pts]
            results = []
            for f in futs:
                results.append(f.result())
                done += 1
                if progress:
                    print(f"\rsweep: {done}/{len(pts)} points", end="", file=sys.stderr, flush=True)
    elif backend == "ray":
        import ray

        if not ray.is_initialized():
            if address:
                # A running cluster has its own resources; Ray refuses num_cpus then.
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        remote = ray.remote(_run_point)
        refs = [remote.remote(base, p, s, common) for p, s in pts]
        results = []
        for i, r in enumerate(refs):
            results.append(ray.get(r))
            if progress:
                print(f"\rsweep: {i + 1}/{len(pts)} points", end="", file=sys.stderr, flush=True)
    else:
        raise MqblkError(f"backend={backend!r}: expected 'local' or 'ray'")
    if progress:
        print(file=sys.stderr)
    return pd.DataFrame([row for rows in results for row in rows])
