//! DuckDB forms the clients send that sqlparser's generic dialect does not parse, spliced
//! into forms it does before parsing. Where DuckDB means something the generic form does
//! not say, the splice leaves a placeholder column name that the statement's handler reads
//! back ([`BY_NAME`], [`DO_NOTHING`], [`RAISE`]); a client writing a placeholder itself
//! gets the DuckDB meaning it stands for, nothing more.
//!
//! | DuckDB                                   | parsed as                                           |
//! |------------------------------------------|-----------------------------------------------------|
//! | `MERGE … THEN UPDATE BY NAME`            | `UPDATE SET "__deltalite_by_name" = NULL`           |
//! | `MERGE … THEN UPDATE SET *` / `UPDATE`   | `UPDATE SET "__deltalite_by_position" = NULL`       |
//! | `MERGE … THEN INSERT BY NAME`            | `INSERT ("__deltalite_by_name") ROW`                |
//! | `MERGE … THEN INSERT *` / `INSERT`       | `INSERT ROW` (by position, as BigQuery's)           |
//! | `MERGE … THEN DO NOTHING`                | `… "__deltalite_do_nothing" …`                      |
//! | `MERGE … THEN ERROR`                     | `… "__deltalite_error" …`                           |
//! | `MERGE … THEN ERROR message`             | `UPDATE SET "__deltalite_error" = (message)` / `INSERT ("__deltalite_error") VALUES (message)` |
//! | `INSERT INTO t BY NAME …`                | `INSERT INTO t ("__deltalite_by_name") …`           |
//! | `INSERT INTO t BY POSITION …`            | `INSERT INTO t …`                                   |
//! | `ALTER TABLE t SET PARTITIONED BY (…)`   | `ALTER TABLE t SET TBLPROPERTIES ("deltalite.partitioned_by" = '…')` |
//! | `ALTER TABLE t RESET PARTITIONED BY`     | the same property, empty                            |
//! | `ALTER TABLE t SET/RESET SORTED BY (…)`  | `"deltalite.sorted_by"`, the same way               |
//! | `CREATE TABLE … PARTITIONED BY (…)`      | `CREATE TABLE … PARTITION BY (…)`                   |
//! | `a SEMI JOIN b` / `a ANTI JOIN b`        | `a LEFT SEMI JOIN b` / `a LEFT ANTI JOIN b`         |
//! | `$tag$text$tag$` (any statement)         | `'text'`                                            |
//! | `current_catalog()`                      | `"current_catalog"()`                               |
//! | `a ** b`                                 | `a ^ b` (a power, `sql/power.rs`)                   |
//! | `agg(x) FILTER (cond)`                   | `agg(x) FILTER (WHERE cond)`                        |
//! | `SUMMARIZE t` / `SUMMARIZE <query>`      | `SELECT * FROM (<query>) AS "__deltalite_summarize"` (`sql/summarize.rs`) |
//! | `ALTER VIEW v RENAME TO w`               | `ALTER TABLE v RENAME TO w` (views answer it too)   |
//! | `duckdb_tables()` (and `duckdb_databases`, `_schemas`, `_views`, `_columns`) | `information_schema.duckdb_tables` (`sql/duckdb_catalog.rs`) |
//! | `FROM t WHERE …` (no select list)       | `SELECT * FROM t WHERE …`                           |
//! | `PIVOT t ON k [IN (…)] [USING aggs] [GROUP BY g]` | `SELECT * FROM t PIVOT (aggs FOR k IN (… \| ANY)) [AS "__deltalite_pivot_group_by" (g)]` (`sql/pivot.rs`) |
//! | `UNPIVOT t ON a, b [INTO NAME n VALUE v]` | `SELECT * FROM t UNPIVOT (v FOR n IN (a, b))`   |
//! | `FROM t [AS a] … USING SAMPLE 10 [ROWS]` / `10%` / `bernoulli(10%)` | `FROM t [AS a] TABLESAMPLE (10 ROWS) …` / `(10 PERCENT)` / `BERNOULLI (10 PERCENT)` (`sql/sample.rs`) |
//! | `TABLESAMPLE 10%`                        | `TABLESAMPLE 10 PERCENT`                            |
//! | `lambda x, i: body` / `x -> body`, `(x, i) -> body` as an argument of `list_transform` & co | `"__deltalite_lambda"(x, i, body)`, a lambda again once parsed (`sql/lambdas.rs`) |
//! | `[e FOR x IN l IF c]` (`FOR x, i IN`: with the index) | `list_transform(list_filter(l, lambda x: c), lambda x: e)` as placeholders; with an index and a condition, each element's `{'filter': c, 'result': e}` filtered and unpacked |
//! | `s [NOT] GLOB 'a*[!b]?'`                 | `s ~ '(?s)^a.*[^b].$'` (`!~`), a pattern written as text only |
//! | `FROM t VERSION AS OF 3` / `TIMESTAMP AS OF '…'`, `t AT (VERSION => 3)` / `AT (TIMESTAMP => '…')` | `FROM "t\u{1}v3" AS t` (`sql/time_travel.rs`) |
//!
//! The splice works on sqlparser's own tokens, so text inside strings, quoted names and
//! comments is never touched; SQL it cannot tokenize is passed on as it is, for the parser
//! to report.

use std::borrow::Cow;

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::{Keyword, RESERVED_FOR_TABLE_ALIAS};
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use super::time_travel::{self, AsOf};

/// Placeholder column: the clause takes the source's columns by name.
pub(crate) const BY_NAME: &str = "__deltalite_by_name";
/// Placeholder column: the clause takes the source's columns by position.
pub(crate) const BY_POSITION: &str = "__deltalite_by_position";
/// Placeholder column: the clause does nothing.
pub(crate) const DO_NOTHING: &str = "__deltalite_do_nothing";
/// Placeholder column: a row reaching the clause fails the statement.
pub(crate) const RAISE: &str = "__deltalite_error";
/// Placeholder alias of a `PIVOT`: its columns are the statement form's `GROUP BY` list,
/// the only columns the pivot keeps beside its values (`sql/pivot.rs`).
pub(crate) const PIVOT_GROUP_BY: &str = "__deltalite_pivot_group_by";
/// Placeholder function: its arguments are a lambda's parameters and then its body
/// (`sql/lambdas.rs` makes it a lambda again).
pub(crate) const LAMBDA: &str = "__deltalite_lambda";
/// Table property carrying `SET PARTITIONED BY`'s key list as written.
pub(crate) const PARTITIONED_BY: &str = "deltalite.partitioned_by";
/// Table property carrying `SET SORTED BY`'s key list as written.
pub(crate) const SORTED_BY: &str = "deltalite.sorted_by";

/// One significant token and its byte range in the text.
pub(super) struct Tok {
    pub(super) token: Token,
    pub(super) start: usize,
    pub(super) end: usize,
}

impl Tok {
    fn is(&self, keyword: Keyword) -> bool {
        matches!(&self.token, Token::Word(w) if w.keyword == keyword && w.quote_style.is_none())
    }
}

/// `sql` with the DuckDB forms above spliced into generic ones.
pub(crate) fn to_generic(sql: &str) -> Cow<'_, str> {
    let Some(tokens) = significant_tokens(sql) else {
        return Cow::Borrowed(sql);
    };
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    for statement in tokens.split(|t| t.token == Token::SemiColon) {
        edit_statement(sql, statement, &mut edits);
    }
    if edits.is_empty() {
        return Cow::Borrowed(sql);
    }
    // An edit inside a span another edit replaces is dropped: that one carries the text
    // it moves through `to_generic` itself (`edit_pivot_statements`).
    edits.sort_by_key(|(start, end, _)| (*start, *end));
    let mut kept: Vec<(usize, usize, String)> = Vec::with_capacity(edits.len());
    for edit in edits {
        if kept.last().is_none_or(|last| edit.0 >= last.1) {
            kept.push(edit);
        }
    }
    let mut out = sql.to_string();
    for (start, end, text) in kept.into_iter().rev() {
        out.replace_range(start..end, &text);
    }
    Cow::Owned(out)
}

