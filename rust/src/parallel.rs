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
pub fn run<R: Send>(threads: Option<usize>, f: impl FnOnce() -> R + Send) -> Result<R> {
    let Some(n) = threads else { return Ok(f()) };
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
    Ok(pool.install(f))
}
