// The test runner: each test is a `suspend` function run in `runBlocking` under `withTimeout`
// (every test bounded in time), with kotlin.test's asserts. Prints one line per test and
// `N passed, M failed`; exits 1 on any failure. Arguments: substrings of test names to run.

package dev.blerpc.test

import dev.blerpc.Connection
import dev.blerpc.connect
import kotlin.system.exitProcess
import kotlin.time.Duration
import kotlin.time.Duration.Companion.seconds
import kotlin.time.TimeSource
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout

/** A named test and its time bound. */
class Test(val name: String, val bound: Duration = 20.seconds, val body: suspend () -> Unit)

fun main(args: Array<String>) {
    val names = args.toList()
    val all = callTests + cancelTests + trustTests + gattTests
    val chosen = all.filter { t -> names.isEmpty() || names.any { it in t.name } }
    var failed = 0
    for (test in chosen) {
        val started = TimeSource.Monotonic.markNow()
        val error = runCatching { runBlocking { withTimeout(test.bound) { test.body() } } }.exceptionOrNull()
        val took = started.elapsedNow().inWholeMilliseconds
        if (error == null) {
            println("ok     ${test.name} ($took ms)")
        } else {
            failed++
            println("FAILED ${test.name} ($took ms): $error")
            error.printStackTrace(System.out)
        }
    }
    println("${chosen.size - failed} passed, $failed failed")
    exitProcess(if (failed == 0 && chosen.isNotEmpty()) 0 else 1)
}

/** Runs [body] with a `blerpc serve` on TCP (killed at the end). */
suspend fun <T> withServer(vararg args: String, body: suspend (Server) -> T): T =
    Server.start(*(if (args.isEmpty()) arrayOf("--listen", "tcp://127.0.0.1:0") else args)).use { body(it) }

/** Runs [body] with a `blerpc serve` on TCP and a connection to it that trusts its key. */
suspend fun <T> withConnection(body: suspend (Server, Connection) -> T): T =
    withServer { server -> connect(server.url, pinned(server)).use { body(server, it) } }
