//! The catalog listings (`information_schema.tables`/`.columns`, `duckdb_tables()`,
//! `duckdb_views()`, `duckdb_columns()`) open only the relations a statement's filters on
//! names leave (`sql/catalog_view.rs`), and answer exactly what filtering every
//! relation's rows gives.

use deltalite_testkit::store::{Fault, Op, Target};
use serde_json::{Value, json};

use crate::transient::{FlightCall, InProcess, flight_batches, free_address};

/// `raw.a`, `raw.b` (never opened by a query until the end), `marts.c`, and views
/// `marts.va` over `a` and `marts.vb` over `b`; `a` has a comment. `raw` also holds two
/// folders that are no table.
fn lake() -> InProcess {
    lake_with(InProcess::start())
}

fn lake_with(s: InProcess) -> InProcess {
    for statement in [
        "CREATE SCHEMA raw",
        "CREATE SCHEMA marts",
        "CREATE TABLE raw.a (id BIGINT, v VARCHAR)",
        "INSERT INTO raw.a VALUES (1, 'x')",
        "COMMENT ON TABLE raw.a IS 'the a table'",
        "CREATE TABLE raw.b (id BIGINT, w DOUBLE, z DATE)",
        "CREATE TABLE marts.c (k VARCHAR)",
        "CREATE VIEW marts.va AS SELECT id, v FROM raw.a",
        "CREATE VIEW marts.vb AS SELECT w FROM raw.b",
    ] {
        assert_eq!(s.sql(statement).status().as_u16(), 200, "{statement}");
    }
    // Folders that are no table: a leftover, and another writer's that no statement
    // could name. Listings skip both.
    let raw = s.table("a").join("../../raw");
    for leftover in ["a_leftover", "a%bad"] {
        std::fs::create_dir_all(raw.join(leftover).join("data")).expect("leftover");
    }
    s
}

/// Make every read of `raw.b`'s log fail: opening it, or planning the view over it, fails.
fn fail_b(s: &InProcess) {
    for version in 0..2u64 {
        s.store.inject(
            Op::Get,
            Target::File(format!("raw/b/_delta_log/{version:020}.json")),
            1,
            usize::MAX,
            Fault::Fail,
        );
    }
}

