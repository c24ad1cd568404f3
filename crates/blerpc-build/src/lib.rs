//! Code generation for bleRPC services, from a build script, in pure Rust (no `protoc`).
//!
//! `blerpc-build` parses `.proto` files with [`protox`], generates the message types with
//! [`prost_build`], and adds, for each bleRPC service:
//!
//! - `FooClient`: a typed client over `blerpc::Client`, one `async` method per command;
//! - `trait Foo`: the handlers a peripheral implements (with `async fn`);
//! - `FooServer<T: Foo>`: the `blerpc::server::Dispatch` that decodes requests, calls the
//!   handlers and encodes replies;
//! - once per package, when a command needs them: `ResponseStream<T>` (typed p2c responses on
//!   the client), `BidiStream<I, O>` and `BidiSender<I>` (a typed bidirectional stream on the
//!   client) and `Streaming<T>` (typed items from the central in a handler).
//!
//! # Commands
//!
//! Discovery follows the reference generator (`wire.md` §4) so that names and directions match
//! the other bleRPC implementations:
//!
//! - every `rpc` of a `service` block is a command named [`camel_to_snake`]`(method)`
//!   (`FlashRead` → `flash_read`); `returns (stream T)` makes it a peripheral-to-central (p2c)
//!   stream, `(stream T)` on the request a central-to-peripheral (c2p) stream, and both a
//!   bidirectional stream (the streams extension);
//! - a file *without* `service` blocks pairs its messages: `XRequest` + `XResponse` →
//!   command `camel_to_snake(X)`, gathered in a service named after the package
//!   (`package blerpc;` → `Blerpc`, `BlerpcClient`, `BlerpcServer`);
//! - the side file ([`Builder::side_file`], the reference's `streaming.txt`) overrides
//!   directions: `<command> p2c|c2p` per line. An entry for a bidirectional `rpc` narrows it to
//!   that one direction, for every target: the reference's generators read the same file and
//!   know no bidirectional streams, so the entry means the same to them, and a side file that
//!   served one direction before bidirectional streams existed keeps doing so. Commands from
//!   message pairs are never bidirectional (the side file has no spelling for it).
//!
//! # Bidirectional streams
//!
//! For `rpc Chat(stream ChatLine) returns (stream ChatLine)`, the client method
//! `chat(&self)` opens the call and returns a `BidiStream<ChatLine, ChatLine>`: `send` one
//! request, `finish` the central's half, `sender` for a cloneable handle that sends from
//! another task, and the responses as a `Stream` of `Result<ChatLine, blerpc::Error>` (or
//! `message`). The handler reads the requests as an upload handler does and answers as a p2c
//! handler does:
//!
//! ```ignore
//! fn chat(&self, items: Streaming<ChatLine>)
//!     -> impl Stream<Item = Result<ChatLine, Status>> + Send + 'static;
//! ```
//!
//! An item that does not decode is a decode-error `Status` in `items`, which the handler can
//! pass on to end the call. The peripheral must have agreed to the streams extension (a
//! `blerpc` server does). [`Builder::compile_no_alloc`] generates the messages and names the
//! command `codec::CallKind::BidiStream` (`<Service>Command::kind`); a fixed-buffer peripheral
//! serves it on the core's stream events (as the firmware's `chat` does).
//!
//! # Use
//!
//! ```toml
//! [dependencies]
//! blerpc = "0.1"
//!
//! [build-dependencies]
//! blerpc-build = "0.1"
//! ```
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), blerpc_build::Error> {
//!     blerpc_build::configure()
//!         .side_file("proto/streaming.txt")
//!         .compile(&["proto/blerpc.proto"], &["proto"])
//! }
//! ```
//!
//! ```ignore
//! // src/lib.rs
//! pub mod blerpc_demo {
//!     blerpc::include_proto!("blerpc");
//! }
//! ```
//!
//! The generated code reaches prost and `futures_core` through `blerpc::__private`, so the user
//! crate needs no other dependency (`prost-types` only if its files import the
//! `google/protobuf` well-known types).
//!
//! # Large `bytes` fields
//!
//! prost maps `bytes` to `Vec<u8>` by default: a received message's field is then a copy of the
//! request buffer, and a caller builds a new `Vec` for every call. For fields that carry bulk
//! data, ask prost for `bytes::Bytes` through [`Builder::compile_with_config`]
//! (`config.bytes([".pkg.Message.field"])`): the decoded field shares the received buffer and
//! one payload can be sent many times without a copy (the demo service does this for its flash
//! reads and data writes; 64 KiB calls over loopback TCP are measured in
//! `docs/benchmarks/loopback.md`).
//!
//! # Without an allocator
//!
//! [`Builder::compile_no_alloc`] generates, instead of prost's types, messages for `no_std`
//! targets with no allocator (the firmware's demo service): strings and bytes borrowed from the
//! received buffer, encoders that write into a caller's buffer, the codec they need emitted
//! alongside (no runtime crate), and a `<Service>Command` enum of the wire names. The same
//! `.proto`, side file and command discovery as above.
//!
//! Alongside `<package>.rs`, each package with commands gets `<package>_descriptor.bin`: the
//! encoded `FileDescriptorSet` of everything compiled, as bleRPC sees it (services synthesized
//! from message pairs included, streaming flags set from the side file). Tools embed it with
//! `include_bytes!(concat!(env!("OUT_DIR"), "/blerpc_descriptor.bin"))` to convert between
//! protobuf and JSON.

#![warn(missing_docs)]

mod codegen;
mod model;
pub mod naming;
mod no_alloc;
pub mod side_file;

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

use prost::Message as _;

pub use naming::camel_to_snake;
pub use side_file::{Direction, SideFile};

/// Why code generation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// protox could not read, parse or check a `.proto` file.
    #[error("{}{message}", location(.file.as_deref(), *.line, *.column))]
    Proto {
        /// The file, as named relative to its include directory, when known.
        file: Option<String>,
        /// The 1-based line, when known.
        line: Option<usize>,
        /// The 1-based column, when known.
        column: Option<usize>,
        /// What protox reported.
        message: String,
    },
    /// A malformed side-file line.
    #[error("{}:{line}: {message}", .path.display())]
    SideFile {
        /// The side file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A file could not be read or written.
    #[error("{}: {error}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error (part of the message; not also the `source`).
        error: io::Error,
    },
    /// A command name that cannot go on the wire or into Rust.
    #[error("{}command name `{name}` is unusable: {reason}", location(Some(.file), *.line, None))]
    InvalidCommandName {
        /// The `.proto` file.
        file: String,
        /// The 1-based line, when known.
        line: Option<usize>,
        /// The command name.
        name: String,
        /// Why.
        reason: String,
    },
    /// Two methods (or message pairs) of one service map to the same command name.
    #[error(
        "{}`{second}` and `{first}` map to the same command `{command}`",
        location(Some(.file), *.line, None)
    )]
    DuplicateCommand {
        /// The `.proto` file.
        file: String,
        /// The 1-based line of the second one, when known.
        line: Option<usize>,
        /// The shared command name.
        command: String,
        /// The first method.
        first: String,
        /// The second method.
        second: String,
    },
    /// A generated name would clash with another item in the package's module.
    #[error("package `{package}`: `{name}` would be both {first} and {second}")]
    NameCollision {
        /// The proto package.
        package: String,
        /// The clashing Rust name.
        name: String,
        /// What already has it.
        first: String,
        /// What the generator wanted to give it to.
        second: String,
    },
    /// Neither [`Builder::out_dir`] nor the `OUT_DIR` environment variable is set.
    #[error("OUT_DIR is not set: run from a build script, or set Builder::out_dir")]
    NoOutDir,
    /// The no-alloc generator ([`Builder::compile_no_alloc`]) cannot represent a field or a
    /// message without an allocator.
    #[error("{file}: {message}{}: {reason}", if .field.is_empty() { String::new() } else { format!(".{}", .field) })]
    NoAlloc {
        /// The `.proto` file.
        file: String,
        /// The message (empty for a file-level refusal).
        message: String,
        /// The field (empty for a message-level refusal).
        field: String,
        /// What is not supported.
        reason: String,
    },
    /// prost-build failed while writing the generated code.
    #[error("generating Rust code: {0}")]
    Generate(io::Error),
}

