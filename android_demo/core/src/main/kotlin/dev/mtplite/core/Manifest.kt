package dev.mtplite.core

/**
 * OUT/android/manifest.json: parsing and the same checks as `mtplite inspect` (mtplite/export/contract.py), run on
 * the signatures the manifest records. Every refusal names the field or tensor.
 */
class ManifestError(msg: String) : Exception(msg)

data class Tensor(val shape: List<Long>, val dtype: String)
data class Signature(val inputs: Map<String, Tensor>, val outputs: Map<String, Tensor>)

data class Manifest(
    val k: Int, val cacheLength: Int, val vocabSize: Int, val hiddenSize: Int, val numLayers: Int,
    val draftVocabSize: Int, val prefillLengths: List<Int>, val readLayers: List<Int>, val eosIds: List<Int>,
    val bosId: Int?, val files: Map<String, String>, val signatures: Map<String, Map<String, Signature>>,
    val backboneFingerprint: String?, val headFingerprint: String?,
    val minProb: Double = 0.0,  // settings.min_prob: the head's confidence gate chosen by `mtplite calibrate`
    val context: ContextDrafter? = null,  // drafter_ctx.tflite: the K-step drafter with the context draft space
    // settings.hybrid_min_ngram: per drafter ("drafter" / "drafter_ctx"), the shortest lookup match hybrid copies
    val hybridMinNgram: Map<String, Int> = emptyMap(),
    // settings.draft: who drafts by default, or off where calibrate found nothing pays
    val draft: Draft = Draft.MTP,
    // exactness: bit_identical where export's probe found decode to be verify's row 0 bit for bit; otherwise (or
    // absent, from an older export) plain steps run as row 0 of verify so that MTP output stays plain output
    val exactness: String? = null,
    // chat_turn: one user turn's ids around the message (export renders the chat template); null for a base model
    val chatTurn: ChatTurn? = null,
    // settings.source: who chose the settings ("mtplite calibrate" on a host, "device <model>, <date>" from this
    // phone's own log via `mtplite report --calibrate`, or the export default)
    val settingsSource: String? = null,
    // settings.drafter: the head's graph the settings were measured with
    val drafter: HeadGraph? = null,
) {
    /** Plain steps through verify: wherever decode was not found bit-identical to verify's row 0. */
    val exactPath: Boolean get() = exactness != "bit_identical"
    /** The shortest lookup match hybrid copies with the given drafter: calibrate's choice, else [HYBRID_MIN_NGRAM]. */
    fun hybridMinNgram(withContext: Boolean) =
        hybridMinNgram[(if (withContext) HeadGraph.K_STEP else HeadGraph.PER_STEP).wire] ?: HYBRID_MIN_NGRAM
}

/** settings.draft: who drafts (the head, prompt lookup first then the head, lookup alone), or nobody. */
enum class Draft(val wire: String) {
    MTP("mtp"), HYBRID("hybrid"), LOOKUP("lookup"), OFF("off");

    companion object { fun of(wire: String): Draft? = entries.firstOrNull { it.wire == wire } }
}

/** The head's graphs: the contract's per-step drafter, or the K-step drafter with the context draft space. */
enum class HeadGraph(val wire: String) {
    PER_STEP("drafter"), K_STEP("drafter_ctx");

    companion object { fun of(wire: String): HeadGraph? = entries.firstOrNull { it.wire == wire } }
}

/** The ids a chat template puts around one user message (manifest.chat_turn; BOS not included). */
data class ChatTurn(val before: List<Int>, val after: List<Int>)

/** The prompt ids of one user message as the backbone is deployed: BOS, then the chat turn around the message's ids
 * where the bundle has a chat template, else the bare text (a base model). */
fun promptIds(man: Manifest, message: List<Int>): IntArray =
    (listOfNotNull(man.bosId) + (man.chatTurn?.before ?: emptyList()) + message + (man.chatTurn?.after ?: emptyList())).toIntArray()

/** Why a prompt of [promptLen] tokens cannot run in a cache of [cacheLength] slots (null: it can): generate needs
 * the prompt and at least one new token in the cache. */
