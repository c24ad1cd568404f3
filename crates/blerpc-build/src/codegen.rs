//! Rust text for the client, handler trait and server of each service, written through prost's
//! [`ServiceGenerator`] hook so that it lands in the same module as the message types (and is
//! formatted with them).
//!
//! The generated code names the runtime by absolute paths: `::blerpc::{Client, Error,
//! ResponseStream, BidiStream, BidiSender}`, `::blerpc::server::{Dispatch, CallKind, Status,
//! BoxFuture, BoxStream}`, the `Stream` trait through [`STREAM`], and prost through [`PROST`]
//! (also given to prost-build as its `prost_path`), so a user crate needs no dependency but
//! `blerpc`.

use std::collections::HashMap;
use std::fmt::Write as _;

use prost_build::{Comments, Method, Service, ServiceGenerator};

use crate::model::{Command, Kind, Model, ServiceModel};
use crate::naming::rust_method_ident;

/// The `futures_core::Stream` trait, as the generated code names it.
pub(crate) const STREAM: &str = "::blerpc::__private::futures_core::Stream";
const STATUS: &str = "::blerpc::server::Status";
const ERROR: &str = "::blerpc::Error";
/// The prost crate, as both prost's derives and the generated services name it.
pub(crate) const PROST: &str = "::blerpc::__private::prost";
const MESSAGE: &str = "::blerpc::__private::prost::Message";
/// Messages are decoded from `Bytes` taking over the received `Vec` (no copy): prost then copies
/// a `bytes` field once (from `&[u8]` it would copy it twice, through a temporary `Bytes`).
const BYTES: &str = "::blerpc::__private::prost::bytes::Bytes";
const RESULT: &str = "::core::result::Result";
const SEND: &str = "::core::marker::Send";

/// What a package needs from the once-per-package support code.
#[derive(Debug, Default, Clone, Copy)]
struct Needs {
    response_stream: bool,
    bidi_stream: bool,
    streaming: bool,
    encode_stream: bool,
    failed_stream: bool,
}

/// The prost service generator: looks each service up in the [`Model`] for command names and
/// directions, and takes Rust type paths and comments from prost.
pub(crate) struct Generator {
    services: HashMap<(String, String), ServiceModel>,
    build_client: bool,
    build_server: bool,
    needs: HashMap<String, Needs>,
}

impl Generator {
    pub(crate) fn new(model: &Model, build_client: bool, build_server: bool) -> Self {
        let services = model
            .services
            .iter()
            .map(|s| ((s.package.clone(), s.proto_name.clone()), s.clone()))
            .collect();
        Self {
            services,
            build_client,
            build_server,
            needs: HashMap::new(),
        }
    }
}

impl ServiceGenerator for Generator {
    fn generate(&mut self, service: Service, buf: &mut String) {
        let key = (service.package.clone(), service.proto_name.clone());
        let Some(model) = self.services.get(&key) else {
            return;
        };
        // Model commands are in method order; pair them up by proto name to be safe.
        let methods: Vec<(&Method, &Command)> = service
            .methods
            .iter()
            .filter_map(|m| {
                model
                    .commands
                    .iter()
                    .find(|c| c.method == m.proto_name)
                    .map(|c| (m, c))
            })
            .collect();
        let needs = self.needs.entry(service.package.clone()).or_default();
        let has = |kind| methods.iter().any(|(_, c)| c.kind == kind);
        if self.build_client {
            needs.response_stream |= has(Kind::ServerStream);
            needs.bidi_stream |= has(Kind::BidiStream);
            client(&service, model, &methods, buf);
        }
        if self.build_server {
            // A bidirectional handler reads its items as an upload handler does and returns
            // its stream as a p2c handler does.
            needs.streaming |= has(Kind::ClientStream) || has(Kind::BidiStream);
            needs.encode_stream |= has(Kind::ServerStream) || has(Kind::BidiStream);
            needs.failed_stream = true;
            handler_trait(&service, model, &methods, buf);
            server(&service, model, &methods, buf);
        }
    }

    fn finalize_package(&mut self, package: &str, buf: &mut String) {
        let needs = self.needs.get(package).copied().unwrap_or_default();
        if needs.response_stream {
            buf.push_str(&response_stream());
        }
        if needs.bidi_stream {
            buf.push_str(&bidi_stream());
        }
        if needs.streaming {
            buf.push_str(&streaming());
        }
        if needs.encode_stream {
            buf.push_str(&encode_stream());
        }
        if needs.failed_stream {
            buf.push_str(&failed_stream());
        }
    }
}