#[test]
fn a_listing_filtered_by_name_opens_only_the_relations_it_names() {
    let s = lake();
    let text = |v: &[&str]| v.iter().map(|x| json!(x)).collect::<Vec<Value>>();
    let cases: Vec<(&str, Vec<Vec<Value>>)> = vec![
        // dbt-altertable's get_columns_in_relation.
        (
            "select column_name, data_type from duckdb_columns() where table_name = 'a' \
             and lower(schema_name) = lower('raw') and lower(database_name) = lower('lakehouse') \
             order by column_index",
            vec![text(&["id", "BIGINT"]), text(&["v", "VARCHAR"])],
        ),
        // Its list_relations_without_caching: marts holds c and both views; planning
        // `vb` is not needed to list it.
        (
            "select 'lakehouse' as database, table_name as name, schema_name as schema, 'table' as type \
             from duckdb_tables() where lower(schema_name) = 'marts' and lower(database_name) = 'lakehouse' \
             union all select 'lakehouse', view_name, schema_name, 'view' from duckdb_views() \
             where lower(schema_name) = 'marts' and lower(database_name) = 'lakehouse' order by 2",
            vec![
                text(&["lakehouse", "c", "marts", "table"]),
                text(&["lakehouse", "va", "marts", "view"]),
                text(&["lakehouse", "vb", "marts", "view"]),
            ],
        ),
        // A view's columns: `va` is planned, `vb` is not.
        (
            "select table_name, column_name from information_schema.columns \
             where table_name in ('a', 'va') order by 1, ordinal_position",
            vec![
                text(&["a", "id"]),
                text(&["a", "v"]),
                text(&["va", "id"]),
                text(&["va", "v"]),
            ],
        ),
        (
            "select table_name, table_type, table_comment from information_schema.tables \
             where table_schema = 'raw' and table_name like 'a%'",
            vec![vec![json!("a"), json!("BASE TABLE"), json!("the a table")]],
        ),
        // By type: the views of every schema, none opened or planned.
        (
            "select table_schema, table_name from information_schema.tables \
             where table_type = 'VIEW' order by 2",
            vec![text(&["marts", "va"]), text(&["marts", "vb"])],
        ),
        // Under an alias, joined as dbt's catalog query joins them.
        (
            "select t.table_name, t.comment, c.column_name from duckdb_tables() t \
             join duckdb_columns() c on t.table_name = c.table_name and t.schema_name = c.schema_name \
             where upper(t.database_name) = upper('lakehouse') and t.table_name = 'a' order by 3",
            vec![
                vec![json!("a"), json!("the a table"), json!("id")],
                vec![json!("a"), json!("the a table"), json!("v")],
            ],
        ),
        // Wrapped in a CTE and a derived table.
        (
            "with c as (select * from duckdb_columns()) select x.column_name from \
             (select * from c where table_name = 'a') x order by 1",
            vec![text(&["id"]), text(&["v"])],
        ),
        // Over Flight, a prepared statement's parameter is a literal by planning time
        // (`sql/params.rs`); here, a scalar the optimizer folds.
        (
            "select count(*) from duckdb_columns() where table_name = concat('c', '')",
            vec![vec![json!(1)]],
        ),
    ];
    for (query, expected) in cases {
        fail_b(&s);
        assert_eq!(s.rows(query), expected, "{query}");
        assert_eq!(s.store.take_fired(), 0, "{query}: raw.b's log was read");
    }
    // Run under EXPLAIN ANALYZE, the listing loads the same way.
    fail_b(&s);
    let plan =
        s.rows("explain analyze select count(*) from duckdb_columns() where table_name = 'a'");
    assert!(format!("{plan:?}").contains("output_rows=2"), "{plan:?}");
    assert_eq!(
        s.store.take_fired(),
        0,
        "EXPLAIN ANALYZE: raw.b's log was read"
    );
    // The faults are real: a listing that needs `b` fails on them, with the store's
    // error, as transient. A filter that reads more than names prunes nothing (`b` has
    // a column `w`).
    for query in [
        "select count(*) from duckdb_columns()",
        "select count(*) from information_schema.columns where table_name = 'vb'",
        "select count(*) from information_schema.columns where table_name = 'a' or column_name = 'w'",
    ] {
        fail_b(&s);
        let r = s.sql(query);
        let status = r.status().as_u16();
        let body = r.text().expect("body");
        assert_eq!(status, 503, "{query}: {body}");
        assert!(body.contains("injected"), "{query}: {body}");
        assert!(s.store.take_fired() > 0, "{query}");
    }
}

/// Make every read of a table's log fail.
fn fail_logs(s: &InProcess) {
    s.store
        .inject(Op::Get, Target::Commit, 1, usize::MAX, Fault::Fail);
}

/// Only a table's comment and column count need it opened (and only a view's `sql` its
/// definition, which the testkit store does not see: the differential test below covers
/// what such statements answer).
#[test]
fn a_listing_that_reads_only_names_opens_no_table() {
    let s = lake();
    let text = |v: &[&str]| v.iter().map(|x| json!(x)).collect::<Vec<Value>>();
    let cases: Vec<(&str, Vec<Vec<Value>>)> = vec![
        (
            "select table_name from information_schema.tables where table_schema = 'raw' \
             order by 1",
            vec![text(&["a"]), text(&["b"])],
        ),
        (
            "select table_schema, table_name, table_type from information_schema.tables \
             where table_schema <> 'information_schema' order by 1, 2",
            vec![
                text(&["marts", "c", "BASE TABLE"]),
                text(&["marts", "va", "VIEW"]),
                text(&["marts", "vb", "VIEW"]),
                text(&["raw", "a", "BASE TABLE"]),
                text(&["raw", "b", "BASE TABLE"]),
            ],
        ),
        ("select count(*) from duckdb_tables()", vec![vec![json!(3)]]),
        (
            "select count(*) from information_schema.tables",
            vec![vec![json!(5)]],
        ),
        // dbt-altertable's list_relations_without_caching reads names only.
        (
            "select 'lakehouse' as database, table_name as name, schema_name as schema, 'table' as type \
             from duckdb_tables() where lower(schema_name) = 'marts' and lower(database_name) = 'lakehouse' \
             union all select 'lakehouse', view_name, schema_name, 'view' from duckdb_views() \
             where lower(schema_name) = 'marts' and lower(database_name) = 'lakehouse' order by 2",
            vec![
                text(&["lakehouse", "c", "marts", "table"]),
                text(&["lakehouse", "va", "marts", "view"]),
                text(&["lakehouse", "vb", "marts", "view"]),
            ],
        ),
        (
            "select x.view_name from (select * from duckdb_views()) x order by 1",
            vec![text(&["va"]), text(&["vb"])],
        ),
    ];
    for (query, expected) in cases {
        fail_logs(&s);
        assert_eq!(s.rows(query), expected, "{query}");
        assert_eq!(s.store.take_fired(), 0, "{query}: a table's log was read");
    }
    // The faults are real: a column that needs a table opened, read anywhere in the
    // statement (projected, filtered on, sorted by, aggregated), fails on them.
    for query in [
        "select table_name, comment from duckdb_tables() where schema_name = 'raw'",
        "select table_name from duckdb_tables() where column_count = 3",
        "select table_name from information_schema.tables order by table_comment, 1",
        "select sum(column_count) from duckdb_tables()",
        "select * from duckdb_tables()",
    ] {
        fail_logs(&s);
        let r = s.sql(query);
        let status = r.status().as_u16();
        let body = r.text().expect("body");
        assert_eq!(status, 503, "{query}: {body}");
        assert!(body.contains("injected"), "{query}: {body}");
        assert!(s.store.take_fired() > 0, "{query}");
    }
}

