//! Where the scans run: a cached pool of the size the caller asks for
//! (benchmarks report 1- and 2-core runs), or of one thread per core.
//!
//! Never rayon's global pool: a process forked after it started (Python's
//! `multiprocessing` forks by default, and `tune` runs its workers so) keeps
//! the pool's registry but not its threads, and the first scan that splits
//! its work would wait for them forever. The pools are per process instead:
//! a forked child builds its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rayon::ThreadPool;

use crate::error::{CoreError, Result};

/// The pools of the process that built them (its id), by size.
type Pools = (u32, HashMap<usize, Arc<ThreadPool>>);

fn pools() -> &'static Mutex<Pools> {
    static POOLS: OnceLock<Mutex<Pools>> = OnceLock::new();
    POOLS.get_or_init(|| Mutex::new((std::process::id(), HashMap::new())))
}

/// One thread per core unless `RAYON_NUM_THREADS` says otherwise (as rayon's
/// own default would).
fn default_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
}

/// Run `f` on `threads` threads (`None`: one per core).
/// A panic inside `f` (a bug, never bad input) comes back as `CoreError::Internal`
/// instead of unwinding into the caller.
pub fn run<R: Send>(threads: Option<usize>, f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
    let guarded = || guard(f);
    let n = threads.unwrap_or_else(default_threads);
    if n == 0 {
        return Err(CoreError::Config("threads must be at least 1".into()));
    }
    let pool = {
        let mut pools = pools().lock().unwrap_or_else(|e| e.into_inner());
        let pid = std::process::id();
        if pools.0 != pid {
            // Forked: the parent's pools have no threads here. Dropping one
            // would signal threads that do not exist; leak them instead.
            for (_, pool) in pools.1.drain() {
                std::mem::forget(pool);
            }
            pools.0 = pid;
        }
        match pools.1.get(&n) {
            Some(pool) => pool.clone(),
            None => {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .build()
                    .map_err(|e| CoreError::Config(format!("cannot start {n} threads: {e}")))?;
                pools.1.entry(n).or_insert(Arc::new(pool)).clone()
            }
        }
    };
    pool.install(guarded)
}

/// `f`, a panic inside it (a bug, never bad input) as `CoreError::Internal`.
fn guard<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(CoreError::Internal(msg))
    })
}

/// Inputs below these sizes are small: `run_sized` runs them on the calling
/// thread. A scan of a few thousand rows (a chat list, a live session)
/// takes well under a millisecond; a pool thread that went to sleep between
/// two such calls takes milliseconds to wake on a loaded machine. An input
/// under one ingest chunk (`chunk_bytes`' default) is one task anyway.
pub const SMALL_ROWS: usize = 4096;
pub const SMALL_BYTES: usize = 1 << 20;

thread_local! {
    /// A pool of one thread, the calling thread itself (rayon's
    /// `use_current_thread`): inside it rayon's joins and parallel
    /// iterators run in order on this thread, and never reach the global
    /// pool. It has no thread of its own, so a forked child (whose only
    /// thread is the one that forked) keeps all of it. Built once per
    /// thread and leaked (rayon leaks such a registry anyway); `None` when
    /// this thread is already another pool's.
    static HERE: Option<&'static ThreadPool> = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .use_current_thread()
        .build()
        .ok()
        .map(|pool| &*Box::leak(Box::new(pool)));
}

/// `f` on the calling thread, in its one-thread pool (a thread already in
/// another pool: on a one-thread pool of `run`'s).
fn on_this_thread<R: Send>(f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
    match HERE.with(|pool| *pool) {
        Some(pool) => pool.install(|| guard(f)),
        None => run(Some(1), f),
    }
}

/// `run` for work that is one thread's: with `threads` 1, `f` runs on the
/// calling thread (`on_this_thread`), not handed to a pool thread. A pool
/// thread that went to sleep between two small calls (the live store
/// counting each message it appends) takes milliseconds to wake on a loaded
/// machine, far more than the work.
pub fn run_small<R: Send>(
    threads: Option<usize>,
    f: impl FnOnce() -> Result<R> + Send,
) -> Result<R> {
    match threads {
        Some(1) => on_this_thread(f),
        _ => run(threads, f),
    }
}

/// `run` for work of `size` (rows, or bytes when `bytes`): a small input
/// (`SMALL_ROWS`, `SMALL_BYTES`) with no thread count asked for runs on the
/// calling thread, as does any input with `threads` 1. The answer is the
/// same on any number of threads.
pub fn run_sized<R: Send>(
    threads: Option<usize>,
    size: usize,
    bytes: bool,
    f: impl FnOnce() -> Result<R> + Send,
) -> Result<R> {
    let small = size < if bytes { SMALL_BYTES } else { SMALL_ROWS };
    match threads {
        None if small => on_this_thread(f),
        _ => run_small(threads, f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_thread_of_small_work_runs_on_the_calling_thread() {
        let here = std::thread::current().id();
        let on = |threads| run_small(threads, || Ok(std::thread::current().id())).unwrap();
        assert_eq!(on(Some(1)), here);
        assert_ne!(on(Some(2)), here); // a pool's thread, as `run`'s
        assert_ne!(
            run(Some(1), || Ok(std::thread::current().id())).unwrap(),
            here
        );
        let panics = run_small(Some(1), || -> Result<()> { panic!("a bug") });
        assert!(matches!(panics, Err(CoreError::Internal(m)) if m == "a bug"));
    }

    #[test]
    fn small_inputs_run_on_the_calling_thread_and_their_joins_stay_there() {
        use rayon::prelude::*;
        let here = std::thread::current().id();
        // every item of a parallel iterator, and both sides of a join, run here
        let threads = |size, bytes| {
            run_sized(None, size, bytes, || {
                let mut seen: Vec<_> = (0..64)
                    .into_par_iter()
                    .map(|_| std::thread::current().id())
                    .collect();
                let (a, b) = rayon::join(
                    || std::thread::current().id(),
                    || std::thread::current().id(),
                );
                seen.extend([a, b]);
                Ok(seen)
            })
            .unwrap()
        };
        assert!(threads(SMALL_ROWS - 1, false).iter().all(|t| *t == here));
        assert!(threads(SMALL_BYTES - 1, true).iter().all(|t| *t == here));
        // a large input, or a thread count asked for, goes to a pool
        assert!(threads(SMALL_ROWS, false).iter().all(|t| *t != here));
        let two = run_sized(Some(2), 1, false, || Ok(std::thread::current().id()));
        assert_ne!(two.unwrap(), here);
        let one = run_sized(Some(1), SMALL_ROWS, false, || {
            Ok(std::thread::current().id())
        });
        assert_eq!(one.unwrap(), here);
        // nested: already inside this thread's pool
        let nested = run_sized(None, 1, false, || {
            run_sized(None, 1, false, || Ok(std::thread::current().id()))
        });
        assert_eq!(nested.unwrap(), here);
        let panics = run_sized(None, 1, false, || -> Result<()> { panic!("a bug") });
        assert!(matches!(panics, Err(CoreError::Internal(m)) if m == "a bug"));
    }
}
