package dev.mtplite.core

/**
 * Seeded sampling defined per position: the same generator and sampler as mtplite.model.sampling (Python), so the
 * app's MTP emits plain sampling's very tokens and Python and Kotlin agree on them (tests/test_kotlin.py golden file).
 *
 * The token for cache position t comes from the logits that predict it and u_t = uniform(seed, t) (SplitMix64's
 * finalizer, top 53 bits): no state advances, so decode, every verify row and the head's coupled drafts all use it.
 * Temperature 0 is argmax (lowest id among equal maxima). Otherwise: candidates by logit high to low, ties by lower
 * id; the first topK (0 = all); p = exp((l - lmax) / T) in double; the shortest prefix reaching topP of the mass;
 * the first candidate whose cumulative mass exceeds u times the total.
 */
data class Sampler(val temperature: Double = 0.0, val topK: Int = 0, val topP: Double = 1.0, val seed: Long = 0) {
    init {
        require(temperature >= 0 && temperature.isFinite()) { "temperature $temperature: must be a finite number >= 0 (0 = greedy)" }
        require(topK >= 0) { "topK $topK: must be >= 0 (0 = no top-k cut)" }
        require(topP > 0 && topP <= 1) { "topP $topP: must be in (0, 1] (1 = no nucleus cut)" }
    }

    val greedy: Boolean get() = temperature == 0.0

    /** The token for cache position [t] from [logits] (over [ids] when given: index -> token id). */
    fun pick(logits: FloatArray, t: Int, ids: IntArray? = null, offset: Int = 0, n: Int = logits.size - offset): Int {
        val i = index(logits, t, ids, offset, n)
        return ids?.get(i) ?: i
    }

    /** As [pick], but the index into [logits] (from [offset], [n] of them) instead of the token id. */
    fun index(logits: FloatArray, t: Int, ids: IntArray? = null, offset: Int = 0, n: Int = logits.size - offset): Int =
        if (greedy) argmax(logits, offset, n) else sampleIndex(logits, offset, n, uniform(seed, t.toLong()), ids)

    private fun sampleIndex(lg: FloatArray, off: Int, n: Int, u: Double, ids: IntArray?): Int {
        val tid = { i: Int -> ids?.get(i) ?: i }
        var cand = (0 until n).toList()
        if (topK in 1 until n) {  // everything at or above the k-th largest logit, then ordered and cut to k
            val kth = (0 until n).map { lg[off + it] }.sortedDescending()[topK - 1]
            cand = cand.filter { lg[off + it] >= kth }
        }
        cand = cand.sortedWith(compareByDescending<Int> { lg[off + it].toDouble() }.thenBy { tid(it) })
        if (topK > 0 && cand.size > topK) cand = cand.subList(0, topK)
        val z0 = lg[off + cand[0]].toDouble()
        var p = DoubleArray(cand.size) { Math.exp((lg[off + cand[it]].toDouble() - z0) / temperature) }
        if (topP < 1.0) {
            val c = cumsum(p)
            val target = topP * c.last()
            val keep = c.indexOfFirst { it >= target } + 1
            p = p.copyOf(keep)
        }
        val c = cumsum(p)
        val x = u * c.last()
        val i = c.indexOfFirst { it > x }.let { if (it < 0) p.size - 1 else it }
        return cand[i]
    }

    companion object {
        /** "T top-k top-p seed" as typed on the screen (missing trailing fields keep their defaults; empty: greedy). */
        fun parse(text: String): Sampler {
            val f = text.trim().split(Regex("\\s+")).filter { it.isNotEmpty() }
            require(f.size <= 4) { "sampling '$text': give at most T top-k top-p seed" }
            fun <T> at(i: Int, conv: (String) -> T?, what: String, dflt: T): T =
                if (i < f.size) conv(f[i]) ?: throw IllegalArgumentException("sampling '$text': $what '${f[i]}' is not a number") else dflt
            return Sampler(at(0, String::toDoubleOrNull, "temperature", 0.0), at(1, String::toIntOrNull, "top-k", 0),
                at(2, String::toDoubleOrNull, "top-p", 1.0), at(3, String::toLongOrNull, "seed", 0L))
        }

        /** The headless bench's intent extras (temperature, top_k, top_p, seed), as strings. */
        fun fromExtras(get: (String) -> String?): Sampler =
            parse(listOf("temperature", "top_k", "top_p", "seed").map { get(it) ?: "" }
                .let { v -> if (v.all { it.isEmpty() }) "" else listOf(v[0].ifEmpty { "0" }, v[1].ifEmpty { "0" }, v[2].ifEmpty { "1" }, v[3].ifEmpty { "0" }).joinToString(" ") })

        /** The settings as bench JSON writes them (model/sampling.py Sampler's fields). */
        fun toMap(s: Sampler): Map<String, Any?> = linkedMapOf("temperature" to s.temperature, "top_k" to s.topK.toLong(),
            "top_p" to s.topP, "seed" to s.seed)

        private const val GOLDEN = -0x61c8864680b583ebL  // 0x9E3779B97F4A7C15

        /** u in [0, 1) for position t. */
        fun uniform(seed: Long, t: Long): Double {
            var z = seed + (t + 1) * GOLDEN
            z = (z xor (z ushr 30)) * -0x40a7b892e31b1a47L  // 0xBF58476D1CE4E5B9
            z = (z xor (z ushr 27)) * -0x6b2fb644ecceee15L  // 0x94D049BB133111EB
            z = z xor (z ushr 31)
            return (z ushr 11).toDouble() * (1.0 / (1L shl 53))
        }

        private fun cumsum(p: DoubleArray): DoubleArray {
            val c = DoubleArray(p.size)
            var s = 0.0
            for (i in p.indices) { s += p[i]; c[i] = s }
            return c
        }

        fun argmax(x: FloatArray, off: Int, n: Int): Int {
            var best = 0
            for (i in 1 until n) if (x[off + i] > x[off + best]) best = i
            return best
        }
    }
}
