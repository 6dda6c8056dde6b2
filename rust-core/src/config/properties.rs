//! The property map handed over by NiFi (names to evaluated values) and parsers for NiFi's value
//! formats: time periods ("5 sec"), data sizes ("10 MB"), integers in a range, enums, URLs.
//!
//! Parsers record problems instead of stopping at the first one, so the user sees every mistake.

use std::collections::HashMap;
use std::time::Duration;

use super::{ConfigProblem, ConfigProblems};

/// Property name to value; blank values count as unset, except where a value is read exactly
/// ([`PropertyMap::get_exact`]: a demarcator may be a newline or a space).
#[derive(Debug, Clone, Default)]
pub struct PropertyMap {
    values: HashMap<String, String>,
}

impl PropertyMap {
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let values = pairs.into_iter().map(|(k, v)| (k.into(), v.into())).filter(|(_, v)| !v.is_empty()).collect();
        Self { values }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    /// The raw (untrimmed) value, for secrets and PEM text where whitespace may matter; blank is unset.
    pub fn get_raw(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str).filter(|v| !v.trim().is_empty())
    }

    /// The value exactly as given, whitespace included (only the empty string is unset).
    pub fn get_exact(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }
}

/// Reads typed values out of a [`PropertyMap`], collecting every problem on the way.
pub struct Reader<'a> {
    props: &'a PropertyMap,
    problems: Vec<ConfigProblem>,
}

impl<'a> Reader<'a> {
    pub fn new(props: &'a PropertyMap) -> Self {
        Self { props, problems: Vec::new() }
    }

    pub fn problem(&mut self, property: &str, message: impl Into<String>) {
        self.problems.push(ConfigProblem::new(property, message));
    }

    pub fn optional(&self, name: &str) -> Option<String> {
        self.props.get(name).map(str::to_owned)
    }

    pub fn optional_raw(&self, name: &str) -> Option<String> {
        self.props.get_raw(name).map(str::to_owned)
    }

    /// See [`PropertyMap::get_exact`].
    pub fn optional_exact(&self, name: &str) -> Option<String> {
        self.props.get_exact(name).map(str::to_owned)
    }

    pub fn required(&mut self, name: &str) -> String {
        match self.props.get(name) {
            Some(v) => v.to_owned(),
            None => {
                self.problem(name, "is required");
                String::new()
            }
        }
    }

    /// A value out of a fixed set; `default` applies when unset.
    pub fn one_of<T: Copy>(&mut self, name: &str, default: T, choices: &[(&str, T)]) -> T {
        let Some(value) = self.props.get(name) else { return default };
        match choices.iter().find(|(c, _)| c.eq_ignore_ascii_case(value)) {
            Some((_, v)) => *v,
            None => {
                let allowed: Vec<&str> = choices.iter().map(|(c, _)| *c).collect();
                self.problem(name, format!("'{value}' is not one of {}", allowed.join(", ")));
                default
            }
        }
    }

    pub fn boolean(&mut self, name: &str, default: bool) -> bool {
        self.one_of(name, default, &[("true", true), ("false", false)])
    }

    pub fn int_in(&mut self, name: &str, default: u64, min: u64, max: u64) -> u64 {
        let Some(value) = self.props.get(name) else { return default };
        match value.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => n,
            _ => {
                self.problem(name, format!("'{value}' must be a whole number from {min} to {max}"));
                default
            }
        }
    }

    pub fn duration_in(&mut self, name: &str, default: Duration, min: Duration, max: Duration) -> Duration {
        let Some(value) = self.props.get(name) else { return default };
        match parse_time_period(value) {
            Some(d) if d >= min && d <= max => d,
            Some(_) => {
                self.problem(
                    name,
                    format!("'{value}' must be between {} and {}", show_duration(min), show_duration(max)),
                );
                default
            }
            None => {
                self.problem(name, format!("'{value}' is not a time period such as '5 sec' or '500 millis'"));
                default
            }
        }
    }

    pub fn data_size_in(&mut self, name: &str, default: u64, min: u64, max: u64) -> u64 {
        let Some(value) = self.props.get(name) else { return default };
        match parse_data_size(value) {
            Some(n) if (min..=max).contains(&n) => n,
            Some(_) => {
                self.problem(name, format!("'{value}' must be between {} and {}", show_bytes(min), show_bytes(max)));
                default
            }
            None => {
                self.problem(name, format!("'{value}' is not a data size such as '10 MB' or '512 KB'"));
                default
            }
        }
    }

    /// An http(s) URL, or a problem.
    pub fn url(&mut self, name: &str) -> Option<url::Url> {
        let value = self.props.get(name)?;
        match url::Url::parse(value) {
            Ok(u) if (u.scheme() == "http" || u.scheme() == "https") && u.host().is_some() => Some(u),
            Ok(_) => {
                self.problem(name, format!("'{value}' must be an http:// or https:// URL with a host"));
                None
            }
            Err(e) => {
                self.problem(name, format!("'{value}' is not a URL: {e}"));
                None
            }
        }
    }

    /// The typed value if no problem was recorded.
    pub fn finish<T>(self, value: T) -> Result<T, ConfigProblems> {
        if self.problems.is_empty() {
            Ok(value)
        } else {
            Err(ConfigProblems(self.problems))
        }
    }
}

