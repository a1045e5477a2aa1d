package model

import (
	"context"
	"fmt"
	"math"
)

// Quality is a quantised model's logits against its float twin's on the
// same weights (docs/spec/quantization.md, "Model quality"): a property of
// the quantised weights, not of any schedule. Both models decode the float
// model's greedy continuation of the prompt (teacher forcing, so one early
// difference does not decide every later step): at each of the Tokens
// steps both see the same history; the logit errors and the top-1
// agreement are taken there. GreedyPrefix is the free-running figure: how
// many of its own greedy tokens the quantised model generates before the
// first that differs from the float model's.
type Quality struct {
	Scheme          string  `json:"scheme"`
	Prompt          []int32 `json:"prompt"`
	Tokens          int     `json:"tokens"`
	MaxAbsLogitErr  float64 `json:"max_abs_logit_err"`
	MeanAbsLogitErr float64 `json:"mean_abs_logit_err"`
	// MaxAbsFloatLogit is the largest float logit in magnitude: the scale
	// the errors compare with.
	MaxAbsFloatLogit float64 `json:"max_abs_float_logit"`
	Top1Agreement    float64 `json:"top1_agreement"`
	GreedyPrefix     int     `json:"greedy_prefix"`
	FloatTokens      []int32 `json:"float_tokens"`
	QuantTokens      []int32 `json:"quant_tokens"`
}

// CompareQuality decodes n tokens after prompt with both eager passes (see
// Quality); it needs len(prompt)+n−1 positions. ctx is checked between
// steps.
func CompareQuality(ctx context.Context, float, quant *Eager, prompt []int32, n int) (Quality, error) {
	q := Quality{Scheme: quant.cfg.Quant.String(), Prompt: append([]int32(nil), prompt...), Tokens: n}
	if len(prompt) == 0 || n <= 0 {
		return q, fmt.Errorf("model quality needs a prompt and at least one token")
	}
	if need := len(prompt) + n - 1; need > float.cfg.MaxSeq {
		return q, fmt.Errorf("%d prompt tokens + %d generated need %d positions, max_seq is %d", len(prompt), n, need, float.cfg.MaxSeq)
	}
	float.Reset()
	quant.Reset()
	var lf, lq []float32
	var err error
	step := func(tok int32, pos int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if lf, err = float.StepContext(ctx, tok, pos); err != nil {
			return err
		}
		lq, err = quant.StepContext(ctx, tok, pos)
		return err
	}
	for i, tok := range prompt {
		if err = step(tok, i); err != nil {
			return q, err
		}
	}
	agree, sum, count := 0, 0.0, 0
	for i := range n {
		for v := range lf {
			d := math.Abs(float64(lq[v]) - float64(lf[v]))
			q.MaxAbsLogitErr = max(q.MaxAbsLogitErr, d)
			q.MaxAbsFloatLogit = max(q.MaxAbsFloatLogit, math.Abs(float64(lf[v])))
			sum += d
			count++
		}
		next := Argmax(lf)
		if Argmax(lq) == next {
			agree++
		}
		q.FloatTokens = append(q.FloatTokens, next)
		if i+1 < n {
			if err = step(next, len(prompt)+i); err != nil {
				return q, err
			}
		}
	}
	q.Top1Agreement = float64(agree) / float64(n)
	q.MeanAbsLogitErr = sum / float64(max(count, 1))
	if q.QuantTokens, err = quant.GreedyContext(ctx, prompt, n); err != nil {
		return q, err
	}
	for q.GreedyPrefix < n && q.QuantTokens[q.GreedyPrefix] == q.FloatTokens[q.GreedyPrefix] {
		q.GreedyPrefix++
	}
	return q, nil
}
