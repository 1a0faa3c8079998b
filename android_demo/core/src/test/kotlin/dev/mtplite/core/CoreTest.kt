package dev.mtplite.core

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.io.File

/** A deterministic toy backbone: next = f(previous, position); the drafter is right except at every 4th position. */
private class ToyModel : Backbone, Drafter {
    val cache = HashMap<Int, Int>()
    fun next(tok: Int, pos: Int) = (tok * 31 + 7 + (pos % 5)) % 97
    override fun prefill(ids: IntArray, start: Int) { ids.forEachIndexed { i, t -> cache[start + i] = t } }
    override fun decode(token: Int, pos: Int): Decoded { cache[pos] = token; return Decoded(next(token, pos), FloatArray(1)) }
    override fun verify(tokens: IntArray, pos: Int): Verified {
        tokens.forEachIndexed { i, t -> cache[pos + i] = t }
        return Verified(IntArray(tokens.size) { next(tokens[it], pos + it) }, Array(tokens.size) { FloatArray(1) })
    }
    override fun draft(token: Int, activation: FloatArray, pos: Int, k: Int): IntArray {
        var t = token; var p = pos
        return IntArray(k) { t = next(t, p) + if ((p + 1) % 4 == 0) 1 else 0; p++; t }
    }
}

class CoreTest {
    private fun plain(n: Int, eos: Set<Int> = emptySet()) = generate(intArrayOf(1, 2, 3), ToyModel(), null, 0, n, eos, 256)
    private fun mtp(n: Int, eos: Set<Int> = emptySet()) = ToyModel().let { generate(intArrayOf(1, 2, 3), it, it, 3, n, eos, 256) }

    @Test fun mtpEqualsPlainForEveryBudget() {
        for (n in 1..40) {
            val a = plain(n); val b = mtp(n)
            assertEquals(a.tokens, b.tokens, "budget $n")
            assertEquals(n, b.tokens.size)
        }
        assertTrue(mtp(40).accepted > 0)
    }

    @Test fun eosInsideAnAcceptedBlock() {
        val full = plain(40).tokens
        for (i in 2 until 20) {
            val eos = setOf(full[i])
            val a = plain(40, eos); val b = mtp(40, eos)
            assertEquals(a.tokens, b.tokens)
            assertEquals(StopReason.EOS, b.stopReason)
        }
    }

    @Test fun cacheEndFallsBackToPlainDecode() {
        val m = ToyModel()
        val r = generate(IntArray(250) { it % 90 }, m, m, 3, 50, emptySet(), 256)
        val p = generate(IntArray(250) { it % 90 }, ToyModel(), null, 0, 50, emptySet(), 256)
        assertEquals(p.tokens, r.tokens)
        assertEquals(StopReason.CACHE_FULL, r.stopReason)
        assertEquals(256 - 250 + 1, r.tokens.size)
    }

    @Test fun promptLookup() {
        assertEquals(listOf(4, 5), lookup(listOf(1, 2, 3, 4, 5, 9, 2, 3), 2)!!.toList())
        assertEquals(listOf(5, 7, 7), lookup(listOf(7, 5, 7), 3)!!.toList())
        assertNull(lookup(listOf(1, 2, 3), 2))
        assertNull(lookup(listOf(7, 5, 7), 3, minNgram = 2))  // a longer minimum skips 1-token matches
        assertEquals(listOf(4, 5), lookup(listOf(1, 2, 3, 4, 5, 9, 2, 3), 2, minNgram = 2)!!.toList())
    }

    @Test fun hybridIsExactAndUsesBothSources() {
        for (n in listOf(5, 17, 40)) {
            val m = ToyModel()
            val prompt = intArrayOf(1, 2, 3, 1, 2)  // the toy's output repeats late: lookup then, the head before
            val h = HybridDrafter(prompt, m)
            val g = generate(prompt, m, h, 3, n, emptySet(), 256, onToken = h::record)
            assertEquals(generate(prompt, ToyModel(), null, 0, n, emptySet(), 256).tokens, g.tokens)
            if (n == 40) assertTrue("lookup" in h.sources && "head" in h.sources, h.sources.toString())
        }
    }

