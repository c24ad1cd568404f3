// The reference's twelve functional tests through the binding, against a real `blerpc serve`;
// a server stream as a Flow; uploads; concurrent calls; what `info()` says.

package dev.blerpc.test

import dev.blerpc.ffi.BlerpcException
import dev.blerpc.Connection
import dev.blerpc.ConnectOptions
import dev.blerpc.code
import dev.blerpc.connect
import kotlin.test.assertContentEquals
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertFalse
import kotlin.test.assertNotNull
import kotlin.test.assertNull
import kotlin.test.assertTrue
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.asFlow
import kotlinx.coroutines.flow.flowOf
import kotlinx.coroutines.flow.map
import kotlinx.coroutines.flow.take
import kotlinx.coroutines.flow.toList

/** The synthetic flash image of `blerpc serve`: byte i is (31 i + 7) mod 256. */
fun flashByte(i: Int): Byte = ((31 * i + 7) % 256).toByte()

fun pinned(server: Server) = ConnectOptions(trustKey = server.key)

suspend fun echo(conn: Connection, message: String): String =
    bytesOf(decode(conn.call("echo", echoRequest(message))), 1).decodeToString()

/**
 * The reference's twelve functional tests (echo ×4, flash_read ×2, data_write ×2,
 * counter_stream ×2 as a Flow, counter_upload ×2) with their checks, on [conn]: over TCP here,
 * over the fake GATT link in GattTest.kt.
 */
suspend fun theTwelveFunctionalTests(conn: Connection) {
    // echo_basic, echo_empty, echo_max_length, multi_container_echo
    for (message in listOf("hello", "", "A".repeat(256), "B".repeat(250))) {
        assertEquals(message, echo(conn, message))
    }
    // flash_read_basic, flash_read_8kb
    for (length in listOf(16, 8192)) {
        val reply = decode(conn.call("flash_read", flashReadRequest(0, length.toLong())))
        assertContentEquals(ByteArray(length) { flashByte(it) }, bytesOf(reply, 2))
    }
    // data_write_basic, data_write_8kb
    for (length in listOf(1024, 8192)) {
        val data = ByteArray(length) { it.toByte() }
        val reply = decode(conn.call("data_write", dataWriteRequest(data)))
        assertEquals(length.toLong(), uint(reply, 1))
    }
    // counter_stream, counter_stream_large: a Flow
    for (count in listOf(5, 20)) {
        val items = conn.serverStream("counter_stream", counterStreamRequest(count.toLong()))
            .map { decode(it) }
            .toList()
        assertEquals((0 until count).map { it.toLong() to it * 10 }, items.map { uint(it, 1) to int32(it, 2) })
    }
    // counter_upload, counter_upload_large: send, then finish
    for (count in listOf(5, 20)) {
        conn.clientStream("counter_upload").use { upload ->
            for (seq in 0 until count) {
                upload.send(counterUploadRequest(seq.toLong(), seq * 10L))
            }
            assertEquals(count.toLong(), uint(decode(upload.finish()), 1))
        }
    }
}