/// The tokens of `sql` that are not whitespace or comments, with byte ranges.
pub(super) fn significant_tokens(sql: &str) -> Option<Vec<Tok>> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize_with_location()
        .ok()?;
    // The tokenizer's locations are (line, column), columns counting characters; they
    // only grow, so one cursor walks the text once (a long one-line statement would
    // otherwise cost a scan from the line's start per token).
    let mut cursor = Cursor {
        text: sql,
        byte: 0,
        line: 1,
        column: 1,
    };
    let mut out = Vec::new();
    for t in tokens {
        if matches!(t.token, Token::Whitespace(_) | Token::EOF) {
            continue;
        }
        let start = cursor.seek(t.span.start.line, t.span.start.column)?;
        let end = cursor.seek(t.span.end.line, t.span.end.column)?;
        out.push(Tok {
            start,
            end,
            token: t.token,
        });
    }
    Some(out)
}

/// A position in a text, moved forward to (line, column) locations in order.
struct Cursor<'a> {
    text: &'a str,
    byte: usize,
    line: u64,
    column: u64,
}

impl Cursor<'_> {
    /// The byte offset of (line, column); `None` if it lies behind the cursor or
    /// outside the text.
    fn seek(&mut self, line: u64, column: u64) -> Option<usize> {
        if (line, column) < (self.line, self.column) {
            return None;
        }
        while (self.line, self.column) < (line, column) {
            let c = self.text.get(self.byte..)?.chars().next()?;
            self.byte += c.len_utf8();
            if c == '\n' {
                self.line += 1;
                self.column = 1;
            } else {
                self.column += 1;
            }
        }
        Some(self.byte)
    }
}

fn edit_statement(sql: &str, tokens: &[Tok], edits: &mut Vec<(usize, usize, String)>) {
    let Some(first) = tokens.first() else {
        return;
    };
    edit_anywhere(tokens, edits);
    edit_lambdas(sql, tokens, edits);
    edit_comprehensions(sql, tokens, edits);
    edit_summarize(tokens, edits);
    edit_from_first(tokens, edits);
    edit_pivot_statements(sql, tokens, edits);
    edit_samples(tokens, edits);
    edit_time_travel(tokens, edits);
    if first.is(Keyword::MERGE) {
        edit_merge(tokens, edits);
    } else if first.is(Keyword::INSERT) {
        edit_insert(tokens, edits);
    } else if first.is(Keyword::ALTER) {
        // `ALTER VIEW v RENAME TO w`, which the parser does not take: the table form,
        // which the rename handler resolves to the view (`sql/views.rs`).
        if let Some(view) = tokens.get(1).filter(|t| t.is(Keyword::VIEW))
            && tokens.iter().any(|t| t.is(Keyword::RENAME))
        {
            edits.push((view.start, view.end, "TABLE".to_string()));
        }
        edit_alter(sql, tokens, edits);
    } else if first.is(Keyword::CREATE) {
        edit_create(tokens, edits);
    }
}

/// DuckDB's `SUMMARIZE t` and `SUMMARIZE <query>` (also `SUMMARIZE FROM t …`), a whole
/// statement: `SELECT * FROM (<query>) AS "__deltalite_summarize"`, which
/// `sql/summarize.rs` writes out.
fn edit_summarize(tokens: &[Tok], edits: &mut Vec<(usize, usize, String)>) {
    let (Some(first), Some(second), Some(last)) = (tokens.first(), tokens.get(1), tokens.last())
    else {
        return;
    };
    if !matches!(&first.token, Token::Word(w) if w.quote_style.is_none()
        && w.value.eq_ignore_ascii_case("summarize"))
    {
        return;
    }
    let query = second.is(Keyword::SELECT)
        || second.is(Keyword::WITH)
        || second.is(Keyword::VALUES)
        || second.token == Token::LParen;
    let opening = if query {
        "SELECT * FROM ("
    } else if second.is(Keyword::FROM) {
        "SELECT * FROM (SELECT *"
    } else {
        "SELECT * FROM (SELECT * FROM"
    };
    edits.push((first.start, first.end, opening.to_string()));
    edits.push((
        last.end,
        last.end,
        format!(") AS \"{}\"", super::summarize::SUMMARIZE),
    ));
}

/// DuckDB's catalog functions (`sql/duckdb_catalog.rs`).
const DUCKDB_CATALOG_FUNCTIONS: [&str; 5] = [
    "duckdb_databases",
    "duckdb_schemas",
    "duckdb_tables",
    "duckdb_views",
    "duckdb_columns",
];

/// Forms valid in any statement: dollar-quoted strings (dbt's comments) and DuckDB's bare
/// `SEMI JOIN` / `ANTI JOIN` (left ones).
fn edit_anywhere(tokens: &[Tok], edits: &mut Vec<(usize, usize, String)>) {
    for (i, t) in tokens.iter().enumerate() {
        match &t.token {
            Token::DollarQuotedString(s) => {
                edits.push((t.start, t.end, format!("'{}'", s.value.replace('\'', "''"))));
            }
            Token::Word(w)
                if w.quote_style.is_none()
                    && matches!(w.keyword, Keyword::SEMI | Keyword::ANTI)
                    && tokens.get(i + 1).is_some_and(|n| n.is(Keyword::JOIN))
                    && !i
                        .checked_sub(1)
                        .and_then(|p| tokens.get(p))
                        .is_some_and(|p| p.is(Keyword::LEFT) || p.is(Keyword::RIGHT)) =>
            {
                edits.push((t.start, t.start, "LEFT ".to_string()));
            }
            // `current_catalog()`: the parser takes `current_catalog` as Postgres's
            // keyword function, which has no parentheses; quoted, it is the name of the
            // session function DuckDB's form calls.
            // DuckDB's catalog functions, as tables of `information_schema`.
            Token::Word(w)
                if w.quote_style.is_none()
                    && DUCKDB_CATALOG_FUNCTIONS.contains(&w.value.to_lowercase().as_str())
                    && tokens.get(i + 1).is_some_and(|n| n.token == Token::LParen)
                    && tokens.get(i + 2).is_some_and(|n| n.token == Token::RParen)
                    && i.checked_sub(1)
                        .and_then(|p| tokens.get(p))
                        .is_none_or(|p| p.token != Token::Period) =>
            {
                edits.push((
                    t.start,
                    tokens[i + 2].end,
                    format!("information_schema.{}", w.value.to_lowercase()),
                ));
            }
            // DuckDB's `agg(x) FILTER (cond)`, without `WHERE`: the standard form has it.
            Token::Word(w)
                if w.quote_style.is_none()
                    && w.keyword == Keyword::FILTER
                    && i.checked_sub(1)
                        .and_then(|p| tokens.get(p))
                        .is_some_and(|p| p.token == Token::RParen)
                    && tokens.get(i + 1).is_some_and(|n| n.token == Token::LParen)
                    && tokens.get(i + 2).is_some_and(|n| !n.is(Keyword::WHERE)) =>
            {
                edits.push((
                    tokens[i + 2].start,
                    tokens[i + 2].start,
                    "WHERE ".to_string(),
                ));
            }
            // DuckDB's `a ** b`, its `a ^ b` (`sql/power.rs`); the tokenizer reads two `*`.
            Token::Mul
                if tokens
                    .get(i + 1)
                    .is_some_and(|n| n.token == Token::Mul && n.start == t.end)
                    && !i
                        .checked_sub(1)
                        .and_then(|p| tokens.get(p))
                        .is_some_and(|p| p.token == Token::Mul && p.end == t.start) =>
            {
                edits.push((t.start, tokens[i + 1].end, "^".to_string()));
            }
            // DuckDB's (SQLite's) `GLOB` of a pattern written as text, as the regular
            // expression it stands for.
            Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("glob") => {
                let Some(Token::SingleQuotedString(pattern)) = tokens.get(i + 1).map(|n| &n.token)
                else {
                    continue;
                };
                let negated = i
                    .checked_sub(1)
                    .map(|p| &tokens[p])
                    .filter(|p| p.is(Keyword::NOT));
                let start = negated.map_or(t.start, |p| p.start);
                let op = if negated.is_some() { "!~" } else { "~" };
                let regex = glob_regex(pattern).replace('\'', "''");
                edits.push((start, tokens[i + 1].end, format!("{op} '{regex}'")));
            }
            Token::Word(w)
                if w.quote_style.is_none()
                    && w.keyword == Keyword::CURRENT_CATALOG
                    && tokens.get(i + 1).is_some_and(|n| n.token == Token::LParen) =>
            {
                edits.push((t.start, t.end, "\"current_catalog\"".to_string()));
            }
            _ => {}
        }
    }
}

