package scheduler

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/redistest"
)

// The asynq web UI, mounted as the scheduler mounts it, shows a real
// queue and refuses changes.
func TestMonitorShowsQueuesReadOnly(t *testing.T) {
	srv := redistest.Start(t)
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr})
	defer client.Close()
	if _, err := client.Enqueue(asynq.NewTask("trial", []byte(`{}`)), asynq.Queue("amk-monitor-test")); err != nil {
		t.Fatal(err)
	}
	h, closeMonitor, err := Monitor(redisq.Conn{Addr: srv.Addr}, "/queues")
	if err != nil {
		t.Fatal(err)
	}
	defer closeMonitor()
	web := httptest.NewServer(h)
	defer web.Close()

	resp, err := http.Get(web.URL + "/queues/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `src="/queues/static/js/`) {
		t.Fatalf("GET /queues/: %d, not asynqmon's page rooted at /queues:\n%.300s", resp.StatusCode, page)
	}
	resp, err = http.Get(web.URL + "/queues/api/queues")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Queues []struct {
			Queue string `json:"queue"`
			Size  int    `json:"size"`
		} `json:"queues"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Queues) != 1 || list.Queues[0].Queue != "amk-monitor-test" || list.Queues[0].Size != 1 {
		t.Fatalf("queues: %+v, %v", list, err)
	}
	resp, err = http.Post(web.URL+"/queues/api/queues/amk-monitor-test:pause", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("pausing a queue through the monitor answered %d", resp.StatusCode)
	}
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr})
	defer insp.Close()
	if info, err := insp.GetQueueInfo("amk-monitor-test"); err != nil || info.Paused {
		t.Fatalf("the queue after the refused pause: %+v, %v", info, err)
	}
}
