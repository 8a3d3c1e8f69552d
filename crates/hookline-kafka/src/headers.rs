//! Kafka headers read as bytes. rdkafka's own accessor (`Headers::try_get`, `iter`) unwraps
//! the name's UTF-8 conversion and panics on a record any client can write; this reads names
//! and values through librdkafka directly and copies them out.

// The one place in the workspace that calls librdkafka itself.
#![allow(unsafe_code)]

use std::borrow::Cow;
use std::ffi::{CStr, c_char, c_void};
use std::ptr;

use rdkafka::bindings::{rd_kafka_header_cnt, rd_kafka_header_get_all, rd_kafka_headers_t};
use rdkafka::message::{BorrowedHeaders, Message, OwnedHeaders};
use rdkafka::types::RDKafkaRespErr;

/// One Kafka header as it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawHeader {
    /// The name's bytes, which need not be UTF-8. librdkafka hands names out as C strings, so
    /// a name is read up to its first NUL byte.
    pub name: Vec<u8>,
    /// The value, `None` for a null value (as opposed to an empty one).
    pub value: Option<Vec<u8>>,
}

impl RawHeader {
    /// The name as text, each invalid UTF-8 sequence replaced by U+FFFD.
    pub fn name_lossy(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.name)
    }
}

/// Header collections [`read_headers`] can read: rdkafka's [`BorrowedHeaders`] (of a
/// consumed [`BorrowedMessage`](rdkafka::message::BorrowedMessage)) and [`OwnedHeaders`] (of
/// an [`OwnedMessage`](rdkafka::message::OwnedMessage)).
pub trait NativeHeaders: sealed::Sealed {}

mod sealed {
    use super::rd_kafka_headers_t;

    /// Sealed: the pointer it gives is trusted by an `unsafe` block.
    pub trait Sealed {
        /// The librdkafka headers behind `self`, valid for as long as `self` is borrowed.
        fn as_native(&self) -> *const rd_kafka_headers_t;
    }
}

// rdkafka makes a `&BorrowedHeaders` by casting the native `rd_kafka_headers_t` pointer
// (`BorrowedHeaders::from_native_ptr`, `OwnedHeaders::as_borrowed`): the zero-sized marker's
// address is the native headers. Should it ever stop being zero-sized, the cast below is
// wrong, so the build stops here.
const _: () = assert!(size_of::<BorrowedHeaders>() == 0);

impl sealed::Sealed for BorrowedHeaders {
    fn as_native(&self) -> *const rd_kafka_headers_t {
        ptr::from_ref(self).cast()
    }
}
impl NativeHeaders for BorrowedHeaders {}

impl sealed::Sealed for OwnedHeaders {
    fn as_native(&self) -> *const rd_kafka_headers_t {
        sealed::Sealed::as_native(self.as_borrowed())
    }
}
impl NativeHeaders for OwnedHeaders {}

/// A message's headers, in order (repeats kept), copied out of the message; empty when it
/// has none. Never panics, whatever bytes the names hold.
pub fn read_headers<M>(message: &M) -> Vec<RawHeader>
where
    M: Message,
    M::Headers: NativeHeaders,
{
    message.headers().map(read_header_list).unwrap_or_default()
}

/// The headers of a header collection, in order, copied out.
pub fn read_header_list<H: NativeHeaders>(headers: &H) -> Vec<RawHeader> {
    let native = headers.as_native();
    // SAFETY: `native` is a live `rd_kafka_headers_t` (see `Sealed::as_native`) that nothing
    // changes or frees while `headers` is borrowed, i.e. for the whole of this function.
    let count = unsafe { rd_kafka_header_cnt(native) };
    let mut out = Vec::with_capacity(count);
    for idx in 0..count {
        let mut name: *const c_char = ptr::null();
        let mut value: *const c_void = ptr::null();
        let mut size: usize = 0;
        // SAFETY: as above for `native`; the three out-pointers point to live locals.
        let err = unsafe { rd_kafka_header_get_all(native, idx, &mut name, &mut value, &mut size) };
        if err != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
            break;
        }
        // SAFETY: librdkafka stores each name NUL-terminated and keeps it until the headers
        // are destroyed, which cannot happen while `headers` is borrowed; the bytes are copied
        // before returning.
        let name = unsafe { CStr::from_ptr(name) }.to_bytes().to_vec();
        let value = (!value.is_null()).then(|| {
            // SAFETY: a non-null value points to `size` bytes that live as long as the name;
            // copied out at once.
            unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size) }.to_vec()
        });
        out.push(RawHeader { name, value });
    }
    out
}

