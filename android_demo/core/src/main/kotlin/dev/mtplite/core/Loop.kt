package dev.mtplite.core

/**
 * The draft/verify loop, with exactly the semantics of mtplite.model.generate.run (Python):
 * the first step after prefill is a plain decode; each cycle drafts K tokens at a fixed position, verifies
 * [last, d1..dK] in one pass and accepts the longest matching prefix plus one bonus token. Never emits past the
 * budget, stops exactly at EOS even inside an accepted block, and falls back to plain decode near the cache end.
 */

/** Result of one backbone step: greedy next token and the last-layer activation row that produced it. */
class Decoded(val token: Int, val activation: FloatArray)

/** Result of a verify pass over K+1 tokens: greedy argmax and activation per row. */
class Verified(val argmax: IntArray, val activations: Array<FloatArray>)

interface Backbone {
    fun prefill(ids: IntArray, start: Int)
    fun decode(token: Int, pos: Int): Decoded
    fun verify(tokens: IntArray, pos: Int): Verified
}

/** `pos` is the position of `token`, whose KV is not cached yet. Returns k drafts, or null for a plain step. */
interface Drafter {
    fun draft(token: Int, activation: FloatArray, pos: Int, k: Int): IntArray?
}

/** Token ids -> embedding rows (the family's embedding scale is inside the embedder graph). */
interface Embedder {
    fun embed(ids: IntArray): Array<FloatArray>
}

/** Why a generation ended; [wire] is the name `mtplite` (model/generate.py) gives it. */
enum class StopReason(val wire: String) {
    EOS("eos"), MAX_NEW_TOKENS("max_new_tokens"), STOP("stop"), CACHE_FULL("cache_full")
}

data class Cycle(val pos: Int, val drafted: List<Int>, val verify: List<Int>, val accepted: Int, val emitted: List<Int>)

data class Generation(
    val tokens: List<Int>,
    val stopReason: StopReason,
    val trace: List<Cycle>,
    val cycles: Int,
    val drafted: Int,
    val accepted: Int,
    val perDepth: IntArray,
    val ttftNs: Long,
    val totalNs: Long,
    val draftNs: Long,
    val verifyNs: Long,
    val plainSteps: Int = 0,
) {
    /** decode/verify calls after prefill: tokens per pass is the fair speed proxy across drafters (plain = 1). */
    val backbonePasses: Int get() = 1 + cycles + plainSteps
    /** Mean tokens emitted per verify pass, bonus included. */
    val acceptLength: Double? get() = if (cycles > 0) (accepted + cycles).toDouble() / cycles else null
    val acceptancePerDepth: List<Double> get() = if (cycles > 0) perDepth.map { it.toDouble() / cycles } else emptyList()
}

