package schedule

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// UserConfig is a schedule config as a user handed it to a verb, read by
// ReadUserConfig: the config object itself, ready for the evaluation
// pipeline, and what reading it found.
type UserConfig struct {
	// Value is the config object (propose's schedule_config when the input
	// was propose's whole answer).
	Value pyjson.Value
	// FromSurface says the input was propose's answer (the edit surface)
	// and Value is its schedule_config.
	FromSurface bool
	// Ignored are the unknown keys read past because the caller allowed
	// them; empty otherwise (they are an error).
	Ignored []UnknownKey
}

// JSON is the config object as compact JSON, the form a trial spec carries.
func (c UserConfig) JSON() []byte { return []byte(pyjson.Compact(c.Value, false)) }

// ErrConfigInput is what every ReadUserConfig error wraps: the input is not
// a config amk can read, which fronts treat as bad input (not as a
// rejected config, whose reasons the evaluation's verdict gives).
var ErrConfigInput = errors.New("schedule config")

// UnknownKeysError refuses a config with keys amk would read past: a
// misspelt key would otherwise leave its default in place without a word.
type UnknownKeysError struct{ Keys []UnknownKey }

func (e *UnknownKeysError) Error() string {
	names := make([]string, len(e.Keys))
	for i, k := range e.Keys {
		names[i] = k.String()
	}
	return fmt.Sprintf("%v: unknown key(s) %s: amk would use the defaults in their place",
		ErrConfigInput, strings.Join(names, ", "))
}

// Unwrap makes the error an ErrConfigInput.
func (e *UnknownKeysError) Unwrap() error { return ErrConfigInput }

// surfaceKey is the key of the incumbent config in propose's answer.
const surfaceKey = "schedule_config"

// ReadUserConfig reads a schedule config a user wrote or copied: it must be
// JSON without repeated keys and an object. propose's whole answer is
// accepted as it is: its schedule_config is the config. Keys amk does not
// read (UnknownKeys) are an error unless allowUnknown, in which case they
// are listed in Ignored. An object that sets no schedule key at all is an
// error (it would silently stand for the default config). Types and ranges
// are not checked here: the evaluation's verdict rejects a config with its
// reasons.
func ReadUserConfig(data []byte, allowUnknown bool) (UserConfig, error) {
	v, err := pyjson.ParseUnique(data)
	if err != nil {
		return UserConfig{}, fmt.Errorf("%w: not valid JSON: %v", ErrConfigInput, err)
	}
	if v.Kind != pyjson.Object {
		return UserConfig{}, fmt.Errorf("%w: expected a JSON object, got %s", ErrConfigInput, pyType(v))
	}
	var cfg UserConfig
	if inner, ok := v.Get(surfaceKey); ok {
		if inner.Kind != pyjson.Object {
			return UserConfig{}, fmt.Errorf("%w: %s must be an object, got %s", ErrConfigInput, surfaceKey, pyType(inner))
		}
		v, cfg.FromSurface = inner, true
	}
	cfg.Value = v
	if unknown := UnknownKeys(v); len(unknown) > 0 {
		if !allowUnknown {
			return UserConfig{}, &UnknownKeysError{Keys: unknown}
		}
		cfg.Ignored = unknown
	}
	if !slices.ContainsFunc(v.Obj, func(m pyjson.Member) bool { return slices.Contains(configKeys, m.Key) }) {
		return UserConfig{}, fmt.Errorf("%w: the object sets no schedule setting, so the default config would be evaluated in its place (leave the config out to mean the default)", ErrConfigInput)
	}
	return cfg, nil
}

// OffGridNotes names each knob of p whose value is neither one of the
// search space's choices on target and device nor the knob's default: such
// a config is lowered and evaluated as written, but no campaign would draw
// it, and a value between two choices may be clamped by the lowering.
func OffGridNotes(p Point, target *ir.GpuTarget, device Device) []string {
	var notes []string
	for _, k := range Space(target, device) {
		v := p.KnobValue(k.Path)
		if v.Kind == pyjson.Null || sameValue(v, k.Default) {
			continue
		}
		onGrid := false
		shown := make([]string, len(k.Choices))
		for i, c := range k.Choices {
			onGrid = onGrid || sameValue(v, c)
			shown[i] = pyjson.Compact(c, true)
		}
		if !onGrid {
			notes = append(notes, fmt.Sprintf("%s %s"+OffGridMarker+"(%s): evaluated as written, but a campaign never tries it",
				k.Path, pyjson.Compact(v, true), strings.Join(shown, ", ")))
		}
	}
	return notes
}

// OffGridMarker is in every note of OffGridNotes, for fronts that show
// those notes apart from the rest.
const OffGridMarker = " is off the search grid "

func sameValue(a, b pyjson.Value) bool { return pyjson.Compact(a, true) == pyjson.Compact(b, true) }
