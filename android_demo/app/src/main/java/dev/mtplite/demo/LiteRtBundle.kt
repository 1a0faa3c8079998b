package dev.mtplite.demo

import com.google.ai.edge.litert.Accelerator
import com.google.ai.edge.litert.CompiledModel
import com.google.ai.edge.litert.Environment
import com.google.ai.edge.litert.TensorBuffer
import dev.mtplite.core.Backbone
import dev.mtplite.core.ContextSpace
import dev.mtplite.core.DRAFT_K
import dev.mtplite.core.Decoded
import dev.mtplite.core.DraftStep
import dev.mtplite.core.Drafter
import dev.mtplite.core.Embedder
import dev.mtplite.core.GatedDraft
import dev.mtplite.core.Sampler
import dev.mtplite.core.Manifest
import dev.mtplite.core.NEG_INF
import dev.mtplite.core.Verified
import dev.mtplite.core.argmax
import dev.mtplite.core.unitRms
import java.io.File

/**
 * Binds the core's Backbone / Drafter / Embedder interfaces to LiteRT CompiledModels. One set of KV TensorBuffers,
 * created once from the backbone's `decode` signature, is passed by name to every backbone signature (as input and
 * output) and to the drafter (input): the drafter reads the backbone's cache with zero copies, exactly as the Python
 * runtime (mtplite/runtime/litert.py) does.
 */
