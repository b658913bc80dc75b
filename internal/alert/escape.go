package alert

import (
	"html"
	"strings"
)

// chatText is r's text for a chat sink that renders markup: the text on one line (a status
// message's line breaks would start a list, a quote or a heading), then the additional
// information on the next, each escaped by esc.
func chatText(r Reload, additional string, esc func(string) string) string {
	text := esc(oneLine(r.Text("")))
	if additional != "" {
		text += "\n" + esc(additional)
	}
	return text
}

// oneLine turns line breaks into spaces.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}

// slackEscape escapes the three characters Slack's mrkdwn reads as markup: with '<' escaped,
// no <url|text> link, <!channel> or <@user> mention can be written.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// markdownEscaper puts a backslash before each character that starts markup in the markdown
// of Adaptive Cards (CommonMark's escapes): emphasis (* _ ~), code (`), links and images
// ([ ]), autolinks and HTML (< >), entities (&), tables (|), and the backslash itself.
var markdownEscaper = func() *strings.Replacer {
	var pairs []string
	for _, c := range "\\`*_~[]<>&|" {
		pairs = append(pairs, string(c), "\\"+string(c))
	}
	return strings.NewReplacer(pairs...)
}()

// markdownEscape escapes s for Teams' Adaptive Card markdown, on one line.
func markdownEscape(s string) string { return markdownEscaper.Replace(oneLine(s)) }

// htmlEscape escapes s for the HTML of Google Chat's card text (< > & ' ").
func htmlEscape(s string) string { return html.EscapeString(s) }