/// Width the generated docs are wrapped to (prettyplease leaves doc text alone).
const DOC_WIDTH: usize = 92;

/// `#[doc = "..."]` lines for `text`, each of its lines wrapped at [`DOC_WIDTH`].
fn doc(out: &mut String, text: &str) {
    for line in text.lines() {
        let mut current = String::new();
        for word in line.split_whitespace() {
            if !current.is_empty() && current.len() + 1 + word.len() > DOC_WIDTH {
                let _ = writeln!(out, "#[doc = {:?}]", format!(" {current}"));
                current.clear();
            }
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(word);
        }
        let _ = writeln!(out, "#[doc = {:?}]", format!(" {current}").trim_end());
    }
}

/// The proto comments of an element, then a blank doc line when there were any.
fn proto_doc(out: &mut String, comments: &Comments) {
    let lines: Vec<&String> = comments.leading.iter().chain(&comments.trailing).collect();
    if lines.is_empty() {
        return;
    }
    for line in lines {
        let _ = writeln!(out, "#[doc = {:?}]", line.trim_end());
    }
    out.push_str("#[doc = \"\"]\n");
}

fn full_name(service: &Service) -> String {
    if service.package.is_empty() {
        service.proto_name.clone()
    } else {
        format!("{}.{}", service.package, service.proto_name)
    }
}

fn origin(model: &ServiceModel) -> String {
    if model.synthesized {
        format!(
            "the `XRequest`/`XResponse` message pairs of `{}`",
            model.file
        )
    } else {
        format!("`{}`", model.file)
    }
}

/// The expression encoding the message `value` (an expression borrowing it) into a new `Vec`.
fn encode(value: &str) -> String {
    format!("::blerpc::__private::encode({value})")
}

/// The client's decoding of `bytes` (a received `Vec<u8>`) as `ty`: a `Result` whose error is
/// `blerpc::Error::Decode`.
fn decode_reply(ty: &str, bytes: &str) -> String {
    format!("<{ty} as {MESSAGE}>::decode({BYTES}::from({bytes})).map_err({ERROR}::decode)")
}

/// The server's decoding of `bytes` (a received `Bytes`) as `ty`: a `Result` whose error is
/// the decode-error `Status`.
fn decode_request(ty: &str, bytes: &str) -> String {
    format!("<{ty} as {MESSAGE}>::decode({bytes}).map_err({STATUS}::decode)")
}

