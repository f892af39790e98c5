package sourcesync

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"filippo.io/age"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/fleet/credentials"
	"github.com/vidra-operator/vidra/internal/source/postbuild"
)

// PostBuild does what a GitSync's or an OCISync's spec.decryption and spec.postBuild
// do to its bundle once built: it reads the age identities the sync decrypts with, the
// sync's variables, from its spec and from the ConfigMaps and Secrets it names, and each
// destination cluster's name and labels.
type PostBuild struct {
	Secrets Secrets
	// Hub reads VidraClusters, for their labels.
	Hub client.Reader
}

// postBuilder is a sync of a kind that has a spec.postBuild and a spec.decryption.
type postBuilder interface {
	PostBuildSpec() *vidrav1alpha1.PostBuild
	DecryptionSpec() *vidrav1alpha1.Decryption
}

// renderer is how obj's bundle is built for each destination: the kind's Renderer;
// for a sync with a spec.postBuild or a spec.decryption, its source's one bundle
// decrypted and substituted for each; else nil, one bundle for all.
func (k *Kind) renderer(obj Object) Renderer {
	if k.Renderer != nil {
		return k.Renderer
	}
	pb, ok := obj.(postBuilder)
	if !ok || k.PostBuild == nil || (pb.PostBuildSpec() == nil && pb.DecryptionSpec() == nil) {
		return nil
	}
	return &substitution{kind: k, spec: pb.PostBuildSpec(), decryption: pb.DecryptionSpec()}
}

// substitution builds a sync's bundle for each destination: the source's one bundle,
// fetched and built once per revision as without postBuild, decrypted, with the sync's
// variables and the cluster's put in. Destinations whose variables are equal share one
// build. It serves one pass of one sync.
type substitution struct {
	kind       *Kind
	spec       *vidrav1alpha1.PostBuild
	decryption *vidrav1alpha1.Decryption
	// base is the digest of the source's bundle; refs, the cluster variables it names.
	base string
	refs postbuild.Refs
	// vars are the sync's variables; varsKey identifies them.
	vars, shown map[string]string
	varsKey     string
	// keys are the identities spec.decryption names; keysKey identifies them.
	keys    []age.Identity
	keysKey string
	// template is the base decrypted and parsed, once a destination needs a build (plain,
	// the base decrypted, without a spec.postBuild).
	template *postbuild.Template
	plain    []byte
}

var _ Renderer = (*substitution)(nil)

// Resolve asks the source which revision the sync names, gets its bundle (built once per
// revision, as without postBuild), reads the sync's identities and variables, and
// decrypts the bundle once per revision to know what it names: what every destination's
// build is made of, beside the cluster's own variables.
func (s *substitution) Resolve(ctx context.Context, obj Object) (Revision, error) {
	rev, err := s.kind.Source.Resolve(ctx, obj)
	if err != nil {
		return Revision{}, err
	}
	if s.base, _, _, err = s.kind.bundle(ctx, obj, rev); err != nil {
		return Revision{}, err
	}
	if s.decryption != nil {
		if s.keys, s.keysKey, err = s.kind.PostBuild.ageKeys(ctx, obj, s.decryption); err != nil {
			return Revision{}, err
		}
	}
	if s.spec != nil {
		if s.vars, s.shown, err = s.kind.PostBuild.variables(ctx, obj, s.spec); err != nil {
			return Revision{}, err
		}
	}
	s.varsKey = variablesKey(s.vars)
	if s.refs, err = s.references(ctx, rev.Name); err != nil {
		return Revision{}, err
	}
	// status.source.digest is the source's bundle, as without postBuild: encrypted.
	rev.Digest = s.base
	return rev, nil
}

// Namespace is where objects that name none go: the destination's.
func (s *substitution) Namespace(obj Object) string {
	return obj.Options().Destination.Namespace
}

// mode says what is done to the base: builds of different modes never share.
func (s *substitution) mode() string {
	return fmt.Sprintf("postbuild=%t decrypt=%t", s.spec != nil, s.decryption != nil)
}

// Prepare says what the destination's build is made of: the bundle, the sync's variables
// and those of the cluster's that the bundle names. A decrypted build is sealed under an
// address of these, never a hash of what it holds; the identities scope it, so that no
// sync is handed what another's decrypted.
func (s *substitution) Prepare(ctx context.Context, _ Object, rev Revision, target fanout.Target) (Build, error) {
	cluster := postbuild.Cluster{Name: cmp.Or(target.Destination().Cluster, target.Name())}
	if len(s.refs.Labels) > 0 && target.Destination().Cluster != "" {
		labels, err := clusterLabels(ctx, s.kind.PostBuild.Hub, cluster.Name)
		if err != nil {
			return Build{}, err
		}
		cluster.Labels = labels
	}
	b := Build{
		Key:     digestOf("postbuild", s.mode(), rev.Key, s.base, s.varsKey, s.refs.Key(cluster)),
		Content: digestOf("postbuild", s.mode(), s.base, s.varsKey),
		Scope:   rev.Credentials + "\x00" + s.keysKey,
		Run: func(ctx context.Context, _ bool) ([]byte, error) {
			if err := s.parse(ctx, rev.Name); err != nil {
				return nil, err
			}
			if s.template == nil {
				return s.plain, nil
			}
			out, err := s.template.Substitute(s.vars, cluster)
			if err != nil {
				return nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonBuildFailed, Err: fmt.Errorf("postBuild: %w", err)}
			}
			return out, nil
		},
	}
	if s.decryption != nil {
		b.Sealed = digestOf("decrypted", s.mode(), s.base, s.varsKey, s.refs.Key(cluster))
	}
	if s.spec != nil {
		b.Variables = shownWith(s.shown, s.refs, cluster)
	}
	return b, nil
}

