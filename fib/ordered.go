package fib

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Named is one entry of an Ordered object.
type Named[T any] struct {
	Name  string
	Value T
}

// Ordered is a JSON object whose key order matters: a Definition's inputs
// are the kernel's positional interface, so they are kept in file order.
// Duplicate keys are refused when decoding.
type Ordered[T any] []Named[T]

// Get returns the value under name.
func (o Ordered[T]) Get(name string) (T, bool) {
	for _, e := range o {
		if e.Name == name {
			return e.Value, true
		}
	}
	var zero T
	return zero, false
}

// Names lists the keys in order.
func (o Ordered[T]) Names() []string {
	out := make([]string, len(o))
	for i, e := range o {
		out[i] = e.Name
	}
	return out
}

// Set replaces the value under name or appends it.
func (o *Ordered[T]) Set(name string, v T) {
	for i := range *o {
		if (*o)[i].Name == name {
			(*o)[i].Value = v
			return
		}
	}
	*o = append(*o, Named[T]{name, v})
}

// MarshalJSON writes the entries in order.
func (o Ordered[T]) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(e.Name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(e.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an object in file order; null leaves o empty.
func (o *Ordered[T]) UnmarshalJSON(data []byte) error {
	raw, err := rawObject(data)
	if err != nil {
		return err
	}
	out := make(Ordered[T], 0, len(raw))
	for _, e := range raw {
		var v T
		if err := json.Unmarshal(e.Value, &v); err != nil {
			return fmt.Errorf("%q: %w", e.Name, err)
		}
		out = append(out, Named[T]{e.Name, v})
	}
	*o = out
	return nil
}

// errNotObject is rawObject's answer for a JSON value that is not an object.
var errNotObject = errors.New("not a JSON object")

// rawObject splits a JSON object into its entries in file order, refusing
// duplicate keys. null gives no entries and no error.
func rawObject(data []byte) (Ordered[json.RawMessage], error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errNotObject
	}
	out := Ordered[json.RawMessage]{} // {} is an object with no entries, not null
	seen := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := kt.(string)
		if seen[key] {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, Named[json.RawMessage]{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return out, nil
}
