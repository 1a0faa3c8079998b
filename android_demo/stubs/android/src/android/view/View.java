// Signature-only stub transcribed from the Android API level 35 public signature file (android.txt): only the
// members the demo app uses, with the nullability android.txt gives them. Compile-time type-checking only.
package android.view;
public class View {
    public View(android.content.Context context) { throw new RuntimeException("Stub!"); }
    public void setOnClickListener(@android.annotation.Nullable android.view.View.OnClickListener l) { throw new RuntimeException("Stub!"); }
    public void setEnabled(boolean enabled) { throw new RuntimeException("Stub!"); }
    public static interface OnClickListener { void onClick(android.view.View v); }
}