/// A glob pattern as an anchored regular expression: `*` any text (newlines too), `?` one
/// character, `[…]` a class (`[!…]` its complement; one left open matches nothing),
/// `\x` the character `x`.
fn glob_regex(pattern: &str) -> String {
    let mut out = String::from("(?s)^");
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            '\\' => match chars.next() {
                Some(next) => literal(&mut out, next),
                None => literal(&mut out, '\\'),
            },
            '[' => {
                let rest: String = chars.clone().collect();
                match rest.find(']').filter(|&end| end > 0) {
                    Some(end) => {
                        let class = &rest[..end];
                        out.push('[');
                        let class = match class.strip_prefix('!') {
                            Some(complement) => {
                                out.push('^');
                                complement
                            }
                            None => class,
                        };
                        out.push_str(&class.replace('\\', "\\\\").replace('[', "\\["));
                        out.push(']');
                        for _ in 0..=rest[..end].chars().count() {
                            chars.next();
                        }
                    }
                    // Unterminated: nothing matches, as in DuckDB.
                    None => out.push_str(r"[^\s\S]"),
                }
            }
            c => literal(&mut out, c),
        }
    }
    out.push('$');
    out
}

/// `c` matched as itself in a regular expression.
fn literal(out: &mut String, c: char) {
    out.push_str(&regex::escape(c.encode_utf8(&mut [0; 4])));
}

/// DuckDB's functions that take a lambda; an arrow (`x -> body`) is a lambda only as
/// one of their arguments, and JSON's `->` everywhere else.
const LAMBDA_FUNCTIONS: [&str; 11] = [
    "list_transform",
    "array_transform",
    "apply",
    "list_apply",
    "array_apply",
    "list_filter",
    "array_filter",
    "filter",
    "list_reduce",
    "array_reduce",
    "reduce",
];

/// DuckDB's lambdas, which the generic parser has no syntax for: `lambda x, i: body`
/// anywhere, and the older arrow form (`x -> body`, `(x, i) -> body`) as an argument of
/// one of [`LAMBDA_FUNCTIONS`]. Each becomes `"__deltalite_lambda"(x, i, body)`; the body
/// runs to the argument's end (a `,` or closing bracket at its own depth).
fn edit_lambdas(sql: &str, tokens: &[Tok], edits: &mut Vec<(usize, usize, String)>) {
    let word = |i: usize| match tokens.get(i).map(|t| &t.token) {
        Some(Token::Word(w)) => Some(w),
        _ => None,
    };
    for (i, t) in tokens.iter().enumerate() {
        // (first parameter's token, the token ending the head)
        let head = match &t.token {
            Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("lambda") => {
                let mut j = i + 1;
                while word(j).is_some()
                    && tokens.get(j + 1).is_some_and(|n| n.token == Token::Comma)
                {
                    j += 2;
                }
                if word(j).is_none() || tokens.get(j + 1).is_none_or(|n| n.token != Token::Colon) {
                    continue;
                }
                (i + 1, j + 1)
            }
            Token::Arrow => {
                let Some(before) = i.checked_sub(1) else {
                    continue;
                };
                let first = if word(before).is_some() {
                    before
                } else if tokens[before].token == Token::RParen {
                    // `(x, i) ->`: words and commas back to the opening parenthesis.
                    let mut j = before;
                    let open = loop {
                        if j < 2 || word(j - 1).is_none() {
                            break None;
                        }
                        match tokens[j - 2].token {
                            Token::Comma => j -= 2,
                            Token::LParen => break Some(j - 2),
                            _ => break None,
                        }
                    };
                    let Some(open) = open else { continue };
                    open
                } else {
                    continue;
                };
                if !argument_of_lambda_function(tokens, first) {
                    continue;
                }
                (first, i)
            }
            _ => continue,
        };
        let (first, colon) = head;
        let params: Vec<&str> = (first..colon)
            .filter(|&j| word(j).is_some())
            .filter_map(|j| sql.get(tokens[j].start..tokens[j].end))
            .collect();
        let Some(end) = argument_end(tokens, colon + 1) else {
            continue;
        };
        let start = if matches!(t.token, Token::Arrow) {
            tokens[first].start
        } else {
            t.start
        };
        edits.push((
            start,
            tokens[colon].end,
            format!("\"{LAMBDA}\"({}, ", params.join(", ")),
        ));
        edits.push((tokens[end].end, tokens[end].end, ")".to_string()));
    }
}

/// DuckDB's list comprehensions, `[e FOR x IN l]` and `[e FOR x IN l IF c]` (also
/// `FOR x, i IN`, `i` the element's 1-based index), as the lambdas DuckDB reads them as.
/// With an index and a condition, both are computed at each element's own position
/// before the filter, as in DuckDB. The parts go through [`to_generic`] themselves (a
/// comprehension's edit replaces its whole span).
fn edit_comprehensions(sql: &str, tokens: &[Tok], edits: &mut Vec<(usize, usize, String)>) {
    let text = |from: usize, to: usize| {
        to_generic(
            sql.get(tokens[from].start..tokens[to].end)
                .unwrap_or_default(),
        )
        .into_owned()
    };
    for (open, t) in tokens.iter().enumerate() {
        if t.token != Token::LBracket {
            continue;
        }
        // The comprehension's `FOR`, `IN` and `IF` at its own depth, and its `]`.
        let (mut depth, mut at_for, mut at_in, mut at_if, mut close) =
            (0usize, None, None, None, None);
        for (j, u) in tokens.iter().enumerate().skip(open + 1) {
            match &u.token {
                Token::LParen | Token::LBracket | Token::LBrace => depth += 1,
                Token::RBracket if depth == 0 => {
                    close = Some(j);
                    break;
                }
                Token::RParen | Token::RBracket | Token::RBrace => match depth.checked_sub(1) {
                    Some(d) => depth = d,
                    None => break,
                },
                _ if depth > 0 => {}
                _ if u.is(Keyword::FOR) && at_for.is_none() => at_for = Some(j),
                _ if u.is(Keyword::IN) && at_for.is_some() && at_in.is_none() => at_in = Some(j),
                _ if u.is(Keyword::IF) && at_in.is_some() && at_if.is_none() => at_if = Some(j),
                _ => {}
            }
        }
        let (Some(at_for), Some(at_in), Some(close)) = (at_for, at_in, close) else {
            continue;
        };
        let params: Vec<&str> = (at_for + 1..at_in)
            .filter_map(|j| match &tokens[j].token {
                Token::Word(_) => sql.get(tokens[j].start..tokens[j].end),
                _ => None,
            })
            .collect();
        let list_end = at_if.unwrap_or(close) - 1;
        if params.is_empty() || params.len() > 2 || at_for == open + 1 || list_end <= at_in {
            continue;
        }
        let params = params.join(", ");
        let result = text(open + 1, at_for - 1);
        let list = text(at_in + 1, list_end);
        let lambda = |body: &str| format!("\"{LAMBDA}\"({params}, {body})");
        let replacement = match at_if {
            None => format!("list_transform({list}, {})", lambda(&result)),
            Some(at_if) if at_if + 1 < close => {
                let condition = text(at_if + 1, close - 1);
                if params.contains(',') {
                    let element =
                        format!("\"{LAMBDA}\"(\"__deltalite_element\", \"__deltalite_element\"");
                    format!(
                        "list_transform(list_filter(list_transform({list}, {}), {element}['filter'])), {element}['result']))",
                        lambda(&format!(
                            "{{'filter': ({condition}), 'result': ({result})}}"
                        ))
                    )
                } else {
                    format!(
                        "list_transform(list_filter({list}, {}), {})",
                        lambda(&condition),
                        lambda(&result)
                    )
                }
            }
            Some(_) => continue,
        };
        edits.push((t.start, tokens[close].end, replacement));
    }
}

/// Whether the token at `i` starts an argument of a call to one of [`LAMBDA_FUNCTIONS`].
fn argument_of_lambda_function(tokens: &[Tok], i: usize) -> bool {
    let Some(previous) = i.checked_sub(1).and_then(|p| tokens.get(p)) else {
        return false;
    };
    if !matches!(previous.token, Token::Comma | Token::LParen) {
        return false;
    }
    let mut depth = 0usize;
    for j in (0..i).rev() {
        match tokens[j].token {
            Token::RParen | Token::RBracket | Token::RBrace => depth += 1,
            Token::LParen if depth == 0 => {
                return j.checked_sub(1).is_some_and(|f| {
                    matches!(&tokens[f].token, Token::Word(w) if w.quote_style.is_none()
                        && LAMBDA_FUNCTIONS.contains(&w.value.to_lowercase().as_str()))
                });
            }
            Token::LParen | Token::LBracket | Token::LBrace => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            _ => {}
        }
    }
    false
}

