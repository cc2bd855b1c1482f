//! The exported wasm class, exercised from Rust through real JS values: in Node
//! (`cargo test --target wasm32-unknown-unknown`) and in headless Chromium
//! (the same with `WASM_BINDGEN_USE_BROWSER=1`).
#![cfg(target_arch = "wasm32")]

use js_sys::{JsString, Object, RangeError, Reflect, TypeError};
use rate_limiter::binding::RateLimiter;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;

const T0: f64 = 1_800_000_000_000.0;

fn key(s: &str) -> JsValue {
    JsValue::from_str(s)
}

fn num(x: f64) -> JsValue {
    JsValue::from_f64(x)
}

fn object(fields: &[(&str, JsValue)]) -> JsValue {
    let o = Object::new();
    for (name, value) in fields {
        Reflect::set(&o, &JsValue::from_str(name), value).unwrap();
    }
    o.into()
}

fn options(o: JsValue) -> tsify::Ts<rate_limiter::binding::RateLimiterOptions> {
    tsify::Ts::new_unchecked(o)
}

fn field(o: &JsValue, name: &str) -> f64 {
    Reflect::get(o, &JsValue::from_str(name))
        .unwrap()
        .as_f64()
        .unwrap()
}

fn status(l: &mut RateLimiter, now: f64, k: &JsValue) -> (f64, f64, f64) {
    let s = l.get_status(now, k).unwrap().js_value();
    (
        field(&s, "remaining"),
        field(&s, "limit"),
        field(&s, "reset_in_ms"),
    )
}

fn message(error: &JsValue) -> String {
    Reflect::get(error, &JsValue::from_str("message"))
        .unwrap()
        .as_string()
        .unwrap()
}

#[wasm_bindgen_test]
fn consume_check_and_status_through_js_values() {
    let mut l = RateLimiter::new(1, 2);
    let k = key("api");
    assert!(l.consume(T0, &k, &num(5.0)).unwrap());
    assert!(l.check(T0, &k, &num(5.0)).unwrap());
    assert!(!l.check(T0, &k, &num(6.0)).unwrap());
    assert_eq!(status(&mut l, T0 + 3000.0, &k), (5.0, 10.0, 7000.0));
    // `undefined` cost means 1.
    assert!(l.consume(T0, &k, &JsValue::UNDEFINED).unwrap());
    assert_eq!(status(&mut l, T0, &k).0, 4.0);
    l.reset(&k).unwrap();
    assert_eq!(status(&mut l, T0, &k), (10.0, 10.0, 0.0));
}

#[wasm_bindgen_test]
fn status_is_a_plain_object_with_three_fields() {
    let mut l = RateLimiter::new(1, 2);
    let s = l.get_status(T0, &key("k")).unwrap().js_value();
    assert_eq!(
        Object::get_prototype_of(&s),
        Object::get_prototype_of(&Object::new())
    );
    let names: Vec<String> = Object::keys(s.unchecked_ref::<Object>())
        .iter()
        .filter_map(|n| n.as_string())
        .collect();
    assert_eq!(names, ["remaining", "limit", "reset_in_ms"]);
}

#[wasm_bindgen_test]
fn bad_costs_throw_the_right_class_and_change_nothing() {
    let mut l = RateLimiter::new(1, 2);
    let k = key("k");
    assert!(l.consume(T0, &k, &num(3.0)).unwrap());
    let before = status(&mut l, T0, &k);
    for bad in [f64::NAN, -1.0, f64::INFINITY, f64::NEG_INFINITY] {
        let e = l.consume(T0, &k, &num(bad)).unwrap_err();
        assert!(e.is_instance_of::<RangeError>());
        assert!(message(&e).starts_with("cost must be"), "{}", message(&e));
    }
    for bad in [key("1"), JsValue::NULL, JsValue::TRUE, Object::new().into()] {
        let e = l.check(T0, &k, &bad).unwrap_err();
        assert!(e.is_instance_of::<TypeError>());
        assert!(message(&e).starts_with("cost must be a number"));
    }
    let e = l
        .consume(T0, &k, &JsValue::bigint_from_str("5"))
        .unwrap_err();
    assert!(e.is_instance_of::<TypeError>());
    assert_eq!(status(&mut l, T0, &k), before);
}

#[wasm_bindgen_test]
fn keys_must_be_strings() {
    let mut l = RateLimiter::new(1, 2);
    for bad in [
        num(5.0),
        JsValue::NULL,
        JsValue::UNDEFINED,
        Object::new().into(),
    ] {
        let e = l.consume(T0, &bad, &num(1.0)).unwrap_err();
        assert!(e.is_instance_of::<TypeError>());
        assert!(message(&e).starts_with("key must be a string"));
    }
    assert_eq!(
        message(&l.reset(&num(5.0)).unwrap_err()),
        "key must be a string, got number 5"
    );
}