    @Test fun hybridCopiesOnlyMatchesOfItsMinimumLength() {
        val head = object : Drafter {
            override fun draft(token: Int, activation: FloatArray, pos: Int, k: Int) = IntArray(k) { 0 }
        }
        val oneToken = intArrayOf(7, 5, 7)  // the last token matched alone: lookup drafts [5, 7, 7]
        val threeTokens = intArrayOf(1, 2, 3, 9, 1, 2, 3)
        for ((minNgram, prompt, want) in listOf(Triple(1, oneToken, "lookup"), Triple(2, oneToken, "head"),
                                                  Triple(3, threeTokens, "lookup"), Triple(3, oneToken, "head"))) {
            val h = HybridDrafter(prompt, head, minNgram)
            h.draft(prompt.last(), FloatArray(0), prompt.size, 3)
            assertEquals(listOf(want), h.sources, "minNgram $minNgram on ${prompt.toList()}")
        }
    }

    @Test fun confidenceGate() {
        // draft vocabulary = ids 0..2, the rest NEG_INF as the exported head scatters it; logits per draft step
        fun logits(vararg x: Float) = FloatArray(6) { if (it < x.size) x[it] else NEG_INF }
        val table = listOf(logits(3f, 0f, 0f), logits(0f, 0.5f, 0f), logits(0f, 0f, 5f))
        var calls = 0
        val step = { _: Int, a: FloatArray -> DraftStep(table[calls++], a) }
        fun run(g: GatedDraft): List<Int>? { calls = 0; return g.draft(9, FloatArray(1), 3, step = step)?.toList() }
        assertEquals(listOf(0, 1, 2), run(GatedDraft(0.0)))
        val g = GatedDraft(0.5)
        assertEquals(listOf(0, 1, 2), run(g))  // the first draft is sure: all k drafts, an unsure later one too
        assertEquals(Math.exp(3.0) / (Math.exp(3.0) + 2), g.lastProbs[0], 1e-6)
        assertEquals(Math.exp(0.5) / (Math.exp(0.5) + 2), g.lastProbs[1], 1e-6)
        assertEquals(3, calls)
        assertNull(run(GatedDraft(0.96)))  // the first draft is unsure: a plain step
        assertEquals(1, calls)
        // the K-step drafter's ids and probabilities: the same rule
        assertEquals(listOf(4, 5, 6), GatedDraft(0.5).drafts(intArrayOf(4, 5, 6), floatArrayOf(0.6f, 0.1f, 0.9f))?.toList())
        assertNull(GatedDraft(0.5).drafts(intArrayOf(4, 5, 6), floatArrayOf(0.4f, 0.9f, 0.9f)))
    }

    @Test fun gatedHeadStaysExact() {
        for (n in listOf(5, 17, 40)) {
            val m = ToyModel()
            var sure = 0
            val gated = object : Drafter {  // declines every other cycle, as an unsure head does
                override fun draft(token: Int, activation: FloatArray, pos: Int, k: Int) =
                    if (sure++ % 2 == 0) null else m.draft(token, activation, pos, k)
            }
            val g = generate(intArrayOf(1, 2, 3), m, gated, 3, n, emptySet(), 256)
            assertEquals(plain(n).tokens, g.tokens)
            assertEquals(g.backbonePasses, 1 + g.cycles + g.plainSteps)
            if (n == 40) assertTrue(g.plainSteps > 0 && g.cycles > 0)
        }
    }

    @Test fun gating() {
        assertEquals(3, chooseK(10.0, 12.0, 0.5, listOf(0.8, 0.6, 0.4), 3))
        assertNull(chooseK(10.0, 30.0, 5.0, listOf(0.1, 0.0, 0.0), 3))
    }

    @Test fun jsonRoundTrip() {
        val v = mapOf("a" to listOf(1L, 2L), "s" to "x\"y\n", "n" to null, "d" to 1.5, "b" to true)
        assertEquals(v, Json.parse(Json.write(v)))
    }

