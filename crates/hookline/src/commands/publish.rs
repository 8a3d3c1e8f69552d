//! `hookline publish`: one event from arguments or a file, or many from JSON lines on stdin.
//! An event goes to one endpoint (`--endpoint`, a direct delivery to the events topic) or to
//! a tenant (`--tenant`, a tenant event to the fan-out topic, delivered to each of the
//! tenant's endpoints subscribed to its type and channels).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::ValueEnum;
use futures::{StreamExt, stream};
use hookline_core::WebhookEvent;
use hookline_core::event::DEFAULT_CONTENT_TYPE;
use hookline_producer::{Delivered, Encoding, Publisher, PublisherConfig};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{Context, comma_list, error_line, parse_key_value};

/// Arguments of `hookline publish`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["data", "data_file", "stdin"])))]
pub struct PublishArgs {
    /// Endpoint to deliver to (the record key); with --stdin, every line is a payload for it.
    #[arg(long)]
    endpoint: Option<String>,
    /// Tenant whose subscribed endpoints get the event (a tenant event, published to the
    /// fan-out topic keyed by the tenant); instead of --endpoint.
    #[arg(long)]
    tenant: Option<String>,
    /// Channels the tenant event is sent on, comma-separated or repeated: an endpoint
    /// subscribed to channels gets only events on one of them. Needs --tenant.
    #[arg(long = "channels", value_name = "CHANNEL,...", requires = "tenant")]
    channels: Vec<String>,
    /// Event type, e.g. invoice.paid.
    #[arg(long = "type", value_name = "TYPE")]
    event_type: Option<String>,
    /// The payload, as given (checked to be JSON when the content type is JSON).
    #[arg(long)]
    data: Option<String>,
    /// Read the payload from this file.
    #[arg(long, value_name = "FILE")]
    data_file: Option<PathBuf>,
    /// Read JSON lines from stdin: full events (`{"event_type": ..., "endpoint_id": ...,
    /// "payload": ...}`, or `"tenant_id"` instead of `"endpoint_id"`), or payloads when
    /// --type and --endpoint or --tenant are given.
    #[arg(long)]
    stdin: bool,
    /// Extra HTTP header for the delivery; repeatable. A full event's own headers win.
    #[arg(long = "header", value_name = "NAME=VALUE", value_parser = parse_key_value)]
    headers: Vec<(String, String)>,
    /// Content type of the payload.
    #[arg(long, default_value = DEFAULT_CONTENT_TYPE)]
    content_type: String,
    /// URL overriding the endpoint's configured URL for these deliveries (with --endpoint).
    #[arg(long, conflicts_with = "tenant")]
    endpoint_url: Option<String>,
    /// Encoding of the record value.
    #[arg(long, value_enum, default_value_t = EncodingArg::Avro)]
    encoding: EncodingArg,
    #[command(flatten)]
    deadline: super::deadline::DeadlineArgs,
    /// Event id (default: a new UUID v7).
    #[arg(long, conflicts_with = "stdin")]
    event_id: Option<String>,
    /// Stop at the first line that fails.
    #[arg(long, requires = "stdin")]
    fail_fast: bool,
    /// Most events in flight at once with --stdin; 1 keeps their order.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    concurrency: u16,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum EncodingArg {
    /// Avro through the schema registry.
    Avro,
    /// JSON, without a registry.
    Json,
}

/// How each stdin line becomes an event.
enum LineForm {
    /// Each line is a full event in the JSON form; one without `expires_at_ms` gets this.
    Event { expires_at_ms: Option<i64> },
    /// Each line is the payload of an event to this template's endpoint or tenant, and type.
    Payload(Box<WebhookEvent>),
}

/// Runs `hookline publish`.
pub async fn run(args: PublishArgs, context: &Context) -> anyhow::Result<()> {
    let encoding = match args.encoding {
        EncodingArg::Avro => Encoding::Avro,
        EncodingArg::Json => Encoding::Json,
    };
    let registry = match encoding {
        Encoding::Avro => Some(context.registry()?),
        Encoding::Json => None,
    };
    let config = PublisherConfig::new(&context.topics.events, encoding);
    let publisher =
        Publisher::new(&context.kafka, registry, config).context("creating the publisher")?;

    let outcome = if args.stdin {
        publish_lines(&args, &publisher).await
    } else {
        let event = single_event(&args).await?;
        let delivered = publisher.publish(&event).await?;
        print_delivered(&delivered, &Route::of(&publisher, &event));
        Ok(())
    };
    publisher
        .flush(Duration::from_secs(30))
        .await
        .context("waiting for Kafka to acknowledge")?;
    outcome
}