#[wasm_bindgen_test]
fn lone_surrogates_and_their_replacement_are_distinct_keys() {
    let mut l = RateLimiter::new(1, 2);
    let high: JsValue = JsString::from_char_code1(0xD800).into();
    let low: JsValue = JsString::from_char_code1(0xDC00).into();
    let replacement = key("\u{FFFD}");
    let pair: JsValue = JsString::from_char_code2(0xD800, 0xDC00).into();
    assert!(l.consume(T0, &high, &num(10.0)).unwrap());
    assert_eq!(status(&mut l, T0, &high).0, 0.0);
    for other in [&low, &replacement, &pair, &key("")] {
        assert_eq!(status(&mut l, T0, other).0, 10.0);
    }
    assert!(l.consume(T0, &pair, &num(4.0)).unwrap());
    assert_eq!(status(&mut l, T0, &key("\u{10000}")).0, 6.0);
}

#[wasm_bindgen_test]
fn options_are_validated_all_or_nothing() {
    let mut l = RateLimiter::new(1, 2);
    l.set_options(
        T0,
        options(object(&[("max_tokens", num(3.0))])),
        &JsValue::UNDEFINED,
    )
    .unwrap();
    let bad = [
        (JsValue::NULL, true, "options must be an object"),
        (num(5.0), true, "options must be an object"),
        (
            js_sys::Array::new().into(),
            true,
            "options must be an object",
        ),
        (
            object(&[("max_token", num(3.0))]),
            true,
            "options has no field \"max_token\"",
        ),
        (
            object(&[("max_tokens", key("5"))]),
            true,
            "max_tokens must be a number",
        ),
        (
            object(&[("max_tokens", JsValue::NULL)]),
            true,
            "max_tokens must be a number",
        ),
        (
            object(&[("max_tokens", num(1.5))]),
            false,
            "max_tokens must be a whole number",
        ),
        (
            object(&[("max_tokens", num(5.0)), ("refill_every_seconds", num(0.0))]),
            false,
            "refill_every_seconds must be a finite number > 0, got 0",
        ),
    ];
    for (value, type_error, start) in bad {
        let e = l
            .set_options(T0, options(value), &JsValue::UNDEFINED)
            .unwrap_err();
        assert_eq!(
            e.is_instance_of::<TypeError>(),
            type_error,
            "{}",
            message(&e)
        );
        assert!(message(&e).starts_with(start), "{}", message(&e));
    }
    let current = l.options().js_value();
    assert_eq!(field(&current, "max_tokens"), 3.0);
    assert_eq!(field(&current, "refill_every_seconds"), 10.0);
    // `undefined` fields and `{}` keep every value.
    l.set_options(
        T0,
        options(object(&[("max_tokens", JsValue::UNDEFINED)])),
        &JsValue::UNDEFINED,
    )
    .unwrap();
    l.set_options(T0, options(Object::new().into()), &JsValue::UNDEFINED)
        .unwrap();
    assert_eq!(status(&mut l, T0, &key("k")).1, 3.0);
}

#[wasm_bindgen_test]
fn limit_returns_a_decision_with_a_null_retry_when_hopeless() {
    let mut l = RateLimiter::new(1, 2);
    let k = key("k");
    let d = l
        .limit(T0, &k, &num(11.0), &JsValue::UNDEFINED)
        .unwrap()
        .js_value();
    let names: Vec<String> = Object::keys(d.unchecked_ref::<Object>())
        .iter()
        .filter_map(|n| n.as_string())
        .collect();
    assert_eq!(
        names,
        [
            "allowed",
            "remaining",
            "limit",
            "reset_in_ms",
            "retry_after_ms",
            "window_ms"
        ]
    );
    assert_eq!(Reflect::get(&d, &key("allowed")).unwrap(), JsValue::FALSE);
    assert!(Reflect::get(&d, &key("retry_after_ms")).unwrap().is_null());
    let policy = object(&[("max_tokens", num(0.0))]);
    let e = l.limit(T0, &k, &num(1.0), &policy).unwrap_err();
    assert!(e.is_instance_of::<RangeError>());
    assert!(message(&e).starts_with("policy.max_tokens must be a whole number"));
}

#[wasm_bindgen_test]
fn limit_all_reads_plain_request_objects() {
    let mut l = RateLimiter::new(1, 2);
    let requests = js_sys::Array::of2(
        &object(&[("key", key("a")), ("cost", num(2.0))]),
        &object(&[
            ("key", key("b")),
            ("policy", object(&[("max_tokens", num(3.0))])),
        ]),
    );
    let all = l
        .limit_all(T0, &requests, &JsValue::UNDEFINED)
        .unwrap()
        .js_value();
    assert_eq!(Reflect::get(&all, &key("allowed")).unwrap(), JsValue::TRUE);
    assert_eq!(status(&mut l, T0, &key("a")).0, 8.0);
    assert_eq!(status(&mut l, T0, &key("b")), (2.0, 3.0, 10_000.0));
    let duplicate =
        js_sys::Array::of2(&object(&[("key", key("a"))]), &object(&[("key", key("a"))]));
    let e = l
        .limit_all(T0, &duplicate, &JsValue::UNDEFINED)
        .unwrap_err();
    assert!(e.is_instance_of::<TypeError>());
    assert!(message(&e).starts_with("requests[1].key repeats the key of requests[0].key"));
    assert_eq!(status(&mut l, T0, &key("a")).0, 8.0);
}

