//! The no-alloc generator ([`Builder::compile_no_alloc`](crate::Builder::compile_no_alloc)):
//! message types for `no_std` targets without an allocator, one file per package
//! (`<package>.noalloc.rs`), with the wire codec they use emitted into the same file
//! (`runtime.rs` beside this file, as module `codec`).
//!
//! | proto | Rust field | on the wire |
//! |---|---|---|
//! | `string` | `&'a str` (borrowed from the decoded buffer) | length-delimited, UTF-8 checked |
//! | `bytes` | `B`: `&'a [u8]` when decoded, any `codec::BytesField` when encoded | length-delimited |
//! | `int32`, `int64`, `uint32`, `uint64`, `bool`, enums (as `i32`) | the integer | varint |
//! | `sint32`, `sint64` | `i32`, `i64` | zigzag varint |
//! | `fixed32`, `sfixed32`, `float` / `fixed64`, `sfixed64`, `double` | `u32`, `i32`, `f32` / `u64`, `i64`, `f64` | 4 / 8 bytes |
//! | `optional` (proto3) or proto2 `optional` | `Option<T>` | written when `Some` |
//!
//! Repeated fields, maps, message-typed fields and `oneof` need storage of their own: the
//! generator refuses them with [`Error::NoAlloc`] naming the field. For each service it also
//! emits `<Service>Command`, the commands by wire name, each with its shape (`kind()`, a
//! `codec::CallKind`: unary, either one-way stream, or bidirectional), so a fixed-buffer
//! peripheral's dispatch knows which requests open a stream both ways.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use heck::ToUpperCamelCase;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet};

use crate::Error;
use crate::model::{Kind, Model, ServiceModel};
use crate::naming::rust_method_ident;

/// The codec the generated messages use (emitted as `pub mod codec`).
const RUNTIME: &str = include_str!("runtime.rs");

/// How a field is carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wire {
    Varint,
    Fixed32,
    Fixed64,
    Str,
    Bytes,
}

/// One generated field.
struct Field {
    number: u32,
    ident: String,
    /// The Rust type of the value (`u32`, `&'a str`, `B`).
    ty: &'static str,
    wire: Wire,
    proto: Type,
    optional: bool,
    doc: Vec<String>,
}

impl Field {
    /// Expression turning the value `v` (a reference for `Option`, a place otherwise) into the
    /// `u64`/`u32` the writer takes.
    fn wire_value(&self, v: &str) -> String {
        match self.proto {
            Type::Int32 | Type::Enum => format!("i64::from({v}) as u64"),
            Type::Int64 | Type::Sfixed64 => format!("{v} as u64"),
            Type::Uint32 => format!("u64::from({v})"),
            Type::Bool => format!("u64::from({v})"),
            Type::Sint32 => format!("codec::zigzag(i64::from({v}))"),
            Type::Sint64 => format!("codec::zigzag({v})"),
            Type::Sfixed32 => format!("{v} as u32"),
            Type::Float | Type::Double => format!("{v}.to_bits()"),
            _ => v.to_owned(),
        }
    }

    /// Expression turning the decoded wire value `v` into the field's type.
    fn decoded(&self, v: &str) -> String {
        match self.proto {
            Type::Int32 | Type::Enum | Type::Uint32 => {
                let ty = if self.proto == Type::Uint32 {
                    "u32"
                } else {
                    "i32"
                };
                format!("{v} as {ty}")
            }
            Type::Int64 | Type::Sfixed64 => format!("{v} as i64"),
            Type::Sfixed32 => format!("{v} as i32"),
            Type::Bool => format!("{v} != 0"),
            Type::Sint32 => format!("codec::unzigzag({v}) as i32"),
            Type::Sint64 => format!("codec::unzigzag({v})"),
            Type::Float => format!("f32::from_bits({v})"),
            Type::Double => format!("f64::from_bits({v})"),
            _ => v.to_owned(),
        }
    }

    /// The most bytes the value takes, for the fixed-size fields.
    fn max_value_len(&self) -> Option<usize> {
        match (self.wire, self.proto) {
            (Wire::Fixed32, _) => Some(4),
            (Wire::Fixed64, _) => Some(8),
            (Wire::Varint, Type::Bool) => Some(1),
            (Wire::Varint, Type::Uint32 | Type::Sint32) => Some(5),
            (Wire::Varint, _) => Some(10),
            _ => None,
        }
    }
}

