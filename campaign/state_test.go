package campaign

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// A state file written when points were stored as raw JSON (the testdata
// file was written by that code) loads into typed points and is written back
// byte for byte.
func TestStateWithRawPointsLoadsTyped(t *testing.T) {
	old, err := os.ReadFile("testdata/state_before_typed_points.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(old)
	if err != nil {
		t.Fatal(err)
	}
	st := c.State()
	if st.Best == nil || st.Best.Point == nil || st.Anchor == nil || st.Anchor.Point == nil {
		t.Fatalf("best %+v, anchor %+v: want typed points", st.Best, st.Anchor)
	}
	if got := st.Best.Point.ID(); got != st.Best.ScheduleID {
		t.Errorf("best point id %s, want the recorded %s", got, st.Best.ScheduleID)
	}
	again, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, old) {
		t.Errorf("re-marshalled state differs from the file it was loaded from")
	}
}

// A point written in another spacing or key order (a hand-edited file) is
// read and written back in the canonical form; a malformed one is a clear
// load error, not a point silently dropped later.
func TestStatePointsMigrateOrRefuse(t *testing.T) {
	old, err := os.ReadFile("testdata/state_before_typed_points.json")
	if err != nil {
		t.Fatal(err)
	}
	withBestPoint := func(raw string) []byte {
		var top map[string]json.RawMessage
		if err := json.Unmarshal(old, &top); err != nil {
			t.Fatal(err)
		}
		var best map[string]json.RawMessage
		if err := json.Unmarshal(top["best"], &best); err != nil {
			t.Fatal(err)
		}
		best["point"] = json.RawMessage(raw)
		top["best"], _ = json.Marshal(best)
		data, _ := json.Marshal(top)
		return data
	}
	c, err := Load(withBestPoint(`{ "tiling" : {"gemv": {"N_tile": 64}},   "pipelining_depth": 2 }`))
	if err != nil {
		t.Fatalf("a loosely written point: %v", err)
	}
	p := c.State().Best.Point
	if p == nil || p.Config.PipeliningDepth != 2 {
		t.Fatalf("best point %+v, want pipelining_depth 2", p)
	}
	data, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var top struct {
		Best struct {
			Point json.RawMessage `json:"point"`
		} `json:"best"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	var written bytes.Buffer
	_ = json.Compact(&written, top.Best.Point)
	raw, _ := p.MarshalJSON()
	var want bytes.Buffer
	_ = json.Compact(&want, raw)
	if !bytes.Equal(written.Bytes(), want.Bytes()) {
		t.Errorf("point written back as %s, want the canonical %s", written.Bytes(), want.Bytes())
	}
	if _, err := Load(withBestPoint(`{"pipelining_depth": "deep"}`)); err == nil || !strings.Contains(err.Error(), "schedule point") {
		t.Errorf("a malformed stored point: error %v, want one naming the schedule point", err)
	}
}