    @Test fun writesSampleDeviceLog() {
        val out = System.getProperty("mtplite.logOut") ?: return
        JsonlWriter(File(out)).use { w ->
            for ((i, mode) in listOf("plain", "mtp", "plain", "mtp").withIndex()) {
                val g = if (mode == "mtp") mtp(24 + i) else plain(24 + i)
                val mem = Memory(50_000_000, 400_000_000, 100_000_000, 600_000_000, 300_000_000, 12_000_000,
                    if (mode == "mtp") 130_000_000 else null)
                w.write(BenchRecord.from("JVM test (ToyModel)", mode, "p$i", if (i < 2) "summarize" else "code", g, mem,
                    cpuS = 0.01 * g.tokens.size, energyNwh = if (i % 2 == 0) 1000L else null))
            }
            // the official engine's rows as runEngineBench writes them: MTP off, then on (one reply differs)
            for (mode in ENGINE_MODES) for (i in 0 until 4) {
                val tps = if (mode == "engine") 40.0 else 50.0
                w.write(EngineRecord("JVM test (ToyModel)", mode, "p$i", if (i < 2) "summarize" else "code", 30, tps, 0.05,
                    if (mode == "engine+mtp" && i == 3) "another reply" else "reply $i"))
            }
            // a prompt that throws becomes a failure record in its place, and the run goes on
            val e = w.item("JVM test (ToyModel)", "mtp", "p4", "code") {
                generate(IntArray(600) { 1 }, ToyModel(), null, 0, 8, emptySet(), 256); error("unreachable")
            }
            assertTrue(e is IllegalArgumentException && "cache holds 256" in e.message!!)
        }
    }

    @Test fun enginePromptsAreTheMessagesTheConversationApiTakes() {
        assertEquals(EnginePrompt(emptyList(), "Summarize: x"), EnginePrompt.from(mapOf("id" to "a", "prompt" to "Summarize: x")))
        val chat = listOf(mapOf("role" to "user", "content" to "hi"), mapOf("role" to "assistant", "content" to "hello"),
            mapOf("role" to "user", "content" to "and then?"))
        assertEquals(EnginePrompt(listOf("user" to "hi", "assistant" to "hello"), "and then?"),
            EnginePrompt.from(mapOf("id" to "b", "prompt" to chat)))
        // a bundle exported before prompts carried their text: a message naming the fix, not a crash later
        val e = assertThrows(IllegalArgumentException::class.java) { EnginePrompt.from(mapOf("id" to "c", "ids" to listOf(1L))) }
        assertTrue("re-export" in e.message!!)
        assertThrows(IllegalArgumentException::class.java) { EnginePrompt.from(mapOf("id" to "d", "prompt" to chat.take(2))) }
        assertThrows(IllegalArgumentException::class.java) { EngineRecord("d", "mtp", "a", "t", 1, 1.0, 0.0, "") }
    }

    @Test fun failedItemIsLoggedAndTheRunGoesOn() {
        val f = File.createTempFile("bench", ".jsonl")
        JsonlWriter(f).use { w ->
            assertNull(w.item("d", "plain", "a", "t") { BenchRecord.from("d", "plain", "a", "t", plain(4), Memory(0, 0, 0, 0, 0, 0, null)) })
            assertTrue(w.item("d", "mtp", "b", "t") { throw IllegalStateException("drafter failed") } is IllegalStateException)
        }
        val lines = f.readLines().map { Json.parse(it) as Map<*, *> }
        assertEquals(listOf("plain", "mtp"), lines.map { it["mode"] })
        assertEquals("IllegalStateException: drafter failed", lines[1]["error"])
        assertEquals(LOG_SCHEMA, lines[1]["schema"])
    }

    @Test fun promptIdsWrapTheMessageInTheChatTurn() {
        val base = parseManifest(File(System.getProperty("mtplite.manifests") ?: return, "good.json").readText(), "good.json")
        val bos = listOfNotNull(base.bosId)
        assertEquals(bos + listOf(7, 8), promptIds(base, listOf(7, 8)).toList())  // a base model: the bare text
        val chat = base.copy(chatTurn = ChatTurn(listOf(1, 2), listOf(3)))
        assertEquals(bos + listOf(1, 2, 7, 8, 3), promptIds(chat, listOf(7, 8)).toList())
        assertNull(promptTooLong(255, 256))
        assertTrue("256" in promptTooLong(256, 256)!!)
    }
}

