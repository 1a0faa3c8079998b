// Signature-only stub transcribed from the Android API level 35 public signature file (android.txt): only the
// members the demo app uses, with the nullability android.txt gives them. Compile-time type-checking only.
package android.app;
public class Activity extends android.view.ContextThemeWrapper {
    public Activity() { throw new RuntimeException("Stub!"); }
    protected void onCreate(@android.annotation.Nullable android.os.Bundle savedInstanceState) { throw new RuntimeException("Stub!"); }
    protected void onDestroy() { throw new RuntimeException("Stub!"); }
    public void setContentView(int layoutResID) { throw new RuntimeException("Stub!"); }
    @android.annotation.Nullable public <T extends android.view.View> T findViewById(int id) { throw new RuntimeException("Stub!"); }
    @android.annotation.NonNull public final <T extends android.view.View> T requireViewById(int id) { throw new RuntimeException("Stub!"); }
    public android.content.Intent getIntent() { throw new RuntimeException("Stub!"); }
    public final void runOnUiThread(Runnable action) { throw new RuntimeException("Stub!"); }
    public void finish() { throw new RuntimeException("Stub!"); }
}