fn client(
    service: &Service,
    model: &ServiceModel,
    methods: &[(&Method, &Command)],
    out: &mut String,
) {
    let name = format!("{}Client", service.name);
    proto_doc(out, &service.comments);
    doc(
        out,
        &format!(
            "Typed client for the bleRPC service `{}` (generated from {}).\n\n\
             Each method encodes its request with prost, runs the command on the wrapped \
             `blerpc::Client` and decodes the reply; a reply that does not decode is \
             `blerpc::Error::Decode`. The client is cheap to clone.",
            full_name(service),
            origin(model)
        ),
    );
    let _ = write!(
        out,
        "#[derive(Clone)]
        pub struct {name} {{ inner: ::blerpc::Client }}
        impl ::core::fmt::Debug for {name} {{
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {{
                f.debug_struct({name:?}).finish_non_exhaustive()
            }}
        }}
        impl {name} {{
            #[doc = \" Wraps a connected `blerpc::Client`.\"]
            pub fn new(inner: ::blerpc::Client) -> Self {{ Self {{ inner }} }}
            #[doc = \" The untyped client, for commands outside this service.\"]
            pub fn inner(&self) -> &::blerpc::Client {{ &self.inner }}
            #[doc = \" Unwraps the untyped client.\"]
            pub fn into_inner(self) -> ::blerpc::Client {{ self.inner }}
        "
    );
    for (method, command) in methods {
        let ident = rust_method_ident(&command.name);
        let wire = &command.name;
        let input = &method.input_type;
        let output = &method.output_type;
        let decode = decode_reply(output, "response");
        let encode_item = encode("&item");
        match command.kind {
            Kind::Unary => {
                proto_doc(out, &method.comments);
                doc(out, &format!("Calls the unary command `{wire}`."));
                let _ = write!(
                    out,
                    "pub async fn {ident}(&self, request: {input}) -> {RESULT}<{output}, {ERROR}> {{
                        let response = self.inner.call_message({wire:?}, &request).await?;
                        {decode}
                    }}"
                );
            }
            Kind::ServerStream => {
                proto_doc(out, &method.comments);
                doc(
                    out,
                    &format!(
                        "Starts the peripheral-to-central stream `{wire}`: sends the request and \
                         returns the responses as they arrive.\n\n\
                         The stream ends when the peripheral ends it, and yields an error if the \
                         peripheral answers with one. `ResponseStream::collect_vec` gathers the \
                         whole stream, as the reference clients return it."
                    ),
                );
                let _ = write!(
                    out,
                    "pub async fn {ident}(&self, request: {input}) -> {RESULT}<ResponseStream<{output}>, {ERROR}> {{
                        let stream = self.inner.server_stream_message({wire:?}, &request).await?;
                        ::core::result::Result::Ok(ResponseStream::new(stream))
                    }}"
                );
            }
            Kind::ClientStream => {
                let stream_ident = format!("{}_stream", command.name);
                proto_doc(out, &method.comments);
                doc(
                    out,
                    &format!(
                        "Runs the central-to-peripheral stream `{wire}`: sends every item, ends \
                         the stream, and returns the peripheral's one response.\n\n\
                         Send at least one item: the end-of-upload marker does not name the \
                         command, so a peripheral cannot answer an empty upload. For items \
                         produced asynchronously, use `{stream_ident}`."
                    ),
                );
                let _ = write!(
                    out,
                    "pub async fn {ident}<I>(&self, items: I) -> {RESULT}<{output}, {ERROR}>
                    where I: ::core::iter::IntoIterator<Item = {input}> {{
                        let mut upload = self.inner.client_stream({wire:?}).await?;
                        for item in items {{
                            upload.send({encode_item}).await?;
                        }}
                        let response = upload.finish().await?;
                        {decode}
                    }}"
                );
                proto_doc(out, &method.comments);
                doc(
                    out,
                    &format!(
                        "Runs the central-to-peripheral stream `{wire}` from an asynchronous \
                         source: sends each item as the stream yields it, ends the upload when \
                         the stream ends, and returns the peripheral's one response."
                    ),
                );
                let _ = write!(
                    out,
                    "pub async fn {stream_ident}<S>(&self, items: S) -> {RESULT}<{output}, {ERROR}>
                    where S: {STREAM}<Item = {input}> {{
                        let mut items = ::core::pin::pin!(items);
                        let mut upload = self.inner.client_stream({wire:?}).await?;
                        while let ::core::option::Option::Some(item) =
                            ::core::future::poll_fn(|cx| {STREAM}::poll_next(items.as_mut(), cx)).await
                        {{
                            upload.send({encode_item}).await?;
                        }}
                        let response = upload.finish().await?;
                        {decode}
                    }}"
                );
            }
            Kind::BidiStream => {
                proto_doc(out, &method.comments);
                doc(
                    out,
                    &format!(
                        "Opens the bidirectional stream `{wire}`: `send` requests and read the \
                         responses at once, `finish` when there are no more requests (see \
                         `BidiStream`).\n\n\
                         Needs a peripheral that agreed to the streams extension (a `blerpc` \
                         server does). Dropping the stream cancels the call."
                    ),
                );
                let _ = write!(
                    out,
                    "pub async fn {ident}(&self) -> {RESULT}<BidiStream<{input}, {output}>, {ERROR}> {{
                        let stream = self.inner.bidi_stream({wire:?}).await?;
                        ::core::result::Result::Ok(BidiStream::new(stream))
                    }}"
                );
            }
        }
    }
    out.push_str("}\n");
}

