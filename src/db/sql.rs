//! SQL assembled from static fragments with numbered placeholders (`$1`, `$2`, …), which both
//! stores read. sqlx's `QueryBuilder` writes `?` for the `Any` driver, which PostgreSQL
//! rejects, so listings with optional filters build their text here.

use std::fmt::Write;

use sqlx::any::{Any, AnyArguments};
use sqlx::{Arguments, Encode, Type};

/// A statement being assembled, with its bound values in placeholder order.
#[derive(Default)]
pub struct Sql {
    text: String,
    args: AnyArguments,
    count: usize,
    error: Option<String>,
    /// Rows of a multi-row `VALUES` written so far, and values in the row being written.
    rows: usize,
    in_row: Option<usize>,
}

impl Sql {
    /// Starts with `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Sql {
            text: text.into(),
            ..Sql::default()
        }
    }

    /// Appends literal SQL: only the program's own text (`'static`), never a value.
    pub fn push(&mut self, text: &'static str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Appends the next placeholder and binds `value` to it.
    pub fn push_bind<'q, T>(&mut self, value: T) -> &mut Self
    where
        T: Encode<'q, Any> + Type<Any> + 'q,
    {
        if let Some(n) = &mut self.in_row {
            if *n > 0 {
                self.text.push_str(", ");
            }
            *n += 1;
        }
        self.count += 1;
        let _ = write!(self.text, "${}", self.count);
        if let Err(e) = self.args.add(value) {
            self.error.get_or_insert(e.to_string());
        }
        self
    }

    /// Appends `values` as a parenthesised, comma-separated list of placeholders; an empty
    /// list is `(NULL)`, which matches nothing (`IN ()` is SQLite's alone).
    pub fn push_list<'q, T>(&mut self, values: impl IntoIterator<Item = T>) -> &mut Self
    where
        T: Encode<'q, Any> + Type<Any> + 'q,
    {
        self.text.push('(');
        let mut none = true;
        for (i, v) in values.into_iter().enumerate() {
            none = false;
            if i > 0 {
                self.text.push_str(", ");
            }
            self.push_bind(v);
        }
        if none {
            self.text.push_str("NULL");
        }
        self.text.push(')');
        self
    }

    /// Appends one row of a multi-row `VALUES` list: `(…)`, or `, (…)` after the first, with
    /// the values `row` binds separated by commas.
    pub fn push_row(&mut self, row: impl FnOnce(&mut Sql)) -> &mut Self {
        self.text.push_str(if self.rows == 0 { "(" } else { ", (" });
        self.rows += 1;
        self.in_row = Some(0);
        row(self);
        self.in_row = None;
        self.text.push(')');
        self
    }

    /// The text so far (for tests and plans).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text and its arguments, or the first value that could not be bound.
    pub fn finish(self) -> sqlx::Result<(String, AnyArguments)> {
        match self.error {
            Some(e) => Err(sqlx::Error::Encode(e.into())),
            None => Ok((self.text, self.args)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_in_order_and_lists_are_parenthesised() {
        let mut q = Sql::new("SELECT x FROM t WHERE a = ");
        q.push_bind(1_i64)
            .push(" AND b IN ")
            .push_list(["p", "q", "r"])
            .push(" LIMIT ")
            .push_bind(5_i64);
        assert_eq!(
            q.text(),
            "SELECT x FROM t WHERE a = $1 AND b IN ($2, $3, $4) LIMIT $5"
        );
        let (_, args) = q.finish().unwrap();
        assert_eq!(args.len(), 5);
    }

    #[test]
    fn rows_of_values_are_parenthesised_and_separated() {
        let mut q = Sql::new("INSERT INTO t (a, b) VALUES ");
        for (a, b) in [(1_i64, "x"), (2, "y")] {
            q.push_row(|r| {
                r.push_bind(a).push_bind(b);
            });
        }
        assert_eq!(q.text(), "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)");
    }

    #[test]
    fn an_empty_list_is_a_null_that_matches_nothing() {
        let mut q = Sql::new("IN ");
        q.push_list(Vec::<i64>::new());
        assert_eq!(q.text(), "IN (NULL)");
    }
}
