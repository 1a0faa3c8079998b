package dev.mtplite.demo

import android.app.Activity
import android.content.Context
import android.os.BatteryManager
import android.os.Bundle
import android.os.Debug
import android.os.Process
import android.util.Log
import android.view.View
import android.widget.Button
import android.widget.CheckBox
import android.widget.EditText
import android.widget.TextView
import dev.mtplite.core.BenchFailure
import dev.mtplite.core.BenchRecord
import dev.mtplite.core.Draft
import dev.mtplite.core.HeadGraph
import dev.mtplite.core.GatedDraft
import dev.mtplite.core.Sampler
import dev.mtplite.core.HybridDrafter
import dev.mtplite.core.Json
import dev.mtplite.core.JsonlWriter
import dev.mtplite.core.Memory
import dev.mtplite.core.Vocab
import dev.mtplite.core.generate
import dev.mtplite.core.parseManifest
import dev.mtplite.core.promptIds
import dev.mtplite.core.promptTooLong
import java.io.File
import kotlin.concurrent.thread

/**
 * Thin Android shell over dev.mtplite.core. The bundle (OUT/android from `mtplite export`) is pushed with adb into
 * getExternalFilesDir(null)/bundle. Two ways in:
 *  - the screen: type a prompt, watch tokens stream with live tokens/s and accept length;
 *  - headless: `adb shell am start -n dev.mtplite.demo/.MainActivity --es mode bench --es out bench.jsonl`
 *    runs plain and MTP on bench_prompts.jsonl (and the official engine on model.litertlm, where pushed), writes
 *    one JSONL record per (mode, prompt) and finishes.
 */
class MainActivity : Activity() {
    private val tag = "mtplite"
    private var bundle: LiteRtBundle? = null

    // findViewById is @Nullable in some SDK versions and a platform type in others: one explicit check either way
    private fun <T : View> view(id: Int): T = checkNotNull(findViewById<T>(id)) { "activity_main.xml has no view $id" }

