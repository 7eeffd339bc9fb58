//! Newtypes and rules. No I/O: holding one of these types proves the value is valid.

pub mod absorption;
pub mod caller;
pub mod capacity;
pub mod clock;
pub mod database_url;
pub mod deficit;
pub mod digest;
pub mod field_error;
pub mod fleet;
pub mod lease;
pub mod machine;
pub mod money;
pub mod password;
pub mod plan_check;
pub mod plan_check_blocking;
pub mod provision;
pub mod rebucket;
pub mod role;
pub mod secret;
pub mod stored;
pub mod text;
pub mod textdiff;
pub mod username;

pub use caller::{Actor, Caller, Forbidden};
pub use clock::{millis, Clock, ManualClock, SystemClock, UnixMillis};
pub use field_error::{FieldError, FieldErrors};
pub use password::NewPassword;
pub use provision::{MachineStatus, ProvisionState};
pub use role::Role;
pub use stored::{parse_stored, parse_stored_name, StoredValueError};
pub use username::Username;