/// The last token of the argument starting at `start`: the one before the first `,` or
/// closing bracket at the argument's own depth (the text's last token when none).
fn argument_end(tokens: &[Tok], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, t) in tokens.iter().enumerate().skip(start) {
        match t.token {
            Token::LParen | Token::LBracket | Token::LBrace => depth += 1,
            Token::RParen | Token::RBracket | Token::RBrace | Token::Comma if depth == 0 => {
                return j.checked_sub(1).filter(|&e| e >= start);
            }
            Token::RParen | Token::RBracket | Token::RBrace => depth -= 1,
            _ => {}
        }
    }
    tokens.len().checked_sub(1).filter(|&e| e >= start)
}

/// DuckDB's `FROM t [WHERE …] [ORDER BY …] …` without a select list, at a statement's
/// start (after `EXPLAIN [ANALYZE]` or a `WITH` clause too) or a subquery's: the parser takes `FROM t` alone, so `SELECT *` goes first.
/// One with a `SELECT` after its `FROM` (`FROM t SELECT k`) the parser takes as it is.
fn edit_from_first(tokens: &[Tok], edits: &mut Vec<(usize, usize, String)>) {
    for (i, t) in tokens.iter().enumerate() {
        let opens = match i.checked_sub(1).and_then(|p| tokens.get(p)) {
            None => true,
            Some(p) => {
                p.token == Token::LParen
                    || p.is(Keyword::EXPLAIN)
                    || p.is(Keyword::ANALYZE)
                    || ends_cte(tokens, i - 1)
            }
        };
        if !t.is(Keyword::FROM) || !opens {
            continue;
        }
        let mut depth = 0usize;
        let mut selects = false;
        for next in &tokens[i + 1..] {
            match &next.token {
                Token::LParen => depth += 1,
                Token::RParen if depth == 0 => break,
                Token::RParen => depth -= 1,
                _ if depth == 0 && next.is(Keyword::SELECT) => {
                    selects = true;
                    break;
                }
                _ => {}
            }
        }
        if !selects {
            edits.push((t.start, t.start, "SELECT * ".to_string()));
        }
    }
}

/// DuckDB's statement forms of `PIVOT` and `UNPIVOT`, at a statement's start (after
/// `EXPLAIN [ANALYZE]` or a `WITH` clause too), a subquery's or after `CREATE … AS`, spliced into the SQL-standard table factors that
/// `sql/pivot.rs` rewrites: `PIVOT t ON k [IN (…)] [USING aggs] [GROUP BY g] …` pivots
/// on every value of `k` when no list is given (`IN (ANY)`), counts rows when no
/// aggregate is given, and keeps only `g` beside the values when grouped;
/// `UNPIVOT t ON a, b [INTO NAME n VALUE v] …` names its columns `name` and `value` when
/// not told. The clauses after them (`ORDER BY`, `LIMIT`) stay the select's.
fn edit_pivot_statements(sql: &str, tokens: &[Tok], edits: &mut Vec<(usize, usize, String)>) {
    let creates = tokens.first().is_some_and(|t| t.is(Keyword::CREATE));
    for (i, t) in tokens.iter().enumerate() {
        let pivot = t.is(Keyword::PIVOT);
        if !(pivot || t.is(Keyword::UNPIVOT)) {
            continue;
        }
        let opens = match i.checked_sub(1).and_then(|p| tokens.get(p)) {
            None => true,
            Some(p) => {
                p.token == Token::LParen
                    || (creates && p.is(Keyword::AS))
                    || p.is(Keyword::EXPLAIN)
                    || p.is(Keyword::ANALYZE)
                    || ends_cte(tokens, i - 1)
            }
        };
        if !opens {
            continue;
        }
        // The statement's clauses at its own depth, up to its end.
        let mut depth = 0usize;
        let mut at = Vec::new();
        let mut end = tokens.len();
        for (j, next) in tokens.iter().enumerate().skip(i + 1) {
            match &next.token {
                Token::LParen => depth += 1,
                Token::RParen if depth == 0 => {
                    end = j;
                    break;
                }
                Token::RParen => depth -= 1,
                _ if depth == 0 => at.push(j),
                _ => {}
            }
        }
        let find = |keyword: Keyword, from: usize| {
            at.iter()
                .copied()
                .find(|&j| j >= from && tokens[j].is(keyword))
        };
        let Some(on) = find(Keyword::ON, i + 1) else {
            continue;
        };
        // Where a clause after the `ON` list starts, or the statement's end.
        let clause = |keywords: &[Keyword]| {
            at.iter()
                .copied()
                .find(|&j| j > on && keywords.iter().any(|k| tokens[j].is(*k)))
                .unwrap_or(end)
        };
        let text = |from: usize, to: usize| -> &str {
            match (
                tokens.get(from),
                to.checked_sub(1).and_then(|t| tokens.get(t)),
            ) {
                (Some(a), Some(b)) if from < to => &sql[a.start..b.end],
                _ => "",
            }
        };
        let after = |j: usize| tokens.get(j).map_or(sql.len(), |t| t.start);
        let tail = clause(&[
            Keyword::ORDER,
            Keyword::LIMIT,
            Keyword::OFFSET,
            Keyword::QUALIFY,
        ]);
        edits.push((t.start, t.end, "SELECT * FROM".to_string()));
        if pivot {
            let list_end = clause(&[
                Keyword::IN,
                Keyword::USING,
                Keyword::GROUP,
                Keyword::ORDER,
                Keyword::LIMIT,
                Keyword::OFFSET,
                Keyword::QUALIFY,
            ]);
            let using = find(Keyword::USING, on).filter(|&j| j < tail);
            let group = find(Keyword::GROUP, on).filter(|&j| j < tail);
            let aggregates_end = group.unwrap_or(tail);
            let aggregates = match using {
                Some(u) => text(u + 1, aggregates_end),
                None => "count(*)",
            };
            let on_list = text(on + 1, list_end);
            let several = at
                .iter()
                .any(|&j| j > on && j < list_end && tokens[j].token == Token::Comma);
            let on_list = match several {
                true => format!("({on_list})"),
                false => on_list.to_string(),
            };
            let values = match tokens.get(list_end).is_some_and(|t| t.is(Keyword::IN)) {
                // `IN (…)` runs to its closing parenthesis: the next clause at depth 0.
                true => text(list_end, using.or(group).unwrap_or(tail)).to_string(),
                false => "IN (ANY)".to_string(),
            };
            let groups = match group {
                // `GROUP BY g…`, up to the tail.
                Some(g) => format!(" AS \"{PIVOT_GROUP_BY}\" ({})", text(g + 2, tail)),
                None => String::new(),
            };
            let pivot = format!("PIVOT ({aggregates} FOR {on_list} {values}){groups} ");
            edits.push((
                tokens[on].start,
                after(tail),
                to_generic(&pivot).into_owned(),
            ));
        } else {
            let into = clause(&[
                Keyword::INTO,
                Keyword::ORDER,
                Keyword::LIMIT,
                Keyword::OFFSET,
                Keyword::QUALIFY,
            ]);
            let columns = text(on + 1, into);
            let (name, value) = match tokens.get(into).is_some_and(|t| t.is(Keyword::INTO)) {
                true => {
                    let name = find(Keyword::NAME, into).filter(|&j| j < tail);
                    let value = find(Keyword::VALUE, into).filter(|&j| j < tail);
                    match (name, value) {
                        (Some(n), Some(v)) if n < v => (text(n + 1, v), text(v + 1, tail)),
                        _ => continue,
                    }
                }
                false => ("name", "value"),
            };
            let unpivot = format!("UNPIVOT ({value} FOR {name} IN ({columns})) ");
            edits.push((
                tokens[on].start,
                after(tail),
                to_generic(&unpivot).into_owned(),
            ));
        }
    }
}

