package sourcesync

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/fleet/clusterinfo"
	"github.com/vidra-operator/vidra/internal/source/helmrender"
	"github.com/vidra-operator/vidra/internal/source/helmsource"
)

// Helm is the source of HelmSyncs: a chart version, downloaded once however many syncs
// and clusters use it, rendered for each destination with that cluster's version, APIs
// and values.
type Helm struct {
	Secrets Secrets
	Charts  *helmsource.Client
	// Clusters reads what each destination cluster is.
	Clusters *clusterinfo.Reader
	// Hub reads VidraClusters, for their labels.
	Hub client.Reader
	// Timeout bounds one resolve or download.
	Timeout time.Duration
	// MaxBundleBytes bounds a rendering (0: none).
	MaxBundleBytes int
	// Render renders a chart for one cluster: in a bounded child process in the
	// operator (helmrender.Runner.Render); nil renders in this process, which only a
	// caller that trusts every chart should do.
	Render func(ctx context.Context, ch *chart.Chart, opts helmsource.RenderOptions) (helmsource.Rendered, error)
}

// render renders ch with opts as h.Render says.
func (h *Helm) render(ctx context.Context, ch *chart.Chart, opts helmsource.RenderOptions) (helmsource.Rendered, error) {
	if h.Render == nil {
		return helmsource.Render(ch, opts)
	}
	return h.Render(ctx, ch, opts)
}

// helmFetch is what Prepare needs of a resolved chart version.
type helmFetch struct {
	source  helmsource.Source
	version helmsource.Version
}

// defaultValuesKey is the key of a valuesFrom ConfigMap or Secret when it names none.
const defaultValuesKey = "values.yaml"

// Resolve asks the repository which version the HelmSync names, with its own
// credentials, reading the repository's index only when it changed.
func (h *Helm) Resolve(ctx context.Context, obj Object) (Revision, error) {
	hs := obj.(*vidrav1alpha1.HelmSync)
	spec := hs.Spec.Source
	username, password, ca, err := h.Secrets.basicAuth(ctx, hs, spec.SecretRef, spec.CASecretRef, spec.RepoURL)
	if err != nil {
		return Revision{}, err
	}
	src := helmsource.Source{
		RepoURL: spec.RepoURL, Chart: spec.Chart, Version: spec.Version,
		Username: username, Password: password, CA: ca, InsecureHTTP: spec.InsecureAllowHTTP,
	}
	ctx, cancel := bounded(ctx, h.Timeout)
	defer cancel()
	v, err := h.Charts.Resolve(ctx, src)
	if err != nil {
		return Revision{}, helmFailure(err)
	}
	return Revision{
		Name:        v.Version,
		Key:         fmt.Sprintf("helm\x00%s\x00%s\x00%s\x00%s", spec.RepoURL, spec.Chart, v.Version, v.Digest),
		Credentials: h.Charts.Scope(src),
		Digest:      v.Digest,
		Fetch:       helmFetch{source: src, version: v},
	}, nil
}

// Namespace is the HelmSync's release namespace: where objects that name none go.
func (h *Helm) Namespace(obj Object) string {
	hs := obj.(*vidrav1alpha1.HelmSync)
	return cmp.Or(hs.Spec.Release.Namespace, hs.Spec.Destination.Namespace, "default")
}