fn handler_trait(
    service: &Service,
    model: &ServiceModel,
    methods: &[(&Method, &Command)],
    out: &mut String,
) {
    let name = &service.name;
    proto_doc(out, &service.comments);
    doc(
        out,
        &format!(
            "Handlers for the bleRPC service `{}` (generated from {}).\n\n\
             Implement it with `async fn` and serve it through [`{name}Server`], which decodes \
             each request, calls the handler and encodes the reply. A handler error goes back to \
             the central as a bleRPC error with the status code.",
            full_name(service),
            origin(model)
        ),
    );
    let _ = writeln!(
        out,
        "pub trait {name}: {SEND} + ::core::marker::Sync + 'static {{"
    );
    for (method, command) in methods {
        let ident = rust_method_ident(&command.name);
        let wire = &command.name;
        let input = &method.input_type;
        let output = &method.output_type;
        proto_doc(out, &method.comments);
        match command.kind {
            Kind::Unary => {
                doc(out, &format!("Handles the unary command `{wire}`."));
                let _ = writeln!(
                    out,
                    "fn {ident}(&self, request: {input}) -> impl ::core::future::Future<Output = {RESULT}<{output}, {STATUS}>> + {SEND};"
                );
            }
            Kind::ServerStream => {
                doc(
                    out,
                    &format!(
                        "Handles the peripheral-to-central stream `{wire}`: returns the stream of \
                         responses. Each `Ok` item is sent to the central; the stream's end ends \
                         the bleRPC stream; an `Err` item is sent as a bleRPC error and ends it.\n\n\
                         The stream is `'static`: move what it needs into it (clone an `Arc` held \
                         by the handler, for instance)."
                    ),
                );
                let _ = writeln!(
                    out,
                    "fn {ident}(&self, request: {input}) -> impl {STREAM}<Item = {RESULT}<{output}, {STATUS}>> + {SEND} + 'static;"
                );
            }
            Kind::ClientStream => {
                doc(
                    out,
                    &format!(
                        "Handles the central-to-peripheral stream `{wire}`: reads the uploaded \
                         items (`Streaming::message`, or as a `Stream`) and returns the one \
                         response, which is sent once the central has ended the stream."
                    ),
                );
                let _ = writeln!(
                    out,
                    "fn {ident}(&self, items: Streaming<{input}>) -> impl ::core::future::Future<Output = {RESULT}<{output}, {STATUS}>> + {SEND};"
                );
            }
            Kind::BidiStream => {
                doc(
                    out,
                    &format!(
                        "Handles the bidirectional stream `{wire}`: reads the central's items \
                         (`Streaming::message`, or as a `Stream`) while the returned stream \
                         answers. Each `Ok` item is sent to the central as it comes; the \
                         stream's end ends the call; an `Err` item is sent as a bleRPC error and \
                         ends it. `items` ends when the central finishes its half, which does not \
                         end the call.\n\n\
                         The stream is `'static`: move `items` into it, with what else it needs \
                         (clone an `Arc` held by the handler, for instance)."
                    ),
                );
                let _ = writeln!(
                    out,
                    "fn {ident}(&self, items: Streaming<{input}>) -> impl {STREAM}<Item = {RESULT}<{output}, {STATUS}>> + {SEND} + 'static;"
                );
            }
        }
    }
    out.push_str("}\n");
}

