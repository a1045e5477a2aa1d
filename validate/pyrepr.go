package validate

import (
	"strconv"
	"strings"

	"github.com/amk-dev/amk/pyjson"
)

// pyRepr renders a decoded JSON value as Python's repr() of the object
// json.loads would have produced: 'str', True/False/None, ints digit for
// digit, floats in repr form (inf, nan), lists as [a, b] and dicts as
// {'k': v}.
func pyRepr(v pyjson.Value) string {
	var b strings.Builder
	writeRepr(&b, v, 0)
	return b.String()
}

func writeRepr(b *strings.Builder, v pyjson.Value, depth int) {
	if depth > pyjson.MaxDepth {
		b.WriteString("...")
		return
	}
	switch v.Kind {
	case pyjson.Array:
		b.WriteByte('[')
		for i, e := range v.Arr {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e, depth+1)
		}
		b.WriteByte(']')
	case pyjson.Object:
		b.WriteByte('{')
		for i, m := range v.Obj {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(pyStr(m.Key))
			b.WriteString(": ")
			writeRepr(b, m.Val, depth+1)
		}
		b.WriteByte('}')
	case pyjson.String:
		b.WriteString(pyStr(v.S))
	default:
		b.WriteString(v.Repr())
	}
}

// pyStr is Python's repr of a str: single quotes unless the text holds a
// single quote and no double quote, backslash escapes for the quote in use,
// backslashes and control characters.
func pyStr(s string) string {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteString(hex2(int(r)))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

func hex2(n int) string {
	s := strconv.FormatInt(int64(n), 16)
	if len(s) < 2 {
		s = "0" + s
	}
	return s
}

// pyInts renders a list of ints as Python does: [1, 2, 3].
func pyInts[T ~int | ~int32](xs []T) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(int(x)))
	}
	b.WriteByte(']')
	return b.String()
}