/// DuckDB's `USING SAMPLE …` of a select that reads one table, moved after that table as
/// the `TABLESAMPLE` clause it means (a sample over a join is left to the parser's
/// error); DuckDB's `%` for `PERCENT` in either. A number alone counts rows.
fn edit_samples(tokens: &[Tok], edits: &mut Vec<(usize, usize, String)>) {
    let word = |j: usize| match tokens.get(j).map(|t| &t.token) {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_lowercase()),
        _ => None,
    };
    let number = |j: usize| match tokens.get(j).map(|t| &t.token) {
        Some(Token::Number(n, _)) => Some(n.clone()),
        _ => None,
    };
    // A quantity at `j`: `10`, `10 ROWS`, `10 PERCENT`, `10%`; its text and the next index.
    let quantity = |j: usize| -> Option<(String, usize)> {
        let n = number(j)?;
        Some(match tokens.get(j + 1) {
            Some(t) if t.is(Keyword::ROWS) => (format!("{n} ROWS"), j + 2),
            Some(t) if t.is(Keyword::PERCENT) || t.token == Token::Mod => {
                (format!("{n} PERCENT"), j + 2)
            }
            _ => (format!("{n} ROWS"), j + 1),
        })
    };
    let method = |name: &str| match name {
        "reservoir" => Some(""),
        "bernoulli" => Some("BERNOULLI "),
        "system" => Some("SYSTEM "),
        _ => None,
    };
    for (i, t) in tokens.iter().enumerate() {
        // `TABLESAMPLE [method] [(] 10%`: the `%` ends the quantity, no modulo follows.
        if t.token == Token::Mod
            && i.checked_sub(1).and_then(number).is_some()
            && (i.saturating_sub(4)..i).any(|j| tokens[j].is(Keyword::TABLESAMPLE))
            && tokens
                .get(i + 1)
                .is_none_or(|n| !matches!(n.token, Token::Number(..)))
        {
            edits.push((t.start, t.end, " PERCENT".to_string()));
            continue;
        }
        if !(t.is(Keyword::USING) && tokens.get(i + 1).is_some_and(|n| n.is(Keyword::SAMPLE))) {
            continue;
        }
        // `method(quantity)` or `quantity [(method [, seed])]`, then `[REPEATABLE (seed)]`.
        let (clause, mut end) = if let Some(m) = word(i + 2).as_deref().and_then(method)
            && tokens.get(i + 3).is_some_and(|p| p.token == Token::LParen)
            && let Some((q, after)) = quantity(i + 4)
            && tokens.get(after).is_some_and(|p| p.token == Token::RParen)
        {
            (format!("{m}({q})"), after + 1)
        } else if let Some((q, after)) = quantity(i + 2) {
            match tokens.get(after).map(|p| &p.token) {
                Some(Token::LParen) => {
                    let Some(m) = word(after + 1).as_deref().and_then(method) else {
                        continue;
                    };
                    match tokens.get(after + 2).map(|p| &p.token) {
                        Some(Token::RParen) => (format!("{m}({q})"), after + 3),
                        Some(Token::Comma)
                            if number(after + 3).is_some()
                                && tokens
                                    .get(after + 4)
                                    .is_some_and(|p| p.token == Token::RParen) =>
                        {
                            let seed = number(after + 3).unwrap_or_default();
                            (format!("{m}({q}) REPEATABLE ({seed})"), after + 5)
                        }
                        _ => continue,
                    }
                }
                _ => (format!("({q})"), after),
            }
        } else {
            continue;
        };
        let mut clause = clause;
        if tokens.get(end).is_some_and(|r| r.is(Keyword::REPEATABLE))
            && tokens
                .get(end + 1)
                .is_some_and(|p| p.token == Token::LParen)
            && let Some(seed) = number(end + 2)
            && tokens
                .get(end + 3)
                .is_some_and(|p| p.token == Token::RParen)
        {
            clause = format!("{clause} REPEATABLE ({seed})");
            end += 4;
        }
        // The select's FROM list, at this clause's depth, up to its next clause.
        let mut depth = 0usize;
        let mut from = None;
        for j in (0..i).rev() {
            match tokens[j].token {
                Token::RParen => depth += 1,
                Token::LParen if depth == 0 => break,
                Token::LParen => depth -= 1,
                _ if depth == 0 && tokens[j].is(Keyword::FROM) => {
                    from = Some(j);
                    break;
                }
                _ => {}
            }
        }
        let Some(from) = from else {
            continue;
        };
        let mut depth = 0usize;
        let mut last = None;
        let mut single = true;
        for (j, next) in tokens.iter().enumerate().take(i).skip(from + 1) {
            match &next.token {
                Token::LParen => depth += 1,
                Token::RParen => depth = depth.saturating_sub(1),
                Token::Comma if depth == 0 => single = false,
                _ if depth == 0
                    && [
                        Keyword::WHERE,
                        Keyword::GROUP,
                        Keyword::HAVING,
                        Keyword::WINDOW,
                        Keyword::QUALIFY,
                        Keyword::ORDER,
                        Keyword::LIMIT,
                    ]
                    .iter()
                    .any(|k| next.is(*k)) =>
                {
                    break;
                }
                _ if depth == 0 && next.is(Keyword::JOIN) => single = false,
                _ => {}
            }
            last = Some(j);
        }
        let (true, Some(last)) = (single, last) else {
            continue;
        };
        let sample = to_generic(&format!(" TABLESAMPLE {clause}")).into_owned();
        edits.push((tokens[last].end, tokens[last].end, sample));
        edits.push((t.start, tokens[end - 1].end, String::new()));
    }
}

/// Whether `tokens[close]` closes a CTE's body (`WITH c AS (…)`, `AS MATERIALIZED (…)`),
/// after which a statement's own body starts.
fn ends_cte(tokens: &[Tok], close: usize) -> bool {
    if tokens[close].token != Token::RParen || !tokens.first().is_some_and(|t| t.is(Keyword::WITH))
    {
        return false;
    }
    let mut depth = 0usize;
    for open in (0..close).rev() {
        match tokens[open].token {
            Token::RParen => depth += 1,
            Token::LParen if depth == 0 => {
                return open
                    .checked_sub(1)
                    .and_then(|p| tokens.get(p))
                    .is_some_and(|p| p.is(Keyword::AS) || p.is(Keyword::MATERIALIZED));
            }
            Token::LParen => depth -= 1,
            _ => {}
        }
    }
    false
}

/// A time-travel clause starting at `tokens[i]`: its state and the index after it.
fn as_of_clause(tokens: &[Tok], i: usize) -> Option<(AsOf, usize)> {
    let tok = |k: usize| tokens.get(k).map(|t| &t.token);
    let value = |k: usize, version: bool| -> Option<AsOf> {
        match (tok(k)?, version) {
            (Token::Number(n, _), true) => n.parse().ok().map(AsOf::Version),
            (Token::SingleQuotedString(s), false) => Some(AsOf::Timestamp(s.clone())),
            _ => None,
        }
    };
    let at = tokens.get(i)?;
    // Databricks: `VERSION AS OF n`, `TIMESTAMP AS OF 'text'`.
    let version = at.is(Keyword::VERSION);
    if (version || at.is(Keyword::TIMESTAMP))
        && tokens.get(i + 1)?.is(Keyword::AS)
        && tokens.get(i + 2)?.is(Keyword::OF)
    {
        return Some((value(i + 3, version)?, i + 4));
    }
    // DuckDB: `AT (VERSION => n)`, `AT (TIMESTAMP => 'text')`.
    if at.is(Keyword::AT) && tok(i + 1)? == &Token::LParen {
        let version = tokens.get(i + 2)?.is(Keyword::VERSION);
        if (version || tokens.get(i + 2)?.is(Keyword::TIMESTAMP))
            && tok(i + 3)? == &Token::RArrow
            && tok(i + 5)? == &Token::RParen
        {
            return Some((value(i + 4, version)?, i + 6));
        }
    }
    None
}

