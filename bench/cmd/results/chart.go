package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// writeNexmarkChart draws the Nexmark rows as an SVG bar chart at path: per query, Strata's
// and its Go model's events/s, and the per-core Flink-on-RocksDB figure published for the
// query where there is one (a bar of its own, labelled as other hardware).
func writeNexmarkChart(path string, rows []nexmarkRow) error {
	p := plot.New()
	p.Title.Text = "Nexmark: events/s per query (one process, this machine)"
	p.Y.Label.Text = "thousand events/s"
	p.Legend.Top = true
	names := make([]string, len(rows))
	var strata, model, flink plotter.Values
	for i, r := range rows {
		names[i] = r.Query
		strata = append(strata, r.Strata/1e3)
		model = append(model, r.Model/1e3)
		flink = append(flink, r.Flink/1e3)
	}
	w := vg.Points(7)
	bars := []struct {
		label string
		v     plotter.Values
		c     color.RGBA
	}{
		{"Strata", strata, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
		{"Go model (maps, no serialization)", model, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
		{"Flink-on-RocksDB per core, published (other hardware)", flink, color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}},
	}
	for i, b := range bars {
		bc, err := plotter.NewBarChart(b.v, w)
		if err != nil {
			return fmt.Errorf("chart %s: %w", b.label, err)
		}
		bc.Color = b.c
		bc.LineStyle.Width = 0
		bc.Offset = vg.Length(i-1) * w
		p.Add(bc)
		p.Legend.Add(b.label, bc)
	}
	p.NominalX(names...)
	p.Add(plotter.NewGrid())
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return p.Save(vg.Length(max(len(rows), 4))*5*w+2*vg.Inch, 4*vg.Inch, path)
}

// flightSample is one record of the flight demo's -series file.
type flightSample struct {
	Sec    float64
	Events int
	Kind   string // progress, checkpoint, materialization
}

// parseFlightSeries reads a -series file of cmd/flightdemo (its series.go).
func parseFlightSeries(raw string) ([]flightSample, error) {
	var out []flightSample
	for _, l := range strings.Split(raw, "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		var s flightSample
		if _, err := fmt.Sscanf(l, "%g %d %s", &s.Sec, &s.Events, &s.Kind); err != nil {
			return nil, fmt.Errorf("flight series line %q: %w", l, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// flightRates returns events/s over time from the progress samples: the events between
// samples at least window seconds apart over the seconds between them, at the window's end.
func flightRates(ss []flightSample, window float64) plotter.XYs {
	var xy plotter.XYs
	var prev *flightSample
	for i := range ss {
		s := &ss[i]
		if s.Kind != "progress" {
			continue
		}
		if prev == nil || s.Events < prev.Events { // the first sample, or a restore replays from earlier
			prev = s
			continue
		}
		if s.Sec-prev.Sec >= window {
			xy = append(xy, plotter.XY{X: s.Sec, Y: float64(s.Events-prev.Events) / (s.Sec - prev.Sec)})
			prev = s
		}
	}
	return xy
}

// writeFlightChart draws the flight job's events/s over time at path, with a vertical line at
// every checkpoint's completion and every materialization.
func writeFlightChart(path string, ss []flightSample) error {
	rates := flightRates(ss, 0.5)
	if len(rates) == 0 {
		return fmt.Errorf("flight series: no progress samples")
	}
	top := 0.0
	for _, r := range rates {
		top = max(top, r.Y)
	}
	p := plot.New()
	p.Title.Text = "Flight job: events/s over time (0.5 s windows)"
	p.X.Label.Text = "seconds since the replay started"
	p.Y.Label.Text = "events/s"
	p.Legend.Top = true
	p.Y.Min = 0
	line, err := plotter.NewLine(rates)
	if err != nil {
		return err
	}
	line.Color = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	line.Width = vg.Points(1.5)
	p.Add(line)
	p.Legend.Add("events/s", line)
	marks := []struct {
		kind, label string
		c           color.RGBA
		dash        []vg.Length
	}{
		{"checkpoint", "checkpoint completed", color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}, []vg.Length{vg.Points(2), vg.Points(2)}},
		{"materialization", "materialization seen", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, nil},
	}
	for _, m := range marks {
		first := true
		for _, s := range ss {
			if s.Kind != m.kind {
				continue
			}
			l, err := plotter.NewLine(plotter.XYs{{X: s.Sec, Y: 0}, {X: s.Sec, Y: top * 1.05}})
			if err != nil {
				return err
			}
			l.Color, l.Width, l.Dashes = m.c, vg.Points(0.6), m.dash
			p.Add(l)
			if first {
				p.Legend.Add(m.label, l)
				first = false
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 4*vg.Inch, path)
}
