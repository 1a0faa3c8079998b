// Signature-only stub transcribed from the Android API level 35 public signature file (android.txt): only the
// members the demo app uses, with the nullability android.txt gives them. Compile-time type-checking only.
package android.widget;
public class TextView extends android.view.View {
    public TextView(android.content.Context context) { super(null); throw new RuntimeException("Stub!"); }
    public CharSequence getText() { throw new RuntimeException("Stub!"); }
    public final void setText(CharSequence text) { throw new RuntimeException("Stub!"); }
}