/** Replays golden traces written by the Python runtime: same calls, same arguments, same outputs, same tokens. */
class GoldenTraceTest {
    private class Replay(lines: List<String>) : Backbone, Drafter {
        val calls = ArrayDeque(lines)
        fun take(kind: String): List<String> {
            val l = calls.removeFirstOrNull() ?: error("no more recorded calls, wanted $kind")
            val f = l.split(" ")
            assertEquals(kind, f[0], "call order: $l")
            return f.drop(1)
        }
        fun ints(s: String) = if (s.isBlank()) IntArray(0) else s.trim().split(" ").map { it.toInt() }.toIntArray()
        override fun prefill(ids: IntArray, start: Int) {
            val f = take("prefill"); assertEquals(f[0].toInt(), start); assertEquals(f.drop(1).map { it.toInt() }, ids.toList())
        }
        override fun decode(token: Int, pos: Int): Decoded {
            val f = take("decode"); assertEquals(listOf(f[0].toInt(), f[1].toInt()), listOf(token, pos))
            return Decoded(f[2].toInt(), FloatArray(0))
        }
        override fun verify(tokens: IntArray, pos: Int): Verified {
            val f = take("verify").joinToString(" ").split("|")
            val head = ints(f[0]); assertEquals(pos, head[0]); assertEquals(head.drop(1), tokens.toList())
            val ys = ints(f[1]); return Verified(ys, Array(ys.size) { FloatArray(0) })
        }
        override fun draft(token: Int, activation: FloatArray, pos: Int, k: Int): IntArray? {
            val f = take("draft"); assertEquals(listOf(f[0].toInt(), f[1].toInt(), f[2].toInt()), listOf(token, pos, k))
            return if (f[3] == "none") null else f.drop(3).map { it.toInt() }.toIntArray()
        }
    }

    @Test fun reproducesEveryGoldenTrace() {
        val dir = File(System.getProperty("mtplite.golden") ?: return)
        val files = dir.listFiles { f -> f.name.endsWith(".trace") }!!.sorted()
        assertTrue(files.isNotEmpty(), "no golden traces in $dir")
        for (f in files) {
            val lines = f.readLines()
            fun field(k: String) = lines.first { it.startsWith("$k ") }.removePrefix("$k ")
            val prompt = field("prompt").split(" ").map { it.toInt() }.toIntArray()
            val (k, maxNew, cache) = field("params").split(" ").map { it.toInt() }
            val eos = field("eos").split(" ").filter { it.isNotBlank() }.map { it.toInt() }.toSet()
            val replay = Replay(lines.filter { it.split(" ")[0] in setOf("prefill", "decode", "verify", "draft") })
            val g = generate(prompt, replay, replay, k, maxNew, eos, cache)
            assertEquals(field("tokens").split(" ").filter { it.isNotBlank() }.map { it.toInt() }, g.tokens, f.name)
            assertEquals(field("stop"), g.stopReason.wire, f.name)
            val cycles = lines.filter { it.startsWith("cycle ") }.map { it.removePrefix("cycle ") }
            assertEquals(cycles, g.trace.map { c ->
                "${c.pos} ${c.accepted} | ${c.drafted.joinToString(" ")} | ${c.verify.joinToString(" ")} | ${c.emitted.joinToString(" ")}"
            }, f.name)
            assertTrue(replay.calls.isEmpty(), "${f.name}: ${replay.calls.size} recorded calls were not made")
        }
        println("golden traces reproduced: ${files.size}")
    }
}

/** The manifest fixtures Python also checks: the same ones must be accepted / refused, naming the same thing. */
class ManifestFixtureTest {
    @Test fun sameDecisionsAsPython() {
        val dir = File(System.getProperty("mtplite.manifests") ?: return)
        val files = dir.listFiles { f -> f.name.endsWith(".json") }!!.sorted()
        assertTrue(files.isNotEmpty())
        val report = StringBuilder()
        for (f in files) {
            val expect = File(f.path.removeSuffix(".json") + ".expect").readText().trim()
            val got = try { parseManifest(f.readText(), f.name); "ok" } catch (e: ManifestError) { "refuse ${e.message}" }
            if (expect == "ok") assertEquals("ok", got, f.name)
            else {
                assertTrue(got.startsWith("refuse"), "${f.name}: Kotlin accepted what Python refused ($expect)")
                val key = expect.removePrefix("refuse ")
                assertTrue(key in got, "${f.name}: Kotlin refusal '$got' does not name '$key'")
            }
            report.append("${f.name}: ${got.take(100)}\n")
        }
        // calibrate's hybrid choice per drafter reaches the loop; a drafter it did not measure keeps the default
        val hm = parseManifest(File(dir, "hybrid-ok.json").readText(), "hybrid-ok.json")
        assertEquals(listOf(1, 3), listOf(hm.hybridMinNgram(false), hm.hybridMinNgram(true)))
        val gate = parseManifest(File(dir, "gate-ok.json").readText(), "gate-ok.json")
        assertEquals(HYBRID_MIN_NGRAM, gate.hybridMinNgram(true))
        assertEquals(listOf(Draft.MTP, Draft.LOOKUP), listOf(gate.draft, parseManifest(File(dir, "draft-ok.json").readText(), "d").draft))
        // the K-step drafter's windows (the cache's first W slots): the narrowest that holds every slot a draft reads
        val ctx = parseManifest(File(dir, "good.json").readText(), "good.json").context!!
        assertEquals(listOf(16, 32, 64), ctx.windows)
        assertEquals(listOf("mtp_draft_k_16", "mtp_draft_k_32", "mtp_draft_k_32", "mtp_draft_k_64", "mtp_draft_k"),
            listOf(1, 17, 32, 33, 65).map { ctx.signatureAt(it) })
        File(dir, "kotlin-decisions.txt").writeText(report.toString())
    }
}

