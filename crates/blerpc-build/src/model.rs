//! Command discovery: which commands a `.proto` defines, their wire names and directions.
//!
//! The rules are the reference generator's (`wire.md` §4), plus bidirectional streams:
//! - a file with `service` blocks: every `rpc` is a command named `camel_to_snake(method)`;
//!   `stream` on the response makes it p2c, on the request c2p, on both a bidirectional stream
//!   (the streams extension, which the reference does not have: the host generator serves it,
//!   the no-alloc generator refuses it);
//! - a file without `service` blocks (only the files passed to `compile`, not their imports):
//!   every top-level `XRequest` message with a matching `XResponse` is a command
//!   `camel_to_snake(X)`, gathered into one service named after the package;
//! - a side-file entry overrides the direction in both cases. For a bidirectional `rpc` it
//!   narrows the command to that one direction on every target: the side file is the
//!   reference's, whose generators know no bidirectional streams, so an entry means there what
//!   it means here, and a side file written to serve one direction keeps doing so.

use std::collections::{BTreeSet, HashMap, HashSet};

use heck::ToUpperCamelCase;
use prost_types::source_code_info::Location;
use prost_types::{
    FileDescriptorProto, FileDescriptorSet, MethodDescriptorProto, ServiceDescriptorProto,
};

use crate::Error;
use crate::naming::{camel_to_snake, is_identifier, rust_method_ident};
use crate::side_file::{Direction, SideFile};

/// Longest command name the Zephyr reference firmware answers (`wire.md` §1.4).
pub(crate) const FIRMWARE_NAME_LIMIT: usize = 16;

/// The call shape of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Unary,
    /// p2c
    ServerStream,
    /// c2p
    ClientStream,
    /// Both directions at once (the streams extension): `(stream A) returns (stream B)` with no
    /// side-file entry.
    BidiStream,
}

impl Kind {
    fn from_direction(direction: Direction) -> Self {
        match direction {
            Direction::PeripheralToCentral => Self::ServerStream,
            Direction::CentralToPeripheral => Self::ClientStream,
        }
    }
}

/// One command of a service.
#[derive(Debug, Clone)]
pub(crate) struct Command {
    /// The proto method name (`FlashRead`), or `X` of an `XRequest`/`XResponse` pair.
    pub(crate) method: String,
    /// The wire name (`flash_read`).
    pub(crate) name: String,
    pub(crate) kind: Kind,
}

/// One service to generate.
#[derive(Debug, Clone)]
pub(crate) struct ServiceModel {
    pub(crate) package: String,
    /// The proto service name; for a synthesized service, the package-derived name.
    pub(crate) proto_name: String,
    /// The `.proto` file it comes from.
    pub(crate) file: String,
    /// True when built from `XRequest`/`XResponse` pairs rather than a `service` block.
    pub(crate) synthesized: bool,
    pub(crate) commands: Vec<Command>,
}

/// Everything discovered in a file descriptor set.
#[derive(Debug, Clone, Default)]
pub(crate) struct Model {
    pub(crate) services: Vec<ServiceModel>,
    /// Non-fatal findings, reported as `cargo:warning`.
    pub(crate) warnings: Vec<String>,
}

/// The 1-based line of a descriptor element, from the source info protox records.
fn line_of(file: &FileDescriptorProto, path: &[i32]) -> Option<usize> {
    let info = file.source_code_info.as_ref()?;
    let location = info.location.iter().find(|l| l.path == path)?;
    let line = *location.span.first()?;
    usize::try_from(line).ok().map(|l| l + 1)
}

fn index_i32(index: usize) -> i32 {
    i32::try_from(index).unwrap_or(i32::MAX)
}

