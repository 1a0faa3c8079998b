// Signature-only stub transcribed from the Android API level 35 public signature file (android.txt): only the
// members the demo app uses, with the nullability android.txt gives them. Compile-time type-checking only.
package android.os;
public class Build {
    public Build() { throw new RuntimeException("Stub!"); }
    public static final String MANUFACTURER = null;
    public static final String MODEL = null;
    public static class VERSION {
        public VERSION() { throw new RuntimeException("Stub!"); }
        public static final String RELEASE = null;
    }
}