// references are the cluster variables the base names: remembered per bundle (and
// identities), so that a pass that builds nothing new neither decrypts nor reads it.
func (s *substitution) references(ctx context.Context, revision string) (postbuild.Refs, error) {
	memo := s.refsMemo()
	if known, ok := s.kind.builds().Get(memo); ok {
		if f, failed := known.(failedBuild); failed {
			return postbuild.Refs{}, f.err
		}
		return known.(postbuild.Refs), nil
	}
	if err := s.parse(ctx, revision); err != nil {
		return postbuild.Refs{}, err
	}
	var refs postbuild.Refs
	if s.template != nil {
		refs = s.template.Refs()
	}
	s.kind.builds().Add(memo, refs)
	return refs, nil
}

// refsMemo is the key under which the kind remembers the base's references, or why it
// does not decrypt or parse.
func (s *substitution) refsMemo() string {
	return "postbuild-refs\x00" + s.mode() + "\x00" + s.base + "\x00" + s.keysKey
}

// parse reads the base from the content store, decrypts and parses it, once per pass.
func (s *substitution) parse(ctx context.Context, revision string) error {
	if s.template != nil || s.plain != nil {
		return nil
	}
	data, err := s.kind.Content.Get(ctx, s.base)
	if err != nil {
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: fmt.Errorf("read bundle %s: %w", s.base, err)}
	}
	if s.decryption != nil {
		if data, err = s.decrypt(data, revision); err != nil {
			s.kind.builds().Add(s.refsMemo(), failedBuild{err: err})
			return err
		}
	}
	if s.spec == nil {
		s.plain = data
		return nil
	}
	tpl, err := postbuild.Parse(data)
	if err != nil {
		f := &syncs.Failure{Reason: vidrav1alpha1.ReasonBuildFailed, Err: fmt.Errorf("postBuild: %s: %w", revision, err)}
		s.kind.builds().Add(s.refsMemo(), failedBuild{err: f})
		return f
	}
	s.template = tpl
	return nil
}

// variables are the sync's: those of substituteFrom in order, then substitute's, each
// later one winning, as Flux.
// shown is what people are shown of them: a Secret's value is not.
func (p *PostBuild) variables(ctx context.Context, obj Object, spec *vidrav1alpha1.PostBuild) (vars, shown map[string]string, err error) {
	vars, shown = map[string]string{}, map[string]string{}
	for i, ref := range spec.SubstituteFrom {
		field := fmt.Sprintf("spec.postBuild.substituteFrom[%d]", i)
		data, err := p.referenced(ctx, obj, field, ref)
		if err != nil {
			return nil, nil, err
		}
		for _, name := range slices.Sorted(maps.Keys(data)) {
			if !postbuild.ValidName(name) {
				return nil, nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true,
					Err: fmt.Errorf("%s: %s %s/%s: key %q is not a variable's name (letters, digits and underscores, not beginning with a digit)", field, ref.Kind, p.Secrets.Namespace, ref.Name, name)}
			}
			vars[name], shown[name] = data[name], data[name]
			if ref.Kind == "Secret" {
				shown[name] = "<Secret " + ref.Name + ">"
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Substitute)) {
		if !postbuild.ValidName(name) {
			return nil, nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true,
				Err: fmt.Errorf("spec.postBuild.substitute: %q is not a variable's name (letters, digits and underscores, not beginning with a digit)", name)}
		}
		vars[name], shown[name] = spec.Substitute[name], spec.Substitute[name]
	}
	return vars, shown, nil
}

// shownWith is what a destination's bundle is built with, for people
// (BundleVariablesAnnotation): the sync's variables as shown, and the cluster's that the
// bundle names.
func shownWith(shown map[string]string, refs postbuild.Refs, cluster postbuild.Cluster) string {
	out := maps.Clone(shown)
	if refs.Name {
		out["cluster.name"] = cluster.Name
	}
	for _, key := range refs.Labels {
		if v, ok := cluster.Labels[key]; ok {
			out["cluster.labels."+key] = v
		}
	}
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)                // "<Secret NAME>" as written
	if err := enc.Encode(out); err != nil { // keys sorted
		return ""
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// referenced is the data of the ConfigMap or Secret ref names, in the operator's
// namespace, once whoever last changed the sync may read it (a Secret: use it); none
// when it does not exist and ref is optional.
func (p *PostBuild) referenced(ctx context.Context, obj Object, field string, ref vidrav1alpha1.SubstituteReference) (map[string]string, error) {
	out := map[string]string{}
	if ref.Kind == "Secret" {
		data, err := p.Secrets.data(ctx, obj, field, &vidrav1alpha1.LocalSecretReference{Name: ref.Name}, "")
		var refusal *credentials.Refusal
		if errors.As(err, &refusal) && refusal.Missing && ref.Optional {
			return out, nil
		}
		for k, v := range data {
			out[k] = string(v)
		}
		return out, err
	}
	cm, found, err := p.Secrets.configMap(ctx, obj, field, ref.Name)
	switch {
	case err != nil:
		return nil, err
	case !found && ref.Optional:
		return out, nil
	case !found:
		return nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true,
			Err: fmt.Errorf("%s: ConfigMap %s/%s not found (mark it optional: true if it may be missing)", field, p.Secrets.Namespace, ref.Name)}
	}
	maps.Copy(out, cm)
	return out, nil
}

// variablesKey identifies a set of variables.
func variablesKey(vars map[string]string) string {
	parts := make([]string, 0, 2*len(vars))
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		parts = append(parts, name, vars[name])
	}
	return digestOf(parts...)
}

// digestOf is the sha256 of parts, each ended by a NUL.
func digestOf(parts ...string) string {
	h := sha256.New()
	for _, part := range parts {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
