//! Protobuf ⇄ JSON for the demo service, from its descriptors ([`blerpc_demo::DESCRIPTOR_SET`])
//! with prost-reflect: a command name (`flash_read`, the wire name: the snake_case of the rpc
//! name) finds the method, its input and output messages; JSON (proto3 JSON mapping) becomes a
//! [`DynamicMessage`] and then bytes, and back.
//!
//! ```
//! use blerpc_cli::schema::Schema;
//!
//! let schema = Schema::demo().unwrap();
//! let m = schema.method("flash_read").unwrap();
//! let bytes = m.encode_request(r#"{"address": 0, "length": 16}"#).unwrap();
//! assert_eq!(bytes, [0x10, 0x10]);
//! assert_eq!(m.decode_response(&[0x08, 0x04]).unwrap(), r#"{"address":4,"data":""}"#);
//! ```

use anyhow::{Context as _, anyhow, bail};
use blerpc::server::CallKind;
use prost_reflect::prost::Message as _;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, MessageDescriptor, MethodDescriptor,
    SerializeOptions, ServiceDescriptor,
};

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
    /// The demo service `blerpc.Blerpc`.
    pub fn demo() -> anyhow::Result<Schema> {
        Schema::from_descriptor_set(blerpc_demo::DESCRIPTOR_SET, "blerpc.Blerpc")
    }

    /// The service `full_name` in an encoded `FileDescriptorSet`.
    pub fn from_descriptor_set(bytes: &[u8], full_name: &str) -> anyhow::Result<Schema> {
        let pool =
            DescriptorPool::decode(bytes).context("the service descriptors do not decode")?;
        let service = pool
            .get_service_by_name(full_name)
            .with_context(|| format!("no service {full_name} in the descriptors"))?;
        Ok(Schema { service })
    }

    /// The wire names of all commands, in declaration order.
    pub fn commands(&self) -> Vec<String> {
        self.service
            .methods()
            .map(|m| snake_case(m.name()))
            .collect()
    }

    /// The method with wire name `command` (`flash_read`; the rpc name `FlashRead` works too).
    pub fn method(&self, command: &str) -> anyhow::Result<Method> {
        self.service
            .methods()
            .find(|m| snake_case(m.name()) == command || m.name() == command)
            .map(|descriptor| Method {
                name: snake_case(descriptor.name()),
                descriptor,
            })
            .ok_or_else(|| {
                anyhow!(
                    "unknown command `{command}`: {} has {}",
                    self.service.full_name(),
                    self.commands().join(", ")
                )
            })
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

    /// Encodes one request (or upload item) given as JSON. Unknown fields are errors.
    pub fn encode_request(&self, json: &str) -> anyhow::Result<Vec<u8>> {
        encode(&self.input(), json)
    }

    /// Decodes one response (or stream item) to one line of JSON (proto field names, default values included).
    pub fn decode_response(&self, bytes: &[u8]) -> anyhow::Result<String> {
        decode(&self.output(), bytes)
    }

    /// Decodes one request (or upload item) to JSON, as [`Method::decode_response`] does for
    /// responses: what a server-side tool (or the fuzz round trip) shows for a request.
    pub fn decode_request(&self, bytes: &[u8]) -> anyhow::Result<String> {
        decode(&self.input(), bytes)
    }

    /// Encodes one response (or stream item) given as JSON, as [`Method::encode_request`]
    /// does for requests.
    pub fn encode_response(&self, json: &str) -> anyhow::Result<Vec<u8>> {
        encode(&self.output(), json)
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

fn encode(desc: &MessageDescriptor, json: &str) -> anyhow::Result<Vec<u8>> {
    let json = json.trim();
    let json = if json.is_empty() { "{}" } else { json };
    let message = parse(desc, json).map_err(|e| {
        let fields: Vec<String> = desc
            .fields()
            .map(|f| format!("{}: {}", f.name(), kind_name(&f.kind())))
            .collect();
        let at = match bad_field(desc, json) {
            Some(field) if !e.to_string().contains(&format!("'{field}'")) => {
                format!(" (field `{field}`)")
            }
            _ => String::new(),
        };
        anyhow!(
            "bad JSON for {}{at}: {e}; expected an object like {{{}}}",
            desc.full_name(),
            fields.join(", ")
        )
    })?;
    Ok(message.encode_to_vec())
}

fn decode(desc: &MessageDescriptor, bytes: &[u8]) -> anyhow::Result<String> {
    let message = DynamicMessage::decode(desc.clone(), bytes)
        .with_context(|| format!("the response is not a valid {}", desc.full_name()))?;
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::new(&mut out);
    message
        .serialize_with_options(
            &mut ser,
            &SerializeOptions::new()
                .skip_default_fields(false)
                .use_proto_field_name(true),
        )
        .context("cannot print the response as JSON")?;
    match String::from_utf8(out) {
        Ok(s) => Ok(s),
        Err(_) => bail!("the JSON printer produced invalid UTF-8"),
    }
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
        let s = Schema::demo().unwrap();
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
        let s = Schema::demo().unwrap();
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
    }

    #[test]
    fn bad_json_is_one_clear_line() {
        let m = Schema::demo().unwrap().method("flash_read").unwrap();
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
    fn snake_case_matches_the_reference() {
        assert_eq!(snake_case("Echo"), "echo");
        assert_eq!(snake_case("CounterUpload"), "counter_upload");
    }
}
