//! Process-global resource budgets, enforced on top of each call's own knobs so that
//! many concurrent calls in one process cannot multiply memory or parallelism.
//!
//! Deadlock freedom: a task acquires at most one permit set per budget, always in the
//! order partition → file → bytes, asks for no more than a budget's capacity (a demand
//! larger than the capacity is clamped to it), and releases everything when it ends.

use std::sync::{Arc, OnceLock};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::options::EnvDefaults;

/// Byte budgets count in KiB so that large budgets fit a semaphore's `u32` acquisitions.
const BYTE_UNIT: usize = 1024;

/// A semaphore with a known capacity.
#[derive(Debug, Clone)]
struct Pool {
    semaphore: Arc<Semaphore>,
    capacity: usize,
}

impl Pool {
    fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, u32::MAX as usize);
        Self {
            semaphore: Arc::new(Semaphore::new(capacity)),
            capacity,
        }
    }

    async fn acquire(&self, units: usize) -> OwnedSemaphorePermit {
        let units = units.clamp(1, self.capacity) as u32;
        Arc::clone(&self.semaphore)
            .acquire_many_owned(units)
            .await
            .expect("budget semaphores are never closed")
    }
}

fn global() -> &'static (Pool, Pool, Pool) {
    static GLOBAL: OnceLock<(Pool, Pool, Pool)> = OnceLock::new();
    GLOBAL.get_or_init(|| {
        let env = EnvDefaults::get();
        (
            Pool::new(env.process_max_parallel_partitions),
            Pool::new(env.process_max_parallel_files),
            Pool::new(env.process_max_buffered_bytes / BYTE_UNIT),
        )
    })
}

/// The budgets of one call, each layered over the process-global one.
#[derive(Debug, Clone)]
pub(crate) struct CallBudget {
    partitions: Pool,
    files: Pool,
    bytes: Pool,
}

/// Permits held while a unit of work runs; dropping it releases them.
#[derive(Debug)]
pub(crate) struct Held {
    _permits: Vec<OwnedSemaphorePermit>,
}

impl CallBudget {
    pub(crate) fn new(partitions: usize, files: usize, bytes: usize) -> Self {
        Self {
            partitions: Pool::new(partitions),
            files: Pool::new(files),
            bytes: Pool::new(bytes / BYTE_UNIT),
        }
    }

    /// A partition slot (call, then process).
    pub(crate) async fn partition(&self) -> Held {
        let local = self.partitions.acquire(1).await;
        let global = global().0.acquire(1).await;
        Held {
            _permits: vec![local, global],
        }
    }

    /// A file slot plus `bytes` of buffer (call, then process, for each).
    pub(crate) async fn file(&self, bytes: usize) -> Held {
        let units = bytes.div_ceil(BYTE_UNIT);
        let local_file = self.files.acquire(1).await;
        let global_file = global().1.acquire(1).await;
        let local_bytes = self.bytes.acquire(units).await;
        let global_bytes = global().2.acquire(units).await;
        Held {
            _permits: vec![local_file, global_file, local_bytes, global_bytes],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::MIB;

    #[tokio::test]
    async fn oversized_demands_are_clamped_instead_of_hanging() {
        let budget = CallBudget::new(1, 1, 4 * BYTE_UNIT);
        // 64 KiB against a 4 KiB call budget: clamped locally (the process pool is shared
        // with other tests, so the demand stays small there).
        let held = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            budget.file(64 * BYTE_UNIT),
        )
        .await
        .expect("a demand above capacity must be clamped, not wait forever");
        drop(held);
        // Capacity comes back once the holder is gone.
        tokio::time::timeout(std::time::Duration::from_secs(5), budget.file(BYTE_UNIT))
            .await
            .expect("permits are released on drop");
    }

    #[tokio::test]
    async fn call_budget_bounds_concurrency() {
        let budget = CallBudget::new(1, 2, MIB);
        let a = budget.file(1).await;
        let _b = budget.file(1).await;
        let third = tokio::time::timeout(std::time::Duration::from_millis(100), budget.file(1));
        assert!(third.await.is_err(), "a third file slot must wait");
        drop(a);
        tokio::time::timeout(std::time::Duration::from_secs(5), budget.file(1))
            .await
            .expect("slot freed");
    }
}
