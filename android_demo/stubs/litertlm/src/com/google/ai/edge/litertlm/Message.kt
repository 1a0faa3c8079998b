// Signature-only stub of the LiteRT-LM Kotlin API (the subset the demo calls), transcribed from google-ai-edge/LiteRT-LM
// kotlin/java/com/google/ai/edge/litertlm for litertlm-android 0.18.1, the version android_demo/app/build.gradle pins.
// Public and internal members keep their visibility; bodies are stubs. Compiled as its own module, like the LiteRT stub.
package com.google.ai.edge.litertlm

enum class Role(val value: String) {
  SYSTEM("system"),
  USER("user"),
  MODEL("model"),
  TOOL("tool"),
}

sealed class Content {
  data class Text(val text: String) : Content() {
    override fun toString() = text
  }
}

class Contents private constructor(val contents: List<Content>) {
  override fun toString() = contents.joinToString("")

  companion object {
    fun of(text: String): Contents = Contents(listOf(Content.Text(text)))

    fun of(contents: List<Content>): Contents = Contents(contents)
  }
}

class Message internal constructor(val role: Role, val contents: Contents) {
  override fun toString() = contents.toString()

  companion object {
    fun user(text: String): Message = Message(Role.USER, Contents.of(text))

    fun model(text: String): Message = Message(Role.MODEL, Contents.of(text))

    fun system(text: String): Message = Message(Role.SYSTEM, Contents.of(text))
  }
}
