//! The one error type of the engine. It knows nothing about JavaScript: the binding maps
//! [`Error::is_type_error`] to `TypeError` or `RangeError`.

use std::fmt;

/// Why an input was rejected. Every message names the field and the value it got.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The value has the wrong type, e.g. a string where a number belongs.
    WrongType {
        field: String,
        expected: &'static str,
        got: String,
    },
    /// A number of the right type but outside the allowed range (NaN, infinite, negative…).
    OutOfRange {
        field: String,
        expected: &'static str,
        got: f64,
    },
    /// An object carried a field this package does not know (a typo, usually).
    UnknownField {
        object: String,
        name: String,
        known: &'static str,
    },
    /// Two requests of one `limitAll` call name the same key.
    DuplicateKey { field: String, first: String },
    /// A snapshot this version cannot read (written by hand, or corrupted).
    Unreadable { field: String, length: usize },
}

impl Error {
    /// `true` for errors that JavaScript reports as `TypeError`, `false` for `RangeError`.
    pub fn is_type_error(&self) -> bool {
        !matches!(self, Error::OutOfRange { .. } | Error::Unreadable { .. })
    }

    /// `true` for stored state that cannot be read: not the caller's input, so the binding
    /// reports it as a plain `Error`.
    pub fn is_storage_error(&self) -> bool {
        matches!(self, Error::Unreadable { .. })
    }

    /// The same error about a field nested in `path` (e.g. `requests[2].policy`).
    pub fn within(mut self, path: &str) -> Error {
        let nest = |name: &mut String| *name = join(&[path, ".", name]);
        match &mut self {
            Error::WrongType { field, .. }
            | Error::OutOfRange { field, .. }
            | Error::DuplicateKey { field, .. }
            | Error::Unreadable { field, .. } => nest(field),
            Error::UnknownField { object, .. } => *object = path.to_string(),
        }
        self
    }
}

/// The parts, one after the other. Messages are built with this instead of `format!`, which
/// would pull Rust's formatting machinery into the wasm binary.
pub fn join(parts: &[&str]) -> String {
    let mut text = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        text.push_str(part);
    }
    text
}

/// A number in decimal digits, without `format!`.
pub fn decimal(mut n: usize) -> String {
    let mut digits = Vec::new();
    loop {
        digits.push(b'0' + (n % 10) as u8);
        n /= 10;
        if n == 0 {
            break;
        }
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

/// How a message spells the values it quotes. The binding spells them with JavaScript
/// itself (exact, and it keeps Rust's float and debug formatting out of the wasm binary);
/// `Display` uses [`JsNumber`] and Rust's string quoting.
pub trait Spelling {
    fn number(&self, x: f64) -> String;
    fn quoted(&self, text: &str) -> String;
}

impl Error {
    /// The message, naming the field and the value it got.
    pub fn message(&self, spell: &impl Spelling) -> String {
        match self {
            Error::WrongType {
                field,
                expected,
                got,
            } => join(&[field, " must be ", expected, ", got ", got]),
            Error::OutOfRange {
                field,
                expected,
                got,
            } => join(&[field, " must be ", expected, ", got ", &spell.number(*got)]),
            Error::UnknownField {
                object,
                name,
                known,
            } => join(&[
                object,
                " has no field ",
                &spell.quoted(name),
                " (the fields are ",
                known,
                ")",
            ]),
            Error::DuplicateKey { field, first } => join(&[
                field,
                " repeats the key of ",
                first,
                ": give each key once, with the costs added up",
            ]),
            Error::Unreadable { field, length } => join(&[
                field,
                " is not a bucket this version saved (",
                &decimal(*length),
                " bytes): reset the key to start it afresh",
            ]),
        }
    }
}

struct RustSpelling;

impl Spelling for RustSpelling {
    fn number(&self, x: f64) -> String {
        JsNumber(x).to_string()
    }

    fn quoted(&self, text: &str) -> String {
        format!("{text:?}")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message(&RustSpelling))
    }
}

impl std::error::Error for Error {}

/// Formats a number the way JavaScript prints it in the cases a caller can send
/// (`NaN`, `Infinity`, `-0`, `1e+300`), so messages show the value the caller wrote.
pub struct JsNumber(pub f64);

impl fmt::Display for JsNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = self.0;
        if x.is_nan() {
            f.write_str("NaN")
        } else if x.is_infinite() {
            f.write_str(if x > 0.0 { "Infinity" } else { "-Infinity" })
        } else if x == 0.0 && x.is_sign_negative() {
            f.write_str("-0")
        } else if x != 0.0 && !(1e-6..1e21).contains(&x.abs()) {
            let s = format!("{x:e}");
            match s.split_once('e') {
                Some((m, e)) if !e.starts_with('-') => write!(f, "{m}e+{e}"),
                _ => f.write_str(&s),
            }
        } else {
            write!(f, "{x}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_javascript_prints_them() {
        let cases = [
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (-0.0, "-0"),
            (1.5, "1.5"),
            (-3.0, "-3"),
            (1e300, "1e+300"),
            (1e-7, "1e-7"),
        ];
        for (x, want) in cases {
            assert_eq!(JsNumber(x).to_string(), want);
        }
    }

    #[test]
    fn decimals_and_joins() {
        assert_eq!(decimal(0), "0");
        assert_eq!(decimal(1203), "1203");
        assert_eq!(join(&["a", "", "bc"]), "abc");
    }

    #[test]
    fn messages_name_the_field_and_the_value() {
        let e = Error::OutOfRange {
            field: "cost".into(),
            expected: "a finite number >= 0",
            got: f64::NAN,
        };
        assert_eq!(e.to_string(), "cost must be a finite number >= 0, got NaN");
        assert!(!e.is_type_error());
        let e = Error::UnknownField {
            object: "options".into(),
            name: "max_token".into(),
            known: "max_tokens and refill_every_seconds",
        };
        assert!(e
            .to_string()
            .starts_with("options has no field \"max_token\""));
        assert!(e.is_type_error());
        let e = e.within("requests[2].policy");
        assert!(e.to_string().starts_with("requests[2].policy has no field"));
        let e = Error::OutOfRange {
            field: "max_tokens".into(),
            expected: "a whole number",
            got: 1.5,
        }
        .within("policy");
        assert_eq!(
            e.to_string(),
            "policy.max_tokens must be a whole number, got 1.5"
        );
    }
}
