//! Endpoint URLs fit for the page: no user info, no query values, no fragment; scheme,
//! host, port, path and query parameter names kept, so that an operator can tell two
//! endpoints apart without seeing a token.

use url::Url;

/// What a redacted query value or fragment is replaced with.
pub const REDACTED: &str = "redacted";

/// `url` without user info, with every query value replaced by `redacted` (names kept; a
/// part without `=` is replaced whole) and the fragment dropped: `https://user:pw@h.example/hooks/a?token=abc&v=2#x` is
/// `https://h.example/hooks/a?token=redacted&v=redacted`. A URL that does not parse is
/// `<unparseable url>` (it may be anything, secrets included).
pub fn redact_endpoint_url(url: &str) -> String {
    let Ok(mut parsed) = Url::parse(url) else {
        return "<unparseable url>".to_owned();
    };
    // Both calls fail only for URLs that cannot have user info, which then have none.
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    parsed.set_fragment(None);
    if let Some(query) = parsed.query() {
        let redacted: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) => format!("{name}={REDACTED}"),
                // `?abc` alone: the text itself may be the secret.
                None => REDACTED.to_owned(),
            })
            .collect();
        parsed.set_query(Some(&redacted.join("&")));
    }
    parsed.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_query_values_and_fragment_go_the_path_stays() {
        assert_eq!(
            redact_endpoint_url("https://user:pw@h.example/hooks/a?token=abc&v=2#frag"),
            "https://h.example/hooks/a?token=redacted&v=redacted"
        );
        assert_eq!(
            redact_endpoint_url("http://127.0.0.1:8080/hooks/b"),
            "http://127.0.0.1:8080/hooks/b"
        );
        assert_eq!(
            redact_endpoint_url("https://only-user@h.example/x"),
            "https://h.example/x"
        );
    }

    #[test]
    fn a_query_part_without_a_name_is_redacted_whole() {
        assert_eq!(
            redact_endpoint_url("https://h.example/x?s3cr3t"),
            "https://h.example/x?redacted"
        );
        assert_eq!(
            redact_endpoint_url("https://h.example/x?=s3cr3t&a=1&s3cr3t2"),
            "https://h.example/x?=redacted&a=redacted&redacted"
        );
    }

    #[test]
    fn encoded_values_and_repeated_names_leave_nothing_behind() {
        let out = redact_endpoint_url("https://h.example/x?sig=a%20b%26c&sig=d&empty=");
        assert_eq!(
            out,
            "https://h.example/x?sig=redacted&sig=redacted&empty=redacted"
        );
        assert!(!out.contains("a%20b"));
    }

    #[test]
    fn an_unparseable_url_shows_nothing_of_itself() {
        assert_eq!(
            redact_endpoint_url("not a url token=abc"),
            "<unparseable url>"
        );
        assert_eq!(redact_endpoint_url(""), "<unparseable url>");
    }
}