/// Discovers the commands of every file in `fds`. `requested` holds the names of the files
/// passed to `compile` (message pairing applies only to them).
pub(crate) fn discover(
    fds: &FileDescriptorSet,
    requested: &HashSet<String>,
    side: &SideFile,
) -> Result<Model, Error> {
    let mut model = Model::default();
    let mut used = BTreeSet::new();

    for file in &fds.file {
        let file_name = file.name().to_owned();
        if !file.service.is_empty() {
            for (s, service) in file.service.iter().enumerate() {
                let mut commands = Vec::new();
                for (m, method) in service.method.iter().enumerate() {
                    let line = line_of(file, &[6, index_i32(s), 2, index_i32(m)]);
                    let name = camel_to_snake(method.name());
                    let kind = match side.get(&name) {
                        Some(entry) => {
                            used.insert(name.clone());
                            Kind::from_direction(entry.direction)
                        }
                        None => match (method.client_streaming(), method.server_streaming()) {
                            (false, false) => Kind::Unary,
                            (false, true) => Kind::ServerStream,
                            (true, false) => Kind::ClientStream,
                            (true, true) => Kind::BidiStream,
                        },
                    };
                    check_command(&file_name, line, &commands, method.name(), &name)?;
                    commands.push(Command {
                        method: method.name().to_owned(),
                        name,
                        kind,
                    });
                }
                model.services.push(ServiceModel {
                    package: file.package().to_owned(),
                    proto_name: service.name().to_owned(),
                    file: file_name.clone(),
                    synthesized: false,
                    commands,
                });
            }
        } else if requested.contains(&file_name) {
            let messages: HashSet<&str> = file.message_type.iter().map(|m| m.name()).collect();
            let service_name = synthesized_service_name(file);
            let mut commands = Vec::new();
            for (i, message) in file.message_type.iter().enumerate() {
                let Some(stem) = message.name().strip_suffix("Request") else {
                    continue;
                };
                if stem.is_empty() || !messages.contains(format!("{stem}Response").as_str()) {
                    continue;
                }
                let line = line_of(file, &[4, index_i32(i)]);
                let name = camel_to_snake(stem);
                let kind = match side.get(&name) {
                    Some(entry) => {
                        used.insert(name.clone());
                        Kind::from_direction(entry.direction)
                    }
                    None => Kind::Unary,
                };
                check_command(&file_name, line, &commands, stem, &name)?;
                commands.push(Command {
                    method: stem.to_owned(),
                    name,
                    kind,
                });
            }
            if !commands.is_empty() {
                model.services.push(ServiceModel {
                    package: file.package().to_owned(),
                    proto_name: service_name,
                    file: file_name,
                    synthesized: true,
                    commands,
                });
            }
        }
    }

    for (name, entry) in side.entries() {
        if !used.contains(name) {
            model.warnings.push(format!(
                "side file line {}: `{name} {}` matches no command",
                entry.line,
                entry.direction.as_str()
            ));
        }
    }
    for service in &model.services {
        for command in &service.commands {
            if command.name.len() > FIRMWARE_NAME_LIMIT {
                model.warnings.push(format!(
                    "command `{}` ({}.{}) is {} bytes long: the reference Zephyr firmware drops \
                     replies to names over {FIRMWARE_NAME_LIMIT} bytes",
                    command.name,
                    service.proto_name,
                    command.method,
                    command.name.len()
                ));
            }
        }
    }
    Ok(model)
}

/// The service name for a file without `service` blocks: the last package segment, or the file
/// stem without a package, in UpperCamelCase (`blerpc` → `Blerpc`).
fn synthesized_service_name(file: &FileDescriptorProto) -> String {
    let base = match file.package().rsplit('.').next() {
        Some(segment) if !segment.is_empty() => segment.to_owned(),
        _ => {
            let name = file.name();
            let file_part = name.rsplit('/').next().unwrap_or(name);
            file_part
                .strip_suffix(".proto")
                .unwrap_or(file_part)
                .to_owned()
        }
    };
    base.to_upper_camel_case()
}

fn check_command(
    file: &str,
    line: Option<usize>,
    earlier: &[Command],
    method: &str,
    name: &str,
) -> Result<(), Error> {
    let reason = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > 255 {
        Some("it is longer than 255 bytes (the wire's name_len is one byte)")
    } else if !is_identifier(name) {
        Some("it is not a Rust identifier")
    } else {
        None
    };
    if let Some(reason) = reason {
        return Err(Error::InvalidCommandName {
            file: file.to_owned(),
            line,
            name: name.to_owned(),
            reason: reason.to_owned(),
        });
    }
    if let Some(first) = earlier.iter().find(|c| c.name == name) {
        return Err(Error::DuplicateCommand {
            file: file.to_owned(),
            line,
            command: name.to_owned(),
            first: first.method.clone(),
            second: method.to_owned(),
        });
    }
    Ok(())
}

