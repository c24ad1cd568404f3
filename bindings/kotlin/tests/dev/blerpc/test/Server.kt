// Real `blerpc serve` processes for the tests (as bindings/python/tests/conftest.py starts
// them): the binary is $BLERPC_BIN (default target/debug/blerpc); it prints
// `listening URL identity HEX` once it listens, and the tests read the URL and key there.

package dev.blerpc.test

import java.io.File
import java.util.concurrent.TimeUnit
import kotlin.concurrent.thread

/** A running `blerpc serve`. */
class Server(private val proc: Process, val url: String, val key: String) : AutoCloseable {
    /**
     * SIGSTOP: the process keeps its socket and answers nothing. Returns once every thread has
     * stopped (the signal alone only asks them to).
     */
    fun stop() {
        signal("STOP")
        val tasks = File("/proc/${proc.pid()}/task")
        val deadline = System.nanoTime() + 5_000_000_000L
        while (!(tasks.listFiles() ?: emptyArray()).all { state(it) == "T" }) {
            check(System.nanoTime() < deadline) { "blerpc serve did not stop within 5 s of SIGSTOP" }
            Thread.sleep(1)
        }
    }

    /** SIGCONT. */
    fun resume() = signal("CONT")

    /** SIGKILL (a stopped process too, without running it again first). */
    fun kill() {
        proc.destroyForcibly()
        check(proc.waitFor(5, TimeUnit.SECONDS)) { "blerpc serve outlived SIGKILL by 5 s" }
    }

    override fun close() {
        if (proc.isAlive) kill()
    }

    private fun signal(name: String) {
        val kill = ProcessBuilder("kill", "-$name", proc.pid().toString()).start()
        check(kill.waitFor(5, TimeUnit.SECONDS) && kill.exitValue() == 0) { "kill -$name failed" }
    }

    companion object {
        private val bin = System.getenv("BLERPC_BIN") ?: "target/debug/blerpc"

        /** Starts `blerpc serve ARGS` and waits (10 s at most) for its `listening` line. */
        fun start(vararg args: String): Server {
            val proc = ProcessBuilder(bin, "serve", *args)
                .redirectError(ProcessBuilder.Redirect.DISCARD)
                .redirectInput(ProcessBuilder.Redirect.from(File("/dev/null")))
                .start()
            var first: String? = null
            val reader = thread(isDaemon = true) { first = proc.inputStream.bufferedReader().readLine() }
            reader.join(10_000)
            val line = first?.split(" ")
            // listening URL identity HEX
            if (line == null || line.size != 4 || line[0] != "listening") {
                proc.destroyForcibly()
                error("$bin serve ${args.joinToString(" ")}: no listening line within 10 s (got $line)")
            }
            return Server(proc, line[1], line[3])
        }

        /** A thread's state letter from /proc (`T`: stopped). */
        private fun state(task: File): String =
            // pid (comm) STATE ...: comm may hold spaces, so split after its closing parenthesis.
            File(task, "stat").readText().substringAfterLast(")").trim().split(" ")[0]
    }
}
