// bleRPC central for Kotlin: the blerpc-rs core (Rust) through UniFFI, with coroutines.
//
// A thin idiomatic layer over the generated package `dev.blerpc.ffi` (crates/blerpc-ffi):
// `suspend` calls with a `Duration` deadline, server streams as a cold `Flow<ByteArray>`, an
// upload from a `Flow`, and `code`/`detail` on every `BlerpcException`. No protocol logic:
// every function forwards to the Rust connection, whose task drives the core's call table.
//
// Errors are the generated `dev.blerpc.ffi.BlerpcException` (its subclasses are not reachable
// through a Kotlin typealias, so import it from there): `Setup`, `Call` (with `peerCode`),
// `Connection`, `InvalidArgument`, each with `code` and `detail`.

package dev.blerpc

import dev.blerpc.ffi.BlerpcException
import dev.blerpc.ffi.Completion
import dev.blerpc.ffi.CompletionQueue
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong
import kotlin.coroutines.resume
import kotlin.coroutines.resumeWithException
import kotlin.time.Duration
import kotlinx.coroutines.CancellableContinuation
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.flow
import kotlinx.coroutines.launch
import kotlinx.coroutines.suspendCancellableCoroutine
import kotlinx.coroutines.withContext

/** How to reach and trust a peripheral; every field has a default (pin on first use). */
typealias ConnectOptions = dev.blerpc.ffi.ConnectOptions

/** What setup established. */
typealias ConnectionInfo = dev.blerpc.ffi.ConnectionInfo

/** Whether trust on first use pinned the key now (`FIRST_USE`) or found it (`MATCHED`). */
typealias Pinned = dev.blerpc.ffi.Pinned

/** An open central→peripheral stream: `send`, then `finish` (or `cancel`). */
typealias Upload = dev.blerpc.ffi.Upload

/**
 * An open stream both ways: `send` and `finish` this side's half while `next` reads the
 * peripheral's items (null at its end), from two coroutines at once; `cancel` stops both.
 */
typealias BidiStream = dev.blerpc.ffi.BidiStream

/**
 * Connects to the peripheral at [url] (`tcp://HOST:PORT`, `tls://HOST:PORT`,
 * `ws://HOST:PORT/PATH`, `wss://…`) and runs setup and the key exchange with the identity
 * check [options] ask for (the default pins the key on first use in the default known-keys
 * file and requires encryption). Cancelling the coroutine stops the attempt.
 *
 * @throws BlerpcException `Setup` (e.g. `IDENTITY_REJECTED`), `Connection` (`LINK_FAILED`),
 *   `InvalidArgument` (a bad URL or key).
 */
suspend fun connect(url: String, options: ConnectOptions = ConnectOptions()): Connection =
    Connection(dev.blerpc.ffi.connect(url, options))

/**
 * A connection to one peripheral. Calls may run concurrently: up to four in flight (a fifth
 * at once fails with `TOO_MANY_CALLS`), one stream at a time (`STREAM_ACTIVE`). Cancelling a
 * coroutine mid-call or mid-stream cancels that call in the core; the connection goes on.
 * [close] frees it (and closes it if still open); `use { }` does that at the end of a block.
 */
class Connection internal constructor(private val raw: dev.blerpc.ffi.Connection) : AutoCloseable {
    /**
     * Calls [command] (the rpc's wire name, e.g. `echo`) with the request message's protobuf
     * bytes and returns the response's. With [deadline], the call fails with `TIMEOUT` if no
     * answer came that long from now (without it, the protocol's 5 s call timeout applies).
     */
    suspend fun call(command: String, request: ByteArray, deadline: Duration? = null): ByteArray {
        val ms = deadline?.let(::millis)
        return Completions.call { queue, ticket ->
            if (ms == null) raw.startCall(queue, ticket, command, request)
            else raw.startCallUntil(queue, ticket, command, request, ms)
        }
    }

    /**
     * A peripheral→central stream: a cold flow, each collection sends [request] to [command]
     * and emits the responses' protobuf bytes until the peripheral ends the stream (a
     * peripheral with the streams extension sends only what the collector has room for). A
     * failure (`TIMEOUT`, `PEER_ERROR`, the link lost; `STREAM_OVERFLOW` from a peripheral
     * without the extension) is thrown from `collect`.
     * When collecting stops early (cancelled, `take(n)`, an exception), the stream is
     * cancelled in the core and the peripheral told.
     */
    fun serverStream(command: String, request: ByteArray): Flow<ByteArray> = flow {
        raw.serverStream(command, request).use { stream ->
            try {
                while (true) {
                    emit(stream.next() ?: break)
                }
            } finally {
                // Also when the collector was cancelled: tell the core now, not when the
                // object is freed.
                withContext(NonCancellable) { stream.cancel() }
            }
        }
    }

    /**
     * A central→peripheral stream to [command]: `send` each item's protobuf bytes, then
     * `finish()` for the response (`cancel()` abandons it). [close][Upload.close] it when done:
     * an upload freed unfinished is cancelled.
     */
    suspend fun clientStream(command: String): Upload = raw.clientStream(command)

