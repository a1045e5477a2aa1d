package redisq

import (
	"strings"
	"testing"
)

// FuzzDecodeSpec: any payload is either rejected with an error or yields a
// spec the worker can run; it never panics.
func FuzzDecodeSpec(f *testing.F) {
	f.Add([]byte(`{"campaign_id":"c","trial_id":1,"model":"toy","gpu":"h200","device":"cpu","point":{}}`), "c/1")
	f.Add([]byte(`{"campaign_id":"c","trial_id":1,"model":"toy","gpu":"h100","point":{}}`), "c/1")
	f.Add([]byte(`{"trial_id":-3,"model":"toy","gpu":"h200","point":[]}`), "x")
	f.Add([]byte(`{"model":"toy","gpu":"h200","point":{},"timeout_s":-1}`), "/0")
	f.Add([]byte(`{} {}`), "a/b/7")
	f.Add([]byte(`not json`), "")
	w := &Worker{opts: WorkerOptions{Target: testTarget}}
	f.Fuzz(func(t *testing.T, payload []byte, taskID string) {
		spec, err := w.decodeSpec(payload, taskID)
		if err != nil {
			return
		}
		if spec.Model == "" || spec.GPU != testTarget || len(spec.Point) == 0 || spec.TrialID < 0 || spec.TimeoutSeconds < 0 {
			t.Fatalf("accepted an unusable spec %+v", spec)
		}
		if campaign, id, kerr := ParseTaskID(taskID); kerr == nil && (campaign != spec.CampaignID || id != spec.TrialID) {
			t.Fatalf("accepted spec %s under task id %s", TaskID(spec), taskID)
		}
	})
}

// FuzzConnOptions: parsing any address never panics, and neither errors nor
// String show the password, whether it is given as a field, in a URL or
// before an '@' of a plain address.
func FuzzConnOptions(f *testing.F) {
	f.Add(uint8(0), "u", "hunter2", "h:1/0")
	f.Add(uint8(1), "", "hunter2", "[::1]:6380")
	f.Add(uint8(2), "", "hunter2", "h:6379")
	f.Add(uint8(0), "u", "hunter2", "h:1/%zz")
	f.Add(uint8(3), "u", "hunter2", "h")
	f.Fuzz(func(t *testing.T, form uint8, user, secret, host string) {
		// Markers make the password unmistakable in any output.
		password := "pw«" + secret + "»pw"
		if strings.Contains(user+host, password) {
			return
		}
		var c Conn
		switch form % 4 {
		case 0:
			c.Addr = "redis://" + user + ":" + password + "@" + host
		case 1:
			c.Addr = "rediss://" + user + ":" + password + "@" + host
		case 2:
			c = Conn{Addr: host, Username: user, Password: password}
		case 3:
			c.Addr = user + ":" + password + "@" + host
		}
		_, err := c.Options()
		if err != nil && strings.Contains(err.Error(), password) {
			t.Fatalf("error shows the password: %v", err)
		}
		if s := c.String(); strings.Contains(s, password) {
			t.Fatalf("String shows the password: %q", s)
		}
	})
}