// Prepare reads what the destination cluster is and the values it gets; the chart is
// downloaded and rendered only when Run is called.
func (h *Helm) Prepare(ctx context.Context, obj Object, rev Revision, target fanout.Target) (Build, error) {
	hs := obj.(*vidrav1alpha1.HelmSync)
	f := rev.Fetch.(helmFetch)
	info, err := h.Clusters.Read(ctx, target.Destination())
	if err != nil {
		return Build{}, &syncs.Failure{Reason: vidrav1alpha1.ReasonClusterNotFound, Transient: true, Err: err}
	}
	labels, err := clusterLabels(ctx, h.Hub, info.Name)
	if err != nil {
		return Build{}, err
	}
	unsubstituted, values, err := h.values(ctx, hs, helmsource.Cluster{Name: info.Name, Labels: labels})
	if err != nil {
		return Build{}, err
	}
	opts := helmsource.RenderOptions{
		ReleaseName: cmp.Or(hs.Spec.Release.Name, hs.Name),
		Namespace:   h.Namespace(obj),
		Values:      values,
		Capabilities: helmsource.Capabilities{
			KubeVersion: info.KubeVersion, APIVersions: info.APIVersions,
		},
		IncludeCRDs: hs.Spec.IncludeCRDs == nil || *hs.Spec.IncludeCRDs,
		MaxBytes:    h.MaxBundleBytes,
	}
	key, err := renderKey(rev.Key, opts)
	if err != nil {
		return Build{}, err
	}
	content, err := renderKey(rev.Key, helmsource.RenderOptions{
		ReleaseName: opts.ReleaseName, Namespace: opts.Namespace, Values: unsubstituted, IncludeCRDs: opts.IncludeCRDs,
	})
	if err != nil {
		return Build{}, err
	}
	return Build{Key: key, Content: content, Scope: rev.Credentials, Upgrades: true, Run: func(ctx context.Context, upgrade bool) ([]byte, error) {
		fctx, cancel := bounded(ctx, h.Timeout)
		defer cancel()
		ch, err := h.Charts.Fetch(fctx, f.source, f.version)
		if err != nil {
			return nil, helmFailure(err)
		}
		opts.IsUpgrade = upgrade
		out, err := h.render(ctx, ch, opts)
		return renderFailure(f.version, out, err)
	}}, nil
}

// renderTimeoutFor is how long a chart whose rendering ran past its deadline is not
// rendered again: a loaded machine may have slowed it.
const renderTimeoutFor = 10 * time.Minute

// renderFailure says what a rendering's error means for the sync, or gives its bundle.
func renderFailure(v helmsource.Version, out helmsource.Rendered, err error) ([]byte, error) {
	var limit *helmsource.LimitError
	var bound *helmrender.LimitError
	var process *helmrender.ProcessError
	switch {
	case errors.As(err, &bound) && bound.Bound == helmrender.BoundTime:
		return nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonLimitExceeded, RetryAfter: renderTimeoutFor,
			Err: fmt.Errorf("%w; it is tried again in %s", err, renderTimeoutFor)}
	case errors.As(err, &bound):
		// A chart over the render's memory stays over it: it is not rendered again until
		// the sync or the chart version changes.
		return nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonLimitExceeded, Stalled: true, Err: err}
	case errors.As(err, &process):
		return nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonBuildFailed, Transient: true, Err: err}
	case errors.As(err, &limit):
		return nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonLimitExceeded, Stalled: true, Err: fmt.Errorf("%w; the operator's --source-max-bundle-bytes sets the bound", err)}
	case err != nil:
		return nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonBuildFailed, Err: fmt.Errorf("render %s %s: %w", v.Chart, v.Version, err)}
	}
	return out.Manifest, nil
}

// renderKey identifies what a rendering is made of: the chart version, the release, the
// values and the cluster's version and APIs.
func renderKey(revision string, opts helmsource.RenderOptions) (string, error) {
	values, err := json.Marshal(opts.Values) // maps marshal with sorted keys
	if err != nil {
		return "", &syncs.Failure{Reason: vidrav1alpha1.ReasonBuildFailed, Err: fmt.Errorf("values: %w", err)}
	}
	h := sha256.New()
	for _, part := range []string{revision, opts.ReleaseName, opts.Namespace, fmt.Sprint(opts.IncludeCRDs), string(values),
		opts.Capabilities.KubeVersion, strings.Join(opts.Capabilities.APIVersions, ",")} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// clusterLabels are the labels of the cluster's VidraCluster (none for a cluster without
// one, such as the hub).
func clusterLabels(ctx context.Context, hub client.Reader, name string) (map[string]string, error) {
	vc := &vidrav1alpha1.VidraCluster{}
	err := hub.Get(ctx, client.ObjectKey{Name: name}, vc)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: fmt.Errorf("get VidraCluster %s: %w", name, err)}
	}
	return vc.Labels, nil
}

