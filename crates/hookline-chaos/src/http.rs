//! The little HTTP/1.1 the receivers and the fault proxy speak: read one request (its head
//! parsed by `httparse`, a `Content-Length` body; keep-alive), write a bodiless answer. The
//! connection stays in this crate's hands, not a server framework's, so that it can be
//! refused, reset or left hanging at will.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt as _};

/// The longest request head read.
const MAX_HEAD: usize = 64 * 1024;
/// The most headers a request may have (hyper's server takes as many).
const MAX_HEADERS: usize = 100;
/// The largest body read (hookline sends at most `http.max_payload_bytes`).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// One request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// `POST`, `GET`...
    pub method: String,
    /// The request target.
    pub path: String,
    /// Header names lowercased, values as sent.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Request {
    /// A header's value, when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .and_then(|(_, value)| std::str::from_utf8(value).ok())
            .map(str::trim)
    }
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

/// Parses the request head at the start of `buf`: the request (without its body) and the
/// head's length, blank line included; `Ok(None)` while the head is incomplete.
pub fn parse_head(buf: &[u8]) -> io::Result<Option<(Request, usize)>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut headers);
    let head_len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(error) => return Err(invalid(format!("bad request head: {error}"))),
    };
    // A complete head has all three.
    let (Some(method), Some(path)) = (parsed.method, parsed.path) else {
        return Err(invalid("no request line"));
    };
    let headers = parsed
        .headers
        .iter()
        .map(|header| (header.name.to_ascii_lowercase(), header.value.to_vec()))
        .collect();
    let request = Request {
        method: method.to_owned(),
        path: path.to_owned(),
        headers,
        body: Vec::new(),
    };
    Ok(Some((request, head_len)))
}

/// Reads the next request from `stream`. `buf` keeps what was read beyond it (the next
/// request of a kept-alive connection). `Ok(None)`: the peer closed between requests.
pub async fn read_request<R: AsyncRead + Unpin>(
    stream: &mut R,
    buf: &mut Vec<u8>,
) -> io::Result<Option<Request>> {
    let (mut request, body_start) = loop {
        if let Some(head) = parse_head(buf)? {
            break head;
        }
        if buf.len() > MAX_HEAD {
            return Err(invalid("request head too long"));
        }
        if read_more(stream, buf).await? == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
    };
    if request
        .header("transfer-encoding")
        .is_some_and(|value| !value.eq_ignore_ascii_case("identity"))
    {
        return Err(invalid("chunked request bodies are not read here"));
    }
    let length: usize = match request.header("content-length") {
        None => 0,
        Some(text) => text.parse().map_err(|_| invalid("bad content-length"))?,
    };
    if length > MAX_BODY {
        return Err(invalid("body too large"));
    }
    while buf.len() < body_start + length {
        if read_more(stream, buf).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    request.body = buf[body_start..body_start + length].to_vec();
    buf.drain(..body_start + length);
    Ok(Some(request))
}

async fn read_more<R: AsyncRead + Unpin>(stream: &mut R, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut chunk = [0u8; 16 * 1024];
    let read = stream.read(&mut chunk).await?;
    buf.extend_from_slice(&chunk[..read]);
    Ok(read)
}

/// A bodiless answer; `close` asks the client not to reuse the connection.
pub fn response(status: u16, close: bool) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        204 => "No Content",
        410 => "Gone",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    };
    let connection = if close { "connection: close\r\n" } else { "" };
    format!("HTTP/1.1 {status} {reason}\r\ncontent-length: 0\r\n{connection}\r\n").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_head() {
        let head = b"POST /hooks/ok HTTP/1.1\r\nHost: 127.0.0.1\r\nWebhook-Id: evt_1\r\n\
            x-bin: \xff\r\n\r\n";
        let (request, len) = parse_head(head).unwrap().unwrap();
        assert_eq!(len, head.len());
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/hooks/ok");
        assert_eq!(request.header("webhook-id"), Some("evt_1"));
        assert_eq!(request.header("x-bin"), None, "not text");
        assert_eq!(request.header("missing"), None);
        assert!(parse_head(b"garbage\r\n\r\n").is_err());
        assert!(parse_head(b"GET / SPDY/3\r\n\r\n").is_err());
        assert!(parse_head(b"GET / HTTP/1.1\r\nno colon\r\n\r\n").is_err());
    }

    #[test]
    fn an_incomplete_head_asks_for_more() {
        assert_eq!(parse_head(b"").unwrap(), None);
        assert_eq!(
            parse_head(b"POST /a HTTP/1.1\r\nHost: x\r\n").unwrap(),
            None
        );
        // What follows the head is not the head's.
        let (request, len) = parse_head(b"GET /a HTTP/1.0\r\n\r\nbody").unwrap().unwrap();
        assert_eq!((request.path.as_str(), len), ("/a", 19));
    }

    #[tokio::test]
    async fn a_head_too_long_or_with_too_many_headers_is_an_error() {
        let mut long = b"POST /a HTTP/1.1\r\nx-pad: ".to_vec();
        long.resize(long.len() + MAX_HEAD, b'a');
        let mut many = b"POST /a HTTP/1.1\r\n".to_vec();
        for n in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("x-{n}: 1\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        for wire in [long, many] {
            let mut stream = &wire[..];
            let error = read_request(&mut stream, &mut Vec::new())
                .await
                .unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        }
    }

    #[tokio::test]
    async fn reads_kept_alive_requests_one_by_one() {
        let wire = b"POST /a HTTP/1.1\r\ncontent-length: 5\r\n\r\nhelloPOST /b HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
        let mut stream = &wire[..];
        let mut buf = Vec::new();
        let first = read_request(&mut stream, &mut buf).await.unwrap().unwrap();
        assert_eq!(
            (first.path.as_str(), first.body.as_slice()),
            ("/a", &b"hello"[..])
        );
        let second = read_request(&mut stream, &mut buf).await.unwrap().unwrap();
        assert_eq!((second.path.as_str(), second.body.len()), ("/b", 0));
        assert!(read_request(&mut stream, &mut buf).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_cut_request_is_an_error() {
        let mut stream = &b"POST /a HTTP/1.1\r\ncontent-length: 5\r\n\r\nhel"[..];
        assert!(read_request(&mut stream, &mut Vec::new()).await.is_err());
        let mut stream = &b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"[..];
        assert!(read_request(&mut stream, &mut Vec::new()).await.is_err());
    }

    #[test]
    fn answers_without_a_body() {
        assert_eq!(
            response(503, true),
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        );
        assert!(response(204, false).ends_with(b"content-length: 0\r\n\r\n"));
    }
}