fn server(
    service: &Service,
    model: &ServiceModel,
    methods: &[(&Method, &Command)],
    out: &mut String,
) {
    let name = &service.name;
    let server = format!("{name}Server");
    let commands: Vec<String> = methods
        .iter()
        .map(|(_, c)| format!("`{}`", c.name))
        .collect();
    doc(
        out,
        &format!(
            "Serves a [`{name}`] implementation: the `blerpc::server::Dispatch` for the bleRPC \
             service `{}` (generated from {}).\n\n\
             Commands: {}. Other names get the unknown-command error; a request that does not \
             decode gets the decode error.",
            full_name(service),
            origin(model),
            commands.join(", ")
        ),
    );
    let _ = write!(
        out,
        "pub struct {server}<T: {name}> {{ handler: ::std::sync::Arc<T> }}
        impl<T: {name}> {server}<T> {{
            #[doc = \" Serves `handler`.\"]
            pub fn new(handler: T) -> Self {{ Self {{ handler: ::std::sync::Arc::new(handler) }} }}
            #[doc = \" Serves a handler that is shared with other code.\"]
            pub fn from_arc(handler: ::std::sync::Arc<T>) -> Self {{ Self {{ handler }} }}
            #[doc = \" The handler.\"]
            pub fn handler(&self) -> &::std::sync::Arc<T> {{ &self.handler }}
        }}
        impl<T: {name}> ::core::clone::Clone for {server}<T> {{
            fn clone(&self) -> Self {{ Self {{ handler: ::std::sync::Arc::clone(&self.handler) }} }}
        }}
        impl<T: {name}> ::core::fmt::Debug for {server}<T> {{
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {{
                f.debug_struct({server:?}).finish_non_exhaustive()
            }}
        }}
        impl<T: {name}> ::blerpc::server::Dispatch for {server}<T> {{
        "
    );

    // kind()
    let arms: String = methods
        .iter()
        .map(|(_, c)| {
            let kind = match c.kind {
                Kind::Unary => "Unary",
                Kind::ServerStream => "ServerStream",
                Kind::ClientStream => "ClientStream",
                Kind::BidiStream => "BidiStream",
            };
            format!(
                "{:?} => ::core::option::Option::Some(::blerpc::server::CallKind::{kind}),\n",
                c.name
            )
        })
        .collect();
    let _ = write!(
        out,
        "fn kind(&self, name: &str) -> ::core::option::Option<::blerpc::server::CallKind> {{
            match name {{ {arms} _ => ::core::option::Option::None }}
        }}\n"
    );

    // The reference answers STREAM_END_C2P of an upload that sent no item (so no request named
    // the command) when the service has exactly one upload command; tell the runtime which.
    let mut uploads = methods.iter().filter(|(_, c)| c.kind == Kind::ClientStream);
    if let (Some((_, only)), None) = (uploads.next(), uploads.next()) {
        let _ = write!(
            out,
            "fn sole_upload(&self) -> ::core::option::Option<&'static str> {{
                ::core::option::Option::Some({wire:?})
            }}\n",
            wire = only.name
        );
    }

    let unknown = format!(
        "::std::boxed::Box::pin(::core::future::ready(::core::result::Result::Err({STATUS}::unknown_command(name))))"
    );
    let encode_response = encode("&response");
    let of = |kind| methods.iter().filter(move |(_, c)| c.kind == kind);

    // unary()
    let arms: Vec<String> = of(Kind::Unary)
        .map(|(m, c)| {
            format!(
                "{wire:?} => {{
                    let handler = ::std::sync::Arc::clone(&self.handler);
                    ::std::boxed::Box::pin(async move {{
                        let request = {decode}?;
                        let response = handler.{ident}(request).await?;
                        ::core::result::Result::Ok({encode_response})
                    }})
                }}\n",
                wire = c.name,
                decode = decode_request(&m.input_type, "request"),
                ident = rust_method_ident(&c.name),
            )
        })
        .collect();
    let (param, body) = if arms.is_empty() {
        ("_request", unknown.clone())
    } else {
        (
            "request",
            format!("match name {{ {} _ => {unknown} }}", arms.concat()),
        )
    };
    let _ = write!(
        out,
        "fn unary(&self, name: &str, {param}: {BYTES})
            -> ::blerpc::server::BoxFuture<{RESULT}<::std::vec::Vec<u8>, {STATUS}>> {{ {body} }}\n"
    );

    // server_stream()
    let arms: Vec<String> = of(Kind::ServerStream)
        .map(|(m, c)| {
            format!(
                "{wire:?} => match {decode} {{
                    ::core::result::Result::Ok(request) => ::std::boxed::Box::pin(BlerpcEncodeStream(
                        ::std::boxed::Box::pin(self.handler.{ident}(request)),
                    )),
                    ::core::result::Result::Err(status) => {{
                        ::std::boxed::Box::pin(BlerpcFailedStream(::core::option::Option::Some(status)))
                    }}
                }},\n",
                wire = c.name,
                decode = decode_request(&m.input_type, "request"),
                ident = rust_method_ident(&c.name),
            )
        })
        .collect();
    let failed_unknown = format!(
        "::std::boxed::Box::pin(BlerpcFailedStream(::core::option::Option::Some({STATUS}::unknown_command(name))))"
    );
    let (param, body) = if arms.is_empty() {
        ("_request", failed_unknown.clone())
    } else {
        (
            "request",
            format!("match name {{ {} _ => {failed_unknown} }}", arms.concat()),
        )
    };
    let _ = write!(
        out,
        "fn server_stream(&self, name: &str, {param}: {BYTES})
            -> ::blerpc::server::BoxStream<{RESULT}<::std::vec::Vec<u8>, {STATUS}>> {{ {body} }}\n"
    );

    // client_stream()
    let arms: Vec<String> = of(Kind::ClientStream)
        .map(|(_, c)| {
            format!(
                "{wire:?} => {{
                    let handler = ::std::sync::Arc::clone(&self.handler);
                    ::std::boxed::Box::pin(async move {{
                        let response = handler.{ident}(Streaming::new(items)).await?;
                        ::core::result::Result::Ok({encode_response})
                    }})
                }}\n",
                wire = c.name,
                ident = rust_method_ident(&c.name),
            )
        })
        .collect();
    let (param, body) = if arms.is_empty() {
        ("_items", unknown.clone())
    } else {
        (
            "items",
            format!("match name {{ {} _ => {unknown} }}", arms.concat()),
        )
    };
    let _ = write!(
        out,
        "fn client_stream(&self, name: &str, {param}: ::blerpc::server::BoxStream<{BYTES}>)
            -> ::blerpc::server::BoxFuture<{RESULT}<::std::vec::Vec<u8>, {STATUS}>> {{ {body} }}\n"
    );

    // bidi_stream(): only with such commands (the trait's default answers the others).
    let arms: Vec<String> = of(Kind::BidiStream)
        .map(|(_, c)| {
            format!(
                "{wire:?} => ::std::boxed::Box::pin(BlerpcEncodeStream(::std::boxed::Box::pin(
                    self.handler.{ident}(Streaming::new(items)),
                ))),\n",
                wire = c.name,
                ident = rust_method_ident(&c.name),
            )
        })
        .collect();
    if !arms.is_empty() {
        let _ = write!(
            out,
            "fn bidi_stream(&self, name: &str, items: ::blerpc::server::BoxStream<{BYTES}>)
                -> ::blerpc::server::BoxStream<{RESULT}<::std::vec::Vec<u8>, {STATUS}>> {{
                match name {{ {} _ => {failed_unknown} }}
            }}\n",
            arms.concat()
        );
    }
    out.push_str("}\n");
}