/// `FROM t VERSION AS OF 3` (or any of [`as_of_clause`]'s forms, after a table name in a
/// `FROM` list, a `JOIN`, or a write's target): the table's last name part marked with the state
/// (`sql/time_travel.rs`), aliased to its own name unless the clause is followed by an
/// alias, so `t.column` still resolves.
fn edit_time_travel(tokens: &[Tok], edits: &mut Vec<(usize, usize, String)>) {
    for i in 1..tokens.len() {
        let Some((as_of, after)) = as_of_clause(tokens, i) else {
            continue;
        };
        let last = i - 1;
        let Token::Word(name) = &tokens[last].token else {
            continue;
        };
        let mut first = last;
        while first >= 2
            && tokens[first - 1].token == Token::Period
            && matches!(tokens[first - 2].token, Token::Word(_))
        {
            first -= 2;
        }
        let in_from = first
            .checked_sub(1)
            .and_then(|p| tokens.get(p))
            // INTO / UPDATE: a write naming an old version, which name resolution refuses
            // with its own message.
            .is_some_and(|p| {
                p.is(Keyword::FROM)
                    || p.is(Keyword::JOIN)
                    // DuckDB's `PIVOT t AT (…) ON …` (`edit_pivot_statements`).
                    || p.is(Keyword::PIVOT)
                    || p.is(Keyword::UNPIVOT)
                    || p.is(Keyword::INTO)
                    || p.is(Keyword::UPDATE)
                    || p.token == Token::Comma
            });
        if !in_from {
            continue;
        }
        let table = match name.quote_style {
            Some(_) => name.value.clone(),
            None => name.value.to_lowercase(),
        };
        let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        let aliased = tokens.get(after).is_some_and(|t| {
            t.is(Keyword::AS)
                || matches!(&t.token, Token::Word(w) if w.quote_style.is_some()
                    || !RESERVED_FOR_TABLE_ALIAS.contains(&w.keyword))
        });
        let mut text = quote(&time_travel::mark(&table, &as_of));
        if !aliased {
            text.push_str(" AS ");
            text.push_str(&quote(&table));
        }
        edits.push((tokens[last].start, tokens[after - 1].end, text));
    }
}

/// Whether the clause an action belongs to inserts (`WHEN NOT MATCHED [BY TARGET]`).
fn inserting_clause(before: &[Tok]) -> bool {
    let Some(when) = before.iter().rposition(|t| t.is(Keyword::WHEN)) else {
        return false;
    };
    let clause = &before[when + 1..];
    let not = clause.first().is_some_and(|t| t.is(Keyword::NOT));
    let by_source = clause.len() > 3 && clause[2].is(Keyword::BY) && clause[3].is(Keyword::SOURCE);
    not && !by_source
}

/// Whether an action ends at `i` (the next clause, the end, or `RETURNING`).
fn action_ends(tokens: &[Tok], i: usize) -> bool {
    tokens
        .get(i)
        .is_none_or(|t| t.is(Keyword::WHEN) || t.is(Keyword::RETURNING))
}

/// The index after `ERROR`'s message expression starting at `start`: the next clause or
/// the end, skipping `WHEN`s inside parentheses and `CASE … END`.
fn message_end(tokens: &[Tok], start: usize) -> usize {
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate().skip(start) {
        match &t.token {
            Token::LParen | Token::LBracket => depth += 1,
            Token::RParen | Token::RBracket => depth = depth.saturating_sub(1),
            _ if t.is(Keyword::CASE) => depth += 1,
            _ if t.is(Keyword::END) => depth = depth.saturating_sub(1),
            _ if depth == 0 && action_ends(tokens, i) => return i,
            _ => {}
        }
    }
    tokens.len()
}

fn placeholder(inserting: bool, column: &str) -> String {
    if inserting {
        format!("INSERT (\"{column}\") ROW")
    } else {
        format!("UPDATE SET \"{column}\" = NULL")
    }
}

fn edit_merge(tokens: &[Tok], edits: &mut Vec<(usize, usize, String)>) {
    for (i, then) in tokens.iter().enumerate() {
        if !then.is(Keyword::THEN) {
            continue;
        }
        let Some(action) = tokens.get(i + 1) else {
            continue;
        };
        let at = |k: usize| tokens.get(i + k);
        let is = |k: usize, keyword: Keyword| at(k).is_some_and(|t| t.is(keyword));
        let inserting = inserting_clause(&tokens[..i]);
        let (last, text) = if action.is(Keyword::UPDATE) {
            if is(2, Keyword::BY) && is(3, Keyword::NAME) {
                (i + 3, placeholder(false, BY_NAME))
            } else if is(2, Keyword::SET) && at(3).is_some_and(|t| t.token == Token::Mul) {
                (i + 3, placeholder(false, BY_POSITION))
            } else if action_ends(tokens, i + 2) {
                (i + 1, placeholder(false, BY_POSITION))
            } else {
                continue;
            }
        } else if action.is(Keyword::INSERT) {
            if is(2, Keyword::BY) && is(3, Keyword::NAME) {
                (i + 3, placeholder(true, BY_NAME))
            } else if at(2).is_some_and(|t| t.token == Token::Mul) {
                (i + 2, "INSERT ROW".to_string())
            } else if action_ends(tokens, i + 2) {
                (i + 1, "INSERT ROW".to_string())
            } else {
                continue;
            }
        } else if action.is(Keyword::DO) && is(2, Keyword::NOTHING) {
            (i + 2, placeholder(inserting, DO_NOTHING))
        } else if action.is(Keyword::ERROR) && action_ends(tokens, i + 2) {
            (i + 1, placeholder(inserting, RAISE))
        } else if action.is(Keyword::ERROR) {
            // `ERROR message`: the message expression becomes the placeholder's value.
            // Parenthesised, so that `ERROR NULL` differs from a bare `ERROR`.
            let end = message_end(tokens, i + 2);
            edits.push((tokens[end - 1].end, tokens[end - 1].end, ")".to_string()));
            if inserting {
                (i + 1, format!("INSERT (\"{RAISE}\") VALUES ("))
            } else {
                (i + 1, format!("UPDATE SET \"{RAISE}\" = ("))
            }
        } else {
            continue;
        };
        edits.push((action.start, tokens[last].end, text));
    }
}

/// `INSERT [OR …] INTO name BY NAME|POSITION`.
fn edit_insert(tokens: &[Tok], edits: &mut Vec<(usize, usize, String)>) {
    let Some(into) = tokens.iter().position(|t| t.is(Keyword::INTO)) else {
        return;
    };
    // The table name: words separated by periods.
    let mut i = into + 1;
    while tokens
        .get(i)
        .is_some_and(|t| matches!(t.token, Token::Word(_)))
        && tokens.get(i + 1).is_some_and(|t| t.token == Token::Period)
    {
        i += 2;
    }
    let (Some(by), Some(how)) = (tokens.get(i + 1), tokens.get(i + 2)) else {
        return;
    };
    if !by.is(Keyword::BY) {
        return;
    }
    if how.is(Keyword::NAME) {
        edits.push((by.start, how.end, format!("(\"{BY_NAME}\")")));
    } else if how.is(Keyword::POSITION) {
        edits.push((by.start, how.end, String::new()));
    }
}

/// `ALTER TABLE t SET|RESET PARTITIONED|SORTED BY [(…)]`.
fn edit_alter(sql: &str, tokens: &[Tok], edits: &mut Vec<(usize, usize, String)>) {
    for (i, verb) in tokens.iter().enumerate() {
        let set = verb.is(Keyword::SET);
        if !(set || verb.is(Keyword::RESET)) {
            continue;
        }
        let Some(what) = tokens.get(i + 1) else {
            continue;
        };
        let property = if what.is(Keyword::PARTITIONED) {
            PARTITIONED_BY
        } else if matches!(&what.token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("sorted"))
        {
            SORTED_BY
        } else {
            continue;
        };
        if !tokens.get(i + 2).is_some_and(|t| t.is(Keyword::BY)) {
            continue;
        }
        let (end, keys) = if set {
            let Some((close, inner)) = parenthesized(sql, tokens, i + 3) else {
                continue;
            };
            (tokens[close].end, inner)
        } else {
            (tokens[i + 2].end, "")
        };
        let value = keys.trim().replace('\'', "''");
        edits.push((
            verb.start,
            end,
            format!("SET TBLPROPERTIES (\"{property}\" = '{value}')"),
        ));
        return;
    }
}

