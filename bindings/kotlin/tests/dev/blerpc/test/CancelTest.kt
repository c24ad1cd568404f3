// Deadlines, cancellation and a dying server: a call never hangs, and a cancelled coroutine
// (mid-call or mid-stream) leaves the connection usable. The server is paused with SIGSTOP
// (it keeps its socket and answers nothing) to hold a call in flight.

package dev.blerpc.test

import dev.blerpc.Connection
import dev.blerpc.ffi.BlerpcException
import dev.blerpc.code
import dev.blerpc.connect
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertFalse
import kotlin.test.assertNull
import kotlin.test.assertTrue
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlin.time.TimeSource
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.take
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.launch
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.withTimeoutOrNull

/**
 * Four calls held in flight on [conn] ([server] paused), all cancelled; then, [server]
 * resumed, four new calls at once answer (every slot was released).
 */
suspend fun cancelHeldCalls(server: Server, conn: Connection) = coroutineScope {
    server.stop()
    // The four calls in flight the core allows, all cancelled.
    val held = (0 until 4).map { async { echo(conn, "held $it") } }
    delay(200.milliseconds)
    assertFalse(held.any { it.isCompleted })
    held.forEach { it.cancel() }
    held.forEach { assertFailsWith<CancellationException> { it.await() } }
    server.resume()
    // Every slot was released: four new calls at once answer.
    val messages = (0 until 4).map { "after $it" }
    assertEquals(messages, messages.map { async { echo(conn, it) } }.awaitAll())
}

/**
 * A server stream on [conn] read slowly, its collector cancelled after three items; then a
 * call answers and a new stream starts (the first was cancelled in the core).
 */
suspend fun cancelAStreamMidWay(conn: Connection) = coroutineScope {
    var got = 0
    // Fewer items than the stream's 1,024-item buffer, read slowly: 10 s in all.
    val reader = launch {
        conn.serverStream("counter_stream", counterStreamRequest(1_000)).collect {
            got++
            delay(10.milliseconds)
        }
    }
    while (got < 3) delay(10.milliseconds)
    reader.cancel()
    reader.join()
    assertTrue(reader.isCancelled)
    assertTrue(got in 3 until 1_000, "$got")
    assertEquals("after", echo(conn, "after"))
    // The stream was cancelled in the core: a new one can start (else STREAM_ACTIVE).
    val items = conn.serverStream("counter_stream", counterStreamRequest(3)).toList()
    assertEquals(listOf(0L, 1L, 2L), items.map { uint(decode(it), 1) })
}

val cancelTests = listOf(
    Test("a deadline that passes gives TIMEOUT, then the next call answers") {
        withConnection { server, conn ->
            server.stop()
            val started = TimeSource.Monotonic.markNow()
            val e = assertFailsWith<BlerpcException.Call> {
                conn.call("echo", echoRequest("late"), deadline = 300.milliseconds)
            }
            val elapsed = started.elapsedNow()
            assertEquals("TIMEOUT", e.code)
            assertTrue(elapsed >= 250.milliseconds && elapsed < 2.seconds, "$elapsed")
            server.resume()
            // The late answer is dropped; the connection goes on.
            assertEquals("after", echo(conn, "after"))
        }
    },
    Test("cancelling coroutines mid-call leaves the connection usable") {
        withConnection { server, conn -> cancelHeldCalls(server, conn) }
    },
    Test("withTimeout around a call cancels it") {
        withConnection { server, conn ->
            server.stop()
            assertNull(withTimeoutOrNull(200.milliseconds) { echo(conn, "held") })
            server.resume()
            assertEquals("after", echo(conn, "after"))
        }
    },
    Test("cancelling a coroutine mid-stream leaves the connection usable") {
        withConnection { _, conn -> cancelAStreamMidWay(conn) }
    },
    // Stream items and STREAM_END_P2C carry no tid the central chose: the core drains a
    // stream left while the peripheral still sends it and holds the next one until its end.
    Test("a stream cancelled while the peripheral sends does not leak into the next") {
        withConnection { _, conn ->
            // 10,000 items: the peripheral is still sending when the next stream starts.
            conn.serverStream("counter_stream", counterStreamRequest(10_000)).take(3).toList()
            val items = conn.serverStream("counter_stream", counterStreamRequest(2)).toList()
            assertEquals(listOf(0L, 1L), items.map { uint(decode(it), 1) })
        }
    },
    Test("a reader that falls behind slows the stream") {
        withConnection { _, conn ->
            // The streams extension: the peripheral sends only what the reader has room for,
            // so a reader that stops for 2 s loses nothing and overflows nothing.
            var read = 0L
            conn.serverStream("counter_stream", counterStreamRequest(5_000)).collect {
                assertEquals(read, uint(decode(it), 1))
                if (read++ == 0L) delay(2.seconds)
            }
            assertEquals(5_000L, read)
            assertEquals("after", echo(conn, "after"))
        }
    },
    Test("a server killed mid-call fails the call within seconds") {
        withConnection { server, conn ->
            coroutineScope {
                server.stop()
                val call = async { runCatching { echo(conn, "never answered") } }
                delay(200.milliseconds)
                assertFalse(call.isCompleted)
                val started = TimeSource.Monotonic.markNow()
                server.kill()
                val e = withTimeout(5.seconds) { call.await() }.exceptionOrNull()
                assertTrue(started.elapsedNow() < 2.seconds, "${started.elapsedNow()}")
                assertTrue(e is BlerpcException.Connection, "$e")
                assertTrue(e.code in listOf("LINK_CLOSED", "LINK_FAILED"), e.code)
                withTimeout(2.seconds) { conn.waitClosed() }
                assertTrue(conn.isClosed())
                val later = assertFailsWith<BlerpcException.Connection> { withTimeout(2.seconds) { echo(conn, "later") } }
                assertEquals("CLOSED", later.code)
            }
        }
    },
    Test("a server killed mid-stream ends the flow with an error") {
        withConnection { server, conn ->
            val e = assertFailsWith<BlerpcException> {
                conn.serverStream("counter_stream", counterStreamRequest(10_000)).collect {
                    server.close()
                }
            }
            assertTrue(e.code in listOf("LINK_CLOSED", "LINK_FAILED", "STREAM_OVERFLOW"), "$e")
        }
    },
)
