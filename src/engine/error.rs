//! The one error type of the engine. It knows nothing about JavaScript: the binding maps
//! [`Error::is_type_error`] to `TypeError` or `RangeError`.

use std::fmt;

/// Why an input was rejected. Every message names the field and the value it got.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The value has the wrong type, e.g. a string where a number belongs.
    WrongType {
        field: &'static str,
        expected: &'static str,
        got: String,
    },
    /// A number of the right type but outside the allowed range (NaN, infinite, negative…).
    OutOfRange {
        field: &'static str,
        expected: &'static str,
        got: f64,
    },
    /// An options object carried a field this package does not know (a typo, usually).
    UnknownField { name: String },
}

impl Error {
    /// `true` for errors that JavaScript reports as `TypeError`, `false` for `RangeError`.
    pub fn is_type_error(&self) -> bool {
        !matches!(self, Error::OutOfRange { .. })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::WrongType {
                field,
                expected,
                got,
            } => write!(f, "{field} must be {expected}, got {got}"),
            Error::OutOfRange {
                field,
                expected,
                got,
            } => write!(f, "{field} must be {expected}, got {}", JsNumber(*got)),
            Error::UnknownField { name } => write!(
                f,
                "options has no field {name:?} (the fields are max_tokens and refill_every_seconds)"
            ),
        }
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
    fn messages_name_the_field_and_the_value() {
        let e = Error::OutOfRange {
            field: "cost",
            expected: "a finite number >= 0",
            got: f64::NAN,
        };
        assert_eq!(e.to_string(), "cost must be a finite number >= 0, got NaN");
        assert!(!e.is_type_error());
        let e = Error::UnknownField {
            name: "max_token".into(),
        };
        assert!(e.to_string().contains("\"max_token\""));
        assert!(e.is_type_error());
    }
}
