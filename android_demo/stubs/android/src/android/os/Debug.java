// Signature-only stub transcribed from the Android API level 35 public signature file (android.txt): only the
// members the demo app uses, with the nullability android.txt gives them. Compile-time type-checking only.
package android.os;
public final class Debug {
    Debug() { throw new RuntimeException("Stub!"); }
    public static void getMemoryInfo(android.os.Debug.MemoryInfo memoryInfo) { throw new RuntimeException("Stub!"); }
    public static long getNativeHeapAllocatedSize() { throw new RuntimeException("Stub!"); }
    public static class MemoryInfo {
        public MemoryInfo() { throw new RuntimeException("Stub!"); }
        public int getTotalPss() { throw new RuntimeException("Stub!"); }
    }
}
