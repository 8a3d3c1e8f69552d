//! Event type patterns and channel names: their limits, their checks, and how a pattern
//! is read.

/// The longest event type pattern, in bytes.
pub const MAX_PATTERN_LEN: usize = 256;
/// The most event type patterns in one subscription.
pub const MAX_EVENT_TYPES: usize = 64;
/// The most channels in one subscription.
pub const MAX_CHANNELS: usize = 10;
/// The longest channel name, in bytes.
pub const MAX_CHANNEL_LEN: usize = 128;
/// Whether `pattern` (read as the index reads it) matches `event_type`.
pub fn pattern_matches(pattern: &str, event_type: &str) -> bool {
    match Pattern::parse(pattern) {
        Pattern::All => true,
        Pattern::Prefix(prefix) => {
            event_type.len() > prefix.len() && event_type.starts_with(prefix)
        }
        Pattern::Exact(name) => name == event_type,
    }
}
/// Why an event type pattern or a channel name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// The pattern is empty.
    #[error("event type pattern is empty")]
    Empty,
    /// The pattern is longer than [`MAX_PATTERN_LEN`].
    #[error("event type pattern is {len} bytes, over the limit of {MAX_PATTERN_LEN}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The pattern holds a control character.
    #[error("event type pattern has a control character at byte {at}")]
    ControlCharacter {
        /// Where, in bytes from the start.
        at: usize,
    },
    /// The pattern holds whitespace.
    #[error("event type pattern has whitespace at byte {at}")]
    Whitespace {
        /// Where, in bytes from the start.
        at: usize,
    },
    /// A dot-segment is empty: `a..b`, `.a` or `a.`.
    #[error("event type pattern `{pattern}` has an empty dot-segment (as in `a..b`, `.a` or `a.`)")]
    EmptySegment {
        /// The pattern.
        pattern: String,
    },
    /// A `*` that is not the whole last dot-segment: `inv*`, `*.paid`, `a.*.b`.
    #[error(
        "event type pattern `{pattern}` has a `*` that is not the whole last dot-segment \
         (write `invoice.*` or `*`)"
    )]
    MisplacedWildcard {
        /// The pattern.
        pattern: String,
    },
    /// More than [`MAX_EVENT_TYPES`] patterns in one subscription.
    #[error("subscription has {count} event type patterns, over the limit of {MAX_EVENT_TYPES}")]
    TooManyEventTypes {
        /// How many.
        count: usize,
    },
    /// The channel name is empty.
    #[error("channel name is empty")]
    ChannelEmpty,
    /// The channel name is longer than [`MAX_CHANNEL_LEN`].
    #[error("channel name is {len} bytes, over the limit of {MAX_CHANNEL_LEN}")]
    ChannelTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The channel name holds a character that is not visible ASCII.
    #[error("channel name has a character that is not visible ASCII at byte {at}")]
    ChannelCharacter {
        /// Where, in bytes from the start.
        at: usize,
    },
    /// The channel name holds a `*`.
    #[error("channel name must not contain `*` (at byte {at})")]
    ChannelWildcard {
        /// Where, in bytes from the start.
        at: usize,
    },
    /// More than [`MAX_CHANNELS`] channels in one subscription.
    #[error("subscription has {count} channels, over the limit of {MAX_CHANNELS}")]
    TooManyChannels {
        /// How many.
        count: usize,
    },
}

/// Checks one event type pattern: an exact name, `prefix.*` or `*`.
pub fn check_pattern(pattern: &str) -> Result<(), PatternError> {
    if pattern.is_empty() {
        return Err(PatternError::Empty);
    }
    if pattern.len() > MAX_PATTERN_LEN {
        return Err(PatternError::TooLong { len: pattern.len() });
    }
    if let Some((at, _)) = pattern.char_indices().find(|(_, c)| c.is_control()) {
        return Err(PatternError::ControlCharacter { at });
    }
    if let Some((at, _)) = pattern.char_indices().find(|(_, c)| c.is_whitespace()) {
        return Err(PatternError::Whitespace { at });
    }
    if pattern.split('.').any(str::is_empty) {
        return Err(PatternError::EmptySegment {
            pattern: pattern.to_owned(),
        });
    }
    let body = match pattern.strip_suffix(".*") {
        Some(prefix) => prefix,
        None if pattern == "*" => "",
        None => pattern,
    };
    if body.contains('*') {
        return Err(PatternError::MisplacedWildcard {
            pattern: pattern.to_owned(),
        });
    }
    Ok(())
}

/// Checks one channel name: 1 to [`MAX_CHANNEL_LEN`] bytes of visible ASCII, no `*`.
pub fn check_channel(name: &str) -> Result<(), PatternError> {
    if name.is_empty() {
        return Err(PatternError::ChannelEmpty);
    }
    if name.len() > MAX_CHANNEL_LEN {
        return Err(PatternError::ChannelTooLong { len: name.len() });
    }
    if let Some(at) = name.bytes().position(|b| !b.is_ascii_graphic()) {
        return Err(PatternError::ChannelCharacter { at });
    }
    if let Some(at) = name.bytes().position(|b| b == b'*') {
        return Err(PatternError::ChannelWildcard { at });
    }
    Ok(())
}

/// A pattern as the index reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Pattern<'a> {
    /// `*`.
    All,
    /// `prefix.*`, holding `prefix.` (with its dot).
    Prefix(&'a str),
    /// Anything else.
    Exact(&'a str),
}

impl<'a> Pattern<'a> {
    pub(super) fn parse(pattern: &'a str) -> Self {
        if pattern == "*" {
            return Pattern::All;
        }
        match pattern.strip_suffix('*') {
            Some(prefix) if prefix.ends_with('.') => Pattern::Prefix(prefix),
            _ => Pattern::Exact(pattern),
        }
    }
}
