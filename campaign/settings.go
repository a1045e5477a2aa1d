package campaign

import (
	"fmt"
	"math"

	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// MoveOn holds the move-on criteria (the reference's MOVE_ON_CRITERIA,
// docs/spec/loop.md §5). A zero threshold disables its
// criterion.
type MoveOn struct {
	ConsecutiveReverts int     `json:"consecutive_reverts"`
	PctRooflineTarget  float64 `json:"pct_roofline_target"`
	MaxMinutes         float64 `json:"max_minutes"`
	SpeedupTarget      float64 `json:"speedup_target"`
}

// DefaultMoveOn is the reference's MOVE_ON_CRITERIA.
func DefaultMoveOn() MoveOn {
	return MoveOn{ConsecutiveReverts: 8, PctRooflineTarget: 110, MaxMinutes: 600, SpeedupTarget: 3}
}

// Budget bounds the whole campaign: Iterations experiments and/or Minutes
// of (unpaused) campaign time. Zero means unbounded.
type Budget struct {
	Iterations int     `json:"iterations"`
	Minutes    float64 `json:"minutes"`
}

// Settings are a campaign's tunables, fixed at Start except the budget and
// the move-on criteria, which commands can change.
type Settings struct {
	MoveOn MoveOn `json:"move_on"`
	// MinGain is the keep margin: a ≥ MinGain latency win (0.01 = 1%).
	MinGain float64 `json:"min_gain"`
	// Explore is the fraction of search proposals drawn at random (the
	// reference proposer; the model proposer explores by sampling).
	Explore float64 `json:"explore_fraction"`
	// Epsilon is the probability an exploit proposal skips the prior's
	// ranking and takes a plain mutation (the reference proposer).
	Epsilon float64 `json:"epsilon"`
	// Overnight: never stop on a plateau; basin-hop after RestartAfter
	// consecutive non-improvements.
	Overnight    bool   `json:"overnight"`
	RestartAfter int    `json:"restart_after"`
	Budget       Budget `json:"budget"`
	// WarmSeeds is how many warm-start points a warm campaign tries first.
	WarmSeeds int `json:"warm_seeds"`
	// RankPool is how many mutations the prior ranks per exploit proposal.
	RankPool int `json:"rank_pool"`
	// MaxDraws bounds the draws spent looking for an untried point.
	MaxDraws int `json:"max_draws"`
	// Token and Pos select the decode step trials check.
	Token int `json:"token"`
	Pos   int `json:"pos"`
	// TrialTimeoutS bounds one trial (0 = the worker's default).
	TrialTimeoutS float64 `json:"trial_timeout_s"`
	// Proposer picks the search proposer: ProposerModel or
	// ProposerReference ("" = reference, what campaigns saved before the
	// setting existed ran).
	Proposer string `json:"proposer,omitempty"`
	// PlateauScaling scales the plateau threshold with the evaluator's
	// cost and the untried space (see plateauThreshold).
	PlateauScaling bool `json:"plateau_scaling,omitempty"`
	// Batch is the decode batch every trial lowers and checks (B > 1:
	// GEMM tiles, each sequence checked against its own eager decode); 0
	// and 1 mean one sequence. A campaign with a Workload has its batch
	// there and this 0.
	Batch int `json:"batch,omitempty"`
	// Workload is what the campaign tunes for (trial.Workload: prompt
	// lengths, tokens generated, batch): every trial is evaluated at its
	// positions and scored by its mean time per decode step. A campaign
	// saved before workloads existed has none and checks one step at Pos.
	Workload *trial.Workload `json:"workload,omitempty"`
}

// DefaultSettings returns the Python reference's defaults for the proposer
// and the move-on criteria.
func DefaultSettings() Settings {
	return Settings{
		MoveOn: DefaultMoveOn(), MinGain: 0.01, Explore: 0.35, Epsilon: 0.30,
		RestartAfter: 6, WarmSeeds: 3, RankPool: 12, MaxDraws: 1024, Token: 7,
		Proposer: ProposerModel, PlateauScaling: true, Workload: new(trial.DefaultWorkload()),
	}
}

// Check refuses settings a campaign cannot run with (the same check New
// makes; control checks a request's settings with it before creating).
func (s *Settings) Check() error {
	fin := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	unit := func(x float64) bool { return fin(x) && x >= 0 && x <= 1 }
	switch {
	case !fin(s.MinGain) || s.MinGain < 0 || s.MinGain >= 0.5:
		return fmt.Errorf("min_gain %v must be in [0, 0.5)", s.MinGain)
	case !unit(s.Explore):
		return fmt.Errorf("explore_fraction %v must be in [0, 1]", s.Explore)
	case !unit(s.Epsilon):
		return fmt.Errorf("epsilon %v must be in [0, 1]", s.Epsilon)
	case s.RestartAfter < 1:
		return fmt.Errorf("restart_after %d must be at least 1", s.RestartAfter)
	case s.WarmSeeds < 0 || s.RankPool < 1 || s.MaxDraws < 1:
		return fmt.Errorf("warm_seeds %d, rank_pool %d, max_draws %d: need >= 0, >= 1, >= 1", s.WarmSeeds, s.RankPool, s.MaxDraws)
	case s.Token < 0 || s.Pos < 0:
		return fmt.Errorf("token %d and pos %d must be non-negative", s.Token, s.Pos)
	case !fin(s.TrialTimeoutS) || s.TrialTimeoutS < 0:
		return fmt.Errorf("trial_timeout_s %v must be non-negative", s.TrialTimeoutS)
	case s.Proposer != "" && s.Proposer != ProposerModel && s.Proposer != ProposerReference:
		return fmt.Errorf("proposer %q must be %q or %q", s.Proposer, ProposerModel, ProposerReference)
	case s.Batch < 0 || s.Batch > schedule.MaxBatch:
		return fmt.Errorf("batch %d must be in [1, %d] (0 means 1)", s.Batch, schedule.MaxBatch)
	case s.Workload != nil && s.Batch > 1:
		return fmt.Errorf("batch %d outside the workload: a campaign with a workload has its batch there", s.Batch)
	}
	if s.Workload != nil {
		if err := s.Workload.Check(); err != nil {
			return err
		}
	}
	if err := s.Budget.Check(); err != nil {
		return err
	}
	return s.MoveOn.Check()
}

// Check refuses a negative or non-finite budget.
func (b Budget) Check() error {
	if b.Iterations < 0 || math.IsNaN(b.Minutes) || math.IsInf(b.Minutes, 0) || b.Minutes < 0 {
		return fmt.Errorf("budget (%d iterations, %v minutes) must be non-negative", b.Iterations, b.Minutes)
	}
	return nil
}

// Check refuses a negative or non-finite threshold.
func (m MoveOn) Check() error {
	for _, x := range []float64{m.PctRooflineTarget, m.MaxMinutes, m.SpeedupTarget} {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return fmt.Errorf("move-on threshold %v must be a non-negative number", x)
		}
	}
	if m.ConsecutiveReverts < 0 {
		return fmt.Errorf("consecutive_reverts %d must be non-negative", m.ConsecutiveReverts)
	}
	return nil
}
