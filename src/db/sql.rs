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
}

impl Sql {
    /// Starts with `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Sql {
            text: text.into(),
            ..Sql::default()
        }
    }

    /// Appends literal SQL (never a value).
    pub fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Appends the next placeholder and binds `value` to it.
    pub fn push_bind<'q, T>(&mut self, value: T) -> &mut Self
    where
        T: Encode<'q, Any> + Type<Any> + 'q,
    {
        self.count += 1;
        let _ = write!(self.text, "${}", self.count);
        if let Err(e) = self.args.add(value) {
            self.error.get_or_insert(e.to_string());
        }
        self
    }

    /// Appends `values` as a parenthesised, comma-separated list of placeholders.
    pub fn push_list<'q, T>(&mut self, values: impl IntoIterator<Item = T>) -> &mut Self
    where
        T: Encode<'q, Any> + Type<Any> + 'q,
    {
        self.text.push('(');
        for (i, v) in values.into_iter().enumerate() {
            if i > 0 {
                self.text.push_str(", ");
            }
            self.push_bind(v);
        }
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
    fn an_empty_list_is_an_empty_pair_of_parentheses() {
        let mut q = Sql::new("IN ");
        q.push_list(Vec::<i64>::new());
        assert_eq!(q.text(), "IN ()");
    }
}
