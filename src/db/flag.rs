//! A yes/no column as either store keeps it: SQLite's `INTEGER` 0/1, PostgreSQL's `BOOLEAN`.
//! sqlx's `Any` driver decodes `bool` only from a boolean, so rows read a `Flag` and
//! convert (`#[sqlx(try_from = "Flag")]` on a `bool` field). Binding a `bool` needs nothing:
//! the SQLite driver sends it as 0 or 1.

use sqlx::any::{Any, AnyTypeInfo, AnyTypeInfoKind, AnyValueRef};
use sqlx::decode::Decode;
use sqlx::error::BoxDynError;
use sqlx::{Type, ValueRef};

/// A decoded yes/no column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag(pub bool);

impl From<Flag> for bool {
    fn from(f: Flag) -> bool {
        f.0
    }
}

impl Type<Any> for Flag {
    fn type_info() -> AnyTypeInfo {
        <bool as Type<Any>>::type_info()
    }

    fn compatible(ty: &AnyTypeInfo) -> bool {
        matches!(
            ty.kind(),
            AnyTypeInfoKind::Bool
                | AnyTypeInfoKind::SmallInt
                | AnyTypeInfoKind::Integer
                | AnyTypeInfoKind::BigInt
        )
    }
}

impl<'r> Decode<'r, Any> for Flag {
    fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
        if value.type_info().kind() == AnyTypeInfoKind::Bool {
            return <bool as Decode<Any>>::decode(value).map(Flag);
        }
        match <i64 as Decode<Any>>::decode(value)? {
            0 => Ok(Flag(false)),
            1 => Ok(Flag(true)),
            n => Err(format!("a yes/no column holds {n}, not 0 or 1").into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use sqlx::{AnyConnection, Connection};

    use super::Flag;

    #[tokio::test]
    async fn integers_zero_and_one_decode_and_any_other_number_is_refused() {
        crate::db::install_drivers();
        let mut conn = AnyConnection::connect("sqlite::memory:").await.unwrap();
        let read = |sql: &'static str| sqlx::query_scalar::<_, Flag>(sql);
        assert_eq!(
            read("SELECT 0").fetch_one(&mut conn).await.unwrap(),
            Flag(false)
        );
        assert_eq!(
            read("SELECT 1").fetch_one(&mut conn).await.unwrap(),
            Flag(true)
        );
        assert_eq!(
            read("SELECT TRUE").fetch_one(&mut conn).await.unwrap(),
            Flag(true)
        );
        let two = read("SELECT 2").fetch_one(&mut conn).await.unwrap_err();
        assert!(two.to_string().contains("not 0 or 1"), "{two}");
        let text = read("SELECT 'yes'").fetch_one(&mut conn).await;
        assert!(text.is_err());
    }
}
