//! The server's per-request memory that outlives a request: the query log behind
//! `GET /query/{id}` (with the cancellation handles of running queries) and the task ids
//! of `/append`. Both are bounded, oldest first out, because a long-running server sees
//! an unbounded number of requests: the query log by entry count and by the bytes its
//! entries hold, the task list by entry count.

use std::collections::{HashMap, VecDeque};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Longest statement text kept in a log entry (the rest is cut off).
pub const MAX_LOGGED_STATEMENT_BYTES: usize = 64 * 1024;
/// Longest error message kept in a log entry.
pub const MAX_LOGGED_ERROR_BYTES: usize = 16 * 1024;
/// Longest `User-Agent` kept in a log entry.
pub const MAX_LOGGED_USER_AGENT_BYTES: usize = 1024;
/// A `requested_by` value larger than this (as JSON) is logged as `null`: it comes from
/// the request body, which may be megabytes.
pub const MAX_LOGGED_REQUESTED_BY_BYTES: usize = 4 * 1024;
/// Default of [`QueryLog`]'s entry cap (`--query-log-entries`).
pub const DEFAULT_QUERY_LOG_ENTRIES: usize = 10_000;
/// Default of [`QueryLog`]'s byte budget (`--query-log-mb`).
pub const DEFAULT_QUERY_LOG_BYTES: usize = 16 * deltalite::MIB;
/// Task ids `/append` remembers for `GET /tasks/{id}`.
pub const MAX_TASKS: usize = 10_000;

/// Cut `s` to at most `max_bytes`, on a character boundary.
pub fn truncate_chars(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut end = max_bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// What a new query's log entry starts with.
#[derive(Debug, Clone)]
pub struct QueryStart {
    /// The interface the query came through.
    pub interface: ClientInterface,
    /// The query id (given by the client or generated).
    pub query_id: String,
    /// The user who ran it; only that user may read or cancel it.
    pub user: String,
    /// The session id (given or generated).
    pub session_id: String,
    /// The statement (cut to [`MAX_LOGGED_STATEMENT_BYTES`] when logged).
    pub statement: String,
    /// ISO-8601 start time.
    pub start_time: String,
    /// The request's `visible` flag.
    pub visible: bool,
    /// The request's `requested_by` value.
    pub requested_by: Option<Value>,
    /// The request's `User-Agent`.
    pub user_agent: Option<String>,
}

/// The interface a logged query came through, named as Altertable's query log names it
/// (clients validate the value against exactly these names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ClientInterface {
    /// `POST /query`.
    HttpQuery,
    /// Arrow Flight SQL.
    ArrowFlightSQL,
}

/// One query's log entry. Typed rather than a `serde_json::Value` map: a JSON object of
/// fourteen fields costs a few KiB on the heap, this a few hundred bytes plus the text.
struct QueryEntry {
    interface: ClientInterface,
    user: String,
    session_id: String,
    token: CancellationToken,
    running: bool,
    start_time: String,
    end_time: Option<String>,
    duration_ms: Option<u64>,
    query: String,
    error: Option<String>,
    visible: bool,
    requested_by: Value,
    user_agent: Option<String>,
    rows: Option<u64>,
}

impl QueryEntry {
    /// Heap bytes this entry holds, approximately, with its key (stored twice: map and
    /// eviction order) and the fixed part.
    fn bytes(&self, id: &str) -> usize {
        std::mem::size_of::<Self>()
            + 2 * id.len()
            + self.user.len()
            + self.session_id.len()
            + self.start_time.len()
            + self.end_time.as_ref().map_or(0, String::len)
            + self.query.len()
            + self.error.as_ref().map_or(0, String::len)
            + self.user_agent.as_ref().map_or(0, String::len)
            + if self.requested_by.is_null() {
                0
            } else {
                // Serialized length as a proxy for the tree's size; capped on insert.
                self.requested_by.to_string().len()
            }
    }

