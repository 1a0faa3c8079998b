package dev.mtplite.core

/** A small JSON reader/writer (the Kotlin distribution has no JSON library and the core takes no dependencies). */
object Json {
    class ParseError(msg: String) : Exception(msg)

    fun parse(text: String): Any? {
        val p = Parser(text)
        p.ws()
        val v = p.value(0)
        p.ws()
        if (p.i != text.length) throw ParseError("trailing data at offset ${p.i}")
        return v
    }

    private class Parser(val s: String) {
        var i = 0
        fun ws() { while (i < s.length && s[i].isWhitespace()) i++ }
        fun value(depth: Int): Any? {
            if (depth > 64) throw ParseError("nesting too deep")
            if (i >= s.length) throw ParseError("unexpected end")
            return when (s[i]) {
                '{' -> obj(depth)
                '[' -> arr(depth)
                '"' -> str()
                't' -> lit("true", true)
                'f' -> lit("false", false)
                'n' -> lit("null", null)
                else -> num()
            }
        }
        fun lit(w: String, v: Any?): Any? {
            if (!s.startsWith(w, i)) throw ParseError("bad literal at $i")
            i += w.length; return v
        }
        fun num(): Any {
            val st = i
            while (i < s.length && (s[i].isDigit() || s[i] in "+-.eE")) i++
            val t = s.substring(st, i)
            if (t.isEmpty()) throw ParseError("unexpected '${s[st]}' at $st")
            return if (t.any { it in ".eE" }) t.toDoubleOrNull() ?: throw ParseError("bad number $t")
            else t.toLongOrNull() ?: t.toDoubleOrNull() ?: throw ParseError("bad number $t")
        }
        fun str(): String {
            i++
            val sb = StringBuilder()
            while (true) {
                if (i >= s.length) throw ParseError("unterminated string")
                val c = s[i++]
                when (c) {
                    '"' -> return sb.toString()
                    '\\' -> {
                        if (i >= s.length) throw ParseError("bad escape")
                        when (val e = s[i++]) {
                            'n' -> sb.append('\n'); 't' -> sb.append('\t'); 'r' -> sb.append('\r')
                            'b' -> sb.append('\b'); 'f' -> sb.append('\u000c')
                            'u' -> {
                                if (i + 4 > s.length) throw ParseError("bad \\u escape")
                                sb.append(s.substring(i, i + 4).toIntOrNull(16)?.toChar() ?: throw ParseError("bad \\u escape"))
                                i += 4
                            }
                            else -> sb.append(e)
                        }
                    }
                    else -> sb.append(c)
                }
            }
        }
        fun arr(depth: Int): List<Any?> {
            i++; ws()
            val out = ArrayList<Any?>()
            if (i < s.length && s[i] == ']') { i++; return out }
            while (true) {
                ws(); out.add(value(depth + 1)); ws()
                if (i >= s.length) throw ParseError("unterminated array")
                if (s[i] == ',') { i++; continue }
                if (s[i] == ']') { i++; return out }
                throw ParseError("expected , or ] at $i")
            }
        }
        fun obj(depth: Int): Map<String, Any?> {
            i++; ws()
            val out = LinkedHashMap<String, Any?>()
            if (i < s.length && s[i] == '}') { i++; return out }
            while (true) {
                ws()
                if (i >= s.length || s[i] != '"') throw ParseError("expected key at $i")
                val k = str(); ws()
                if (i >= s.length || s[i] != ':') throw ParseError("expected : at $i")
                i++; ws(); out[k] = value(depth + 1); ws()
                if (i >= s.length) throw ParseError("unterminated object")
                if (s[i] == ',') { i++; continue }
                if (s[i] == '}') { i++; return out }
                throw ParseError("expected , or } at $i")
            }
        }
    }

    fun write(v: Any?): String = when (v) {
        null -> "null"
        is String -> "\"" + v.flatMap { c ->
            when {
                c == '"' -> listOf('\\', '"'); c == '\\' -> listOf('\\', '\\'); c == '\n' -> listOf('\\', 'n')
                c.code < 0x20 -> "\\u%04x".format(c.code).toList()
                else -> listOf(c)
            }
        }.joinToString("") + "\""
        is Boolean, is Int, is Long -> v.toString()
        is Double -> if (v.isFinite()) v.toString() else "null"
        is Float -> if (v.isFinite()) v.toDouble().toString() else "null"
        is Map<*, *> -> v.entries.joinToString(",", "{", "}") { write(it.key.toString()) + ":" + write(it.value) }
        is Iterable<*> -> v.joinToString(",", "[", "]") { write(it) }
        is IntArray -> v.joinToString(",", "[", "]")
        else -> write(v.toString())
    }
}