/** The context draft space picks what Python's context_ids picks (golden cases written by tests/test_kotlin.py). */
class ContextSpaceTest {
    @Test fun newestDistinctIdsOutsideTheSpaceBeforePos() {
        val cs = ContextSpace(intArrayOf(1, 2, 3), 10, 2)
        val h = intArrayOf(1, 7, 2, 8, 7, 9, 3)
        assertEquals(listOf(7 to 4, 8 to 3), cs.pick(h, 5))  // 9 at position 5 is not cached yet
        assertEquals(listOf(9 to 5, 7 to 4), cs.pick(h, 7))
        assertEquals(emptyList<Pair<Int, Int>>(), cs.pick(h, 1))
        val r = unitRms(floatArrayOf(3f, -4f))
        assertEquals(1.0, (r[0] * r[0] + r[1] * r[1]) / 2.0, 1e-5)
    }

    @Test fun sameIdsAsPython() {
        val f = File(System.getProperty("mtplite.golden") ?: return, "context.golden")
        val lines = f.readLines()
        val space = lines[0].removePrefix("space ").split(" ").map { it.toInt() }.toIntArray()
        val vocab = lines[1].removePrefix("vocab ").toInt()
        val cs = ContextSpace(space, vocab, lines[2].removePrefix("max ").toInt())
        var n = 0
        for (l in lines.drop(3)) {
            val (pos, hist, want) = l.removePrefix("case ").split(" | ")
            val h = hist.split(" ").map { it.toInt() }.toIntArray()
            assertEquals(want, cs.pick(h, pos.toInt()).joinToString(" ") { "${it.first}@${it.second}" }, l)
            n++
        }
        assertTrue(n >= 20)
    }
}

/** The seeded sampler picks what Python's picks (golden cases written by tests/test_sampling.py), and parses what
 * the screen and the intent extras give it. */
class SamplerTest {
    @Test fun sameTokensAsPython() {
        val f = File(System.getProperty("mtplite.golden") ?: return, "sampling.golden")
        var n = 0
        for (l in f.readLines().filter { it.isNotBlank() }) {
            val (head, logits) = l.split(" | ")
            val h = head.split(" ")
            val s = Sampler(h[0].toDouble(), h[1].toInt(), h[2].toDouble(), h[3].toLong())
            val lg = logits.split(" ").map { it.toFloat() }.toFloatArray()
            assertEquals(h[5].toInt(), s.pick(lg, h[4].toInt()), l.take(80))
            n++
        }
        assertTrue(n >= 100)
        println("sampling golden cases reproduced: $n")
    }

    @Test fun parsesSettingsAndRefusesBadOnes() {
        assertEquals(Sampler(), Sampler.parse(""))
        assertEquals(Sampler(0.7, 64, 0.95, 3), Sampler.parse(" 0.7 64 0.95 3 "))
        assertEquals(Sampler(1.0, 0, 1.0, 0), Sampler.parse("1"))
        assertEquals(Sampler(0.7, 64, 1.0, 0), Sampler.fromExtras { mapOf("temperature" to "0.7", "top_k" to "64")[it] })
        assertEquals(Sampler(), Sampler.fromExtras { null })
        for (bad in listOf("-1", "0.7 -2", "0.7 0 0", "0.7 0 1.5", "x", "1 2 0.5 4 5"))
            assertThrows(IllegalArgumentException::class.java, { Sampler.parse(bad) }, bad)
    }

    @Test fun seedsAndPositionsGiveTheirOwnUniforms() {
        val us = (0 until 1000).map { Sampler.uniform(7, it.toLong()) }
        assertTrue(us.all { it >= 0 && it < 1 } && us.toSet().size == 1000)
        assertTrue(Sampler.uniform(7, 5) != Sampler.uniform(8, 5))
    }
}
