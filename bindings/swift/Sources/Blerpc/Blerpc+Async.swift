// The hand-written Swift layer over the code UniFFI generates from blerpc-ffi (Blerpc.swift,
// same module): Swift concurrency's cancellation, server streams as AsyncThrowingStream, an
// upload type, a stream both ways, and the error's code and detail.
//
// Why the cancellation handlers: the generated async functions await the Rust future in
// `withUnsafeContinuation`, which ignores Task cancellation, so a cancelled Task would keep
// waiting for the peripheral. Each operation here calls its `…Cancellable` variant with a
// CancelToken and cancels the token from `withTaskCancellationHandler`: the Rust side then ends the operation at once and cancels the
// call in the core (the connection stays usable), and the Swift side throws
// `CancellationError`.
//
// Not compiled where this repository is tested (no Swift compiler there): the names it uses
// from the generated code are checked by tools/bindings/swift.sh, which fails if one is gone.

import Foundation

/// Runs `operation` (which gave `token` to the Rust side), cancelling `token` if the current
/// Task is cancelled meanwhile. An operation the token cancelled throws `CancellationError`,
/// as Swift code expects.
func cancelling<T>(_ token: CancelToken, _ operation: () async throws -> T) async throws -> T {
    do {
        return try await withTaskCancellationHandler {
            try await operation()
        } onCancel: {
            token.cancel()
        }
    } catch let error as BlerpcError where error.code == "CANCELLED" && token.isCancelled() {
        throw CancellationError()
    }
}

/// The milliseconds of a deadline, as the Rust side takes them (at most 2^32 - 1).
func milliseconds(_ deadline: Duration?) throws -> UInt32? {
    guard let deadline else { return nil }
    let (seconds, attoseconds) = deadline.components
    let ms = seconds * 1000 + attoseconds / 1_000_000_000_000_000
    guard let value = UInt32(exactly: ms) else {
        throw BlerpcError.InvalidArgument(
            code: "INVALID_ARGUMENT", detail: "a deadline must be 0 to 4294967295 ms, not \(ms)")
    }
    return value
}

/// Connects to the peripheral at `url` (`tcp://HOST:PORT`, `ws://…`, `tls://…`, `wss://…`),
/// runs setup and the key exchange with the identity check `options` ask for (pinned on first
/// use by default). Cancelling the Task stops the attempt.
public func connect(_ url: String, options: ConnectOptions) async throws -> Connection {
    let token = CancelToken()
    return try await cancelling(token) {
        try await connectCancellable(url: url, options: options, cancel: token)
    }
}

extension Connection {
    /// A unary call: sends `request` (the request message's protobuf bytes) to `command` (the
    /// rpc's wire name) and returns the response's bytes. With `deadline`, the call fails with
    /// `TIMEOUT` if no answer came in time. Cancelling the Task cancels the call (it throws
    /// `CancellationError`); the connection stays usable.
    public func call(_ command: String, _ request: Data, deadline: Duration? = nil) async throws -> Data {
        let deadlineMs = try milliseconds(deadline)
        let token = CancelToken()
        return try await cancelling(token) {
            try await callCancellable(command: command, request: request, deadlineMs: deadlineMs, cancel: token)
        }
    }

    /// A peripheral→central stream: `for try await item in conn.serverStream(...)`. The call
    /// starts on the first iteration; items are pulled one at a time (the core's stream
    /// backlog bounds what waits: a peripheral with the streams extension sends only what it
    /// has room for, one without fails a reader too slow with `STREAM_OVERFLOW`). Cancelling
    /// the iterating Task, or dropping the stream, cancels it in the core and tells the
    /// peripheral.
    public func serverStream(_ command: String, _ request: Data) -> AsyncThrowingStream<Data, Error> {
        let puller = StreamPuller(connection: self, command: command, request: request)
        return AsyncThrowingStream(unfolding: { try await puller.pull() })
    }

    /// A central→peripheral stream: `send` each item, then `finish` for the response.
    public func clientStream(_ command: String) async throws -> ClientStream {
        let token = CancelToken()
        let raw = try await cancelling(token) {
            try await clientStreamCancellable(command: command, cancel: token)
        }
        return ClientStream(raw: raw, token: token)
    }

    /// A stream both ways (the streams extension): `send` and `finish` from one Task while
    /// another reads the peripheral's items with `for try await item in stream.items`.
    /// Cancelling a Task in any of them, `cancel()`, or freeing the stream cancels it both ways
    /// (the peripheral is told).
    public func bidiStream(_ command: String) async throws -> BidirectionalStream {
        let token = CancelToken()
        let raw = try await cancelling(token) {
            try await bidiStreamCancellable(command: command, cancel: token)
        }
        return BidirectionalStream(raw: raw, token: token)
    }