    override fun onCreate(savedInstanceState: Bundle?) {
        super.onCreate(savedInstanceState)
        setContentView(R.layout.activity_main)
        val dir = File(getExternalFilesDir(null), "bundle")
        val stats = view<TextView>(R.id.stats)
        val bench = intent.getStringExtra("mode") == "bench"
        val manifest = try { parseManifest(File(dir, "manifest.json").readText(), "manifest.json") } catch (e: Exception) {
            stats.text = "No valid bundle in $dir: ${e.message}\nadb push OUT/android $dir"
            // headless: the README's `adb logcat -s mtplite` must show why nothing runs
            Log.e(tag, "no valid bundle in $dir: ${e.message}")
            if (bench) finish()
            return
        }
        if (bench) {
            val out = File(getExternalFilesDir(null), intent.getStringExtra("out") ?: "bench.jsonl")
            val maxNew = intent.getStringExtra("max_new_tokens")?.toIntOrNull() ?: 64
            val sampler = try { Sampler.fromExtras { intent.getStringExtra(it) } } catch (e: IllegalArgumentException) {
                Log.e(tag, "bad sampling extras: ${e.message}", e); finish(); return
            }
            thread {
                // under the mtplite tag: an uncaught exception would be logged as AndroidRuntime, which
                // `adb logcat -s mtplite` hides, and the user would wait for "bench written" forever
                try { runBench(dir, manifest, out, maxNew, sampler) } catch (e: Throwable) {
                    Log.e(tag, "bench failed: $e", e)
                } finally { runOnUiThread { finish() } }
            }
            return
        }
        val vocab = Vocab.fromTokenizerJson(File(dir, manifest.files.getValue("tokenizer")).readText())
        val bundle = LiteRtBundle(dir, manifest).also { bundle = it }
        bundle.gate = GatedDraft(manifest.minProb)  // the head drafts only while it is sure (0 = always)
        bundle.useContext = bundle.useContext && manifest.drafter != HeadGraph.PER_STEP  // the graph the settings chose
        stats.text = "settings: ${manifest.settingsSource ?: "export default"} (${manifest.draft.wire})"
        view<Button>(R.id.run).setOnClickListener {
            val text = view<EditText>(R.id.prompt).text.toString()
            // the calibrated setting wins: `mtplite calibrate` may have switched drafting off for this device class
            val mtp = view<CheckBox>(R.id.mtp).isChecked && manifest.draft != Draft.OFF
            val output = view<TextView>(R.id.output)
            bundle.sampler = try { Sampler.parse(view<EditText>(R.id.sampling).text.toString()) } catch (e: IllegalArgumentException) {
                stats.text = e.message
                return@setOnClickListener
            }
            // the user's message inside the backbone's chat turn, as the instruction-tuned model was trained to see it
            val ids = promptIds(manifest, vocab.encode(text))
            promptTooLong(ids.size, manifest.cacheLength)?.let { stats.text = it; return@setOnClickListener }
            output.text = ""
            thread { try {
                bundle.reset()
                val emitted = ArrayList<Int>()
                val t0 = System.nanoTime()
                // who drafts: calibrate's choice for this device (settings.draft): the head, hybrid or lookup alone
                val hybrid = when (manifest.draft) {
                    Draft.HYBRID -> HybridDrafter(ids, bundle, manifest.hybridMinNgram(bundle.useContext))
                    Draft.LOOKUP -> HybridDrafter(ids, null)
                    Draft.MTP, Draft.OFF -> null
                }
                val g = generate(ids, bundle, hybrid ?: bundle, if (mtp) manifest.k else 0, 256, manifest.eosIds.toSet(),
                    manifest.cacheLength, onToken = { t ->
                        hybrid?.record(t)
                        emitted.add(t)
                        val s = vocab.decode(emitted)
                        val tps = emitted.size / ((System.nanoTime() - t0) / 1e9)
                        runOnUiThread { output.text = s; stats.text = "%.1f tok/s".format(tps) }
                    })
                runOnUiThread {
                    stats.text = "%.1f tok/s, accept length %s, TTFT %.0f ms".format(
                        (g.tokens.size - 1) / ((g.totalNs - g.ttftNs) / 1e9), g.acceptLength?.let { "%.2f".format(it) } ?: "-",
                        g.ttftNs / 1e6)
                }
            } catch (e: Exception) {  // a message on screen, not a dead app
                Log.e(tag, "generation failed: $e", e)
                runOnUiThread { stats.text = "Generation failed: ${e.message}" }
            } }
        }
    }

    override fun onDestroy() {
        bundle?.close()
        bundle = null
        super.onDestroy()
    }

    private fun pss(): Long = Debug.MemoryInfo().also { Debug.getMemoryInfo(it) }.totalPss * 1024L

    // the battery's remaining energy in nWh; null where the device does not expose the counter (it then reads
    // Long.MIN_VALUE or 0)
    private fun energyNwh(): Long? = (getSystemService(Context.BATTERY_SERVICE) as? BatteryManager)
        ?.getLongProperty(BatteryManager.BATTERY_PROPERTY_ENERGY_COUNTER)?.takeIf { it > 0 }

