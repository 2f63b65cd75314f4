//! Flight SQL sessions: who a call is, and what the connection keeps between calls.
//!
//! A Basic handshake opens a session and answers a fresh bearer token for it; later calls
//! send that token. A session holds the catalog and schema defaults, the prepared
//! statements, the results whose FlightInfo was answered but whose DoGet has not come
//! yet, and the scratch catalogs the connection attached. Calls that send Basic
//! credentials instead of a token share one session per user.
//!
//! Everything is bounded: sessions by count (a new one closes the least recently used)
//! and by idle time, and each session's prepared statements, pending results and
//! scratch catalogs by count. A closed or expired session's token answers
//! `Session expired` (the clients reconnect on that text), and its scratch catalogs are
//! removed.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::result::Pending;
use super::transaction::{Transaction, unknown_transaction};
use crate::auth::{Authenticator, User};
use crate::catalog::Storage;
use crate::sql::Attached;
use crate::sql::params::Parameter;

/// Most prepared statements one session keeps; creating another forgets the oldest.
pub const MAX_PREPARED: usize = 256;
/// Most answered-but-unfetched results one session keeps; another drops the oldest.
pub const MAX_PENDING: usize = 16;
/// Bytes of bound parameter values one prepared statement may hold.
pub const MAX_BOUND_BYTES: usize = 64 * deltalite::MIB;

/// The text of every refusal of an unknown, closed or expired session: the clients
/// reconnect when an error contains it.
pub const SESSION_EXPIRED: &str = "Session expired";

/// A prepared statement.
pub struct Prepared {
    /// The statement as the client sent it.
    pub sql: String,
    /// Its placeholders.
    pub parameters: Vec<Parameter>,
    /// The values bound last (one row per execution).
    pub bound: Option<RecordBatch>,
    /// Whether `bound` arrived after the statement last ran: what tells the two
    /// orders clients bind in apart (see `FlightSql::get_flight_info_prepared_statement`).
    pub fresh: bool,
}

/// A session's state that changes between calls.
struct State {
    catalog: Option<String>,
    schema: Option<String>,
    prepared: HashMap<Vec<u8>, Prepared>,
    /// Prepared handles, oldest first.
    prepared_order: VecDeque<Vec<u8>>,
    pending: HashMap<Vec<u8>, Pending>,
    /// Pending result ids, oldest first.
    pending_order: VecDeque<Vec<u8>>,
    /// The open transaction, if any (one at a time, as in DuckDB).
    transaction: Option<Transaction>,
    last_used: Instant,
}

/// One client connection's session.
pub struct Session {
    /// Names the session in the query log (never the token).
    pub id: String,
    /// The authenticated user, with the grants of the configuration.
    pub user: User,
    /// Scratch catalogs this session attached.
    pub attached: Arc<Attached>,
    state: Mutex<State>,
}