/// The one event of `--data` or `--data-file`.
async fn single_event(args: &PublishArgs) -> anyhow::Result<WebhookEvent> {
    let payload = match (&args.data, &args.data_file) {
        (Some(data), _) => data.clone().into_bytes(),
        (None, Some(path)) => tokio::fs::read(path)
            .await
            .with_context(|| format!("reading {}", path.display()))?,
        (None, None) => bail!("give --data, --data-file or --stdin"),
    };
    let mut event =
        template(args)?.context("--type and one of --endpoint or --tenant are required")?;
    check_payload(&event.content_type, &payload).context("the payload")?;
    event.payload = payload;
    event.event_id = args.event_id.clone().unwrap_or_default();
    Ok(event)
}

/// An event with everything from the arguments but the payload and id; `None` when none
/// of --endpoint, --tenant and --type is given.
fn template(args: &PublishArgs) -> anyhow::Result<Option<WebhookEvent>> {
    let (endpoint_id, tenant_id) = match (&args.endpoint, &args.tenant) {
        (Some(_), Some(_)) => bail!(
            "give --endpoint (a delivery to that endpoint) or --tenant (an event for each of \
             the tenant's subscribed endpoints), not both"
        ),
        (endpoint, tenant) => (endpoint.clone(), tenant.clone()),
    };
    let event_type = match (
        &args.event_type,
        endpoint_id.is_some() || tenant_id.is_some(),
    ) {
        (None, false) => return Ok(None),
        (Some(event_type), true) => event_type.clone(),
        (None, true) if tenant_id.is_some() => bail!("--tenant needs --type"),
        (None, true) => bail!("--endpoint needs --type"),
        (Some(_), false) => bail!("--type needs --endpoint or --tenant"),
    };
    Ok(Some(WebhookEvent {
        event_id: String::new(),
        event_type,
        endpoint_id,
        tenant_id,
        channels: comma_list(&args.channels),
        endpoint_url: args.endpoint_url.clone(),
        payload: Vec::new(),
        content_type: args.content_type.clone(),
        headers: args.headers.iter().cloned().collect(),
        created_at_ms: 0,
        expires_at_ms: args.deadline.now()?,
    }))
}

/// Where the publisher sends an event: the events topic keyed by the endpoint, or the
/// fan-out topic keyed by the tenant (the rule of [`Publisher::publish`]).
struct Route {
    topic: String,
    recipient: String,
}

impl Route {
    fn of(publisher: &Publisher, event: &WebhookEvent) -> Route {
        match (&event.endpoint_id, &event.tenant_id) {
            (Some(endpoint), _) => Route {
                topic: publisher.topic().to_owned(),
                recipient: format!("endpoint={endpoint}"),
            },
            (None, tenant) => Route {
                topic: publisher.fanout_topic().to_owned(),
                recipient: format!("tenant={}", tenant.as_deref().unwrap_or_default()),
            },
        }
    }
}

/// A JSON payload must be JSON; other content types are sent as they are.
fn check_payload(content_type: &str, payload: &[u8]) -> anyhow::Result<()> {
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    let is_json = essence.eq_ignore_ascii_case("application/json")
        || essence.to_ascii_lowercase().ends_with("+json");
    if is_json {
        serde_json::from_slice::<serde::de::IgnoredAny>(payload)
            .context("is not JSON (set --content-type to send something else)")?;
    }
    Ok(())
}

