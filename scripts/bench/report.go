package main

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is one row of the table.
type Result struct {
	Name   string  `json:"name"`
	Group  string  `json:"group"` // baseline, load, query, ycsb, ttl
	Unit   string  `json:"unit"`  // what PerSec counts: ops or docs
	Units  int64   `json:"units"`
	Calls  int64   `json:"calls"`
	Secs   float64 `json:"seconds"`
	PerSec float64 `json:"perSec"`
	P50us  float64 `json:"p50us"`
	P99us  float64 `json:"p99us"`
	// Vs names what Ratio divides by (a ceiling, or the TTL-off figure).
	Vs    string             `json:"vs,omitempty"`
	Ratio float64            `json:"ratio,omitempty"`
	NA    bool               `json:"na,omitempty"`
	Note  string             `json:"note,omitempty"`
	Extra map[string]float64 `json:"extra,omitempty"`
}

type report struct {
	Started   time.Time      `json:"started"`
	Finished  time.Time      `json:"finished"`
	Machine   map[string]any `json:"machine"`
	Config    map[string]any `json:"config"`
	Target    string         `json:"target"`
	KeyChoice string         `json:"keyChoice"`
	Results   []Result       `json:"results"`
	TTL       *ttlFigures    `json:"ttl,omitempty"`
}

func newReport(c *config) *report {
	host, _ := os.Hostname()
	var wl []string
	for _, p := range allPhases {
		if c.workloads[p] {
			wl = append(wl, p)
		}
	}
	return &report{
		Started: time.Now().UTC(),
		Machine: map[string]any{"host": host, "goos": runtime.GOOS, "goarch": runtime.GOARCH, "numCPU": runtime.NumCPU(),
			"gomaxprocs": runtime.GOMAXPROCS(0), "go": runtime.Version()},
		Config: map[string]any{"clients": c.clients, "records": c.records, "small": c.small, "phaseSeconds": c.duration.Seconds(),
			"ttlDocs": c.ttlDocs, "workloads": wl, "seed": c.seed},
		KeyChoice: "YCSB A/B/C/E/F: scrambled zipfian (theta 0.99) over the loaded records; D: zipfian over recency (latest inserts); " +
			"point reads, range and aggregation starts: uniform",
	}
}

func (r *report) add(res Result, m *measure, vs string, ceiling float64) {
	res.Units, res.Calls, res.Secs = m.units, m.calls, m.elapsed.Seconds()
	res.PerSec = m.perSec()
	res.P50us = float64(m.h.quantile(0.50)) / 1e3
	res.P99us = float64(m.h.quantile(0.99)) / 1e3
	if vs != "" && ceiling > 0 {
		res.Vs, res.Ratio = vs, res.PerSec/ceiling
	}
	r.Results = append(r.Results, res)
}

func (r *report) addNA(res Result) {
	res.NA = true
	r.Results = append(r.Results, res)
}

func fmtUs(us float64) string {
	switch {
	case us == 0:
		return "-"
	case us < 1000:
		return fmt.Sprintf("%.0fµs", us)
	case us < 1e6:
		return fmt.Sprintf("%.2fms", us/1e3)
	default:
		return fmt.Sprintf("%.2fs", us/1e6)
	}
}

func (r *report) printTable(w io.Writer) {
	fmt.Fprintf(w, "\nmayfly bench — %d clients, %d records, %s per phase, %d CPUs (%s)\n", r.Config["clients"], r.Config["records"],
		time.Duration(r.Config["phaseSeconds"].(float64)*float64(time.Second)), r.Machine["numCPU"], r.Target)
	fmt.Fprintf(w, "keys: %s\n\n", r.KeyChoice)
	// A Markdown table: readable in a terminal and pasteable into BENCHMARKS.md.
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "| workload\t| ops/s\t| p50\t| p99\t| ratio\t| vs\t|")
	fmt.Fprintln(tw, "|---\t|---:\t|---:\t|---:\t|---:\t|---\t|")
	for _, res := range r.Results {
		if res.NA {
			fmt.Fprintf(tw, "| %s\t| n/a\t| -\t| -\t| -\t| %s\t|\n", res.Name, res.Note)
			continue
		}
		unit := ""
		if res.Unit == "docs" {
			unit = " docs"
		}
		ratio := "-"
		if res.Vs != "" {
			ratio = fmtRatio(res.Ratio)
		}
		fmt.Fprintf(tw, "| %s\t| %.0f%s\t| %s\t| %s\t| %s\t| %s\t|\n", res.Name, res.PerSec, unit, fmtUs(res.P50us), fmtUs(res.P99us), ratio, res.Vs)
	}
	tw.Flush()
	if t := r.TTL; t != nil {
		t.print(w)
	}
}

