package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"sort"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
)

// The history (campaigns/<id>/ledger.history) holds the parts of a
// campaign's state that only grow with its experiments — the trajectory,
// the model proposer's observations, the prior's examples and the set of
// tried points — so that a snapshot writes what changed since the last one
// instead of all of it: bytes per event stay flat however long the
// campaign. One record per snapshot that had something new, one line each:
//
//	<CRC-32C of the JSON, 8 lowercase hex digits> <space> <JSON> '\n'
//
// The JSON is a historyRecord: the items appended to each list since the
// previous record, the tried points added (or re-tried) and those dropped
// (an infrastructure failure un-tries its point). ledger.json (version 3)
// names the length of the history its state continues (historyMark), so
// the history is appended and fsynced before ledger.json is renamed into
// place: a crash between the two leaves a tail no ledger.json names, which
// readers never read and the next snapshot (or Open) cuts off.

// historyName is the history's file name in the campaign directory.
const historyName = "ledger.history"

// maxHistoryFile bounds the history read back.
const maxHistoryFile = 1 << 30

// historyRecord is one snapshot's additions.
type historyRecord struct {
	Seq          uint64                     `json:"seq"`
	Trajectory   []campaign.TrajectoryPoint `json:"trajectory,omitempty"`
	Observations []campaign.Observation     `json:"observations,omitempty"`
	Prior        []flywheel.Example         `json:"prior,omitempty"`
	// Tried are points tried since the previous record (or tried by
	// another trial), as [schedule id, trial] pairs; Untried the ids no
	// longer tried.
	Tried   [][2]json.RawMessage `json:"tried,omitempty"`
	Untried []string             `json:"untried,omitempty"`
}

// historyMark is what ledger.json says of the history its state continues:
// its length in bytes and the lengths of the lists it holds (a check).
type historyMark struct {
	Bytes        int64 `json:"bytes"`
	Trajectory   int   `json:"trajectory"`
	Observations int   `json:"observations"`
	Prior        int   `json:"prior"`
	Tried        int   `json:"tried"`
}

// history is a ledger's view of its history file: the mark of the last
// snapshot and the tried set it recorded (to write the next difference).
type history struct {
	mark  historyMark
	tried map[string]int
}

// stripGrowing returns st without the lists the history holds.
func stripGrowing(st campaign.State) campaign.State {
	st.Trajectory, st.Observations, st.Prior, st.Tried = nil, nil, nil, nil
	return st
}