/// What the generator will put at package level, to check against prost's own names.
pub(crate) fn check_names(
    fds: &FileDescriptorSet,
    model: &Model,
    build_client: bool,
    build_server: bool,
) -> Result<(), Error> {
    let mut packages: HashMap<&str, Vec<&ServiceModel>> = HashMap::new();
    for service in &model.services {
        packages
            .entry(service.package.as_str())
            .or_default()
            .push(service);
    }
    for (package, services) in packages {
        // prost's names in this package: top-level messages and enums.
        let mut taken: HashMap<String, String> = HashMap::new();
        for file in fds.file.iter().filter(|f| f.package() == package) {
            for message in &file.message_type {
                taken.insert(
                    message.name().to_upper_camel_case(),
                    format!("message {}", message.name()),
                );
            }
            for enumeration in &file.enum_type {
                taken.insert(
                    enumeration.name().to_upper_camel_case(),
                    format!("enum {}", enumeration.name()),
                );
            }
        }
        let mut claim = |name: String, what: String| -> Result<(), Error> {
            if let Some(other) = taken.get(&name) {
                return Err(Error::NameCollision {
                    package: package.to_owned(),
                    name,
                    first: other.clone(),
                    second: what,
                });
            }
            taken.insert(name, what);
            Ok(())
        };
        let has = |kinds: &[Kind]| {
            services
                .iter()
                .any(|s| s.commands.iter().any(|c| kinds.contains(&c.kind)))
        };
        for service in &services {
            let rust = service.proto_name.to_upper_camel_case();
            let what = format!("service {}", service.proto_name);
            if build_client {
                claim(format!("{rust}Client"), format!("the client of {what}"))?;
                check_client_methods(service)?;
            }
            if build_server {
                claim(rust.clone(), format!("the handler trait of {what}"))?;
                claim(format!("{rust}Server"), format!("the server of {what}"))?;
            }
        }
        if build_client && has(&[Kind::ServerStream]) {
            claim(
                "ResponseStream".to_owned(),
                "the generated ResponseStream<T>".to_owned(),
            )?;
        }
        if build_client && has(&[Kind::BidiStream]) {
            claim(
                "BidiStream".to_owned(),
                "the generated BidiStream<I, O>".to_owned(),
            )?;
            claim(
                "BidiSender".to_owned(),
                "the generated BidiSender<I>".to_owned(),
            )?;
        }
        if build_server && has(&[Kind::ClientStream, Kind::BidiStream]) {
            claim(
                "Streaming".to_owned(),
                "the generated Streaming<T>".to_owned(),
            )?;
        }
        if build_server && has(&[Kind::ServerStream, Kind::BidiStream]) {
            claim(
                "BlerpcEncodeStream".to_owned(),
                "a generated helper".to_owned(),
            )?;
        }
        if build_server {
            claim(
                "BlerpcFailedStream".to_owned(),
                "a generated helper".to_owned(),
            )?;
        }
    }
    Ok(())
}

/// Client method names: one per command, plus `<name>_stream` for c2p, plus the constructors.
fn check_client_methods(service: &ServiceModel) -> Result<(), Error> {
    let mut seen: HashMap<String, String> = ["new", "inner", "into_inner"]
        .iter()
        .map(|m| ((*m).to_owned(), "a constructor/accessor".to_owned()))
        .collect();
    for command in &service.commands {
        let mut names = vec![rust_method_ident(&command.name)];
        if command.kind == Kind::ClientStream {
            names.push(format!("{}_stream", command.name));
        }
        for name in names {
            let what = format!("command `{}`", command.name);
            if let Some(other) = seen.insert(name.clone(), what.clone()) {
                return Err(Error::NameCollision {
                    package: service.package.clone(),
                    name: format!("{}Client::{name}", service.proto_name.to_upper_camel_case()),
                    first: other,
                    second: what,
                });
            }
        }
    }
    Ok(())
}

/// The descriptor set as bleRPC sees it: synthesized services added, and every method's
/// `client_streaming`/`server_streaming` set to its effective direction.
pub(crate) fn effective_fds(mut fds: FileDescriptorSet, model: &Model) -> FileDescriptorSet {
    for service in &model.services {
        let Some(file) = fds.file.iter_mut().find(|f| f.name() == service.file) else {
            continue;
        };
        let flags = |kind: Kind| {
            (
                matches!(kind, Kind::ClientStream | Kind::BidiStream),
                matches!(kind, Kind::ServerStream | Kind::BidiStream),
            )
        };
        if service.synthesized {
            let prefix = if service.package.is_empty() {
                String::from(".")
            } else {
                format!(".{}.", service.package)
            };
            let method = service
                .commands
                .iter()
                .map(|c| {
                    let (client, server) = flags(c.kind);
                    MethodDescriptorProto {
                        name: Some(c.method.clone()),
                        input_type: Some(format!("{prefix}{}Request", c.method)),
                        output_type: Some(format!("{prefix}{}Response", c.method)),
                        client_streaming: Some(client),
                        server_streaming: Some(server),
                        ..Default::default()
                    }
                })
                .collect();
            // prost-build looks up a source location for every service and method when the
            // file has source info; give the synthesized ones empty spans (no comments).
            let index = index_i32(file.service.len());
            if let Some(info) = file.source_code_info.as_mut() {
                let location = |path: Vec<i32>| Location {
                    path,
                    span: vec![0, 0, 0],
                    ..Default::default()
                };
                info.location.push(location(vec![6, index]));
                for m in 0..service.commands.len() {
                    info.location
                        .push(location(vec![6, index, 2, index_i32(m)]));
                }
            }
            file.service.push(ServiceDescriptorProto {
                name: Some(service.proto_name.clone()),
                method,
                ..Default::default()
            });
        } else if let Some(proto) = file
            .service
            .iter_mut()
            .find(|s| s.name() == service.proto_name)
        {
            for (method, command) in proto.method.iter_mut().zip(&service.commands) {
                let (client, server) = flags(command.kind);
                method.client_streaming = Some(client);
                method.server_streaming = Some(server);
            }
        }
    }
    fds
}
