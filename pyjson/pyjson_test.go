package pyjson

import (
	"math"
	"strings"
	"testing"
)

func TestFormatFloatMatchesPythonRepr(t *testing.T) {
	cases := map[float64]string{
		1e-06: "1e-06", 0.25: "0.25", 10000: "10000.0", 1e16: "1e+16", 1e15: "1000000000000000.0",
		1e-05: "1e-05", 0.0001: "0.0001", -2.5: "-2.5", 0: "0.0", 1.5e300: "1.5e+300", 0.1: "0.1",
		123456789.125: "123456789.125", math.Inf(1): "Infinity", math.Inf(-1): "-Infinity",
	}
	for in, want := range cases {
		if got := FormatFloat(in); got != want {
			t.Errorf("FormatFloat(%v) = %q, want %q", in, got, want)
		}
	}
	if FormatFloat(math.Copysign(0, -1)) != "-0.0" || FormatFloat(math.NaN()) != "NaN" {
		t.Error("signed zero or NaN formatted wrongly")
	}
}

func TestIndentMatchesPythonDumps(t *testing.T) {
	v := ObjectValue(
		M("a", ArrayValue(IntValue(1), FloatValue(2))),
		M("empty_list", ArrayValue()),
		M("empty_obj", ObjectValue()),
		M("s", StringValue("tab\there \"q\" é \u2028 😀 \x7f")),
		M("n", NullValue()),
		M("t", BoolValue(true)),
	)
	want := "{\n  \"a\": [\n    1,\n    2.0\n  ],\n  \"empty_list\": [],\n  \"empty_obj\": {},\n" +
		"  \"s\": \"tab\\there \\\"q\\\" \\u00e9 \\u2028 \\ud83d\\ude00 \\u007f\",\n  \"n\": null,\n  \"t\": true\n}"
	if got := string(Indent(v)); got != want {
		t.Errorf("Indent:\n%s\nwant:\n%s", got, want)
	}
	if got := Compact(ObjectValue(M("b", IntValue(1)), M("a", ArrayValue(IntValue(2), StringValue("x")))), true); got != `{"a": [2, "x"], "b": 1}` {
		t.Errorf("Compact sorted = %s", got)
	}
}

func TestParseKeepsOrderKindsAndNormalisesNumbers(t *testing.T) {
	v, err := Parse([]byte(` {"z": 1, "a": 1.0, "e": 1E-6, "neg": -0, "big": 123456789012345678901234567890,
		"u": "\u00e9\ud83d\ude00", "nan": NaN, "inf": -Infinity, "dup": 1, "dup": 2} `))
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{}
	for _, m := range v.Obj {
		keys = append(keys, m.Key)
	}
	if strings.Join(keys, ",") != "z,a,e,neg,big,u,nan,inf,dup,dup" {
		t.Fatalf("order lost: %v", keys)
	}
	checks := map[string]string{"z": "1", "a": "1.0", "e": "1e-06", "neg": "0", "big": "123456789012345678901234567890"}
	for k, want := range checks {
		got, _ := v.Get(k)
		if got.Num != want {
			t.Errorf("%s = %q, want %q", k, got.Num, want)
		}
	}
	if a, _ := v.Get("a"); a.Kind != Float {
		t.Error("1.0 parsed as an int")
	}
	if u, _ := v.Get("u"); u.S != "é😀" {
		t.Errorf("escapes decoded to %q", u.S)
	}
	if d, _ := v.Get("dup"); d.Num != "2" {
		t.Error("the last duplicate key should win, as in Python")
	}
}

func TestParseErrors(t *testing.T) {
	for _, bad := range []string{``, `{`, `[1,]`, `{"a" 1}`, `01`, `1.`, `1e`, `"\x"`, "\"a\nb\"", `tru`, `[1] 2`,
		`{"a":1,}`, `"\ud800`, strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), "\"\xff\""} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func FuzzParseIndentStable(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5, "x"], "b": null}`, `[]`, `"\u00e9"`, `1e400`, `{"k": {"n": -0.0}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse([]byte(s))
		if err != nil {
			return
		}
		once := Indent(v)
		v2, err := Parse(once)
		if err != nil {
			t.Fatalf("re-parse of our own output failed: %v\n%s", err, once)
		}
		if twice := Indent(v2); string(twice) != string(once) {
			t.Fatalf("unstable:\n%s\n%s", once, twice)
		}
	})
}

func TestParseUniqueRefusesRepeatedKeys(t *testing.T) {
	for doc, want := range map[string]string{
		`{"a": 1, "a": 2}`:                       `duplicate key "a" in the top-level object`,
		`{"t": [{"x": 1}, {"y": 1, "y": 2}]}`:    `duplicate key "y" in t[1]`,
		`{"c": {"tiling": {"g": 1, "g": 1}}}`:    `duplicate key "g" in c.tiling`,
		`[{"k": {"k": 1}}, {"k": 1, "j": 2}]`:    ``,
		`{"a": {"b": 1}, "b": {"a": 1}, "x": 0}`: ``,
	} {
		_, err := ParseUnique([]byte(doc))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("ParseUnique(%s) error = %q, want %q", doc, got, want)
		}
	}
}
