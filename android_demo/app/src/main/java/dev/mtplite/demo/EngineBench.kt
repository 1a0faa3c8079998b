package dev.mtplite.demo

import com.google.ai.edge.litertlm.Backend
import com.google.ai.edge.litertlm.ConversationConfig
import com.google.ai.edge.litertlm.Engine
import com.google.ai.edge.litertlm.EngineConfig
import com.google.ai.edge.litertlm.ExperimentalApi
import com.google.ai.edge.litertlm.ExperimentalFlags
import com.google.ai.edge.litertlm.Message
import dev.mtplite.core.ENGINE_MODES
import dev.mtplite.core.EnginePrompt
import dev.mtplite.core.EngineRecord
import dev.mtplite.core.JsonlWriter
import java.io.File

/**
 * The same `.litertlm` through the official LiteRT-LM engine, as an app ships it: Engine + createConversation with
 * speculative decoding off ("engine") and on ("engine+mtp"), one fresh engine per mode as `mtplite bench` runs it.
 * Returns the failures (logged by the caller) of the prompts that threw; each has a failure record in the log.
 */
@OptIn(ExperimentalApi::class)
internal fun runEngineBench(model: File, cacheDir: File, prompts: List<Map<*, *>>, maxNew: Int, cacheLength: Int,
                            device: String, w: JsonlWriter): List<Exception> {
    ExperimentalFlags.enableBenchmark = true  // the conversation's BenchmarkInfo times prefill and decode
    val failures = ArrayList<Exception>()
    for (mode in ENGINE_MODES) {
        Engine(EngineConfig(model.path, Backend.CPU(), maxNumTokens = cacheLength, cacheDir = cacheDir.path)).use { engine ->
            engine.initialize()
            for (p in prompts) {
                val id = p["id"] as String
                val task = p["task"] as String
                w.item(device, mode, id, task) {
                    val turn = EnginePrompt.from(p)
                    val history = turn.history.map { (role, text) -> if (role == "user") Message.user(text) else Message.model(text) }
                    val config = ConversationConfig(initialMessages = history, maxOutputToken = maxNew,
                        enableSpeculativeDecoding = mode == "engine+mtp")
                    engine.createConversation(config).use { c ->
                        val reply = c.sendMessage(turn.message).toString()
                        val info = c.getBenchmarkInfo()
                        EngineRecord(device, mode, id, task, info.lastDecodeTokenCount, info.lastDecodeTokensPerSecond,
                            info.timeToFirstTokenInSecond, reply)
                    }
                }?.let { failures.add(it) }
            }
        }
    }
    return failures
}
