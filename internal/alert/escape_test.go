package alert

import (
	"encoding/json"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// gchatTexts are the paragraphs of a Google Chat card message.
func gchatTexts(t *testing.T, body []byte) []string {
	t.Helper()
	var msg struct {
		CardsV2 []struct {
			Card struct {
				Sections []struct {
					Widgets []struct {
						TextParagraph struct{ Text string }
					}
				}
			}
		}
	}
	testutil.Must(t, json.Unmarshal(body, &msg))
	var out []string
	for _, w := range msg.CardsV2[0].Card.Sections[0].Widgets {
		out = append(out, w.TextParagraph.Text)
	}
	return out
}

// hostileAlert carries s wherever a tenant can put text: the workload's and source's names, a
// key name, the field manager, and a hold's reason (a waves hold quotes workload status).
func hostileAlert(s string) Reload {
	keys := whatchanged.Diff(nil, map[string]string{"K" + s: "d"}, nil)
	w := whatchanged.Writer{Manager: "m" + s, Operation: "Update", Time: time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC)}
	return Reload{Kind: "Deployment", Namespace: "team-a", Name: "api" + s, Time: time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC),
		Sources: []Source{{Kind: "ConfigMap", Name: "cm" + s, Report: whatchanged.NewReport(keys, w, true)}},
		Held:    "wave 2 halted: Deployment web is unhealthy: " + s, HeldBy: "waves-halted"}
}

var hostileInputs = []string{
	"<https://evil.example|click>",
	"<!channel>",
	"<@U024BE7LH>",
	"<users/all>",
	"*bold*",
	"_italic_ ~strike~ `code`",
	"[x](http://e.example)",
	"![img](http://e.example/i.png)",
	"<b>html</b><script>alert(1)</script>",
	"a & b &amp; &lt;",
	"line\n# heading\n- item\n> quote",
	`back\slash \*`,
}

// TestEachSinkEscapesTenantText: text a tenant writes reaches every chat sink as literal text
// (no link, mention or formatting), and raw as the same string.
func TestEachSinkEscapesTenantText(t *testing.T) {
	// Markdown characters left without a backslash before them.
	unescapedMarkdown := func(s string) string {
		for i := 0; i < len(s); i++ {
			switch {
			case s[i] == '\\':
				i++
			case strings.IndexByte("`*_~[]<>&|", s[i]) >= 0:
				return s[max(0, i-10):min(len(s), i+10)]
			}
		}
		return ""
	}
	ourTags := regexp.MustCompile(`</?b>|<br>`)
	for _, hostile := range hostileInputs {
		r := hostileAlert(hostile)
		t.Run(hostile, func(t *testing.T) {
			t.Run("slack", func(t *testing.T) {
				body, err := Body("slack", r, "")
				testutil.Must(t, err)
				var msg struct {
					Text   string
					Mrkdwn *bool
					Blocks []struct{ Text struct{ Type, Text string } }
				}
				testutil.Must(t, json.Unmarshal(body, &msg))
				if strings.ContainsAny(msg.Text, "<>") || msg.Mrkdwn == nil || *msg.Mrkdwn {
					t.Errorf("fallback text %q (mrkdwn %v): markup left", msg.Text, msg.Mrkdwn)
				}
				if want := slackEscape(hostile); !strings.Contains(msg.Text, want) {
					t.Errorf("fallback text %q lacks %q", msg.Text, want)
				}
				for _, b := range msg.Blocks {
					if b.Text.Type != "plain_text" {
						t.Errorf("a %s block: %q", b.Text.Type, b.Text.Text)
					}
				}
				if len(msg.Blocks) != 2 || !strings.Contains(msg.Blocks[0].Text.Text, hostile) || !strings.Contains(msg.Blocks[1].Text.Text, "m"+hostile) {
					t.Errorf("blocks %+v do not show %q as it is", msg.Blocks, hostile)
				}
			})
			t.Run("teams", func(t *testing.T) {
				body, err := Body("teams", r, "")
				testutil.Must(t, err)
				var msg struct {
					Attachments []struct {
						Content struct {
							Body []struct {
								Text  string
								Facts []struct{ Title, Value string }
							}
						}
					}
				}
				testutil.Must(t, json.Unmarshal(body, &msg))
				b := msg.Attachments[0].Content.Body
				texts := []string{b[0].Text}
				for _, f := range b[1].Facts {
					texts = append(texts, f.Title, f.Value)
				}
				for _, s := range texts {
					if bad := unescapedMarkdown(s); bad != "" || strings.Contains(s, "\n") {
						t.Errorf("markdown %q: unescaped markup at %q, or a line break", s, bad)
					}
				}
				if want := markdownEscape(hostile); !strings.Contains(b[0].Text, want) {
					t.Errorf("text %q lacks %q", b[0].Text, want)
				}
			})
			t.Run("gchat", func(t *testing.T) {
				body, err := Body("gchat", r, "")
				testutil.Must(t, err)
				for _, p := range gchatTexts(t, body) {
					if left := ourTags.ReplaceAllString(p, ""); strings.ContainsAny(left, "<>") {
						t.Errorf("HTML %q: a tag not ours", p)
					}
					if strings.Contains(html.UnescapeString(p), "&") != strings.Contains(hostile, "&") {
						t.Errorf("HTML %q: an entity not escaped", p)
					}
				}
				if p := gchatTexts(t, body)[0]; !strings.Contains(html.UnescapeString(p), oneLine(hostile)) {
					t.Errorf("text %q does not show %q", p, hostile)
				}
			})
			t.Run("raw", func(t *testing.T) {
				body, err := Body("raw", r, "")
				testutil.Must(t, err)
				var doc struct {
					Event, Message string
					Workload       struct{ Name string }
					Sources        []struct {
						Name      string
						ChangedBy struct{ Manager string }
					}
				}
				testutil.Must(t, json.Unmarshal(body, &doc))
				if doc.Event != "waves-halted" || doc.Workload.Name != "api"+hostile || doc.Sources[0].Name != "cm"+hostile ||
					doc.Sources[0].ChangedBy.Manager != "m"+hostile || !strings.Contains(doc.Message, hostile) {
					t.Errorf("raw document %s does not carry %q as it is", body, hostile)
				}
			})
		})
	}
}