impl Session {
    fn new(user: User) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            user,
            attached: Arc::new(Attached::default()),
            state: Mutex::new(State {
                catalog: None,
                schema: None,
                prepared: HashMap::new(),
                prepared_order: VecDeque::new(),
                pending: HashMap::new(),
                pending_order: VecDeque::new(),
                transaction: None,
                last_used: Instant::now(),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every update is a few field writes: a panic elsewhere leaves it consistent.
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The user as a statement of this session sees it: the granted catalogs and the
    /// scratch catalogs the session attached.
    pub fn sql_user(&self) -> User {
        let mut catalogs = self.user.catalogs.as_ref().clone();
        catalogs.extend(self.attached.names());
        User {
            name: self.user.name.clone(),
            catalogs: Arc::new(catalogs),
        }
    }

    /// The catalog and schema defaults (`None`: the user's first catalog, `main`).
    pub fn defaults(&self) -> (Option<String>, Option<String>) {
        let s = self.state();
        (s.catalog.clone(), s.schema.clone())
    }

    /// Set the defaults (`USE`, `SetSessionOptions`).
    pub fn set_defaults(&self, catalog: Option<String>, schema: Option<String>) {
        let mut s = self.state();
        s.catalog = catalog;
        s.schema = schema;
    }

    /// Open a transaction; returns its id.
    pub fn begin(&self, storage: &crate::catalog::Storage) -> Result<Vec<u8>, Status> {
        let mut s = self.state();
        if s.transaction.is_some() {
            return Err(Status::failed_precondition(
                "TransactionContext Error: cannot start a transaction within a transaction",
            ));
        }
        let t = Transaction::new(storage)?;
        let id = t.id.clone();
        s.transaction = Some(t);
        Ok(id)
    }

    /// The transaction a call names (`None`: none, the call commits on its own); an id
    /// that is not the open transaction's is refused.
    pub fn transaction(&self, id: Option<&[u8]>) -> Result<Option<Vec<u8>>, Status> {
        let Some(id) = id.filter(|id| !id.is_empty()) else {
            return Ok(None);
        };
        let s = self.state();
        match &s.transaction {
            Some(t) if t.id == id => Ok(Some(id.to_vec())),
            _ => Err(unknown_transaction()),
        }
    }

    /// Work on the open transaction `id`.
    pub fn with_transaction<R>(
        &self,
        id: &[u8],
        f: impl FnOnce(&mut Transaction) -> R,
    ) -> Result<R, Status> {
        let mut s = self.state();
        match s.transaction.as_mut() {
            Some(t) if t.id == id => Ok(f(t)),
            _ => Err(unknown_transaction()),
        }
    }

    /// End the open transaction `id`: the caller commits (keeps) or rolls it back.
    pub fn end(&self, id: &[u8]) -> Result<Transaction, Status> {
        let mut s = self.state();
        match &s.transaction {
            Some(t) if t.id == id => Ok(s.transaction.take().expect("checked")),
            _ => Err(unknown_transaction()),
        }
    }

    /// Take the open transaction, whatever its id (the session is closing).
    pub fn take_transaction(&self) -> Option<Transaction> {
        self.state().transaction.take()
    }

    /// Keep a prepared statement; returns its handle.
    pub fn prepare(&self, prepared: Prepared) -> Vec<u8> {
        let handle = uuid::Uuid::new_v4().as_bytes().to_vec();
        let mut s = self.state();
        while s.prepared.len() >= MAX_PREPARED {
            let Some(oldest) = s.prepared_order.pop_front() else {
                break;
            };
            s.prepared.remove(&oldest);
        }
        s.prepared.insert(handle.clone(), prepared);
        s.prepared_order.push_back(handle.clone());
        handle
    }

    /// The transaction a prepared handle runs in: the session's open one, if any. That is
    /// the one it was prepared in while that one is open; once it has ended, the one
    /// begun since (ADBC's DB-API cursor keeps its handle across `commit()` and runs it
    /// again when the same SQL comes back), or none.
    pub fn prepared_transaction(&self, handle: &[u8]) -> Result<Option<Vec<u8>>, Status> {
        let s = self.state();
        s.prepared.get(handle).ok_or_else(unknown_handle)?;
        Ok(s.transaction.as_ref().map(|t| t.id.clone()))
    }

    /// The statement and bound values of a prepared handle.
    pub fn prepared(&self, handle: &[u8]) -> Result<(String, Option<RecordBatch>), Status> {
        let s = self.state();
        let p = s.prepared.get(handle).ok_or_else(unknown_handle)?;
        Ok((p.sql.clone(), p.bound.clone()))
    }

    /// The placeholders of a prepared handle.
    pub fn parameters(&self, handle: &[u8]) -> Result<Vec<Parameter>, Status> {
        let s = self.state();
        let p = s.prepared.get(handle).ok_or_else(unknown_handle)?;
        Ok(p.parameters.clone())
    }

    /// Bind values to a prepared handle (replacing earlier ones).
    pub fn bind(&self, handle: &[u8], values: RecordBatch) -> Result<(), Status> {
        let mut s = self.state();
        let p = s.prepared.get_mut(handle).ok_or_else(unknown_handle)?;
        p.bound = Some(values);
        p.fresh = true;
        Ok(())
    }

    /// The bound values if they arrived after the statement last ran; they count as
    /// used from now on.
    pub fn take_fresh(&self, handle: &[u8]) -> Result<Option<RecordBatch>, Status> {
        let mut s = self.state();
        let p = s.prepared.get_mut(handle).ok_or_else(unknown_handle)?;
        Ok(std::mem::take(&mut p.fresh)
            .then(|| p.bound.clone())
            .flatten())
    }

    /// The bound values, which count as used from now on.
    pub fn use_bound(&self, handle: &[u8]) -> Result<Option<RecordBatch>, Status> {
        let mut s = self.state();
        let p = s.prepared.get_mut(handle).ok_or_else(unknown_handle)?;
        p.fresh = false;
        Ok(p.bound.clone())
    }

    /// Forget a prepared handle (unknown handles are fine: closing is idempotent).
    pub fn close_prepared(&self, handle: &[u8]) {
        let mut s = self.state();
        if s.prepared.remove(handle).is_some() {
            s.prepared_order.retain(|h| h != handle);
        }
    }

    /// Keep a result until its DoGet; returns the ticket's id. Beyond [`MAX_PENDING`]
    /// the oldest is dropped (its query is logged as never fetched).
    pub fn keep_result(&self, pending: Pending) -> Vec<u8> {
        let id = uuid::Uuid::new_v4().as_bytes().to_vec();
        let dropped = {
            let mut s = self.state();
            let mut dropped = Vec::new();
            while s.pending.len() >= MAX_PENDING {
                let Some(oldest) = s.pending_order.pop_front() else {
                    break;
                };
                dropped.extend(s.pending.remove(&oldest));
            }
            s.pending.insert(id.clone(), pending);
            s.pending_order.push_back(id.clone());
            dropped
        };
        // Dropped outside the lock: dropping a result finishes its log entry.
        drop(dropped);
        id
    }

    /// Take the result a ticket names.
    pub fn take_result(&self, id: &[u8]) -> Option<Pending> {
        let mut s = self.state();
        let pending = s.pending.remove(id)?;
        s.pending_order.retain(|p| p != id);
        Some(pending)
    }

    fn touch(&self, now: Instant) {
        self.state().last_used = now;
    }

    fn last_used(&self) -> Instant {
        self.state().last_used
    }

    /// (prepared statements, pending results) held.
    fn holdings(&self) -> (usize, usize) {
        let s = self.state();
        (s.prepared.len(), s.pending.len())
    }

    /// Drop what the session holds (its results' queries are logged as never fetched);
    /// returns its open transaction, to be rolled back.
    fn clear(&self) -> Option<Transaction> {
        let (pending, transaction) = {
            let mut s = self.state();
            s.prepared.clear();
            s.prepared_order.clear();
            s.pending_order.clear();
            (std::mem::take(&mut s.pending), s.transaction.take())
        };
        drop(pending);
        transaction
    }
}

fn unknown_handle() -> Status {
    Status::not_found(
        "Invalid Input Error: unknown prepared statement handle (closed, or forgotten: a \
         session keeps its newest prepared statements only)",
    )
}

/// Every open session, by key: `t:<token>` for handshake sessions, `u:<user>` for the
/// per-user session of Basic calls.
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    idle: Duration,
    max: usize,
    storage: Arc<Storage>,
}

/// Who a call is, from its `authorization` header.
pub enum Caller {
    /// `Bearer <token>` of a handshake session.
    Token(Arc<Session>),
    /// `Basic <credentials>`: the user's shared session.
    Basic(Arc<Session>),
}

impl Caller {
    /// The session the call runs in.
    pub fn session(&self) -> &Arc<Session> {
        match self {
            Caller::Token(s) | Caller::Basic(s) => s,
        }
    }
}

impl Sessions {
    /// An empty set of at most `max` sessions, each closed after `idle` unused.
    pub fn new(storage: Arc<Storage>, idle: Duration, max: usize) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            idle,
            max: max.max(1),
            storage,
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        match self.map.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// A handshake: check the Basic credentials of `metadata` and open a session;
    /// returns its token.
    pub fn open(&self, auth: &Authenticator, metadata: &MetadataMap) -> Result<String, Status> {
        let credentials = match authorization(metadata)? {
            Some(("basic", credentials)) => credentials,
            _ => {
                return Err(Status::unauthenticated(
                    "Unauthorized: the handshake needs `authorization: Basic <base64(user:password)>`",
                ));
            }
        };
        let user = auth
            .authenticate_basic(credentials)
            .map_err(|_| Status::unauthenticated("Unauthorized"))?;
        // 256 random bits.
        let token = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        self.insert(format!("t:{token}"), Arc::new(Session::new(user)));
        Ok(token)
    }

