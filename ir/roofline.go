package ir

// PctDecimals is the precision of every pct_of_roofline amk records: three
// decimal places, what a verdict states (the reference's verdict rounds it
// so; a thousandth of a percent of the floor is far below any timing's
// noise, and two records of one latency and floor always agree).
const PctDecimals = 3

// PctOfRoofline is a latency as a percentage of its floor, the one
// convention of docs/spec/rules.md R9: latency / floor × 100 (100 is the
// floor; more is slower), rounded to PctDecimals places. ok is false when
// either is not a positive finite number (no percentage then).
func PctOfRoofline(latencyUS, floorUS float64) (pct float64, ok bool) {
	if !positiveFinite(latencyUS) || !positiveFinite(floorUS) {
		return 0, false
	}
	return RoundTo(latencyUS/floorUS*100, PctDecimals), true
}

// FloorFromPct is the floor a latency and its percentage of it imply
// (PctOfRoofline's inverse, for records that carry the percentage but no
// floor). ok is false when either is not a positive finite number.
func FloorFromPct(latencyUS, pct float64) (floorUS float64, ok bool) {
	if !positiveFinite(latencyUS) || !positiveFinite(pct) {
		return 0, false
	}
	return latencyUS * 100 / pct, true
}

func positiveFinite(x float64) bool { return Finite(x) && x > 0 }
