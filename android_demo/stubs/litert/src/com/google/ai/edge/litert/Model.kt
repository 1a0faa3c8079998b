// Signature-only stub of the LiteRT Kotlin API, transcribed from google-ai-edge/LiteRT tag v2.2.0
// (litert/kotlin/src/main/kotlin/com/google/ai/edge/litert), the version android_demo/app/build.gradle pins.
// Public and internal members keep their visibility; bodies are stubs. Compiled as its own module so internal
// members stay hidden from the app, as they are in the real AAR.
package com.google.ai.edge.litert

class CompiledModel
private constructor(
  handle: Long,
  private val env: Environment,
  private val envManaged: Boolean = false,
) : JniHandle(handle) {

  data class CpuOptions
  constructor(
    val numThreads: Int? = null,
    val xnnPackFlags: Int? = null,
    val xnnPackWeightCachePath: String? = null,
  )

  class Options constructor(internal val accelerators: Set<Accelerator>) {
    constructor(vararg accelerators: Accelerator) : this(setOf(*accelerators)) {}

    var cpuOptions: CpuOptions? = null

    companion object {
      @JvmStatic val CPU = Options(Accelerator.CPU)
    }
  }

  @Throws(LiteRtException::class)
  fun createInputBuffer(inputName: String, signature: String = ""): TensorBuffer = throw NotImplementedError("stub")

  @Throws(LiteRtException::class)
  fun createOutputBuffer(outputName: String, signature: String = ""): TensorBuffer = throw NotImplementedError("stub")

  @Throws(LiteRtException::class)
  fun createInputBuffers(signature: String): List<TensorBuffer> = throw NotImplementedError("stub")

  @Throws(LiteRtException::class)
  fun createOutputBuffers(signature: String): List<TensorBuffer> = throw NotImplementedError("stub")

  @Throws(LiteRtException::class)
  fun run(inputs: List<TensorBuffer>, outputs: List<TensorBuffer>, signature: String): Unit =
    throw NotImplementedError("stub")

  @Throws(LiteRtException::class)
  fun run(
    inputs: Map<String, TensorBuffer>,
    outputs: Map<String, TensorBuffer>,
    signature: String = "",
  ): Unit = throw NotImplementedError("stub")

  override fun destroy(): Unit = throw NotImplementedError("stub")

  companion object {
    @Throws(LiteRtException::class)
    @JvmOverloads
    @JvmStatic
    fun create(
      filePath: String,
      options: Options = Options.CPU,
      optionalEnv: Environment? = null,
    ): CompiledModel = throw NotImplementedError("stub")
  }
}