fun promptTooLong(promptLen: Int, cacheLength: Int): String? =
    if (promptLen <= cacheLength - 1) null
    else "The prompt is $promptLen tokens; this bundle's cache holds $cacheLength. Shorten it, or re-export with a " +
        "longer cache (mtplite export --cache-length)."

/** manifest.context_drafter: the graph that drafts all K tokens in one call ([DRAFT_K]), also the text's own ids
 * outside the draft space (ContextSpace). */
data class ContextDrafter(val file: String, val maxIds: Int, val spaceIds: IntArray, val embedScale: Float,
                          val copyRows: Boolean, val signature: Signature,
                          val windowSignatures: Map<Int, Signature> = emptyMap()) {
    val windows: List<Int> = windowSignatures.keys.sorted()  // once: signatureAt runs every draft cycle
    /** The signature to run for a draft at [pos]: as mtplite.export.contract.draft_k_signature. */
    fun signatureAt(pos: Int) = draftKSignature(windows, pos)
}

const val FORMAT_VERSION = 1L

/** drafter_ctx.tflite's signature, as mtplite.export.contract.DRAFT_K. */
const val DRAFT_K = "mtp_draft_k"

/** mtp_draft_k_<W> runs the same graph over the cache's first W slots; a draft at pos reads slots < pos, so the
 * narrowest window with pos <= W gives the same drafts for less work. */
fun draftKSignature(windows: Collection<Int>, pos: Int): String =
    windows.filter { pos <= it }.minOrNull()?.let { "${DRAFT_K}_$it" } ?: DRAFT_K

private fun fail(where: String, msg: String): Nothing = throw ManifestError("$where: $msg")

private fun intField(m: Map<String, Any?>, key: String, where: String): Int {
    val v = m[key]
    if (v !is Long) fail(where, "field '$key' must be int, got ${typeName(v)}; re-run `mtplite export`")
    if (v <= 0 || v >= (1L shl 24)) fail(where, "field '$key' = $v is out of range")
    return v.toInt()
}

private fun typeName(v: Any?) = when (v) {
    null -> "NoneType"; is Long -> "int"; is Double -> "float"; is String -> "str"; is Boolean -> "bool"
    is List<*> -> "list"; is Map<*, *> -> "dict"; else -> "object"
}

private fun intList(v: Any?): List<Long>? = (v as? List<*>)?.let { l -> if (l.all { it is Long }) l.map { it as Long } else null }

private fun parseSig(v: Any?, where: String): Signature {
    fun io(x: Any?): Map<String, Tensor> {
        val m = x as? Map<*, *> ?: fail(where, "signatures must map names to {inputs, outputs}")
        return m.entries.associate { (k, t) ->
            val tm = t as? Map<*, *> ?: fail(where, "tensor $k must be {shape, dtype}")
            val shape = intList(tm["shape"]) ?: fail(where, "tensor $k shape must be a list of ints")
            k.toString() to Tensor(shape, tm["dtype"] as? String ?: fail(where, "tensor $k dtype must be a string"))
        }
    }
    val m = v as? Map<*, *> ?: fail(where, "signatures must map names to {inputs, outputs}")
    return Signature(io(m["inputs"]), io(m["outputs"]))
}

private fun exactness(m: Map<String, Any?>, where: String): String? = when (val e = m["exactness"]) {
    null, "bit_identical", "exact_path_needed" -> e as String?
    else -> fail(where, "field 'exactness' = $e must be bit_identical or exact_path_needed; re-run `mtplite export`")
}

