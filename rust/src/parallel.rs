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

/// `run` for work that is one thread's: with `threads` 1, `f` runs on the
/// calling thread, not handed to a pool thread. A pool thread that went to
/// sleep between two small calls (the live store counting each message it
/// appends) takes milliseconds to wake on a loaded machine, far more than
/// the work. `f` must reach rayon only through functions that run
/// sequentially outside a pool (`columns::map_strings`).
pub fn run_small<R: Send>(
    threads: Option<usize>,
    f: impl FnOnce() -> Result<R> + Send,
) -> Result<R> {
    match threads {
        Some(1) => guard(f),
        _ => run(threads, f),
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
}
