//! Engine benchmark (not a test): tables of N million rows in 4 partitions (~60 bytes of
//! random payload per row, written in 1M-row appends), then one 20,000-row upsert per
//! table (half uniform updates, half inserts), each step in a fresh process so that peak
//! RSS (VmHWM) belongs to that step alone.
//!
//! `engine-bench run --sizes 1,4,16 --dir /tmp/deltalite-bench` prints one line per size;
//! with `--deletion-vectors`, two: copy-on-write, then the same upsert on a copy of the
//! table with `delta.enableDeletionVectors=true` (merge-on-read). With `--load upsert` the
//! base tables are loaded by upserts instead (as a merge table's loads write them, key
//! columns laid out for lookups), in their own folders (`base_<N>m_upserted`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, Subcommand};
use deltalite::arrow::array::{ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::write::WriteOptions;
use deltalite::{DeltaLiteTable, UpsertOptions};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

const MILLION: i64 = 1_000_000;
const PARTITIONS: i64 = 4;
const PAYLOAD_BYTES: usize = 60;
const BATCH_ROWS: i64 = 20_000;

#[derive(Parser)]
#[command(about = "Benchmark deltalite upserts against growing tables")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build (if missing) and upsert once into each table size; print a table.
    Run {
        /// Table sizes in millions of rows.
        #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
        sizes: Vec<i64>,
        /// Where base tables live (built once, copied for every upsert).
        #[arg(long, default_value = "/tmp/deltalite-bench")]
        dir: PathBuf,
        /// Also run each upsert on a copy with deletion vectors enabled.
        #[arg(long)]
        deletion_vectors: bool,
        /// How the base tables are loaded.
        #[arg(long, value_enum, default_value = "append")]
        load: Load,
        #[command(flatten)]
        knobs: KnobArgs,
    },
    /// Build one table of `millions` rows (child step).
    Build {
        #[arg(long)]
        millions: i64,
        #[arg(long)]
        table: PathBuf,
        #[arg(long, value_enum, default_value = "append")]
        load: Load,
    },
    /// Upsert one 20,000-row batch (child step); prints a JSON line.
    Upsert {
        #[arg(long)]
        millions: i64,
        #[arg(long)]
        table: PathBuf,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Enable deletion vectors on the table first (not timed).
        #[arg(long)]
        deletion_vectors: bool,
        /// Upserts in this process, seeds `seed..seed+repeat`, one JSON line each: the
        /// later ones run with the process-wide probe cache the earlier ones filled.
        #[arg(long, default_value_t = 1)]
        repeat: u64,
        /// Fill the probe cache in the background after each upsert (as the server
        /// does), and wait for the fill before the next upsert (not timed). Size the
        /// cache with `DELTALITE_PROBE_CACHE_BYTES`.
        #[arg(long)]
        fill_cache: bool,
        #[command(flatten)]
        knobs: KnobArgs,
    },
}

/// How a base table's million-row batches go in.
#[derive(clap::ValueEnum, Clone, Copy)]
enum Load {
    /// Appends: files laid out as plain writes lay them out.
    Append,
    /// Upserts keyed on `id`: the key column gets the lookup layout (small pages, bloom
    /// filters), as in a table that merge loads filled.
    Upsert,
}

impl Load {
    fn name(self) -> &'static str {
        match self {
            Load::Append => "append",
            Load::Upsert => "upsert",
        }
    }
}

/// The memory-relevant upsert knobs (seed defaults).
#[derive(clap::Args, Clone, Copy)]
struct KnobArgs {
    /// Files read/rewritten concurrently.
    #[arg(long, default_value_t = 4)]
    max_parallel_files: usize,
    /// Partitions merged concurrently.
    #[arg(long, default_value_t = 2)]
    max_parallel_partitions: usize,
    /// Buffer budget in MiB.
    #[arg(long, default_value_t = 64)]
    max_buffered_mb: usize,
}

impl KnobArgs {
    fn args(&self) -> Vec<String> {
        vec![
            "--max-parallel-files".into(),
            self.max_parallel_files.to_string(),
            "--max-parallel-partitions".into(),
            self.max_parallel_partitions.to_string(),
            "--max-buffered-mb".into(),
            self.max_buffered_mb.to_string(),
        ]
    }
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("part", DataType::Utf8, false),
        Field::new("payload", DataType::Binary, false),
    ]))
}

