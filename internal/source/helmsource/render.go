package helmsource

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Capabilities are the cluster's, as templates see them in .Capabilities.
type Capabilities struct {
	// KubeVersion is the API server's version, e.g. "v1.36.0".
	KubeVersion string
	// APIVersions are exactly the cluster's group versions and group/version/kinds
	// ("v1", "v1/ConfigMap", "apps/v1", "apps/v1/Deployment", …).
	APIVersions []string
}

// RenderOptions are a release's name and place, its values and its cluster.
type RenderOptions struct {
	ReleaseName, Namespace string
	// IsUpgrade sets .Release.IsUpgrade; otherwise .Release.IsInstall is set.
	IsUpgrade bool
	// Revision is .Release.Revision (default 1).
	Revision     int
	Values       map[string]any
	Capabilities Capabilities
	// IncludeCRDs puts the crds/ files of the chart and its subcharts first.
	IncludeCRDs bool
	// MaxBytes bounds Rendered.Manifest: a larger one is a LimitError (MaxBundleBytes).
	// Zero or less is no bound.
	MaxBytes int
}

// Rendered is a chart rendered for one cluster.
type Rendered struct {
	// Manifest is one multi-document YAML stream: CRDs (with IncludeCRDs), pre hooks,
	// templates, post hooks, each document after a "# Source: <path>" comment.
	Manifest []byte
	// Dropped lists the hooks not delivered, as "Kind/name (hook events)".
	Dropped []string
}

// Render renders ch as `helm template` does, but with exactly the given capabilities
// and with hooks mapped to Vidra's apply phases (see planHooks). ch is not modified.
func Render(ch *chart.Chart, opts RenderOptions) (Rendered, error) {
	if ch == nil || ch.Metadata == nil {
		return Rendered{}, errors.New("render: no chart")
	}
	name := chartRef(ch.Name(), ch.Metadata.Version)
	c, files, err := renderFiles(ch, opts)
	if err != nil {
		return Rendered{}, fmt.Errorf("render %s: %w", name, err)
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return Rendered{}, fmt.Errorf("render %s: %w", name, err)
	}
	plan, err := planHooks(hooks)
	if err != nil {
		return Rendered{}, fmt.Errorf("render %s: %w", name, err)
	}
	plan.dropped = append(plan.dropped, unknownHooks(files)...)
	b, err := assemble(c, plan, manifests, opts)
	if err != nil {
		return Rendered{}, fmt.Errorf("render %s: %w", name, err)
	}
	if b.over {
		return Rendered{}, &LimitError{What: "the rendering of " + name, Limit: LimitBundleBytes, Max: int64(opts.MaxBytes)}
	}
	return Rendered{Manifest: b.buf.Bytes(), Dropped: plan.dropped}, nil
}

// renderFiles renders the chart's templates for the cluster, as helm template does, but
// NOTES.txt; it returns the chart with its dependencies processed.
func renderFiles(ch *chart.Chart, opts RenderOptions) (*chart.Chart, map[string]string, error) {
	caps, err := capabilities(opts.Capabilities)
	if err != nil {
		return nil, nil, err
	}
	if err := checkKubeVersion(ch, caps); err != nil {
		return nil, nil, err
	}
	// Processing dependencies and import-values changes the chart: work on a copy, since
	// a fetched chart is shared.
	c := cloneChart(ch)
	vals, _ := deepCopy(opts.Values).(map[string]any)
	if vals == nil {
		vals = map[string]any{}
	}
	if err := chartutil.ProcessDependencies(c, vals); err != nil {
		return nil, nil, fmt.Errorf("dependencies: %w", err)
	}
	if err := checkSchemas(c); err != nil {
		return nil, nil, err
	}
	top, err := commonutil.ToRenderValuesWithSchemaValidation(c, vals, common.ReleaseOptions{
		Name:      opts.ReleaseName,
		Namespace: opts.Namespace,
		Revision:  max(opts.Revision, 1),
		IsInstall: !opts.IsUpgrade,
		IsUpgrade: opts.IsUpgrade,
	}, caps, false)
	if err != nil {
		return nil, nil, trimmed{err}
	}
	// A zero Engine has no cluster client: lookup returns nothing, as in helm template.
	files, err := engine.Engine{}.Render(c, top)
	if err != nil {
		return nil, nil, err
	}
	for f := range files {
		if strings.HasSuffix(f, "NOTES.txt") {
			delete(files, f)
		}
	}
	return c, files, nil
}

