package runner

import (
	"strings"
	"testing"
)

func TestReferencePathsAreWorkspaceAliases(t *testing.T) {
	for _, tc := range []struct {
		rp        ReferencePaths
		ws        string
		explicit  bool
		wantDir   string
		wantError string
	}{
		{ReferencePaths{}, "workspace", false, "workspace", ""},
		{ReferencePaths{State: "workspace/amk_orchestration_state.json", Results: "workspace/results.tsv"}, "workspace", false, "workspace", ""},
		{ReferencePaths{State: "/srv/amk/state.json"}, "workspace", false, "/srv/amk", ""},
		{ReferencePaths{Results: "/srv/amk/results.tsv"}, "/srv/amk", true, "/srv/amk", ""},
		{ReferencePaths{State: "a/s.json", Results: "b/results.tsv"}, "workspace", false, "", "puts the workspace in b"},
		{ReferencePaths{Results: "b/results.tsv"}, "ws", true, "", "--workspace puts it in ws"},
	} {
		dir, _, notes, err := tc.rp.Workspace(tc.ws, tc.explicit)
		switch {
		case tc.wantError != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("%+v: err %v, want %q", tc.rp, err, tc.wantError)
			}
		case err != nil || dir != tc.wantDir:
			t.Errorf("%+v: dir %q err %v, want %q", tc.rp, dir, err, tc.wantDir)
		case (tc.rp.State != "" || tc.rp.Results != "") && len(notes) == 0:
			t.Errorf("%+v: no note says where the files go", tc.rp)
		}
	}
	_, corpus, _, _ := ReferencePaths{Corpus: "flywheel/corpus.jsonl"}.Workspace("workspace", false)
	ws := &Workspace{Dir: "workspace", Corpus: corpus}
	if ws.CorpusPath() != "flywheel/corpus.jsonl" {
		t.Errorf("--corpus not used: %s", ws.CorpusPath())
	}
}
