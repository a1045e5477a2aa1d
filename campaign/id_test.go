package campaign

import (
	"errors"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
)

// Every id ID makes, from every preset, target and device and from names a
// user may choose, is valid under the one grammar.
func TestEveryDerivedIDIsValid(t *testing.T) {
	names := []string{"", "Night1", "night-1", "a b/c", "..", "über", strings.Repeat("X", 300), "-lead", ".hidden"}
	models := append(model.PresetNames(), "/models/Llama-3.1-8B/config.json", "../escape")
	for _, m := range models {
		for _, gpu := range ir.TargetNames() {
			for _, dev := range []schedule.Device{schedule.DeviceCPU, schedule.DeviceCUDA} {
				for _, name := range names {
					id := ID(m, gpu, dev, name)
					if err := ValidID(id); err != nil {
						t.Errorf("ID(%q, %q, %q, %q) = %q: %v", m, gpu, dev, name, id, err)
					}
				}
			}
		}
	}
	if id := ID("toy-2L", "h100", "cpu", ""); id != "toy-2L-h100-cpu" {
		t.Fatalf("ids keep the model's case: got %q", id)
	}
}

func TestValidIDRejectsWhatCouldEscapeOrConfuse(t *testing.T) {
	for _, bad := range []string{"", ".", "..", ".x", "-x", "a/b", `a\b`, "a b", "ü", "a\x00", strings.Repeat("a", MaxIDLen+1)} {
		if err := ValidID(bad); !errors.Is(err, ErrBadID) {
			t.Errorf("ValidID(%q) = %v", bad, err)
		}
	}
	for _, good := range []string{"toy-2L-h100-cpu", "Night1", "_x", "a.b_c-D"} {
		if err := ValidID(good); err != nil {
			t.Errorf("ValidID(%q) = %v", good, err)
		}
	}
}
