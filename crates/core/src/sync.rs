//! The core's locks: real locks where threads share a queue, plain flags where one thread
//! runs it.
//!
//! The kernel's block layer protects its queues with spinlocks (`hctx->lock`, `ctx->lock`,
//! mq-deadline's `dd->lock`) that cost an atomic instruction even uncontended. The threaded
//! runtime needs exactly that; the simulator runs a whole machine's queue on one host thread,
//! where the same locks are never contended but every take and release is still a locked
//! instruction (a fifth of the profiler's samples with `none`, a third with mq-deadline,
//! before this type; 3-8% of the time, measured). [`Mutex`] is `parking_lot`'s mutex where threads share it and a flag read and
//! written without a locked instruction where one thread owns it.
//!
//! Which it is, a lock decides the first time it is taken: on a thread inside a
//! [`confine_to_this_thread`] scope it binds itself to that thread for good; anywhere else it
//! is a shared lock for good. A confined lock taken from any other thread panics (the queue
//! was handed to a thread it was not built for), and a confined lock taken twice by its own
//! thread panics too, where a shared one would deadlock. Both keep the type sound: only the
//! owning thread ever reads or writes a confined lock's flag or the data behind it.
//! [`Confinement`] makes the same decision for the core's lock-free structures.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

// `parking_lot`'s own `lock_api`, so the raw lock implements the very trait its mutex does.
use parking_lot::lock_api::{self, GuardNoSend};

/// Not yet taken: the first take decides.
const UNBOUND: usize = 0;
/// A lock for threads that share it.
const SHARED: usize = 1;

/// Thread identities start above [`SHARED`]; never reused, unlike a thread-local's address.
static NEXT_THREAD: AtomicUsize = AtomicUsize::new(SHARED + 1);

thread_local! {
    static THREAD: Cell<usize> = const { Cell::new(UNBOUND) };
    static CONFINING: Cell<bool> = const { Cell::new(false) };
}

#[inline]
fn this_thread() -> usize {
    THREAD.with(|t| {
        let id = t.get();
        if id != UNBOUND {
            return id;
        }
        let id = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
        t.set(id);
        id
    })
}

/// While the returned guard lives, every [`Mutex`] first taken on this thread is confined to
/// it. The simulator holds one while it builds and runs a simulation.
#[must_use = "the scope ends when the guard is dropped"]
pub fn confine_to_this_thread() -> ConfineScope {
    let was = CONFINING.with(|c| c.replace(true));
    ConfineScope {
        was,
        _not_send: std::marker::PhantomData,
    }
}

/// The scope [`confine_to_this_thread`] opens; dropping it restores what was before.
pub struct ConfineScope {
    was: bool,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for ConfineScope {
    fn drop(&mut self) {
        CONFINING.with(|c| c.set(self.was));
    }
}

/// Whether a structure is shared between threads or confined to one, decided the first
/// time it is used (as the module's comment says of locks). Lock-free structures of the core
/// (the tags' bitmaps, the queue's entry counts) ask it before an atomic read-modify-write:
/// confined, a load and a store do the same without a locked instruction.
pub struct Confinement {
    /// [`UNBOUND`], [`SHARED`], or the identity of the thread it is confined to.
    owner: AtomicUsize,
}

impl Confinement {
    /// Not yet decided.
    pub const fn new() -> Confinement {
        Confinement {
            owner: AtomicUsize::new(UNBOUND),
        }
    }

    /// True if the structure is confined to the calling thread; decides an undecided one.
    /// Panics on a thread other than the one it is confined to.
    #[inline]
    pub fn confined(&self) -> bool {
        match self.owner.load(Ordering::Relaxed) {
            SHARED => false,
            UNBOUND => self.bind(),
            o if o == this_thread() => true,
            _ => panic!(
                "mqblk: a queue confined to one thread (`confine_to_this_thread`) was used from another"
            ),
        }
    }

    /// True once decided shared.
    #[inline]
    fn is_shared(&self) -> bool {
        self.owner.load(Ordering::Relaxed) == SHARED
    }

    /// True if confined to the calling thread, without deciding an undecided one.
    fn is_mine(&self) -> bool {
        let o = self.owner.load(Ordering::Relaxed);
        o > SHARED && o == this_thread()
    }

