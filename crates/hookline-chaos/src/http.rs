//! The little HTTP/1.1 the receivers and the fault proxy speak, written by hand so that a
//! connection can be refused, reset or left hanging at will: read one request (head and a
//! `Content-Length` body; keep-alive), write a bodiless answer.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt as _};

/// The longest request head read.
const MAX_HEAD: usize = 64 * 1024;
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

/// Parses a request head (without its final blank line): the request line and headers.
pub fn parse_head(head: &[u8]) -> io::Result<Request> {
    let mut lines = head
        .split(|byte| *byte == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let request_line = lines.next().ok_or_else(|| invalid("no request line"))?;
    let request_line = std::str::from_utf8(request_line).map_err(|_| invalid("request line"))?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(path), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid(format!("bad request line {request_line:?}")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(invalid(format!("not HTTP/1: {version:?}")));
    }
    let mut headers = Vec::new();
    for line in lines.filter(|line| !line.is_empty()) {
        let colon = line
            .iter()
            .position(|byte| *byte == b':')
            .ok_or_else(|| invalid("a header line without a colon"))?;
        let name = std::str::from_utf8(&line[..colon])
            .map_err(|_| invalid("a header name that is not text"))?
            .trim()
            .to_ascii_lowercase();
        let value = line[colon + 1..].trim_ascii().to_vec();
        headers.push((name, value));
    }
    Ok(Request {
        method: method.to_owned(),
        path: path.to_owned(),
        headers,
        body: Vec::new(),
    })
}

/// Reads the next request from `stream`. `buf` keeps what was read beyond it (the next
/// request of a kept-alive connection). `Ok(None)`: the peer closed between requests.
pub async fn read_request<R: AsyncRead + Unpin>(
    stream: &mut R,
    buf: &mut Vec<u8>,
) -> io::Result<Option<Request>> {
    let head_end = loop {
        if let Some(at) = find(buf, b"\r\n\r\n") {
            break at;
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
    let mut request = parse_head(&buf[..head_end])?;
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
    let body_start = head_end + 4;
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

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
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
        let head =
            b"POST /hooks/ok HTTP/1.1\r\nHost: 127.0.0.1\r\nWebhook-Id: evt_1\r\nx-bin: \xff\r\n";
        let request = parse_head(head).unwrap();
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/hooks/ok");
        assert_eq!(request.header("webhook-id"), Some("evt_1"));
        assert_eq!(request.header("x-bin"), None, "not text");
        assert_eq!(request.header("missing"), None);
        assert!(parse_head(b"garbage").is_err());
        assert!(parse_head(b"GET / SPDY/3\r\n").is_err());
        assert!(parse_head(b"GET / HTTP/1.1\r\nno colon\r\n").is_err());
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
