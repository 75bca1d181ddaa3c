"""Type stubs of the native module (python/src/lib.rs)."""

__version__: str

class MqblkError(ValueError):
    """A bad job, option or name: the one-line message ``mqblk`` prints."""

class SchedulerError(MqblkError):
    """A Python scheduler's hook raised or broke the elevator contract (the hook's
    exception is the cause)."""

class Request:
    """A request as a Python scheduler sees it (read-only)."""

    id: int
    op: str
    sector: int
    nr_sectors: int
    issuer: int
    group: int
    ioprio_class: str
    ioprio_level: int
    hctx: int
    sync: bool
    alloc_ns: int

class TunableValues:
    """A Python scheduler's tunables by sysfs name, their current values (read-only)."""

    def __getitem__(self, name: str) -> int: ...
    def __contains__(self, name: str) -> bool: ...
    def __len__(self) -> int: ...
    def keys(self) -> list[str]: ...
    def items(self) -> list[tuple[str, int]]: ...

def register_scheduler(cls: type, name: str) -> None:
    """Registers (or replaces) a Python scheduler class under ``name``."""

def fuzz(scheduler: str, seed: int, runs: int) -> str:
    """``mqblk sim --fuzz`` with the scheduler forced: the failures as JSON text."""

def sim(args: list[str]) -> str:
    """``mqblk sim ARGS`` (give ``--output-format=json``): the report's text."""

def scenario(name: str, seed: int = 1, quick: bool = False, cost_profile: str = "kernel") -> str:
    """``mqblk scenario NAME --json``: the report as JSON text."""

def scenarios() -> list[tuple[str, str, str]]:
    """(name, seed file, what it shows) of each seed scenario."""

def schedulers() -> str:
    """The I/O schedulers and their tunables as JSON text."""

def bench(args: list[str]) -> str:
    """``mqblk bench ARGS`` on real devices (give ``--output-format=json``): the report's text."""

def replay(args: list[str]) -> str:
    """``mqblk replay ARGS`` (give ``--output-format=json``): the report's text."""
