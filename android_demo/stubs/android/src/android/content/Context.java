// Signature-only stub transcribed from the Android API level 35 public signature file (android.txt): only the
// members the demo app uses, with the nullability android.txt gives them. Compile-time type-checking only.
package android.content;
public abstract class Context {
    public Context() { throw new RuntimeException("Stub!"); }
    @android.annotation.Nullable public abstract java.io.File getExternalFilesDir(@android.annotation.Nullable String type);
    public abstract java.io.File getCacheDir();
    @android.annotation.Nullable public abstract Object getSystemService(@android.annotation.NonNull String name);
    public static final String BATTERY_SERVICE = "batterymanager";
}
