// The Kotlin side of tools/bindings/bench.sh: echo calls through the `dev.blerpc` layer
// (wall time per call, median and 90th percentile: UniFFI's `suspend` method), the same calls
// through a completion queue (what the Python layer uses; measured here, not used by the
// Kotlin layer: its waiting thread is one thread hop more per call), and the two floors under
// them: an await of a Rust future that is ready at once (`next()` of an ended stream) and a
// synchronous FFI call (`isClosed()`). One JSON line per row.
//
//   java ... dev.blerpc.bench.BenchKt URL KEY CALLS WARMUP

package dev.blerpc.bench

import dev.blerpc.ConnectOptions
import dev.blerpc.connect
import dev.blerpc.ffi.Completion
import dev.blerpc.ffi.CompletionQueue
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong
import kotlin.coroutines.resume
import kotlin.coroutines.resumeWithException
import kotlinx.coroutines.CancellableContinuation
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.suspendCancellableCoroutine

/** EchoRequest { message: "hello" }; the response is the same bytes. */
val ECHO = byteArrayOf(0x0a, 0x05) + "hello".toByteArray()

/** Calls through a [CompletionQueue] drained by one daemon thread blocked in `wait`. */
object Completions {
    private val queue = CompletionQueue()
    private val waiting = ConcurrentHashMap<ULong, CancellableContinuation<ByteArray>>()
    private val tickets = AtomicLong()

    init {
        Thread({
            while (true) {
                for (done in queue.wait(60_000u)) {
                    when (done) {
                        is Completion.Response -> waiting.remove(done.ticket)?.resume(done.response)
                        is Completion.Failed -> waiting.remove(done.ticket)?.resumeWithException(done.error)
                    }
                }
            }
        }, "blerpc-completions").apply { isDaemon = true }.start()
    }

    suspend fun call(raw: dev.blerpc.ffi.Connection, command: String, request: ByteArray): ByteArray =
        suspendCancellableCoroutine { cont ->
            val ticket = tickets.getAndIncrement().toULong()
            waiting[ticket] = cont
            raw.startCall(queue, ticket, command, request)
        }
}

fun row(name: String, times: LongArray) {
    times.sort()
    fun at(q: Double) = times[Math.round((times.size - 1) * q).toInt()] / 1000.0
    println(
        "{\"row\": \"$name\", \"p50_us\": ${"%.2f".format(at(0.5))}, " +
            "\"p90_us\": ${"%.2f".format(at(0.9))}, \"calls\": ${times.size}}",
    )
}

suspend fun timed(calls: Int, warmup: Int, op: suspend () -> Unit): LongArray {
    repeat(warmup) { op() }
    val times = LongArray(calls)
    for (i in 0 until calls) {
        val t = System.nanoTime()
        op()
        times[i] = System.nanoTime() - t
    }
    return times
}

fun main(args: Array<String>) = runBlocking {
    val (url, key) = args
    val calls = args[2].toInt()
    val warmup = args[3].toInt()
    val options = ConnectOptions(trustKey = key)
    connect(url, options).use { conn ->
        row(
            "kotlin, suspend call",
            timed(calls, warmup) { check(conn.call("echo", ECHO).contentEquals(ECHO)) { "echo answered something else" } },
        )
    }
    // The generated API, for the floors.
    dev.blerpc.ffi.connect(url, options).use { raw ->
        val ended = raw.serverStream("counter_stream", ByteArray(0))
        ended.cancel()
        row(
            "kotlin, completion queue (not used)",
            timed(calls, warmup) { check(Completions.call(raw, "echo", ECHO).contentEquals(ECHO)) { "echo answered something else" } },
        )
        row("kotlin, ready await", timed(calls, warmup) { check(ended.next() == null) })
        row("kotlin, sync FFI call", timed(calls, warmup) { check(!raw.isClosed()) })
        ended.close()
        raw.disconnect()
    }
}
