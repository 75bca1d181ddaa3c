//! A small JSON tree and printer that lays out JSON exactly like fio's `json.c`.
//!
//! serde_json cannot be used for the output because fio prints every float with `%f`
//! (six decimals: `99.000000`), which scrapers and diff-based comparisons rely on, and
//! uses its own indentation (`"key" : value`, two spaces per level).

/// A JSON value with fio's distinction between integers and floats.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum J {
    Int(i128),
    Float(f64),
    Str(String),
    Bool(bool),
    Null,
    Obj(Vec<(String, J)>),
    Arr(Vec<J>),
}

impl J {
    /// An unsigned integer value.
    pub fn uint(v: u64) -> J {
        J::Int(i128::from(v))
    }

    /// Converts a serde_json value (used for caller-supplied extras).
    pub fn from_serde(v: &serde_json::Value) -> J {
        use serde_json::Value;
        match v {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Number(n) => number(n),
            Value::String(s) => J::Str(s.clone()),
            Value::Array(items) => J::Arr(items.iter().map(J::from_serde).collect()),
            Value::Object(map) => J::Obj(
                map.iter()
                    .map(|(k, v)| (k.clone(), J::from_serde(v)))
                    .collect(),
            ),
        }
    }
}

/// Keeps integers integral and prints everything else as a float.
fn number(n: &serde_json::Number) -> J {
    if let Some(i) = n.as_i64() {
        J::Int(i128::from(i))
    } else if let Some(u) = n.as_u64() {
        J::Int(i128::from(u))
    } else {
        J::Float(n.as_f64().unwrap_or(0.0))
    }
}

/// An object builder that keeps insertion order (fio's key order is part of its format).
#[derive(Debug, Default)]
pub(crate) struct Obj(Vec<(String, J)>);

impl Obj {
    pub fn new() -> Self {
        Obj(Vec::new())
    }

    /// Appends a key.
    pub fn put(&mut self, key: &str, value: J) -> &mut Self {
        self.0.push((key.to_string(), value));
        self
    }

    pub fn int(&mut self, key: &str, v: u64) -> &mut Self {
        self.put(key, J::uint(v))
    }

    pub fn float(&mut self, key: &str, v: f64) -> &mut Self {
        self.put(key, J::Float(v))
    }

    pub fn string(&mut self, key: &str, v: &str) -> &mut Self {
        self.put(key, J::Str(v.to_string()))
    }

    pub fn build(self) -> J {
        J::Obj(self.0)
    }
}

/// Renders a value the way fio's `json_print_object` does, with a final newline.
pub(crate) fn render(value: &J) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    out.push('\n');
    out
}

/// Writes `value`, whose first line is already indented to `level`.
fn write_value(out: &mut String, value: &J, level: usize) {
    match value {
        J::Int(i) => out.push_str(&i.to_string()),
        J::Float(f) => out.push_str(&float(*f)),
        J::Str(s) => write_string(out, s),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Null => out.push_str("null"),
        J::Obj(pairs) => write_object(out, pairs, level),
        J::Arr(items) => write_array(out, items, level),
    }
}

/// `{`, one `"key" : value` per line one level deeper, `}` back at `level`.
fn write_object(out: &mut String, pairs: &[(String, J)], level: usize) {
    out.push_str("{\n");
    for (i, (key, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push_str(",\n");
        }
        indent(out, level + 1);
        write_string(out, key);
        out.push_str(" : ");
        write_value(out, value, level + 1);
    }
    out.push('\n');
    indent(out, level);
    out.push('}');
}

/// `[`, one value per line one level deeper, `]` back at `level`.
fn write_array(out: &mut String, items: &[J], level: usize) {
    out.push_str("[\n");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(",\n");
        }
        indent(out, level + 1);
        write_value(out, item, level + 1);
    }
    out.push('\n');
    indent(out, level);
    out.push(']');
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

/// C's `%f`: six decimals. Non-finite values, which fio would print as invalid JSON
/// (`nan`, `inf`), become 0 so the output always parses.
pub(crate) fn float(f: f64) -> String {
    if f.is_finite() {
        format!("{f:.6}")
    } else {
        "0.000000".to_string()
    }
}

/// A JSON string. fio escapes only `"` and `\`; control characters are escaped too so
/// that the output is valid JSON whatever a job name contains.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}
