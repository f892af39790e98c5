package sender

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Commit statuses: a Git host's status of the commit an event's revision names, set
// by the event's reason. Each host's API is one documented request, written here: a
// client library per host would bring far more than it is used for.

// Commit states, in GitHub's and Gitea's words (GitLab's are mapped).
const (
	statePending = "pending"
	stateSuccess = "success"
	stateFailure = "failure"
)

// MaxDescription is the longest description GitHub keeps.
const MaxDescription = 140

// commitStatus sets statuses on one repository of one host.
type commitStatus struct {
	host  string // github, gitlab or gitea
	api   string // the API's base URL
	repo  string // owner/name; GitLab's full path
	token string
}

// newCommitStatus reads address as a repository's web URL: https://github.com/org/repo
// (the API at api.github.com), another host's (GitHub Enterprise's API under /api/v3,
// GitLab's /api/v4, Gitea's /api/v1).
func newCommitStatus(c Config, u *url.URL) (Sender, error) {
	if c.Token == "" {
		return nil, fmt.Errorf("type %s writes commit statuses with the Secret's token, and there is none", c.Type)
	}
	repo := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
	parts := strings.Split(repo, "/")
	if len(parts) < 2 || (c.Type != vidrav1alpha1.AlertProviderGitLab && len(parts) != 2) || slices.Contains(parts, "") {
		return nil, fmt.Errorf("type %s needs the repository's web URL as its address, such as %s://%s/org/repo", c.Type, u.Scheme, u.Host)
	}
	base := u.Scheme + "://" + u.Host
	cs := &commitStatus{host: c.Type, repo: repo, token: c.Token}
	switch c.Type {
	case vidrav1alpha1.AlertProviderGitHub:
		cs.api = base + "/api/v3"
		if u.Host == "github.com" {
			cs.api = "https://api.github.com"
		}
	case vidrav1alpha1.AlertProviderGitLab:
		cs.api = base + "/api/v4"
	default:
		cs.api = base + "/api/v1"
	}
	return cs, nil
}

// commitSHA finds the commit in a revision as Vidra and Flux write it: main@sha1:<sha>,
// sha1:<sha>, or the bare hash.
var commitSHA = regexp.MustCompile(`(?:^|@|sha1:)([0-9a-f]{40})$`)

// CommitOf is the commit a revision names, "" when it names none (an OCI digest, a
// chart version).
func CommitOf(revision string) string {
	if m := commitSHA.FindStringSubmatch(revision); m != nil {
		return m[1]
	}
	return ""
}

// StateOf is the commit's state an event says, and whether it says one: a revision
// rolling out is pending, Ready everywhere a success, failing on a cluster or rolled
// back a failure.
func StateOf(event *eventv1.Event) (string, bool) {
	switch event.Reason {
	case vidrav1alpha1.EventRevisionReady, vidrav1alpha1.EventPreviewReady:
		return stateSuccess, true
	case vidrav1alpha1.EventPreviewFailed:
		return stateFailure, true
	case vidrav1alpha1.EventClusterFailed, vidrav1alpha1.ReasonRolloutFailed, vidrav1alpha1.ReasonRolledBack:
		return stateFailure, true
	case vidrav1alpha1.EventBundleAdded, vidrav1alpha1.EventBundleUpdated, vidrav1alpha1.EventRolloutStarted,
		vidrav1alpha1.EventRolloutResumed, vidrav1alpha1.EventWaveStarted, vidrav1alpha1.EventWaveCompleted:
		return statePending, true
	}
	return "", false
}

// StatusContext names the sync in a commit status: vidra/gitsync/web, and
// vidra/preview/web for what a commit not merged yet would do.
func StatusContext(event *eventv1.Event) string {
	if isPreview(event) {
		return "vidra/preview/" + event.InvolvedObject.Name
	}
	return "vidra/" + strings.ToLower(event.InvolvedObject.Kind) + "/" + event.InvolvedObject.Name
}

func isPreview(event *eventv1.Event) bool {
	return event.Reason == vidrav1alpha1.EventPreviewReady || event.Reason == vidrav1alpha1.EventPreviewFailed
}

// Description says, within GitHub's 140 characters, where the revision stands.
func Description(event *eventv1.Event, state string) string {
	var d string
	switch {
	case isPreview(event) && event.Metadata["preview"] != "":
		d = event.Metadata["preview"]
	case isPreview(event):
		d = event.Message
	case state == stateSuccess:
		d = "Ready on " + event.Metadata["clusters"] + " clusters"
	case state == stateFailure:
		d = event.Message
		if c := event.Metadata["cluster"]; c != "" {
			_, why, _ := strings.Cut(event.Message, "on cluster "+c+": ")
			d = "failed on " + c + ": " + why
		}
		if n := event.Metadata["clusters"]; n != "" {
			d = n + " clusters Ready; " + d
		}
	default:
		d = "rolling out: " + event.Message
	}
	if len(d) > MaxDescription {
		d = strings.ToValidUTF8(d[:MaxDescription-3], "") + "..."
	}
	return d
}

func (c *commitStatus) Send(ctx context.Context, client *http.Client, event *eventv1.Event) error {
	sha := CommitOf(event.Metadata["revision"])
	state, ok := StateOf(event)
	if sha == "" || !ok || event.InvolvedObject.Kind != "GitSync" {
		return nil // nothing to say of a commit
	}
	name, desc := StatusContext(event), Description(event, state)
	var address string
	var body map[string]string
	headers := map[string]string{}
	switch c.host {
	case vidrav1alpha1.AlertProviderGitLab:
		address = fmt.Sprintf("%s/projects/%s/statuses/%s", c.api, url.PathEscape(c.repo), sha)
		body = map[string]string{"state": gitlabState(state), "name": name, "description": desc}
		headers["PRIVATE-TOKEN"] = c.token
	case vidrav1alpha1.AlertProviderGitea:
		address = fmt.Sprintf("%s/repos/%s/statuses/%s", c.api, c.repo, sha)
		body = map[string]string{"state": state, "context": name, "description": desc}
		headers["Authorization"] = "token " + c.token
	default:
		address = fmt.Sprintf("%s/repos/%s/statuses/%s", c.api, c.repo, sha)
		body = map[string]string{"state": state, "context": name, "description": desc}
		headers["Authorization"] = "Bearer " + c.token
		headers["Accept"] = "application/vnd.github+json"
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode the commit status: %w", err)
	}
	err = post(ctx, client, address, payload, headers)
	if c.host == vidrav1alpha1.AlertProviderGitLab && sameState(err) {
		return nil
	}
	return err
}

// gitlabState is a state in GitLab's words.
func gitlabState(state string) string {
	if state == stateFailure {
		return "failed"
	}
	return state
}

// sameState says GitLab refused a status because the commit has it already: GitLab
// refuses a transition to the state it is in.
func sameState(err error) bool {
	var status *StatusError
	return errors.As(err, &status) && status.Code == http.StatusBadRequest && strings.Contains(status.Answer, "Cannot transition status")
}