fun parseManifest(text: String, where: String): Manifest {
    val root = try { Json.parse(text) } catch (e: Json.ParseError) {
        fail(where, "not valid JSON (${e.message}); re-run `mtplite export`")
    }
    val m = root as? Map<String, Any?> ?: fail(where, "not an mtplite manifest (format != 'mtplite-bundle')")
    if (m["format"] != "mtplite-bundle") fail(where, "not an mtplite manifest (format != 'mtplite-bundle')")
    if (m["format_version"] != FORMAT_VERSION) fail(where, "format_version ${m["format_version"]} is not supported (this mtplite reads $FORMAT_VERSION); re-export with this version")
    val k = intField(m, "K", where); val c = intField(m, "cache_length", where)
    val v = intField(m, "vocab_size", where); val h = intField(m, "hidden_size", where)
    val nl = intField(m, "num_layers", where); val dv = intField(m, "draft_vocab_size", where)
    val pl = intList(m["prefill_lengths"])
    if (m["prefill_lengths"] !is List<*>) fail(where, "field 'prefill_lengths' must be list, got ${typeName(m["prefill_lengths"])}; re-run `mtplite export`")
    if (pl == null || pl.isEmpty() || pl.any { it <= 0 || it > c }) fail(where, "'prefill_lengths' must be positive ints <= cache_length")
    val files = m["files"] as? Map<*, *> ?: fail(where, "field 'files' must be dict, got ${typeName(m["files"])}; re-run `mtplite export`")
    for (g in listOf("backbone", "embedder", "drafter", "tokenizer")) {
        val f = files[g]
        if (f !is String || '/' in f || '\\' in f || f.startsWith(".")) fail(where, "files.$g must be a plain file name next to the manifest")
    }
    if (m["read_layers"] !is List<*>) fail(where, "field 'read_layers' must be list, got ${typeName(m["read_layers"])}; re-run `mtplite export`")
    val rl = intList(m["read_layers"])
    if (rl == null || rl.isEmpty() || rl.any { it < 0 || it >= nl }) fail(where, "'read_layers' must be layer indices < num_layers")
    if (m["eos_ids"] !is List<*>) fail(where, "field 'eos_ids' must be list, got ${typeName(m["eos_ids"])}; re-run `mtplite export`")
    val eos = intList(m["eos_ids"])
    if (eos == null || eos.any { it < 0 || it >= v }) fail(where, "'eos_ids' must be token ids < vocab_size")
    val sigsRaw = m["signatures"] as? Map<*, *> ?: fail(where, "field 'signatures' missing; re-run `mtplite export`")
    val sigs = listOf("backbone", "embedder", "drafter").associateWith { g ->
        val gm = sigsRaw[g] as? Map<*, *> ?: fail(where, "signatures.$g missing; re-run `mtplite export`")
        gm.entries.associate { (name, s) -> name.toString() to parseSig(s, where) }
    }
    val settings = m["settings"] as? Map<*, *>
    val minProb = when (val g = settings?.get("min_prob")) {
        null -> 0.0
        is Double -> g
        is Long -> g.toDouble()
        else -> fail(where, "settings.min_prob must be a number, got ${typeName(g)}; re-run `mtplite calibrate`")
    }
    if (minProb < 0 || minProb > 1) fail(where, "settings.min_prob = $minProb must be in [0, 1]; re-run `mtplite calibrate`")
    val hm = settings?.get("hybrid_min_ngram") ?: emptyMap<String, Any?>()
    if (hm !is Map<*, *> || hm.any { (d, n) -> HeadGraph.of(d.toString()) == null || n !in listOf(1L, 2L, 3L) })
        fail(where, "settings.hybrid_min_ngram must map drafter / drafter_ctx to 1, 2 or 3; re-run `mtplite calibrate`")
    val hybrid = hm.entries.associate { (d, n) -> d.toString() to (n as Long).toInt() }
    // calibrations before settings.draft could say "off" wrote it as settings.K
    val draftWire = if (settings?.get("K") == "off") "off" else settings?.get("draft") ?: "mtp"
    val draft = Draft.of(draftWire.toString())
        ?: fail(where, "settings.draft = $draftWire must be mtp, hybrid, lookup or off; re-run `mtplite calibrate`")
    val man = Manifest(k, c, v, h, nl, dv, pl.map { it.toInt() }, rl.map { it.toInt() }, eos.map { it.toInt() },
        (m["bos_id"] as? Long)?.toInt(), files.entries.associate { it.key.toString() to it.value.toString() }, sigs,
        m["backbone_fingerprint"] as? String, m["head_fingerprint"] as? String, minProb,
        m["context_drafter"]?.let { parseContext(it, v, where) }, hybrid, draft, exactness(m, where),
        parseChatTurn(m["chat_turn"], v, where), settings?.get("source") as? String,
        (settings?.get("drafter") as? String)?.let {
            HeadGraph.of(it) ?: fail(where, "settings.drafter = $it must be drafter or drafter_ctx; re-run `mtplite calibrate`")
        })
    checkContract(man, where)
    return man
}

