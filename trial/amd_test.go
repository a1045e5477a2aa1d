package trial

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// An AMD verdict is predicted and says so.
func TestAMDVerdictSaysPredictedOnly(t *testing.T) {
	spec := Spec{Model: "toy", GPU: "mi355x", Device: "cpu", Point: json.RawMessage(`{}`), Token: DefaultToken}
	v := Evaluate(context.Background(), spec, Options{Models: testModels}).Verdict
	if v == nil || v.LatencyKind == nil || *v.LatencyKind != KindPredicted {
		t.Fatalf("want a predicted verdict, got %+v", v)
	}
	if len(v.Notes) == 0 || !strings.Contains(v.Notes[0], "AMD target: predicted only") {
		t.Fatalf("notes %q", v.Notes)
	}
	h := Evaluate(context.Background(), Spec{Model: "toy", GPU: "h200", Device: "cpu", Point: json.RawMessage(`{}`),
		Token: DefaultToken}, Options{Models: testModels}).Verdict
	for _, n := range h.Notes {
		if strings.Contains(n, "AMD") {
			t.Fatalf("an NVIDIA verdict notes %q", n)
		}
	}
}