    fn insert(&self, key: String, session: Arc<Session>) {
        let evicted = {
            let mut map = self.map();
            let mut evicted = Vec::new();
            while map.len() >= self.max {
                let oldest = map
                    .iter()
                    .min_by_key(|(_, s)| s.last_used())
                    .map(|(k, _)| k.clone());
                let Some(oldest) = oldest else { break };
                evicted.extend(map.remove(&oldest));
            }
            map.insert(key, session);
            metrics::gauge!("deltalite_flight_sessions").set(map.len() as f64);
            evicted
        };
        for session in evicted {
            tracing::info!(user = %session.user.name, "flight session closed: too many sessions");
            self.cleanup(session);
        }
    }

    /// The session of a call.
    pub fn caller(&self, auth: &Authenticator, metadata: &MetadataMap) -> Result<Caller, Status> {
        let now = Instant::now();
        match authorization(metadata)? {
            Some(("bearer", token)) => {
                let key = format!("t:{token}");
                let session = self.live(&key, now).ok_or_else(|| {
                    Status::unauthenticated(format!(
                        "{SESSION_EXPIRED}: unknown or expired session token; authenticate again"
                    ))
                })?;
                Ok(Caller::Token(session))
            }
            Some(("basic", credentials)) => {
                let user = auth
                    .authenticate_basic(credentials)
                    .map_err(|_| Status::unauthenticated("Unauthorized"))?;
                let key = format!("u:{}", user.name);
                if let Some(session) = self.live(&key, now) {
                    return Ok(Caller::Basic(session));
                }
                let session = Arc::new(Session::new(user));
                self.insert(key, Arc::clone(&session));
                Ok(Caller::Basic(session))
            }
            _ => Err(Status::unauthenticated(
                "Unauthorized: send `authorization: Bearer <token>` from the handshake, or Basic credentials",
            )),
        }
    }