impl LineForm {
    /// The event of one stdin line.
    fn event(
        &self,
        line: &str,
        headers: &BTreeMap<String, String>,
    ) -> anyhow::Result<WebhookEvent> {
        match self {
            LineForm::Payload(template) => {
                check_payload(&template.content_type, line.as_bytes()).context("the payload")?;
                let mut event = WebhookEvent::clone(template);
                event.payload = line.as_bytes().to_vec();
                Ok(event)
            }
            LineForm::Event { expires_at_ms } => {
                let mut event = WebhookEvent::from_json(with_event_id(line)?.as_bytes())?;
                event.expires_at_ms = event.expires_at_ms.or(*expires_at_ms);
                for (name, value) in headers {
                    event
                        .headers
                        .entry(name.clone())
                        .or_insert_with(|| value.clone());
                }
                Ok(event)
            }
        }
    }
}

/// The line with `"event_id": ""` added when it has none, so that the publisher generates
/// one (the JSON form requires the field).
fn with_event_id(line: &str) -> anyhow::Result<String> {
    let fields: BTreeMap<String, serde::de::IgnoredAny> =
        serde_json::from_str(line).context("not a JSON object")?;
    if fields.contains_key("event_id") {
        return Ok(line.to_owned());
    }
    // A JSON object starts with `{` once leading whitespace is gone.
    let rest = line.trim_start().strip_prefix('{').unwrap_or_default();
    let separator = if fields.is_empty() { "" } else { "," };
    Ok(format!("{{\"event_id\":\"\"{separator}{rest}"))
}

/// Publishes each non-blank stdin line; reports a failed line with its number.
async fn publish_lines(args: &PublishArgs, publisher: &Publisher) -> anyhow::Result<()> {
    let form = match template(args)? {
        Some(template) => LineForm::Payload(Box::new(template)),
        None => LineForm::Event {
            expires_at_ms: args.deadline.now()?,
        },
    };
    let headers: BTreeMap<String, String> = args.headers.iter().cloned().collect();
    let lines = BufReader::new(tokio::io::stdin()).lines();
    let numbered = stream::unfold((Some(lines), 0_usize), |(lines, number)| async move {
        let mut lines = lines?;
        match lines.next_line().await {
            Ok(Some(line)) => Some((Ok((number + 1, line)), (Some(lines), number + 1))),
            Ok(None) => None,
            // Reading stops at an I/O error, after reporting it.
            Err(error) => Some((Err(error), (None, number))),
        }
    });
    let form = &form;
    let headers = &headers;
    let mut results = std::pin::pin!(
        numbered
            .filter(|item| {
                let blank = matches!(item, Ok((_, line)) if line.trim().is_empty());
                std::future::ready(!blank)
            })
            .map(|item| async move {
                let (number, line) = item?;
                let result = match form.event(&line, headers) {
                    Ok(event) => publisher
                        .publish(&event)
                        .await
                        .map(|delivered| (delivered, Route::of(publisher, &event)))
                        .map_err(anyhow::Error::from),
                    Err(error) => Err(error),
                };
                Ok::<_, std::io::Error>((number, result))
            })
            .buffered(usize::from(args.concurrency))
    );

    let (mut published, mut failed) = (0_usize, 0_usize);
    let mut topics = BTreeSet::new();
    while let Some(item) = results.next().await {
        let (number, result) = item.context("reading stdin")?;
        match result {
            Ok((delivered, route)) => {
                published += 1;
                print_delivered(&delivered, &route);
                topics.insert(route.topic);
            }
            Err(error) => {
                failed += 1;
                eprintln!("line {number}: {}", error_line(&error));
                if args.fail_fast {
                    bail!(
                        "stopped at line {number} (--fail-fast); {published} events published before it"
                    );
                }
            }
        }
    }
    let to = if topics.is_empty() {
        publisher.topic().to_owned()
    } else {
        topics.into_iter().collect::<Vec<_>>().join(" and ")
    };
    eprintln!(
        "published {published} of {} events to {to}",
        published + failed
    );
    if failed > 0 {
        bail!("{failed} of {} events failed", published + failed);
    }
    Ok(())
}