val callTests = listOf(
    Test("the twelve functional tests", 30.seconds) {
        withConnection { _, conn -> theTwelveFunctionalTests(conn) }
    },
    Test("a flash read at an address with a deadline") {
        withConnection { _, conn ->
            val reply = decode(conn.call("flash_read", flashReadRequest(1, 3), deadline = 2.seconds))
            assertEquals(1L, uint(reply, 1))
            assertContentEquals(byteArrayOf(38, 69, 100), bytesOf(reply, 2))
        }
    },
    Test("an upload from a flow") {
        withConnection { _, conn ->
            val items = (0L until 50L).map { counterUploadRequest(it, -it) }.asFlow()
            assertEquals(50L, uint(decode(conn.upload("counter_upload", items)), 1))
            // An upload whose items fail is cancelled: the next stream can start.
            val failing = (0L until 3L).asFlow().map {
                if (it == 2L) error("the app's items failed")
                counterUploadRequest(it, it)
            }
            val e = assertFailsWith<IllegalStateException> { conn.upload("counter_upload", failing) }
            assertEquals("the app's items failed", e.message)
            assertEquals(3, conn.serverStream("counter_stream", counterStreamRequest(3)).toList().size)
        }
    },
    Test("a finished upload refuses more") {
        withConnection { _, conn ->
            conn.clientStream("counter_upload").use { upload ->
                upload.send(counterUploadRequest(0, 0))
                assertEquals(1L, uint(decode(upload.finish()), 1))
                val e = assertFailsWith<BlerpcException.InvalidArgument> { upload.send(counterUploadRequest(1, 10)) }
                assertEquals("INVALID_ARGUMENT", e.code)
            }
        }
    },
    Test("a flow collected in part cancels its stream") {
        withConnection { _, conn ->
            val first = conn.serverStream("counter_stream", counterStreamRequest(1_000)).take(3).toList()
            assertEquals(listOf(0L, 1L, 2L), first.map { uint(decode(it), 1) })
            assertEquals("after", echo(conn, "after"))
            // The flow is cold: each collection is a new stream, which starts (the first
            // was cancelled in the core, else STREAM_ACTIVE) and gets only its own items.
            val second = conn.serverStream("counter_stream", counterStreamRequest(2)).toList()
            assertEquals(listOf(0L, 1L), second.map { uint(decode(it), 1) })
        }
    },
    Test("calls run concurrently on one connection") {
        withConnection { server, conn ->
            coroutineScope {
                // The four calls the core keeps in flight at once, several times over.
                for (round in 0 until 5) {
                    val messages = (0 until 4).map { "call $round.$it" }
                    assertEquals(messages, messages.map { async { echo(conn, it) } }.awaitAll())
                }
                // A fifth while four are held in flight (the server paused) is refused.
                server.stop()
                val held = (0 until 4).map { async { echo(conn, "held $it") } }
                delay(200.milliseconds)
                val e = assertFailsWith<BlerpcException.Call> { echo(conn, "fifth") }
                assertEquals("TOO_MANY_CALLS", e.code)
                server.resume()
                assertEquals((0 until 4).map { "held $it" }, held.awaitAll())
            }
        }
    },
    Test("interleaved calls of two connections get their own answers") {
        withServer { server ->
            connect(server.url, pinned(server)).use { a ->
                connect(server.url, pinned(server)).use { b ->
                    coroutineScope {
                        for (round in 0 until 10) {
                            val names = listOf("a", "b").flatMap { c -> (0 until 4).map { "$c$round.$it" } }
                            val calls = names.map { n -> async { echo(if (n.startsWith("a")) a else b, n) } }
                            assertEquals(names, calls.awaitAll())
                        }
                    }
                }
            }
        }
    },
    Test("info reports what setup established") {
        withConnection { server, conn ->
            val info = conn.info()
            assertTrue(info.encrypted)
            assertEquals(server.key, info.peerIdentity)
            assertNull(info.pinned) // a trusted key: nothing pinned
            assertEquals(server.url, info.peerId)
            assertTrue(info.attMtu >= 247u)
            assertTrue(info.largeMessages && (info.maxRequestLen ?: 0u) > 65535u)
            assertFalse(conn.isClosed())
            conn.disconnect()
            assertTrue(conn.isClosed())
            val e = assertFailsWith<BlerpcException.Connection> { echo(conn, "late") }
            assertEquals("CLOSED", e.code)
        }
    },
    Test("a stream both ways echoes every item, in order, interleaved") {
        withConnection { _, conn ->
            val items = (0 until 200).map { "item $it".toByteArray() }
            val echoed = conn.bidiStream("chat", items.asFlow()).toList()
            assertEquals(items.map { String(it) }, echoed.map { String(it) })
            // Lock-step: each echo read before the next item is sent (the peripheral answers
            // while this side's half is open).
            conn.bidiStream("chat").use { chat ->
                for (i in 0 until 20) {
                    chat.send("step $i".toByteArray())
                    assertEquals("step $i", String(assertNotNull(chat.next())))
                }
                chat.finish()
                assertNull(chat.next())
            }
            // Stopped early: cancelled, and the connection goes on with a new stream.
            assertEquals(3, conn.bidiStream("chat", items.asFlow()).take(3).toList().size)
            assertEquals("after", echo(conn, "after"))
            assertEquals(
                listOf("again"),
                conn.bidiStream("chat", flowOf("again".toByteArray())).toList().map { String(it) },
            )
        }
    },
    Test("diagnostics are the server's own counts") {
        withConnection { _, conn ->
            assertEquals("counted", echo(conn, "counted"))
            val d = conn.diagnostics()
            // The echo and this request; a TCP link has no interval, and says why.
            assertTrue(Regex("\"calls\":([2-9]|\\d{2,})").containsMatchIn(d), d)
            assertTrue(d.contains("\"conn_interval_us\":{\"unavailable\":\"not a BLE link"), d)
        }
    },
    Test("the WebSocket link") {
        withServer("--listen", "ws://127.0.0.1:0") { server ->
            assertTrue(server.url.startsWith("ws://"), server.url)
            connect(server.url, pinned(server)).use { conn ->
                assertEquals("over ws", echo(conn, "over ws"))
                assertTrue(conn.info().encrypted)
            }
        }
    },
)