/// One generated message.
struct Message {
    name: String,
    doc: Vec<String>,
    fields: Vec<Field>,
}

impl Message {
    fn has(&self, wire: Wire) -> bool {
        self.fields.iter().any(|f| f.wire == wire)
    }
    fn has_float(&self) -> bool {
        self.fields
            .iter()
            .any(|f| matches!(f.proto, Type::Float | Type::Double))
    }
    /// The type parameters with `bytes` standing for the bytes fields' type: `<'a, B>`,
    /// `<'a>`, `<B>` or nothing.
    fn params(&self, bytes: &str) -> String {
        let mut params = Vec::new();
        if self.has(Wire::Str) {
            params.push("'a");
        }
        if self.has(Wire::Bytes) {
            params.push(bytes);
        }
        if params.is_empty() {
            String::new()
        } else {
            format!("<{}>", params.join(", "))
        }
    }
    /// The type as decoded: `Name<'a, &'a [u8]>` etc.
    fn decoded_type(&self) -> String {
        format!("{}{}", self.name, self.params("&'a [u8]"))
    }
    /// The encoded length when it has a fixed bound (no length-delimited field).
    fn max_len(&self) -> Option<usize> {
        self.fields
            .iter()
            .try_fold(0, |n, f| Some(n + key_len(f.number) + f.max_value_len()?))
    }
}

fn key_len(field: u32) -> usize {
    let mut v = u64::from(field) << 3;
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// The comment lines of the element at `path` in `file`.
fn comments(file: &FileDescriptorProto, path: &[i32]) -> Vec<String> {
    let Some(info) = &file.source_code_info else {
        return Vec::new();
    };
    info.location
        .iter()
        .find(|l| l.path == path)
        .and_then(|l| l.leading_comments.as_deref())
        .map(|c| c.lines().map(|l| l.trim_end().to_owned()).collect())
        .unwrap_or_default()
}

fn unsupported(file: &FileDescriptorProto, message: &str, field: &str, reason: &str) -> Error {
    Error::NoAlloc {
        file: file.name().to_owned(),
        message: message.to_owned(),
        field: field.to_owned(),
        reason: reason.to_owned(),
    }
}

fn field(
    file: &FileDescriptorProto,
    message: &DescriptorProto,
    path: &[i32],
    f: &FieldDescriptorProto,
) -> Result<Field, Error> {
    let refuse = |reason: &str| Err(unsupported(file, message.name(), f.name(), reason));
    if f.label() == Label::Repeated {
        return refuse(
            "repeated fields need fixed-capacity storage, which this generator does not emit",
        );
    }
    if f.oneof_index.is_some() && !f.proto3_optional() {
        return refuse("`oneof` is not supported");
    }
    let (ty, wire) = match f.r#type() {
        Type::Int32 | Type::Sint32 | Type::Sfixed32 | Type::Enum => (
            "i32",
            if f.r#type() == Type::Sfixed32 {
                Wire::Fixed32
            } else {
                Wire::Varint
            },
        ),
        Type::Int64 | Type::Sint64 => ("i64", Wire::Varint),
        Type::Sfixed64 => ("i64", Wire::Fixed64),
        Type::Uint32 => ("u32", Wire::Varint),
        Type::Fixed32 => ("u32", Wire::Fixed32),
        Type::Uint64 => ("u64", Wire::Varint),
        Type::Fixed64 => ("u64", Wire::Fixed64),
        Type::Bool => ("bool", Wire::Varint),
        Type::Float => ("f32", Wire::Fixed32),
        Type::Double => ("f64", Wire::Fixed64),
        Type::String => ("&'a str", Wire::Str),
        Type::Bytes => ("B", Wire::Bytes),
        Type::Message | Type::Group => {
            return refuse(
                "message-typed fields are not supported (only scalars, string and bytes)",
            );
        }
    };
    if f.label() == Label::Required {
        return refuse("proto2 `required` fields are not supported");
    }
    if f.default_value.is_some() {
        return refuse("proto2 `[default = …]` values are not supported");
    }
    let explicit =
        f.proto3_optional() || (file.syntax() != "proto3" && f.label() == Label::Optional);
    let number = u32::try_from(f.number()).unwrap_or(0);
    Ok(Field {
        number,
        ident: rust_method_ident(&crate::naming::camel_to_snake(f.name())),
        ty,
        wire,
        proto: f.r#type(),
        optional: explicit,
        doc: comments(file, path),
    })
}

