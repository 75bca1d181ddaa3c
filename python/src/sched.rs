//! Schedulers written in Python: a `mqblk.Scheduler` subclass becomes an mqblk elevator.
//!
//! `register_scheduler` adds a scheduler type (`mqblk_sched::register`) whose init builds a
//! [`PyElevator`] around a new instance of the class; each elevator hook calls the method of
//! the same name with the GIL taken. The simulator runs on the caller's thread with the GIL
//! released, and takes it back for each hook; a real-time run (`mqblk.bench`) calls the
//! hooks from its job threads, each taking the GIL in turn.
//!
//! The wrapper holds a scheduler to the core's contract where Python could break it: a
//! request `dispatch_request` returns must be one inserted and not yet dispatched (of the
//! hardware queue asked, for an `mq_aware` scheduler), and none may be left at exit. A hook
//! that raises, or breaks the contract, ends the run with its error and where. In the
//! simulator the error is kept ([`take_failure`]) and the run stopped by a panic that the
//! caller catches and turns back into the Python exception. Job threads cannot unwind with
//! requests in flight, so in a real-time run ([`RealTime`]) the error is kept for the
//! caller, the run is asked to end, and the scheduler stops calling Python: it hands out
//! what it holds in id order, so every request still completes.

use mqblk_core::{
    Elevator, ElevatorInit, ElevatorType, ElvCtx, ElvFeatures, ElvRq, HctxIdx, Nanos, RqId,
    TunableDesc, Tunables,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The classes of the Python schedulers registered, by name.
static CLASSES: Mutex<BTreeMap<&'static str, Py<PyAny>>> = Mutex::new(BTreeMap::new());

/// Names of the statistics Python schedulers report, each kept once for the process.
static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

thread_local! {
    /// The error that ended the run on this thread: the Python exception and where.
    static FAILED: std::cell::RefCell<Option<(PyErr, String)>> = const { std::cell::RefCell::new(None) };
}

/// A real-time run's side of a failed hook: where the error goes, and the flag that ends
/// the run (`mqblk::bench::bench_args_until`).
#[derive(Clone, Default)]
pub struct RealTime {
    pub stop: Arc<AtomicBool>,
    pub failed: Arc<Mutex<Option<(PyErr, String)>>>,
}

thread_local! {
    /// Set while a real-time run is built on this thread: the Python schedulers it makes
    /// report failures to it rather than unwinding.
    static REAL_TIME: std::cell::RefCell<Option<RealTime>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` (a real-time run) with Python schedulers made during it reporting to `rt`.
pub fn real_time<T>(rt: &RealTime, f: impl FnOnce() -> T) -> T {
    struct Unset;
    impl Drop for Unset {
        fn drop(&mut self) {
            REAL_TIME.with(|r| *r.borrow_mut() = None);
        }
    }
    REAL_TIME.with(|r| *r.borrow_mut() = Some(rt.clone()));
    let _unset = Unset;
    f()
}

/// A job thread's Python thread state, kept from one hook to the next.
///
/// A thread Python did not start has no thread state: each `Python::attach` there makes one
/// and frees it again, which costs several microseconds per hook (a Python FIFO in bench ran
/// at a fifteenth of its speed in the simulator). [`keep`](thread_state::keep) makes the
/// thread's state once and keeps it, detached (the GIL released), until the thread ends;
/// the hooks' `attach` then only takes the GIL. Used in real-time runs on threads other
/// than the one that built the queue (the caller's, which has its own state).
#[allow(unsafe_code)]
mod thread_state {
    use pyo3::ffi;
    use std::cell::RefCell;

    struct Kept {
        gstate: ffi::PyGILState_STATE,
        ts: *mut ffi::PyThreadState,
    }

    impl Drop for Kept {
        fn drop(&mut self) {
            // SAFETY: `ts` is this thread's state, which `keep` saved on this thread and
            // nothing has restored since (every `attach` in between ended); restoring it
            // takes the GIL, and the release undoes `keep`'s ensure, freeing the state. The
            // job threads end (and this runs) inside the bench call, before the interpreter
            // could be finalizing; the check stands for a thread that outlives it.
            unsafe {
                if ffi::Py_IsInitialized() != 0 {
                    ffi::PyEval_RestoreThread(self.ts);
                    ffi::PyGILState_Release(self.gstate);
                }
            }
        }
    }

    thread_local! {
        static KEPT: RefCell<Option<Kept>> = const { RefCell::new(None) };
    }

    /// Gives this thread a Python thread state that outlives the next `attach`. Must be
    /// called outside any `attach` (the hooks call it first thing).
    pub(super) fn keep() {
        KEPT.with(|k| {
            if k.borrow().is_some() {
                return;
            }
            // SAFETY: the interpreter is running (a Python call started this run) and this
            // thread holds no GIL (we are outside every `attach`): the ensure makes the
            // thread's state and takes the GIL, the save releases the GIL and hands back
            // the state, which stays this thread's until `Kept::drop`.
            let kept = unsafe {
                let gstate = ffi::PyGILState_Ensure();
                let ts = ffi::PyEval_SaveThread();
                Kept { gstate, ts }
            };
            *k.borrow_mut() = Some(kept);
        });
    }
}

/// The panic message a failed hook stops the run with (the panic hook keeps it quiet).
pub const STOP: &str = "python scheduler failed";

/// The error a hook left on this thread, if any (taken).
pub fn take_failure() -> Option<(PyErr, String)> {
    FAILED.with(|f| f.borrow_mut().take())
}

fn fail(err: PyErr, at: String) -> ! {
    FAILED.with(|f| *f.borrow_mut() = Some((err, at.clone())));
    std::panic::panic_any(format!("{STOP}: {at}"));
}

fn leak(name: &str) -> &'static str {
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&n) = names.get(name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(n);
    n
}

/// A request as a Python scheduler sees it: read-only, its fields the kernel's names.
#[pyclass(frozen, name = "Request", module = "mqblk")]
pub struct PyRequest {
    /// The request's id (its index in the queue's request table).
    #[pyo3(get)]
    id: u32,
    /// `read`, `write`, `flush`, `discard` or `write-zeroes`.
    #[pyo3(get)]
    op: &'static str,
    #[pyo3(get)]
    sector: u64,
    #[pyo3(get)]
    nr_sectors: u32,
    /// The submitter (a job's number).
    #[pyo3(get)]
    issuer: u32,
    /// Its cgroup's id (0: the root).
    #[pyo3(get)]
    group: u32,
    /// `rt`, `be`, `idle` or `none`.
    #[pyo3(get)]
    ioprio_class: &'static str,
    #[pyo3(get)]
    ioprio_level: u8,
    /// The hardware queue it goes to.
    #[pyo3(get)]
    hctx: u16,
    /// Synchronous (reads, and writes flagged SYNC, FUA or PREFLUSH).
    #[pyo3(get)]
    sync: bool,
    /// When it was allocated, in ns of the run's time.
    #[pyo3(get)]
    alloc_ns: u64,
}

#[pymethods]
impl PyRequest {
    fn __repr__(&self) -> String {
        format!(
            "Request(id={}, {} sector={} nr_sectors={} issuer={} ioprio={}/{} hctx={})",
            self.id,
            self.op,
            self.sector,
            self.nr_sectors,
            self.issuer,
            self.ioprio_class,
            self.ioprio_level,
            self.hctx
        )
    }
}

impl PyRequest {
    fn of(rq: &ElvRq) -> PyRequest {
        PyRequest {
            id: rq.id.0,
            op: rq.op.name(),
            sector: rq.sector,
            nr_sectors: rq.nr_sectors,
            issuer: rq.issuer,
            group: rq.group,
            ioprio_class: match rq.ioprio.class() {
                mqblk_core::IoPrioClass::Rt => "rt",
                mqblk_core::IoPrioClass::Be => "be",
                mqblk_core::IoPrioClass::Idle => "idle",
                mqblk_core::IoPrioClass::None => "none",
            },
            ioprio_level: rq.ioprio.level(),
            hctx: rq.hctx.0,
            sync: mqblk_core::op_is_sync(rq.op, rq.cmd_flags),
            alloc_ns: rq.alloc_ns.0,
        }
    }
}

/// A Python scheduler's tunables as its hooks read them (`self.tunables["name"]`): the
/// current values, as the scheduler's sysfs files would show them.
#[pyclass(frozen, name = "TunableValues", module = "mqblk")]
pub struct TunableValues {
    values: Arc<Tunables>,
}

#[pymethods]
impl TunableValues {
    fn __getitem__(&self, name: &str) -> PyResult<i64> {
        self.values
            .show(name)
            .map_err(|e| pyo3::exceptions::PyKeyError::new_err(e.to_string()))
    }

    fn __contains__(&self, name: &str) -> bool {
        self.values.descs().iter().any(|d| d.name == name)
    }

    fn __len__(&self) -> usize {
        self.values.descs().len()
    }

    fn keys(&self) -> Vec<&'static str> {
        self.values.descs().iter().map(|d| d.name).collect()
    }

    fn items(&self) -> Vec<(&'static str, i64)> {
        let n = self.values.descs().len();
        (0..n)
            .map(|i| (self.values.descs()[i].name, self.values.get(i)))
            .collect()
    }

    fn __repr__(&self) -> String {
        let items: Vec<String> = self
            .items()
            .into_iter()
            .map(|(k, v)| format!("'{k}': {v}"))
            .collect();
        format!("TunableValues({{{}}})", items.join(", "))
    }
}

/// The tunables a class declares (`tunables = {"name": Tunable(...) or a default}`), as
/// descriptors kept for the process; a bad declaration is one line naming it.
fn declared_tunables(cls: &Bound<'_, PyAny>, sched: &str) -> PyResult<&'static [TunableDesc]> {
    let bad = |m: String| crate::MqblkError::new_err(format!("scheduler '{sched}': tunables: {m}"));
    let Ok(decl) = cls.getattr("tunables") else {
        return Ok(&[]);
    };
    if decl.is_none() {
        return Ok(&[]);
    }
    let decl = decl
        .cast::<pyo3::types::PyDict>()
        .map_err(|_| bad("a dict of name to Tunable or default value".into()))?;
    let mut out = Vec::new();
    for (k, v) in decl.iter() {
        let name: String = k
            .extract()
            .map_err(|_| bad(format!("name {k}: not a string")))?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad(format!(
                "'{name}': a sysfs name is letters, digits and '_'"
            )));
        }
        let int = |attr: &str, dflt: Option<i64>| -> PyResult<i64> {
            match v.getattr(attr) {
                Ok(x) => x
                    .extract()
                    .map_err(|_| bad(format!("'{name}': {attr} is not an integer"))),
                Err(_) => dflt.ok_or_else(|| bad(format!("'{name}': no {attr}"))),
            }
        };
        let text = |attr: &str| -> PyResult<&'static str> {
            match v.getattr(attr) {
                Ok(x) => {
                    Ok(leak(&x.extract::<String>().map_err(|_| {
                        bad(format!("'{name}': {attr} is not a string"))
                    })?))
                }
                Err(_) => Ok(""),
            }
        };
        // A bare default is `Tunable(default)`: `mqblk.Tunable`'s range (0..=i32::MAX), no
        // unit, no help.
        let (min, max) = (0, i64::from(i32::MAX));
        let d = if let Ok(default) = v.extract::<i64>() {
            TunableDesc {
                name: leak(&name),
                unit: "",
                default,
                min,
                max,
                help: "",
            }
        } else {
            TunableDesc {
                name: leak(&name),
                unit: text("unit")?,
                default: int("default", None)?,
                min: int("min", Some(min))?,
                max: int("max", Some(max))?,
                help: text("help")?,
            }
        };
        if d.min > d.max || d.default < d.min || d.default > d.max {
            return Err(bad(format!(
                "'{name}': default {} outside {}..={}",
                d.default, d.min, d.max
            )));
        }
        out.push(d);
    }
    Ok(Box::leak(out.into_boxed_slice()))
}

/// An elevator whose hooks are a Python object's methods.
struct PyElevator {
    obj: Py<PyAny>,
    name: &'static str,
    mq_aware: bool,
    /// Requests inserted and not yet dispatched, with their hardware queue.
    queued: Mutex<BTreeMap<u32, u16>>,
    /// Which optional hooks the class defines.
    has: Optional,
    /// Its tunables: the class's `tunables` declarations, shared with the instance's
    /// `tunables` view so that hooks read the values a store (`--sched.NAME=`, the admin
    /// socket) left.
    tunables: Arc<Tunables>,
    /// In a real-time run: where a failure goes instead of a panic.
    rt: Option<RealTime>,
    /// A hook failed in a real-time run: Python is not called again.
    broken: AtomicBool,
    /// The thread that built it (the caller's, a Python thread).
    home: std::thread::ThreadId,
}

#[derive(Copy, Clone)]
struct Optional {
    completed: bool,
    finish: bool,
    requeue: bool,
    stats: bool,
}

impl PyElevator {
    /// Calls `f` with the GIL and the Python object; a failure ends the run, named by
    /// `at` (the hook and its arguments, formatted only then). `None` once a hook has
    /// failed in a real-time run: the caller falls back to [`PyElevator::fallback`].
    fn call<T>(
        &self,
        at: impl FnOnce() -> String,
        f: impl FnOnce(Python<'_>, &Bound<'_, PyAny>) -> PyResult<T>,
    ) -> Option<T> {
        if self.broken.load(Ordering::Relaxed) {
            return None;
        }
        if self.rt.is_some() && std::thread::current().id() != self.home {
            thread_state::keep();
        }
        match Python::attach(|py| f(py, self.obj.bind(py))) {
            Ok(v) => Some(v),
            Err(e) => {
                self.failed(e, format!("{}.{}", self.name, at()));
                None
            }
        }
    }

    /// A hook failed: in the simulator the run ends here (a panic the caller catches); in
    /// a real-time run the first error is kept, the run asked to end, and Python no
    /// longer called.
    fn failed(&self, err: PyErr, at: String) {
        let Some(rt) = &self.rt else {
            fail(err, at);
        };
        if !self.broken.swap(true, Ordering::Relaxed) {
            let mut slot = rt.failed.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert((err, at));
            rt.stop.store(true, Ordering::Relaxed);
        }
    }

    /// What a broken scheduler hands out: its lowest request id (of `hctx` if it is
    /// `mq_aware`).
    fn fallback(&self, hctx: HctxIdx, take: bool) -> Option<RqId> {
        let mut queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        let id = queued
            .iter()
            .find(|(_, &h)| !self.mq_aware || h == hctx.0)
            .map(|(&id, _)| id)?;
        if take {
            queued.remove(&id);
        }
        Some(RqId(id))
    }

    fn view(py: Python<'_>, q: &ElvCtx<'_>, id: RqId) -> PyResult<Py<PyRequest>> {
        let rq = q.rqs.lock(id);
        Py::new(py, PyRequest::of(&rq.elv()))
    }
}

/// The init every Python scheduler type shares: an instance of the class registered under
/// the type's name.
fn py_init(init: &ElevatorInit) -> Box<dyn Elevator> {
    let name = init.name;
    // The GIL first, then the classes' lock (the order `register_scheduler` takes them in).
    let cls = Python::attach(|py| {
        let classes = CLASSES.lock().unwrap_or_else(|e| e.into_inner());
        classes.get(name).map(|c| c.clone_ref(py))
    });
    let Some(cls) = cls else {
        fail(
            PyValueError::new_err(format!("no Python class for scheduler '{name}'")),
            format!("{name}.__init__"),
        );
    };
    // The descriptors of the type registered under this name (the class's declarations).
    let descs = mqblk_sched::lookup(name).map_or(&[][..], |t| t.tunables);
    let rt = REAL_TIME.with(|r| r.borrow().clone());
    let tunables = Arc::new(Tunables::new(name, descs));
    Python::attach(|py| {
        let built = (|| -> PyResult<PyElevator> {
            let cls = cls.bind(py);
            let obj = cls.call0()?;
            obj.setattr("nr_hw_queues", init.nr_hw_queues)?;
            obj.setattr("nr_requests", init.nr_requests)?;
            obj.setattr(
                "tunables",
                TunableValues {
                    values: tunables.clone(),
                },
            )?;
            if obj.hasattr("init_sched")? {
                obj.call_method0("init_sched")?;
            }
            let mq_aware: bool = cls.getattr("mq_aware")?.extract()?;
            let has = Optional {
                completed: obj.hasattr("completed_request")?,
                finish: obj.hasattr("finish_request")?,
                requeue: obj.hasattr("requeue_request")?,
                stats: obj.hasattr("stats")?,
            };
            Ok(PyElevator {
                obj: obj.unbind(),
                name,
                mq_aware,
                queued: Mutex::new(BTreeMap::new()),
                has,
                tunables,
                rt,
                broken: AtomicBool::new(false),
                home: std::thread::current().id(),
            })
        })();
        match built {
            Ok(e) => Box::new(e) as Box<dyn Elevator>,
            Err(e) => fail(e, format!("{name}.__init__")),
        }
    })
}

impl Elevator for PyElevator {
    fn name(&self) -> &'static str {
        self.name
    }

    fn features(&self) -> ElvFeatures {
        if self.mq_aware {
            ElvFeatures::MQ_AWARE
        } else {
            ElvFeatures::empty()
        }
    }

    fn insert_requests(
        &self,
        q: &ElvCtx<'_>,
        hctx: HctxIdx,
        rqs: &[RqId],
        at_head: bool,
        now: Nanos,
        _freed: &mut Vec<RqId>,
    ) {
        {
            let mut queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
            for id in rqs {
                queued.insert(id.0, hctx.0);
            }
        }
        self.call(
            || {
                let ids: Vec<u32> = rqs.iter().map(|r| r.0).collect();
                format!("insert_requests(requests {ids:?}, at_head={at_head})")
            },
            |py, obj| {
                obj.setattr("now_ns", now.0)?;
                let views = rqs
                    .iter()
                    .map(|&id| Self::view(py, q, id))
                    .collect::<PyResult<Vec<_>>>()?;
                obj.call_method1("insert_requests", (PyList::new(py, views)?, at_head))?;
                Ok(())
            },
        );
    }

    fn dispatch_request(&self, _q: &ElvCtx<'_>, hctx: HctxIdx, now: Nanos) -> Option<RqId> {
        let Some(answer) = self.call(
            || format!("dispatch_request(hctx={})", hctx.0),
            |_py, obj| {
                obj.setattr("now_ns", now.0)?;
                let r = obj.call_method1("dispatch_request", (hctx.0,))?;
                if r.is_none() {
                    return Ok(None);
                }
                if let Ok(v) = r.cast::<PyRequest>() {
                    return Ok(Some(v.get().id));
                }
                r.extract::<u32>().map(Some).map_err(|_| {
                    PyValueError::new_err(format!(
                        "returned {}, not a Request, a request id or None",
                        r.repr().map_or_else(|_| "?".into(), |s| s.to_string())
                    ))
                })
            },
        ) else {
            return self.fallback(hctx, true);
        };
        let id = answer?;
        let mut queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        let broken = match queued.get(&id) {
            None => Some(format!(
                "returned request {id}, which is not queued in the scheduler (dispatched twice, or never inserted)"
            )),
            Some(&h) if self.mq_aware && h != hctx.0 => Some(format!(
                "returned request {id} of hardware queue {h} to hardware queue {} (an mq_aware scheduler dispatches each queue's own)",
                hctx.0
            )),
            Some(_) => None,
        };
        if let Some(msg) = broken {
            drop(queued);
            self.failed(
                PyValueError::new_err(msg),
                format!("{}.dispatch_request(hctx={})", self.name, hctx.0),
            );
            return self.fallback(hctx, true);
        }
        queued.remove(&id);
        Some(RqId(id))
    }

    fn has_work(&self, hctx: HctxIdx) -> bool {
        self.call(
            || format!("has_work(hctx={})", hctx.0),
            |_py, obj| obj.call_method1("has_work", (hctx.0,))?.is_truthy(),
        )
        .unwrap_or_else(|| self.fallback(hctx, false).is_some())
    }

    fn completed_request(&self, rq: &ElvRq, now: Nanos) {
        if self.has.completed {
            self.call(
                || format!("completed_request(request {})", rq.id.0),
                |py, obj| {
                    obj.call_method1(
                        "completed_request",
                        (Py::new(py, PyRequest::of(rq))?, now.0),
                    )?;
                    Ok(())
                },
            );
        }
    }

    fn finish_request(&self, rq: &ElvRq) {
        if self.has.finish {
            self.call(
                || format!("finish_request(request {})", rq.id.0),
                |py, obj| {
                    obj.call_method1("finish_request", (Py::new(py, PyRequest::of(rq))?,))?;
                    Ok(())
                },
            );
        }
    }

    fn requeue_request(&self, rq: &ElvRq, _now: Nanos) {
        if self.has.requeue {
            self.call(
                || format!("requeue_request(request {})", rq.id.0),
                |py, obj| {
                    obj.call_method1("requeue_request", (Py::new(py, PyRequest::of(rq))?,))?;
                    Ok(())
                },
            );
        }
    }

    fn tunables(&self) -> &Tunables {
        &self.tunables
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        if !self.has.stats {
            return Vec::new();
        }
        self.call(
            || "stats()".into(),
            |_py, obj| {
                let d: BTreeMap<String, u64> = obj.call_method0("stats")?.extract()?;
                Ok(d.into_iter().map(|(k, v)| (leak(&k), v)).collect())
            },
        )
        .unwrap_or_default()
    }

    fn debug_state(&self) -> String {
        let queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        format!(
            "python scheduler {}: {} queued {:?}\n",
            self.name,
            queued.len(),
            queued.keys().take(16).collect::<Vec<_>>()
        )
    }

    fn exit_sched(&self) {
        let queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        if !queued.is_empty() {
            let ids: Vec<u32> = queued.keys().take(8).copied().collect();
            drop(queued);
            self.failed(
                PyValueError::new_err(format!(
                    "requests {ids:?} were inserted and never dispatched (lost)"
                )),
                format!("{}.exit_sched", self.name),
            );
        }
    }

    fn depth_updated(&self, _nr_requests: u32, _nr_rq_ids: u32) {}
}

/// Registers (or, for a name registered before, replaces) the Python scheduler class `cls`
/// under `name`, with the tunables it declares. Its costs in the simulator are
/// mq-deadline's (one lock for the queue), or kyber's for an `mq_aware` one (a lock per
/// hardware queue): what a kernel version of it would cost is not known.
#[pyfunction]
pub fn register_scheduler(py: Python<'_>, cls: Py<PyAny>, name: String) -> PyResult<()> {
    let same = {
        let classes = CLASSES.lock().unwrap_or_else(|e| e.into_inner());
        classes.get(name.as_str()).is_some_and(|c| c.is(&cls))
    };
    if same {
        // The same class again (each run registers what it is given).
        return Ok(());
    }
    // Python runs before the classes' lock is taken, never under it.
    let bound = cls.bind(py);
    let mq_aware: bool = bound.getattr("mq_aware")?.extract()?;
    let tunables = declared_tunables(bound, &name)?;
    let mut classes = CLASSES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = mqblk_sched::lookup(&name) {
        if !classes.contains_key(t.name) {
            return Err(crate::MqblkError::new_err(format!(
                "scheduler '{name}' is already registered, and not by Python: give the class another name"
            )));
        }
        // A class redefined under its name (a notebook cell run again) replaces the old
        // one, its features and tunables with it; queues built with the old one keep it.
        mqblk_sched::unregister(t.name).map_err(crate::MqblkError::new_err)?;
    }
    let model = mqblk_sched::lookup(if mq_aware { "kyber" } else { "mq-deadline" })
        .expect("a built-in scheduler");
    let name = leak(&name);
    let t: &'static ElevatorType = Box::leak(Box::new(ElevatorType {
        name,
        alias: None,
        features: if mq_aware {
            ElvFeatures::MQ_AWARE
        } else {
            ElvFeatures::empty()
        },
        tunables,
        aliases: &[],
        init: Some(py_init),
        cost: model.cost,
    }));
    mqblk_sched::register(t).map_err(crate::MqblkError::new_err)?;
    classes.insert(name, cls);
    Ok(())
}