    /// Uploads every item of `items` to `command` and returns the peripheral's response. If
    /// `items` throws or the Task is cancelled, the upload is cancelled.
    public func upload<Items: AsyncSequence>(_ command: String, _ items: Items) async throws -> Data
    where Items.Element == Data {
        let upload = try await clientStream(command)
        do {
            for try await item in items {
                try await upload.send(item)
            }
            return try await upload.finish()
        } catch {
            upload.cancel()
            throw error
        }
    }
}

/// The state behind one server stream's AsyncThrowingStream: the stream is opened on the
/// first pull. `AsyncThrowingStream(unfolding:)` never runs two pulls at once, and the
/// mutable state is only touched by a pull, hence `@unchecked Sendable`.
final class StreamPuller: @unchecked Sendable {
    private let connection: Connection
    private let command: String
    private let request: Data
    /// Kept by the Rust stream: cancelling it cancels the stream for good.
    private let token = CancelToken()
    private var stream: ResponseStream?

    init(connection: Connection, command: String, request: Data) {
        self.connection = connection
        self.command = command
        self.request = request
    }

    deinit {
        // The iterator is gone before the stream ended: cancel it now (freeing the Rust
        // stream would too).
        token.cancel()
    }

    /// The next item, or `nil` once the peripheral ended the stream.
    func pull() async throws -> Data? {
        let token = self.token
        return try await cancelling(token) {
            if stream == nil {
                stream = try await connection.serverStreamCancellable(command: command, request: request, cancel: token)
            }
            guard let stream else { return nil }
            let item = try await stream.next()
            // A cancelled stream ends: to Swift that is the Task's cancellation, not the end.
            if item == nil && token.isCancelled() {
                throw CancellationError()
            }
            return item
        }
    }
}

/// An open central→peripheral stream (from `Connection.clientStream`): `send` its items,
/// then `finish` for the peripheral's response, or `cancel`. Cancelling a Task in `send` or
/// `finish` cancels the whole upload (it throws `CancellationError`). Freeing an unfinished
/// upload cancels it.
public final class ClientStream: @unchecked Sendable {
    private let raw: Upload
    private let token: CancelToken

    init(raw: Upload, token: CancelToken) {
        self.raw = raw
        self.token = token
    }

    deinit {
        token.cancel()
    }

    /// Sends one item (its protobuf bytes); waits while the link is congested.
    public func send(_ item: Data) async throws {
        try await cancelling(token) { try await self.raw.send(item: item) }
    }

    /// Ends the stream and returns the peripheral's response (its protobuf bytes).
    public func finish() async throws -> Data {
        try await cancelling(token) { try await self.raw.finish() }
    }

    /// Abandons the upload: the call is cancelled in the core and the peripheral told; a
    /// `send` or `finish` in progress throws. Never blocks.
    public func cancel() {
        token.cancel()
        let raw = self.raw
        Task { await raw.cancel() }
    }
}

/// An open stream both ways (from `Connection.bidiStream`): `send` items and `finish` this
/// side's half while `items` yields the peripheral's until it ends the call. Each side waits for
/// the other's credits: `send` while the peripheral has no room, the peripheral while `items`
/// is not read. Freeing the stream before its end cancels it.
public final class BidirectionalStream: @unchecked Sendable {
    private let raw: BidiStream
    private let token: CancelToken

    init(raw: BidiStream, token: CancelToken) {
        self.raw = raw
        self.token = token
    }

    deinit {
        token.cancel()
    }

    /// Sends one item (its protobuf bytes).
    public func send(_ item: Data) async throws {
        try await cancelling(token) { try await self.raw.send(item: item) }
    }

    /// Ends this side's half; the peripheral's items keep coming until it ends the call.
    public func finish() async throws {
        try await cancelling(token) { try await self.raw.finish() }
    }

    /// The peripheral's items, pulled one at a time, until it ends the call.
    public var items: AsyncThrowingStream<Data, Error> {
        let raw = self.raw
        let token = self.token
        return AsyncThrowingStream(unfolding: {
            try await cancelling(token) {
                let item = try await raw.next()
                // A cancelled stream ends: to Swift that is the Task's cancellation.
                if item == nil && token.isCancelled() {
                    throw CancellationError()
                }
                return item
            }
        })
    }

    /// Stops the stream both ways: the call is cancelled in the core and the peripheral told.
    /// Never blocks.
    public func cancel() {
        token.cancel()
        let raw = self.raw
        Task { await raw.cancel() }
    }
}

extension BlerpcError {
    /// The core's stable code (`TIMEOUT`, `PEER_ERROR`, `IDENTITY_REJECTED`, `CANCELLED`, …).
    public var code: String {
        switch self {
        case let .Setup(code, _): return code
        case let .Call(code, _, _): return code
        case let .Connection(code, _): return code
        case let .InvalidArgument(code, _): return code
        }
    }

    /// What happened, for people (its wording may change; the code does not).
    public var detail: String {
        switch self {
        case let .Setup(_, detail): return detail
        case let .Call(_, detail, _): return detail
        case let .Connection(_, detail): return detail
        case let .InvalidArgument(_, detail): return detail
        }
    }
}