/// The generated files: `<package>.noalloc.rs` → its text.
pub(crate) fn generate(
    fds: &FileDescriptorSet,
    requested: &std::collections::HashSet<String>,
    model: &Model,
) -> Result<BTreeMap<String, String>, Error> {
    let mut packages: BTreeMap<String, Vec<Message>> = BTreeMap::new();
    for file in fds.file.iter().filter(|f| requested.contains(f.name())) {
        if file.syntax() == "editions" {
            return Err(unsupported(
                file,
                "",
                "",
                "editions files are not supported",
            ));
        }
        let entry = packages.entry(file.package().to_owned()).or_default();
        for (i, m) in file.message_type.iter().enumerate() {
            let mpath = [4, i32::try_from(i).unwrap_or(i32::MAX)];
            if !m.nested_type.is_empty() || !m.enum_type.is_empty() {
                return Err(unsupported(
                    file,
                    m.name(),
                    "",
                    "nested types are not supported",
                ));
            }
            let mut fields = Vec::new();
            for (j, f) in m.field.iter().enumerate() {
                let fpath = [mpath[0], mpath[1], 2, i32::try_from(j).unwrap_or(i32::MAX)];
                fields.push(field(file, m, &fpath, f)?);
            }
            fields.sort_by_key(|f| f.number);
            entry.push(Message {
                name: m.name().to_upper_camel_case(),
                doc: comments(file, &mpath),
                fields,
            });
        }
    }
    let mut out = BTreeMap::new();
    for (package, messages) in packages {
        let mut text = String::new();
        let _ = writeln!(
            text,
            "// Generated by blerpc-build (no-alloc) from package `{package}`: do not edit.\n"
        );
        for m in &messages {
            message(&mut text, m);
        }
        for service in model.services.iter().filter(|s| s.package == package) {
            commands(&mut text, service);
        }
        text.push_str(
            "/// The wire codec of the messages above (no allocator).\n\
             #[allow(dead_code, clippy::all)]\n\
             pub mod codec {\n",
        );
        for line in RUNTIME.lines() {
            if line.is_empty() {
                text.push('\n');
            } else {
                let _ = writeln!(text, "    {line}");
            }
        }
        text.push_str("}\n");
        let stem = if package.is_empty() { "_" } else { &package };
        out.insert(format!("{stem}.noalloc.rs"), text);
    }
    Ok(out)
}

fn doc_lines(out: &mut String, indent: &str, lines: &[String]) {
    for line in lines {
        if line.is_empty() {
            let _ = writeln!(out, "{indent}///");
        } else {
            let _ = writeln!(out, "{indent}///{line}");
        }
    }
}