    fn to_json(&self, id: &str) -> Value {
        json!({
            "uuid": id,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "duration_ms": self.duration_ms,
            "query": self.query,
            "session_id": self.session_id,
            "client_interface": self.interface,
            "error": self.error,
            "visible": self.visible,
            "requested_by": self.requested_by,
            "user_agent": self.user_agent,
            // An object, never null: clients model it as a map with an empty default.
            "stats": self.rows.map_or_else(|| json!({}), |rows| json!({"rows": rows})),
            "progress": null,
        })
    }
}

/// The query log: every query's entry for `GET /query/{id}`, and the cancellation token
/// of each running one for `DELETE /query/{id}`.
///
/// Bounded by `max_entries` entries and about `max_bytes` of held text: past either, the
/// oldest finished entries are dropped (their ids answer 404 afterwards). Running queries
/// are not dropped, so they stay cancellable; they are bounded by the requests in flight.
pub struct QueryLog {
    entries: HashMap<String, QueryEntry>,
    /// Ids, oldest first; each id once.
    order: VecDeque<String>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

/// A query id that already names another user's query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("query_id is already in use; choose another")]
pub struct QueryIdTaken;

/// The answer to a cancellation request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancel {
    /// The query was running and is now cancelled.
    Cancelled,
    /// The query exists but has finished.
    AlreadyFinished,
    /// No such query of this user (and session, when given).
    NotFound,
}