#[cfg(test)]
mod tests {
    use rdkafka::bindings::{rd_kafka_header_add, rd_kafka_headers_destroy, rd_kafka_headers_new};
    use rdkafka::message::{Header, OwnedMessage, Timestamp};

    use super::*;

    /// Headers made with librdkafka's own calls, so that a name can hold any bytes (rdkafka's
    /// `OwnedHeaders::insert` takes a `&str`).
    struct CHeaders(*mut rd_kafka_headers_t);

    impl CHeaders {
        fn new(headers: &[(&[u8], Option<&[u8]>)]) -> Self {
            // SAFETY: creates a fresh headers list, freed in `drop`.
            let native = unsafe { rd_kafka_headers_new(headers.len()) };
            assert!(!native.is_null());
            for (name, value) in headers {
                let (value_ptr, value_len) = match value {
                    Some(v) => (v.as_ptr().cast::<c_void>(), v.len() as isize),
                    None => (ptr::null(), 0),
                };
                // SAFETY: `native` is live; name and value are valid for their lengths and
                // librdkafka copies them.
                let err = unsafe {
                    rd_kafka_header_add(
                        native,
                        name.as_ptr().cast::<c_char>(),
                        name.len() as isize,
                        value_ptr,
                        value_len,
                    )
                };
                assert_eq!(err, RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR);
            }
            CHeaders(native)
        }
    }

    impl Drop for CHeaders {
        fn drop(&mut self) {
            // SAFETY: made by `rd_kafka_headers_new`, destroyed once.
            unsafe { rd_kafka_headers_destroy(self.0) }
        }
    }

    impl sealed::Sealed for CHeaders {
        fn as_native(&self) -> *const rd_kafka_headers_t {
            self.0
        }
    }
    impl NativeHeaders for CHeaders {}

    #[test]
    fn names_that_are_not_utf8_are_read_as_bytes() {
        let headers = CHeaders::new(&[
            (b"\xff\xfe", Some(b"1")),
            (b"webhook-id", Some(b"evt-1")),
            (b"null", None),
            (b"empty", Some(b"")),
            (b"webhook-id", Some(b"again")),
        ]);
        let read = read_header_list(&headers);
        let header = |name: &[u8], value: Option<&[u8]>| RawHeader {
            name: name.to_vec(),
            value: value.map(<[u8]>::to_vec),
        };
        assert_eq!(
            read,
            vec![
                header(b"\xff\xfe", Some(b"1")),
                header(b"webhook-id", Some(b"evt-1")),
                header(b"null", None),
                header(b"empty", Some(b"")),
                header(b"webhook-id", Some(b"again")),
            ]
        );
        assert_eq!(read[0].name_lossy(), "\u{fffd}\u{fffd}");
        drop(headers);
        // The copies outlive the native headers.
        assert_eq!(read[1].value.as_deref(), Some(&b"evt-1"[..]));
    }

    #[test]
    fn owned_messages_and_their_headers_are_read() {
        let owned = OwnedHeaders::new()
            .insert(Header {
                key: "a",
                value: Some("1"),
            })
            .insert(Header::<&str> {
                key: "b",
                value: None,
            });
        let message = OwnedMessage::new(
            None,
            None,
            "topic".to_owned(),
            Timestamp::NotAvailable,
            0,
            0,
            Some(owned),
        );
        let expected = vec![
            RawHeader {
                name: b"a".to_vec(),
                value: Some(b"1".to_vec()),
            },
            RawHeader {
                name: b"b".to_vec(),
                value: None,
            },
        ];
        assert_eq!(read_headers(&message), expected);
        let without = OwnedMessage::new(
            None,
            None,
            "topic".to_owned(),
            Timestamp::NotAvailable,
            0,
            0,
            None,
        );
        assert!(read_headers(&without).is_empty());
    }

    #[test]
    fn no_headers_read_as_none() {
        assert!(read_header_list(&CHeaders::new(&[])).is_empty());
    }
}