/// `CREATE … TABLE … PARTITIONED BY (` → `PARTITION BY (`.
fn edit_create(tokens: &[Tok], edits: &mut Vec<(usize, usize, String)>) {
    if !tokens.iter().take(6).any(|t| t.is(Keyword::TABLE)) {
        return;
    }
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate() {
        match t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0
            && t.is(Keyword::PARTITIONED)
            && tokens.get(i + 1).is_some_and(|b| b.is(Keyword::BY))
            && tokens.get(i + 2).is_some_and(|p| p.token == Token::LParen)
        {
            edits.push((t.start, t.end, "PARTITION".to_string()));
            return;
        }
        if depth == 0 && t.is(Keyword::AS) {
            return;
        }
    }
}

/// The token index of the parenthesis closing the one at `open`, and the text between.
fn parenthesized<'a>(sql: &'a str, tokens: &[Tok], open: usize) -> Option<(usize, &'a str)> {
    if tokens.get(open)?.token != Token::LParen {
        return None;
    }
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        match t.token {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    return Some((i, sql.get(tokens[open].end..t.start)?));
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::to_generic;
    use datafusion::sql::parser::DFParser;
    use datafusion::sql::sqlparser::dialect::GenericDialect;

    fn generic(sql: &str) -> String {
        let out = to_generic(sql).into_owned();
        DFParser::parse_sql_with_dialect(&out, &GenericDialect {})
            .unwrap_or_else(|e| panic!("{out:?} does not parse: {e}"));
        out
    }

    #[test]
    fn samples_follow_their_table() {
        assert_eq!(
            generic("SELECT count(*) FROM c.s.t AS x WHERE k < 5 USING SAMPLE 10"),
            "SELECT count(*) FROM c.s.t AS x TABLESAMPLE (10 ROWS) WHERE k < 5 "
        );
        assert_eq!(
            generic("FROM t USING SAMPLE 10% ORDER BY k"),
            "SELECT * FROM t TABLESAMPLE (10 PERCENT)  ORDER BY k"
        );
        assert_eq!(
            generic("SELECT * FROM t USING SAMPLE bernoulli(2.5 PERCENT) REPEATABLE (7)"),
            "SELECT * FROM t TABLESAMPLE BERNOULLI (2.5 PERCENT) REPEATABLE (7) "
        );
        assert_eq!(
            generic("SELECT * FROM (SELECT * FROM t USING SAMPLE 5 (reservoir, 3)) s"),
            "SELECT * FROM (SELECT * FROM t TABLESAMPLE (5 ROWS) REPEATABLE (3) ) s"
        );
        assert_eq!(
            generic("SELECT * FROM t TABLESAMPLE 10% WHERE k % 2 = 0"),
            "SELECT * FROM t TABLESAMPLE 10 PERCENT WHERE k % 2 = 0"
        );
        // Over a join it is left as written, for the parser to refuse.
        let join = "SELECT * FROM a JOIN b USING (k) USING SAMPLE 10";
        assert_eq!(to_generic(join), join);
    }

    #[test]
    fn pivot_statements_become_table_factors() {
        assert_eq!(
            generic("PIVOT t ON k USING sum(v) AS total, max(v) GROUP BY s, d ORDER BY s LIMIT 2"),
            "SELECT * FROM t PIVOT (sum(v) AS total, max(v) FOR k IN (ANY)) \
             AS \"__deltalite_pivot_group_by\" (s, d) ORDER BY s LIMIT 2"
        );
        assert_eq!(
            generic("SELECT * FROM (PIVOT t AT (VERSION => 1) ON k, s IN (1, 2))"),
            "SELECT * FROM (SELECT * FROM \"t\u{1}v1\" AS \"t\" PIVOT (count(*) FOR (k, s) IN (1, 2)) )"
        );
        assert_eq!(
            generic("UNPIVOT t ON a, b INTO NAME n VALUE $x$v$x$ ORDER BY n"),
            "SELECT * FROM t UNPIVOT ('v' FOR n IN (a, b)) ORDER BY n"
        );
        assert_eq!(
            generic("CREATE TABLE u AS UNPIVOT t ON a, b"),
            "CREATE TABLE u AS SELECT * FROM t UNPIVOT (value FOR name IN (a, b)) "
        );
        assert_eq!(
            generic("EXPLAIN ANALYZE PIVOT t ON k"),
            "EXPLAIN ANALYZE SELECT * FROM t PIVOT (count(*) FOR k IN (ANY)) "
        );
        assert_eq!(generic("EXPLAIN FROM t"), "EXPLAIN SELECT * FROM t");
        assert_eq!(
            generic("WITH c AS (SELECT 1 AS k) PIVOT c ON k"),
            "WITH c AS (SELECT 1 AS k) SELECT * FROM c PIVOT (count(*) FOR k IN (ANY)) "
        );
        assert_eq!(
            generic("WITH c AS (SELECT 1 AS k), d AS (SELECT 2) FROM c WHERE k > 0"),
            "WITH c AS (SELECT 1 AS k), d AS (SELECT 2) SELECT * FROM c WHERE k > 0"
        );
        // A derived table after a CTE is no statement's start.
        assert_eq!(
            generic(
                "WITH c AS (SELECT 1 AS k) SELECT * FROM (SELECT * FROM c) PIVOT (count(*) FOR k IN (1))"
            ),
            "WITH c AS (SELECT 1 AS k) SELECT * FROM (SELECT * FROM c) PIVOT (count(*) FOR k IN (1))"
        );
        // A table named pivot, and PIVOT in a FROM clause, are left alone.
        assert_eq!(
            generic("SELECT pivot FROM pivot"),
            "SELECT pivot FROM pivot"
        );
        assert_eq!(
            generic("SELECT * FROM t PIVOT (sum(v) FOR k IN (1))"),
            "SELECT * FROM t PIVOT (sum(v) FOR k IN (1))"
        );
    }

    #[test]
    fn time_travel_clauses_mark_the_table_name() {
        assert_eq!(
            generic("SELECT t.a FROM t VERSION AS OF 3 WHERE t.a > 1"),
            "SELECT t.a FROM \"t\u{1}v3\" AS \"t\" WHERE t.a > 1"
        );
        assert_eq!(
            generic(
                "select * from c.s.\"Ev\" timestamp as of '2026-01-01' e join x at (version => 0) on true"
            ),
            "select * from c.s.\"Ev\u{1}t2026-01-01\" e join \"x\u{1}v0\" AS \"x\" on true"
        );
        assert_eq!(
            generic("SELECT * FROM a, B AT (TIMESTAMP => '2026-01-01 00:00:00') AS b2"),
            "SELECT * FROM a, \"b\u{1}t2026-01-01 00:00:00\" AS b2"
        );
        // Not after a table name in a FROM list: left alone.
        assert_eq!(
            to_generic("SELECT version AS of FROM t"),
            "SELECT version AS of FROM t"
        );
        assert_eq!(
            to_generic("RESTORE TABLE t TO VERSION AS OF 3"),
            "RESTORE TABLE t TO VERSION AS OF 3"
        );
    }

    #[test]
    fn from_without_a_select_list_selects_every_column() {
        assert_eq!(
            generic("FROM t WHERE k > 1 ORDER BY k"),
            "SELECT * FROM t WHERE k > 1 ORDER BY k"
        );
        assert_eq!(
            generic("SELECT n FROM (FROM t WHERE (k) > 1) AS x; from u"),
            "SELECT n FROM (SELECT * FROM t WHERE (k) > 1) AS x; SELECT * from u"
        );
        // A select list after FROM, and FROM anywhere else, are left alone.
        for kept in [
            "FROM t SELECT k WHERE k > 1",
            "DELETE FROM t WHERE k = 1",
            "SELECT * FROM t",
        ] {
            assert_eq!(generic(kept), kept);
        }
    }

    #[test]
    fn merge_actions_become_placeholders() {
        assert_eq!(
            generic(
                "MERGE INTO t AS d USING s ON (s.id = d.id) WHEN MATCHED THEN UPDATE BY NAME \
                 WHEN NOT MATCHED THEN INSERT BY NAME"
            ),
            "MERGE INTO t AS d USING s ON (s.id = d.id) WHEN MATCHED THEN UPDATE SET \
             \"__deltalite_by_name\" = NULL WHEN NOT MATCHED THEN INSERT (\"__deltalite_by_name\") ROW"
        );
        assert_eq!(
            generic(
                "merge into t using s on t.k = s.k when matched then update set * when not matched then insert *;"
            ),
            "merge into t using s on t.k = s.k when matched then UPDATE SET \"__deltalite_by_position\" = NULL when not matched then INSERT ROW;"
        );
        assert_eq!(
            generic(
                "merge into t using s on t.k = s.k when matched then update when not matched then insert"
            ),
            "merge into t using s on t.k = s.k when matched then UPDATE SET \"__deltalite_by_position\" = NULL when not matched then INSERT ROW"
        );
        assert_eq!(
            generic(
                "merge into t using s on t.k = s.k when matched and s.v > 1 then do nothing \
                 when not matched by source then error when not matched then do nothing"
            ),
            "merge into t using s on t.k = s.k when matched and s.v > 1 then UPDATE SET \
             \"__deltalite_do_nothing\" = NULL when not matched by source then UPDATE SET \
             \"__deltalite_error\" = NULL when not matched then INSERT (\"__deltalite_do_nothing\") ROW"
        );
        assert_eq!(
            generic(
                "merge into t using s on t.k = s.k when matched then error 'boom: ' || \
                 case when s.v > 1 then 'big' end when not matched then error s.k"
            ),
            "merge into t using s on t.k = s.k when matched then UPDATE SET \"__deltalite_error\" = ( \
             'boom: ' || case when s.v > 1 then 'big' end) when not matched then INSERT \
             (\"__deltalite_error\") VALUES ( s.k)"
        );
        // Standard forms are left alone.
        let standard = "MERGE INTO t USING s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = s.v \
                        WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v)";
        assert_eq!(generic(standard), standard);
    }

    #[test]
    fn insert_by_name_and_position() {
        assert_eq!(
            generic("INSERT INTO \"c\".\"s\".\"t\" BY NAME SELECT 1 AS k"),
            "INSERT INTO \"c\".\"s\".\"t\" (\"__deltalite_by_name\") SELECT 1 AS k"
        );
        assert_eq!(
            generic("insert into t by position select 1"),
            "insert into t  select 1"
        );
    }

    #[test]
    fn partitioning_ddl_becomes_properties() {
        assert_eq!(
            generic(
                "ALTER TABLE \"lake\".\"ds\".\"m\" SET PARTITIONED BY (\"region\", month(\"ts\"), bucket(8, \"id\"))"
            ),
            "ALTER TABLE \"lake\".\"ds\".\"m\" SET TBLPROPERTIES (\"deltalite.partitioned_by\" = \
             '\"region\", month(\"ts\"), bucket(8, \"id\")')"
        );
        assert_eq!(
            generic("ALTER TABLE t RESET PARTITIONED BY"),
            "ALTER TABLE t SET TBLPROPERTIES (\"deltalite.partitioned_by\" = '')"
        );
        assert_eq!(
            generic("alter table t set sorted by (\"name\");"),
            "alter table t SET TBLPROPERTIES (\"deltalite.sorted_by\" = '\"name\"');"
        );
        assert_eq!(
            generic("CREATE TABLE t (a INT, d DATE) PARTITIONED BY (d, year(d))"),
            "CREATE TABLE t (a INT, d DATE) PARTITION BY (d, year(d))"
        );
        assert_eq!(
            generic("CREATE OR REPLACE TABLE t PARTITIONED BY (d) AS SELECT 1 AS d"),
            "CREATE OR REPLACE TABLE t PARTITION BY (d) AS SELECT 1 AS d"
        );
    }

    #[test]
    fn lambdas_are_calls() {
        assert_eq!(
            generic("SELECT list_transform(l, lambda x, i: x + i) FROM t"),
            "SELECT list_transform(l, \"__deltalite_lambda\"(x, i,  x + i)) FROM t"
        );
        // The body runs to its argument's end; nested lambdas each close their own.
        assert_eq!(
            generic("SELECT list_reduce(l, lambda a, x: f(a, [x, 1]), 0)"),
            "SELECT list_reduce(l, \"__deltalite_lambda\"(a, x,  f(a, [x, 1])), 0)"
        );
        assert_eq!(
            generic("SELECT apply(l, lambda y: list_filter(y, lambda z: z > 0))"),
            "SELECT apply(l, \"__deltalite_lambda\"(y,  list_filter(y, \"__deltalite_lambda\"(z,  z > 0))))"
        );
        // A list comprehension, its parts spliced too.
        assert_eq!(
            generic("SELECT [x + 1 FOR x IN l IF x > 1], [y FOR y IN [1, 2]]"),
            "SELECT list_transform(list_filter(l, \"__deltalite_lambda\"(x, x > 1)), \"__deltalite_lambda\"(x, x + 1)), \
             list_transform([1, 2], \"__deltalite_lambda\"(y, y))"
        );
        // GLOB of a text pattern: a regular expression; of anything else, as written.
        assert_eq!(
            generic("SELECT s GLOB 'a*[!b]?.', s NOT GLOB '\\*[x' FROM t"),
            "SELECT s ~ '(?s)^a.*[^b].\\.$', s !~ '(?s)^\\*[^\\s\\S]x$' FROM t"
        );
        assert_eq!(
            to_generic("SELECT s GLOB p FROM t"),
            "SELECT s GLOB p FROM t"
        );
        // The arrow form, only as an argument of a function that takes a lambda.
        assert_eq!(
            generic("SELECT array_filter(l, (x, i) -> i > 1)"),
            "SELECT array_filter(l, \"__deltalite_lambda\"(x, i,  i > 1))"
        );
        for unchanged in [
            "SELECT j -> 'a', f(j -> 'a') FROM t",
            "SELECT lambda FROM t",
            "SELECT lambda, x FROM t",
        ] {
            assert_eq!(generic(unchanged), unchanged);
        }
    }

    #[test]
    fn filters_without_where_and_double_stars() {
        assert_eq!(
            generic("SELECT count(*) FILTER (k > 1), sum(v) FILTER (WHERE v > 0) FROM t"),
            "SELECT count(*) FILTER (WHERE k > 1), sum(v) FILTER (WHERE v > 0) FROM t"
        );
        // `filter` as a function (its lambda spliced, `lambdas_are_calls`), or a column,
        // keeps its name.
        assert_eq!(
            generic("SELECT filter(l, x -> x > 1), filter FROM t"),
            "SELECT filter(l, \"__deltalite_lambda\"(x,  x > 1)), filter FROM t"
        );
        assert_eq!(
            generic("SELECT 2**3, 2 * 3, count(*)*2"),
            "SELECT 2^3, 2 * 3, count(*)*2"
        );
    }

    #[test]
    fn dollar_strings_and_bare_semi_joins() {
        assert_eq!(
            generic(
                "comment on column t.c is $dbt_comment_literal_block$It's$dbt_comment_literal_block$"
            ),
            "comment on column t.c is 'It''s'"
        );
        assert_eq!(
            generic("SELECT 1 FROM t AS a SEMI JOIN u AS b ON a.k = b.k ANTI JOIN v ON TRUE"),
            "SELECT 1 FROM t AS a LEFT SEMI JOIN u AS b ON a.k = b.k LEFT ANTI JOIN v ON TRUE"
        );
        let already = "SELECT 1 FROM t LEFT SEMI JOIN u ON TRUE RIGHT ANTI JOIN v ON TRUE";
        assert_eq!(generic(already), already);
    }

    #[test]
    fn strings_names_and_comments_are_not_touched() {
        for sql in [
            "SELECT 'then update by name' AS \"insert by name\"",
            "SELECT 1 -- merge into t then update\n",
            "INSERT INTO t VALUES ('by name')",
            "SELECT E'it''s'",
        ] {
            assert_eq!(to_generic(sql), sql);
        }
        // Multi-byte text before a splice keeps the offsets right.
        assert_eq!(
            generic("INSERT INTO \"▶t\" BY NAME SELECT 'é' AS k"),
            "INSERT INTO \"▶t\" (\"__deltalite_by_name\") SELECT 'é' AS k"
        );
    }

    #[test]
    fn current_catalog_with_parentheses_is_the_session_function() {
        assert_eq!(
            generic("SELECT current_catalog() AS c, CURRENT_CATALOG ( )"),
            "SELECT \"current_catalog\"() AS c, \"current_catalog\" ( )"
        );
        // A quoted name, and the keyword form without parentheses, are left alone.
        assert_eq!(
            to_generic("SELECT \"current_catalog\"()"),
            "SELECT \"current_catalog\"()"
        );
        assert_eq!(
            to_generic("SELECT current_catalog"),
            "SELECT current_catalog"
        );
    }
}
