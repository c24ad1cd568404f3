// A Kotlin-implemented fake GATT link whose peripheral is a real `blerpc serve` over TCP, as
// an app's GATT adapter would look: ATT MTU 247, each write without response one container on
// the TCP stream, each container the server sends one notification, delivered in order to the
// inbox by one reader thread (split off the stream with `containerLen`, the core's header
// parsing), and a disconnection (`drop()`, a lost radio link; or the library's `disconnect()`).

package dev.blerpc.test

import dev.blerpc.GattInbox
import dev.blerpc.GattLink
import dev.blerpc.containerLen
import java.net.Socket
import java.net.URI
import java.util.concurrent.atomic.AtomicBoolean
import java.util.concurrent.atomic.AtomicInteger
import kotlin.concurrent.thread
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.withContext

class FakeGatt(url: String, private val inbox: GattInbox, val address: String = "FA:KE:00:00:00:02") : GattLink {
    private val socket = URI(url).let { Socket(it.host, it.port) }
    private val out = socket.getOutputStream()
    private val gone = AtomicBoolean(false)

    /** PDUs written, and the longest. */
    val writes = AtomicInteger()
    val longest = AtomicInteger()

    /** Set to make every later write fail, as a stack's write error would. */
    @Volatile var writeError: Exception? = null

    init {
        thread(isDaemon = true, name = "fake-gatt-notifications") {
            val input = socket.getInputStream()
            var buf = ByteArray(0)
            val chunk = ByteArray(4096)
            try {
                while (true) {
                    val n = input.read(chunk)
                    if (n < 0) break
                    buf += chunk.copyOf(n)
                    while (true) {
                        val len = containerLen(buf) ?: break
                        if (buf.size < len) break
                        inbox.notification(buf.copyOf(len))
                        buf = buf.copyOfRange(len, buf.size)
                    }
                }
            } catch (_: java.io.IOException) {
                // The socket was closed by drop().
            }
            drop("the peripheral closed the link")
        }
    }

    val isConnected: Boolean get() = !gone.get()

    override fun attMtu(): UInt = MTU.toUInt()

    override fun peerId(): String = "ble://$address"

    override suspend fun writeWithoutResponse(pdu: ByteArray) {
        writeError?.let { throw it }
        check(!gone.get()) { "not connected" }
        check(pdu.size <= MTU - 3) { "a PDU of ${pdu.size} bytes over the MTU" }
        writes.incrementAndGet()
        longest.accumulateAndGet(pdu.size, ::maxOf)
        withContext(Dispatchers.IO) {
            synchronized(out) {
                out.write(pdu)
                out.flush()
            }
        }
    }

    override suspend fun disconnect() = drop("the central disconnected")

    /** The link is gone: the socket closes and the inbox is told, once. */
    fun drop(reason: String) {
        if (gone.compareAndSet(false, true)) {
            socket.close()
            inbox.disconnected(reason)
        }
    }

    companion object {
        const val MTU = 247
    }
}
