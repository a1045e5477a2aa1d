package scheduler

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/amk-dev/amk/atomicfile"
)

// settingsFile holds what the scheduler keeps about a campaign beside its
// ledger: settings of the driver, not of the campaign state machine.
const settingsFile = "scheduler.json"

type fleetSettings struct {
	// Workers is the most trials the campaign keeps in flight.
	Workers int `json:"workers"`
}

// readSettings reads a campaign's scheduler settings; a missing or
// unreadable file gives the zero value (defaults apply).
func readSettings(dir string) fleetSettings {
	var s fleetSettings
	data, err := os.ReadFile(filepath.Join(dir, settingsFile))
	if err == nil {
		_ = json.Unmarshal(data, &s)
	}
	return s
}

// hasSettings says whether a campaign has the scheduler's settings file:
// whether it was started through a scheduler.
func hasSettings(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, settingsFile))
	return err == nil
}

func writeSettings(dir string, s fleetSettings) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, settingsFile), append(data, '\n'))
}

// logWriter turns a driver's progress lines into structured log records.
// A line equal to the previous one (a driver waiting on its last trials
// repeats itself every tick) is logged at debug level only.
type logWriter struct {
	log  *slog.Logger
	mu   sync.Mutex
	buf  []byte
	last string
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		if line := string(bytes.TrimSpace(w.buf[:i])); line == w.last {
			w.log.Debug(line)
		} else if line != "" {
			w.log.Info(line)
			w.last = line
		}
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}
