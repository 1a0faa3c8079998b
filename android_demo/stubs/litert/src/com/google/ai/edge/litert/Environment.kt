// Signature-only stub of the LiteRT Kotlin API, transcribed from google-ai-edge/LiteRT tag v2.2.0
// (litert/kotlin/src/main/kotlin/com/google/ai/edge/litert), the version android_demo/app/build.gradle pins.
// Public and internal members keep their visibility; bodies are stubs. Compiled as its own module so internal
// members stay hidden from the app, as they are in the real AAR.
package com.google.ai.edge.litert

class Environment private constructor(handle: Long) : JniHandle(handle) {
  enum class Option private constructor(val value: Int) {
    CompilerPluginLibraryDir(0),
    DispatchLibraryDir(1),
    SystemRuntimeHandle(23),
  }

  override protected fun destroy(): Unit = throw NotImplementedError("stub")

  @Throws(LiteRtException::class)
  fun getAvailableAccelerators(): Set<Accelerator> = throw NotImplementedError("stub")

  companion object {
    @Throws(LiteRtException::class)
    @JvmOverloads
    @JvmStatic
    fun create(options: Map<Option, String> = mapOf()): Environment = throw NotImplementedError("stub")
  }
}
