// Signature-only stub transcribed from the Android API level 35 public signature file (android.txt): only the
// members the demo app uses, with the nullability android.txt gives them. Compile-time type-checking only.
package android.os;
public class Process {
    public Process() { throw new RuntimeException("Stub!"); }
    public static final long getElapsedCpuTime() { throw new RuntimeException("Stub!"); }
}