fun generate(
    prompt: IntArray,
    backbone: Backbone,
    drafter: Drafter?,
    k: Int,
    maxNewTokens: Int,
    eosIds: Set<Int>,
    cacheLength: Int,
    shouldStop: ((List<Int>) -> Boolean)? = null,
    onToken: ((Int) -> Unit)? = null,
    clock: () -> Long = System::nanoTime,
): Generation {
    require(prompt.isNotEmpty()) { "empty prompt" }
    require(prompt.size <= cacheLength - 1) { "prompt is ${prompt.size} tokens but the cache holds $cacheLength" }
    require(k == 0 || drafter != null) { "k > 0 needs a drafter" }
    val out = ArrayList<Int>()
    val trace = ArrayList<Cycle>()
    val perDepth = IntArray(maxOf(k, 1))
    var cycles = 0; var drafted = 0; var accepted = 0; var plainSteps = 0
    var draftNs = 0L; var verifyNs = 0L
    var reason: StopReason? = null
    val t0 = clock()
    if (maxNewTokens <= 0) return Generation(out, StopReason.MAX_NEW_TOKENS, trace, 0, 0, 0, perDepth, 0, 0, 0, 0)

    fun emit(t: Int): Boolean {
        if (t in eosIds) { reason = StopReason.EOS; return false }
        out.add(t)
        onToken?.invoke(t)
        if (out.size >= maxNewTokens) reason = StopReason.MAX_NEW_TOKENS
        else if (shouldStop != null && shouldStop(out)) reason = StopReason.STOP
        return reason == null
    }

    val p = prompt.size
    if (p > 1) backbone.prefill(prompt.copyOfRange(0, p - 1), 0)
    var step = backbone.decode(prompt[p - 1], p - 1)
    val ttft = clock() - t0
    var tok = step.token
    var act = step.activation
    var pos = p
    var alive = emit(tok)
    while (alive) {
        if (pos >= cacheLength) { reason = StopReason.CACHE_FULL; break }
        if (k == 0 || pos + k >= cacheLength) {
            plainSteps++
            step = backbone.decode(tok, pos); tok = step.token; act = step.activation; pos += 1
            alive = emit(tok); continue
        }
        val t1 = clock()
        val drafts = drafter!!.draft(tok, act, pos, k)
        val t2 = clock()
        draftNs += t2 - t1  // declined drafts cost time too (a gated head ran a step before it declined)
        if (drafts == null) {
            plainSteps++
            step = backbone.decode(tok, pos); tok = step.token; act = step.activation; pos += 1
            alive = emit(tok); continue
        }
        val ver = backbone.verify(intArrayOf(tok) + drafts, pos)
        verifyNs += clock() - t2
        var n = 0
        while (n < k && drafts[n] == ver.argmax[n]) { perDepth[n]++; n++ }
        val block = drafts.take(n) + ver.argmax[n]
        cycles++; drafted += k; accepted += n
        val emitted = ArrayList<Int>()
        for (t in block) {
            alive = emit(t)
            emitted.add(t)
            if (!alive) break
        }
        trace.add(Cycle(pos, drafts.toList(), ver.argmax.toList(), n, emitted))
        tok = ver.argmax[n]; act = ver.activations[n]; pos += n + 1
    }
    return Generation(out, reason ?: StopReason.MAX_NEW_TOKENS, trace, cycles, drafted, accepted, perDepth, ttft,
        clock() - t0, draftNs, verifyNs, plainSteps)
}

/** Prompt lookup: the k tokens after the latest earlier match of the last 3/2/1 tokens, or null. */
fun lookup(history: List<Int>, k: Int, maxNgram: Int = 3, minNgram: Int = 1): IntArray? {
    val l = history.size
    for (n in minOf(maxNgram, l - 1) downTo minNgram) {
        val tail = history.subList(l - n, l)
        for (s in l - n - 1 downTo 0) {
            if (history.subList(s, s + n) == tail) {
                val cont = history.subList(s + n, minOf(s + n + k, l))
                if (cont.isNotEmpty()) return IntArray(k) { if (it < cont.size) cont[it] else cont.last() }
            }
        }
    }
    return null
}

/** Auto-gating from measured step times, as `mtplite calibrate`: K if the predicted speedup beats 1.05x. */
fun chooseK(decodeMs: Double, verifyMs: Double, drafterStepMs: Double, acceptancePerDepth: List<Double>, k: Int): Int? {
    val tau = 1.0 + acceptancePerDepth.take(k).sum()
    val speedup = tau * decodeMs / (k * drafterStepMs + verifyMs)
    return if (speedup > 1.05) k else null
}

/**
 * Shortest lookup match hybrid drafting copies where the manifest holds no measured choice (as
 * mtplite.runtime.lookup): any, since lookup drafts for free. `mtplite calibrate` measures it per drafter
 * ([Manifest.hybridMinNgram]): a head with the context space beats lookup on shorter matches.
 */
const val HYBRID_MIN_NGRAM = 1

/**
 * Hybrid drafting, as mtplite.runtime.lookup: prompt lookup when the history matches on [minNgram] or more tokens,
 * else the MTP head; with `head = null`, plain prompt lookup (any match, else a plain step). `history` must hold the
 * prompt and every emitted token (pass `onToken = hybrid::record` to generate()). `sources` records which drafter
 * served each cycle.
 */
class HybridDrafter(prompt: IntArray, private val head: Drafter?, private val minNgram: Int = HYBRID_MIN_NGRAM) : Drafter {
    val history = prompt.toMutableList()
    val sources = ArrayList<String>()
    fun record(token: Int) { history.add(token) }
    override fun draft(token: Int, activation: FloatArray, pos: Int, k: Int): IntArray? {
        lookup(history, k, minNgram = if (head == null) 1 else minNgram)?.let { sources.add("lookup"); return it }
        if (head == null) return null
        sources.add("head")
        return head.draft(token, activation, pos, k)
    }
}

/** One call of the contract's drafter graph: its logits over the full vocabulary and the projected activation for the
 * next draft step. */
