package web

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/chart"
	"github.com/amk-dev/amk/control"
)

//go:embed assets templates
var files embed.FS

// Defaults.
const (
	// maxForm bounds an action's form body.
	maxForm = 16 << 10
	// readTimeout bounds what one page asks of its campaigns.
	readTimeout = 10 * time.Second
	// maxRows is how many results a campaign page shows (the newest).
	maxRows = 200
)

// Options configures the pages.
type Options struct {
	// Campaigns are what the pages show (List, Report) and steer (Command:
	// pause, resume, stop).
	Campaigns control.Service
	// Fleet reports workers and queues; nil shows none (a workspace whose
	// campaigns run in the process that drives them).
	Fleet control.Fleet
	// Token is what the actions need. Empty means the pages are read-only.
	Token string
	// MonitorPath is where the queue monitor is mounted ("" when none), for
	// the link to it.
	MonitorPath string
	// Metrics says that /metrics is served beside the pages (a link to it).
	Metrics bool
	// Where says whose campaigns these are, for the page title.
	Where  string
	Logger *slog.Logger
	// Now is the clock of the "updated" stamp (time.Now when nil).
	Now func() time.Time
}

type pages struct {
	Options
	tmpl   *template.Template
	assets http.Handler
}

// Handler serves the pages under /ui/.
func Handler(o Options) (http.Handler, error) {
	if o.Campaigns == nil {
		return nil, errors.New("web: no campaigns to show")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	tmpl, err := template.New("").Funcs(funcs).ParseFS(files, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("web: templates: %w", err)
	}
	sub, err := fs.Sub(files, "assets")
	if err != nil {
		return nil, err
	}
	p := &pages{Options: o, tmpl: tmpl, assets: http.StripPrefix("/ui/assets/", http.FileServerFS(sub))}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui/{$}", p.index)
	mux.HandleFunc("GET /ui/live", p.indexLive)
	mux.HandleFunc("GET /ui/c/{id}", p.campaign)
	mux.HandleFunc("GET /ui/c/{id}/live", p.campaignLive)
	mux.HandleFunc("GET /ui/c/{id}/chart.svg", p.chart)
	mux.HandleFunc("GET /ui/c/{id}/knobs.svg", p.knobsChart)
	mux.HandleFunc("POST /ui/c/{id}/{op}", p.action)
	mux.Handle("GET /ui/assets/", p.assets)
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		p.page(w, http.StatusNotFound, "error", errorPage{Title: "Not found", Message: "No page at " + r.URL.Path + "."})
	})
	return secured(mux), nil
}

// Site serves the pages under /ui/, the queue monitor (when not nil) under
// monitorPath, and everything else with apiHandler; "/" redirects to /ui/.
func Site(pagesHandler, apiHandler, monitor http.Handler, monitorPath string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/ui/", pagesHandler)
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	if monitor != nil && monitorPath != "" {
		mux.Handle(strings.TrimSuffix(monitorPath, "/")+"/", monitor)
	}
	mux.Handle("/", apiHandler)
	return mux
}

// secured sets the headers every page carries: no framing, no sniffing, and
// a policy that loads nothing from elsewhere.
func secured(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

// view is what the templates see.
type view struct {
	Title, Where string
	Updated      string
	Live         string // the URL of the live fragment
	ReadOnly     bool
	MonitorPath  string
	Metrics      bool
	Flash        string
	Failed       bool

	Campaigns []campaign.StatusReport
	ListError string
	Workers   []control.Worker
	Queues    []control.Queue
	FleetNote string

	Report  *campaign.WakeUp
	Status  *campaign.StatusReport
	Results []campaign.TrajectoryPoint
	Omitted int
	Chart   string // the chart's URL, changing with the data so that it reloads
	// KnobsChart is the knob slice plot's URL, likewise.
	KnobsChart string
}

type errorPage struct{ Title, Message string }

func (p *pages) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), readTimeout)
}

