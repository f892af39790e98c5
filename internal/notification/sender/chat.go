package sender

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
)

// title names the event's object as people read it: "gitsync/web".
func title(event *eventv1.Event) string {
	return strings.ToLower(event.InvolvedObject.Kind) + "/" + event.InvolvedObject.Name
}

// metadataKeys are the event's metadata keys, in order.
func metadataKeys(event *eventv1.Event) []string {
	return slices.Sorted(maps.Keys(event.Metadata))
}

// slack posts to an incoming webhook, as Flux's provider does: one attachment, green
// for info and red for errors, the metadata as its fields.
type slack struct {
	address, channel, username string
}

type slackField struct {
	Title string `json:"title"`
	Value string `json:"value"`
	Short bool   `json:"short"`
}

type slackAttachment struct {
	Color      string       `json:"color"`
	AuthorName string       `json:"author_name"`
	Text       string       `json:"text"`
	MrkdwnIn   []string     `json:"mrkdwn_in"`
	Fields     []slackField `json:"fields,omitempty"`
}

type slackPayload struct {
	Channel     string            `json:"channel,omitempty"`
	Username    string            `json:"username,omitempty"`
	Attachments []slackAttachment `json:"attachments"`
}

func (s slack) Send(ctx context.Context, client *http.Client, event *eventv1.Event) error {
	a := slackAttachment{Color: "good", AuthorName: title(event), Text: event.Message, MrkdwnIn: []string{"text"}}
	if event.Severity == eventv1.EventSeverityError {
		a.Color = "danger"
	}
	for _, k := range metadataKeys(event) {
		a.Fields = append(a.Fields, slackField{Title: k, Value: event.Metadata[k]})
	}
	body, err := json.Marshal(slackPayload{Channel: s.channel, Username: s.username, Attachments: []slackAttachment{a}})
	if err != nil {
		return fmt.Errorf("encode the Slack message: %w", err)
	}
	return post(ctx, client, s.address, body, nil)
}

// msteams posts an Adaptive Card to a Teams workflow webhook, as Flux's provider does
// since Office 365 connectors were retired.
type msteams struct{ address string }

func (m msteams) Send(ctx context.Context, client *http.Client, event *eventv1.Event) error {
	color := "Good"
	if event.Severity == eventv1.EventSeverityError {
		color = "Attention"
	}
	facts := make([]map[string]string, 0, len(event.Metadata))
	for _, k := range metadataKeys(event) {
		facts = append(facts, map[string]string{"title": k, "value": event.Metadata[k]})
	}
	body := []map[string]any{
		{"type": "TextBlock", "text": title(event), "weight": "Bolder", "size": "Medium", "color": color},
		{"type": "TextBlock", "text": event.Message, "wrap": true},
	}
	if len(facts) > 0 {
		body = append(body, map[string]any{"type": "FactSet", "facts": facts})
	}
	card := map[string]any{
		"type": "message",
		"attachments": []map[string]any{{
			"contentType": "application/vnd.microsoft.card.adaptive",
			"content": map[string]any{
				"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
				"type":    "AdaptiveCard",
				"version": "1.4",
				"body":    body,
			},
		}},
	}
	payload, err := json.Marshal(card)
	if err != nil {
		return fmt.Errorf("encode the Teams card: %w", err)
	}
	return post(ctx, client, m.address, payload, nil)
}