fn rows(ids: &[i64], rng: &mut StdRng) -> RecordBatch {
    let parts: Vec<String> = ids.iter().map(|i| format!("p{}", i % PARTITIONS)).collect();
    let mut payload = vec![0u8; ids.len() * PAYLOAD_BYTES];
    rng.fill_bytes(&mut payload);
    let payloads: Vec<&[u8]> = payload.chunks(PAYLOAD_BYTES).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef,
            Arc::new(StringArray::from(parts)) as ArrayRef,
            Arc::new(BinaryArray::from(payloads)) as ArrayRef,
        ],
    )
    .expect("valid batch")
}

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn uri(p: &Path) -> String {
    p.to_str().expect("utf-8 path").to_string()
}

async fn build(millions: i64, table: &Path, load: Load) -> deltalite::Result<()> {
    let mut t = DeltaLiteTable::create(
        &uri(table),
        HashMap::new(),
        &schema(),
        &["part".to_string()],
        HashMap::new(),
    )
    .await?;
    let mut rng = StdRng::seed_from_u64(1);
    for m in 0..millions {
        let ids: Vec<i64> = (m * MILLION..(m + 1) * MILLION).collect();
        let b = rows(&ids, &mut rng);
        match load {
            Load::Append => {
                t.append([Ok(b)], &WriteOptions::default()).await?;
            }
            Load::Upsert => {
                let mut o = UpsertOptions::new(["id"]);
                o.partition_key = Some(vec!["part".into()]);
                t.upsert(&b.schema(), &[b], &o).await?;
            }
        }
        eprintln!("built {}M/{}M rows", m + 1, millions);
    }
    Ok(())
}

/// Turn deletion vectors on (before the timed upserts).
async fn enable_deletion_vectors(table: &Path) -> deltalite::Result<()> {
    let mut t = DeltaLiteTable::open(&uri(table), HashMap::new()).await?;
    let enable = deltalite::MetadataChange::Property {
        key: deltalite::DELETION_VECTORS_PROPERTY.into(),
        value: Some("true".into()),
    };
    t.change_metadata(&[enable], 0).await?;
    Ok(())
}

async fn upsert_once(
    millions: i64,
    table: &Path,
    seed: u64,
    knobs: KnobArgs,
) -> deltalite::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    let existing = millions * MILLION;
    let half = BATCH_ROWS / 2;
    let mut ids: Vec<i64> = (0..half).map(|_| rng.random_range(0..existing)).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.extend((0..half).map(|i| existing * 10 + seed as i64 * BATCH_ROWS + i));
    let b = rows(&ids, &mut rng);
    let started = Instant::now();
    let mut t = DeltaLiteTable::open(&uri(table), HashMap::new()).await?;
    let mut o = UpsertOptions::new(["id"]);
    o.partition_key = Some(vec!["part".into()]);
    o.knobs.max_parallel_files = knobs.max_parallel_files;
    o.knobs.max_parallel_partitions = knobs.max_parallel_partitions;
    o.knobs.max_buffered_bytes = knobs.max_buffered_mb << 20;
    let s = t.upsert(&b.schema(), &[b], &o).await?;
    let wall = started.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "rows_m": millions, "wall_s": wall, "peak_rss_mb": peak_rss_mb(),
            "files_probed": s.files_probed,
            "files_rewritten": s.files_removed - s.files_marked, "files_marked": s.files_marked,
            "files_carried_over": s.files_carried_over, "files_added": s.files_added,
            "rows_updated": s.rows_updated, "rows_inserted": s.rows_inserted,
            "rows_copied": s.rows_copied,
            "prepare_s": s.timings.prepare.as_secs_f64(), "prune_s": s.timings.prune.as_secs_f64(),
            "write_s": s.timings.write.as_secs_f64(), "commit_s": s.timings.commit.as_secs_f64(),
            "open_s": s.timings.initial_open.as_secs_f64(), "total_s": s.timings.total.as_secs_f64(),
            "relax_s": s.timings.relax.as_secs_f64(), "reload_s": s.timings.reload.as_secs_f64(),
            "maintenance_s": s.timings.maintenance.as_secs_f64(),
            "files_probe_cached": s.files_probe_cached,
        })
    );
    Ok(())
}