func (p *pages) base(title, live string) view {
	return view{Title: title, Where: p.Where, Updated: p.Now().UTC().Format("15:04:05 UTC"), Live: live,
		ReadOnly: p.Token == "", MonitorPath: p.MonitorPath, Metrics: p.Metrics}
}

func (p *pages) indexView(r *http.Request) view {
	ctx, cancel := p.ctx(r)
	defer cancel()
	v := p.base("amk campaigns", "/ui/live")
	list, err := p.Campaigns.List(ctx)
	v.Campaigns = list
	if err != nil {
		v.ListError = err.Error()
	}
	if p.Fleet == nil {
		v.FleetNote = "Campaigns here run in the process that drives them (amkctl autoresearch): there are no workers or queues to show."
		return v
	}
	workers, werr := p.Fleet.Workers(ctx)
	queues, qerr := p.Fleet.Queues(ctx)
	v.Workers, v.Queues = workers, queues
	switch {
	case errors.Is(werr, control.ErrUnsupported) || errors.Is(qerr, control.ErrUnsupported):
		v.FleetNote = "This scheduler evaluates trials in process: there are no remote workers or queues."
	case werr != nil || qerr != nil:
		v.FleetNote = "Workers or queues could not be read: " + errors.Join(werr, qerr).Error()
	}
	return v
}

func (p *pages) index(w http.ResponseWriter, r *http.Request) {
	p.page(w, http.StatusOK, "index", p.indexView(r))
}

func (p *pages) indexLive(w http.ResponseWriter, r *http.Request) {
	p.page(w, http.StatusOK, "index-live", p.indexView(r))
}

// campaignView reads one campaign; ok is false when it was answered with
// an error page.
func (p *pages) campaignView(w http.ResponseWriter, r *http.Request) (view, bool) {
	id := r.PathValue("id")
	ctx, cancel := p.ctx(r)
	defer cancel()
	rep, err := p.Campaigns.Report(ctx, id)
	if err != nil {
		p.failed(w, err, "Campaign "+id)
		return view{}, false
	}
	v := p.base(rep.Campaign, "/ui/c/"+id+"/live")
	v.Report = &rep
	list, _ := p.Campaigns.List(ctx)
	for i := range list {
		if list[i].ID == id {
			v.Status = &list[i]
		}
	}
	rows := slices.Clone(rep.Trajectory)
	slices.Reverse(rows)
	if len(rows) > maxRows {
		v.Omitted = len(rows) - maxRows
		rows = rows[:maxRows]
	}
	v.Results = rows
	v.Chart = fmt.Sprintf("/ui/c/%s/chart.svg?n=%d", id, len(rep.Trajectory))
	v.KnobsChart = fmt.Sprintf("/ui/c/%s/knobs.svg?n=%d", id, len(rep.Trajectory))
	switch r.URL.Query().Get("done") {
	case campaign.OpPause, campaign.OpResume, campaign.OpStop:
		v.Flash = "Done: " + r.URL.Query().Get("done") + "."
	}
	return v, true
}

func (p *pages) campaign(w http.ResponseWriter, r *http.Request) {
	if v, ok := p.campaignView(w, r); ok {
		p.page(w, http.StatusOK, "campaign", v)
	}
}

func (p *pages) campaignLive(w http.ResponseWriter, r *http.Request) {
	if v, ok := p.campaignView(w, r); ok {
		p.page(w, http.StatusOK, "campaign-live", v)
	}
}

func (p *pages) chart(w http.ResponseWriter, r *http.Request) {
	p.svg(w, r, chart.ReportSVG)
}

func (p *pages) knobsChart(w http.ResponseWriter, r *http.Request) {
	p.svg(w, r, chart.KnobSliceSVG)
}

