// Signature-only stub transcribed from the Android API level 35 public signature file (android.txt): only the
// members the demo app uses, with the nullability android.txt gives them. Compile-time type-checking only.
package android.os;
public class BatteryManager {
    BatteryManager() { throw new RuntimeException("Stub!"); }
    public long getLongProperty(int id) { throw new RuntimeException("Stub!"); }
    public static final int BATTERY_PROPERTY_ENERGY_COUNTER = 5; // 0x5
}
