package dev.mtplite.core

import java.io.File

/**
 * One benchmark record per (mode, prompt): the schema `mtplite report` reads (same keys as `mtplite bench`'s
 * per-prompt records, plus device memory). cpuS: process CPU time around the generation (the battery's proxy, as
 * `bench` records it); energyNwh: the battery's energy counter's drop over it, where the device exposes one. Written as JSON Lines; each line is flushed as soon as it is complete so
 * a killed run keeps every finished record.
 */
data class BenchRecord(
    val device: String, val mode: String, val promptId: String, val task: String, val tokens: Int,
    val decodeS: Double, val ttftS: Double, val acceptLength: Double?, val acceptancePerDepth: List<Double>,
    val cycles: Int, val accepted: Int, val draftMsPerCycle: Double, val verifyMsPerCycle: Double,
    val javaHeapBytes: Long, val nativeHeapBytes: Long, val pssBeforeLoadBytes: Long, val pssAfterLoadBytes: Long,
    val weightBytes: Long, val kvBytes: Long, val memorySavedVsStandaloneBytes: Long?, val backbonePasses: Int = 0,
    val cpuS: Double? = null, val energyNwh: Long? = null, val sampler: Sampler = Sampler(),
) {
    val decodeTokensPerS: Double? get() = if (tokens > 1 && decodeS > 0) (tokens - 1) / decodeS else null

    fun toJson(): String = Json.write(linkedMapOf<String, Any?>(
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

/** A benchmark item that failed, logged in its place: `mtplite report` lists it, and the run goes on. */
data class BenchFailure(val device: String, val mode: String, val promptId: String, val task: String, val error: String) {
    fun toJson(): String = Json.write(linkedMapOf<String, Any?>("schema" to LOG_SCHEMA, "device" to device,
        "mode" to mode, "id" to promptId, "task" to task, "error" to error))
}

data class Memory(val javaHeap: Long, val nativeHeap: Long, val pssBefore: Long, val pssAfter: Long,
                  val weightBytes: Long, val kvBytes: Long, val savedVsStandalone: Long?)

class JsonlWriter(private val file: File) : AutoCloseable {
    private val out = file.outputStream().bufferedWriter()
    fun write(r: BenchRecord) = line(r.toJson())
    fun write(f: BenchFailure) = line(f.toJson())
    private fun line(s: String) { out.write(s); out.write("\n"); out.flush() }
    override fun close() = out.close()

    /** One benchmark item: its record, or, where [run] throws, a failure record in its place. Returns the failure
     * (null on success) for the caller to log; an Error (out of memory) still ends the run. */
    fun item(device: String, mode: String, promptId: String, task: String, run: () -> BenchRecord): Exception? =
        try { write(run()); null } catch (e: Exception) {
            write(BenchFailure(device, mode, promptId, task, "${e::class.simpleName}: ${e.message}")); e
        }
}
