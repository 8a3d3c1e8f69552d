//! The wall clock in epoch milliseconds, as records, notices and outcomes are stamped.

/// The wall clock in epoch milliseconds (0 before 1970, saturated far in the future).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
