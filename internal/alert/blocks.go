package alert

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxDetailed bounds the sources given a block or fact set of their own: chat APIs cap the
// blocks of a message (Slack: 50), and the text names every source anyway.
const maxDetailed = 10

// maxSlackText is the limit of a Slack section's text.
const maxSlackText = 3000

// detailed are the sources whose change is known (keys or writer), at most maxDetailed.
func detailed(r Reload) []Source {
	var out []Source
	for _, s := range r.Sources {
		if len(out) == maxDetailed {
			break
		}
		if !s.Report.Keys().Empty() || s.ChangedBy != nil {
			out = append(out, s)
		}
	}
	return out
}

// facts are the lines of one source's change: ("keys changed", "A, B and 3 more"), ("by", ...).
func facts(s Source) [][2]string {
	k := s.Report.Keys()
	var out [][2]string
	for _, l := range []struct {
		what  string
		names []string
		n     int
	}{{"keys changed", k.Changed, k.NChanged}, {"keys added", k.Added, k.NAdded}, {"keys removed", k.Removed, k.NRemoved}} {
		if l.n == 0 {
			continue
		}
		v := strings.Join(l.names, ", ")
		if more := l.n - len(l.names); more > 0 {
			v += fmt.Sprintf(" and %d more", more)
		}
		out = append(out, [2]string{l.what, v})
	}
	if s.ChangedBy != nil {
		out = append(out, [2]string{"changed by", s.ChangedBy.String()})
	}
	return out
}

// clip cuts s to n bytes at a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n-min(n, len("…"))] + "…"
}

// slackBlocks are the message's text as a section, then one section per source whose change
// is known, its facts as lines; all plain text, which Slack shows as it is (no formatting,
// links or mentions). The text stays the notification's fallback.
func slackBlocks(r Reload, text string) []map[string]any {
	section := func(s string) map[string]any {
		return map[string]any{"type": "section", "text": map[string]any{"type": "plain_text", "text": clip(s, maxSlackText), "emoji": false}}
	}
	blocks := []map[string]any{section(text)}
	for _, s := range detailed(r) {
		lines := []string{s.Kind + " " + s.Name}
		for _, f := range facts(s) {
			lines = append(lines, f[0]+": "+f[1])
		}
		blocks = append(blocks, section(strings.Join(lines, "\n")))
	}
	return blocks
}

// teamsFacts are one Adaptive Card FactSet per source whose change is known, markdown escaped.
func teamsFacts(r Reload) []map[string]any {
	var out []map[string]any
	for _, s := range detailed(r) {
		var fs []map[string]string
		for _, f := range facts(s) {
			fs = append(fs, map[string]string{"title": markdownEscape(s.Kind + " " + s.Name + " " + f[0]), "value": markdownEscape(f[1])})
		}
		out = append(out, map[string]any{"type": "FactSet", "facts": fs})
	}
	return out
}

// gchatCard is a Google Chat message of one card (cardsV2): the text as a paragraph, then one
// paragraph per source whose change is known, its facts as lines; all HTML escaped.
func gchatCard(r Reload, additional string) map[string]any {
	widgets := []map[string]any{{"textParagraph": map[string]string{"text": strings.ReplaceAll(chatText(r, additional, htmlEscape), "\n", "<br>")}}}
	for _, s := range detailed(r) {
		lines := []string{"<b>" + htmlEscape(s.Kind+" "+s.Name) + "</b>"}
		for _, f := range facts(s) {
			lines = append(lines, htmlEscape(f[0]+": "+f[1]))
		}
		widgets = append(widgets, map[string]any{"textParagraph": map[string]string{"text": strings.Join(lines, "<br>")}})
	}
	return map[string]any{"cardsV2": []map[string]any{{
		"cardId": "reloader",
		"card": map[string]any{
			"header":   map[string]string{"title": "Reloader"},
			"sections": []map[string]any{{"widgets": widgets}},
		},
	}}}
}
