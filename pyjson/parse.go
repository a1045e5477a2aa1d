package pyjson

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arrays and objects accepted by Parse.
const MaxDepth = 128

// SyntaxError is a malformed JSON text, with the byte offset where it was
// detected.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

// Parse reads one JSON value (surrounded by optional whitespace) from data.
// It accepts what Python's json.loads accepts, including the non-standard
// literals NaN, Infinity and -Infinity.
func Parse(data []byte) (Value, error) {
	p := parser{data: data}
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return Value{}, p.fail("extra data after the top-level value")
	}
	return v, nil
}

type parser struct {
	data []byte
	pos  int
}

func (p *parser) fail(format string, args ...any) error {
	return &SyntaxError{Offset: p.pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (Value, error) {
	if p.pos >= len(p.data) {
		return Value{}, p.fail("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		return Value{Kind: String, S: s}, err
	case c == 't':
		return p.literal("true", BoolValue(true))
	case c == 'f':
		return p.literal("false", BoolValue(false))
	case c == 'n':
		return p.literal("null", NullValue())
	case c == 'N':
		return p.literal("NaN", Value{Kind: Float, Num: "NaN"})
	case c == 'I':
		return p.literal("Infinity", Value{Kind: Float, Num: "Infinity"})
	case c == '-' || (c >= '0' && c <= '9'):
		if strings.HasPrefix(string(p.data[p.pos:min(len(p.data), p.pos+9)]), "-Infinity") {
			return p.literal("-Infinity", Value{Kind: Float, Num: "-Infinity"})
		}
		return p.number()
	default:
		return Value{}, p.fail("unexpected character %q", c)
	}
}

func (p *parser) literal(word string, v Value) (Value, error) {
	if !strings.HasPrefix(string(p.data[p.pos:min(len(p.data), p.pos+len(word))]), word) {
		return Value{}, p.fail("invalid literal")
	}
	p.pos += len(word)
	return v, nil
}

func (p *parser) object(depth int) (Value, error) {
	if depth >= MaxDepth {
		return Value{}, p.fail("nesting deeper than %d", MaxDepth)
	}
	p.pos++ // {
	v := Value{Kind: Object, Obj: []Member{}}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return Value{}, p.fail("expected a string key")
		}
		key, err := p.str()
		if err != nil {
			return Value{}, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return Value{}, p.fail("expected ':' after key %q", key)
		}
		p.pos++
		p.skipSpace()
		elem, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		v.Obj = append(v.Obj, Member{Key: key, Val: elem})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.fail("unterminated object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return v, nil
		default:
			return Value{}, p.fail("expected ',' or '}' in object")
		}
	}
}

func (p *parser) array(depth int) (Value, error) {
	if depth >= MaxDepth {
		return Value{}, p.fail("nesting deeper than %d", MaxDepth)
	}
	p.pos++ // [
	v := Value{Kind: Array, Arr: []Value{}}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		elem, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		v.Arr = append(v.Arr, elem)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.fail("unterminated array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return Value{}, p.fail("expected ',' or ']' in array")
		}
	}
}

func (p *parser) number() (Value, error) {
	start := p.pos
	isFloat := false
	if p.data[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	intStart := p.pos
	if digits() == 0 {
		return Value{}, p.fail("invalid number")
	}
	if p.data[intStart] == '0' && p.pos-intStart > 1 {
		return Value{}, &SyntaxError{Offset: intStart, Msg: "leading zero in number"}
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		isFloat = true
		if digits() == 0 {
			return Value{}, p.fail("digit expected after decimal point")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		isFloat = true
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return Value{}, p.fail("digit expected in exponent")
		}
	}
	lit := string(p.data[start:p.pos])
	if !isFloat {
		if lit == "-0" {
			lit = "0"
		}
		return Value{Kind: Int, Num: lit}, nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return Value{}, &SyntaxError{Offset: start, Msg: "invalid number " + lit}
	}
	return Value{Kind: Float, Num: FormatFloat(f)}, nil
}

func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	var b strings.Builder
	for {
		if p.pos >= len(p.data) {
			return "", p.fail("unterminated string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return b.String(), nil
		case c == '\\':
			if err := p.escape(&b); err != nil {
				return "", err
			}
		case c < 0x20:
			return "", p.fail("control character in string")
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return "", p.fail("invalid UTF-8 in string")
			}
			b.WriteRune(r)
			p.pos += size
		}
	}
}

func (p *parser) escape(b *strings.Builder) error {
	if p.pos+1 >= len(p.data) {
		return p.fail("unterminated escape")
	}
	c := p.data[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		b.WriteByte(c)
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case 'u':
		r, err := p.hex4()
		if err != nil {
			return err
		}
		if utf16.IsSurrogate(r) && p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
			save := p.pos
			p.pos += 2
			r2, err := p.hex4()
			if err == nil {
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					b.WriteRune(dec)
					return nil
				}
			}
			p.pos = save
		}
		b.WriteRune(r)
	default:
		return p.fail("invalid escape \\%c", c)
	}
	return nil
}

func (p *parser) hex4() (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.fail("short \\u escape")
	}
	n, err := strconv.ParseUint(string(p.data[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		return 0, p.fail("invalid \\u escape")
	}
	p.pos += 4
	return rune(n), nil
}
