package pyjson

import (
	"sort"
	"strings"
	"unicode/utf16"
)

// Indent writes v as Python's json.dumps(v, indent=2) does: one member or
// element per line, ", " never used, ": " between key and value, empty
// containers as {} and [], non-ASCII characters escaped.
func Indent(v Value) []byte {
	var b strings.Builder
	writeIndented(&b, v, 0)
	return []byte(b.String())
}

// Compact writes v as Python's json.dumps(v, sort_keys=sortKeys) does, with
// the default separators ", " and ": ".
func Compact(v Value, sortKeys bool) string {
	var b strings.Builder
	writeCompact(&b, v, sortKeys)
	return b.String()
}

func writeIndented(b *strings.Builder, v Value, level int) {
	switch v.Kind {
	case Array:
		if len(v.Arr) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[")
		for i, e := range v.Arr {
			if i > 0 {
				b.WriteByte(',')
			}
			newline(b, level+1)
			writeIndented(b, e, level+1)
		}
		newline(b, level)
		b.WriteString("]")
	case Object:
		if len(v.Obj) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{")
		for i, m := range v.Obj {
			if i > 0 {
				b.WriteByte(',')
			}
			newline(b, level+1)
			writeString(b, m.Key)
			b.WriteString(": ")
			writeIndented(b, m.Val, level+1)
		}
		newline(b, level)
		b.WriteString("}")
	default:
		writeScalar(b, v)
	}
}

func newline(b *strings.Builder, level int) {
	b.WriteByte('\n')
	for range level {
		b.WriteString("  ")
	}
}

func writeCompact(b *strings.Builder, v Value, sortKeys bool) {
	switch v.Kind {
	case Array:
		b.WriteByte('[')
		for i, e := range v.Arr {
			if i > 0 {
				b.WriteString(", ")
			}
			writeCompact(b, e, sortKeys)
		}
		b.WriteByte(']')
	case Object:
		members := v.Obj
		if sortKeys {
			members = append([]Member(nil), v.Obj...)
			// Byte order of UTF-8 equals code point order, which is Python's.
			sort.SliceStable(members, func(i, j int) bool { return members[i].Key < members[j].Key })
		}
		b.WriteByte('{')
		for i, m := range members {
			if i > 0 {
				b.WriteString(", ")
			}
			writeString(b, m.Key)
			b.WriteString(": ")
			writeCompact(b, m.Val, sortKeys)
		}
		b.WriteByte('}')
	default:
		writeScalar(b, v)
	}
}

func writeScalar(b *strings.Builder, v Value) {
	switch v.Kind {
	case Null:
		b.WriteString("null")
	case Bool:
		if v.B {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case Int, Float:
		b.WriteString(v.Num)
	case String:
		writeString(b, v.S)
	default:
		b.WriteString("null")
	}
}

const hexDigits = "0123456789abcdef"

// writeString escapes s as Python's json module does with ensure_ascii=True.
func writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (r > 0x7e && r < 0x10000):
				writeU(b, r)
			case r >= 0x10000:
				r1, r2 := utf16.EncodeRune(r)
				writeU(b, r1)
				writeU(b, r2)
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

func writeU(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	b.WriteByte(hexDigits[(r>>12)&0xf])
	b.WriteByte(hexDigits[(r>>8)&0xf])
	b.WriteByte(hexDigits[(r>>4)&0xf])
	b.WriteByte(hexDigits[r&0xf])
}