/// `ResponseStream<T>`: the client's typed view of `blerpc::ResponseStream`.
fn response_stream() -> String {
    let decode = decode_reply("T", "bytes");
    format!(
        r#"#[doc = " The responses of a peripheral-to-central stream, decoded as `T` (generated by blerpc-build)."]
#[doc = ""]
#[doc = " Read it with `message`, gather it with `collect_vec`, or use it as a `Stream` of"]
#[doc = " `Result<T, blerpc::Error>`. A response that does not decode is `blerpc::Error::Decode`."]
pub struct ResponseStream<T> {{
    inner: ::blerpc::ResponseStream,
    _marker: ::core::marker::PhantomData<fn() -> T>,
}}
impl<T> ResponseStream<T> {{
    #[doc = " Wraps the runtime's stream of encoded responses."]
    pub fn new(inner: ::blerpc::ResponseStream) -> Self {{
        Self {{ inner, _marker: ::core::marker::PhantomData }}
    }}
    #[doc = " Unwraps the runtime's stream of encoded responses."]
    pub fn into_inner(self) -> ::blerpc::ResponseStream {{
        self.inner
    }}
}}
impl<T: {MESSAGE} + ::core::default::Default> ResponseStream<T> {{
    #[doc = " The next response, or `Ok(None)` once the peripheral has ended the stream."]
    pub async fn message(&mut self) -> {RESULT}<::core::option::Option<T>, {ERROR}> {{
        match ::core::future::poll_fn(|cx| {STREAM}::poll_next(::core::pin::Pin::new(&mut self.inner), cx)).await {{
            ::core::option::Option::Some(item) => {{
                let bytes = item?;
                {decode}.map(::core::option::Option::Some)
            }}
            ::core::option::Option::None => ::core::result::Result::Ok(::core::option::Option::None),
        }}
    }}
    #[doc = " Reads the stream to its end and returns every response, like the reference clients."]
    pub async fn collect_vec(mut self) -> {RESULT}<::std::vec::Vec<T>, {ERROR}> {{
        let mut items = ::std::vec::Vec::new();
        while let ::core::option::Option::Some(item) = self.message().await? {{
            items.push(item);
        }}
        ::core::result::Result::Ok(items)
    }}
}}
impl<T: {MESSAGE} + ::core::default::Default> {STREAM} for ResponseStream<T> {{
    type Item = {RESULT}<T, {ERROR}>;
    fn poll_next(
        self: ::core::pin::Pin<&mut Self>,
        cx: &mut ::core::task::Context<'_>,
    ) -> ::core::task::Poll<::core::option::Option<Self::Item>> {{
        {STREAM}::poll_next(::core::pin::Pin::new(&mut self.get_mut().inner), cx).map(|item| {{
            item.map(|item| {{
                item.and_then(|bytes| {decode})
            }})
        }})
    }}
    fn size_hint(&self) -> (usize, ::core::option::Option<usize>) {{
        {STREAM}::size_hint(&self.inner)
    }}
}}
impl<T> ::core::fmt::Debug for ResponseStream<T> {{
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {{
        f.debug_struct("ResponseStream").finish_non_exhaustive()
    }}
}}
"#
    )
}