// record is what the history lacks of st (nil when nothing).
func (h *history) record(seq uint64, st *campaign.State) (*historyRecord, error) {
	m := h.mark
	if len(st.Trajectory) < m.Trajectory || len(st.Observations) < m.Observations || len(st.Prior) < m.Prior {
		return nil, fmt.Errorf("history: the campaign's lists shrank (trajectory %d < %d, observations %d < %d, prior %d < %d)",
			len(st.Trajectory), m.Trajectory, len(st.Observations), m.Observations, len(st.Prior), m.Prior)
	}
	rec := &historyRecord{Seq: seq, Trajectory: st.Trajectory[m.Trajectory:], Observations: st.Observations[m.Observations:],
		Prior: st.Prior[m.Prior:]}
	ids := make([]string, 0, len(st.Tried))
	for id, trial := range st.Tried {
		if was, ok := h.tried[id]; !ok || was != trial {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		k, _ := json.Marshal(id)
		v, _ := json.Marshal(st.Tried[id])
		rec.Tried = append(rec.Tried, [2]json.RawMessage{k, v})
	}
	for id := range h.tried {
		if _, ok := st.Tried[id]; !ok {
			rec.Untried = append(rec.Untried, id)
		}
	}
	sort.Strings(rec.Untried)
	if len(rec.Trajectory)+len(rec.Observations)+len(rec.Prior)+len(rec.Tried)+len(rec.Untried) == 0 {
		return nil, nil
	}
	return rec, nil
}

// appendHistory writes rec after the marked length of the history (a tail
// no ledger.json names is cut off first), fsyncs it and returns the mark
// the snapshot of st will name.
func (h *history) append(path string, rec *historyRecord, st *campaign.State) (historyMark, error) {
	next := h.mark
	next.Trajectory, next.Observations, next.Prior, next.Tried = len(st.Trajectory), len(st.Observations), len(st.Prior), len(st.Tried)
	if rec == nil {
		return next, nil
	}
	line, err := checksummedLine(rec)
	if err != nil {
		return historyMark{}, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return historyMark{}, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(h.mark.Bytes); err != nil {
		return historyMark{}, fmt.Errorf("history: %w", err)
	}
	if _, err := f.WriteAt(line, h.mark.Bytes); err != nil {
		return historyMark{}, fmt.Errorf("history: %w", err)
	}
	if err := f.Sync(); err != nil {
		return historyMark{}, fmt.Errorf("history: %w", err)
	}
	next.Bytes += int64(len(line))
	return next, nil
}

// committed is the history after a snapshot named mark: st's tried set is
// the one recorded.
func (h *history) committed(mark historyMark, st *campaign.State) {
	h.mark = mark
	if h.tried == nil {
		h.tried = make(map[string]int, len(st.Tried))
	}
	for id := range h.tried {
		if _, ok := st.Tried[id]; !ok {
			delete(h.tried, id)
		}
	}
	maps.Copy(h.tried, st.Tried)
}

// readHistory reads the first mark.Bytes of the history into st's lists
// (appended to what st holds) and checks them against mark.
func readHistory(path string, mark historyMark, st *campaign.State) error {
	if mark.Bytes < 0 || mark.Bytes > maxHistoryFile {
		return fmt.Errorf("%s: ledger.json names %d bytes of it", path, mark.Bytes)
	}
	data := []byte{}
	if mark.Bytes > 0 {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
		defer f.Close()
		data = make([]byte, mark.Bytes)
		if _, err := io.ReadFull(f, data); err != nil {
			return fmt.Errorf("%s: ledger.json names %d bytes of it: %w", path, mark.Bytes, err)
		}
	}
	if st.Tried == nil {
		st.Tried = map[string]int{}
	}
	for pos := 0; pos < len(data); {
		nl := bytes.IndexByte(data[pos:], '\n')
		if nl < 0 {
			return fmt.Errorf("%s: the record at byte %d is not whole", path, pos)
		}
		rec, err := decodeHistoryLine(data[pos : pos+nl])
		if err != nil {
			return fmt.Errorf("%s: the record at byte %d: %w", path, pos, err)
		}
		st.Trajectory = append(st.Trajectory, rec.Trajectory...)
		st.Observations = append(st.Observations, rec.Observations...)
		st.Prior = append(st.Prior, rec.Prior...)
		for _, kv := range rec.Tried {
			var id string
			var trial int
			if json.Unmarshal(kv[0], &id) != nil || json.Unmarshal(kv[1], &trial) != nil {
				return fmt.Errorf("%s: the record at byte %d: a tried entry is not [id, trial]", path, pos)
			}
			st.Tried[id] = trial
		}
		for _, id := range rec.Untried {
			delete(st.Tried, id)
		}
		pos += nl + 1
	}
	if len(st.Trajectory) != mark.Trajectory || len(st.Observations) != mark.Observations || len(st.Prior) != mark.Prior || len(st.Tried) != mark.Tried {
		return fmt.Errorf("%s: it holds %d trajectory points, %d observations, %d prior examples and %d tried points; ledger.json names %d, %d, %d and %d",
			path, len(st.Trajectory), len(st.Observations), len(st.Prior), len(st.Tried), mark.Trajectory, mark.Observations, mark.Prior, mark.Tried)
	}
	return nil
}

// decodeHistoryLine checks and decodes one line (without its newline).
func decodeHistoryLine(line []byte) (*historyRecord, error) {
	body, err := checkedBody(line, "history")
	if err != nil {
		return nil, err
	}
	rec := &historyRecord{}
	if err := json.Unmarshal(body, rec); err != nil {
		return nil, err
	}
	return rec, nil
}
