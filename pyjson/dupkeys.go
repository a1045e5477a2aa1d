package pyjson

import (
	"strconv"
	"strings"
)

// DuplicateKey is an object key that appears more than once in a document.
// Python's json.loads keeps the last value silently; amk's readers of
// programs, configs and API bodies refuse such a document instead, because
// the two readers of one file could otherwise see different values.
type DuplicateKey struct {
	Path string // JSON path of the object holding the key ("" for the root)
	Key  string
}

func (d *DuplicateKey) Error() string {
	where := "the top-level object"
	if d.Path != "" {
		where = d.Path
	}
	return "duplicate key " + strconv.Quote(d.Key) + " in " + where
}

// FindDuplicateKey returns the first repeated object key in v (depth first,
// in document order), or nil when every object's keys are distinct. Its
// work is linear in the size of the tree.
func FindDuplicateKey(v Value) *DuplicateKey {
	return findDuplicate(v, "", false)
}

// FindDuplicateKeyFold is FindDuplicateKey with keys compared without regard
// to case, as Go's encoding/json matches them to struct fields.
func FindDuplicateKeyFold(v Value) *DuplicateKey {
	return findDuplicate(v, "", true)
}

func findDuplicate(v Value, path string, fold bool) *DuplicateKey {
	switch v.Kind {
	case Object:
		if len(v.Obj) > 1 {
			seen := make(map[string]struct{}, len(v.Obj))
			for _, m := range v.Obj {
				k := m.Key
				if fold {
					k = strings.ToLower(k)
				}
				if _, dup := seen[k]; dup {
					return &DuplicateKey{Path: path, Key: m.Key}
				}
				seen[k] = struct{}{}
			}
		}
		for _, m := range v.Obj {
			if d := findDuplicate(m.Val, childPath(path, m.Key), fold); d != nil {
				return d
			}
		}
	case Array:
		for i, e := range v.Arr {
			if e.Kind != Object && e.Kind != Array {
				continue
			}
			if d := findDuplicate(e, path+"["+strconv.Itoa(i)+"]", fold); d != nil {
				return d
			}
		}
	}
	return nil
}

func childPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// ParseUnique is Parse that also refuses a document with a repeated object
// key (a *DuplicateKey error).
func ParseUnique(data []byte) (Value, error) {
	v, err := Parse(data)
	if err != nil {
		return Value{}, err
	}
	if d := FindDuplicateKey(v); d != nil {
		return Value{}, d
	}
	return v, nil
}
