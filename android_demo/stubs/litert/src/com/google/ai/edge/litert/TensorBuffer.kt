// Signature-only stub of the LiteRT Kotlin API, transcribed from google-ai-edge/LiteRT tag v2.2.0
// (litert/kotlin/src/main/kotlin/com/google/ai/edge/litert), the version android_demo/app/build.gradle pins.
// Public and internal members keep their visibility; bodies are stubs. Compiled as its own module so internal
// members stay hidden from the app, as they are in the real AAR.
package com.google.ai.edge.litert

class TensorBuffer internal constructor(handle: Long) : JniHandle(handle) {
  @Throws(LiteRtException::class) fun writeInt(data: IntArray): Unit = throw NotImplementedError("stub")
  @Throws(LiteRtException::class) fun writeFloat(data: FloatArray): Unit = throw NotImplementedError("stub")
  @Throws(LiteRtException::class) fun writeInt8(data: ByteArray): Unit = throw NotImplementedError("stub")
  @Throws(LiteRtException::class) fun writeBoolean(data: BooleanArray): Unit = throw NotImplementedError("stub")
  @Throws(LiteRtException::class) fun writeLong(data: LongArray): Unit = throw NotImplementedError("stub")
  @Throws(LiteRtException::class) fun readInt(): IntArray = throw NotImplementedError("stub")
  @Throws(LiteRtException::class) fun readFloat(): FloatArray = throw NotImplementedError("stub")
  @Throws(LiteRtException::class) fun readInt8(): ByteArray = throw NotImplementedError("stub")
  @Throws(LiteRtException::class) fun readBoolean(): BooleanArray = throw NotImplementedError("stub")
  @Throws(LiteRtException::class) fun readLong(): LongArray = throw NotImplementedError("stub")

  protected override fun destroy(): Unit = throw NotImplementedError("stub")
}