// values merges the HelmSync's valuesFrom in order, then its values (merged), and puts
// the cluster's name and labels in (values).
func (h *Helm) values(ctx context.Context, hs *vidrav1alpha1.HelmSync, cluster helmsource.Cluster) (merged, values map[string]any, err error) {
	layers := make([]map[string]any, 0, len(hs.Spec.ValuesFrom)+1)
	for i, ref := range hs.Spec.ValuesFrom {
		doc, err := h.valuesDocument(ctx, hs, i, ref)
		if err != nil {
			return nil, nil, err
		}
		layer, err := helmsource.ParseValues(doc)
		if err != nil {
			return nil, nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true,
				Err: fmt.Errorf("valuesFrom[%d]: %s %s/%s key %s: %w", i, ref.Kind, h.Secrets.Namespace, ref.Name, cmp.Or(ref.Key, defaultValuesKey), err)}
		}
		layers = append(layers, layer)
	}
	if hs.Spec.Values != nil && len(hs.Spec.Values.Raw) > 0 {
		layer, err := helmsource.ParseValues(hs.Spec.Values.Raw)
		if err != nil {
			return nil, nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true, Err: fmt.Errorf("values: %w", err)}
		}
		layers = append(layers, layer)
	}
	merged = helmsource.MergeValues(layers...)
	if values, err = helmsource.ClusterValues(merged, cluster); err != nil {
		return nil, nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonBuildFailed, Err: fmt.Errorf("values: %w", err)}
	}
	return merged, values, nil
}

// valuesDocument reads the values document a valuesFrom entry names, in the operator's
// namespace only.
func (h *Helm) valuesDocument(ctx context.Context, hs *vidrav1alpha1.HelmSync, i int, ref vidrav1alpha1.ValuesReference) ([]byte, error) {
	key := cmp.Or(ref.Key, defaultValuesKey)
	where := fmt.Sprintf("valuesFrom[%d]: %s %s/%s", i, ref.Kind, h.Secrets.Namespace, ref.Name)
	var data map[string][]byte
	var err error
	if ref.Kind == "Secret" {
		data, err = h.Secrets.data(ctx, hs, fmt.Sprintf("spec.valuesFrom[%d]", i), &vidrav1alpha1.LocalSecretReference{Name: ref.Name}, "")
		if err != nil {
			return nil, err
		}
	} else {
		cm, found, err := h.Secrets.configMap(ctx, hs, fmt.Sprintf("spec.valuesFrom[%d]", i), ref.Name)
		switch {
		case err != nil:
			return nil, err
		case !found:
			return nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true, Err: fmt.Errorf("%s not found", where)}
		}
		data = map[string][]byte{}
		for k, v := range cm {
			data[k] = []byte(v)
		}
	}
	doc, ok := data[key]
	if !ok {
		return nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true, Err: fmt.Errorf("%s has no key %s", where, key)}
	}
	return doc, nil
}

// helmFailure says what a repository or registry error means for the sync.
func helmFailure(err error) error {
	var invalid *helmsource.InvalidError
	var notFound *helmsource.NotFoundError
	var limit *helmsource.LimitError
	switch {
	case errors.As(err, &invalid):
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true, Err: err}
	case helmsource.IsAuthError(err):
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonAuthenticationFailed, Err: err}
	case errors.As(err, &notFound):
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonRefNotFound, Err: err}
	case errors.As(err, &limit):
		if hint, ok := limitHints[limit.Limit]; ok {
			err = fmt.Errorf("%w; %s", err, hint)
		}
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonLimitExceeded, Stalled: true, Err: err}
	}
	return &syncs.Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: err}
}

// limitHints say what sets each bound of a chart's fetch.
var limitHints = map[string]string{
	"MaxIndexBytes":    "the operator's --helm-max-index-bytes sets the bound",
	"MaxChartBytes":    "the operator's --helm-max-chart-bytes sets the bound",
	"MaxArtifactBytes": "the operator's --oci-max-artifact-bytes sets the bound",
	"MaxExpandedBytes": "a chart may expand to 32 MiB at most, subcharts included",
}
