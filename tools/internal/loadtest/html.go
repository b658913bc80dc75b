package loadtest

import (
	"fmt"
	"html/template"
	"io"
	"strings"
)

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>reloader load test: {{.Verdict}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}
caption{text-align:left;padding:.3em 0}
#summary td:nth-child(2),#summary td:nth-child(3){text-align:left}
.pass,.PASS{color:#1a7f37}.FAIL{color:#cf222e;font-weight:bold}
.charts{display:flex;flex-wrap:wrap;gap:2em}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px}
</style></head><body>
<h1>reloader load test: <span class="{{.Verdict}}">{{.Verdict}}</span></h1>
<table id="summary"><caption>{{.Note}}</caption>
<tr><th>scenario</th><th>new</th><th>old</th>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Summary}}<tr><td><a href="#{{.Scenario}}">{{.Scenario}}</a></td><td class="{{.NewClass}}">{{.New}}</td><td class="{{.OldClass}}">{{.Old}}</td>{{range .Figures}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{with .Guards}}<ul id="guards">{{range .}}<li>{{.}}</li>{{end}}</ul>{{end}}
<p>{{.Overall}}</p>
<table id="builds"><caption>builds and machine</caption><tr><th>side</th><th>binary</th><th>--version</th><th>sha256</th><th>arguments</th><th>cores</th><th>scale</th><th>duration</th></tr>
{{range .Builds}}<tr><td>{{.Side}}</td><td>{{.Binary}}</td><td>{{.Version}}</td><td>{{.SHA256}}</td><td>{{.Args}}</td><td>{{.Cores}}</td><td>{{.Scale}}</td><td>{{.Duration}}</td></tr>
{{end}}</table>
<p class="legend">sides:<span style="background:#8c959f"></span>old<span style="background:#0969da"></span>new</p>
{{range .Sections}}
<section id="{{.Scenario}}">
<h2>{{.Scenario}} {{.Title}}</h2>
<p class="verdicts">new: <span class="{{.NewClass}}">{{.New}}</span> · old: <span class="{{.OldClass}}">{{.Old}}</span></p>
<table><tr><th>metric</th><th>old</th><th>new</th><th>gate</th><th>old verdict</th><th>new verdict</th></tr>
{{range .Rows}}<tr><td>{{.Metric}}</td><td>{{.Old}}</td><td>{{.New}}</td><td>{{.Expected}}</td><td class="{{.OldVerdict}}">{{.OldVerdict}}</td><td class="{{.NewVerdict}}">{{.NewVerdict}}</td></tr>
{{end}}</table>
<div class="charts"><figure>{{.Bars}}<figcaption>old vs new, each metric scaled to the larger side</figcaption></figure>
<figure>{{.CDF}}<figcaption>latency from each write: share of writes rolled out within x ms</figcaption></figure>
<figure>{{.CDFLast}}<figcaption>latency from the last write covered: share of rollouts within x ms of the newest write they include</figcaption></figure></div>
</section>
{{end}}
</body></html>
`))

type htmlRow struct{ Metric, Old, New, Expected, OldVerdict, NewVerdict string }

type htmlSection struct {
	Scenario, Title    string
	New, Old           string
	NewClass, OldClass string
	Rows               []htmlRow
	Bars, CDF, CDFLast template.HTML
}

type htmlSummaryRow struct {
	Scenario, New, Old, NewClass, OldClass string
	Figures                                []string
}

// class colours a side's verdict; a side that did not run gets none.
func class(v Verdict) string {
	if !v.Ran {
		return ""
	}
	return verdict(v.Pass)
}

// HTML writes a self-contained page (inline SVG, no scripts, nothing fetched).
func (rep Report) HTML(w io.Writer) {
	data := struct {
		Verdict, Note, Overall string
		Header                 []string
		Builds                 []BuildLine
		Summary                []htmlSummaryRow
		Guards                 []string
		Sections               []htmlSection
	}{Verdict: verdict(rep.Pass), Note: rep.summaryNote(), Overall: rep.overall(), Header: SummaryHeader, Builds: rep.Builds, Guards: rep.guardLines()}
	for _, s := range rep.Summary() {
		row := htmlSummaryRow{Scenario: s.Scenario, New: s.New.String(), Old: s.Old.String(), NewClass: class(s.New), OldClass: class(s.Old)}
		for _, p := range s.Figures() {
			row.Figures = append(row.Figures, p.Ratio())
		}
		data.Summary = append(data.Summary, row)
	}
	for _, s := range rep.Sections {
		hs := htmlSection{Scenario: s.Scenario, Title: s.Title, New: s.NewVerdict.String(), Old: s.OldVerdict.String(),
			NewClass: class(s.NewVerdict), OldClass: class(s.OldVerdict), Bars: bars(s.Rows),
			CDF:     cdf("latency from each write", latencyOf(s.Old, false), latencyOf(s.New, false)),
			CDFLast: cdf("latency from the last write covered", latencyOf(s.Old, true), latencyOf(s.New, true))}
		for _, r := range s.Rows {
			hs.Rows = append(hs.Rows, htmlRow{r.Metric, format(r.Old), format(r.New), r.Expected, r.OldVerdict, r.NewVerdict})
		}
		data.Sections = append(data.Sections, hs)
	}
	_ = page.Execute(w, data)
}

// latencyOf is a side's latency from each write, or from the last write each rollout covered.
func latencyOf(r *Result, fromLast bool) *Latency {
	switch {
	case r == nil:
		return nil
	case fromLast:
		return &r.LatencyFromLastWrite
	}
	return &r.Latency
}

const (
	oldColour = "#8c959f"
	newColour = "#0969da"
)

// bars draws a pair of horizontal bars per metric.
func bars(rows []Row) template.HTML {
	var b strings.Builder
	var drawn []Row
	for _, r := range rows {
		// Gated figures and the summary's; the rest are in the table.
		if (r.Old != nil || r.New != nil) && (r.Expected != "" || r.Guard || r.Metric == RowP50FromEach) {
			drawn = append(drawn, r)
		}
	}
	const width, label, barW, rowH = 600, 270, 260, 30
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="metrics">`, width, rowH*len(drawn)+10)
	for i, r := range drawn {
		y := 5 + i*rowH
		top := 0.0
		for _, v := range []*float64{r.Old, r.New} {
			if v != nil && *v > top {
				top = *v
			}
		}
		fmt.Fprintf(&b, `<text x="0" y="%d" font-size="12">%s</text>`, y+16, template.HTMLEscapeString(r.Metric))
		for j, v := range []*float64{r.Old, r.New} {
			if v == nil {
				continue
			}
			w := 0.0
			if top > 0 {
				w = *v / top * barW
			}
			colour := oldColour
			if j == 1 {
				colour = newColour
			}
			fmt.Fprintf(&b, `<rect class="bar" x="%d" y="%d" width="%.1f" height="11" fill="%s"/><text x="%.1f" y="%d" font-size="10">%s</text>`,
				label, y+j*13, w, colour, float64(label)+w+4, y+j*13+10, format(v))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// cdf draws the cumulative latency distribution of each side (old, then new).
func cdf(label string, sides ...*Latency) template.HTML {
	const width, height, pad = 420, 220, 36
	top := 0.0
	for _, r := range sides {
		if r != nil && r.Max > top {
			top = r.Max
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="%s">`, width, height, template.HTMLEscapeString(label))
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>`,
		pad, height-pad, width-10, height-pad, pad, 10, pad, height-pad)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10">0</text><text x="%d" y="%d" font-size="10" text-anchor="end">%.0f ms</text><text x="4" y="16" font-size="10">100%%</text>`,
		pad, height-pad+14, width-10, height-pad+14, top)
	if top == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12">no latency samples</text>`, pad+20, height/2)
	}
	for i, r := range sides {
		if r == nil || len(r.Samples) == 0 || top == 0 {
			continue
		}
		colour := oldColour
		if i == 1 {
			colour = newColour
		}
		var pts []string
		n := len(r.Samples)
		step := max(1, n/500) // at most about 500 points
		for k, v := range r.Samples {
			if k%step != 0 && k != n-1 {
				continue
			}
			x := pad + v/top*float64(width-10-pad)
			y := float64(height-pad) - float64(k+1)/float64(n)*float64(height-pad-10)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		fmt.Fprintf(&b, `<polyline class="cdf" fill="none" stroke="%s" stroke-width="2" points="%s"/>`, colour, strings.Join(pts, " "))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