// svg answers one of a campaign's charts, drawn from its report.
func (p *pages) svg(w http.ResponseWriter, r *http.Request, draw func(campaign.WakeUp) ([]byte, error)) {
	ctx, cancel := p.ctx(r)
	defer cancel()
	rep, err := p.Campaigns.Report(ctx, r.PathValue("id"))
	if err != nil {
		p.failed(w, err, "Chart")
		return
	}
	svg, err := draw(rep)
	if err != nil {
		p.failed(w, err, "Chart")
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(svg)
}

// action applies pause, resume or stop; the token comes in the form or
// the Authorization header.
func (p *pages) action(w http.ResponseWriter, r *http.Request) {
	id, op := r.PathValue("id"), r.PathValue("op")
	if op != campaign.OpPause && op != campaign.OpResume && op != campaign.OpStop {
		p.page(w, http.StatusNotFound, "error", errorPage{Title: "Not found", Message: fmt.Sprintf("%q is not an action (pause, resume, stop).", op)})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		p.page(w, http.StatusBadRequest, "error", errorPage{Title: "Bad request", Message: "The form could not be read: " + err.Error()})
		return
	}
	if r.URL.Query().Has("token") {
		p.page(w, http.StatusBadRequest, "error", errorPage{Title: "Bad request", Message: "A token in the URL is refused (it would end up in logs and history): send it in the form or the Authorization header."})
		return
	}
	if !p.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="amk"`)
		msg := "This action needs the scheduler's API token."
		if p.Token == "" {
			msg = "These pages are read-only: they were started without a token."
		}
		p.page(w, http.StatusUnauthorized, "error", errorPage{Title: "Not authorised", Message: msg + " Nothing was changed."})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), control.CommandTimeout)
	defer cancel()
	if _, err := p.Campaigns.Command(ctx, id, op, control.CommandRequest{Note: "from the web view"}); err != nil {
		p.failed(w, err, "Could not "+op+" "+id)
		return
	}
	p.Logger.Info("web action", "campaign", id, "op", op)
	http.Redirect(w, r, "/ui/c/"+id+"?done="+op, http.StatusSeeOther)
}

// authorized compares the form's or the header's token in constant time.
func (p *pages) authorized(r *http.Request) bool {
	if p.Token == "" {
		return false
	}
	tok := r.PostForm.Get("token")
	if tok == "" {
		if scheme, t, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
			tok = t
		}
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(p.Token)) == 1
}

// failed answers a service error with a page and the status its kind
// means.
func (p *pages) failed(w http.ResponseWriter, err error, title string) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, control.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		status = http.StatusNotFound
	case errors.Is(err, control.ErrBadValue):
		status = http.StatusBadRequest
	case errors.Is(err, control.ErrConflict):
		status = http.StatusConflict
	case errors.Is(err, control.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		status = http.StatusServiceUnavailable
	case errors.Is(err, control.ErrUnsupported):
		status = http.StatusNotImplemented
	}
	if status >= 500 {
		p.Logger.Error("web page failed", "title", title, "err", err)
	}
	p.page(w, status, "error", errorPage{Title: title, Message: err.Error()})
}

func (p *pages) page(w http.ResponseWriter, status int, name string, data any) {
	var b strings.Builder
	if err := p.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		p.Logger.Error("web template", "template", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

var funcs = template.FuncMap{
	"us": func(v *float64) string {
		if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
			return "—"
		}
		return fmt.Sprintf("%.2f µs", *v)
	},
	"pct": func(v *float64) string {
		if v == nil {
			return "—"
		}
		return fmt.Sprintf("%.1f%%", *v)
	},
	"times": func(v *float64) string {
		if v == nil {
			return "—"
		}
		return fmt.Sprintf("%.2f×", *v)
	},
	"minutes": func(m float64) string {
		d := time.Duration(m * float64(time.Minute)).Round(time.Second)
		return d.String()
	},
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return time.Since(t).Round(time.Second).String() + " ago"
	},
	"ids": func(v []int) string {
		s := make([]string, len(v))
		for i, n := range v {
			s[i] = fmt.Sprint(n)
		}
		return strings.Join(s, ", ")
	},
}
