package pipeline

import "fmt"

// Placed is one op of a partition's issue order and the mini-iter
// (1-based) that declared it. Stages are relative, so every partition
// issues the same order; only the stages flip.
type Placed struct {
	Op   Op
	Mini int
}

// IssueOrder applies the schedule's ordering strategy to the body. With
// double_buffer_reorder it also returns a "reorder" hazard for every
// fragment load of the cross stage the reorder placed in front of a
// same-partition MMA that reads its quadrant.
func (s *Schedule) IssueOrder() ([]Placed, []Finding) {
	var decl []Placed
	for i, m := range s.Body {
		for _, o := range m.Ops {
			decl = append(decl, Placed{Op: o, Mini: i + 1})
		}
	}
	if s.Ordering != DoubleBufferReorder {
		return decl, nil
	}
	placed := make([]bool, len(decl))
	var out []Placed
	var findings []Finding
	provided := map[[2]int]bool{} // (operand 0=A/1=B, sub) already given a fragment in this walk
	take := func(match func(Op) bool) (int, bool) {
		for i, p := range decl {
			if !placed[i] && match(p.Op) {
				placed[i] = true
				return i, true
			}
		}
		return 0, false
	}
	for i, mma := range decl {
		if mma.Op.Kind != MMA {
			continue
		}
		for operand, kind := range []Kind{MMALoadA, MMALoadB} {
			sub := mma.Op.Quadrant[operand]
			if provided[[2]int{operand, sub}] {
				continue
			}
			j, ok := take(func(o Op) bool { return o.Kind == kind && o.Sub == sub })
			if !ok {
				continue
			}
			provided[[2]int{operand, sub}] = true
			frag := decl[j]
			out = append(out, frag)
			if frag.Op.Stage != Same {
				findings = append(findings, Finding{Rule: RuleReorder, Half: -1, Mini: mma.Mini, Op: mma.Op.String(),
					Stage: -1, Message: fmt.Sprintf("double_buffer_reorder places %s (declared in mini-iter %d) right "+
						"before %s (mini-iter %d) of the same partition: it matches fragment loads to MMAs by "+
						"sub-tile, ignoring the stage, so %s would read %s_quad[%d] loaded from the cross stage "+
						"(the next partition's k-block); a cross-stage body needs identity ordering",
						frag.Op, frag.Mini, mma.Op, mma.Mini, mma.Op, frag.Op.Kind.Operand(), sub)})
			}
		}
		if j, ok := take(func(o Op) bool { return o.Kind.Class() == GlobalLoad }); ok {
			out = append(out, decl[j])
		}
		placed[i] = true
		out = append(out, mma)
	}
	for i, p := range decl {
		if !placed[i] {
			out = append(out, p)
		}
	}
	return out, findings
}
