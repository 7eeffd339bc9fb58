use serde::Serialize;

/// A rule broken by one input field: the field's name and a sentence a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    /// A message about `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Every rule a submitted form or JSON body broke, collected so all are shown at once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FieldErrors(pub Vec<FieldError>);

impl FieldErrors {
    /// Records the error of a parse, keeping the value when it succeeded.
    pub fn check<T>(&mut self, result: Result<T, FieldError>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                self.0.push(e);
                None
            }
        }
    }

    /// Adds one error.
    pub fn push(&mut self, field: &str, message: impl Into<String>) {
        self.0.push(FieldError::new(field, message));
    }

    /// True when nothing was wrong.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The message for `field`, if that field broke a rule.
    pub fn for_field(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|e| e.field == field)
            .map(|e| e.message.as_str())
    }
}

impl std::fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join("; "))
    }
}

impl From<FieldError> for FieldErrors {
    fn from(e: FieldError) -> Self {
        Self(vec![e])
    }
}

/// Rejects control characters, which never belong in a one-line field and break logs and CSV.
pub fn reject_control_chars(field: &str, value: &str) -> Result<(), FieldError> {
    if value.chars().any(char::is_control) {
        return Err(FieldError::new(
            field,
            "must not contain control characters (newlines, tabs, NUL, …)",
        ));
    }
    Ok(())
}
