// Failures found by this suite that belong to the core, not to the binding: run with
// `tools/bindings/kotlin.sh --known-issues` (they fail today; the default run leaves them out).

package dev.blerpc.test

import dev.blerpc.connect
import kotlin.test.assertEquals
import kotlinx.coroutines.flow.take
import kotlinx.coroutines.flow.toList

val knownIssues = listOf(
    // bleRPC has no cancel message and the peripheral sends stream items and STREAM_END_P2C
    // under fresh tids, so the core gives any item to the active server stream: a stream
    // cancelled while the peripheral still sends it hands its remaining items, and its end,
    // to the next server stream on the connection.
    Test("a stream cancelled while the peripheral sends does not leak into the next") {
        withConnection { _, conn ->
            // 10,000 items: the peripheral is still sending when the next stream starts.
            conn.serverStream("counter_stream", counterStreamRequest(10_000)).take(3).toList()
            val items = conn.serverStream("counter_stream", counterStreamRequest(2)).toList()
            assertEquals(listOf(0L, 1L), items.map { uint(decode(it), 1) })
        }
    },
)