    #[cold]
    fn bind(&self) -> bool {
        let want = if CONFINING.with(Cell::get) {
            this_thread()
        } else {
            SHARED
        };
        match self
            .owner
            .compare_exchange(UNBOUND, want, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => want != SHARED,
            // Another thread decided it first.
            Err(_) => self.confined(),
        }
    }
}

impl Default for Confinement {
    fn default() -> Confinement {
        Confinement::new()
    }
}

/// A read-modify-write of `a` returning the old value: `shared` (the atomic instruction)
/// where threads share `a`, a load and a store of `op`'s value where one thread owns it
/// (`confined`, from [`Confinement::confined`]).
#[inline]
fn rmw_u64(
    a: &AtomicU64,
    confined: bool,
    op: impl FnOnce(u64) -> u64,
    shared: impl FnOnce() -> u64,
) -> u64 {
    if !confined {
        return shared();
    }
    let v = a.load(Ordering::Relaxed);
    a.store(op(v), Ordering::Relaxed);
    v
}

/// `a |= bits`, returning the old value; a load and a store where `confined` (from
/// [`Confinement::confined`]), the atomic instruction elsewhere.
#[inline]
pub fn fetch_or_u64(a: &AtomicU64, bits: u64, order: Ordering, confined: bool) -> u64 {
    rmw_u64(a, confined, |v| v | bits, || a.fetch_or(bits, order))
}

/// `a &= bits`, returning the old value; a load and a store where `confined` (from
/// [`Confinement::confined`]), the atomic instruction elsewhere.
#[inline]
pub fn fetch_and_u64(a: &AtomicU64, bits: u64, order: Ordering, confined: bool) -> u64 {
    rmw_u64(a, confined, |v| v & bits, || a.fetch_and(bits, order))
}

/// Swaps `v` into `a`, returning the old value; a load and a store where `confined` (from
/// [`Confinement::confined`]), the atomic instruction elsewhere.
#[inline]
pub fn swap_u64(a: &AtomicU64, v: u64, order: Ordering, confined: bool) -> u64 {
    rmw_u64(a, confined, |_| v, || a.swap(v, order))
}

/// The raw lock behind [`Mutex`].
pub struct RawLock {
    shared: parking_lot::RawMutex,
    /// Shared or confined, and to which thread.
    confinement: Confinement,
    /// A confined lock's state; only its owner reads or writes it.
    held: AtomicBool,
}

// SAFETY: a shared lock is `parking_lot`'s mutex. A confined lock's flag and the data it
// guards are only reached from its owning thread (any other panics in `confined` before
// touching either), and a guard cannot leave that thread (`GuardNoSend`), so one holder at a
// time follows from the flag's program order on that thread.
unsafe impl lock_api::RawMutex for RawLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawLock = RawLock {
        shared: parking_lot::RawMutex::INIT,
        confinement: Confinement::new(),
        held: AtomicBool::new(false),
    };

    type GuardMarker = GuardNoSend;

    #[inline]
    fn lock(&self) {
        if !self.confinement.confined() {
            return self.shared.lock();
        }
        if self.held.load(Ordering::Relaxed) {
            panic!("mqblk: a queue's lock was taken twice by the thread holding it (a deadlock)");
        }
        self.held.store(true, Ordering::Relaxed);
    }

    #[inline]
    fn try_lock(&self) -> bool {
        if !self.confinement.confined() {
            return self.shared.try_lock();
        }
        if self.held.load(Ordering::Relaxed) {
            return false;
        }
        self.held.store(true, Ordering::Relaxed);
        true
    }

    #[inline]
    unsafe fn unlock(&self) {
        if self.confinement.is_shared() {
            // SAFETY: the caller holds the lock, as the trait requires.
            unsafe { self.shared.unlock() }
        } else {
            self.held.store(false, Ordering::Relaxed);
        }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        if self.confinement.is_shared() {
            self.shared.is_locked()
        } else if self.confinement.is_mine() {
            self.held.load(Ordering::Relaxed)
        } else {
            // Undecided (never taken), or another thread's: its flag is not ours to read.
            self.confinement.owner.load(Ordering::Relaxed) != UNBOUND
        }
    }
}

/// A mutex of the core, the schedulers and the simulated driver (see the module's comment).
pub type Mutex<T> = lock_api::Mutex<RawLock, T>;
/// The guard of a [`Mutex`].
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawLock, T>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_outside_a_scope_is_shared_between_threads() {
        let m = std::sync::Arc::new(Mutex::new(0u32));
        *m.lock() += 1;
        let m2 = m.clone();
        std::thread::spawn(move || *m2.lock() += 1).join().unwrap();
        assert_eq!(*m.lock(), 2);
    }

    #[test]
    fn a_lock_first_taken_in_a_scope_is_confined_and_refuses_other_threads() {
        let m = std::sync::Arc::new(Mutex::new(0u32));
        {
            let _scope = confine_to_this_thread();
            *m.lock() += 1;
        }
        // Still its thread's after the scope.
        *m.lock() += 1;
        assert!(m.try_lock().is_some());
        let g = m.lock();
        assert!(m.try_lock().is_none());
        assert!(m.is_locked());
        drop(g);
        assert!(!m.is_locked());
        let m2 = m.clone();
        let other = std::thread::spawn(move || *m2.lock() += 1).join();
        assert!(other.is_err(), "another thread took a confined lock");
        assert_eq!(*m.lock(), 2);
    }

    #[test]
    fn a_confined_lock_taken_twice_panics_instead_of_deadlocking() {
        let _scope = confine_to_this_thread();
        let m = Mutex::new(());
        let _g = m.lock();
        let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(m.lock())));
        assert!(again.is_err());
    }

    #[test]
    fn scopes_nest_and_restore() {
        let outer = confine_to_this_thread();
        {
            let _inner = confine_to_this_thread();
        }
        assert!(CONFINING.with(Cell::get));
        drop(outer);
        assert!(!CONFINING.with(Cell::get));
    }
}
