//! Where the scans run: the global rayon pool, or a cached pool of a fixed
//! size when the caller asks for one (benchmarks report 1- and 2-core runs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rayon::ThreadPool;

use crate::error::{CoreError, Result};

fn pools() -> &'static Mutex<HashMap<usize, Arc<ThreadPool>>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<ThreadPool>>>> = OnceLock::new();
    POOLS.get_or_init(Default::default)
}

/// Run `f` on `threads` threads (`None`: rayon's global pool, one per core).
/// A panic inside `f` (a bug, never bad input) comes back as `CoreError::Internal`
/// instead of unwinding into the caller.
pub fn run<R: Send>(threads: Option<usize>, f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
    let guarded = || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(CoreError::Internal(msg))
        })
    };
    let Some(n) = threads else { return guarded() };
    if n == 0 {
        return Err(CoreError::Config("threads must be at least 1".into()));
    }
    let pool = {
        let mut pools = pools().lock().unwrap_or_else(|e| e.into_inner());
        match pools.get(&n) {
            Some(pool) => pool.clone(),
            None => {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .build()
                    .map_err(|e| CoreError::Config(format!("cannot start {n} threads: {e}")))?;
                pools.entry(n).or_insert(Arc::new(pool)).clone()
            }
        }
    };
    pool.install(guarded)
}
