// Signature-only stub transcribed from the Android API level 35 public signature file (android.txt): only the
// members the demo app uses, with the nullability android.txt gives them. Compile-time type-checking only.
package android.content;
public class Intent {
    public Intent() { throw new RuntimeException("Stub!"); }
    @android.annotation.Nullable public String getStringExtra(String name) { throw new RuntimeException("Stub!"); }
}
