package runner

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/trial"
)

// The journal (campaigns/<id>/ledger.journal) holds the events applied since
// the snapshot in ledger.json, one record per line:
//
//	<CRC-32C of the JSON, 8 lowercase hex digits> <space> <JSON> '\n'
//
// The JSON is a journalRecord: the event's sequence number (the snapshot
// names the last one it holds), the event itself, and a checksum of the
// decision the state machine took on it. The state machine is deterministic,
// so replaying the events after the snapshot rebuilds the state and the
// outboxes (rows, corpus lines, trials.jsonl lines) of those events; the
// decision checksum proves the replay took the same decisions.
//
// A crash can only tear the last record (every record is fsynced before
// anything acts on it): a tail that is not a whole, valid record is cut off
// when the ledger is opened. A bad record followed by a valid one is
// corruption, and opening fails.

// journalName is the journal's file name in the campaign directory.
const journalName = "ledger.journal"

// maxJournalRecord bounds one record (a line, newline included). Apply
// refuses an event whose record would be longer, so every record written
// can be read back.
const maxJournalRecord = 4 << 20

// maxJournalFile bounds the journal read back: far more than SnapshotEvery
// records of events as amk makes them (about a kilobyte each).
const maxJournalFile = 256 << 20

// readJournalFile reads a journal (a missing one is empty).
func readJournalFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxJournalFile+1))
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if len(data) > maxJournalFile {
		return nil, fmt.Errorf("%s: more than %d bytes, not a journal amk wrote", path, maxJournalFile)
	}
	return data, nil
}

