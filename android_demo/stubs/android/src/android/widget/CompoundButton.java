// Signature-only stub transcribed from the Android API level 35 public signature file (android.txt): only the
// members the demo app uses, with the nullability android.txt gives them. Compile-time type-checking only.
package android.widget;
public abstract class CompoundButton extends android.widget.Button {
    public CompoundButton(android.content.Context context) { super(null); throw new RuntimeException("Stub!"); }
    public boolean isChecked() { throw new RuntimeException("Stub!"); }
    public void setChecked(boolean checked) { throw new RuntimeException("Stub!"); }
}
