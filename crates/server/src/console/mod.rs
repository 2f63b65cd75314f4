//! The web console's parts below the HTTP handlers (`http/console.rs`): its page and
//! assets, embedded in the binary (`crates/server/console/`), the browser sign-in sessions,
//! and the spooled results the page reads page by page.
//!
//! The page talks to the HTTP API (`/query`'s execution path, `/autocomplete`,
//! `/upload`, `DELETE /query/{id}`), authorised by the session cookie plus the CSRF
//! header ([`sessions`]). Every URL it uses is relative, so the console works behind a
//! reverse proxy under a path prefix.

pub mod assets;
pub mod results;
pub mod sessions;

/// The console's state in the server's shared state.
#[derive(Default)]
pub struct Console {
    /// Sign-in sessions.
    pub sessions: sessions::Sessions,
    /// Spooled results.
    pub results: results::Results,
    /// One-time download tickets.
    pub tickets: sessions::Tickets,
}
