package grafana

import (
	"strings"
	"testing"
)

// FuzzExpand: Expand never panics, fails exactly when the expression refers
// to a variable without a value, and leaves text without references alone.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{
		`rate(x{campaign=~"$campaign"}[$__rate_interval])`,
		`${target:regex} [[__interval]] $__range`,
		`$`, `${`, `[[`, `$$campaign`, `${campaign`, `$nope`, `label_values(m{a="$campaign"}, target)`,
	} {
		f.Add(s)
	}
	values := map[string]string{"campaign": "c", "target": "t", "__rate_interval": "1m", "__interval": "15s", "__range": "1h"}
	f.Fuzz(func(t *testing.T, expr string) {
		unknown := false
		for _, m := range variableRef.FindAllStringSubmatch(expr, -1) {
			if _, ok := values[m[1]+m[2]+m[3]]; !ok {
				unknown = true
			}
		}
		out, err := Expand(expr, values)
		if (err != nil) != unknown {
			t.Fatalf("Expand(%q) error %v, but unknown references: %v", expr, err, unknown)
		}
		if err == nil && !strings.Contains(expr, "$") && !strings.Contains(expr, "[[") && out != expr {
			t.Errorf("Expand(%q) = %q changed text without references", expr, out)
		}
		_, _, _ = LabelValues(expr)
	})
}
