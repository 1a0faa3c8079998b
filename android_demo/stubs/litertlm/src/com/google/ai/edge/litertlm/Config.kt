// Signature-only stub of the LiteRT-LM Kotlin API (the subset the demo calls), transcribed from google-ai-edge/LiteRT-LM
// kotlin/java/com/google/ai/edge/litertlm for litertlm-android 0.18.1, the version android_demo/app/build.gradle pins.
// Public and internal members keep their visibility; bodies are stubs. Compiled as its own module, like the LiteRT stub.
package com.google.ai.edge.litertlm

sealed class Backend(val name: String) {
  data class CPU(val threadCount: Int? = null) : Backend("CPU")

  class GPU : Backend("GPU")
}

data class EngineConfig
@JvmOverloads
constructor(
  val modelPath: String,
  val backend: Backend = Backend.CPU(),
  val visionBackend: Backend? = null,
  val audioBackend: Backend? = null,
  val maxNumTokens: Int? = null,
  val maxNumImages: Int? = null,
  val cacheDir: String? = null,
)

data class SamplerConfig(val topK: Int, val topP: Double, val temperature: Double, val seed: Int = 0)

data class ConversationConfig
@JvmOverloads
constructor(
  val systemInstruction: Contents? = null,
  val initialMessages: List<Message> = listOf(),
  val samplerConfig: SamplerConfig? = null,
  val maxOutputToken: Int? = null,
  val enableSpeculativeDecoding: Boolean? = null,
  val chatTemplate: String? = null,
)
