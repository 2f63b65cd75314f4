//! Basic and Bearer(base64) authentication, compared in constant time.
//!
//! Plain passwords are kept as digests of `user:password`. Argon2-hashed ones are
//! verified once (argon2 is deliberately slow: tens of milliseconds and 19 MiB), then the
//! digest of the credentials that passed is remembered, so a client sending Basic on
//! every request pays argon2 once per process. Verifications run one at a time (bounded
//! memory and CPU under a password-guessing flood), and a failed login pays one
//! verification whether or not the name exists, so timing does not tell names apart.

use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::{Password, UserConfig};
use crate::error::ApiError;

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct User {
    /// Login name.
    pub name: String,
    /// Granted catalogs, in configuration order.
    pub catalogs: Arc<Vec<String>>,
}

impl User {
    /// Whether the user may touch `catalog`.
    pub fn can_see(&self, catalog: &str) -> bool {
        self.catalogs.iter().any(|c| c == catalog)
    }
}

/// The configured users: plain passwords as digests of `user:password` (every
/// comparison has the same length and runs in constant time); hashed ones with the
/// digest of the last credentials that passed verification.
#[derive(Debug)]
pub struct Authenticator {
    users: Vec<([u8; 32], User)>,
    hashed: Vec<Hashed>,
    /// One argon2 verification at a time.
    verifying: Mutex<()>,
}

