package deploytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Prometheus is a prometheus server owned by a test.
type Prometheus struct {
	// URL is the server's base URL, http://127.0.0.1:PORT.
	URL  string
	proc *Proc
}

// StartPrometheus runs the prometheus binary with config on a free loopback
// port, with its data in a temporary directory, and waits until it is
// ready. It skips tb when prometheus is not installed. The server is
// stopped when the test ends.
func StartPrometheus(tb testing.TB, config []byte) *Prometheus {
	tb.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		tb.Skip("prometheus is not installed; run `make deps` (scripts/ensure-deps.sh) to install it")
	}
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, config, 0o644); err != nil {
		tb.Fatal(err)
	}
	addr := FreeAddr(tb)
	p := &Prometheus{URL: "http://" + addr}
	p.proc = StartProc(tb, "prometheus", nil, bin,
		"--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	if err := WaitHTTP(p.URL+"/-/ready", 30*time.Second, p.proc); err != nil {
		tb.Fatalf("prometheus did not become ready: %v\n%s", err, p.proc.Output())
	}
	return p
}

// Output is what the server logged.
func (p *Prometheus) Output() string { return p.proc.Output() }

// Point is one sample.
type Point struct {
	T time.Time
	V float64
}

// Series is one result series: its labels and samples (one for an instant
// query).
type Series struct {
	Labels map[string]string
	Points []Point
}

// apiResponse is the envelope of Prometheus's HTTP API.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

// get calls an API path with query parameters and decodes its data.
func (p *Prometheus) get(ctx context.Context, path string, params url.Values, data any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s: HTTP %d, undecodable answer %.200q", path, resp.StatusCode, body)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	return json.Unmarshal(r.Data, data)
}

// result is the data of a query answer.
type result struct {
	ResultType string          `json:"resultType"`
	Result     json.RawMessage `json:"result"`
}

type sample [2]any // [unix seconds, "value"]

func (s sample) point() (Point, error) {
	ts, ok := s[0].(float64)
	str, ok2 := s[1].(string)
	if !ok || !ok2 {
		return Point{}, fmt.Errorf("malformed sample %v", s)
	}
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return Point{}, err
	}
	sec, frac := math.Modf(ts)
	return Point{T: time.Unix(int64(sec), int64(frac*1e9)), V: v}, nil
}

func (r result) series() ([]Series, error) {
	switch r.ResultType {
	case "vector":
		var v []struct {
			Metric map[string]string `json:"metric"`
			Value  sample            `json:"value"`
		}
		if err := json.Unmarshal(r.Result, &v); err != nil {
			return nil, err
		}
		out := make([]Series, len(v))
		for i, s := range v {
			pt, err := s.Value.point()
			if err != nil {
				return nil, err
			}
			out[i] = Series{Labels: s.Metric, Points: []Point{pt}}
		}
		return out, nil
	case "matrix":
		var m []struct {
			Metric map[string]string `json:"metric"`
			Values []sample          `json:"values"`
		}
		if err := json.Unmarshal(r.Result, &m); err != nil {
			return nil, err
		}
		out := make([]Series, len(m))
		for i, s := range m {
			out[i].Labels = s.Metric
			for _, v := range s.Values {
				pt, err := v.point()
				if err != nil {
					return nil, err
				}
				out[i].Points = append(out[i].Points, pt)
			}
		}
		return out, nil
	case "scalar":
		var s sample
		if err := json.Unmarshal(r.Result, &s); err != nil {
			return nil, err
		}
		pt, err := s.point()
		if err != nil {
			return nil, err
		}
		return []Series{{Labels: map[string]string{}, Points: []Point{pt}}}, nil
	}
	return nil, fmt.Errorf("unexpected result type %q", r.ResultType)
}

func unixParam(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)
}

// Query runs an instant query at time at.
func (p *Prometheus) Query(ctx context.Context, expr string, at time.Time) ([]Series, error) {
	var r result
	if err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {unixParam(at)}}, &r); err != nil {
		return nil, err
	}
	return r.series()
}

// QueryRange runs a range query.
func (p *Prometheus) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	var r result
	params := url.Values{"query": {expr}, "start": {unixParam(start)}, "end": {unixParam(end)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	if err := p.get(ctx, "/api/v1/query_range", params, &r); err != nil {
		return nil, err
	}
	return r.series()
}

// LabelValues lists the values of label over the series that match the
// selector (all series when it is empty) between start and end.
func (p *Prometheus) LabelValues(ctx context.Context, label, selector string, start, end time.Time) ([]string, error) {
	params := url.Values{"start": {unixParam(start)}, "end": {unixParam(end)}}
	if selector != "" {
		params.Set("match[]", selector)
	}
	var values []string
	err := p.get(ctx, "/api/v1/label/"+url.PathEscape(label)+"/values", params, &values)
	return values, err
}

// Rule is one loaded rule and how its last evaluation went.
type Rule struct {
	Name      string `json:"name"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
	Type      string `json:"type"`
}

// Rules lists the loaded rules.
func (p *Prometheus) Rules(ctx context.Context) ([]Rule, error) {
	var data struct {
		Groups []struct {
			Rules []Rule `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get(ctx, "/api/v1/rules", url.Values{}, &data); err != nil {
		return nil, err
	}
	var out []Rule
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// RegexValue formats label values the way Grafana substitutes a
// multi-valued variable into a =~ matcher of a Prometheus query: each value
// regex-escaped with its backslashes doubled for the PromQL string, several
// values as (a|b).
func RegexValue(values []string) (string, error) {
	if len(values) == 0 {
		return "", errors.New("no values")
	}
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = strings.ReplaceAll(regexp.QuoteMeta(v), `\`, `\\`)
	}
	if len(quoted) == 1 {
		return quoted[0], nil
	}
	return "(" + strings.Join(quoted, "|") + ")", nil
}