/// A key with a lone surrogate, as JS makes it (Rust strings cannot hold one).
fn lone_surrogate_key() -> JsValue {
    JsString::from_char_code(&[0x6b, 0xd800]).into()
}

#[wasm_bindgen_test]
fn snapshots_restore_into_a_fresh_limiter_with_their_keys_and_policies() {
    let mut l = RateLimiter::new(1, 2);
    let (plain, lone) = (key("login"), lone_surrogate_key());
    assert!(l.consume(T0, &plain, &num(3.0)).unwrap());
    assert!(l.consume(T0, &lone, &num(4.0)).unwrap());
    let policy = object(&[("max_tokens", num(50.0))]);
    l.limit(T0, &key("upload"), &num(20.0), &policy).unwrap();
    assert!(l.holds(&lone).unwrap() && l.holds_text("login") && !l.holds_text("other"));
    assert!(l.snapshot(&key("other")).unwrap().is_undefined());

    let mut fresh = RateLimiter::new(3, 4);
    for k in [&plain, &lone, &key("upload")] {
        let snapshot = l.snapshot(k).unwrap();
        let bytes = Reflect::get(&snapshot, &key("bytes")).unwrap();
        let has_policy = Reflect::get(&snapshot, &key("has_policy"))
            .unwrap()
            .as_bool()
            .unwrap();
        assert_eq!(has_policy, k.as_string().as_deref() == Some("upload"));
        assert!(field(&snapshot, "full_at_ms") > T0);
        fresh.restore(T0 + 1.0, k, bytes.unchecked_ref()).unwrap();
    }
    for k in [&plain, &lone, &key("upload")] {
        assert_eq!(status(&mut fresh, T0 + 1.0, k), status(&mut l, T0 + 1.0, k));
    }
    // The lone surrogate and its UTF-8 replacement stay apart through snapshot and restore.
    assert_eq!(status(&mut fresh, T0, &key("k\u{fffd}")).0, 10.0);
    let all = fresh.snapshots_without_policy();
    assert_eq!(
        all.length(),
        2,
        "login and the lone-surrogate key have no policy"
    );
    let keys: Vec<JsValue> = all
        .iter()
        .map(|entry| Reflect::get(&entry, &key("key")).unwrap())
        .collect();
    assert!(keys.contains(&plain) && keys.contains(&lone));
}

#[wasm_bindgen_test]
fn unreadable_saved_bytes_throw_a_plain_error_naming_the_key() {
    let mut l = RateLimiter::new(1, 2);
    let bytes = js_sys::Uint8Array::from(&[1u8, 0, 7][..]);
    let error = l.restore(T0, &key("k"), &bytes.buffer()).unwrap_err();
    assert!(!error.is_instance_of::<TypeError>() && !error.is_instance_of::<RangeError>());
    assert!(error.is_instance_of::<js_sys::Error>());
    assert_eq!(
        message(&error),
        "the stored bucket of key \"k\" is not a bucket this version saved (3 bytes): reset the key to start it afresh"
    );
    assert!(!l.holds_text("k"));
}

/// A loader for `setOptions` that returns `pairs` and counts its calls in `calls`.
fn counting_loader(pairs: &js_sys::Array, calls: &js_sys::Array) -> JsValue {
    js_sys::Function::new_with_args(
        "pairs, calls",
        "return () => { calls.push(1); return pairs; };",
    )
    .call2(&JsValue::UNDEFINED, pairs, calls)
    .unwrap()
}

#[wasm_bindgen_test]
fn set_options_reports_a_change_and_loads_snapshots_only_then() {
    let mut source = RateLimiter::new(1, 2);
    assert!(source.consume(T0, &key("login"), &num(3.0)).unwrap());
    let snapshot = source.snapshot(&key("login")).unwrap();
    let pair = js_sys::Array::of2(
        &key("login"),
        &Reflect::get(&snapshot, &key("bytes")).unwrap(),
    );
    let (pairs, calls) = (js_sys::Array::of1(&pair), js_sys::Array::new());
    let load = counting_loader(&pairs, &calls);

    let mut l = RateLimiter::new(3, 4);
    let same = l.set_options(T0, options(object(&[("max_tokens", num(10.0))])), &load);
    assert!(!same.unwrap());
    let bad = l.set_options(T0, options(object(&[("max_tokens", num(0.5))])), &load);
    assert!(bad.unwrap_err().is_instance_of::<RangeError>());
    assert_eq!(calls.length(), 0, "no change, no load");
    assert_eq!(status(&mut l, T0, &key("login")).0, 10.0);

    let raised = l.set_options(T0, options(object(&[("max_tokens", num(20.0))])), &load);
    assert!(raised.unwrap());
    assert_eq!(calls.length(), 1);
    // The snapshot was restored: 7 tokens left, under the raised capacity.
    assert_eq!(status(&mut l, T0, &key("login")), (7.0, 20.0, 10_000.0));
    assert_eq!(status(&mut l, T0, &key("other")).0, 20.0);
}
