//! A statement's temporary change to its session's DataFusion options, undone when the
//! guard drops (also when the statement's future is dropped half-way: a Flight session
//! outlives its statements).

use datafusion::config::ConfigOptions;
use datafusion::execution::memory_pool::MemoryLimit;
use datafusion::prelude::SessionContext;

pub(super) struct OptionsOverride {
    /// A handle on the same session state (a context's clones share it).
    ctx: SessionContext,
    before: ConfigOptions,
}

impl OptionsOverride {
    /// Apply `change` to the session's options until the guard drops.
    pub(super) fn set(ctx: &SessionContext, change: impl FnOnce(&mut ConfigOptions)) -> Self {
        let state = ctx.state_ref();
        let mut state = state.write();
        let options = state.config_mut().options_mut();
        let before = options.clone();
        change(options);
        Self {
            ctx: ctx.clone(),
            before,
        }
    }

    /// Plan with one partition: the rows of a scan keep their file order.
    pub(super) fn one_partition(ctx: &SessionContext) -> Self {
        Self::set(ctx, |o| o.execution.target_partitions = 1)
    }

    /// Join with sort-merge joins, whose sorts spill to disk, instead of hash joins,
    /// whose build side must fit in the memory pool (DataFusion's hash joins do not spill).
    /// Each sort sets aside memory for merging its spilled runs before it spills (10 MB
    /// by default): with a sort per input per partition that alone can fill a small pool,
    /// so the share is capped at an eighth of the pool per partition.
    pub(super) fn spilling_joins(ctx: &SessionContext) -> Self {
        let pool = match ctx.runtime_env().memory_pool.memory_limit() {
            MemoryLimit::Finite(bytes) => Some(bytes),
            MemoryLimit::Infinite | MemoryLimit::Unknown => None,
        };
        Self::set(ctx, |o| {
            o.optimizer.prefer_hash_join = false;
            if let Some(pool) = pool {
                let partitions = o.execution.target_partitions.max(1);
                let share = pool / (8 * partitions);
                let reserved = &mut o.execution.sort_spill_reservation_bytes;
                *reserved = (*reserved).min(share);
            }
        })
    }
}

impl Drop for OptionsOverride {
    fn drop(&mut self) {
        let before = std::mem::take(&mut self.before);
        *self.ctx.state_ref().write().config_mut().options_mut() = before;
    }
}
