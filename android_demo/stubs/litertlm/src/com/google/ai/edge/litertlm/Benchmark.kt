// Signature-only stub of the LiteRT-LM Kotlin API (the subset the demo calls), transcribed from google-ai-edge/LiteRT-LM
// kotlin/java/com/google/ai/edge/litertlm for litertlm-android 0.18.1, the version android_demo/app/build.gradle pins.
// Public and internal members keep their visibility; bodies are stubs. Compiled as its own module, like the LiteRT stub.
package com.google.ai.edge.litertlm

data class BenchmarkInfo(
  val initTimeInSecond: Double,
  val timeToFirstTokenInSecond: Double,
  val lastPrefillTokenCount: Int,
  val lastDecodeTokenCount: Int,
  val lastPrefillTokensPerSecond: Double,
  val lastDecodeTokensPerSecond: Double,
)