class LiteRtBundle(private val dir: File, val man: Manifest, private val accelerator: Accelerator = Accelerator.CPU,
                   withDrafter: Boolean = true,
                   withContext: Boolean = true) :
    Backbone, Drafter, Embedder, AutoCloseable {
    private val env = Environment.create()
    private fun load(name: String) =
        CompiledModel.create(File(dir, name).absolutePath, CompiledModel.Options(accelerator), env)

    val embedder = load(man.files.getValue("embedder"))
    val backbone = load(man.files.getValue("backbone"))
    val drafter = if (withDrafter) load(man.files.getValue("drafter")) else null
    // drafter_ctx: the head that also drafts the text's own ids outside its draft space (manifest.context_drafter)
    val drafterCtx = man.context?.let { if (withDrafter && withContext) load(it.file) else null }
    var useContext = drafterCtx != null
    private val h = man.hiddenSize
    private val c = man.cacheLength
    private val v = man.vocabSize

    private val kvNames = man.signatures.getValue("backbone").getValue("decode").inputs.keys.filter { it.startsWith("kv_cache_") }
    val kv: Map<String, TensorBuffer> = kvNames.associateWith { backbone.createInputBuffer(it, "decode") }
    private val io = HashMap<String, Pair<Map<String, TensorBuffer>, Map<String, TensorBuffer>>>()

    private fun buffers(model: CompiledModel, sig: String, g: String): Pair<Map<String, TensorBuffer>, Map<String, TensorBuffer>> =
        io.getOrPut("$g/$sig") {
            val s = man.signatures.getValue(g).getValue(sig)
            Pair(s.inputs.keys.filterNot { it.startsWith("kv_cache_") }.associateWith { model.createInputBuffer(it, sig) },
                s.outputs.keys.filterNot { it.startsWith("kv_cache_") }.associateWith { model.createOutputBuffer(it, sig) })
        }

    val kvBytes: Long = kvNames.sumOf { n ->
        man.signatures.getValue("backbone").getValue("decode").inputs.getValue(n).shape.fold(4L) { a, b -> a * b }
    }

    private val hist = IntArray(c)  // the token at each cached position, for the context draft space

    fun reset() = kv.forEach { (n, b) ->
        val size = man.signatures.getValue("backbone").getValue("decode").inputs.getValue(n).shape.fold(1L) { a, x -> a * x }
        b.writeFloat(FloatArray(size.toInt()))
    }

    override fun embed(ids: IntArray): Array<FloatArray> {
        val sig = if (ids.size == 1) "decode_embedder" else man.prefillLengths.sorted().first { it >= ids.size }.let { "prefill_embedder_$it" }
        val n = if (ids.size == 1) 1 else sig.substringAfterLast('_').toInt()
        val (ins, outs) = buffers(embedder, sig, "embedder")
        ins.getValue("token_ids").writeInt(IntArray(n) { if (it < ids.size) ids[it] else 0 })
        embedder.run(ins, outs, sig)
        val e = outs.getValue("embeddings").readFloat()
        return Array(ids.size) { e.copyOfRange(it * h, (it + 1) * h) }
    }

    private fun runBackbone(sig: String, ids: IntArray, pos0: Int): Map<String, TensorBuffer> {
        val (ins, outs) = buffers(backbone, sig, "backbone")
        val t = man.signatures.getValue("backbone").getValue(sig).inputs.getValue("input_pos").shape[0].toInt()
        val emb = FloatArray(t * h)
        embed(ids).forEachIndexed { i, row -> row.copyInto(emb, i * h) }
        val pos = IntArray(t) { if (it < ids.size) pos0 + it else 0 }
        val mask = FloatArray(t * c) { NEG_INF }
        for (r in ids.indices) for (k in 0..pos[r]) mask[r * c + k] = 0f
        ins.getValue("embeddings").writeFloat(emb)
        ins.getValue("input_pos").writeInt(pos)
        ins.getValue("mask").writeFloat(mask)
        ids.forEachIndexed { i, t -> if (pos0 + i < c) hist[pos0 + i] = t }
        backbone.run(ins + kv, outs + kv, sig)
        return outs
    }

    override fun prefill(ids: IntArray, start: Int) {
        var i = 0
        val lengths = man.prefillLengths.sorted()
        while (i < ids.size) {
            val n = lengths.firstOrNull { it >= ids.size - i } ?: lengths.last()
            val chunk = ids.copyOfRange(i, minOf(i + n, ids.size))
            runBackbone("prefill_$n", chunk, start + i)
            i += chunk.size
        }
    }

    /** How tokens are picked from logits (greedy by default); the token for cache position t uses u_t (Sampler). */
    var sampler = Sampler()

    override fun decode(token: Int, pos: Int): Decoded {
        if (man.exactPath && pos + man.k < c) {  // row 0 of verify, so MTP output stays plain output (manifest.exactness)
            val outs = runBackbone("verify", IntArray(man.k + 1) { token }, pos)
            return Decoded(sampler.pick(outs.getValue("logits").readFloat(), pos + 1, null, 0, v),
                outs.getValue("activations").readFloat().copyOf(h))
        }
        val outs = runBackbone("decode", intArrayOf(token), pos)
        return Decoded(sampler.pick(outs.getValue("logits").readFloat(), pos + 1, null, 0, v), outs.getValue("activations").readFloat())
    }

    override fun verify(tokens: IntArray, pos: Int): Verified {
        val outs = runBackbone("verify", tokens, pos)
        val logits = outs.getValue("logits").readFloat()
        val acts = outs.getValue("activations").readFloat()
        return Verified(IntArray(tokens.size) { sampler.pick(logits, pos + 1 + it, null, it * v, v) },
            Array(tokens.size) { acts.copyOfRange(it * h, (it + 1) * h) })
    }

    /** The head's drafts; with [gate] set (settings.min_prob), only while it is sure: null means "take a plain step". */
    var gate = GatedDraft(0.0)

    override fun draft(token: Int, activation: FloatArray, pos: Int, k: Int): IntArray? {
        if (useContext) return draftWithContext(token, activation, pos, k)
        val d = drafter ?: error("bundle loaded without the drafter")
        val (ins, outs) = buffers(d, "mtp_drafter", "drafter")
        val reads = kv.filterKeys { it in man.signatures.getValue("drafter").getValue("mtp_drafter").inputs }
        // the contract's position, as LiteRT-LM passes it: the newest cached token's, one before [token]'s
        ins.getValue("input_pos").writeInt(intArrayOf(pos - 1))
        ins.getValue("mask").writeFloat(FloatArray(c) { if (it < pos) 0f else NEG_INF })
        return gate.draft(token, activation, k, sampler, pos) { tok, act ->
            ins.getValue("activations").writeFloat(embed(intArrayOf(tok))[0] + act)
            d.run(ins + reads, outs, "mtp_drafter")
            DraftStep(outs.getValue("logits").readFloat(), outs.getValue("projected_activations").readFloat())
        }
    }

    private val ctx = man.context?.let { ContextSpace(it.spaceIds, v, it.maxIds) }
    private val ctxRows = HashMap<Int, Pair<FloatArray, FloatArray?>>()  // id -> (embedding row, layer-0 V row)
    private var ctxPicked: List<Pair<Int, Int>>? = null
    private val ctxIoLazy = lazy {
        val sig = man.context!!.signature
        Pair(sig.inputs.keys.filterNot { it.startsWith("kv_cache_") }.associateWith { drafterCtx!!.createInputBuffer(it, DRAFT_K) },
            sig.outputs.keys.associateWith { drafterCtx!!.createOutputBuffer(it, DRAFT_K) })
    }
    private val ctxIo by ctxIoLazy

    /** As Bundle.context_space in Python: fill drafter_ctx's context inputs for a draft at [pos]. */
    private fun contextInputs(pos: Int, ins: Map<String, TensorBuffer>): List<Pair<Int, Int>> {
        val cd = man.context!!
        val picked = ctx!!.pick(hist, pos)
        if (picked == ctxPicked) return picked
        val fresh = picked.filter { it.first !in ctxRows }
        if (fresh.isNotEmpty()) {
            var v0: FloatArray? = null
            val shape = man.signatures.getValue("backbone").getValue("decode").inputs.getValue("kv_cache_v_0").shape  // [1,KVH,D,C]
            if (cd.copyRows) v0 = kv.getValue("kv_cache_v_0").readFloat()
            val rowsPerId = (shape[1] * shape[2]).toInt()
            for (chunk in fresh.chunked(man.prefillLengths.max())) {
                val e = embed(chunk.map { it.first }.toIntArray())
                chunk.forEachIndexed { i, (t, j) ->
                    val row = FloatArray(h) { e[i][it] / cd.embedScale }
                    val vr = v0?.let { a -> unitRms(FloatArray(rowsPerId) { r -> a[r * c + j] }) }
                    ctxRows[t] = row to vr
                }
            }
        }
        val m = cd.maxIds
        val emb = FloatArray(m * h)
        val mask = FloatArray(m) { NEG_INF }
        picked.forEachIndexed { i, (t, _) -> ctxRows.getValue(t).first.copyInto(emb, i * h); mask[i] = 0f }
        ins.getValue("context_emb").writeFloat(emb)
        ins.getValue("context_mask").writeFloat(mask)
        ins.getValue("context_ids").writeInt(IntArray(m) { if (it < picked.size) picked[it].first else 0 })
        ins["context_rows"]?.let { b ->
            val dt = cd.signature.inputs.getValue("context_rows").shape.last().toInt()
            val rows = FloatArray(m * dt)
            picked.forEachIndexed { i, (t, _) -> ctxRows.getValue(t).second!!.copyInto(rows, i * dt) }
            b.writeFloat(rows)
        }
        ctxPicked = picked
        return picked
    }

    /** All K drafts in one call of drafter_ctx's mtp_draft_k (argmax, id mapping and the next step's embedding inside
     * the graph), as Bundle.draft_k in Python. */
    private fun draftWithContext(token: Int, activation: FloatArray, pos: Int, k: Int): IntArray? {
        val d = drafterCtx ?: error("bundle has no drafter_ctx")
        val (ins, outs) = ctxIo
        val reads = kv.filterKeys { it in man.context!!.signature.inputs }
        contextInputs(pos, ins)
        ins.getValue("input_pos").writeInt(intArrayOf(pos))
        ins.getValue("mask").writeFloat(FloatArray(c) { if (it <= pos) 0f else NEG_INF })
        ins.getValue("activations").writeFloat(embed(intArrayOf(token))[0] + activation)
        d.run(ins + reads, outs, man.context!!.signatureAt(pos))  // its windows bind the same buffers
        return gate.drafts(outs.getValue("draft_ids").readInt(), outs.getValue("draft_probs").readFloat())?.copyOf(k)
    }

    /** Native memory is freed here, not by the GC: every TensorBuffer, then the compiled models, then the environment. */
    override fun close() {
        val pairs = io.values + (if (ctxIoLazy.isInitialized()) listOf(ctxIo) else emptyList())
        (kv.values + pairs.flatMap { it.first.values + it.second.values }).forEach { it.close() }
        io.clear()
        (listOf(embedder, backbone) + listOfNotNull(drafter, drafterCtx)).forEach { it.close() }
        env.close()
    }

}
