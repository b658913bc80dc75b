package alert

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// Every sink names the keys and the writer in its text; raw carries them as fields.
func TestBodiesNameKeysAndWriter(t *testing.T) {
	keys := whatchanged.Diff(map[string]string{"LOG_LEVEL": "a", "OLD": "b"}, map[string]string{"LOG_LEVEL": "c", "NEW": "d"}, nil)
	w := whatchanged.Writer{Manager: "kubectl-edit", Operation: "Update", Time: time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC)}
	r := sample
	r.Sources = []Source{{Kind: "ConfigMap", Name: "app-config", Hash: "h1", Report: whatchanged.NewReport(keys, w, true)}}
	const want = "ConfigMap app-config (keys changed: LOG_LEVEL; added: NEW; removed: OLD) by field manager kubectl-edit (Update at 2026-11-26T21:00:00Z, reported by the API server)"
	for sink, want := range map[string]string{"slack": want, "gchat": want, "raw": want,
		"teams": strings.ReplaceAll(want, "LOG_LEVEL", `LOG\\_LEVEL`)} {
		body, err := Body(sink, r, "")
		testutil.Must(t, err)
		var doc map[string]any
		testutil.Must(t, json.Unmarshal(body, &doc))
		if !strings.Contains(string(body), want) {
			t.Errorf("%s: %s\nwant it to contain %q", sink, body, want)
		}
		if sink != "raw" {
			continue
		}
		src := doc["sources"].([]any)[0].(map[string]any)
		by, _ := src["changedBy"].(map[string]any)
		if src["keysChanged"].([]any)[0] != "LOG_LEVEL" || src["keysAdded"].([]any)[0] != "NEW" || src["keysRemoved"].([]any)[0] != "OLD" ||
			by["manager"] != "kubectl-edit" || by["operation"] != "Update" || by["time"] != "2026-11-26T21:00:00Z" || by["reportedBy"] != "managedFields" {
			t.Errorf("raw source %v", src)
		}
	}
	// Nothing known: the text and document are as before.
	body, _ := Body("raw", sample, "")
	if strings.Contains(string(body), "keys") || strings.Contains(string(body), "changedBy") {
		t.Errorf("raw alert without a report: %s", body)
	}
}

// Slack gets a section per known change, Teams a fact set, Google Chat a paragraph, each
// naming keys and writer.
func TestChatBlocksNameKeysAndWriter(t *testing.T) {
	keys := whatchanged.Diff(nil, map[string]string{"TOKEN": "d"}, nil)
	r := sample
	r.Sources = []Source{{Kind: "Secret", Name: "creds", Report: whatchanged.NewReport(keys, whatchanged.Writer{Manager: "helm", Operation: "Apply"}, true)}}
	body, err := Body("slack", r, "")
	testutil.Must(t, err)
	var slack struct {
		Text   string
		Blocks []struct{ Text struct{ Type, Text string } }
	}
	testutil.Must(t, json.Unmarshal(body, &slack))
	if len(slack.Blocks) != 2 || slack.Blocks[1].Text.Type != "plain_text" ||
		slack.Blocks[1].Text.Text != "Secret creds\nkeys added: TOKEN\nchanged by: field manager helm (Apply, reported by the API server)" {
		t.Errorf("Slack blocks %s", body)
	}
	body, _ = Body("teams", r, "")
	var teams struct {
		Attachments []struct {
			Content struct {
				Body []struct {
					Type  string
					Facts []struct{ Title, Value string }
				}
			}
		}
	}
	testutil.Must(t, json.Unmarshal(body, &teams))
	b := teams.Attachments[0].Content.Body
	if len(b) != 2 || b[1].Type != "FactSet" || len(b[1].Facts) != 2 || b[1].Facts[0].Title != "Secret creds keys added" || b[1].Facts[0].Value != "TOKEN" ||
		b[1].Facts[1].Value != "field manager helm (Apply, reported by the API server)" {
		t.Errorf("Teams card %s", body)
	}
	body, _ = Body("gchat", r, "")
	if got, want := gchatTexts(t, body), `<b>Secret creds</b><br>keys added: TOKEN<br>changed by: field manager helm (Apply, reported by the API server)`; len(got) != 2 || got[1] != want {
		t.Errorf("Google Chat card %q\nwant its second paragraph %q", got, want)
	}
	// Nothing known: Slack's message is the text alone.
	body, _ = Body("slack", sample, "")
	testutil.Must(t, json.Unmarshal(body, &slack))
	if len(slack.Blocks) != 1 {
		t.Errorf("Slack message without a report: %s", body)
	}
}