fn message(out: &mut String, m: &Message) {
    let name = &m.name;
    doc_lines(out, "", &m.doc);
    let eq = if m.has_float() { "" } else { ", Eq" };
    let _ = writeln!(
        out,
        "#[derive(Clone, Copy, Debug, Default, PartialEq{eq})]\npub struct {name}{} {{",
        m.params("B")
    );
    for f in &m.fields {
        doc_lines(out, "    ", &f.doc);
        let ty = if f.optional {
            format!("Option<{}>", f.ty)
        } else {
            f.ty.to_owned()
        };
        let _ = writeln!(out, "    pub {}: {ty},", f.ident);
    }
    out.push_str("}\n\n");

    // Decoding.
    let lifetime = if m.has(Wire::Str) || m.has(Wire::Bytes) {
        "<'a>"
    } else {
        ""
    };
    let buf = if lifetime.is_empty() {
        "&[u8]"
    } else {
        "&'a [u8]"
    };
    let _ = writeln!(out, "impl{lifetime} {} {{", m.decoded_type());
    out.push_str(
        "    /// Decodes the message (unknown fields are skipped; borrowed fields point into \
         `buf`).\n",
    );
    let _ = writeln!(
        out,
        "    pub fn decode(buf: {buf}) -> Result<Self, codec::DecodeError> {{"
    );
    if m.fields.is_empty() {
        out.push_str(
            "        for field in codec::Fields::new(buf) {\n            field?;\n        }\n        \
             Ok(Self {})\n    }\n}\n\n",
        );
    } else {
        out.push_str(
            "        let mut m = Self::default();\n        for field in codec::Fields::new(buf) {\n            match field? {\n",
        );
        for f in &m.fields {
            let (pattern, value) = match f.wire {
                Wire::Varint => ("codec::Value::Varint(v)", f.decoded("v")),
                Wire::Fixed32 => ("codec::Value::Fixed32(v)", f.decoded("v")),
                Wire::Fixed64 => ("codec::Value::Fixed64(v)", f.decoded("v")),
                Wire::Str => ("codec::Value::Bytes(b)", "codec::str_value(b)?".to_owned()),
                Wire::Bytes => ("codec::Value::Bytes(b)", "b".to_owned()),
            };
            let value = if f.optional {
                format!("Some({value})")
            } else {
                value
            };
            let _ = writeln!(
                out,
                "                ({}, {pattern}) => m.{} = {value},",
                f.number, f.ident
            );
        }
        out.push_str(
            "                _ => {}\n            }\n        }\n        Ok(m)\n    }\n}\n\n",
        );
    }

    // Encoding.
    let impl_generics = match (m.has(Wire::Str), m.has(Wire::Bytes)) {
        (true, true) => "<'a, B: codec::BytesField>",
        (false, true) => "<B: codec::BytesField>",
        (true, false) => "<'a>",
        (false, false) => "",
    };
    let _ = writeln!(out, "impl{impl_generics} {name}{} {{", m.params("B"));
    if let Some(max) = m.max_len() {
        let _ = writeln!(
            out,
            "    /// The longest encoding of this message.\n    pub const MAX_ENCODED_LEN: usize = {max};\n"
        );
    }
    out.push_str("    /// The encoded length.\n    pub fn encoded_len(&self) -> usize {\n");
    if m.fields.is_empty() {
        out.push_str("        0\n    }\n\n");
    } else {
        out.push_str("        let mut n = 0;\n");
        for f in &m.fields {
            let (cond, value) = presence(f);
            // A fixed-width field's length does not depend on its value.
            let cond = if f.optional && matches!(f.wire, Wire::Fixed32 | Wire::Fixed64) {
                format!("if self.{}.is_some()", f.ident)
            } else {
                cond
            };
            let len = match f.wire {
                Wire::Varint => format!(
                    "codec::varint_field_len({}, {})",
                    f.number,
                    f.wire_value(&value)
                ),
                Wire::Fixed32 => format!("codec::key_len({}) + 4", f.number),
                Wire::Fixed64 => format!("codec::key_len({}) + 8", f.number),
                Wire::Str => format!("codec::len_field_len({}, {value}.len())", f.number),
                Wire::Bytes => format!(
                    "codec::len_field_len({}, codec::BytesField::field_len(&{value}))",
                    f.number
                ),
            };
            let _ = writeln!(
                out,
                "        {cond} {{\n            n += {len};\n        }}"
            );
        }
        out.push_str("        n\n    }\n\n");
    }
    out.push_str(
        "    /// Encodes into `out`, returning the length written.\n    pub fn encode(&self, out: &mut [u8]) -> Result<usize, codec::BufferTooShort> {\n        let mut w = codec::Writer::new(out);\n        self.encode_to(&mut w)?;\n        Ok(w.len())\n    }\n\n",
    );
    out.push_str(
        "    /// Appends the fields to `w`, in field-number order.\n    pub fn encode_to(&self, w: &mut codec::Writer<'_>) -> Result<(), codec::BufferTooShort> {\n",
    );
    if m.fields.is_empty() {
        out.push_str("        let _ = w;\n");
    }
    for f in &m.fields {
        let (cond, value) = presence(f);
        let write = match f.wire {
            Wire::Varint => format!("w.varint_field({}, {})", f.number, f.wire_value(&value)),
            Wire::Fixed32 => format!("w.fixed32_field({}, {})", f.number, f.wire_value(&value)),
            Wire::Fixed64 => format!("w.fixed64_field({}, {})", f.number, f.wire_value(&value)),
            Wire::Str => format!("w.str_field({}, {value})", f.number),
            Wire::Bytes => format!("w.bytes_field({}, &{value})", f.number),
        };
        let _ = writeln!(out, "        {cond} {{\n            {write}?;\n        }}");
    }
    out.push_str("        Ok(())\n    }\n}\n\n");
}

