//! Append request bodies: size caps (wire size and decoded size), `Content-Encoding`
//! (zstd, gzip, identity) and NDJSON splitting that tolerates blank lines and
//! CRLF, as Snowflake does.

use axum::http::{HeaderMap, StatusCode};
use std::io::Read;

use crate::channels::ParsedRow;
use crate::error::ApiError;

/// Decodes a request body after checking the wire-size cap, refusing decoded
/// bodies larger than `max_decoded`.
pub fn decode_body(headers: &HeaderMap, body: &[u8], max_wire: usize, max_decoded: usize) -> Result<Vec<u8>, ApiError> {
    if body.len() > max_wire {
        return Err(ApiError::payload_too_large(format!(
            "Request body of {} bytes exceeds the {} byte limit for a compressed request.",
            body.len(),
            max_wire
        )));
    }
    let encoding = headers
        .get(axum::http::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity")
        .trim()
        .to_ascii_lowercase();
    let limit = max_decoded as u64 + 1;
    let mut out = Vec::with_capacity(body.len().saturating_mul(4).min(max_decoded + 1));
    let read = match encoding.as_str() {
        "" | "identity" => {
            out.extend_from_slice(body);
            Ok(body.len())
        }
        "zstd" => zstd::stream::read::Decoder::new(body).and_then(|d| d.take(limit).read_to_end(&mut out)),
        "gzip" | "x-gzip" => flate2::read::MultiGzDecoder::new(body).take(limit).read_to_end(&mut out),
        other => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "ERR_UNSUPPORTED_CONTENT_ENCODING",
                format!("Content-Encoding '{other}' is not supported; use zstd or gzip."),
            ))
        }
    };
    read.map_err(|e| ApiError::bad_request(format!("cannot decode {encoding} body: {e}")))?;
    if out.len() > max_decoded {
        return Err(ApiError::payload_too_large(format!("Decoded request body exceeds the {max_decoded} byte limit.")));
    }
    Ok(out)
}

/// The non-blank lines of NDJSON, without `\r\n` endings.
fn ndjson_lines(body: &[u8]) -> impl Iterator<Item = &[u8]> {
    body.split(|b| *b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(|line| line.iter().any(|b| !b.is_ascii_whitespace()))
}

/// Bench mode: the rows of NDJSON counted, not parsed. A line counts when it is delimited like a JSON object
/// (`{`…`}` around optional whitespace); any other line is a `ParsedRow::Bad` as in `parse_ndjson`.
pub fn count_ndjson(body: &[u8]) -> Vec<ParsedRow> {
    ndjson_lines(body)
        .map(|line| {
            let trimmed = line.trim_ascii();
            if trimmed.first() == Some(&b'{') && trimmed.last() == Some(&b'}') {
                ParsedRow::Counted
            } else {
                ParsedRow::Bad {
                    raw: String::from_utf8_lossy(line).into_owned(),
                    error: "Row is not a JSON object (bench mode)".into(),
                }
            }
        })
        .collect()
}

/// Splits NDJSON into rows; blank lines and `\r\n` endings are skipped.
/// Lines that are not JSON objects become `ParsedRow::Bad` (row errors, not a 400).
pub fn parse_ndjson(body: &[u8]) -> Vec<ParsedRow> {
    ndjson_lines(body)
        .map(|line| match serde_json::from_slice::<serde_json::Value>(line) {
            Ok(serde_json::Value::Object(map)) => ParsedRow::Row(map),
            Ok(other) => ParsedRow::Bad { raw: other.to_string(), error: "Row is not a JSON object".into() },
            Err(e) => ParsedRow::Bad {
                raw: String::from_utf8_lossy(line).into_owned(),
                error: format!("Error parsing JSON: {e}"),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerates_blank_lines_and_crlf() {
        let rows = parse_ndjson(b"{\"a\":1}\r\n\r\n{\"a\":2}\n\n  \n{\"a\":3}");
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|r| matches!(r, ParsedRow::Row(_))));
        let bad = parse_ndjson(b"{\"a\":1}\nnot json\n[1]\n");
        assert!(matches!(bad[1], ParsedRow::Bad { .. }));
        assert!(matches!(bad[2], ParsedRow::Bad { .. }));
    }
}
