// The demo service's messages (proto/blerpc.proto) as protobuf bytes, written out by hand:
// the Kotlin compiler's package carries no protobuf runtime. An app uses its protobuf
// runtime's generated classes instead (`EchoRequest.newBuilder()...build().toByteArray()`).

package dev.blerpc.test

import java.io.ByteArrayOutputStream

/** Proto3 fields: field number → value (a varint as Long, a length-delimited one as bytes). */
typealias Fields = Map<Int, Any>

private fun ByteArrayOutputStream.varint(value: Long) {
    var v = value
    while (v and 0x7fL.inv() != 0L) {
        write(((v and 0x7f) or 0x80).toInt())
        v = v ushr 7
    }
    write(v.toInt())
}

/** Encodes fields in order: a Long as a varint (skipped when 0), a ByteArray as bytes (skipped when empty). */
fun encode(vararg fields: Pair<Int, Any>): ByteArray {
    val out = ByteArrayOutputStream()
    for ((number, value) in fields) {
        when (value) {
            is Long -> if (value != 0L) {
                out.varint((number shl 3).toLong())
                out.varint(value)
            }
            is ByteArray -> if (value.isNotEmpty()) {
                out.varint(((number shl 3) or 2).toLong())
                out.varint(value.size.toLong())
                out.write(value)
            }
            else -> error("unsupported field value $value")
        }
    }
    return out.toByteArray()
}

/** Decodes varint and length-delimited fields (all the demo service uses). */
fun decode(bytes: ByteArray): Fields {
    val fields = mutableMapOf<Int, Any>()
    var i = 0
    fun varint(): Long {
        var value = 0L
        var shift = 0
        while (true) {
            val b = bytes[i++].toLong() and 0xff
            value = value or ((b and 0x7f) shl shift)
            if (b < 0x80) return value
            shift += 7
        }
    }
    while (i < bytes.size) {
        val key = varint()
        val number = (key ushr 3).toInt()
        fields[number] = when ((key and 7).toInt()) {
            0 -> varint()
            2 -> {
                val len = varint().toInt()
                bytes.copyOfRange(i, i + len).also { i += len }
            }
            else -> error("unsupported wire type in $key")
        }
    }
    return fields
}

/** An int32 field's value (negative numbers are ten-byte varints). */
fun int32(fields: Fields, number: Int): Int = ((fields[number] ?: 0L) as Long).toInt()

fun uint(fields: Fields, number: Int): Long = (fields[number] ?: 0L) as Long

fun bytesOf(fields: Fields, number: Int): ByteArray = (fields[number] ?: ByteArray(0)) as ByteArray

fun echoRequest(message: String) = encode(1 to message.encodeToByteArray())

fun flashReadRequest(address: Long, length: Long) = encode(1 to address, 2 to length)

fun dataWriteRequest(data: ByteArray) = encode(1 to data)

fun counterStreamRequest(count: Long) = encode(1 to count)

fun counterUploadRequest(seq: Long, value: Long) = encode(1 to seq, 2 to value)
