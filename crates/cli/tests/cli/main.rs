//! The CLI's integration tests, against real `deltalite` processes, one module per concern,
//! linked into one test binary: each binary links the server, DataFusion and delta-rs, so
//! one binary instead of seven saves disk and linking time in CI.

mod common;

mod data_commands;
mod flight;
mod hostile;
mod operate;
mod server;
mod table_commands;
mod trust;
