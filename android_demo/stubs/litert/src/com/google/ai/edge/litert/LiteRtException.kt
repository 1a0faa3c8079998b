// Signature-only stub of the LiteRT Kotlin API, transcribed from google-ai-edge/LiteRT tag v2.2.0
// (litert/kotlin/src/main/kotlin/com/google/ai/edge/litert), the version android_demo/app/build.gradle pins.
// Public and internal members keep their visibility; bodies are stubs. Compiled as its own module so internal
// members stay hidden from the app, as they are in the real AAR.
package com.google.ai.edge.litert

class LiteRtException(private val status: Status, message: String) : Exception(message) {
  constructor(code: Int, message: String) : this(Status.fromCode(code), message)
}

enum class Status(val code: Int) {
  Ok(0),
  ErrorInvalidArgument(1),
  ErrorMemoryAllocationFailure(2),
  ErrorRuntimeFailure(3),
  ErrorMissingInputTensor(4),
  ErrorUnsupported(5),
  ErrorNotFound(6),
  ErrorFileIO(500),
  ErrorInvalidFlatbuffer(501),
  ErrorCompilation(504);

  companion object {
    fun fromCode(code: Int): Status = throw NotImplementedError("stub")
  }
}
