//! The user's extra librdkafka properties: which ones hookline refuses to let them
//! override, which ones hold secrets (redacted wherever settings are shown), and the
//! resolution of `${env:NAME}` / `${file:PATH}` references in their values.

use hookline_core::secret::{Secret, SecretError, is_reference};

/// Properties that `kafka.properties` (and `--kafka-property`) may not set, with why:
/// hookline sets them itself and its delivery guarantees depend on their values.
pub const RESERVED_PROPERTIES: &[(&str, &str)] = &[
    (
        "bootstrap.servers",
        "it has its own setting: kafka.bootstrap_servers (--bootstrap-servers)",
    ),
    (
        "metadata.broker.list",
        "it is an alias of bootstrap.servers, which has its own setting: \
         kafka.bootstrap_servers (--bootstrap-servers)",
    ),
    (
        "acks",
        "hookline's producers write with acks=all, so that an acknowledged record is durable",
    ),
    (
        "request.required.acks",
        "it is an alias of acks: hookline's producers write with acks=all, so that an \
         acknowledged record is durable",
    ),
    (
        "enable.idempotence",
        "hookline's producers are idempotent, so that retries neither duplicate nor reorder \
         records",
    ),
    (
        "enable.auto.offset.store",
        "hookline stores an offset only once the record's outcome is durable",
    ),
    (
        "enable.auto.commit",
        "hookline commits only offsets it stored after the record's outcome was durable",
    ),
    (
        "auto.commit.enable",
        "it is an alias of enable.auto.commit: hookline commits only offsets it stored after \
         the record's outcome was durable",
    ),
    (
        "isolation.level",
        "the dispatcher reads only committed records (read_committed) of the fan-out's \
         transactions",
    ),
    (
        "group.id",
        "each hookline consumer has its own group (the dispatcher's is group_id)",
    ),
    (
        "transactional.id",
        "the fan-out sets its own transactional id per instance (fanout.transactional_id)",
    ),
    (
        "delivery.report.only.error",
        "hookline waits for the delivery report of every record it writes",
    ),
];

/// Properties whose values are secrets, besides any whose name contains `password`,
/// `secret` or `token`.
const SENSITIVE_PROPERTIES: &[&str] =
    &["ssl.key.pem", "sasl.jaas.config", "sasl.oauthbearer.config"];

/// Why hookline refuses a property, if it does (see [`RESERVED_PROPERTIES`]).
pub fn reserved(property: &str) -> Option<&'static str> {
    let property = property.trim();
    RESERVED_PROPERTIES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(property))
        .map(|(_, why)| *why)
}

/// Whether a property's value is a secret, never to be shown.
pub fn is_sensitive(property: &str) -> bool {
    let property = property.trim().to_ascii_lowercase();
    SENSITIVE_PROPERTIES.contains(&property.as_str())
        || ["password", "secret", "token"]
            .iter()
            .any(|word| property.contains(word))
}

/// A property's value as it may be shown: secrets as `<redacted>`; references (which hold
/// no secret) as written.
pub fn shown(property: &str, value: &str) -> String {
    if is_sensitive(property) && !is_reference(value) {
        "<redacted>".to_owned()
    } else {
        value.to_owned()
    }
}

/// A property hookline cannot use.
#[derive(Debug, thiserror::Error)]
pub enum PropertyError {
    /// A property hookline sets itself (see [`RESERVED_PROPERTIES`]).
    #[error("kafka property `{property}` cannot be set: {reason}")]
    Reserved {
        /// The property.
        property: String,
        /// Why hookline sets it itself.
        reason: &'static str,
    },
    /// A `${env:NAME}` or `${file:PATH}` reference that does not resolve.
    #[error("kafka property `{property}`: {source}")]
    Unresolved {
        /// The property.
        property: String,
        /// What is wrong with the reference (it names the reference, never a value).
        #[source]
        source: SecretError,
    },
    /// librdkafka does not know the property or refuses its value.
    #[error("kafka property `{property}`: {reason}")]
    Refused {
        /// The property.
        property: String,
        /// librdkafka's reason, with a secret value taken out.
        reason: String,
    },
}

impl PropertyError {
    /// The property at fault.
    pub fn property(&self) -> &str {
        match self {
            PropertyError::Reserved { property, .. }
            | PropertyError::Unresolved { property, .. }
            | PropertyError::Refused { property, .. } => property,
        }
    }

    /// What is wrong with it, without the property's name.
    pub fn reason(&self) -> String {
        match self {
            PropertyError::Reserved { reason, .. } => format!("cannot be set: {reason}"),
            PropertyError::Unresolved { source, .. } => source.to_string(),
            PropertyError::Refused { reason, .. } => reason.clone(),
        }
    }
}

/// The value to give librdkafka: a reference resolved, anything else as written.
pub fn resolve(property: &str, value: &str) -> Result<Secret, PropertyError> {
    Secret::resolve(value).map_err(|source| PropertyError::Unresolved {
        property: property.to_owned(),
        source,
    })
}

/// librdkafka's reason for refusing `property = value`, without the value if it is a
/// secret (its messages quote refused values).
pub fn scrub(property: &str, value: &str, reason: &str) -> String {
    if is_sensitive(property) && !value.is_empty() {
        reason.replace(value, "<redacted>")
    } else {
        reason.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarantees_cannot_be_overridden() {
        for property in [
            "acks",
            "request.required.acks",
            "enable.idempotence",
            "enable.auto.offset.store",
            "enable.auto.commit",
            "isolation.level",
            "group.id",
            "transactional.id",
            "bootstrap.servers",
            " Enable.Auto.Commit ",
        ] {
            assert!(reserved(property).is_some(), "{property} should be refused");
        }
        for property in [
            "security.protocol",
            "sasl.mechanism",
            "sasl.password",
            "message.max.bytes",
            "linger.ms",
            "partition.assignment.strategy",
        ] {
            assert_eq!(reserved(property), None, "{property} should be allowed");
        }
    }

    #[test]
    fn secrets_are_recognised_by_name() {
        for property in [
            "sasl.password",
            "ssl.key.password",
            "ssl.keystore.password",
            "ssl.key.pem",
            "sasl.oauthbearer.client.secret",
            "sasl.jaas.config",
            "some.vendor.token",
            "SASL.PASSWORD",
        ] {
            assert!(is_sensitive(property), "{property} should be a secret");
            assert_eq!(shown(property, "hunter2"), "<redacted>");
        }
        assert!(!is_sensitive("sasl.username"));
        assert_eq!(shown("sasl.username", "hookline"), "hookline");
        // A reference holds no secret: showing it helps find a misconfiguration.
        assert_eq!(
            shown("sasl.password", "${file:/run/secrets/kafka}"),
            "${file:/run/secrets/kafka}"
        );
    }

    #[test]
    fn refusals_do_not_quote_secret_values() {
        let reason = "Invalid value \"hunter2\" for configuration property \"sasl.password\"";
        assert!(!scrub("sasl.password", "hunter2", reason).contains("hunter2"));
        assert!(scrub("linger.ms", "abc", "Invalid value \"abc\"").contains("abc"));
    }
}