#[derive(Debug)]
struct Hashed {
    user: User,
    phc: String,
    verified: Mutex<Option<[u8; 32]>>,
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

/// An argon2id hash of `password` with a random salt, as a PHC string.
pub fn hash_password(password: &str) -> Result<String, String> {
    use argon2::password_hash::PasswordHasher;
    argon2::Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

fn argon2_matches(phc: &str, password: &[u8]) -> bool {
    use argon2::password_hash::PasswordVerifier;
    argon2::password_hash::phc::PasswordHash::new(phc).is_ok_and(|parsed| {
        argon2::Argon2::default()
            .verify_password(password, &parsed)
            .is_ok()
    })
}

/// A hash no password matches, verified for names that are not argon2 users (so a
/// failed login costs the same either way).
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$1mKBOdUqmiEmxj7Ga1GrhLmJ1gYqmyBVVsfj0EkCXFo";

impl Authenticator {
    /// Build from configuration.
    pub fn new(users: &[UserConfig]) -> Self {
        let mut plain = Vec::new();
        let mut hashed = Vec::new();
        for u in users {
            let user = User {
                name: u.name.clone(),
                catalogs: Arc::new(u.catalogs.clone()),
            };
            match &u.password {
                Password::Plain(password) => {
                    plain.push((digest(format!("{}:{}", u.name, password).as_bytes()), user))
                }
                Password::Argon2(phc) => hashed.push(Hashed {
                    user,
                    phc: phc.clone(),
                    verified: Mutex::new(None),
                }),
            }
        }
        Self {
            users: plain,
            hashed,
            verifying: Mutex::new(()),
        }
    }

    /// Check the `Authorization` header (`Basic <b64>` or `Bearer <same b64>`).
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<User, ApiError> {
        let value = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or(ApiError::Unauthorized)?;
        let (scheme, token) = value.trim().split_once(' ').ok_or(ApiError::Unauthorized)?;
        if !scheme.eq_ignore_ascii_case("basic") && !scheme.eq_ignore_ascii_case("bearer") {
            return Err(ApiError::Unauthorized);
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(token.trim())
            .map_err(|_| ApiError::Unauthorized)?;
        self.check(&decoded)
    }

    /// Check the credentials of a `Basic` authorization value (the part after the scheme),
    /// base64 with or without padding: gRPC clients differ (ADBC's Go driver sends it
    /// unpadded, pyarrow padded).
    pub fn authenticate_basic(&self, credentials: &str) -> Result<User, ApiError> {
        let engine = base64::engine::GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            base64::engine::GeneralPurposeConfig::new()
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
        );
        let decoded = engine
            .decode(credentials.trim())
            .map_err(|_| ApiError::Unauthorized)?;
        self.check(&decoded)
    }

    /// The user signing in with `user` and `password` (the console's form).
    pub fn authenticate_password(&self, user: &str, password: &str) -> Result<User, ApiError> {
        self.check(format!("{user}:{password}").as_bytes())
    }

    /// The user whose `user:password` is `decoded`.
    fn check(&self, decoded: &[u8]) -> Result<User, ApiError> {
        let presented = digest(decoded);
        // Compare against every user without early exit, so timing reveals nothing about
        // which user (if any) matched.
        let mut found: Option<&User> = None;
        for (expected, user) in &self.users {
            if bool::from(expected.ct_eq(&presented)) {
                found = Some(user);
            }
        }
        for h in &self.hashed {
            let verified = *h.verified.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(expected) = verified
                && bool::from(expected.ct_eq(&presented))
            {
                found = Some(&h.user);
            }
        }
        if let Some(user) = found {
            return Ok(user.clone());
        }
        if self.hashed.is_empty() {
            return Err(ApiError::Unauthorized);
        }
        // Not seen before: verify against the named user's hash (or the dummy one).
        let (name, password) = match decoded.iter().position(|b| *b == b':') {
            Some(at) => (&decoded[..at], &decoded[at + 1..]),
            None => (decoded, &b""[..]),
        };
        let candidate = self.hashed.iter().find(|h| h.user.name.as_bytes() == name);
        let _one_at_a_time = self.verifying.lock().unwrap_or_else(|p| p.into_inner());
        let phc = candidate.map_or(DUMMY_HASH, |h| h.phc.as_str());
        match candidate {
            Some(h) if argon2_matches(phc, password) => {
                *h.verified.lock().unwrap_or_else(|p| p.into_inner()) = Some(presented);
                Ok(h.user.clone())
            }
            _ => {
                if candidate.is_none() {
                    argon2_matches(phc, password);
                }
                Err(ApiError::Unauthorized)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::AUTHORIZATION,
            axum::http::HeaderValue::from_str(value).expect("header"),
        );
        h
    }

    #[test]
    fn basic_and_bearer() {
        let auth = Authenticator::new(&[UserConfig {
            name: "alice".into(),
            password: Password::Plain("secret".into()),
            catalogs: vec!["lakehouse".into()],
        }]);
        let token = base64::engine::general_purpose::STANDARD.encode("alice:secret");
        let user = auth
            .authenticate(&headers(&format!("Basic {token}")))
            .expect("basic");
        assert_eq!(user.name, "alice");
        assert!(user.can_see("lakehouse") && !user.can_see("other"));
        assert!(
            auth.authenticate(&headers(&format!("Bearer {token}")))
                .is_ok()
        );
        let wrong = base64::engine::general_purpose::STANDARD.encode("alice:secreT");
        assert!(
            auth.authenticate(&headers(&format!("Basic {wrong}")))
                .is_err()
        );
        assert!(auth.authenticate(&headers("Digest abc")).is_err());
        // Flight's Basic: padded and unpadded base64 of the same credentials (7 bytes,
        // so the padded form ends in "==").
        let ann = Authenticator::new(&[UserConfig {
            name: "ann".into(),
            password: Password::Plain("pas".into()),
            catalogs: vec!["lakehouse".into()],
        }]);
        assert_eq!(
            ann.authenticate_basic("YW5uOnBhcw==").expect("padded").name,
            "ann"
        );
        assert_eq!(
            ann.authenticate_basic("YW5uOnBhcw").expect("unpadded").name,
            "ann"
        );
        assert!(ann.authenticate_basic("YW5uOnBhcx").is_err());
        assert!(ann.authenticate_basic("%%%").is_err());
        assert!(auth.authenticate(&HeaderMap::new()).is_err());
    }

    #[test]
    fn argon2_users_pass_with_their_password_only_and_are_remembered() {
        let phc = hash_password("s3cret:with:colons").expect("hash");
        assert!(phc.starts_with("$argon2id$"), "{phc}");
        crate::config::check_argon2_hash(&phc).expect("valid");
        crate::config::check_argon2_hash(DUMMY_HASH).expect("the dummy hash parses");
        assert!(crate::config::check_argon2_hash("$pbkdf2$i=1$abc$def").is_err());
        assert!(crate::config::check_argon2_hash("plain text").is_err());
        let auth = Authenticator::new(&[
            UserConfig {
                name: "hashed".into(),
                password: Password::Argon2(phc),
                catalogs: vec!["lakehouse".into()],
            },
            UserConfig {
                name: "plain".into(),
                password: Password::Plain("pw".into()),
                catalogs: vec![],
            },
        ]);
        let basic = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        assert!(auth.authenticate_basic(&basic("hashed:wrong")).is_err());
        assert!(auth.hashed[0].verified.lock().expect("lock").is_none());
        let user = auth
            .authenticate_basic(&basic("hashed:s3cret:with:colons"))
            .expect("right password");
        assert_eq!(user.name, "hashed");
        assert_eq!(
            *auth.hashed[0].verified.lock().expect("lock"),
            Some(digest(b"hashed:s3cret:with:colons"))
        );
        // Remembered: the second check compares digests only.
        assert!(
            auth.authenticate_basic(&basic("hashed:s3cret:with:colons"))
                .is_ok()
        );
        assert!(
            auth.authenticate_basic(&basic("nobody:s3cret:with:colons"))
                .is_err()
        );
        assert!(auth.authenticate_basic(&basic("plain:pw")).is_ok());
        assert!(
            auth.authenticate_basic(&basic("plain:s3cret:with:colons"))
                .is_err()
        );
    }
}