fn location(file: Option<&str>, line: Option<usize>, column: Option<usize>) -> String {
    match (file, line, column) {
        (Some(file), Some(line), Some(column)) => format!("{file}:{line}:{column}: "),
        (Some(file), Some(line), None) => format!("{file}:{line}: "),
        (Some(file), None, _) => format!("{file}: "),
        (None, _, _) => String::new(),
    }
}

impl Error {
    fn from_protox(error: protox::Error) -> Self {
        use miette::Diagnostic;
        let position = (|| {
            let source = error.source_code()?;
            let label = error.labels()?.next()?;
            let contents = source.read_span(label.inner(), 0, 0).ok()?;
            Some((contents.line() + 1, contents.column() + 1))
        })();
        Self::Proto {
            file: error.file().map(str::to_owned),
            line: position.map(|p| p.0),
            column: position.map(|p| p.1),
            message: error.to_string(),
        }
    }
}

/// Starts a [`Builder`] with the defaults: client and server, no side file, output to `OUT_DIR`,
/// `cargo:` directives on.
pub fn configure() -> Builder {
    Builder {
        side_file: None,
        out_dir: None,
        file_descriptor_set_path: None,
        build_client: true,
        build_server: true,
        emit_cargo_directives: true,
    }
}

/// Compiles `protos` (searched in `includes`) with the default [`Builder`].
pub fn compile(protos: &[impl AsRef<Path>], includes: &[impl AsRef<Path>]) -> Result<(), Error> {
    configure().compile(protos, includes)
}

