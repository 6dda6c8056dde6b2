//! The errors a Kinesis operation answers with, by their AWS names (`__type`), and the HTTP status of each.

use thiserror::Error;

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum ApiError {
    #[error("{0}")]
    ResourceNotFound(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    ProvisionedThroughputExceeded(String),
    /// A consumer name registered twice.
    #[error("{0}")]
    ResourceInUse(String),
    /// An X-Amz-Target this server does not serve.
    #[error("{0}")]
    UnknownOperation(String),
    /// A body that does not decode in the request's protocol, or a field of the wrong type.
    #[error("{0}")]
    Serialization(String),
    /// A Content-Type that is neither AWS JSON 1.1 nor CBOR 1.1.
    #[error("{0}")]
    UnsupportedMediaType(String),
}

impl ApiError {
    /// The AWS error code, as `__type` and the `x-amzn-ErrorType` header carry it.
    pub fn type_name(&self) -> &'static str {
        match self {
            ApiError::ResourceNotFound(_) => "ResourceNotFoundException",
            ApiError::InvalidArgument(_) => "InvalidArgumentException",
            ApiError::ProvisionedThroughputExceeded(_) => "ProvisionedThroughputExceededException",
            ApiError::ResourceInUse(_) => "ResourceInUseException",
            ApiError::UnknownOperation(_) => "UnknownOperationException",
            ApiError::Serialization(_) => "SerializationException",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaTypeException",
        }
    }

    /// Every Kinesis client error is a 400 (throttling too); an unknown media type is a 415.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::UnsupportedMediaType(_) => 415,
            _ => 400,
        }
    }

    pub fn message(&self) -> String {
        self.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_statuses() {
        let e = ApiError::ProvisionedThroughputExceeded("Rate exceeded".into());
        assert_eq!(e.type_name(), "ProvisionedThroughputExceededException");
        assert_eq!(e.status(), 400);
        assert_eq!(e.message(), "Rate exceeded");
        assert_eq!(ApiError::UnsupportedMediaType("x".into()).status(), 415);
    }
}