// assemble writes the bundle in apply order: CRDs when asked, pre hooks, the manifests
// (those Helm keeps on uninstall marked to stay), post hooks.
func assemble(c *chart.Chart, plan hookPlan, manifests []releaseutil.Manifest, opts RenderOptions) (*bundle, error) {
	b := &bundle{max: opts.MaxBytes}
	if opts.IncludeCRDs {
		if err := writeCRDs(b, c); err != nil {
			return nil, err
		}
	}
	for _, h := range plan.pre {
		b.add(h.source, h.content)
	}
	for _, m := range manifests {
		if emptyDoc(m) {
			continue
		}
		content := m.Content
		if m.Head != nil && m.Head.Metadata != nil && m.Head.Metadata.Annotations[resourcePolicyAnnotation] == resourcePolicyKeep {
			var err error
			if content, err = keptOnRelease(content); err != nil {
				return nil, fmt.Errorf("%s: %w", m.Name, err)
			}
		}
		b.add(m.Name, content)
	}
	for _, h := range plan.post {
		b.add(h.source, h.content)
	}
	return b, nil
}

func capabilities(c Capabilities) (*common.Capabilities, error) {
	if c.KubeVersion == "" {
		return nil, errors.New("the cluster's Kubernetes version is not known")
	}
	kv, err := common.ParseKubeVersion(c.KubeVersion)
	if err != nil {
		return nil, fmt.Errorf("the cluster's Kubernetes version %q: %w", c.KubeVersion, err)
	}
	return &common.Capabilities{
		KubeVersion: *kv,
		APIVersions: common.VersionSet(slices.Clone(c.APIVersions)),
		HelmVersion: common.DefaultCapabilities.HelmVersion,
	}, nil
}

// checkKubeVersion refuses a chart whose kubeVersion range excludes the cluster.
func checkKubeVersion(ch *chart.Chart, caps *common.Capabilities) error {
	constraint := ch.Metadata.KubeVersion
	if constraint == "" {
		return nil
	}
	if _, err := semver.NewConstraint(constraint); err != nil {
		return fmt.Errorf("the chart's kubeVersion %q is not a semver range: %w", constraint, err)
	}
	if !chartutil.IsCompatibleRange(constraint, caps.KubeVersion.String()) {
		return fmt.Errorf("the chart requires Kubernetes %s, and the cluster runs %s", constraint, caps.KubeVersion.Version)
	}
	return nil
}

// writeCRDs writes the documents of the crds/ files of c and its enabled subcharts, in
// file order.
func writeCRDs(b *bundle, c *chart.Chart) error {
	for _, crd := range c.CRDObjects() {
		docs := releaseutil.SplitManifests(string(crd.File.Data))
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			if isNull(docs[k]) {
				continue
			}
			// Helm never deletes a chart's CRDs: deleting one deletes every resource of
			// its kind.
			doc, err := keptOnRelease(docs[k])
			if err != nil {
				return fmt.Errorf("%s: %w", crd.Filename, err)
			}
			b.add(crd.Filename, doc)
		}
	}
	return nil
}

// Helm's annotation that keeps an object when its release lets go of it.
const (
	resourcePolicyAnnotation = "helm.sh/resource-policy"
	resourcePolicyKeep       = "keep"
)

// keptOnRelease marks a document so that Vidra leaves its object on the cluster, never
// deleting it, when the last owner lets go of it.
func keptOnRelease(doc string) (string, error) {
	node, err := kyaml.Parse(doc)
	if err != nil {
		return "", fmt.Errorf("parse: %w", err)
	}
	if err := node.PipeE(kyaml.SetAnnotation(vidrav1alpha1.PruneAnnotation, vidrav1alpha1.PruneDisabled)); err != nil {
		return "", fmt.Errorf("annotate: %w", err)
	}
	return node.MustString(), nil
}

// LimitBundleBytes names RenderOptions.MaxBytes in a LimitError.
const LimitBundleBytes = "MaxBundleBytes"

// bundle is the manifest being written, within max bytes (none when max ≤ 0). A document
// that would go past max is not written, so the buffer never grows beyond it.
type bundle struct {
	buf  bytes.Buffer
	max  int
	over bool
}

// add writes a document after a "# Source: <path>" comment.
func (b *bundle) add(source, content string) {
	const head = "---\n# Source: "
	content = strings.TrimRight(content, "\n")
	size := len(head) + len(source) + 1 + len(content) + 1
	if b.over || b.max > 0 && b.buf.Len()+size > b.max {
		b.over = true
		return
	}
	b.buf.Grow(size)
	for _, s := range []string{head, source, "\n", content, "\n"} {
		b.buf.WriteString(s)
	}
}

// emptyDoc is a document with nothing but comments (a template's branch not taken).
func emptyDoc(m releaseutil.Manifest) bool {
	if m.Head != nil && (m.Head.Kind != "" || m.Head.Version != "" || m.Head.Metadata != nil) {
		return false
	}
	return isNull(m.Content)
}

func isNull(doc string) bool {
	var v any
	return yaml.Unmarshal([]byte(doc), &v) == nil && v == nil
}

// trimmed is err without the trailing newline Helm's schema errors end with, fit for a
// condition's message.
type trimmed struct{ err error }

func (t trimmed) Error() string { return strings.TrimSpace(t.err.Error()) }

func (t trimmed) Unwrap() error { return t.err }
