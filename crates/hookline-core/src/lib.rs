//! hookline's core: record types, retry policy, classification, state machine, DLQ envelope.
