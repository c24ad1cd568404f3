//! Protobuf ⇄ JSON for bleRPC commands: what the `blerpc` CLI and the device gateway speak to
//! people and HTTP clients.
//!
//! A [`Schema`] is one protobuf service, from a `.proto` file (compiled in pure Rust by protox,
//! no `protoc`), an encoded `FileDescriptorSet`, or the demo service built in. A command name
//! (`flash_read`: the wire name, the snake_case of the rpc name, as the reference derives it)
//! finds the [`Method`], its shape and its input and output messages; JSON (the proto3 JSON
//! mapping, proto field names) becomes protobuf bytes, and back.
//!
//! ```
//! use blerpc_schema::Schema;
//!
//! let schema = Schema::demo();
//! let m = schema.method("flash_read").unwrap();
//! let bytes = m.encode_request(r#"{"address": 0, "length": 16}"#).unwrap();
//! assert_eq!(bytes, [0x10, 0x10]);
//! assert_eq!(m.decode_response(&[0x08, 0x04]).unwrap(), r#"{"address":4,"data":""}"#);
//! assert!(schema.method("reboot").is_err()); // names the commands there are
//! ```

use std::path::{Path, PathBuf};

pub use blerpc_proto::connection::CallKind;
use prost_reflect::prost::Message as _;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, MessageDescriptor, MethodDescriptor,
    SerializeOptions, ServiceDescriptor,
};

/// What went wrong loading a schema or converting a message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The schema file could not be read.
    #[error("cannot read the schema {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The `.proto` file does not compile.
    #[error("{} does not compile: {message}", path.display())]
    Compile {
        /// The file.
        path: PathBuf,
        /// protox's message.
        message: String,
    },
    /// The bytes are not an encoded `FileDescriptorSet`.
    #[error("the service descriptors do not decode: {0}")]
    Descriptors(String),
    /// No service of that name, or no service at all, or several and none was named.
    #[error("{0}")]
    Service(String),
    /// The schema has no command of that name.
    #[error("unknown command `{command}`: {service} has {}", commands.join(", "))]
    UnknownCommand {
        /// The name asked for.
        command: String,
        /// The service's full name.
        service: String,
        /// The commands it has.
        commands: Vec<String>,
    },
    /// The JSON is not a valid message of the expected type.
    #[error("bad JSON for {message}{}: {reason}; expected an object like {{{}}}", field.as_ref().map(|f| format!(" (field `{f}`)")).unwrap_or_default(), expected.join(", "))]
    BadJson {
        /// The message's full name.
        message: String,
        /// The field whose value was refused, when the parser's reason does not name it.
        field: Option<String>,
        /// The parser's reason.
        reason: String,
        /// `name: type` of each field of the message.
        expected: Vec<String>,
    },
    /// The bytes are not a valid message of the expected type.
    #[error("the bytes are not a valid {message}: {reason}")]
    BadMessage {
        /// The message's full name.
        message: String,
        /// The decoder's reason.
        reason: String,
    },
}

/// One service's methods, by wire name.
#[derive(Clone, Debug)]
pub struct Schema {
    service: ServiceDescriptor,
}

/// One method: its wire name, shape and messages.
#[derive(Clone, Debug)]
pub struct Method {
    name: String,
    descriptor: MethodDescriptor,
}

impl Schema {
    /// The demo service `blerpc.Blerpc` (`proto/blerpc.proto`: echo, flash_read, data_write,
    /// counter_stream, counter_upload).
    pub fn demo() -> Schema {
        match Schema::from_descriptor_set(blerpc_demo::DESCRIPTOR_SET, Some("blerpc.Blerpc")) {
            Ok(s) => s,
            // The descriptor set is generated at build time from the demo's own schema.
            Err(e) => unreachable!("the demo's built-in descriptors: {e}"),
        }
    }

    /// The service `service` (its full name, e.g. `blerpc.Blerpc`; `None`: the only service
    /// there is) in an encoded `FileDescriptorSet` (`protoc --descriptor_set_out
    /// --include_imports`).
    pub fn from_descriptor_set(bytes: &[u8], service: Option<&str>) -> Result<Schema, SchemaError> {
        let pool =
            DescriptorPool::decode(bytes).map_err(|e| SchemaError::Descriptors(e.to_string()))?;
        Schema::from_pool(&pool, service)
    }

