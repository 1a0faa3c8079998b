// Signature-only stub transcribed from the Android API level 35 public signature file (android.txt): only the
// members the demo app uses, with the nullability android.txt gives them. Compile-time type-checking only.
package android.util;
public final class Log {
    Log() { throw new RuntimeException("Stub!"); }
    public static int i(@android.annotation.Nullable String tag, @android.annotation.NonNull String msg) { throw new RuntimeException("Stub!"); }
    public static int e(@android.annotation.Nullable String tag, @android.annotation.NonNull String msg) { throw new RuntimeException("Stub!"); }
    public static int e(@android.annotation.Nullable String tag, @android.annotation.Nullable String msg, @android.annotation.Nullable Throwable tr) { throw new RuntimeException("Stub!"); }
}