    private fun runBench(dir: File, man: dev.mtplite.core.Manifest, out: File, maxNew: Int, sampler: Sampler) {
        val prompts = File(dir, "bench_prompts.jsonl").readLines().filter { it.isNotBlank() }.map { Json.parse(it) as Map<*, *> }
        val device = "${android.os.Build.MANUFACTURER} ${android.os.Build.MODEL} (Android ${android.os.Build.VERSION.RELEASE})"
        val weights = man.files.filterKeys { it != "tokenizer" }.mapValues { File(dir, it.value).length() }
        JsonlWriter(out).use { w ->
            // as `mtplite bench`: '+gate' modes only when calibrate chose a gate; hybrid = prompt lookup, else the head
            // '+ctx' when the bundle has drafter_ctx: the head also drafts the text's own ids outside its draft space
            val modes = listOf("plain", "mtp", "hybrid") + (if (man.minProb > 0) listOf("mtp+gate", "hybrid+gate") else emptyList()) +
                (if (man.context != null) listOf("mtp+ctx", "hybrid+ctx") else emptyList())
            for (mode in modes) try {
                val spec = mode != "plain"
                val before = pss()
                // one mode's bundle at a time: `use` releases its native buffers before the next mode loads, even
                // when a prompt throws
                LiteRtBundle(dir, man, withDrafter = spec, withContext = "+ctx" in mode).use { b ->
                    b.gate = GatedDraft(if (mode.endsWith("+gate")) man.minProb else 0.0)
                    b.useContext = "+ctx" in mode
                    val after = pss()
                    val wbytes = weights.getValue("backbone") + weights.getValue("embedder") +
                        (if (spec) weights.getValue("drafter") else 0L) +
                        (if ("+ctx" in mode) File(dir, man.context!!.file).length() else 0L)
                    for (p in prompts) w.item(device, mode, p["id"] as String, p["task"] as String) {
                        b.reset()
                        b.sampler = sampler
                        val ids = (p["ids"] as List<*>).map { (it as Long).toInt() }.toIntArray()
                        val hybrid = if (mode.startsWith("hybrid")) HybridDrafter(ids, b, man.hybridMinNgram("+ctx" in mode)) else null
                        val cpu0 = Process.getElapsedCpuTime()
                        val e0 = energyNwh()
                        val g = generate(ids, b, hybrid ?: b, if (spec) man.k else 0, maxNew, man.eosIds.toSet(),
                            man.cacheLength, onToken = hybrid?.let { h -> h::record })
                        val cpuS = (Process.getElapsedCpuTime() - cpu0) / 1e3
                        val e1 = energyNwh()
                        val rt = Runtime.getRuntime()
                        val mem = Memory(rt.totalMemory() - rt.freeMemory(), Debug.getNativeHeapAllocatedSize(), before, after,
                            wbytes, b.kvBytes, null)
                        Log.i(tag, "$mode ${p["id"]}: ${g.tokens.size} tokens, accept ${g.acceptLength}")
                        BenchRecord.from(device, mode, p["id"] as String, p["task"] as String, g, mem, cpuS,
                            if (e0 != null && e1 != null) e0 - e1 else null, sampler)
                    }?.let { Log.e(tag, "$mode ${p["id"]} failed: $it", it) }
                }
            } catch (e: Exception) {  // the mode's graphs did not load: logged in its place, the next mode runs
                w.write(BenchFailure(device, mode, "*", "*", "${e::class.simpleName}: ${e.message}"))
                Log.e(tag, "$mode failed: $e", e)
            }
            // the official engine on the same prompts, where the .litertlm was pushed beside the graphs; its MTP
            // verifies greedily whatever the sampler says, so sampling runs leave it out (as `mtplite bench` does)
            val litertlm = File(dir, "model.litertlm")
            if (!litertlm.isFile) Log.i(tag, "no model.litertlm in $dir: engine rows skipped")
            else if (!sampler.greedy) Log.i(tag, "sampling: the engine's MTP is greedy-only, engine rows skipped")
            else try {
                runEngineBench(litertlm, cacheDir, prompts, maxNew, man.cacheLength, device, w)
                    .forEach { Log.e(tag, "engine prompt failed: $it", it) }
            } catch (e: Exception) {  // the engine did not load the bundle
                w.write(BenchFailure(device, "engine", "*", "*", "${e::class.simpleName}: ${e.message}"))
                Log.e(tag, "engine failed: $e", e)
            }
        }
        Log.i(tag, "bench written to $out")
    }
}
