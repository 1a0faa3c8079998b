package dev.mtplite.core

import java.io.File

/**
 * One benchmark record per (mode, prompt): the schema `mtplite report` reads (same keys as `mtplite bench`'s
 * per-prompt records, plus device memory). cpuS: process CPU time around the generation (the battery's proxy, as
 * `bench` records it); energyNwh: the battery's energy counter's drop over it, where the device exposes one. Written as JSON Lines; each line is flushed as soon as it is complete so
 * a killed run keeps every finished record.
 */
/** A line of the device log. */
interface LogRecord { fun toJson(): String }

data class BenchRecord(
    val device: String, val mode: String, val promptId: String, val task: String, val tokens: Int,
    val decodeS: Double, val ttftS: Double, val acceptLength: Double?, val acceptancePerDepth: List<Double>,
    val cycles: Int, val accepted: Int, val draftMsPerCycle: Double, val verifyMsPerCycle: Double,
    val javaHeapBytes: Long, val nativeHeapBytes: Long, val pssBeforeLoadBytes: Long, val pssAfterLoadBytes: Long,
    val weightBytes: Long, val kvBytes: Long, val memorySavedVsStandaloneBytes: Long?, val backbonePasses: Int = 0,
    val cpuS: Double? = null, val energyNwh: Long? = null, val sampler: Sampler = Sampler(),
) : LogRecord {
    val decodeTokensPerS: Double? get() = if (tokens > 1 && decodeS > 0) (tokens - 1) / decodeS else null

    override fun toJson(): String = Json.write(linkedMapOf<String, Any?>(
        "schema" to LOG_SCHEMA, "device" to device, "mode" to mode, "id" to promptId, "task" to task,
        "tokens" to tokens, "decode_s" to decodeS, "ttft_s" to ttftS, "decode_tokens_per_s" to decodeTokensPerS,
        "accept_length" to acceptLength, "acceptance_per_depth" to acceptancePerDepth, "cycles" to cycles,
        "accepted" to accepted, "backbone_passes" to backbonePasses, "draft_ms_per_cycle" to draftMsPerCycle, "verify_ms_per_cycle" to verifyMsPerCycle,
        "java_heap_bytes" to javaHeapBytes, "native_heap_bytes" to nativeHeapBytes,
        "pss_before_load_bytes" to pssBeforeLoadBytes, "pss_after_load_bytes" to pssAfterLoadBytes,
        "weight_bytes" to weightBytes, "kv_bytes" to kvBytes,
        "memory_saved_vs_standalone_bytes" to memorySavedVsStandaloneBytes,
    ).apply {  // absent, not null, where not measured: `mtplite report` then leaves the column out
        if (cpuS != null) put("cpu_s", cpuS)
        if (energyNwh != null) put("energy_nwh", energyNwh)
        put("sampler", Sampler.toMap(sampler))
    })

    companion object {
        fun from(device: String, mode: String, promptId: String, task: String, g: Generation, mem: Memory,
                 cpuS: Double? = null, energyNwh: Long? = null, sampler: Sampler = Sampler()): BenchRecord {
            val cyc = maxOf(g.cycles, 1)
            return BenchRecord(device, mode, promptId, task, g.tokens.size, (g.totalNs - g.ttftNs) / 1e9, g.ttftNs / 1e9,
                g.acceptLength, g.acceptancePerDepth, g.cycles, g.accepted, g.draftNs / 1e6 / cyc, g.verifyNs / 1e6 / cyc,
                mem.javaHeap, mem.nativeHeap, mem.pssBefore, mem.pssAfter, mem.weightBytes, mem.kvBytes, mem.savedVsStandalone,
                g.backbonePasses, cpuS, energyNwh, sampler)
        }
    }
}

const val LOG_SCHEMA = "mtplite-device-log/1"

/**
 * One prompt through the official LiteRT-LM engine's Conversation API (mode "engine": speculative decoding off,
 * "engine+mtp": on), timed by the engine's own BenchmarkInfo: what an app that ships the `.litertlm` gets. The engine
 * exposes no cycles or acceptance, so the record has none; `text` lets `mtplite report` check MTP on = off.
 */
data class EngineRecord(val device: String, val mode: String, val promptId: String, val task: String,
                        val decodeTokens: Int, val decodeTokensPerS: Double, val ttftS: Double, val text: String) : LogRecord {
    init { require(mode in ENGINE_MODES) { "engine mode must be one of $ENGINE_MODES, got $mode" } }

    override fun toJson(): String = Json.write(linkedMapOf<String, Any?>("schema" to LOG_SCHEMA, "device" to device,
        "mode" to mode, "id" to promptId, "task" to task, "engine" to "litert-lm", "tokens" to decodeTokens,
        "decode_s" to if (decodeTokensPerS > 0) decodeTokens / decodeTokensPerS else 0.0, "ttft_s" to ttftS,
        "decode_tokens_per_s" to decodeTokensPerS, "text" to text))
}

val ENGINE_MODES = listOf("engine", "engine+mtp")

/**
 * A benchmark prompt as the engine's Conversation API takes it: the earlier turns as (role, text) and the user's
 * message. bench_prompts.jsonl carries the prompt text (a string, or chat messages) beside its token ids.
 */
data class EnginePrompt(val history: List<Pair<String, String>>, val message: String) {
    companion object {
        fun from(p: Map<*, *>): EnginePrompt = when (val x = p["prompt"]) {
            is String -> EnginePrompt(emptyList(), x)
            is List<*> -> {
                val turns = x.map { m ->
                    val mm = m as? Map<*, *> ?: throw IllegalArgumentException("prompt messages must be objects")
                    (mm["role"] as? String ?: "user") to (mm["content"] as? String
                        ?: throw IllegalArgumentException("a prompt message has no text content"))
                }
                require(turns.isNotEmpty() && turns.last().first == "user") { "a chat prompt must end with a user message" }
                EnginePrompt(turns.dropLast(1), turns.last().second)
            }
            else -> throw IllegalArgumentException("bench_prompts.jsonl line ${p["id"]} has no prompt text (re-export the bundle)")
        }
    }
}

/** A benchmark item that failed, logged in its place: `mtplite report` lists it, and the run goes on. */
data class BenchFailure(val device: String, val mode: String, val promptId: String, val task: String, val error: String) : LogRecord {
    override fun toJson(): String = Json.write(linkedMapOf<String, Any?>("schema" to LOG_SCHEMA, "device" to device,
        "mode" to mode, "id" to promptId, "task" to task, "error" to error))
}

data class Memory(val javaHeap: Long, val nativeHeap: Long, val pssBefore: Long, val pssAfter: Long,
                  val weightBytes: Long, val kvBytes: Long, val savedVsStandalone: Long?)

class JsonlWriter(private val file: File) : AutoCloseable {
    private val out = file.outputStream().bufferedWriter()
    fun write(r: LogRecord) = line(r.toJson())
    private fun line(s: String) { out.write(s); out.write("\n"); out.flush() }
    override fun close() = out.close()

    /** One benchmark item: its record, or, where [run] throws, a failure record in its place. Returns the failure
     * (null on success) for the caller to log; an Error (out of memory) still ends the run. */
    fun item(device: String, mode: String, promptId: String, task: String, run: () -> LogRecord): Exception? =
        try { write(run()); null } catch (e: Exception) {
            write(BenchFailure(device, mode, promptId, task, "${e::class.simpleName}: ${e.message}")); e
        }
}