/// Generation settings. Made by [`configure`].
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    side_file: Option<PathBuf>,
    out_dir: Option<PathBuf>,
    file_descriptor_set_path: Option<PathBuf>,
    build_client: bool,
    build_server: bool,
    emit_cargo_directives: bool,
}

impl Builder {
    /// Reads stream directions from this side file (the reference's `streaming.txt`). Its
    /// entries take precedence over the `.proto`.
    pub fn side_file(mut self, path: impl AsRef<Path>) -> Self {
        self.side_file = Some(path.as_ref().to_owned());
        self
    }

    /// Writes the generated files here instead of `OUT_DIR`.
    pub fn out_dir(mut self, path: impl AsRef<Path>) -> Self {
        self.out_dir = Some(path.as_ref().to_owned());
        self
    }

    /// Writes the encoded `FileDescriptorSet` to this path instead of
    /// `<out_dir>/<package>_descriptor.bin`.
    pub fn file_descriptor_set_path(mut self, path: impl AsRef<Path>) -> Self {
        self.file_descriptor_set_path = Some(path.as_ref().to_owned());
        self
    }

    /// Whether to generate the `FooClient` types (default: yes).
    pub fn build_client(mut self, yes: bool) -> Self {
        self.build_client = yes;
        self
    }

    /// Whether to generate the handler traits and `FooServer` types (default: yes).
    pub fn build_server(mut self, yes: bool) -> Self {
        self.build_server = yes;
        self
    }

    /// Whether to print `cargo:rerun-if-changed` for every input and `cargo:warning` for
    /// findings such as unused side-file entries (default: yes).
    pub fn emit_cargo_directives(mut self, yes: bool) -> Self {
        self.emit_cargo_directives = yes;
        self
    }

