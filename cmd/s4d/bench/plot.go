package bench

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// series is one line of the plot: a mode, engine and codec across batch sizes.
type series struct {
	name     string
	put, get plotter.XYs
}

// writePlot draws GB/s against pages per request, one colour per mode,
// engine and codec, PUT solid and GET dashed. The cpu-inproc reference is
// drawn too, so an end-to-end run shows its distance from the codec.
func writePlot(file string, rep *Report) error {
	var all []*series
	byName := map[string]*series{}
	batches := map[int]bool{}
	for _, r := range append(append([]Result(nil), rep.Results...), rep.Reference...) {
		name := fmt.Sprintf("%s %s %s, %d clients", r.Mode, r.Backend, r.Codec, r.Clients)
		if r.Mode == "e2e" {
			name = fmt.Sprintf("e2e daemon %s, %d clients", r.Codec, r.Clients)
		}
		s := byName[name]
		if s == nil {
			s = &series{name: name}
			byName[name] = s
			all = append(all, s)
		}
		if s.hasBatch(r.Batch) {
			continue // the cpu engine in-process is both a result and the reference
		}
		batches[r.Batch] = true
		s.put = append(s.put, plotter.XY{X: float64(r.Batch), Y: r.PutGBps})
		s.get = append(s.get, plotter.XY{X: float64(r.Batch), Y: r.GetGBps})
	}

	p := plot.New()
	p.Title.Text = fmt.Sprintf("s4d bench: %s, %d pages of %d bytes", rep.Corpus, rep.Pages, rep.PageSize)
	p.X.Label.Text = "pages per request"
	p.Y.Label.Text = "GB/s (solid: PUT / compress, dashed: GET / decompress)"
	p.Y.Min = 0
	if len(batches) > 1 {
		// Batch sizes are swept in powers; a log axis spaces them evenly.
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for i, s := range all {
		c := plotutil.Color(i)
		for j, xys := range []plotter.XYs{s.put, s.get} {
			l, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			l.Color, pts.Color = c, c
			l.Width = vg.Points(1.5)
			pts.Shape = draw.CircleGlyph{}
			if j == 1 {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
				pts.Shape = draw.BoxGlyph{}
			}
			p.Add(l, pts)
			if j == 0 {
				p.Legend.Add(s.name, l, pts)
			}
		}
	}
	// Headroom above the highest point keeps the legend off the lines.
	p.Y.Max *= 1.3
	p.BackgroundColor = color.White
	return p.Save(9*vg.Inch, 5.5*vg.Inch, file)
}

func (s *series) hasBatch(b int) bool {
	for _, xy := range s.put {
		if xy.X == float64(b) {
			return true
		}
	}
	return false
}