    /// The service `service` (`None`: the only service there is) of a `.proto` file; its
    /// imports are looked up beside it and in `includes`.
    pub fn from_proto_file(
        path: &Path,
        includes: &[PathBuf],
        service: Option<&str>,
    ) -> Result<Schema, SchemaError> {
        let compile = |message: String| SchemaError::Compile {
            path: path.to_path_buf(),
            message,
        };
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .ok_or_else(|| compile("it is not a file name".to_string()))?;
        if let Err(source) = std::fs::metadata(path) {
            return Err(SchemaError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
        let mut dirs = vec![dir.to_path_buf()];
        dirs.extend(includes.iter().cloned());
        let mut compiler = protox::Compiler::new(dirs).map_err(|e| compile(e.to_string()))?;
        compiler.include_imports(true);
        compiler
            .open_file(name)
            .map_err(|e| compile(e.to_string()))?;
        Schema::from_pool(&compiler.descriptor_pool(), service)
    }

    /// A schema file: a `.proto` file (by its extension) or an encoded descriptor set.
    pub fn load(path: &Path, service: Option<&str>) -> Result<Schema, SchemaError> {
        if path.extension().is_some_and(|e| e == "proto") {
            return Schema::from_proto_file(path, &[], service);
        }
        let bytes = std::fs::read(path).map_err(|source| SchemaError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Schema::from_descriptor_set(&bytes, service)
    }

    fn from_pool(pool: &DescriptorPool, service: Option<&str>) -> Result<Schema, SchemaError> {
        let service = match service {
            Some(name) => pool.get_service_by_name(name).ok_or_else(|| {
                SchemaError::Service(format!(
                    "no service {name} in the schema (it has: {})",
                    service_names(pool)
                ))
            })?,
            None => {
                let mut all = pool.services();
                match (all.next(), all.next()) {
                    (Some(one), None) => one,
                    (None, _) => {
                        return Err(SchemaError::Service(
                            "the schema defines no service".to_string(),
                        ));
                    }
                    (Some(_), Some(_)) => {
                        return Err(SchemaError::Service(format!(
                            "the schema defines several services ({}): name one",
                            service_names(pool)
                        )));
                    }
                }
            }
        };
        Ok(Schema { service })
    }

    /// The service's full name (`blerpc.Blerpc`).
    pub fn service_name(&self) -> &str {
        self.service.full_name()
    }

    /// The wire names of all commands, in declaration order.
    pub fn commands(&self) -> Vec<String> {
        self.service
            .methods()
            .map(|m| snake_case(m.name()))
            .collect()
    }

    /// Every method, in declaration order.
    pub fn methods(&self) -> Vec<Method> {
        self.service
            .methods()
            .map(|descriptor| Method {
                name: snake_case(descriptor.name()),
                descriptor,
            })
            .collect()
    }

    /// The method with wire name `command` (`flash_read`; the rpc name `FlashRead` works too).
    pub fn method(&self, command: &str) -> Result<Method, SchemaError> {
        self.service
            .methods()
            .find(|m| snake_case(m.name()) == command || m.name() == command)
            .map(|descriptor| Method {
                name: snake_case(descriptor.name()),
                descriptor,
            })
            .ok_or_else(|| SchemaError::UnknownCommand {
                command: command.to_string(),
                service: self.service.full_name().to_string(),
                commands: self.commands(),
            })
    }
}

fn service_names(pool: &DescriptorPool) -> String {
    let names: Vec<String> = pool.services().map(|s| s.full_name().to_string()).collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

impl Method {
    /// The wire name (`flash_read`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Unary, peripheral→central stream or central→peripheral stream.
    pub fn kind(&self) -> CallKind {
        match (
            self.descriptor.is_client_streaming(),
            self.descriptor.is_server_streaming(),
        ) {
            (true, _) => CallKind::ClientStream,
            (false, true) => CallKind::ServerStream,
            (false, false) => CallKind::Unary,
        }
    }

    /// The request message.
    pub fn input(&self) -> MessageDescriptor {
        self.descriptor.input()
    }

    /// The response message.
    pub fn output(&self) -> MessageDescriptor {
        self.descriptor.output()
    }

    /// Encodes one request (or upload item) given as JSON (empty: the empty message). Unknown
    /// fields are errors.
    pub fn encode_request(&self, json: &str) -> Result<Vec<u8>, SchemaError> {
        encode(&self.input(), json)
    }

    /// Decodes one response (or stream item) to one line of JSON (proto field names, default
    /// values included).
    pub fn decode_response(&self, bytes: &[u8]) -> Result<String, SchemaError> {
        decode(&self.output(), bytes)
    }

    /// Decodes one request (or upload item) to JSON, as [`Method::decode_response`] does for
    /// responses: what a server-side tool (or the fuzz round trip) shows for a request.
    pub fn decode_request(&self, bytes: &[u8]) -> Result<String, SchemaError> {
        decode(&self.input(), bytes)
    }

    /// Encodes one response (or stream item) given as JSON, as [`Method::encode_request`]
    /// does for requests.
    pub fn encode_response(&self, json: &str) -> Result<Vec<u8>, SchemaError> {
        encode(&self.output(), json)
    }

    /// An example request: every field of the input message at its default value, as JSON
    /// (what a form or a help text shows).
    pub fn request_template(&self) -> String {
        decode(&self.input(), &[]).unwrap_or_else(|_| "{}".to_string())
    }
}

fn parse(desc: &MessageDescriptor, json: &str) -> Result<DynamicMessage, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(json);
    DynamicMessage::deserialize_with_options(
        desc.clone(),
        &mut de,
        &DeserializeOptions::new().deny_unknown_fields(true),
    )
    .and_then(|m| de.end().map(|()| m))
}

/// The first field of a JSON object whose value the message refuses (the parser's own
/// messages, such as "out of range integral type conversion", do not say which).
fn bad_field(desc: &MessageDescriptor, json: &str) -> Option<String> {
    let serde_json::Value::Object(map) = serde_json::from_str(json).ok()? else {
        return None;
    };
    map.into_iter().find_map(|(key, value)| {
        let one = serde_json::Value::Object([(key.clone(), value)].into_iter().collect());
        parse(desc, &one.to_string()).is_err().then_some(key)
    })
}

fn encode(desc: &MessageDescriptor, json: &str) -> Result<Vec<u8>, SchemaError> {
    let json = json.trim();
    let json = if json.is_empty() { "{}" } else { json };
    let message = parse(desc, json).map_err(|e| {
        let reason = e.to_string();
        let field = bad_field(desc, json).filter(|field| !reason.contains(&format!("'{field}'")));
        SchemaError::BadJson {
            message: desc.full_name().to_string(),
            field,
            reason,
            expected: desc
                .fields()
                .map(|f| format!("{}: {}", f.name(), kind_name(&f.kind())))
                .collect(),
        }
    })?;
    Ok(message.encode_to_vec())
}

fn decode(desc: &MessageDescriptor, bytes: &[u8]) -> Result<String, SchemaError> {
    let bad = |reason: String| SchemaError::BadMessage {
        message: desc.full_name().to_string(),
        reason,
    };
    let message = DynamicMessage::decode(desc.clone(), bytes).map_err(|e| bad(e.to_string()))?;
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::new(&mut out);
    message
        .serialize_with_options(
            &mut ser,
            &SerializeOptions::new()
                .skip_default_fields(false)
                .use_proto_field_name(true),
        )
        .map_err(|e| bad(format!("cannot print it as JSON: {e}")))?;
    String::from_utf8(out).map_err(|_| bad("the JSON printer produced invalid UTF-8".to_string()))
}

fn kind_name(kind: &prost_reflect::Kind) -> String {
    use prost_reflect::Kind;
    match kind {
        Kind::Message(m) => m.full_name().to_string(),
        Kind::Enum(e) => e.full_name().to_string(),
        Kind::Bytes => "base64 string".to_string(),
        Kind::String => "string".to_string(),
        Kind::Bool => "bool".to_string(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// `FlashRead` → `flash_read`: the reference's camelToSnake, which command names on the wire use.
pub fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_demo_command_is_found_with_its_shape() {
        let s = Schema::demo();
        assert_eq!(s.service_name(), "blerpc.Blerpc");
        assert_eq!(
            s.commands(),
            [
                "echo",
                "flash_read",
                "data_write",
                "counter_stream",
                "counter_upload"
            ]
        );
        assert_eq!(s.method("echo").unwrap().kind(), CallKind::Unary);
        assert_eq!(
            s.method("counter_stream").unwrap().kind(),
            CallKind::ServerStream
        );
        assert_eq!(
            s.method("CounterUpload").unwrap().kind(),
            CallKind::ClientStream
        );
        let e = s.method("nope").unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown command `nope`: blerpc.Blerpc has echo, flash_read, data_write, counter_stream, counter_upload"
        );
    }

    #[test]
    fn json_round_trips_through_protobuf_bytes() {
        let s = Schema::demo();
        let echo = s.method("echo").unwrap();
        // field 1, length 2, "hi"
        assert_eq!(
            echo.encode_request(r#"{"message":"hi"}"#).unwrap(),
            b"\x0a\x02hi"
        );
        assert_eq!(
            echo.decode_response(b"\x0a\x02hi").unwrap(),
            r#"{"message":"hi"}"#
        );
        assert_eq!(echo.encode_request("").unwrap(), b"");
        assert_eq!(
            echo.decode_request(b"\x0a\x02hi").unwrap(),
            r#"{"message":"hi"}"#
        );
        assert_eq!(
            echo.encode_response(r#"{"message":"hi"}"#).unwrap(),
            b"\x0a\x02hi"
        );
        let dw = s.method("data_write").unwrap();
        assert_eq!(
            dw.encode_request(r#"{"data":"AAEC"}"#).unwrap(),
            b"\x0a\x03\x00\x01\x02"
        );
        let cs = s.method("counter_stream").unwrap();
        assert_eq!(cs.decode_response(b"").unwrap(), r#"{"seq":0,"value":0}"#);
        // seq 3, value -30 (int32 as a 10-byte varint)
        let item = cs.decode_response(b"\x08\x03\x10\xe2\xff\xff\xff\xff\xff\xff\xff\xff\x01");
        assert_eq!(item.unwrap(), r#"{"seq":3,"value":-30}"#);
        assert_eq!(
            s.method("flash_read").unwrap().request_template(),
            r#"{"address":0,"length":0}"#
        );
        // A truncated varint is not a message.
        let e = cs.decode_response(b"\x08").unwrap_err().to_string();
        assert!(
            e.starts_with("the bytes are not a valid blerpc.CounterStreamResponse"),
            "{e}"
        );
    }

    #[test]
    fn bad_json_is_one_clear_line() {
        let m = Schema::demo().method("flash_read").unwrap();
        let e = m
            .encode_request(r#"{"adress": 1}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("bad JSON for blerpc.FlashReadRequest: unrecognized field name 'adress'"),
            "{e}"
        );
        assert!(
            e.contains("expected an object like {address: uint32, length: uint32}"),
            "{e}"
        );
        // A value out of its field's range names the field.
        let e = m
            .encode_request(r#"{"length": 4, "address": -1}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("bad JSON for blerpc.FlashReadRequest (field `address`): "),
            "{e}"
        );
        let e = m.encode_request("{").unwrap_err().to_string();
        assert!(e.starts_with("bad JSON for blerpc.FlashReadRequest"), "{e}");
        assert!(!e.contains('\n'));
        assert!(m.encode_request(r#"{"length": 1} x"#).is_err());
    }

    #[test]
    fn a_proto_file_compiles_and_names_its_service() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("thermo.proto");
        std::fs::write(
            &path,
            r#"syntax = "proto3";
package thermo;
message Get { }
message Reading { sint32 centi_celsius = 1; }
service Thermostat { rpc ReadTemperature(Get) returns (Reading); }
"#,
        )
        .unwrap();
        let s = Schema::load(&path, None).unwrap();
        assert_eq!(s.service_name(), "thermo.Thermostat");
        let m = s.method("read_temperature").unwrap();
        assert_eq!(m.kind(), CallKind::Unary);
        assert_eq!(
            m.decode_response(&[0x08, 0x03]).unwrap(),
            r#"{"centi_celsius":-2}"#
        );
        let e = Schema::load(&path, Some("thermo.Nope"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "no service thermo.Nope in the schema (it has: thermo.Thermostat)"
        );
        std::fs::write(&path, "syntax = \"proto3\"; message {").unwrap();
        let e = Schema::load(&path, None).unwrap_err().to_string();
        assert!(e.contains("thermo.proto does not compile"), "{e}");
        let e = Schema::load(&dir.path().join("missing.desc"), None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("cannot read the schema"), "{e}");
    }

    #[test]
    fn snake_case_matches_the_reference() {
        assert_eq!(snake_case("Echo"), "echo");
        assert_eq!(snake_case("CounterUpload"), "counter_upload");
    }
}
