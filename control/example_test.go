package control_test

import (
	"context"
	"fmt"
	"os"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/flywheel"
)

// Every front does the same with a control.Service: here the campaigns of
// a workspace on this machine; amkctl --server gets a scheduler's through
// its HTTP client, with the same calls and the same kinds of errors.
func ExampleService() {
	dir, _ := os.MkdirTemp("", "workspace")
	defer os.RemoveAll(dir)
	local, _ := control.OpenLocal(dir, true, flywheel.Env{AMKVersion: "example"})
	var s control.Service = control.New(local)
	ctx := context.Background()

	created, _ := s.Create(ctx, control.CreateRequest{Model: "toy", GPU: "h200", Cold: true})
	fmt.Println(created.ID, created.Created)
	paused, _ := s.Command(ctx, created.ID, campaign.OpPause, control.CommandRequest{Note: "lunch"})
	fmt.Println(paused.Log, paused.Campaign.Status)
	_, err := s.Command(ctx, created.ID, campaign.OpPause, control.CommandRequest{})
	fmt.Println(kindName(err))
	noted, _ := s.Command(ctx, created.ID, campaign.OpNote, control.CommandRequest{Note: "fan replaced"})
	fmt.Println(noted.Log)
	wake, _ := s.Report(ctx, created.ID)
	fmt.Println(wake.Notes[0].Text)
	// Output:
	// toy-h200-cpu true
	// [paused: lunch] paused
	// conflict
	// [note: fan replaced]
	// fan replaced
}

// kindName names the kind of a service error.
func kindName(err error) string {
	if k := control.KindOf(err); k != nil {
		return k.Error()
	}
	return fmt.Sprint(err)
}
