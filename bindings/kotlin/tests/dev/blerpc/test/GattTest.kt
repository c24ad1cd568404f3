// A GATT link the app provides, implemented in Kotlin (FakeGatt.kt: MTU 247, ordered
// notifications, a disconnection; its peer a real `blerpc serve` over TCP), through
// `connectGatt`: the same cases as the Python suite's test_gatt.py and test_keys.py. The
// twelve functional tests, cancellation leaving the connection usable, a disconnection
// mid-call, a failing write, an overflowing inbox; pins kept in a store the app provides.

package dev.blerpc.test

import dev.blerpc.ConnectOptions
import dev.blerpc.Connection
import dev.blerpc.GattInbox
import dev.blerpc.KeyStore
import dev.blerpc.Pinned
import dev.blerpc.code
import dev.blerpc.connectGatt
import dev.blerpc.detail
import dev.blerpc.ffi.BlerpcException
import java.util.concurrent.ConcurrentHashMap
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertFalse
import kotlin.test.assertTrue
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlin.time.TimeSource
import kotlinx.coroutines.async
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.withTimeout

/** Runs [body] with a connection over a fake GATT link to [server]. */
suspend fun <T> withGatt(
    server: Server,
    options: ConnectOptions = pinned(server),
    body: suspend (Connection, FakeGatt) -> T,
): T {
    val inbox = GattInbox()
    val gatt = FakeGatt(server.url, inbox)
    return connectGatt(gatt, inbox, options).use { body(it, gatt) }
}

/** Returns once the library has disconnected [gatt] (fails after 1 s). */
suspend fun disconnected(gatt: FakeGatt) = withTimeout(1.seconds) {
    while (gatt.isConnected) delay(10.milliseconds)
}

/** An app's key store: a map (an app would use its preferences or the Keystore). */
class MemoryKeyStore : KeyStore {
    val pins = ConcurrentHashMap<String, String>()
    override fun get(deviceId: String): String? = pins[deviceId]
    override fun put(deviceId: String, key: String) {
        pins[deviceId] = key
    }
}

val gattTests = listOf(
    Test("GATT: the twelve functional tests", 60.seconds) {
        withServer { server ->
            val gatt = withGatt(server) { conn, gatt ->
                theTwelveFunctionalTests(conn)
                gatt
            }
            assertTrue(gatt.writes.get() > 0 && gatt.longest.get() <= FakeGatt.MTU - 3)
            disconnected(gatt)
        }
    },
    Test("GATT: info") {
        withServer { server ->
            withGatt(server) { conn, gatt ->
                val info = conn.info()
                assertTrue(info.encrypted)
                assertEquals(server.key, info.peerIdentity)
                assertEquals(247u, info.attMtu)
                assertEquals("ble://${gatt.address}", info.peerId)
                assertFalse(info.longContainers)
            }
        }
    },
    Test("GATT: cancelling calls and a stream leaves the connection usable") {
        withServer { server ->
            withGatt(server) { conn, _ ->
                cancelHeldCalls(server, conn)
                cancelAStreamMidWay(conn)
            }
        }
    },
    Test("GATT: a disconnection mid-call fails the call promptly") {
        withServer { server ->
            withGatt(server) { conn, gatt ->
                coroutineScope {
                    server.stop()
                    val call = async { runCatching { echo(conn, "lost") } }
                    delay(200.milliseconds)
                    assertFalse(call.isCompleted)
                    val started = TimeSource.Monotonic.markNow()
                    gatt.drop("supervision timeout")
                    val e = withTimeout(5.seconds) { call.await() }.exceptionOrNull()
                    assertTrue(started.elapsedNow() < 2.seconds, "${started.elapsedNow()}")
                    assertTrue(e is BlerpcException.Connection, "$e")
                    assertEquals("LINK_CLOSED", e.code)
                    withTimeout(2.seconds) { conn.waitClosed() }
                    val later = assertFailsWith<BlerpcException.Connection> { echo(conn, "later") }
                    assertEquals("CLOSED", later.code)
                    server.resume()
                }
            }
        }
    },
    Test("GATT: a write that fails fails the link") {
        withServer { server ->
            withGatt(server) { conn, gatt ->
                gatt.writeError = java.io.IOException("the stack refused the write")
                val e = assertFailsWith<BlerpcException.Connection> { echo(conn, "never sent") }
                assertEquals("LINK_FAILED", e.code)
                assertTrue("the stack refused the write" in e.detail, e.detail)
                disconnected(gatt)
            }
        }
    },
    Test("GATT: an inbox that overflows fails the link") {
        withServer { server ->
            val inbox = GattInbox(2u)
            val gatt = FakeGatt(server.url, inbox)
            val timeout = byteArrayOf(0, 0, 0xc4.toByte(), 0)
            assertTrue(inbox.notification(timeout))
            assertTrue(inbox.notification(timeout))
            assertFalse(inbox.notification(timeout))
            val e = assertFailsWith<BlerpcException.Connection> { connectGatt(gatt, inbox, pinned(server)) }
            assertEquals("LINK_FAILED", e.code)
            assertTrue("GATT inbox overflow: 2 notifications" in e.detail, e.detail)
            disconnected(gatt)
        }
    },
    Test("GATT: an app key store pins on first use, then refuses another key") {
        val store = MemoryKeyStore()
        val options = ConnectOptions(keyStore = store)
        var device = ""
        withServer { first ->
            withGatt(first, options) { conn, gatt ->
                assertEquals(Pinned.FIRST_USE, conn.info().pinned)
                device = "ble://${gatt.address}"
            }
            assertEquals(mapOf(device to first.key), store.pins.toMap())
            withGatt(first, options) { conn, _ -> assertEquals(Pinned.MATCHED, conn.info().pinned) }
        }
        withServer { second ->
            val e = assertFailsWith<BlerpcException.Setup> { withGatt(second, options) { _, _ -> } }
            assertEquals("IDENTITY_CHANGED", e.code)
        }
        assertEquals(1, store.pins.size)
    },
    Test("GATT: a key store that throws refuses the connection with KEY_STORE") {
        val broken = object : KeyStore {
            override fun get(deviceId: String): String? = throw IllegalStateException("the keystore is locked")
            override fun put(deviceId: String, key: String) = throw IllegalStateException("the keystore is locked")
        }
        withServer { server ->
            val e = assertFailsWith<BlerpcException.Setup> {
                withGatt(server, ConnectOptions(keyStore = broken)) { _, _ -> }
            }
            assertEquals("KEY_STORE", e.code)
            assertTrue("the keystore is locked" in e.detail, e.detail)
        }
    },
)