    /**
     * Uploads every item of [items] to [command] and returns the peripheral's response. If
     * collecting [items] fails or the coroutine is cancelled, the upload is cancelled.
     */
    suspend fun upload(command: String, items: Flow<ByteArray>): ByteArray =
        clientStream(command).use { upload ->
            try {
                items.collect { upload.send(it) }
                upload.finish()
            } catch (e: Throwable) {
                withContext(NonCancellable) { upload.cancel() }
                throw e
            }
        }

    /**
     * A stream both ways to [command] (the streams extension): `send` items and `finish`
     * while `next()` reads the peripheral's. [close][BidiStream.close] it when done: a stream
     * freed before its end is cancelled.
     */
    suspend fun bidiStream(command: String): BidiStream = raw.bidiStream(command)

    /**
     * A stream both ways as a cold flow: each collection opens a stream to [command], sends
     * every item of [items] (then ends this side's half) while emitting the peripheral's items
     * until it ends the call. Items go under both sides' credits: the peripheral waits for
     * the collector, [items] is collected as the peripheral makes room. A failure of either
     * side is thrown from `collect`; when collecting stops early the stream is cancelled and
     * the peripheral told.
     */
    fun bidiStream(command: String, items: Flow<ByteArray>): Flow<ByteArray> = flow {
        raw.bidiStream(command).use { stream ->
            try {
                coroutineScope {
                    launch {
                        items.collect { stream.send(it) }
                        stream.finish()
                    }
                    while (true) {
                        emit(stream.next() ?: break)
                    }
                }
            } finally {
                withContext(NonCancellable) { stream.cancel() }
            }
        }
    }

    /** What setup established: encryption, the peer's identity key, MTU and limits. */
    fun info(): ConnectionInfo = raw.info()

    /**
     * The peripheral's diagnostics (docs/protocol.md "Diagnostics") as JSON: each field its
     * value or `{"unavailable": "why"}`. A peripheral that does not announce the extension is
     * not asked: every field says so.
     */
    suspend fun diagnostics(): String = raw.diagnostics()

    /** `true` once the connection has closed (either side, or the link was lost). */
    fun isClosed(): Boolean = raw.isClosed()

    /** Closes the connection; calls in flight and later ones fail with `CLOSED`. */
    suspend fun disconnect() = raw.disconnect()

    /** Returns once the connection has closed (either side closed it, or the link was lost). */
    suspend fun waitClosed() = raw.waitClosed()

    /** Frees the connection (closing it if open). Later calls throw `IllegalStateException`. */
    override fun close() = raw.close()
}

/**
 * The outcomes of the process's calls: one [CompletionQueue] and one daemon thread blocked in
 * its `wait`, which resumes each call's coroutine. A call crosses into Rust twice (started,
 * then its outcome taken with the others waiting) instead of UniFFI's future polling, whose
 * waker calls into the JVM from the library's thread (JNA attaching it each time); both are
 * measured side by side in docs/benchmarks/bindings.txt.
 */
private object Completions {
    private val queue = CompletionQueue()
    private val waiting = ConcurrentHashMap<ULong, CancellableContinuation<ByteArray>>()
    private val tickets = AtomicLong()

    init {
        Thread({
            while (true) {
                for (done in queue.wait(60_000u)) deliver(done)
            }
        }, "blerpc-completions").apply { isDaemon = true }.start()
    }

    private fun deliver(done: Completion) {
        when (done) {
            is Completion.Response -> waiting.remove(done.ticket)?.resume(done.response)
            is Completion.Failed -> waiting.remove(done.ticket)?.resumeWithException(done.error)
        }
    }

    suspend fun call(start: (CompletionQueue, ULong) -> Unit): ByteArray =
        suspendCancellableCoroutine { cont ->
            val ticket = tickets.getAndIncrement().toULong()
            waiting[ticket] = cont
            // Dropped in the core (its slot and any late answer released); no outcome comes.
            cont.invokeOnCancellation {
                waiting.remove(ticket)
                queue.cancel(ticket)
            }
            try {
                start(queue, ticket)
            } catch (e: Throwable) {
                waiting.remove(ticket)
                cont.resumeWithException(e)
            }
        }
}

/** The core's stable code (`TIMEOUT`, `PEER_ERROR`, `IDENTITY_REJECTED`, …) of any variant. */
val BlerpcException.code: String
    get() = when (this) {
        is BlerpcException.Setup -> code
        is BlerpcException.Call -> code
        is BlerpcException.Connection -> code
        is BlerpcException.InvalidArgument -> code
    }

/** What happened, for people (its wording may change; [code] does not). */
val BlerpcException.detail: String
    get() = when (this) {
        is BlerpcException.Setup -> detail
        is BlerpcException.Call -> detail
        is BlerpcException.Connection -> detail
        is BlerpcException.InvalidArgument -> detail
    }

/** A deadline in whole milliseconds, as the core takes it (0 to 2^32 − 1). */
private fun millis(deadline: Duration): UInt {
    val ms = deadline.inWholeMilliseconds
    require(ms in 0..UInt.MAX_VALUE.toLong()) { "deadline $deadline: must be 0 to ${UInt.MAX_VALUE} ms" }
    return ms.toUInt()
}