/// Parses NiFi's time period format: a whole or decimal number and a unit ("5 sec", "100 millis").
pub fn parse_time_period(text: &str) -> Option<Duration> {
    let (number, unit) = split_number(text)?;
    let nanos_per_unit: f64 = match unit.to_ascii_lowercase().as_str() {
        "ns" | "nano" | "nanos" | "nanosecond" | "nanoseconds" => 1.0,
        "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1e6,
        "s" | "sec" | "secs" | "second" | "seconds" => 1e9,
        "m" | "min" | "mins" | "minute" | "minutes" => 60e9,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600e9,
        "d" | "day" | "days" => 86400e9,
        _ => return None,
    };
    let nanos = number * nanos_per_unit;
    (nanos.is_finite() && (0.0..1e20).contains(&nanos)).then(|| Duration::from_nanos(nanos as u64))
}

/// Parses NiFi's data size format, powers of 1024 ("10 MB", "512 KB", "100 B").
pub fn parse_data_size(text: &str) -> Option<u64> {
    let (number, unit) = split_number(text)?;
    let exponent = match unit.to_ascii_uppercase().as_str() {
        "B" | "BYTES" => 0,
        "KB" | "K" => 1,
        "MB" | "M" => 2,
        "GB" | "G" => 3,
        "TB" | "T" => 4,
        _ => return None,
    };
    let bytes = number * 1024f64.powi(exponent);
    (bytes.is_finite() && (0.0..1e19).contains(&bytes)).then_some(bytes as u64)
}

fn split_number(text: &str) -> Option<(f64, &str)> {
    let text = text.trim();
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let number: f64 = text[..end].parse().ok()?;
    Some((number, text[end..].trim()))
}

pub fn show_duration(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} sec", d.as_secs())
    } else {
        format!("{} millis", d.as_millis())
    }
}

pub fn show_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut value = n;
    let mut unit = 0;
    while value >= 1024 && value.is_multiple_of(1024) && unit < UNITS.len() - 1 {
        value /= 1024;
        unit += 1;
    }
    format!("{value} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_periods() {
        assert_eq!(parse_time_period("5 sec"), Some(Duration::from_secs(5)));
        assert_eq!(parse_time_period("100 millis"), Some(Duration::from_millis(100)));
        assert_eq!(parse_time_period("1.5 mins"), Some(Duration::from_secs(90)));
        assert_eq!(parse_time_period("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_time_period("five sec"), None);
        assert_eq!(parse_time_period("5 fortnights"), None);
        assert_eq!(parse_time_period(""), None);
    }

    #[test]
    fn data_sizes() {
        assert_eq!(parse_data_size("10 MB"), Some(10 * 1024 * 1024));
        assert_eq!(parse_data_size("512KB"), Some(512 * 1024));
        assert_eq!(parse_data_size("7 B"), Some(7));
        assert_eq!(parse_data_size("0.5 GB"), Some(512 * 1024 * 1024));
        assert_eq!(parse_data_size("10 MiB"), None);
        assert_eq!(parse_data_size("MB"), None);
    }

    #[test]
    fn reader_collects_every_problem() {
        let props = PropertyMap::from_pairs([("A", "x"), ("B", "  "), ("C", "99")]);
        let mut r = Reader::new(&props);
        r.required("B");
        r.int_in("C", 1, 1, 10);
        r.one_of("A", 0, &[("y", 1)]);
        let problems = r.finish(()).unwrap_err().0;
        assert_eq!(problems.len(), 3);
        assert_eq!(problems[0], ConfigProblem::new("B", "is required"));
        assert!(problems[1].message.contains("from 1 to 10"));
        assert!(problems[2].message.contains("not one of y"));
    }

    #[test]
    fn shows_sizes_readably() {
        assert_eq!(show_bytes(10 * 1024 * 1024), "10 MB");
        assert_eq!(show_bytes(1500), "1500 B");
        assert_eq!(show_duration(Duration::from_millis(250)), "250 millis");
    }
}
