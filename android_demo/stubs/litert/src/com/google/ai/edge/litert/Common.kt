// Signature-only stub of the LiteRT Kotlin API, transcribed from google-ai-edge/LiteRT tag v2.2.0
// (litert/kotlin/src/main/kotlin/com/google/ai/edge/litert), the version android_demo/app/build.gradle pins.
// Public and internal members keep their visibility; bodies are stubs. Compiled as its own module so internal
// members stay hidden from the app, as they are in the real AAR.
package com.google.ai.edge.litert

enum class Accelerator private constructor(val value: Int) {
  NONE(0),
  CPU(1),
  GPU(2),
  NPU(3);

  companion object {
    internal fun of(value: Int): Accelerator = throw NotImplementedError("stub")
  }
}

abstract class JniHandle internal constructor(internal val handle: Long) : AutoCloseable {
  protected fun assertNotDestroyed(): Unit = throw NotImplementedError("stub")

  protected abstract fun destroy()

  override final fun close(): Unit = throw NotImplementedError("stub")
}
