// Pinning and refusals: a wrong pinned key, trust on first use, bad arguments, nothing
// listening; every refusal a typed exception with the core's code.

package dev.blerpc.test

import dev.blerpc.ffi.BlerpcException
import dev.blerpc.ConnectOptions
import dev.blerpc.Pinned
import dev.blerpc.code
import dev.blerpc.connect
import dev.blerpc.detail
import java.io.File
import java.nio.file.Files
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertTrue
import kotlin.time.Duration.Companion.milliseconds

val trustTests = listOf(
    Test("a wrong pinned key is refused with IDENTITY_REJECTED") {
        withServer { server ->
            val e = assertFailsWith<BlerpcException.Setup> {
                connect(server.url, ConnectOptions(trustKey = "ab".repeat(32)))
            }
            assertEquals("IDENTITY_REJECTED", e.code)
            assertTrue("identity" in e.detail, e.detail)
        }
    },
    Test("trust on first use pins, then refuses another key") {
        val known = File(Files.createTempDirectory("blerpc-kotlin-").toFile(), "known_keys.json").path
        val options = ConnectOptions(knownKeysFile = known, deviceId = "thermostat")
        withServer { first ->
            connect(first.url, options).use { assertEquals(Pinned.FIRST_USE, it.info().pinned) }
            assertTrue(first.key in File(known).readText())
            connect(first.url, options).use {
                assertEquals(Pinned.MATCHED, it.info().pinned)
                assertEquals("x", echo(it, "x"))
            }
        }
        withServer { second ->
            val e = assertFailsWith<BlerpcException.Setup> { connect(second.url, options) }
            assertEquals("IDENTITY_CHANGED", e.code)
        }
    },
    Test("bad arguments and nothing listening are typed refusals") {
        for (url in listOf("nope://x", "tcp://")) {
            val e = assertFailsWith<BlerpcException.InvalidArgument> { connect(url, ConnectOptions(allowAnyKey = true)) }
            assertEquals("INVALID_ARGUMENT", e.code)
        }
        val badKey = assertFailsWith<BlerpcException> { connect("tcp://127.0.0.1:1", ConnectOptions(trustKey = "3b6a")) }
        assertEquals("INVALID_ARGUMENT", badKey.code)
        val nobody = assertFailsWith<BlerpcException.Connection> {
            connect("tcp://127.0.0.1:1", ConnectOptions(allowAnyKey = true))
        }
        assertEquals("LINK_FAILED", nobody.code)
        withConnection { _, conn ->
            val e = assertFailsWith<BlerpcException.Call> { conn.call("no_such_command", ByteArray(0)) }
            assertEquals("PEER_ERROR", e.code)
            assertTrue(e.peerCode != null)
            assertFailsWith<IllegalArgumentException> { conn.call("echo", ByteArray(0), deadline = (-1).milliseconds) }
            assertEquals("still here", echo(conn, "still here"))
        }
    },
)