    /// Compiles `protos`, searching imports in `includes`, with prost's default settings.
    pub fn compile(
        self,
        protos: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> Result<(), Error> {
        self.compile_with_config(prost_build::Config::new(), protos, includes)
    }

    /// Like [`compile`](Self::compile), with a prost configuration of your own (for
    /// `bytes`, attributes, extern paths ...). Its service generator, output directory and
    /// `prost_path` (set to `::blerpc::__private::prost`) are replaced.
    pub fn compile_with_config(
        self,
        mut config: prost_build::Config,
        protos: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> Result<(), Error> {
        let out_dir = self.resolve_out_dir()?;
        let (fds, _, model) = self.load(protos, includes)?;
        let fds = model::effective_fds(fds, &model);

        let encoded = fds.encode_to_vec();
        let mut descriptor_paths = Vec::new();
        if let Some(path) = &self.file_descriptor_set_path {
            descriptor_paths.push(path.clone());
        } else {
            let packages: std::collections::BTreeSet<&str> =
                model.services.iter().map(|s| s.package.as_str()).collect();
            for package in packages {
                let stem = if package.is_empty() { "_" } else { package };
                descriptor_paths.push(out_dir.join(format!("{stem}_descriptor.bin")));
            }
        }
        for path in descriptor_paths {
            std::fs::write(&path, &encoded).map_err(|error| Error::Io { path, error })?;
        }

        config.out_dir(&out_dir);
        config.prost_path(codegen::PROST);
        config.service_generator(Box::new(codegen::Generator::new(
            &model,
            self.build_client,
            self.build_server,
        )));
        config.compile_fds(fds).map_err(Error::Generate)
    }

    /// Generates message types for `no_std` targets without an allocator instead of prost's:
    /// one file per package, `<out_dir>/<package>.noalloc.rs`, holding the messages (strings
    /// and bytes borrowed from the decoded buffer; bytes written in place from any
    /// `codec::BytesField` when encoding), a `<Service>Command` enum per service, and their
    /// wire codec as `pub mod codec`. No client or server is generated: a peripheral answers
    /// the core's request events itself.
    ///
    /// ```ignore
    /// // src/lib.rs (no_std)
    /// pub mod pb {
    ///     include!(concat!(env!("OUT_DIR"), "/blerpc.noalloc.rs"));
    /// }
    /// ```
    ///
    /// Repeated, map, message-typed and `oneof` fields are refused ([`Error::NoAlloc`]). Each
    /// command's `kind()` gives its shape (`codec::CallKind`), bidirectional streams included.
    pub fn compile_no_alloc(
        self,
        protos: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> Result<(), Error> {
        let out_dir = self.resolve_out_dir()?;
        let (fds, requested, model) = self.load(protos, includes)?;
        for (name, text) in no_alloc::generate(&fds, &requested, &model)? {
            let path = out_dir.join(name);
            std::fs::write(&path, text).map_err(|error| Error::Io { path, error })?;
        }
        Ok(())
    }

    fn resolve_out_dir(&self) -> Result<PathBuf, Error> {
        match &self.out_dir {
            Some(dir) => Ok(dir.clone()),
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or(Error::NoOutDir),
        }
    }

    /// Parses `protos` and discovers their commands: the descriptors, the names of the files
    /// asked for, and the model (its warnings already printed).
    fn load(
        &self,
        protos: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> Result<
        (
            prost_types::FileDescriptorSet,
            HashSet<String>,
            model::Model,
        ),
        Error,
    > {
        let mut compiler = protox::Compiler::new(includes).map_err(Error::from_protox)?;
        compiler.include_source_info(true).include_imports(true);
        compiler.open_files(protos).map_err(Error::from_protox)?;
        let requested: HashSet<String> = compiler
            .files()
            .filter(|file| !file.is_import())
            .map(|file| file.name().to_owned())
            .collect();
        if self.emit_cargo_directives {
            for file in compiler.files() {
                if let Some(path) = file.path() {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
            }
            if let Some(path) = &self.side_file {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
        let fds = compiler.file_descriptor_set();

        let side = match &self.side_file {
            Some(path) => SideFile::read(path)?,
            None => SideFile::default(),
        };
        let model = model::discover(&fds, &requested, &side)?;
        model::check_names(&fds, &model, self.build_client, self.build_server)?;
        if self.emit_cargo_directives {
            for warning in &model.warnings {
                println!("cargo:warning={warning}");
            }
        }
        Ok((fds, requested, model))
    }
}
