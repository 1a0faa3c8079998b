// Signature-only stub of the LiteRT-LM Kotlin API (the subset the demo calls), transcribed from google-ai-edge/LiteRT-LM
// kotlin/java/com/google/ai/edge/litertlm for litertlm-android 0.18.1, the version android_demo/app/build.gradle pins.
// Public and internal members keep their visibility; bodies are stubs. Compiled as its own module, like the LiteRT stub.
package com.google.ai.edge.litertlm

class Conversation internal constructor(private val handle: Long) : AutoCloseable {
  val isAlive: Boolean
    get() = throw NotImplementedError("stub")

  fun sendMessage(message: Message): Message = throw NotImplementedError("stub")

  fun sendMessage(text: String): Message = throw NotImplementedError("stub")

  @ExperimentalApi fun getBenchmarkInfo(): BenchmarkInfo = throw NotImplementedError("stub")

  fun getTokenCount(): Int = throw NotImplementedError("stub")

  override fun close(): Unit = throw NotImplementedError("stub")
}
