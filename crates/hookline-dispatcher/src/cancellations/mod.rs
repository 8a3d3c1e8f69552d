//! Deadlines and cancellations: what stops a delivery before its next attempt. The event's
//! `expires_at` has passed, or `hookline events cancel` cancelled the event (or its delivery
//! to this endpoint) in the compacted cancellations topic, which every dispatcher reads to
//! its end at start and then follows. Either parks the delivery (`expired`, `cancelled`)
//! without an attempt.

mod check;
mod follower;
mod set;

pub(crate) use check::{before_attempt, before_fanout, retry_past_deadline};
pub(crate) use set::CancellationSet;
