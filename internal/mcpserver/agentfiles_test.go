package mcpserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// The Claude Code set-up in the repository's .claude directory: the skill,
// the three slash commands and the subagent, as a user of the reference
// system expects them.
var agentFiles = []string{
	".claude/skills/megakernel-optimization/SKILL.md",
	".claude/commands/amk-optimize.md",
	".claude/commands/amk-autoresearch.md",
	".claude/commands/amk-compile.md",
	".claude/agents/amk-megakernel-optimizer.md",
}

// toolMentions finds the tools a file calls: a tool in Claude Code's MCP
// form (mcp__amk__NAME, in tools and allowed-tools lists), a call written
// `NAME(...)`, and any amk_NAME (the reference's names).
var toolMentions = []*regexp.Regexp{
	regexp.MustCompile(`mcp__amk__([A-Za-z0-9_]+)`),
	regexp.MustCompile("`([a-z][a-z0-9_]*)\\("),
	regexp.MustCompile(`\b(amk_[a-z0-9_]+)`),
}

// TestAgentFilesNameServedTools: every tool the Claude Code files call is
// one this server serves, and each file calls some.
func TestAgentFilesNameServedTools(t *testing.T) {
	root := filepath.Join("..", "..")
	var mcpJSON struct {
		Servers map[string]json.RawMessage `json:"mcpServers"`
	}
	data, err := os.ReadFile(filepath.Join(root, ".mcp.json"))
	if err == nil {
		err = json.Unmarshal(data, &mcpJSON)
	}
	if _, ok := mcpJSON.Servers["amk"]; err != nil || !ok {
		t.Fatalf(".mcp.json does not register the server as amk (the files' mcp__amk__ prefix): %v %s", err, data)
	}

	h := newHarness(t)
	tools, err := h.client.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, tool := range tools.Tools {
		served[tool.Name] = true
	}
	for _, name := range agentFiles {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		calls := 0
		for _, re := range toolMentions {
			for _, m := range re.FindAllStringSubmatch(string(data), -1) {
				calls++
				if !served[m[1]] {
					t.Errorf("%s names %s (%q), a tool the server does not serve", name, m[1], m[0])
				}
			}
		}
		if calls == 0 {
			t.Errorf("%s calls no tool", name)
		}
	}
}
