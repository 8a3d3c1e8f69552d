//! Checks of one configured value, each refusing it with the name of its field.

use crate::error::{DispatchError, Result};

/// Refuses an empty (or blank) value.
pub(crate) fn non_empty(field: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        Err(DispatchError::config(field, "must not be empty"))
    } else {
        Ok(())
    }
}

/// Refuses 0.
pub(crate) fn positive(field: &str, value: u64) -> Result<()> {
    if value == 0 {
        Err(DispatchError::config(field, "must be at least 1"))
    } else {
        Ok(())
    }
}

/// Refuses a value above `max`.
pub(crate) fn at_most(field: &str, value: usize, max: usize) -> Result<()> {
    if value > max {
        Err(DispatchError::config(
            field,
            format!("must be at most {max}"),
        ))
    } else {
        Ok(())
    }
}