fn print_delivered(delivered: &Delivered, route: &Route) {
    println!(
        "published {} partition={} offset={} topic={} {}",
        delivered.event_id, delivered.partition, delivered.offset, route.topic, route.recipient
    );
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: PublishArgs,
    }

    fn parse(args: &[&str]) -> Result<PublishArgs, clap::Error> {
        let all = [&["hookline-publish"], args, &["--data", "{}"]].concat();
        Cli::try_parse_from(all).map(|cli| cli.args)
    }

    fn template_of(args: &[&str]) -> anyhow::Result<Option<WebhookEvent>> {
        template(&parse(args).expect("valid flags"))
    }

    #[test]
    fn a_tenant_template_names_the_tenant_and_no_endpoint() {
        let event = template_of(&["--tenant", "acme", "--type", "invoice.paid"])
            .expect("valid")
            .expect("a template");
        assert_eq!(event.tenant_id.as_deref(), Some("acme"));
        assert_eq!(event.endpoint_id, None);
        assert!(event.channels.is_empty());
        let event = template_of(&[
            "--tenant",
            "acme",
            "--type",
            "invoice.paid",
            "--channels",
            "eu, beta",
            "--channels",
            "us",
        ])
        .expect("valid")
        .expect("a template");
        assert_eq!(event.channels, ["eu", "beta", "us"]);
        let direct = template_of(&["--endpoint", "ep", "--type", "a.b"])
            .expect("valid")
            .expect("a template");
        assert_eq!(
            (direct.endpoint_id.as_deref(), direct.tenant_id),
            (Some("ep"), None)
        );
        assert!(template_of(&[]).expect("valid").is_none());
    }

    #[test]
    fn endpoint_and_tenant_together_are_refused() {
        let error = template_of(&["--endpoint", "ep", "--tenant", "acme", "--type", "a"])
            .expect_err("both");
        let text = error.to_string();
        assert!(
            text.contains("--endpoint") && text.contains("--tenant") && text.contains("not both"),
            "{text}"
        );
        for (args, needle) in [
            (&["--tenant", "acme"][..], "--tenant needs --type"),
            (&["--endpoint", "ep"][..], "--endpoint needs --type"),
            (&["--type", "a"][..], "--type needs --endpoint or --tenant"),
        ] {
            let text = template_of(args).expect_err("incomplete").to_string();
            assert_eq!(text, needle);
        }
        assert!(parse(&["--endpoint", "ep", "--type", "a", "--channels", "eu"]).is_err());
        assert!(
            parse(&[
                "--tenant",
                "t",
                "--type",
                "a",
                "--endpoint-url",
                "https://x.example/"
            ])
            .is_err()
        );
    }

    #[test]
    fn an_event_id_is_added_when_missing() {
        let line = r#"  {"event_type":"a.b","endpoint_id":"ep","payload":{"x":1}}"#;
        let with_id = with_event_id(line).expect("object");
        let event = WebhookEvent::from_json(with_id.as_bytes()).expect("event");
        assert_eq!(event.event_id, "");
        assert_eq!(event.payload, br#"{"x":1}"#);
        let given = r#"{"event_id":"evt_1","event_type":"a.b","endpoint_id":"ep","payload":1}"#;
        assert_eq!(with_event_id(given).expect("object"), given);
        assert_eq!(with_event_id("{}").expect("object"), r#"{"event_id":""}"#);
        assert!(with_event_id("[1]").is_err());
        assert!(with_event_id("nope").is_err());
    }

    #[test]
    fn json_payloads_are_checked() {
        assert!(check_payload("application/json", br#"{"a":1}"#).is_ok());
        assert!(check_payload("application/cloudevents+json; charset=utf-8", b"[]").is_ok());
        assert!(check_payload("application/json", b"{oops").is_err());
        assert!(check_payload("text/plain", b"{oops").is_ok());
    }

    #[test]
    fn header_defaults_do_not_override_the_event() {
        let headers = BTreeMap::from([
            ("X-Tenant".to_owned(), "default".to_owned()),
            ("X-Extra".to_owned(), "1".to_owned()),
        ]);
        let line =
            r#"{"event_type":"a","endpoint_id":"ep","payload":1,"headers":{"X-Tenant":"acme"}}"#;
        let event = LineForm::Event {
            expires_at_ms: None,
        }
        .event(line, &headers)
        .expect("event");
        assert_eq!(event.headers["X-Tenant"], "acme");
        assert_eq!(event.headers["X-Extra"], "1");
    }
}