/// The presence test of a field and the name of its value inside it: `if let Some(v) =
/// self.x` for explicit presence, a default test for proto3's implicit presence.
fn presence(f: &Field) -> (String, String) {
    let this = format!("self.{}", f.ident);
    if f.optional {
        return match f.wire {
            // `v: &&str`, which the writer takes as it is.
            Wire::Str => (format!("if let Some(v) = &{this}"), "v".to_owned()),
            // `v: &B`: `*v` is the field, borrowed again where it is written.
            Wire::Bytes => (format!("if let Some(v) = &{this}"), "*v".to_owned()),
            // Scalars are `Copy`.
            _ => (format!("if let Some(v) = {this}"), "v".to_owned()),
        };
    }
    let cond = match (f.wire, f.proto) {
        (Wire::Str, _) => format!("if !{this}.is_empty()"),
        (Wire::Bytes, _) => format!("if codec::BytesField::field_len(&{this}) != 0"),
        (_, Type::Bool) => format!("if {this}"),
        (_, Type::Float | Type::Double) => format!("if {this}.to_bits() != 0"),
        _ => format!("if {this} != 0"),
    };
    (cond, this)
}

fn commands(out: &mut String, service: &ServiceModel) {
    let name = format!("{}Command", service.proto_name.to_upper_camel_case());
    let _ = writeln!(
        out,
        "/// The commands of the bleRPC service `{}` by wire name (from `{}`).\n#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]\npub enum {name} {{",
        if service.package.is_empty() {
            service.proto_name.clone()
        } else {
            format!("{}.{}", service.package, service.proto_name)
        },
        service.file
    );
    for c in &service.commands {
        let shape = match c.kind {
            Kind::Unary => "unary",
            Kind::ServerStream => "a peripheral-to-central stream",
            Kind::ClientStream => "a central-to-peripheral stream",
            Kind::BidiStream => "a bidirectional stream",
        };
        let _ = writeln!(
            out,
            "    /// `{}`: {shape}.\n    {},",
            c.name,
            c.method.to_upper_camel_case()
        );
    }
    out.push_str("}\n\n");
    let _ = writeln!(out, "impl {name} {{");
    let _ = writeln!(
        out,
        "    /// Every command, in the service's order.\n    pub const ALL: [{name}; {}] = [{}];\n",
        service.commands.len(),
        service
            .commands
            .iter()
            .map(|c| format!("{name}::{}", c.method.to_upper_camel_case()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    out.push_str("    /// The name on the wire.\n    pub const fn name(self) -> &'static str {\n        match self {\n");
    for c in &service.commands {
        let _ = writeln!(
            out,
            "            {name}::{} => {:?},",
            c.method.to_upper_camel_case(),
            c.name
        );
    }
    out.push_str("        }\n    }\n\n    /// The command named `name` on the wire.\n    pub fn from_name(name: &str) -> Option<Self> {\n        match name {\n");
    for c in &service.commands {
        let _ = writeln!(
            out,
            "            {:?} => Some({name}::{}),",
            c.name,
            c.method.to_upper_camel_case()
        );
    }
    out.push_str("            _ => None,\n        }\n    }\n\n");
    out.push_str("    /// How its calls flow.\n    pub const fn kind(self) -> codec::CallKind {\n        match self {\n");
    for c in &service.commands {
        let kind = match c.kind {
            Kind::Unary => "Unary",
            Kind::ServerStream => "ServerStream",
            Kind::ClientStream => "ClientStream",
            Kind::BidiStream => "BidiStream",
        };
        let _ = writeln!(
            out,
            "            {name}::{} => codec::CallKind::{kind},",
            c.method.to_upper_camel_case()
        );
    }
    out.push_str("        }\n    }\n}\n\n");
}
