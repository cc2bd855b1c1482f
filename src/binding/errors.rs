//! Engine errors as JavaScript errors: the only place where `TypeError`, `RangeError` and
//! `Error` are made. Messages spell values as JavaScript itself prints them.

use js_sys::{RangeError, TypeError};
use wasm_bindgen::JsValue;

use crate::engine::{join, Error, Spelling};

/// Values spelled by JavaScript itself, exactly as the caller would print them.
pub(crate) struct JsSpelling;

impl Spelling for JsSpelling {
    fn number(&self, x: f64) -> String {
        if x == 0.0 && x.is_sign_negative() {
            return "-0".into(); // Number.prototype.toString drops the sign of -0
        }
        js_sys::Number::from(x)
            .to_string_with_radix(10)
            .map(String::from)
            .unwrap_or_default()
    }

    fn quoted(&self, text: &str) -> String {
        js_sys::JSON::stringify(&JsValue::from_str(text))
            .map(String::from)
            .unwrap_or_default()
    }
}

impl JsSpelling {
    /// A key as JSON quotes it (lone surrogates escaped), whatever it holds.
    pub(crate) fn key(&self, key: &JsValue) -> String {
        js_sys::JSON::stringify(key)
            .ok()
            .and_then(|s| s.as_string())
            .unwrap_or_default()
    }
}

/// Bad input is a `TypeError` or a `RangeError`; an unreadable snapshot (not the caller's
/// input) a plain `Error`.
impl From<Error> for JsValue {
    fn from(error: Error) -> JsValue {
        let message = error.message(&JsSpelling);
        if error.is_storage_error() {
            js_sys::Error::new(&message).into()
        } else if error.is_type_error() {
            TypeError::new(&message).into()
        } else {
            RangeError::new(&message).into()
        }
    }
}

/// The name of a snapshot in errors: the key it is stored under.
pub(crate) fn snapshot_field(key: &JsValue) -> String {
    join(&["the stored bucket of key ", &JsSpelling.key(key)])
}
