// The Kotlin side of tools/bindings/bench.sh: echo calls through the `dev.blerpc` layer
// (wall time per call, median and 90th percentile: its completion queue), the same calls as
// UniFFI's own `suspend` method (its future polling), and the two floors under them: an await
// of a Rust future that is ready at once (`next()` of an ended stream) and a synchronous FFI
// call (`isClosed()`). One JSON line per row.
//
//   java ... dev.blerpc.bench.BenchKt URL KEY CALLS WARMUP

package dev.blerpc.bench

import dev.blerpc.ConnectOptions
import dev.blerpc.connect
import kotlinx.coroutines.runBlocking

/** EchoRequest { message: "hello" }; the response is the same bytes. */
val ECHO = byteArrayOf(0x0a, 0x05) + "hello".toByteArray()

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
            "kotlin, UniFFI suspend call",
            timed(calls, warmup) { check(raw.call("echo", ECHO, null).contentEquals(ECHO)) { "echo answered something else" } },
        )
        row("kotlin, ready await", timed(calls, warmup) { check(ended.next() == null) })
        row("kotlin, sync FFI call", timed(calls, warmup) { check(!raw.isClosed()) })
        ended.close()
        raw.disconnect()
    }
}
