//! `POST /autocomplete`: completions for the word being typed at the end of a statement,
//! from SQL keywords and the names the user can see (catalogs, the schemas of the request's
//! catalog, the tables of its schema), in Altertable's response shape.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, State};
use datafusion::sql::sqlparser::keywords::ALL_KEYWORDS;
use serde::Deserialize;
use serde_json::{Value, json};

use super::S;
use crate::auth::User;
use crate::catalog::DEFAULT_SCHEMA;
use crate::error::{ApiError, ApiResult};

/// Suggestions answered when the request does not say.
const DEFAULT_SUGGESTIONS: usize = 20;

#[derive(Debug, Deserialize)]
pub(super) struct AutocompleteRequest {
    statement: String,
    catalog: Option<String>,
    schema: Option<String>,
    max_suggestions: Option<usize>,
}

/// One candidate: text, kind, score (higher first).
struct Candidate {
    text: String,
    kind: &'static str,
    score: i64,
}

pub(super) async fn autocomplete(
    State(state): State<S>,
    Extension(user): Extension<User>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let req: AutocompleteRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("Invalid JSON body: {e}")))?;
    let statement = req.statement;
    // The word being typed: the trailing run of identifier characters.
    let start = statement
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphanumeric() || *c == '_')
        .last()
        .map_or(statement.len(), |(i, _)| i);
    let prefix = statement[start..].to_lowercase();
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut catalogs: Vec<String> = user.catalogs.iter().cloned().collect();
    catalogs.sort();
    let catalog = req
        .catalog
        .filter(|c| user.can_see(c))
        .or_else(|| catalogs.first().cloned());
    for c in &catalogs {
        candidates.push(Candidate {
            text: c.clone(),
            kind: "catalog",
            score: 30,
        });
    }
    if let Some(catalog) = &catalog {
        let storage = Arc::clone(&state.storage);
        for s in storage.shown_schemas(catalog).await? {
            candidates.push(Candidate {
                text: s,
                kind: "schema",
                score: 40,
            });
        }
        let schema = req.schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_string());
        if crate::catalog::validate_name("schema", &schema).is_ok() {
            for t in storage.list_tables(catalog, &schema).await? {
                candidates.push(Candidate {
                    text: t,
                    kind: "table",
                    score: 50,
                });
            }
        }
    }
    candidates.extend(ALL_KEYWORDS.iter().map(|k| Candidate {
        text: k.to_string(),
        kind: "keyword",
        score: 10,
    }));
    let mut matching: Vec<Candidate> = candidates
        .into_iter()
        .filter(|c| !prefix.is_empty() && c.text.to_lowercase().starts_with(&prefix))
        .collect();
    matching.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.text.cmp(&b.text)));
    matching.truncate(req.max_suggestions.unwrap_or(DEFAULT_SUGGESTIONS));
    let suggestion_start = statement[..start].chars().count();
    let suggestions: Vec<Value> = matching
        .into_iter()
        .map(|c| {
            json!({
                "suggestion": c.text,
                "suggestion_start": suggestion_start,
                "suggestion_type": c.kind,
                "suggestion_score": c.score,
            })
        })
        .collect();
    Ok(Json(json!({
        "suggestions": suggestions,
        "statement": statement,
        "connections_errors": {},
    })))
}
