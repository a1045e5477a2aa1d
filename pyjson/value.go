package pyjson

import (
	"math"
	"strconv"
	"strings"
)

// Kind is the JSON type of a Value.
type Kind uint8

// The JSON kinds. Integers and floats are told apart because Python does.
const (
	Null Kind = iota
	Bool
	Int
	Float
	String
	Array
	Object
)

func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "bool"
	case Int:
		return "int"
	case Float:
		return "float"
	case String:
		return "string"
	case Array:
		return "array"
	case Object:
		return "object"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is one JSON value. Only the fields of its Kind are meaningful.
type Value struct {
	Kind Kind
	B    bool
	// Num is the normalised literal of an Int or Float (Python's repr).
	Num string
	S   string
	Arr []Value
	Obj []Member
}

// Member is one key/value pair of an Object, in document order.
type Member struct {
	Key string
	Val Value
}

// Constructors.

// NullValue returns JSON null.
func NullValue() Value { return Value{Kind: Null} }

// BoolValue returns a JSON boolean.
func BoolValue(b bool) Value { return Value{Kind: Bool, B: b} }

// IntValue returns a JSON integer.
func IntValue(i int64) Value { return Value{Kind: Int, Num: strconv.FormatInt(i, 10)} }

// FloatValue returns a JSON float written as Python's repr writes it.
func FloatValue(f float64) Value { return Value{Kind: Float, Num: FormatFloat(f)} }

// StringValue returns a JSON string.
func StringValue(s string) Value { return Value{Kind: String, S: s} }

// ArrayValue returns a JSON array of the given elements.
func ArrayValue(elems ...Value) Value {
	if elems == nil {
		elems = []Value{}
	}
	return Value{Kind: Array, Arr: elems}
}

// ObjectValue returns a JSON object with the given members in order.
func ObjectValue(members ...Member) Value {
	if members == nil {
		members = []Member{}
	}
	return Value{Kind: Object, Obj: members}
}

// M is shorthand for a Member.
func M(key string, v Value) Member { return Member{Key: key, Val: v} }

// Get returns the value of key in an Object (the last one if repeated, as
// Python's dict does) and whether it was present.
func (v Value) Get(key string) (Value, bool) {
	if v.Kind != Object {
		return Value{}, false
	}
	for i := len(v.Obj) - 1; i >= 0; i-- {
		if v.Obj[i].Key == key {
			return v.Obj[i].Val, true
		}
	}
	return Value{}, false
}

// Set replaces key's value in an Object, or appends it.
func (v *Value) Set(key string, val Value) {
	for i := range v.Obj {
		if v.Obj[i].Key == key {
			v.Obj[i].Val = val
			return
		}
	}
	v.Obj = append(v.Obj, Member{Key: key, Val: val})
}

// Int64 returns an Int value as int64; ok is false for any other kind or when
// the integer does not fit.
func (v Value) Int64() (int64, bool) {
	if v.Kind != Int {
		return 0, false
	}
	i, err := strconv.ParseInt(v.Num, 10, 64)
	return i, err == nil
}

// Float64 returns an Int or Float value as float64 (ok false otherwise).
func (v Value) Float64() (float64, bool) {
	if v.Kind != Int && v.Kind != Float {
		return 0, false
	}
	switch v.Num {
	case "Infinity":
		return math.Inf(1), true
	case "-Infinity":
		return math.Inf(-1), true
	case "NaN":
		return math.NaN(), true
	}
	f, err := strconv.ParseFloat(v.Num, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, true
		}
		return 0, false
	}
	return f, true
}

// Repr renders a scalar value the way Python's repr() would show the decoded
// object, for error messages (strings quoted with single quotes, True/False,
// None). Containers are rendered compactly.
func (v Value) Repr() string {
	switch v.Kind {
	case Null:
		return "None"
	case Bool:
		if v.B {
			return "True"
		}
		return "False"
	case Int, Float:
		switch v.Num {
		case "Infinity":
			return "inf"
		case "-Infinity":
			return "-inf"
		case "NaN":
			return "nan"
		}
		return v.Num
	case String:
		return "'" + strings.ReplaceAll(strings.ReplaceAll(v.S, `\`, `\\`), "'", `\'`) + "'"
	}
	return Compact(v, false)
}

// FormatFloat writes f the way Python's float repr does: the shortest digits
// that round-trip, fixed notation with a trailing ".0" when the decimal
// exponent is in [-4, 16), otherwise "d.ddde+XX". Non-finite values use the
// spellings Python's json module writes (Infinity, -Infinity, NaN).
func FormatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	epos := strings.LastIndexByte(sci, 'e')
	exp, _ := strconv.Atoi(sci[epos+1:])
	if exp >= -4 && exp < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsRune(s, '.') {
			s += ".0"
		}
		return s
	}
	return sci
}
