//! Process resources: budgets shared by concurrent calls and the allocator settings.

pub mod alloc;
pub mod budget;