// Event kinds of a journal record.
const (
	kindPropose  = "propose"
	kindFinished = "finished"
	kindTick     = "tick"
	kindCommand  = "command"
	kindRecord   = "record"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// journalRecord is one journalled event.
type journalRecord struct {
	Seq   uint64          `json:"seq"`
	Kind  string          `json:"kind"`
	Event json.RawMessage `json:"event"`
	// Decision is the CRC-32C (hex) of the decision the event produced
	// (decisionChecksum).
	Decision string `json:"decision"`
}

// recordWire is a campaign.Record as the journal holds it: the point's
// bytes kept exactly (a json.RawMessage would be re-indented, and an absent
// point would come back as "null").
type recordWire struct {
	Time          time.Time
	Status        string
	Correctness   string
	LatencyUS     *float64
	PctOfRoofline *float64
	BoundUS       *float64
	Kind          trial.LatencyKind
	Point         []byte
	ScheduleID    string
	Description   string
	Source        string
	Regions       map[string]float64
}

func toRecordWire(e campaign.Record) recordWire {
	return recordWire{Time: e.Time, Status: e.Status, Correctness: e.Correctness, LatencyUS: e.LatencyUS,
		PctOfRoofline: e.PctOfRoofline, BoundUS: e.BoundUS, Kind: e.Kind, Point: e.Point, ScheduleID: e.ScheduleID,
		Description: e.Description, Source: e.Source, Regions: e.Regions}
}

func (w recordWire) record() campaign.Record {
	return campaign.Record{Time: w.Time, Status: w.Status, Correctness: w.Correctness, LatencyUS: w.LatencyUS,
		PctOfRoofline: w.PctOfRoofline, BoundUS: w.BoundUS, Kind: w.Kind, Point: w.Point, ScheduleID: w.ScheduleID,
		Description: w.Description, Source: w.Source, Regions: w.Regions}
}

// encodeEvent is the kind and JSON of an event the journal can hold.
func encodeEvent(ev campaign.Event) (string, []byte, error) {
	var kind string
	var v any = ev
	switch e := ev.(type) {
	case campaign.Propose:
		kind = kindPropose
	case campaign.Finished:
		kind = kindFinished
	case campaign.Tick:
		kind = kindTick
	case campaign.Command:
		kind = kindCommand
	case campaign.Record:
		kind = kindRecord
		v = toRecordWire(e)
	default:
		return "", nil, fmt.Errorf("%w: the journal cannot hold a %T event", campaign.ErrInvalid, ev)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s event: %v", campaign.ErrInvalid, kind, err)
	}
	// The record adds its envelope (well under a kilobyte) to the event.
	if len(data) > maxJournalRecord-1024 {
		return "", nil, fmt.Errorf("%w: a %s event of %d bytes (the journal holds at most %d)", campaign.ErrInvalid, kind, len(data), maxJournalRecord-1024)
	}
	return kind, data, nil
}

// decodeEvent is encodeEvent's inverse.
func decodeEvent(kind string, data []byte) (campaign.Event, error) {
	var err error
	var ev campaign.Event
	switch kind {
	case kindPropose:
		var e campaign.Propose
		err = json.Unmarshal(data, &e)
		ev = e
	case kindFinished:
		var e campaign.Finished
		err = json.Unmarshal(data, &e)
		ev = e
	case kindTick:
		var e campaign.Tick
		err = json.Unmarshal(data, &e)
		ev = e
	case kindCommand:
		var e campaign.Command
		err = json.Unmarshal(data, &e)
		ev = e
	case kindRecord:
		var e recordWire
		err = json.Unmarshal(data, &e)
		ev = e.record()
	default:
		return nil, fmt.Errorf("unknown event kind %q", kind)
	}
	if err != nil {
		return nil, fmt.Errorf("%s event: %w", kind, err)
	}
	return ev, nil
}

// decisionChecksum identifies a decision: the trials it enqueued (id,
// source, point, incumbent), its outbox and the status it left (not its log
// lines, which are prose). It hashes bytes the decision already has.
func decisionChecksum(d campaign.Decision, ob outbox) string {
	h := crc32.New(castagnoli)
	for _, s := range d.Enqueue {
		fmt.Fprintf(h, "trial %d %s %s %s\n", s.TrialID, s.Source, s.Point, s.Incumbent)
	}
	for _, r := range ob.Rows {
		io.WriteString(h, r.Line())
	}
	for _, c := range ob.Corpus {
		io.WriteString(h, c+"\n")
	}
	for _, t := range ob.Trials {
		h.Write(t)
		h.Write([]byte{'\n'})
	}
	io.WriteString(h, "status "+string(d.Status))
	return fmt.Sprintf("%08x", h.Sum32())
}

// checksummedLine is v as a line of the journal or the history: the
// CRC-32C of its JSON (8 lowercase hex digits), a space, the JSON and a
// newline.
func checksummedLine(v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	line := make([]byte, 0, len(body)+10)
	line = fmt.Appendf(line, "%08x ", crc32.Checksum(body, castagnoli))
	line = append(line, body...)
	return append(line, '\n'), nil
}

// checkedBody is the JSON of one checksummedLine (given without its
// newline), once its checksum checks.
func checkedBody(line []byte, what string) ([]byte, error) {
	if len(line) < 10 || line[8] != ' ' {
		return nil, fmt.Errorf("not a %s record (want a checksum, a space and JSON)", what)
	}
	var sum [4]byte
	if _, err := hex.Decode(sum[:], line[:8]); err != nil {
		return nil, fmt.Errorf("checksum: %w", err)
	}
	body := line[9:]
	want := uint32(sum[0])<<24 | uint32(sum[1])<<16 | uint32(sum[2])<<8 | uint32(sum[3])
	if got := crc32.Checksum(body, castagnoli); got != want {
		return nil, fmt.Errorf("checksum %08x, want %08x", got, want)
	}
	return body, nil
}

// encodeJournalRecord is rec's line, newline included.
func encodeJournalRecord(rec journalRecord) ([]byte, error) {
	line, err := checksummedLine(rec)
	if err != nil {
		return nil, err
	}
	if len(line) > maxJournalRecord {
		return nil, fmt.Errorf("%w: a journal record of %d bytes (at most %d)", campaign.ErrInvalid, len(line), maxJournalRecord)
	}
	return line, nil
}

// decodeJournalLine checks and decodes one line (without its newline).
func decodeJournalLine(line []byte) (journalRecord, error) {
	var rec journalRecord
	body, err := checkedBody(line, "journal")
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(body, &rec); err != nil {
		return rec, err
	}
	switch {
	case rec.Seq == 0:
		return rec, errors.New("sequence number 0")
	case len(rec.Event) == 0:
		return rec, errors.New("no event")
	}
	return rec, nil
}

// parseJournal splits a journal into its records. It stops at the first
// record that is not whole and valid when nothing valid follows it (a
// write torn by a crash): good is the length of the valid prefix. A bad
// record with a valid one after it, a record longer than maxJournalRecord
// or sequence numbers that do not rise by one are corruption.
func parseJournal(data []byte) (recs []journalRecord, good int, err error) {
	for pos := 0; pos < len(data); {
		nl := bytes.IndexByte(data[pos:], '\n')
		if nl < 0 {
			if len(data)-pos > maxJournalRecord {
				return nil, 0, fmt.Errorf("journal: a record at byte %d is longer than %d bytes", pos, maxJournalRecord)
			}
			return recs, pos, nil // torn: the last write did not finish
		}
		if nl+1 > maxJournalRecord {
			return nil, 0, fmt.Errorf("journal: the record at byte %d is longer than %d bytes", pos, maxJournalRecord)
		}
		rec, derr := decodeJournalLine(data[pos : pos+nl])
		if derr != nil {
			if at := validRecordAfter(data[pos+nl+1:]); at >= 0 {
				return nil, 0, fmt.Errorf("journal: the record at byte %d is corrupt (%v) and a valid one follows at byte %d", pos, derr, pos+nl+1+at)
			}
			return recs, pos, nil // torn tail
		}
		if n := len(recs); n > 0 && rec.Seq != recs[n-1].Seq+1 {
			return nil, 0, fmt.Errorf("journal: record at byte %d has sequence number %d after %d", pos, rec.Seq, recs[n-1].Seq)
		}
		recs = append(recs, rec)
		pos += nl + 1
	}
	return recs, len(data), nil
}

// validRecordAfter is the offset of the first whole, valid record in data
// (-1: none).
func validRecordAfter(data []byte) int {
	for pos := 0; pos < len(data); {
		nl := bytes.IndexByte(data[pos:], '\n')
		if nl < 0 {
			return -1
		}
		if _, err := decodeJournalLine(data[pos : pos+nl]); err == nil {
			return pos
		}
		pos += nl + 1
	}
	return -1
}