impl QueryLog {
    /// An empty log holding at most `max_entries` entries and about `max_bytes`.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            entries: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            max_entries: max_entries.max(1),
            max_bytes,
        }
    }

    /// Log a starting query. A running query of the same user with the same id is
    /// cancelled and its entry replaced (query ids name one query at a time). An id that
    /// names another user's entry is refused: reusing it would cancel that user's query,
    /// or drop their log entry.
    pub fn start(&mut self, q: QueryStart, token: CancellationToken) -> Result<(), QueryIdTaken> {
        if self
            .entries
            .get(&q.query_id)
            .is_some_and(|existing| existing.user != q.user)
        {
            return Err(QueryIdTaken);
        }
        let requested_by = q
            .requested_by
            .filter(|v| v.to_string().len() <= MAX_LOGGED_REQUESTED_BY_BYTES)
            .unwrap_or(Value::Null);
        let entry = QueryEntry {
            interface: q.interface,
            user: q.user,
            session_id: q.session_id,
            token,
            running: true,
            start_time: q.start_time,
            end_time: None,
            duration_ms: None,
            query: truncate_chars(&q.statement, MAX_LOGGED_STATEMENT_BYTES).to_string(),
            error: None,
            visible: q.visible,
            requested_by,
            user_agent: q
                .user_agent
                .map(|ua| truncate_chars(&ua, MAX_LOGGED_USER_AGENT_BYTES).to_string()),
            rows: None,
        };
        self.bytes += entry.bytes(&q.query_id);
        if let Some(old) = self.entries.insert(q.query_id.clone(), entry) {
            old.token.cancel();
            self.bytes = self.bytes.saturating_sub(old.bytes(&q.query_id));
        } else {
            self.order.push_back(q.query_id);
        }
        self.evict();
        Ok(())
    }

    /// Record a query's end.
    pub fn finish(
        &mut self,
        query_id: &str,
        end_time: String,
        duration_ms: u64,
        rows: u64,
        error: Option<String>,
    ) {
        let Some(entry) = self.entries.get_mut(query_id) else {
            return;
        };
        // The slow-statement trail an operator turns on with `--log deltalite_server=debug`
        // (statements may hold data: never at the default level).
        tracing::debug!(
            query_id,
            interface = ?entry.interface,
            user = %entry.user,
            ms = duration_ms,
            rows,
            error = error.as_deref(),
            statement = %truncate_chars(&entry.query, 300),
            "query finished"
        );
        let before = entry.bytes(query_id);
        entry.running = false;
        entry.end_time = Some(end_time);
        entry.duration_ms = Some(duration_ms);
        entry.rows = Some(rows);
        entry.error = error.map(|e| truncate_chars(&e, MAX_LOGGED_ERROR_BYTES).to_string());
        let after = entry.bytes(query_id);
        self.bytes = self.bytes.saturating_sub(before) + after;
        self.evict();
    }

    /// The log entry of `query_id` as `user` may see it.
    pub fn get(&self, query_id: &str, user: &str) -> Option<Value> {
        self.entries
            .get(query_id)
            .filter(|e| e.user == user)
            .map(|e| e.to_json(query_id))
    }

    /// The newest `limit` visible entries of `user`, newest first (the console's
    /// history; what the bounded log still holds).
    pub fn recent(&self, user: &str, limit: usize) -> Vec<Value> {
        let mut newest: Vec<(&String, &QueryEntry)> = self
            .entries
            .iter()
            .filter(|(_, e)| e.user == user && e.visible)
            .collect();
        // Start times are ISO-8601 in UTC with a fixed width: text order is time order.
        newest.sort_by(|a, b| b.1.start_time.cmp(&a.1.start_time));
        newest
            .into_iter()
            .take(limit)
            .map(|(id, e)| {
                let mut v = e.to_json(id);
                v["running"] = Value::Bool(e.running);
                v
            })
            .collect()
    }

    /// Cancel `query_id` for `user` (and `session_id`, when given).
    pub fn cancel(&self, query_id: &str, user: &str, session_id: Option<&str>) -> Cancel {
        match self.entries.get(query_id) {
            Some(e) if e.user == user && session_id.is_none_or(|s| s == e.session_id) => {
                if e.running {
                    e.token.cancel();
                    Cancel::Cancelled
                } else {
                    Cancel::AlreadyFinished
                }
            }
            _ => Cancel::NotFound,
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes held, approximately (what the byte budget is compared with).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Drop the oldest finished entries while over a cap. Running entries met on the way
    /// move to the back of the order; one pass over the order at most, so a log full of
    /// running queries stays over its caps until they finish, instead of looping.
    fn evict(&mut self) {
        let mut budget = self.order.len();
        while (self.entries.len() > self.max_entries || self.bytes > self.max_bytes) && budget > 0 {
            budget -= 1;
            let Some(id) = self.order.pop_front() else {
                break;
            };
            match self.entries.get(&id) {
                Some(e) if e.running => self.order.push_back(id),
                Some(_) => {
                    if let Some(e) = self.entries.remove(&id) {
                        self.bytes = self.bytes.saturating_sub(e.bytes(&id));
                    }
                }
                None => {}
            }
        }
    }
}

/// Task ids of `/append` (each completed when answered), for `GET /tasks/{id}`: at most
/// `max` of them, oldest first out.
pub struct TaskLog {
    owners: HashMap<String, String>,
    order: VecDeque<String>,
    max: usize,
}

impl TaskLog {
    /// An empty list holding at most `max` task ids.
    pub fn new(max: usize) -> Self {
        Self {
            owners: HashMap::new(),
            order: VecDeque::new(),
            max: max.max(1),
        }
    }

    /// Remember `task_id` as `user`'s.
    pub fn insert(&mut self, task_id: String, user: String) {
        if self.owners.insert(task_id.clone(), user).is_none() {
            self.order.push_back(task_id);
        }
        while self.owners.len() > self.max {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.owners.remove(&oldest);
        }
    }

    /// Whether `task_id` is known and `user`'s.
    pub fn owned_by(&self, task_id: &str, user: &str) -> bool {
        self.owners.get(task_id).is_some_and(|u| u == user)
    }

    /// Task ids held.
    pub fn len(&self) -> usize {
        self.owners.len()
    }

    /// Whether no task id is held.
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }
}
