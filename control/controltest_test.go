package control_test

import (
	"path/filepath"
	"testing"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/control/controltest"
	"github.com/amk-dev/amk/flywheel"
)

// The workspace on this machine passes the control plane's suite.
func TestLocalConforms(t *testing.T) {
	controltest.Run(t, func(t *testing.T) controltest.Target {
		l, err := control.OpenLocal(filepath.Join(t.TempDir(), "ws"), true, flywheel.Env{AMKVersion: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return controltest.Target{Service: control.New(l), LocalFiles: true}
	})
}
