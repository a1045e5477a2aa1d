package mpk_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/ir/mpk"
)

// Decode names the JSON path of what is wrong.
func TestDecodeErrorsNameTheJSONPath(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "good", "hand_mirage.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ from, to, path string }{
		{`"all_events"`, `"events"`, "all_events"},
		{`"trigger_event": 3,`, `"trigger_event": "3",`, "all_tasks[3].trigger_event"},
		{`"trigger_event": 3,`, `"trigger_event": -3,`, "all_tasks[3].trigger_event"},
		{`"dims": [1], "strides": [1], "data_type": 955},
                {"base_ptr": "embed"`, `"dims": [1], "strides": [], "data_type": 955},
                {"base_ptr": "embed"`, "all_tasks[2].inputs[0].strides"},
		{`"num_triggers": 2, "first_task_id": 5`, `"num_triggers": 2.5, "first_task_id": 5`, "all_events[3].num_triggers"},
		{`"first_tasks": [2]`, `"first_tasks": [2, null]`, "first_tasks[1]"},
		{`"base_ptr": "tokens"`, `"base_ptr": 7`, "all_tasks[2].inputs[0].base_ptr"},
		{`"variant_id": 1,`, ``, "all_tasks[3].variant_id"},
	}
	for _, c := range cases {
		if !bytes.Contains(good, []byte(c.from)) {
			t.Fatalf("testdata lacks %q", c.from)
		}
		_, err := mpk.Decode(bytes.Replace(good, []byte(c.from), []byte(c.to), 1))
		var de *ir.DecodeError
		if !errors.As(err, &de) || de.Path != c.path {
			t.Errorf("%s -> %s: got %v, want an error at %s", c.from, c.to, err, c.path)
		}
	}
	if _, err := mpk.Decode([]byte(`[1, 2]`)); err == nil {
		t.Error("an array decoded as a task graph")
	}
	if _, err := mpk.Decode(make([]byte, mpk.MaxGraphBytes+1)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("an oversized file: %v", err)
	}
}

// Encode writes Mirage's layout (sorted keys) and is a fixed point of Decode.
func TestEncodeIsStable(t *testing.T) {
	for _, name := range []string{"hand_seed.json", "hand_mirage.json", "export_toy.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "good", name))
		if err != nil {
			t.Fatal(err)
		}
		g, err := mpk.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		enc := mpk.Encode(g)
		g2, err := mpk.Decode(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mpk.Encode(g2), enc) {
			t.Errorf("%s: encoding is not a fixed point", name)
		}
		if i, j := bytes.Index(enc, []byte(`"dependent_event"`)), bytes.Index(enc, []byte(`"variant_id"`)); i < 0 || j < i {
			t.Errorf("%s: task keys are not in sorted order", name)
		}
	}
	if !mpk.Looks([]byte(`{"all_tasks": []}`)) || mpk.Looks([]byte(`{"tasks": []}`)) || mpk.Looks([]byte(`not json`)) {
		t.Error("Looks misclassifies")
	}
}

// Event ids pack gpu, index and the NVSHMEM tag as Mirage's get_event_id does.
func TestEventIDLayout(t *testing.T) {
	id := mpk.MakeEventID(3, 17, true)
	if uint64(id) != 0x1e00000000000000|3<<32|17 {
		t.Fatalf("id %#x", uint64(id))
	}
	if id.GPU() != 3 || id.Index() != 17 || !id.NVSHMEM() || !id.Valid() || !id.Canonical() {
		t.Fatalf("%s: gpu %d index %d nvshmem %v", id, id.GPU(), id.Index(), id.NVSHMEM())
	}
	if mpk.InvalidEventID.Valid() || mpk.InvalidEventID.String() != "EVENT_INVALID_ID" {
		t.Fatal("the invalid id is valid")
	}
	if mpk.EventID(1<<50 | 2).Canonical() {
		t.Fatal("stray bits between the gpu id and the tag pass as canonical")
	}
}
