package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/amk-dev/amk/schedule"
)

// Resource URIs: amk://campaigns/{id}/report.md (the wake-up report) and
// amk://campaigns/{id}/results.tsv (one row per experiment; the local
// workspace only: the scheduler's API does not serve it).
const (
	resourcePrefix = "amk://campaigns/"
	reportName     = "report.md"
	resultsName    = "results.tsv"
	// maxResultsBytes bounds the results table a read returns: the last
	// rows are kept when a campaign's table is larger.
	maxResultsBytes = 4 << 20
)

func (s *Server) addResources() {
	s.addSchemaResource()
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "campaign-report", Title: "A campaign's wake-up report",
		Description: "best config, its latency and latency kind, speedup over the default schedule, milestones (markdown)",
		URITemplate: resourcePrefix + "{id}/" + reportName, MIMEType: "text/markdown",
	}, s.readResource)
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "campaign-results", Title: "A campaign's results table",
		Description: "results.tsv: one row per experiment (tag, correctness, latency_us only with PASS, latency kind, schedule id, config)",
		URITemplate: resourcePrefix + "{id}/" + resultsName, MIMEType: "text/tab-separated-values",
	}, s.readResource)
}

// parseResource splits a resource URI into a campaign id and the file.
func parseResource(uri string) (id, name string, err error) {
	rest, ok := strings.CutPrefix(uri, resourcePrefix)
	if !ok {
		return "", "", fmt.Errorf("resource %q: not under %s", uri, resourcePrefix)
	}
	id, name, ok = strings.Cut(rest, "/")
	if !ok || (name != reportName && name != resultsName) {
		return "", "", fmt.Errorf("resource %q: want %sID/%s or %sID/%s", uri, resourcePrefix, reportName, resourcePrefix, resultsName)
	}
	if !validID(id) {
		return "", "", fmt.Errorf("resource %q: %q is not a campaign id", uri, id)
	}
	return id, name, nil
}

// validID accepts the characters campaign ids are made of, so an id can
// never name a path outside the workspace.
func validID(id string) bool {
	if id == "" || len(id) > 200 || id[0] == '.' {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-+", r)) {
			return false
		}
	}
	return true
}

func (s *Server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (res *mcp.ReadResourceResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("resource read panicked", "uri", req.Params.URI, "panic", r)
			res, err = nil, fmt.Errorf("reading %s: internal error: %v", req.Params.URI, r)
		}
	}()
	uri := req.Params.URI
	id, name, err := parseResource(uri)
	if err != nil {
		return nil, err
	}
	var text, mime string
	switch name {
	case reportName:
		wake, err := s.opts.Campaigns.Report(ctx, id)
		if err != nil {
			return nil, err
		}
		text, mime = wake.Markdown(), "text/markdown"
	case resultsName:
		if text, err = s.resultsTable(id); err != nil {
			return nil, err
		}
		mime = "text/tab-separated-values"
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: text}}}, nil
}

// resultsTable reads a local campaign's results.tsv, keeping the header
// and the last rows when it is larger than maxResultsBytes.
func (s *Server) resultsTable(id string) (string, error) {
	if s.local == nil {
		return "", fmt.Errorf("results.tsv of %s: the scheduler's API does not serve it; read campaigns/%s/results.tsv on the scheduler's machine, or use the report resource", id, id)
	}
	if !s.local.Workspace.Exists(id) {
		return "", mcp.ResourceNotFoundError(resourcePrefix + id + "/" + resultsName)
	}
	data, err := os.ReadFile(filepath.Join(s.local.Workspace.CampaignDir(id), resultsName))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("campaign %s has no results.tsv yet (no experiment recorded)", id)
	}
	if err != nil {
		return "", err
	}
	if len(data) <= maxResultsBytes {
		return string(data), nil
	}
	header, _, _ := strings.Cut(string(data), "\n")
	tail := string(data[len(data)-maxResultsBytes:])
	if _, rows, ok := strings.Cut(tail, "\n"); ok {
		tail = rows
	}
	return header + "\n" + tail, nil
}

// addSchemaResource serves the schedule config's JSON Schema (for any
// target and device; propose answers the one of its target and device).
func (s *Server) addSchemaResource() {
	s.mcp.AddResource(&mcp.Resource{
		URI: schedule.SchemaID, Name: "schedule-config-schema", Title: "The JSON Schema (2020-12) of a schedule config",
		Description: "what eval's schedule (or config) argument accepts; generated from the search space and the config parser",
		MIMEType:    "application/schema+json",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI,
			MIMEType: "application/schema+json", Text: schedule.SchemaJSON(schedule.ConfigSchema(nil, schedule.DeviceCUDA))}}}, nil
	})
}

// evalInputSchema is eval's input schema: the one inferred from EvalInput,
// with the schedule config's JSON Schema as the schedule argument's and
// (or its JSON text) as config's.
func evalInputSchema() map[string]any {
	inferred, err := jsonschema.For[EvalInput](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: eval's input schema: %v", err)) // a bug in EvalInput's tags
	}
	var schema, config map[string]any
	data, err := json.Marshal(inferred)
	if err == nil {
		err = json.Unmarshal(data, &schema)
	}
	if err == nil {
		err = json.Unmarshal([]byte(schedule.SchemaJSON(schedule.ConfigSchema(nil, schedule.DeviceCUDA))), &config)
	}
	if err != nil {
		panic(fmt.Sprintf("mcpserver: eval's input schema: %v", err))
	}
	// The embedded copy is a subschema: the dialect and the id belong to
	// the document the resource serves.
	delete(config, "$schema")
	delete(config, "$id")
	props := schema["properties"].(map[string]any)
	props["schedule"] = config
	props["config"] = map[string]any{
		"description": "the reference's name for schedule: a schedule_config object, or its JSON text",
		"anyOf":       []any{config, map[string]any{"type": "string"}},
	}
	return schema
}