/// Every filter form, and every statement that reads only some columns, answers what it
/// gives over the whole listing, stored first as a table (by an `INSERT`, which loads it
/// whole): names compared in every way a predicate can, mixed with other columns, in
/// subqueries, joins of one listing with itself, and filters that cannot prune.
#[test]
fn a_filtered_listing_answers_what_the_whole_listing_filtered_answers() {
    let s = lake();
    assert_eq!(s.sql("CREATE SCHEMA oracle").status().as_u16(), 200);
    let listings = [
        (
            "duckdb_columns()",
            "database_name, schema_name, table_name, column_index",
        ),
        ("duckdb_tables()", "database_name, schema_name, table_name"),
        ("duckdb_views()", "database_name, schema_name, view_name"),
        (
            "information_schema.tables",
            "table_catalog, table_schema, table_name",
        ),
        (
            "information_schema.columns",
            "table_catalog, table_schema, table_name, ordinal_position",
        ),
    ];
    // Stored by an INSERT: a write loads the listings it reads whole, whatever the
    // statement reads of them, so the oracle does not depend on what pruning reads.
    for (i, (listing, _)) in listings.iter().enumerate() {
        for statement in [
            format!("CREATE TABLE oracle.l{i} AS SELECT * FROM {listing} LIMIT 0"),
            format!("INSERT INTO oracle.l{i} SELECT * FROM {listing}"),
        ] {
            assert_eq!(s.sql(&statement).status().as_u16(), 200, "{statement}");
        }
    }
    // `n` is the listing's relation-name column, `s` its schema column.
    let predicates = [
        "{n} = 'a'",
        "lower({s}) = lower('RAW')",
        "{n} in ('a', 'vb', 'nope')",
        "{n} like 'v%'",
        "{n} like 'a%'",
        "{n} = 'a' or {s} = 'marts'",
        "not ({n} <> 'c')",
        "{n} = 'nope'",
        "{n} is null",
        "length({n}) = 1 and {s} <> 'oracle'",
        "{n} = (select 'a')",
        "{n} in (select 'c' union all select 'va')",
        "coalesce(cast(null as varchar), {n}) = 'c'",
        "{n} = 'a' or {s} = {n}",
    ];
    for (i, (listing, order)) in listings.iter().enumerate() {
        let (n, sch) = if listing.starts_with("information_schema") {
            ("table_name", "table_schema")
        } else if listing.starts_with("duckdb_views") {
            ("view_name", "schema_name")
        } else {
            ("table_name", "schema_name")
        };
        for p in predicates {
            let p = p.replace("{n}", n).replace("{s}", sch);
            let live = format!(
                "SELECT * FROM {listing} WHERE ({p}) AND {sch} <> 'oracle' ORDER BY {order}"
            );
            let stored = format!(
                "SELECT * FROM oracle.l{i} WHERE ({p}) AND {sch} <> 'oracle' ORDER BY {order}"
            );
            assert_eq!(s.rows(&live), s.rows(&stored), "{live}");
        }
    }
    // Statements that read some of a listing's columns: the columns they read, anywhere
    // (filter, order, aggregate, join), have their values.
    let projections = [
        (
            "duckdb_tables()",
            "SELECT table_name FROM {l} WHERE column_count = 2 AND {s} ORDER BY 1",
        ),
        (
            "duckdb_tables()",
            "SELECT table_name FROM {l} WHERE comment IS NOT NULL AND {s}",
        ),
        (
            "duckdb_tables()",
            "SELECT schema_name, sum(column_count) FROM {l} WHERE {s} GROUP BY 1 ORDER BY 1",
        ),
        (
            "duckdb_tables()",
            "SELECT table_name FROM {l} WHERE {s} ORDER BY column_count DESC, table_name",
        ),
        ("duckdb_tables()", "SELECT count(*) FROM {l} WHERE {s}"),
        (
            "duckdb_views()",
            "SELECT view_name FROM {l} WHERE sql LIKE '%raw.b%' AND {s}",
        ),
        (
            "duckdb_views()",
            "SELECT view_name, length(sql) FROM {l} WHERE {s} ORDER BY 1",
        ),
        (
            "information_schema.tables",
            "SELECT table_name FROM {l} WHERE table_comment = 'the a table' AND {s}",
        ),
        (
            "information_schema.tables",
            "SELECT table_name, table_type FROM {l} WHERE {s} ORDER BY 1",
        ),
        (
            "information_schema.tables",
            "SELECT t.table_name FROM {l} t JOIN {l} u ON t.table_comment = u.table_comment \
             WHERE t.table_schema <> 'oracle' AND u.table_schema <> 'oracle'",
        ),
    ];
    for (listing, query) in projections {
        let i = listings
            .iter()
            .position(|(l, _)| *l == listing)
            .expect("listing");
        // The oracle's own tables are not in what was stored.
        let query = match listing {
            "information_schema.tables" => query.replace("{s}", "table_schema <> 'oracle'"),
            _ => query.replace("{s}", "schema_name <> 'oracle'"),
        };
        let live = query.replace("{l}", listing);
        let stored = query.replace("{l}", &format!("oracle.l{i}"));
        let rows = s.rows(&live);
        assert_eq!(rows, s.rows(&stored), "{live}");
    }
    // One listing read twice with different filters: each read keeps its own rows.
    let pair = |from: &str| {
        format!(
            "SELECT x.table_name, y.table_name, x.column_name FROM {from} x \
             JOIN {from} y ON x.column_name = y.column_name \
             WHERE x.table_name = 'a' AND y.table_name = 'va' ORDER BY 3"
        )
    };
    let both = s.rows(&pair("duckdb_columns()"));
    assert_eq!(both, s.rows(&pair("oracle.l0")));
    assert_eq!(
        both,
        vec![
            vec![json!("a"), json!("va"), json!("id")],
            vec![json!("a"), json!("va"), json!("v")],
        ]
    );
}

