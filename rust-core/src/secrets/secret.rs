//! A value that must never be printed: keys, passwords, tokens.

use std::fmt;

/// Holds a secret; `Debug` and `Display` print a placeholder, never the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The only way to read the value; call it where the value is used, never to log.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints_the_value() {
        let s = Secret::new("wJalrXUtnFEMI/K7MDENG");
        assert!(!format!("{s:?} {s}").contains("wJalr"));
        assert_eq!(s.expose(), "wJalrXUtnFEMI/K7MDENG");
    }
}