/// `Streaming<T>`: the handler's typed view of an upload.
fn streaming() -> String {
    let decode = decode_request("T", "bytes");
    format!(
        r#"#[doc = " The items of a central-to-peripheral stream, decoded as `T` (generated by blerpc-build)."]
#[doc = ""]
#[doc = " Read it with `message`, or use it as a `Stream` of `Result<T, Status>`. An item that does"]
#[doc = " not decode is a decode-error `Status`, which a handler can return with `?`."]
pub struct Streaming<T> {{
    inner: ::blerpc::server::BoxStream<{BYTES}>,
    _marker: ::core::marker::PhantomData<fn() -> T>,
}}
impl<T> Streaming<T> {{
    #[doc = " Wraps the runtime's stream of encoded items."]
    pub fn new(inner: ::blerpc::server::BoxStream<{BYTES}>) -> Self {{
        Self {{ inner, _marker: ::core::marker::PhantomData }}
    }}
}}
impl<T: {MESSAGE} + ::core::default::Default> Streaming<T> {{
    #[doc = " The next item, or `Ok(None)` once the central has ended the stream."]
    pub async fn message(&mut self) -> {RESULT}<::core::option::Option<T>, {STATUS}> {{
        match ::core::future::poll_fn(|cx| {STREAM}::poll_next(self.inner.as_mut(), cx)).await {{
            ::core::option::Option::Some(bytes) => {decode}.map(::core::option::Option::Some),
            ::core::option::Option::None => ::core::result::Result::Ok(::core::option::Option::None),
        }}
    }}
}}
impl<T: {MESSAGE} + ::core::default::Default> {STREAM} for Streaming<T> {{
    type Item = {RESULT}<T, {STATUS}>;
    fn poll_next(
        self: ::core::pin::Pin<&mut Self>,
        cx: &mut ::core::task::Context<'_>,
    ) -> ::core::task::Poll<::core::option::Option<Self::Item>> {{
        {STREAM}::poll_next(self.get_mut().inner.as_mut(), cx).map(|item| {{
            item.map(|bytes| {decode})
        }})
    }}
    fn size_hint(&self) -> (usize, ::core::option::Option<usize>) {{
        {STREAM}::size_hint(&self.inner)
    }}
}}
impl<T> ::core::fmt::Debug for Streaming<T> {{
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {{
        f.debug_struct("Streaming").finish_non_exhaustive()
    }}
}}
"#
    )
}