/// One row of Flight SQL `GetTables`: catalog, schema, name, type, and the column names
/// of its schema (empty without `include_schema`).
type FlightTable = (String, String, String, String, Vec<String>);

/// Flight SQL `GetTables` as alice, or the status of the call that failed.
fn flight_tables(
    addr: std::net::SocketAddr,
    cmd: arrow_flight::sql::CommandGetTables,
) -> Result<Vec<FlightTable>, tonic::Status> {
    use arrow::array::{Array, BinaryArray, StringArray};

    let batches = flight_batches(addr, FlightCall::Tables(cmd))?;
    let mut out = Vec::new();
    for b in batches {
        let text = |name: &str| {
            b.column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .expect(name)
                .clone()
        };
        let (c, s, n, t) = (
            text("catalog_name"),
            text("db_schema_name"),
            text("table_name"),
            text("table_type"),
        );
        let schemas = b.column_by_name("table_schema").map(|c| {
            c.as_any()
                .downcast_ref::<BinaryArray>()
                .expect("binary")
                .clone()
        });
        for i in 0..b.num_rows() {
            let columns = match &schemas {
                Some(bytes) if bytes.is_valid(i) => {
                    arrow::ipc::convert::try_schema_from_ipc_buffer(bytes.value(i))
                        .expect("an IPC schema")
                        .fields()
                        .iter()
                        .map(|f| f.name().clone())
                        .collect()
                }
                _ => Vec::new(),
            };
            out.push((
                c.value(i).to_string(),
                s.value(i).to_string(),
                n.value(i).to_string(),
                t.value(i).to_string(),
                columns,
            ));
        }
    }
    Ok(out)
}

