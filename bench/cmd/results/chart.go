package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

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
	return p.Save(vg.Length(max(len(rows), 4))*3*w+2*vg.Inch, 4*vg.Inch, path)
}