func (r *report) writeJSON(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeSVG draws throughput per workload as horizontal bars on a log scale,
// with the wire and engine ceilings as vertical lines.
func (r *report) writeSVG(path string) error {
	var rows []Result
	for _, res := range r.Results {
		if !res.NA && res.PerSec > 0 && res.Group != "ttl" {
			rows = append(rows, res)
		}
	}
	const (
		left, right, top, rowH, barH = 390.0, 40.0, 50.0, 26.0, 16.0
		width                        = 1150.0
	)
	plotW := width - left - right
	height := top + rowH*float64(len(rows)) + 60
	lo, hi := math.Inf(1), 0.0
	for _, res := range rows {
		lo, hi = math.Min(lo, res.PerSec), math.Max(hi, res.PerSec)
	}
	if len(rows) == 0 {
		lo, hi = 1, 10
	}
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	x := func(v float64) float64 { return left + (math.Log10(v)-dlo)/(dhi-dlo)*plotW }

	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&s, `<text x="%.0f" y="22" font-size="15" font-weight="bold">mayfly throughput per workload (log scale, ops/s or docs/s), %v CPUs, %v clients</text>`+"\n",
		10.0, r.Machine["numCPU"], r.Config["clients"])
	bottom := top + rowH*float64(len(rows))
	for d := dlo; d <= dhi; d++ {
		for _, mul := range []float64{1, 2, 5} {
			v := mul * math.Pow(10, d)
			if math.Log10(v) > dhi+1e-9 {
				continue
			}
			xx := x(v)
			stroke := "#eee"
			if mul == 1 {
				stroke = "#ccc"
				fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n", xx, bottom+18, human(v))
			}
			fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", xx, top-8, xx, bottom, stroke)
		}
	}
	colors := map[string]string{"baseline": "#999999", "load": "#d62728", "query": "#1f77b4", "ycsb": "#2ca02c"}
	for i, res := range rows {
		y := top + rowH*float64(i)
		label := res.Name
		if res.Unit == "docs" {
			label += " [docs/s]"
		}
		fmt.Fprintf(&s, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-8, y+barH-3, html.EscapeString(label))
		c := colors[res.Group]
		if c == "" {
			c = "#9467bd"
		}
		fmt.Fprintf(&s, `<rect x="%.0f" y="%.1f" width="%.1f" height="%.0f" fill="%s"/>`+"\n", left, y, math.Max(1, x(res.PerSec)-left), barH, c)
		txt := human(res.PerSec)
		if res.Vs != "" {
			txt += fmt.Sprintf("  (%s × %s)", fmtRatio(res.Ratio), res.Vs)
		}
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" fill="#333">%s</text>`+"\n", x(res.PerSec)+4, y+barH-3, html.EscapeString(txt))
	}
	for _, res := range rows {
		if res.Group != "baseline" {
			continue
		}
		xx := x(res.PerSec)
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444" stroke-dasharray="4,3"/>`+"\n", xx, top-8, xx, bottom)
	}
	fmt.Fprintf(&s, `<text x="%.0f" y="%.1f" fill="#555">grey bars and dashed lines: ceilings (wire = ping through the driver; engine = the same work on Pebble directly)</text>`+"\n", 10.0, bottom+40)
	s.WriteString("</svg>\n")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(s.String()), 0o644)
}

func fmtRatio(r float64) string {
	if r < 0.1 {
		return fmt.Sprintf("%.3f", r)
	}
	return fmt.Sprintf("%.2f", r)
}

func human(v float64) string {
	switch {
	case v >= 1e6:
		return trimZero(fmt.Sprintf("%.1fM", v/1e6))
	case v >= 1e3:
		return trimZero(fmt.Sprintf("%.1fk", v/1e3))
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

func trimZero(s string) string { return strings.Replace(s, ".0", "", 1) }
