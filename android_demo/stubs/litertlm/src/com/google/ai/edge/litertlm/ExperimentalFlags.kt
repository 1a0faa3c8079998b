// Signature-only stub of the LiteRT-LM Kotlin API (the subset the demo calls), transcribed from google-ai-edge/LiteRT-LM
// kotlin/java/com/google/ai/edge/litertlm for litertlm-android 0.18.1, the version android_demo/app/build.gradle pins.
// Public and internal members keep their visibility; bodies are stubs. Compiled as its own module, like the LiteRT stub.
package com.google.ai.edge.litertlm

@ExperimentalApi
object ExperimentalFlags {
  var enableBenchmark: Boolean = false
  var enableSpeculativeDecoding: Boolean? = null
}

@RequiresOptIn(
  message = "This API is experimental and temporary. It may change or be removed without notice.",
  level = RequiresOptIn.Level.ERROR,
)
@Retention(AnnotationRetention.BINARY)
@Target(AnnotationTarget.CLASS, AnnotationTarget.FUNCTION)
annotation class ExperimentalApi
