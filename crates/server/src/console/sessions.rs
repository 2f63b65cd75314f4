//! The console's sign-in sessions: a random token in an `HttpOnly`, `SameSite=Strict`
//! cookie names the session; the session holds the user and a CSRF token the page got
//! when it signed in. The API accepts the cookie only together with that CSRF token in a
//! header (`X-Deltalite-Csrf`), which a page of another origin cannot read or send, so a
//! cookie alone never authorises anything.
//!
//! Tokens are kept as SHA-256 digests (a memory dump does not hand out live cookies);
//! sessions expire a fixed time after sign-in and are bounded in number, oldest out.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::auth::User;

/// The session cookie's name.
pub const COOKIE: &str = "deltalite_session";
/// The header carrying the session's CSRF token.
pub const CSRF_HEADER: &str = "x-deltalite-csrf";
/// How long a sign-in lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// Sessions held at most; signing in past it ends the oldest.
pub const MAX_SESSIONS: usize = 10_000;

/// A new session, as the sign-in answers it.
#[derive(Debug)]
pub struct Issued {
    /// The cookie's value.
    pub token: String,
    /// The CSRF token the page sends back in [`CSRF_HEADER`].
    pub csrf: String,
}

#[derive(Debug)]
struct Session {
    user: User,
    csrf: String,
    expires: Instant,
}

/// The live sessions.
#[derive(Debug, Default)]
pub struct Sessions {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_digest: HashMap<[u8; 32], Session>,
    /// Digests, oldest sign-in first.
    order: VecDeque<[u8; 32]>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn random_hex() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every update is a few map operations: a poisoned lock holds consistent data.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start a session of `user`.
    pub fn issue(&self, user: User) -> Issued {
        let issued = Issued {
            token: random_hex(),
            csrf: random_hex(),
        };
        let key = digest(&issued.token);
        let mut inner = self.lock();
        inner.expire(Instant::now());
        while inner.by_digest.len() >= MAX_SESSIONS {
            let Some(old) = inner.order.pop_front() else {
                break;
            };
            inner.by_digest.remove(&old);
        }
        inner.by_digest.insert(
            key,
            Session {
                user,
                csrf: issued.csrf.clone(),
                expires: Instant::now() + SESSION_TTL,
            },
        );
        inner.order.push_back(key);
        issued
    }

    /// The user and CSRF token of a live session.
    pub fn get(&self, token: &str) -> Option<(User, String)> {
        let inner = self.lock();
        let session = inner.by_digest.get(&digest(token))?;
        (session.expires > Instant::now()).then(|| (session.user.clone(), session.csrf.clone()))
    }

    /// The user of a live session whose CSRF token is `csrf`.
    pub fn authorise(&self, token: &str, csrf: &str) -> Option<User> {
        let (user, expected) = self.get(token)?;
        bool::from(expected.as_bytes().ct_eq(csrf.as_bytes())).then_some(user)
    }

    /// End a session (signing out).
    pub fn end(&self, token: &str) {
        let key = digest(token);
        let mut inner = self.lock();
        if inner.by_digest.remove(&key).is_some() {
            inner.order.retain(|k| *k != key);
        }
    }

    /// Sessions held (for `/metrics`).
    pub fn len(&self) -> usize {
        self.lock().by_digest.len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    /// Drop expired sessions (sign-ins are in expiry order: same lifetime each).
    fn expire(&mut self, now: Instant) {
        while let Some(key) = self.order.front().copied() {
            match self.by_digest.get(&key) {
                Some(s) if s.expires > now => break,
                _ => {
                    self.by_digest.remove(&key);
                    self.order.pop_front();
                }
            }
        }
    }
}

/// How long a download ticket is good for.
pub const TICKET_TTL: Duration = Duration::from_secs(60);
/// Tickets held at most.
pub const MAX_TICKETS: usize = 1_000;

/// One-time download tickets. A download is a plain navigation, which cannot carry the
/// CSRF header: the page asks for a ticket (with the header), then navigates to a URL
/// holding it; the download route wants the ticket and the session cookie of the same
/// user, and the ticket works once, within [`TICKET_TTL`].
#[derive(Debug, Default)]
pub struct Tickets {
    inner: Mutex<HashMap<String, (String, String, Instant)>>,
}

impl Tickets {
    /// A ticket for `user` to download result `result`.
    pub fn issue(&self, user: &str, result: &str) -> String {
        let ticket = random_hex();
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        inner.retain(|_, (_, _, at)| now.duration_since(*at) <= TICKET_TTL);
        if inner.len() < MAX_TICKETS {
            inner.insert(ticket.clone(), (user.to_string(), result.to_string(), now));
        }
        ticket
    }

    /// Use `ticket` as `user`: the result it names.
    pub fn redeem(&self, ticket: &str, user: &str) -> Option<String> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (owner, result, at) = inner.remove(ticket)?;
        (owner == user && at.elapsed() <= TICKET_TTL).then_some(result)
    }
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'h>(header: &'h str, name: &str) -> Option<&'h str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn user(name: &str) -> User {
        User {
            name: name.into(),
            catalogs: Arc::new(vec!["lakehouse".into()]),
        }
    }

    #[test]
    fn a_session_needs_its_own_csrf_token_and_ends_on_sign_out() {
        let sessions = Sessions::default();
        let a = sessions.issue(user("alice"));
        let b = sessions.issue(user("bob"));
        assert_ne!(a.token, b.token);
        assert_eq!(a.token.len(), 64);
        assert_eq!(
            sessions.authorise(&a.token, &a.csrf).map(|u| u.name),
            Some("alice".to_string())
        );
        // Another session's CSRF token, none, or a wrong cookie: refused.
        assert!(sessions.authorise(&a.token, &b.csrf).is_none());
        assert!(sessions.authorise(&a.token, "").is_none());
        assert!(sessions.authorise("nope", &a.csrf).is_none());
        sessions.end(&a.token);
        assert!(sessions.authorise(&a.token, &a.csrf).is_none());
        assert_eq!(sessions.len(), 1);
    }

    #[test]
    fn a_ticket_works_once_and_for_its_user_only() {
        let tickets = Tickets::default();
        let t = tickets.issue("alice", "r1");
        assert_eq!(tickets.redeem(&t, "bob"), None);
        // Redeeming consumes it, even when refused.
        assert_eq!(tickets.redeem(&t, "alice"), None);
        let t = tickets.issue("alice", "r1");
        assert_eq!(tickets.redeem(&t, "alice").as_deref(), Some("r1"));
        assert_eq!(tickets.redeem(&t, "alice"), None);
    }

    #[test]
    fn cookies_are_found_by_exact_name() {
        let h = "x=1; deltalite_session_old=2; deltalite_session=abc; y=3";
        assert_eq!(cookie(h, COOKIE), Some("abc"));
        assert_eq!(cookie("a=1", COOKIE), None);
    }
}