private fun parseChatTurn(x: Any?, vocab: Int, where: String): ChatTurn? {
    if (x == null) return null
    val t = x as? Map<*, *> ?: fail(where, "field 'chat_turn' must be an object or null; re-run `mtplite export`")
    fun ids(key: String) = intList(t[key])?.takeIf { l -> l.all { it in 0 until vocab } }?.map { it.toInt() }
        ?: fail(where, "chat_turn.$key must be a list of token ids < vocab_size; re-run `mtplite export`")
    return ChatTurn(ids("before_ids"), ids("after_ids"))
}

private fun parseContext(x: Any?, vocab: Int, where: String): ContextDrafter {
    val cd = x as? Map<*, *> ?: fail(where, "field 'context_drafter' must be an object; re-run `mtplite export`")
    val f = cd["file"]
    if (f !is String || '/' in f || '\\' in f || f.startsWith(".")) fail(where, "context_drafter.file must be a plain file name next to the manifest")
    val m = cd["max_ids"]
    if (m !is Long || m <= 0 || m >= (1L shl 16)) fail(where, "context_drafter.max_ids = $m must be a positive int")
    val ids = intList(cd["space_ids"])
    if (ids == null || ids.isEmpty() || ids.any { it < 0 || it >= vocab }) fail(where, "context_drafter.space_ids must be token ids < vocab_size")
    val scale = when (val e = cd["embed_scale"]) { is Double -> e; is Long -> e.toDouble(); else -> -1.0 }
    if (scale <= 0) fail(where, "context_drafter.embed_scale = ${cd["embed_scale"]} must be a positive number")
    val lacks = "context_drafter.signatures lacks '$DRAFT_K'; re-run `mtplite export`"
    val sigs = cd["signatures"] as? Map<*, *> ?: fail(where, lacks)
    val sig = parseSig(sigs[DRAFT_K] ?: fail(where, lacks), where)
    // mtp_draft_k_<W>: the same graph over the cache's first W slots (draftKSignature)
    val windows = sigs.keys.filterIsInstance<String>().filter { it.startsWith("${DRAFT_K}_") }.mapNotNull { name ->
        name.removePrefix("${DRAFT_K}_").toIntOrNull()?.takeIf { it > 0 }?.let { it to parseSig(sigs[name], where) }
    }.toMap()
    return ContextDrafter(f, m.toInt(), ids.map { it.toInt() }.toIntArray(), scale.toFloat(), cd["copy_rows"] == true,
        sig, windows)
}

/** A drafter signature reads the backbone's own KV buffers (same names, shapes, dtypes) and has [expect]'s shapes. */
private fun checkDrafterIo(d: Signature, kvRef: Map<String, Tensor>, expect: List<Triple<String, String, List<Long>>>,
                           where: String, label: String) {
    val kvIn = d.inputs.keys.filter { it.startsWith("kv") }
    if (kvIn.isEmpty()) fail(where, "$label reads no kv_cache_* tensor")
    for (name in kvIn) {
        val t = d.inputs.getValue(name); val ref = kvRef[name] ?: fail(where, "$label input $name ${t.shape} has no backbone tensor of that name")
        if (t.shape != ref.shape || t.dtype != ref.dtype)
            fail(where, "$label $name is ${t.dtype}${t.shape} but backbone $name is ${ref.dtype}${ref.shape}: the KV buffers cannot be shared")
    }
    for ((io, name, shape) in expect) {
        val t = (if (io == "input") d.inputs else d.outputs)[name]
        if (t == null || t.shape != shape) fail(where, "$label $io $name is ${t?.shape}, expected $shape")
    }
}

