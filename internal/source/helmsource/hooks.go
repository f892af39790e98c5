package helmsource

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// hookPlan is what becomes of a chart's hooks.
type hookPlan struct {
	pre, post []hookDoc
	dropped   []string
}

type hookDoc struct {
	source, content string
}

// maxNameLength is the longest name the hashed hooks may get: a DNS label.
const maxNameLength = 63

// planHooks maps Helm hooks to Vidra's apply phases. Vidra never uninstalls, rolls
// back or tests a release (its prune and rollback are its own), so test, delete-only
// and rollback-only hooks are dropped; install and upgrade hooks are delivered in the
// "pre" phase (a pre-* event) or the "post" phase (post-* only), in the order Helm runs
// them. A Job or Pod hook is named after its content, so that a new rendering creates a
// new one and the old one is pruned, as Helm's before-hook-creation replaces it.
func planHooks(hooks []*release.Hook) (hookPlan, error) {
	// SortManifests ordered them by kind; Helm then runs them by weight and name.
	hooks = slices.Clone(hooks)
	sort.SliceStable(hooks, func(i, j int) bool {
		if hooks[i].Weight != hooks[j].Weight {
			return hooks[i].Weight < hooks[j].Weight
		}
		return hooks[i].Name < hooks[j].Name
	})
	var plan hookPlan
	for _, h := range hooks {
		phase := hookPhase(h.Events)
		if phase == "" {
			plan.dropped = append(plan.dropped, droppedHook(h.Kind, h.Name, eventNames(h.Events)))
			continue
		}
		content, err := deliverable(h, phase)
		if err != nil {
			return hookPlan{}, err
		}
		doc := hookDoc{source: h.Path, content: content}
		if phase == vidrav1alpha1.ApplyPhasePre {
			plan.pre = append(plan.pre, doc)
		} else {
			plan.post = append(plan.post, doc)
		}
	}
	return plan, nil
}

// hookPhase is the apply phase of a hook with these events, "" for one not delivered.
func hookPhase(events []release.HookEvent) string {
	var pre, post bool
	for _, e := range events {
		switch e {
		case release.HookTest:
			return ""
		case release.HookPreInstall, release.HookPreUpgrade:
			pre = true
		case release.HookPostInstall, release.HookPostUpgrade:
			post = true
		}
	}
	switch {
	case pre:
		return vidrav1alpha1.ApplyPhasePre
	case post:
		return vidrav1alpha1.ApplyPhasePost
	}
	return ""
}

// deliverable is the hook's document with its phase annotation, and for a Job or a Pod
// its name suffixed with a hash of the rendered document.
func deliverable(h *release.Hook, phase string) (string, error) {
	node, err := kyaml.Parse(h.Manifest)
	if err != nil {
		return "", fmt.Errorf("hook %s/%s in %s: %w", h.Kind, h.Name, h.Path, err)
	}
	// Kubernetes deletes a finished Job that has a TTL, and Vidra, which delivers hooks
	// as desired state, would re-create it as drift and run it again, without end. The
	// name's hash stays that of the rendering, so it does not change with this.
	if h.Kind == "Job" {
		if err := node.PipeE(kyaml.Lookup("spec"), kyaml.Clear("ttlSecondsAfterFinished")); err != nil {
			return "", fmt.Errorf("hook %s/%s in %s: drop ttlSecondsAfterFinished: %w", h.Kind, h.Name, h.Path, err)
		}
	}
	if (h.Kind == "Job" || h.Kind == "Pod") && h.Name != "" {
		if err := node.SetName(hashedName(h.Name, h.Manifest)); err != nil {
			return "", fmt.Errorf("hook %s/%s in %s: rename: %w", h.Kind, h.Name, h.Path, err)
		}
	}
	if err := node.PipeE(kyaml.SetAnnotation(vidrav1alpha1.ApplyPhaseAnnotation, phase)); err != nil {
		return "", fmt.Errorf("hook %s/%s in %s: annotate: %w", h.Kind, h.Name, h.Path, err)
	}
	s, err := node.String()
	if err != nil {
		return "", fmt.Errorf("hook %s/%s in %s: %w", h.Kind, h.Name, h.Path, err)
	}
	return s, nil
}

// hashedName is name-<first 10 hex of sha256(doc)>, name cut so the whole fits a DNS
// label.
func hashedName(name, doc string) string {
	sum := sha256.Sum256([]byte(doc))
	suffix := hex.EncodeToString(sum[:])[:10]
	if limit := maxNameLength - len(suffix) - 1; len(name) > limit {
		name = strings.TrimRight(name[:limit], "-.")
	}
	return name + "-" + suffix
}

func eventNames(events []release.HookEvent) string {
	names := make([]string, len(events))
	for i, e := range events {
		names[i] = e.String()
	}
	return strings.Join(names, ",")
}

func droppedHook(kind, name, events string) string {
	return fmt.Sprintf("%s/%s (%s)", kind, name, events)
}

// unknownHooks lists, for Dropped, the hooks of files that SortManifests left out.
func unknownHooks(files map[string]string) []string {
	var dropped []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		// Most files have no hook: only those naming the annotation are parsed again.
		if strings.HasPrefix(path.Base(name), "_") || !strings.Contains(files[name], release.HookAnnotation) {
			continue
		}
		docs := releaseutil.SplitManifests(files[name])
		keys := slices.Collect(maps.Keys(docs))
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			var head releaseutil.SimpleHead
			if yaml.Unmarshal([]byte(docs[k]), &head) != nil || head.Metadata == nil {
				continue
			}
			events, ok := head.Metadata.Annotations[release.HookAnnotation]
			if ok && hasUnknownEvent(events) {
				dropped = append(dropped, droppedHook(head.Kind, head.Metadata.Name, events))
			}
		}
	}
	return dropped
}

func hasUnknownEvent(events string) bool {
	for e := range strings.SplitSeq(events, ",") {
		switch strings.ToLower(strings.TrimSpace(e)) {
		// The events SortManifests knows; it leaves out, without a word, any hook that
		// names another (test-failure, Helm 2's crd-install…).
		case "pre-install", "post-install", "pre-delete", "post-delete", "pre-upgrade",
			"post-upgrade", "pre-rollback", "post-rollback", "test", "test-success":
		default:
			return true
		}
	}
	return false
}
