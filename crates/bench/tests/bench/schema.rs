//! A validator for the subset of JSON Schema (2020-12) that `schema/result.schema.json` uses:
//! `type` (one or several), `required`, `properties`, `additionalProperties` (as a schema),
//! `items`, `minItems`, `maxItems`, `enum`, `minimum`, `exclusiveMinimum` and local `$ref`s.
//! A keyword outside the subset fails the validation, so the schema cannot silently use
//! something this checker ignores.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use serde_json::Value;

const KNOWN: &[&str] = &[
    "$schema",
    "$id",
    "$defs",
    "$ref",
    "title",
    "description",
    "type",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "enum",
    "minimum",
    "exclusiveMinimum",
];

/// The schema file.
pub fn load() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/result.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every violation of `schema` (the root, for `$ref`s) by `value`, with its JSON path.
pub fn validate(root: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(root, root, value, "$", &mut errors);
    errors
}

fn type_matches(name: &str, v: &Value) -> bool {
    match name {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => v.is_u64() || v.is_i64(),
        _ => false,
    }
}

fn check(root: &Value, schema: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(s) = schema.as_object() else {
        errors.push(format!("{path}: schema is not an object"));
        return;
    };
    for key in s.keys() {
        if !KNOWN.contains(&key.as_str()) {
            errors.push(format!("{path}: unsupported schema keyword {key}"));
        }
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let target = r
            .strip_prefix("#/")
            .map(|p| p.split('/').fold(root, |node, part| &node[part]));
        match target {
            Some(t) if !t.is_null() => check(root, t, v, path, errors),
            _ => errors.push(format!("{path}: unresolved $ref {r}")),
        }
    }
    if let Some(t) = s.get("type") {
        let names: Vec<&str> = match t {
            Value::String(n) => vec![n.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.iter().any(|n| type_matches(n, v)) {
            errors.push(format!("{path}: {v} is not of type {t}"));
            return;
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            errors.push(format!("{path}: {v} is not one of {e:?}"));
        }
    }
    if let (Some(min), Some(n)) = (s.get("minimum").and_then(Value::as_f64), v.as_f64()) {
        if n < min {
            errors.push(format!("{path}: {n} < {min}"));
        }
    }
    if let (Some(min), Some(n)) = (
        s.get("exclusiveMinimum").and_then(Value::as_f64),
        v.as_f64(),
    ) {
        if n <= min {
            errors.push(format!("{path}: {n} <= {min}"));
        }
    }
    if let Some(obj) = v.as_object() {
        if let Some(req) = s.get("required").and_then(Value::as_array) {
            for k in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(k) {
                    errors.push(format!("{path}: missing {k}"));
                }
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (k, child) in obj {
            let sub = format!("{path}.{k}");
            match props.and_then(|p| p.get(k)) {
                Some(ps) => check(root, ps, child, &sub, errors),
                None => {
                    if let Some(extra) = s.get("additionalProperties") {
                        check(root, extra, child, &sub, errors);
                    }
                }
            }
        }
    }
    if let Some(arr) = v.as_array() {
        if let Some(min) = s.get("minItems").and_then(Value::as_u64) {
            if (arr.len() as u64) < min {
                errors.push(format!("{path}: fewer than {min} items"));
            }
        }
        if let Some(max) = s.get("maxItems").and_then(Value::as_u64) {
            if arr.len() as u64 > max {
                errors.push(format!("{path}: more than {max} items"));
            }
        }
        if let Some(items) = s.get("items") {
            for (i, item) in arr.iter().enumerate() {
                check(root, items, item, &format!("{path}[{i}]"), errors);
            }
        }
    }
}

#[test]
fn the_validator_catches_violations() {
    let root = load();
    let environment = serde_json::json!({
        "ferry_version": "0.1.0", "git_commit": null, "date": "2026-11-26T14:00:00Z",
        "host": {"cpu_model": null, "cores": 2, "kernel": "Linux 6.1.0"},
        "fsync": "always", "command": ["ferry-bench", "throughput"]
    });
    let good = serde_json::json!({
        "workload": "x", "environment": environment, "params": {}, "results": []
    });
    // minItems 1.
    assert_eq!(
        validate(&root, &good).len(),
        1,
        "{:?}",
        validate(&root, &good)
    );
    // Every result records its host: a missing core count is an error.
    let mut no_cores = good.clone();
    no_cores["environment"]["host"]
        .as_object_mut()
        .unwrap()
        .remove("cores");
    let errors = validate(&root, &no_cores);
    assert!(
        errors.iter().any(|e| e.contains("missing cores")),
        "{errors:?}"
    );
    let bad = serde_json::json!({"workload": 3, "results": [{"target": "kafka"}]});
    let errors = validate(&root, &bad);
    for missing in ["missing params", "missing environment"] {
        assert!(errors.iter().any(|e| e.contains(missing)), "{errors:?}");
    }
    assert!(
        errors.iter().any(|e| e.contains("$.workload")),
        "{errors:?}"
    );
    assert!(errors.iter().any(|e| e.contains("kafka")), "{errors:?}");
    assert!(
        errors.iter().any(|e| e.contains("missing sent_per_s")),
        "{errors:?}"
    );
}