/** The LiteRT-LM MTP contract on the recorded signatures (same rules as contract.check_contract). */
fun checkContract(m: Manifest, where: String) {
    val bb = m.signatures.getValue("backbone"); val emb = m.signatures.getValue("embedder")
    val dr = m.signatures.getValue("drafter")
    for (s in listOf("decode", "verify") + m.prefillLengths.map { "prefill_$it" })
        if (s !in bb) fail(where, "backbone lacks signature '$s'")
    if ("decode_embedder" !in emb) fail(where, "embedder lacks signature 'decode_embedder'")
    if (dr.keys != setOf("mtp_drafter")) fail(where, "drafter must have exactly one signature 'mtp_drafter'")
    val d = dr.getValue("mtp_drafter")
    val vt = bb.getValue("verify").inputs["input_pos"]
    if (vt == null || vt.shape != listOf((m.k + 1).toLong())) fail(where, "verify input_pos is ${vt?.shape} but K=${m.k} needs [${m.k + 1}] (T = K+1)")
    val kvRef = bb.getValue("decode").inputs
    for ((sname, sig) in bb) {
        for ((io, tensors) in listOf("input" to sig.inputs, "output" to sig.outputs)) for ((name, t) in tensors) {
            val ref = kvRef[name]
            if (name.startsWith("kv_cache_") && (ref == null || t.shape != ref.shape || t.dtype != ref.dtype))
                fail(where, "backbone $sname $io $name is ${t.dtype}${t.shape} but decode has ${ref?.dtype}${ref?.shape}")
        }
        val mk = sig.inputs["mask"]
        if (mk != null && mk.dtype != "float32") fail(where, "backbone $sname mask is ${mk.dtype}; LiteRT-LM needs a float additive mask (a bool mask masks nothing)")
    }
    val h = m.hiddenSize.toLong()
    checkDrafterIo(d, kvRef, listOf(
        Triple("input", "activations", listOf(1L, 1L, 2 * h)), Triple("input", "input_pos", listOf(1L)),
        Triple("input", "mask", listOf(1L, 1L, 1L, m.cacheLength.toLong())),
        Triple("output", "logits", listOf(1L, 1L, m.vocabSize.toLong())), Triple("output", "projected_activations", listOf(1L, 1L, h))),
        where, "drafter")
    if (d.inputs.getValue("mask").dtype != "float32" || d.inputs.getValue("activations").dtype != "float32")
        fail(where, "drafter mask and activations must be float32")
    m.context?.let { c ->  // drafter_ctx reads the same KV buffers and returns K draft ids and their probabilities
        val mx = c.maxIds.toLong(); val k = m.k.toLong()
        checkDrafterIo(c.signature, kvRef, listOf(
            Triple("input", "activations", listOf(1L, 1L, 2 * h)), Triple("input", "context_emb", listOf(1L, mx, h)),
            Triple("input", "context_mask", listOf(1L, 1L, mx)), Triple("input", "context_ids", listOf(1L, mx)),
            Triple("output", "draft_ids", listOf(1L, k)), Triple("output", "draft_probs", listOf(1L, k)),
            Triple("output", "projected_activations", listOf(1L, 1L, h))), where, c.file)
        if (c.signature.outputs.getValue("draft_ids").dtype != "int32" || c.signature.inputs.getValue("context_ids").dtype != "int32")
            fail(where, "${c.file}: draft_ids and context_ids must be int32")
        for ((w, ws) in c.windowSignatures) if (ws != c.signature)  // the windows bind the very same buffers
            fail(where, "${c.file}: signature '${DRAFT_K}_$w' has other inputs or outputs than '$DRAFT_K'; " +
                "re-run `mtplite export`")
    }
    for (s in listOf("decode", "verify")) {
        val a = bb.getValue(s).outputs["activations"]; val t = if (s == "decode") 1L else (m.k + 1).toLong()
        if (a == null || a.shape != listOf(1L, t, h) || a.dtype != "float32")
            fail(where, "backbone $s activations is ${a?.shape}, expected float32[1, $t, $h]")
    }
    val mk = bb.getValue("decode").inputs["mask"]
    if (mk == null || mk.shape != listOf(1L, 1L, 1L, m.cacheLength.toLong()))
        fail(where, "decode mask is ${mk?.shape}, expected [1, 1, 1, ${m.cacheLength}] (cache_length)")
}
