// Command render draws the panels of docs/monitoring/grafana-dashboard.json
// from a Prometheus server, without Grafana: it runs each panel's queries
// over a time range through the Prometheus HTTP API (query_range; instant
// queries for stat panels), draws the series as an SVG laid out like the
// dashboard's grid and has headless Chromium turn it into a PNG.
//
//	go run ./docs/monitoring/render -prometheus http://127.0.0.1:19090 \
//	    -start 2026-12-01T10:00:00Z -end 2026-12-01T10:02:00Z -out docs/images/dashboard.png
//
// docs/monitoring/README.md shows how the committed picture was made from
// a chatbench run.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

type dashboard struct {
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		X, Y, W, H int
	} `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

type series struct {
	name   string
	points [][2]float64 // unix seconds, value
}

func main() {
	dashPath := flag.String("dashboard", "docs/monitoring/grafana-dashboard.json", "Grafana dashboard JSON")
	prom := flag.String("prometheus", "http://127.0.0.1:9090", "Prometheus base URL")
	startS := flag.String("start", "", "range start (RFC 3339)")
	endS := flag.String("end", "", "range end (RFC 3339)")
	step := flag.Duration("step", 2*time.Second, "query resolution")
	rateInterval := flag.String("rate-interval", "8s", "what $__rate_interval stands for (Grafana: 4 scrape intervals)")
	out := flag.String("out", "docs/images/dashboard.png", "PNG to write (an .svg beside it is kept)")
	chromium := flag.String("chromium", "/usr/bin/chromium", "headless Chromium for SVG to PNG")
	flag.Parse()
	start, err1 := time.Parse(time.RFC3339, *startS)
	end, err2 := time.Parse(time.RFC3339, *endS)
	if err1 != nil || err2 != nil {
		fail("give -start and -end as RFC 3339 times")
	}
	raw, err := os.ReadFile(*dashPath)
	if err != nil {
		fail("read dashboard: %v", err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		fail("parse dashboard: %v", err)
	}
	sort.SliceStable(d.Panels, func(i, j int) bool {
		a, b := d.Panels[i].GridPos, d.Panels[j].GridPos
		return a.Y < b.Y || (a.Y == b.Y && a.X < b.X)
	})
	const unitW, unitH = 60.0, 32.0 // pixels per grid column and row
	width, height := 24*unitW, 0.0
	for _, p := range d.Panels {
		height = math.Max(height, float64(p.GridPos.Y+p.GridPos.H)*unitH)
	}
	height += 40
	var svg strings.Builder
	fmt.Fprintf(&svg, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="DejaVu Sans, sans-serif">`, width, height)
	fmt.Fprintf(&svg, `<rect width="100%%" height="100%%" fill="#111217"/>`)
	fmt.Fprintf(&svg, `<text x="12" y="26" fill="#d8d9da" font-size="18">%s — %s to %s (UTC)</text>`, html.EscapeString(d.Title),
		start.UTC().Format("2006-01-02 15:04:05"), end.UTC().Format("15:04:05"))
	for _, p := range d.Panels {
		x, y := float64(p.GridPos.X)*unitW+4, float64(p.GridPos.Y)*unitH+40+4
		w, h := float64(p.GridPos.W)*unitW-8, float64(p.GridPos.H)*unitH-8
		fmt.Fprintf(&svg, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="3" fill="#181b1f" stroke="#2c3235"/>`, x, y, w, h)
		fmt.Fprintf(&svg, `<text x="%.1f" y="%.1f" fill="#d8d9da" font-size="13" font-weight="bold">%s</text>`, x+8, y+18, html.EscapeString(p.Title))
		var all []series
		for _, t := range p.Targets {
			expr := strings.ReplaceAll(t.Expr, "$__rate_interval", *rateInterval)
			var ss []series
			if p.Type == "stat" {
				ss, err = query(*prom, expr, t.LegendFormat, end, end, 0)
			} else {
				ss, err = query(*prom, expr, t.LegendFormat, start, end, *step)
			}
			if err != nil {
				fail("panel %q: %v", p.Title, err)
			}
			all = append(all, ss...)
		}
		if p.Type == "stat" {
			drawStat(&svg, all, p.FieldConfig.Defaults.Unit, x, y, w, h)
		} else {
			drawSeries(&svg, all, p.FieldConfig.Defaults.Unit, start, end, x, y, w, h)
		}
	}
	svg.WriteString(`</svg>`)
	svgPath := strings.TrimSuffix(*out, filepath.Ext(*out)) + ".svg"
	if err := os.WriteFile(svgPath, []byte(svg.String()), 0o644); err != nil {
		fail("write svg: %v", err)
	}
	abs, _ := filepath.Abs(svgPath)
	absOut, _ := filepath.Abs(*out)
	cmd := exec.Command(*chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(os.TempDir(), "render-chromium"),
		fmt.Sprintf("--window-size=%.0f,%.0f", width, height), "--screenshot="+absOut, "file://"+abs)
	if b, err := cmd.CombinedOutput(); err != nil {
		fail("chromium: %v\n%s", err, b)
	}
	fmt.Println("wrote", *out, "and", svgPath)
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "render: "+format+"\n", a...)
	os.Exit(1)
}

// query runs expr over [start, end] (an instant query when step is 0).
func query(base, expr, legend string, start, end time.Time, step time.Duration) ([]series, error) {
	v := url.Values{"query": {expr}}
	path := "/api/v1/query"
	if step > 0 {
		path = "/api/v1/query_range"
		v.Set("start", strconv.FormatInt(start.Unix(), 10))
		v.Set("end", strconv.FormatInt(end.Unix(), 10))
		v.Set("step", strconv.FormatFloat(step.Seconds(), 'f', -1, 64))
	} else {
		v.Set("time", strconv.FormatInt(end.Unix(), 10))
	}
	resp, err := http.Get(base + path + "?" + v.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("decode %s: %w", expr, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", expr, r.Error)
	}
	var out []series
	for _, res := range r.Data.Result {
		s := series{name: legendOf(legend, res.Metric)}
		vals := res.Values
		if step == 0 {
			vals = [][2]any{res.Value}
		}
		for _, pv := range vals {
			ts, _ := pv[0].(float64)
			str, _ := pv[1].(string)
			f, err := strconv.ParseFloat(str, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				continue
			}
			s.points = append(s.points, [2]float64{ts, f})
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

var legendRE = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

func legendOf(format string, m map[string]string) string {
	if format == "" {
		var parts []string
		for k, v := range m {
			parts = append(parts, k+"="+v)
		}
		sort.Strings(parts)
		return strings.Join(parts, ",")
	}
	return legendRE.ReplaceAllStringFunc(format, func(s string) string { return m[legendRE.FindStringSubmatch(s)[1]] })
}

var palette = []string{"#73bf69", "#f2cc0c", "#5794f2", "#ff9830", "#f2495c", "#b877d9", "#8ab8ff", "#fade2a", "#37872d", "#c4162a"}

func drawSeries(svg *strings.Builder, ss []series, unit string, start, end time.Time, x, y, w, h float64) {
	const top, left, bottom, right = 28.0, 62.0, 22.0, 26.0
	legendRows := (len(ss) + 2) / 3
	ph := h - top - bottom - float64(legendRows)*14
	pw := w - left - right
	px, py := x+left, y+top
	lo, hi := 0.0, 0.0
	for _, s := range ss {
		for _, p := range s.points {
			lo, hi = math.Min(lo, p[1]), math.Max(hi, p[1])
		}
	}
	if hi == lo {
		hi = lo + 1
	}
	hi *= 1.05
	t0, t1 := float64(start.Unix()), float64(end.Unix())
	for i := 0; i <= 4; i++ {
		v := lo + (hi-lo)*float64(i)/4
		yy := py + ph - ph*float64(i)/4
		fmt.Fprintf(svg, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#2c3235"/>`, px, yy, px+pw, yy)
		fmt.Fprintf(svg, `<text x="%.1f" y="%.1f" fill="#8e8e8e" font-size="10" text-anchor="end">%s</text>`, px-4, yy+3, format(v, unit))
	}
	for i := 0; i <= 4; i++ {
		tt := t0 + (t1-t0)*float64(i)/4
		xx := px + pw*float64(i)/4
		fmt.Fprintf(svg, `<text x="%.1f" y="%.1f" fill="#8e8e8e" font-size="10" text-anchor="middle">%s</text>`, xx, py+ph+14,
			time.Unix(int64(tt), 0).UTC().Format("15:04:05"))
	}
	if len(ss) == 0 {
		fmt.Fprintf(svg, `<text x="%.1f" y="%.1f" fill="#8e8e8e" font-size="12" text-anchor="middle">no data</text>`, px+pw/2, py+ph/2)
	}
	for i, s := range ss {
		c := palette[i%len(palette)]
		var pts []string
		for _, p := range s.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px+pw*(p[0]-t0)/(t1-t0), py+ph-ph*(p[1]-lo)/(hi-lo)))
		}
		fmt.Fprintf(svg, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, c, strings.Join(pts, " "))
		lx, ly := x+8+float64(i%3)*(w-16)/3, py+ph+30+float64(i/3)*14
		name := s.name
		if len(name) > 40 {
			name = name[:39] + "…"
		}
		fmt.Fprintf(svg, `<rect x="%.1f" y="%.1f" width="10" height="3" fill="%s"/><text x="%.1f" y="%.1f" fill="#d8d9da" font-size="10">%s</text>`,
			lx, ly-4, c, lx+14, ly, html.EscapeString(name))
	}
}

func drawStat(svg *strings.Builder, ss []series, unit string, x, y, w, h float64) {
	text := "no data"
	if len(ss) > 0 && len(ss[0].points) > 0 {
		text = format(ss[0].points[0][1], unit)
		if ss[0].name != "" && !strings.Contains(ss[0].name, "=") {
			text = ss[0].name
		}
	}
	fmt.Fprintf(svg, `<text x="%.1f" y="%.1f" fill="#73bf69" font-size="22" text-anchor="middle">%s</text>`, x+w/2, y+h/2+16, html.EscapeString(text))
}

// format prints v in the panel's Grafana unit.
func format(v float64, unit string) string {
	switch unit {
	case "s":
		switch {
		case v == 0:
			return "0"
		case math.Abs(v) < 1e-3:
			return fmt.Sprintf("%.0fµs", v*1e6)
		case math.Abs(v) < 1:
			return fmt.Sprintf("%.1fms", v*1e3)
		case math.Abs(v) > 86400:
			return fmt.Sprintf("%.1fd", v/86400)
		}
		return fmt.Sprintf("%.2fs", v)
	case "ops", "reqps":
		return si(v) + "/s"
	}
	return si(v)
}

func si(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a >= 10 || a == 0:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
