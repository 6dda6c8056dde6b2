//! The Kinesis side of the engine: the record model (`record`), positions (`position`), how calls
//! name the stream (`address`: by name or ARN), the stream's description (`stream`) and shard
//! discovery (`shards`), the polling reader's limits and back-off (`limiter`), the Enhanced Fan-Out
//! consumer (`fan_out`), and KPL de-aggregation (`deaggregate`, over the messages of
//! `kpl_messages` read in place by `kpl_view`, checked with `digest`'s MD5).

pub mod address;
pub mod deaggregate;
pub mod digest;
pub mod fan_out;
#[cfg(any(test, feature = "test-support"))]
mod kpl_messages;
mod kpl_view;
pub mod limiter;
pub mod position;
pub mod record;
pub mod shards;
pub mod stream;

use crate::error::{Classify, ErrorClass};

#[derive(Debug, thiserror::Error)]
pub enum KinesisError {
    #[error("stream '{stream}' was not found ({message})")]
    StreamNotFound { stream: String, message: String },
    #[error("access to stream '{stream}' is denied; check the credentials and the IAM policy ({message})")]
    AccessDenied { stream: String, message: String },
    #[error("Kinesis throttled reads of {}shard{} of stream '{stream}'", .shard.as_deref().map(|s| format!("{s} ")).unwrap_or_default(), if .shard.is_some() { "" } else { "s" })]
    Throttled { stream: String, shard: Option<String> },
    #[error("the shard iterator of shard {shard} expired")]
    ExpiredIterator { shard: String },
    #[error("a previous fan-out subscription to shard {shard} is still active")]
    ResourceInUse { shard: String },
    #[error("Kinesis rejected a request for stream '{stream}': {message}")]
    InvalidArgument { stream: String, message: String },
    #[error("Kinesis call for stream '{stream}' failed: {message}")]
    Service { stream: String, message: String },
}

impl KinesisError {
    /// Classifies an SDK failure by its error code.
    /// A failed SDK call on `stream` (and `shard`), classified by its error code.
    pub fn of_call<E>(stream: &str, shard: Option<&str>, e: &E) -> Self
    where
        E: std::error::Error + aws_sdk_kinesis::error::ProvideErrorMetadata + 'static,
    {
        Self::from_sdk(stream, shard, sdk_error_text(e), e.code().map(str::to_owned))
    }

    pub fn from_sdk(stream: &str, shard: Option<&str>, message: String, code: Option<String>) -> Self {
        let stream = stream.to_owned();
        match code.as_deref().unwrap_or_default() {
            "ResourceNotFoundException" => Self::StreamNotFound { stream, message },
            "AccessDeniedException"
            | "UnrecognizedClientException"
            | "InvalidSignatureException"
            | "ExpiredTokenException"
            | "IncompleteSignature"
            | "MissingAuthenticationToken" => Self::AccessDenied { stream, message },
            "ProvisionedThroughputExceededException"
            | "LimitExceededException"
            | "KMSThrottlingException"
            | "ThrottlingException" => Self::Throttled { stream, shard: shard.map(str::to_owned) },
            "ExpiredIteratorException" => Self::ExpiredIterator { shard: shard.unwrap_or_default().to_owned() },
            "InvalidArgumentException" => Self::InvalidArgument { stream, message },
            "ResourceInUseException" if shard.is_some() => {
                Self::ResourceInUse { shard: shard.unwrap_or_default().to_owned() }
            }
            _ => Self::Service { stream, message },
        }
    }
}

/// An AWS SDK error as one line for a bulletin: the error and its sources by their Display text,
/// joined with ": ", a text that repeats the previous one left out. (The SDK's `DisplayErrorContext`
/// appends the error's Debug form as well: the raw HTTP response with its headers and body, which
/// made every bulletin about a missing stream or rejected credentials several kilobytes long.)
pub fn sdk_error_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        let text = e.to_string();
        if !text.is_empty() && parts.last().is_none_or(|last| !last.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}

/// [`sdk_error_text`], plus the service's own message when the text lacks it: the SDK shows an
/// error it has no type for (DynamoDB's `AccessDeniedException`) by its code alone, while the
/// message is what names the action and resource a policy refused ("User: ... is not authorized
/// to perform: dynamodb:UpdateItem on resource: ...").
pub fn sdk_error_text_with(error: &(dyn std::error::Error + 'static), message: Option<&str>) -> String {
    with_message(sdk_error_text(error), message)
}

fn with_message(text: String, message: Option<&str>) -> String {
    match message.map(str::trim) {
        Some(m) if !m.is_empty() && !text.contains(m) => format!("{text}: {m}"),
        _ => text,
    }
}

impl Classify for KinesisError {
    fn class(&self) -> ErrorClass {
        match self {
            Self::StreamNotFound { .. } | Self::AccessDenied { .. } => ErrorClass::Configuration,
            _ => ErrorClass::Retryable,
        }
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_kinesis::config::http::HttpResponse;
    use aws_sdk_kinesis::error::{ConnectorError, DisplayErrorContext, SdkError};
    use aws_sdk_kinesis::operation::describe_stream_summary::DescribeStreamSummaryError;
    use aws_sdk_kinesis::types::error::ResourceNotFoundException;
    use aws_smithy_types::body::SdkBody;

    use super::*;

    fn raw_response(body: &str) -> HttpResponse {
        HttpResponse::new(400u16.try_into().unwrap(), SdkBody::from(body))
    }

    #[test]
    fn a_service_error_reads_as_its_code_and_message_without_the_raw_response() {
        let body = r#"{"__type":"ResourceNotFoundException","message":"Stream orders not found"}"#;
        let e: SdkError<DescribeStreamSummaryError, HttpResponse> = SdkError::service_error(
            DescribeStreamSummaryError::ResourceNotFoundException(
                ResourceNotFoundException::builder().message("Stream orders not found").build(),
            ),
            raw_response(body),
        );
        assert!(format!("{}", DisplayErrorContext(&e)).contains("SdkBody"), "the SDK's own text carries the response");
        assert_eq!(sdk_error_text(&e), "service error: ResourceNotFoundException: Stream orders not found");
    }

    #[test]
    fn the_service_message_is_added_once_when_the_text_lacks_it() {
        let denied = "User: arn:aws:iam::1:user/u is not authorized to perform: dynamodb:UpdateItem on resource: t";
        assert_eq!(
            with_message("service error: unhandled error (AccessDeniedException)".into(), Some(denied)),
            format!("service error: unhandled error (AccessDeniedException): {denied}")
        );
        assert_eq!(with_message(format!("service error: {denied}"), Some(denied)), format!("service error: {denied}"));
        assert_eq!(with_message("dispatch failure".into(), None), "dispatch failure");
        assert_eq!(with_message("x".into(), Some("  ")), "x");
    }

    #[test]
    fn a_connection_failure_keeps_every_cause() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused (os error 111)");
        let e: SdkError<DescribeStreamSummaryError, HttpResponse> =
            SdkError::dispatch_failure(ConnectorError::io(Box::new(refused)));
        assert_eq!(sdk_error_text(&e), "dispatch failure: io error: Connection refused (os error 111)");
    }
}
