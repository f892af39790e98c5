package v1alpha1_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

func validGitSync() *vidrav1alpha1.GitSync {
	return &vidrav1alpha1.GitSync{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "validation-"},
		Spec:       vidrav1alpha1.GitSyncSpec{Source: vidrav1alpha1.GitSource{URL: "https://git.example.com/org/repo.git"}},
	}
}

func validOCISync() *vidrav1alpha1.OCISync {
	return &vidrav1alpha1.OCISync{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "validation-"},
		Spec:       vidrav1alpha1.OCISyncSpec{Source: vidrav1alpha1.OCISource{URL: "oci://ghcr.io/org/manifests"}},
	}
}

// The API server checks a GitSync's and an OCISync's source and destination, naming the
// field; the forms the documentation shows are accepted and defaulted.
func TestSourceSyncsAreValidatedByTheAPIServer(t *testing.T) {
	invalid := []struct {
		name      string
		object    func() client.Object
		field     string
		inMessage string
	}{
		{"git URL of another scheme", func() client.Object {
			s := validGitSync()
			s.Spec.Source.URL = "ftp://git.example.com/repo"
			return s
		}, "spec.source.url", "https://, ssh://"},
		{"git URL with a query", func() client.Object {
			s := validGitSync()
			s.Spec.Source.URL = "https://git.example.com/org/repo.git?ref=x"
			return s
		}, "spec.source.url", "no query (?), fragment (#) or backslash"},
		{"git URL with a fragment", func() client.Object {
			s := validGitSync()
			s.Spec.Source.URL = "https://git.example.com/org/repo.git#main"
			return s
		}, "spec.source.url", "no query (?), fragment (#) or backslash"},
		{"git URL with a backslash", func() client.Object {
			s := validGitSync()
			s.Spec.Source.URL = "https://git.example.com\\@other.example/org/repo.git"
			return s
		}, "spec.source.url", "no query (?), fragment (#) or backslash"},
		{"two git refs", func() client.Object {
			s := validGitSync()
			s.Spec.Source.Ref = &vidrav1alpha1.GitRef{Branch: "main", Tag: "v1"}
			return s
		}, "spec.source.ref", "at most one of branch, tag, semver, commit and name"},
		{"short commit", func() client.Object {
			s := validGitSync()
			s.Spec.Source.Ref = &vidrav1alpha1.GitRef{Commit: "abc123"}
			return s
		}, "spec.source.ref.commit", ""},
		{"a path that steps out", func() client.Object {
			s := validGitSync()
			s.Spec.Source.Path = "deploy/../../etc"
			return s
		}, "spec.source.path", "no '..'"},
		{"cluster and clusterSelector", func() client.Object {
			s := validGitSync()
			s.Spec.Destination = vidrav1alpha1.SyncDestination{Destination: vidrav1alpha1.Destination{Cluster: "edge-1"}, ClusterSelector: &metav1.LabelSelector{}}
			return s
		}, "spec.destination", "at most one of cluster, server and clusterSelector"},
		{"interval under a second", func() client.Object {
			s := validGitSync()
			s.Spec.Interval = &metav1.Duration{Duration: 1}
			return s
		}, "spec.interval", "at least 1s"},
		{"a variable whose name Flux would refuse", func() client.Object {
			s := validGitSync()
			s.Spec.PostBuild = &vidrav1alpha1.PostBuild{Substitute: map[string]string{"cluster-env": "prod"}}
			return s
		}, "spec.postBuild.substitute", "letters, digits and underscores"},
		{"variables from a kind that holds none", func() client.Object {
			s := validOCISync()
			s.Spec.PostBuild = &vidrav1alpha1.PostBuild{SubstituteFrom: []vidrav1alpha1.SubstituteReference{{Kind: "Deployment", Name: "x"}}}
			return s
		}, "spec.postBuild.substituteFrom[0].kind", ""},
		{"a timeout under a second", func() client.Object {
			s := validGitSync()
			s.Spec.Timeout = &metav1.Duration{Duration: 1}
			return s
		}, "spec.timeout", "at least 1s"},
		{"a health check without current", func() client.Object {
			s := validGitSync()
			s.Spec.HealthCheckExprs = []vidrav1alpha1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget"}}
			return s
		}, "spec.healthCheckExprs[0].current", ""},
		{"https OCI URL", func() client.Object {
			s := validOCISync()
			s.Spec.Source.URL = "https://ghcr.io/org/manifests"
			return s
		}, "spec.source.url", "oci://"},
		{"two OCI refs", func() client.Object {
			s := validOCISync()
			s.Spec.Source.Ref = &vidrav1alpha1.OCIRef{Tag: "latest", Digest: "sha256:" + strings.Repeat("a", 64)}
			return s
		}, "spec.source.ref", "at most one of tag, semver and digest"},
		{"OCI digest of another algorithm", func() client.Object {
			s := validOCISync()
			s.Spec.Source.Ref = &vidrav1alpha1.OCIRef{Digest: "md5:abc"}
			return s
		}, "spec.source.ref.digest", ""},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			err := hub.Client.Create(context.Background(), tt.object(), client.DryRunAll)
			var status *apierrors.StatusError
			if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.ErrStatus.Details == nil {
				t.Fatalf("create = %v, want an Invalid error naming %s", err, tt.field)
			}
			for _, cause := range status.ErrStatus.Details.Causes {
				if cause.Field == tt.field && strings.Contains(cause.Message, tt.inMessage) {
					return
				}
			}
			t.Errorf("error %q does not name field %s with %q", err, tt.field, tt.inMessage)
		})
	}

	gs := validGitSync()
	gs.Spec.Source.Ref = &vidrav1alpha1.GitRef{SemVer: ">=1.0.0 <2.0.0"}
	gs.Spec.Source.Path = "./deploy/prod"
	gs.Spec.Destination = vidrav1alpha1.SyncDestination{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}
	if err := hub.Client.Create(context.Background(), gs, client.DryRunAll); err != nil {
		t.Fatalf("a documented GitSync is refused: %v", err)
	}
	if gs.Spec.Interval == nil || gs.Spec.Interval.Duration.String() != "1m0s" {
		t.Errorf("interval defaulted to %v, want 1m", gs.Spec.Interval)
	}
	os := validOCISync()
	os.Spec.Source.Ref = &vidrav1alpha1.OCIRef{Digest: "sha256:" + strings.Repeat("a", 64)}
	os.Spec.Destination = vidrav1alpha1.SyncDestination{Destination: vidrav1alpha1.Destination{Server: "https://10.0.0.1:6443"}}
	if err := hub.Client.Create(context.Background(), os, client.DryRunAll); err != nil {
		t.Fatalf("a documented OCISync is refused: %v", err)
	}
}
