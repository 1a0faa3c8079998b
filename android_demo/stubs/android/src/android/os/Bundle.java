// Signature-only stub transcribed from the Android API level 35 public signature file (android.txt): only the
// members the demo app uses, with the nullability android.txt gives them. Compile-time type-checking only.
package android.os;
public final class Bundle {
    public Bundle() { throw new RuntimeException("Stub!"); }
}
