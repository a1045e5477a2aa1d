package scheduler

import (
	"testing"

	"github.com/amk-dev/amk/control/controltest"
	"github.com/amk-dev/amk/runner"
)

// A fleet (the in-process transport) passes the control plane's suite.
func TestFleetConforms(t *testing.T) {
	controltest.Run(t, func(t *testing.T) controltest.Target {
		ws, err := runner.OpenWorkspace(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		f := startFleet(t, ws, Options{})
		return controltest.Target{Service: f.Campaigns(), Driven: true, LocalFiles: true}
	})
}