fn child(args: &[String]) -> String {
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(exe).args(args).output().expect("spawn child");
    if !out.status.success() {
        panic!(
            "child {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
            // Flushed now, so the upsert does not compete with the copy's writeback.
            std::fs::File::open(&target)?.sync_all()?;
        }
    }
    Ok(())
}

fn run(sizes: &[i64], dir: &Path, knobs: KnobArgs, deletion_vectors: bool, load: Load) {
    std::fs::create_dir_all(dir).expect("bench dir");
    println!(
        "{:>6} {:>4} {:>8} {:>9} {:>7} {:>10} {:>7} {:>12} {:>6} {:>8} {:>8}",
        "rows",
        "mode",
        "wall_s",
        "peak_MB",
        "probed",
        "rewritten",
        "marked",
        "carried_over",
        "added",
        "updated",
        "inserted"
    );
    let mut peaks: Vec<(i64, f64)> = Vec::new();
    for &m in sizes {
        let base = match load {
            Load::Append => dir.join(format!("base_{m}m")),
            Load::Upsert => dir.join(format!("base_{m}m_upserted")),
        };
        if !base.join("_delta_log").is_dir() {
            eprintln!("building {m}M-row table at {}", base.display());
            child(&[
                "build".into(),
                "--millions".into(),
                m.to_string(),
                "--table".into(),
                uri(&base),
                "--load".into(),
                load.name().into(),
            ]);
        }
        let modes: &[bool] = if deletion_vectors {
            &[false, true]
        } else {
            &[false]
        };
        for &dv in modes {
            // Upsert into a fresh copy, so every run measures the same table.
            let table = dir.join(format!("run_{m}m"));
            if table.exists() {
                std::fs::remove_dir_all(&table).expect("remove the previous run's copy");
            }
            copy_dir(&base, &table).expect("copy the base table");
            let mut args = vec![
                "upsert".into(),
                "--millions".into(),
                m.to_string(),
                "--table".into(),
                uri(&table),
            ];
            if dv {
                args.push("--deletion-vectors".into());
            }
            args.extend(knobs.args());
            let line = child(&args);
            let v: serde_json::Value = serde_json::from_str(line.trim()).expect("child JSON");
            let rss = v["peak_rss_mb"].as_f64().unwrap_or(0.0);
            if !dv {
                peaks.push((m, rss));
            }
            println!(
                "{:>5}M {:>4} {:>8.2} {:>9.1} {:>7} {:>10} {:>7} {:>12} {:>6} {:>8} {:>8}",
                m,
                if dv { "dv" } else { "cow" },
                v["wall_s"].as_f64().unwrap_or(0.0),
                rss,
                v["files_probed"],
                v["files_rewritten"],
                v["files_marked"],
                v["files_carried_over"],
                v["files_added"],
                v["rows_updated"],
                v["rows_inserted"]
            );
        }
    }
    if let (Some((m0, r0)), Some((m1, r1))) = (peaks.first(), peaks.last())
        && *r0 > 0.0
    {
        println!("peak RSS at {m1}M rows / at {m0}M rows = {:.2}x", r1 / r0);
    }
}

fn main() {
    deltalite::alloc::tune_malloc(deltalite::alloc::Workload::Bulk);
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match cli.command {
        Cmd::Run {
            sizes,
            dir,
            deletion_vectors,
            load,
            knobs,
        } => run(&sizes, &dir, knobs, deletion_vectors, load),
        Cmd::Build {
            millions,
            table,
            load,
        } => rt.block_on(build(millions, &table, load)).expect("build"),
        Cmd::Upsert {
            millions,
            table,
            seed,
            deletion_vectors,
            repeat,
            fill_cache,
            knobs,
        } => rt
            .block_on(async {
                if deletion_vectors {
                    enable_deletion_vectors(&table).await?;
                }
                let cache = deltalite::runtime::probe_cache::ProbeCache::global();
                cache.set_background_fill(fill_cache);
                for seed in seed..seed + repeat {
                    upsert_once(millions, &table, seed, knobs).await?;
                    let settled = Instant::now();
                    cache.settle().await;
                    if fill_cache {
                        let s = cache.stats();
                        eprintln!(
                            "cache settled in {:.3} s: {} entries, {} MB, {} filled",
                            settled.elapsed().as_secs_f64(),
                            s.entries,
                            s.bytes >> 20,
                            s.filled
                        );
                    }
                }
                Ok::<(), deltalite::DeltaLiteError>(())
            })
            .expect("upsert"),
    }
}
