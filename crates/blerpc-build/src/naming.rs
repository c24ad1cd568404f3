//! Command names and Rust identifiers.
//!
//! bleRPC routes by command name (`wire.md` §1.4): the snake_case of the RPC method, produced by
//! the reference generator's two-regex `camelToSnake`. [`camel_to_snake`] reproduces it exactly,
//! quirks included, so that a Rust peer answers to the same names as the C, Python, Kotlin, Swift,
//! Dart and TypeScript peers.

/// Converts a proto method or message-pair name to its bleRPC command name.
///
/// This is the reference generator's scheme (`tools/generate-handlers/parse.go`), two regex passes
/// followed by lower-casing:
///
/// 1. `(.)([A-Z][a-z]+)` → `${1}_${2}`: an upper-case letter that starts a lower-case run gets an
///    underscore before it (`HTTPServer` → `HTTP_Server`);
/// 2. `([a-z0-9])([A-Z])` → `${1}_${2}`: a lower-case letter or digit followed by an upper-case
///    letter gets one between them (`getV2Data` → `get_V2_Data`);
/// 3. lower-case everything.
///
/// Both passes replace leftmost, non-overlapping matches, like Go's `ReplaceAllString`. The result
/// differs from `heck`'s snake case in a few corners, which is why it is reimplemented here
/// rather than borrowed:
///
/// | input | command |
/// |---|---|
/// | `Echo` | `echo` |
/// | `FlashRead` | `flash_read` |
/// | `HTTPServer` | `http_server` |
/// | `getV2Data` | `get_v2_data` |
/// | `Counter2Stream` | `counter2_stream` |
/// | `XMLHttpRequest` | `xml_http_request` |
/// | `Foo_Bar` | `foo__bar` (the reference keeps both underscores) |
/// | `flash_read` | `flash_read` |
pub fn camel_to_snake(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();

    // Pass 1: (.)([A-Z][a-z]+)
    let mut pass1: Vec<char> = Vec::with_capacity(chars.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        let upper_at_next = chars.get(i + 1).is_some_and(char::is_ascii_uppercase);
        let lower_run = chars.get(i + 2..).map_or(0, |rest| {
            rest.iter().take_while(|c| c.is_ascii_lowercase()).count()
        });
        // `.` matches any character except a newline.
        if chars[i] != '\n' && upper_at_next && lower_run > 0 {
            let end = i + 2 + lower_run;
            pass1.push(chars[i]);
            pass1.push('_');
            pass1.extend_from_slice(&chars[i + 1..end]);
            i = end;
        } else {
            pass1.push(chars[i]);
            i += 1;
        }
    }

    // Pass 2: ([a-z0-9])([A-Z])
    let mut out = String::with_capacity(pass1.len() + 8);
    let mut i = 0;
    while i < pass1.len() {
        let c = pass1[i];
        let next_upper = pass1.get(i + 1).is_some_and(char::is_ascii_uppercase);
        if (c.is_ascii_lowercase() || c.is_ascii_digit()) && next_upper {
            out.push(c);
            out.push('_');
            out.push(pass1[i + 1]);
            i += 2;
        } else {
            out.push(c);
            i += 1;
        }
    }

    // Go's strings.ToLower; command names are ASCII in practice.
    out.to_lowercase()
}

/// Rust's strict and reserved keywords (2024 edition) that are valid as raw identifiers.
const RAW_KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "do", "dyn",
    "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in", "let",
    "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref", "return",
    "static", "struct", "trait", "true", "try", "type", "typeof", "unsafe", "unsized", "use",
    "virtual", "where", "while", "yield",
];

/// Keywords that cannot be raw identifiers; they get a trailing underscore instead.
const NON_RAW_KEYWORDS: &[&str] = &["self", "Self", "super", "crate", "_"];

/// The Rust method name for a command name: the name itself, `r#`-escaped when it is a keyword
/// (`type` → `r#type`), or with a trailing underscore when it cannot be raw (`self` → `self_`).
pub fn rust_method_ident(command: &str) -> String {
    if NON_RAW_KEYWORDS.contains(&command) {
        format!("{command}_")
    } else if RAW_KEYWORDS.contains(&command) {
        format!("r#{command}")
    } else {
        command.to_owned()
    }
}

/// Whether `name` is a usable Rust identifier once passed through [`rust_method_ident`]:
/// ASCII letters, digits and underscores, not starting with a digit, not empty.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_service_names() {
        assert_eq!(camel_to_snake("Echo"), "echo");
        assert_eq!(camel_to_snake("FlashRead"), "flash_read");
        assert_eq!(camel_to_snake("DataWrite"), "data_write");
        assert_eq!(camel_to_snake("CounterStream"), "counter_stream");
        assert_eq!(camel_to_snake("CounterUpload"), "counter_upload");
    }

    #[test]
    fn acronyms() {
        assert_eq!(camel_to_snake("HTTPServer"), "http_server");
        assert_eq!(camel_to_snake("GetHTTPResponse"), "get_http_response");
        assert_eq!(camel_to_snake("XMLHttpRequest"), "xml_http_request");
        assert_eq!(camel_to_snake("ABCDef"), "abc_def");
        assert_eq!(camel_to_snake("ReadADC"), "read_adc");
        assert_eq!(camel_to_snake("LED"), "led");
        assert_eq!(camel_to_snake("SetLEDs"), "set_le_ds");
    }

    #[test]
    fn digits_and_lower_camel() {
        assert_eq!(camel_to_snake("getV2Data"), "get_v2_data");
        assert_eq!(camel_to_snake("Counter2Stream"), "counter2_stream");
        assert_eq!(camel_to_snake("Sha256Sum"), "sha256_sum");
        assert_eq!(camel_to_snake("Read2"), "read2");
        assert_eq!(camel_to_snake("echo"), "echo");
        assert_eq!(camel_to_snake("flashRead"), "flash_read");
    }

    #[test]
    fn already_snake_and_edge_cases() {
        assert_eq!(camel_to_snake("flash_read"), "flash_read");
        assert_eq!(camel_to_snake("Foo_Bar"), "foo__bar");
        assert_eq!(camel_to_snake(""), "");
        assert_eq!(camel_to_snake("A"), "a");
        assert_eq!(camel_to_snake("Ab"), "ab");
        assert_eq!(camel_to_snake("aB"), "a_b");
    }

    #[test]
    fn differs_from_heck_where_the_reference_does() {
        use heck::ToSnakeCase;
        // heck folds the underscore of `Foo_Bar`; the reference's first regex adds a second one.
        assert_eq!("Foo_Bar".to_snake_case(), "foo_bar");
        assert_eq!(camel_to_snake("Foo_Bar"), "foo__bar");
        // Where both agree.
        for name in [
            "FlashRead",
            "HTTPServer",
            "getV2Data",
            "SetLEDs",
            "XMLHttpRequest",
        ] {
            assert_eq!(camel_to_snake(name), name.to_snake_case(), "{name}");
        }
    }

    #[test]
    fn method_idents() {
        assert_eq!(rust_method_ident("echo"), "echo");
        assert_eq!(rust_method_ident("type"), "r#type");
        assert_eq!(rust_method_ident("async"), "r#async");
        assert_eq!(rust_method_ident("self"), "self_");
        assert!(is_identifier("flash_read"));
        assert!(is_identifier("_x"));
        assert!(!is_identifier("2x"));
        assert!(!is_identifier(""));
        assert!(!is_identifier("a-b"));
    }
}
