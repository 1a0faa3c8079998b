package dev.mtplite.core

/**
 * Token text from tokenizer.json's vocabulary, for showing streamed output on the phone. Decoding is exact for
 * SentencePiece-style (▁, <0xNN>) and byte-level (Ġ) vocabularies. Encoding is greedy longest-match: it yields valid
 * ids but not always the ids the HF tokenizer would pick, so the benchmark uses prompts tokenized by `mtplite export`
 * (bench_prompts.jsonl) and only the interactive screen uses this encoder.
 */
class Vocab(private val idToToken: Array<String?>, private val byteLevel: Boolean) {
    private val tokenToId = HashMap<String, Int>().apply { idToToken.forEachIndexed { i, t -> if (t != null) put(t, i) } }
    private val maxLen = idToToken.maxOf { it?.length ?: 0 }

    fun decode(ids: List<Int>): String {
        val bytes = java.io.ByteArrayOutputStream()
        for (id in ids) {
            val t = idToToken.getOrNull(id) ?: continue
            if (t.startsWith("<") && t.endsWith(">") && !t.startsWith("<0x")) continue  // special tokens
            if (t.length == 6 && t.startsWith("<0x")) { bytes.write(t.substring(3, 5).toInt(16)); continue }
            if (byteLevel) t.forEach { c -> bytes.write(BYTE_DECODER[c] ?: c.code) }
            else bytes.write(t.replace('\u2581', ' ').toByteArray(Charsets.UTF_8))
        }
        return bytes.toString(Charsets.UTF_8)
    }

    fun encode(text: String): List<Int> {
        val s = if (byteLevel) text.toByteArray(Charsets.UTF_8).map { BYTE_ENCODER[it.toInt() and 0xff]!! }.joinToString("")
        else text.replace(' ', '\u2581')
        val out = ArrayList<Int>()
        var i = 0
        while (i < s.length) {
            var n = minOf(maxLen, s.length - i)
            while (n > 0 && tokenToId[s.substring(i, i + n)] == null) n--
            if (n == 0) {  // fall back to byte tokens
                for (b in s.substring(i, i + 1).toByteArray(Charsets.UTF_8)) tokenToId["<0x%02X".format(b.toInt() and 0xff) + ">"]?.let(out::add)
                i += 1
            } else { out.add(tokenToId.getValue(s.substring(i, i + n))); i += n }
        }
        return out
    }

    companion object {
        // GPT-2 byte-level alphabet
        private val BYTE_ENCODER: Map<Int, Char> = run {
            val bs = ((33..126) + (161..172) + (174..255)).toMutableList()
            val cs = bs.toMutableList()
            var n = 0
            for (b in 0..255) if (b !in bs) { bs.add(b); cs.add(256 + n); n++ }
            bs.zip(cs).associate { (b, c) -> b to c.toChar() }
        }
        private val BYTE_DECODER: Map<Char, Int> = BYTE_ENCODER.entries.associate { (b, c) -> c to b }

        fun fromTokenizerJson(text: String): Vocab {
            val root = Json.parse(text) as Map<*, *>
            val model = root["model"] as Map<*, *>
            val vocab = model["vocab"] as Map<*, *>
            val added = (root["added_tokens"] as? List<*>).orEmpty().mapNotNull { it as? Map<*, *> }
            val size = maxOf((vocab.values.maxOf { (it as Long).toInt() }), added.maxOfOrNull { (it["id"] as Long).toInt() } ?: 0) + 1
            val arr = arrayOfNulls<String>(size)
            vocab.forEach { (k, v) -> arr[(v as Long).toInt()] = k as String }
            added.forEach { arr[(it["id"] as Long).toInt()] = it["content"] as String }
            val pre = root["pre_tokenizer"] as? Map<*, *>
            val byteLevel = pre?.get("type") == "ByteLevel" || (root["decoder"] as? Map<*, *>)?.get("type") == "ByteLevel"
            return Vocab(arr, byteLevel)
        }
    }
}