    /// The session under `key` if it has not expired (then it counts as used now).
    fn live(&self, key: &str, now: Instant) -> Option<Arc<Session>> {
        let expired = {
            let mut map = self.map();
            let session = map.get(key)?;
            if now.duration_since(session.last_used()) <= self.idle {
                session.touch(now);
                return Some(Arc::clone(session));
            }
            let expired = map.remove(key);
            metrics::gauge!("deltalite_flight_sessions").set(map.len() as f64);
            expired
        };
        if let Some(session) = expired {
            self.cleanup(session);
        }
        None
    }

    /// Close a session (`CloseSession`): later calls with its token answer
    /// `Session expired`.
    pub fn close(&self, session: &Arc<Session>) {
        let removed = {
            let mut map = self.map();
            let key = map
                .iter()
                .find(|(_, s)| Arc::ptr_eq(s, session))
                .map(|(k, _)| k.clone());
            let removed = key.and_then(|k| map.remove(&k));
            metrics::gauge!("deltalite_flight_sessions").set(map.len() as f64);
            removed
        };
        if let Some(session) = removed {
            self.cleanup(session);
        }
    }

    /// Close every session idle past the timeout, and publish what the sessions hold.
    pub fn sweep(&self) {
        let now = Instant::now();
        let (expired, live): (Vec<_>, Vec<_>) = {
            let mut map = self.map();
            let keys: Vec<String> = map
                .iter()
                .filter(|(_, s)| now.duration_since(s.last_used()) > self.idle)
                .map(|(k, _)| k.clone())
                .collect();
            let expired = keys.iter().filter_map(|k| map.remove(k)).collect();
            (expired, map.values().cloned().collect())
        };
        for session in expired {
            self.cleanup(session);
        }
        let (mut prepared, mut pending, mut attached) = (0, 0, 0);
        for s in &live {
            let (p, r) = s.holdings();
            prepared += p;
            pending += r;
            attached += s.attached.names().len();
        }
        metrics::gauge!("deltalite_flight_sessions").set(live.len() as f64);
        metrics::gauge!("deltalite_flight_prepared_statements").set(prepared as f64);
        metrics::gauge!("deltalite_flight_pending_results").set(pending as f64);
        metrics::gauge!("deltalite_flight_scratch_catalogs").set(attached as f64);
    }

    /// Drop a closed session's holdings, roll back its open transaction and remove its
    /// scratch catalogs.
    fn cleanup(&self, session: Arc<Session>) {
        let transaction = session.clear();
        let names = session.attached.names();
        if names.is_empty() && transaction.is_none() {
            return;
        }
        let storage = Arc::clone(&self.storage);
        tokio::spawn(async move {
            if let Some(t) = transaction
                && let Err(e) = t.rollback(&storage).await
            {
                tracing::warn!(error = %e.message(), "rolling back a closed session's transaction");
            }
            for name in names {
                if let Err(e) = storage.drop_scratch_catalog(&name).await {
                    tracing::warn!(catalog = %name, error = %e, "cannot remove a closed session's scratch catalog");
                }
            }
        });
    }
}

/// The scheme (lower case) and value of the `authorization` header; `None` without one.
fn authorization(metadata: &MetadataMap) -> Result<Option<(&'static str, &str)>, Status> {
    let Some(value) = metadata.get("authorization") else {
        return Ok(None);
    };
    let value = value
        .to_str()
        .map_err(|_| Status::unauthenticated("Unauthorized: malformed authorization header"))?
        .trim();
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    let scheme = if scheme.eq_ignore_ascii_case("basic") {
        "basic"
    } else if scheme.eq_ignore_ascii_case("bearer") {
        "bearer"
    } else {
        return Err(Status::unauthenticated(
            "Unauthorized: authorization must be Basic or Bearer",
        ));
    };
    Ok(Some((scheme, rest.trim())))
}