/// `BidiStream<I, O>` and `BidiSender<I>`: the client's typed view of `blerpc::BidiStream`.
fn bidi_stream() -> String {
    let encode = encode("&item");
    let decode = decode_reply("O", "bytes");
    format!(
        r#"#[doc = " A bidirectional stream, typed (generated by blerpc-build): sends `I` requests and reads `O`"]
#[doc = " responses at once."]
#[doc = ""]
#[doc = " `send` encodes and sends one request (waiting while the peripheral has granted no room for"]
#[doc = " another), `finish` ends the central's half, `sender` gives a handle that sends from another"]
#[doc = " task. The responses are read with `message` or as a `Stream` of `Result<O, blerpc::Error>`;"]
#[doc = " one that does not decode is `blerpc::Error::Decode`. The stream ends when the peripheral"]
#[doc = " ends the call; dropping it cancels the call."]
pub struct BidiStream<I, O> {{
    inner: ::blerpc::BidiStream,
    _marker: ::core::marker::PhantomData<fn(I) -> O>,
}}
impl<I, O> BidiStream<I, O> {{
    #[doc = " Wraps the runtime's stream of encoded items."]
    pub fn new(inner: ::blerpc::BidiStream) -> Self {{
        Self {{ inner, _marker: ::core::marker::PhantomData }}
    }}
    #[doc = " Unwraps the runtime's stream of encoded items."]
    pub fn into_inner(self) -> ::blerpc::BidiStream {{
        self.inner
    }}
    #[doc = " Ends the central's half (no more requests); the responses keep coming until the"]
    #[doc = " peripheral ends the call."]
    pub async fn finish(&self) -> {RESULT}<(), {ERROR}> {{
        self.inner.finish().await
    }}
    #[doc = " A handle that sends requests from elsewhere (another task) while this one reads."]
    pub fn sender(&self) -> BidiSender<I> {{
        BidiSender::new(self.inner.sender())
    }}
}}
impl<I: {MESSAGE}, O> BidiStream<I, O> {{
    #[doc = " Encodes and sends one request. Waits while the link is congested or the peripheral"]
    #[doc = " has granted no room for another."]
    pub async fn send(&self, item: I) -> {RESULT}<(), {ERROR}> {{
        self.inner.send({encode}).await
    }}
}}
impl<I, O: {MESSAGE} + ::core::default::Default> BidiStream<I, O> {{
    #[doc = " The next response, or `Ok(None)` once the peripheral has ended the call."]
    pub async fn message(&mut self) -> {RESULT}<::core::option::Option<O>, {ERROR}> {{
        ::core::future::poll_fn(|cx| {STREAM}::poll_next(::core::pin::Pin::new(&mut *self), cx))
            .await
            .transpose()
    }}
}}
impl<I, O: {MESSAGE} + ::core::default::Default> {STREAM} for BidiStream<I, O> {{
    type Item = {RESULT}<O, {ERROR}>;
    fn poll_next(
        self: ::core::pin::Pin<&mut Self>,
        cx: &mut ::core::task::Context<'_>,
    ) -> ::core::task::Poll<::core::option::Option<Self::Item>> {{
        {STREAM}::poll_next(::core::pin::Pin::new(&mut self.get_mut().inner), cx).map(|item| {{
            item.map(|item| item.and_then(|bytes| {decode}))
        }})
    }}
}}
impl<I, O> ::core::fmt::Debug for BidiStream<I, O> {{
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {{
        f.debug_struct("BidiStream").finish_non_exhaustive()
    }}
}}
#[doc = " Sends the requests of a `BidiStream` from another task (generated by blerpc-build). Cheap"]
#[doc = " to clone."]
pub struct BidiSender<I> {{
    inner: ::blerpc::BidiSender,
    _marker: ::core::marker::PhantomData<fn(I)>,
}}
impl<I> BidiSender<I> {{
    #[doc = " Wraps the runtime's sender of encoded items."]
    pub fn new(inner: ::blerpc::BidiSender) -> Self {{
        Self {{ inner, _marker: ::core::marker::PhantomData }}
    }}
    #[doc = " Unwraps the runtime's sender of encoded items."]
    pub fn into_inner(self) -> ::blerpc::BidiSender {{
        self.inner
    }}
    #[doc = " As `BidiStream::finish`."]
    pub async fn finish(&self) -> {RESULT}<(), {ERROR}> {{
        self.inner.finish().await
    }}
}}
impl<I: {MESSAGE}> BidiSender<I> {{
    #[doc = " As `BidiStream::send`."]
    pub async fn send(&self, item: I) -> {RESULT}<(), {ERROR}> {{
        self.inner.send({encode}).await
    }}
}}
impl<I> ::core::clone::Clone for BidiSender<I> {{
    fn clone(&self) -> Self {{
        Self::new(self.inner.clone())
    }}
}}
impl<I> ::core::fmt::Debug for BidiSender<I> {{
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {{
        f.debug_struct("BidiSender").finish_non_exhaustive()
    }}
}}
"#
    )
}

/// Encodes each item of a handler's peripheral-to-central or bidirectional stream (private to
/// the module).
fn encode_stream() -> String {
    let encode = encode("&message");
    format!(
        r#"#[doc = " Encodes the items of a peripheral-to-central handler stream (generated by blerpc-build)."]
struct BlerpcEncodeStream<S>(::core::pin::Pin<::std::boxed::Box<S>>);
impl<S, T> {STREAM} for BlerpcEncodeStream<S>
where
    S: {STREAM}<Item = {RESULT}<T, {STATUS}>>,
    T: {MESSAGE},
{{
    type Item = {RESULT}<::std::vec::Vec<u8>, {STATUS}>;
    fn poll_next(
        self: ::core::pin::Pin<&mut Self>,
        cx: &mut ::core::task::Context<'_>,
    ) -> ::core::task::Poll<::core::option::Option<Self::Item>> {{
        {STREAM}::poll_next(self.get_mut().0.as_mut(), cx)
            .map(|item| item.map(|item| item.map(|message| {encode})))
    }}
    fn size_hint(&self) -> (usize, ::core::option::Option<usize>) {{
        {STREAM}::size_hint(&self.0)
    }}
}}
"#
    )
}

/// A peripheral-to-central stream that fails at once (private to the module).
fn failed_stream() -> String {
    format!(
        r#"#[doc = " A peripheral-to-central stream that yields one error and ends (generated by blerpc-build)."]
struct BlerpcFailedStream(::core::option::Option<{STATUS}>);
impl {STREAM} for BlerpcFailedStream {{
    type Item = {RESULT}<::std::vec::Vec<u8>, {STATUS}>;
    fn poll_next(
        self: ::core::pin::Pin<&mut Self>,
        _cx: &mut ::core::task::Context<'_>,
    ) -> ::core::task::Poll<::core::option::Option<Self::Item>> {{
        ::core::task::Poll::Ready(self.get_mut().0.take().map(::core::result::Result::Err))
    }}
}}
"#
    )
}