/// Flight SQL `GetTables` lists what `information_schema` lists, its tables opened a few
/// at once in the order it lists them, and with a name pattern opens only the tables the
/// pattern keeps.
#[test]
fn flight_get_tables_lists_what_information_schema_lists() {
    use arrow_flight::sql::CommandGetTables;

    let flight = free_address();
    let s = lake_with(InProcess::start_with(|c| c.flight_listen = Some(flight)));
    // More tables than are opened at once; and a readable table in a folder no statement
    // could name (another writer's), which neither lists.
    for i in 0..12 {
        let statement = format!("CREATE TABLE marts.m{i:02} (k{i} INT, w VARCHAR)");
        assert_eq!(s.sql(&statement).status().as_u16(), 200, "{statement}");
    }
    let raw = s.table("a").join("../../raw");
    let copy = std::process::Command::new("cp")
        .args(["-r"])
        .arg(raw.join("a/_delta_log"))
        .arg(raw.join("a%bad/_delta_log"))
        .status()
        .expect("cp");
    assert!(copy.success());

    // Before anything opens `b`: with its log unreadable, a pattern that leaves `b` out
    // never reads it.
    fail_b(&s);
    let a = CommandGetTables {
        db_schema_filter_pattern: Some("raw".into()),
        table_name_filter_pattern: Some("a%".into()),
        include_schema: true,
        ..Default::default()
    };
    let a_only: Vec<FlightTable> = vec![(
        "lakehouse".into(),
        "raw".into(),
        "a".into(),
        "TABLE".into(),
        vec!["id".into(), "v".into()],
    )];
    assert_eq!(flight_tables(flight, a).expect("a"), a_only);
    assert_eq!(s.store.take_fired(), 0, "b's log was read");
    // One that keeps `b` needs its log: the injected failure, retryable.
    fail_b(&s);
    let all = CommandGetTables {
        include_schema: true,
        ..Default::default()
    };
    let failed = flight_tables(flight, all).expect_err("b's log cannot be read");
    assert_eq!(failed.code(), tonic::Code::Unavailable, "{failed:?}");
    assert!(
        failed.message().contains("injected fault: get failed"),
        "{failed:?}"
    );
    assert!(s.store.take_fired() > 0);

    let listed: Vec<FlightTable> = {
        let columns = s.rows(
            "SELECT table_catalog, table_schema, table_name, \
             string_agg(column_name, ',' ORDER BY ordinal_position) \
             FROM information_schema.columns GROUP BY 1, 2, 3",
        );
        let tables = s.rows(
            "SELECT table_catalog, table_schema, table_name, table_type \
             FROM information_schema.tables WHERE table_schema <> 'information_schema' \
             ORDER BY 1, 2, 4, 3",
        );
        tables
            .into_iter()
            .map(|r| {
                let text = |v: &Value| v.as_str().expect("text").to_string();
                let columns = columns
                    .iter()
                    .find(|c| c[..3] == r[..3])
                    .map(|c| text(&c[3]).split(',').map(str::to_string).collect())
                    .expect("columns");
                let kind = match text(&r[3]).as_str() {
                    "BASE TABLE" => "TABLE".to_string(),
                    other => other.to_string(),
                };
                (text(&r[0]), text(&r[1]), text(&r[2]), kind, columns)
            })
            .collect()
    };
    assert_eq!(listed.len(), 17, "{listed:?}");
    assert!(!listed.iter().any(|t| t.2.contains('%')), "{listed:?}");

    let all = CommandGetTables {
        include_schema: true,
        ..Default::default()
    };
    assert_eq!(flight_tables(flight, all).expect("all"), listed);
    let names_only = CommandGetTables::default();
    let without: Vec<FlightTable> = listed
        .iter()
        .map(|(c, s, n, t, _)| (c.clone(), s.clone(), n.clone(), t.clone(), Vec::new()))
        .collect();
    assert_eq!(flight_tables(flight, names_only).expect("names"), without);
}