class DraftStep(val logits: FloatArray, val activation: FloatArray)

/**
 * The context draft space, as mtplite.runtime.litert.Bundle.context_space: the [maxIds] newest distinct ids of the
 * cached text outside the head's draft space ([spaceIds]), which drafter_ctx scores after the draft space, so the
 * head can draft a rare token the text already holds (a name, a number). The caller fills the graph's context
 * inputs from [pick]: each id's embedding row (embedder output / embed_scale) and, with copy_rows, layer 0's V row
 * at the id's position, scaled to unit RMS ([unitRms]).
 */
class ContextSpace(val spaceIds: IntArray, vocabSize: Int, val maxIds: Int) {
    private val index = IntArray(vocabSize) { spaceIds.size }.also { m -> spaceIds.forEachIndexed { i, t -> m[t] = i } }

    /** (id, latest position < [pos]) pairs, newest first: what a draft at [pos] may copy. */
    fun pick(history: IntArray, pos: Int): List<Pair<Int, Int>> {
        val out = LinkedHashMap<Int, Int>()
        for (j in minOf(pos, history.size) - 1 downTo 0) {
            val t = history[j]
            if (t !in out && index[t] >= spaceIds.size) {
                out[t] = j
                if (out.size == maxIds) break
            }
        }
        return out.entries.map { it.key to it.value }
    }
}

fun unitRms(x: FloatArray): FloatArray {
    var ss = 0.0
    for (v in x) ss += v.toDouble() * v
    val r = (1.0 / kotlin.math.sqrt(ss / x.size + 1e-6)).toFloat()
    return FloatArray(x.size) { x[it] * r }
}

/**
 * The head's k drafts behind a confidence gate, as mtplite.runtime.litert.Bundle.draft: null, i.e. a plain step,
 * where the head gives its first draft less than [minProb] (settings.min_prob from `mtplite calibrate`), else all k
 * drafts. minProb = 0 always drafts. [lastProbs] holds the probabilities of the latest call.
 */
class GatedDraft(private val minProb: Double) {
    private var draftIdx: IntArray? = null
    var lastProbs: List<Double> = emptyList()
        private set

    /** The K-step drafter's output (drafter_ctx's mtp_draft_k: K ids and their probabilities, argmax in the graph). */
    fun drafts(ids: IntArray, probs: FloatArray): IntArray? {
        lastProbs = probs.map { it.toDouble() }
        return if (ids.isEmpty() || probs[0] < minProb) null else ids
    }

    /** One drafter call per step (the contract's mtp_drafter). [sampler] and [pos] (the position of [token]): coupled
     * drafting, draft j picked with the u of position pos + 1 + j, the one the backbone's own sample there will use
     * (greedy: argmax). */
    fun draft(token: Int, activation: FloatArray, k: Int, sampler: Sampler = Sampler(), pos: Int = 0,
              step: (Int, FloatArray) -> DraftStep): IntArray? {
        val out = ArrayList<Int>(k)
        val probs = ArrayList<Double>(k)
        var tok = token
        var act = activation
        for (j in 0 until k) {
            val s = step(tok, act)
            tok = sampler.index(s.logits, pos + 1 + j)
            if (minProb > 0) {
                probs.add(topProb(s.logits, tok))
                if (j == 0 && probs[0] < minProb) break  // declined at the first draft: later steps would be wasted
            }
            act = s.activation
            out.add(tok)
        }
        lastProbs = probs
        return if (out.isEmpty()) null else out.toIntArray()
    }

    /** Softmax probability of [top]. The head scores only its draft vocabulary (the rest is NEG_INF), found once. */
    fun topProb(logits: FloatArray, top: Int): Double {
        val idx = draftIdx ?: logits.indices.filter { logits[it] > NEG_INF / 2 }.toIntArray().also { draftIdx = it }
        val m = logits[top].toDouble()
        var sum = 0.0
        for (i in idx) sum += kotlin.math.exp(logits[i] - m)
        return 1.0 / sum
    }
}

/** The NEG_INF of mtplite.model.decoder: masked attention slots and the logits outside the draft vocabulary. */
const val NEG_INF = -1e9f

fun argmax(a: FloatArray, from: Int = 0, len: Int = a.size): Int {
    var best = from
    for (i in from until from + len) if (a[i] > a[best]) best = i
    return best - from
}
