package v1alpha1_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

func validSync() *vidrav1alpha1.InfrahubSync {
	return &vidrav1alpha1.InfrahubSync{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "validation-"},
		Spec: vidrav1alpha1.InfrahubSyncSpec{
			Source: vidrav1alpha1.InfrahubSyncSource{
				InfrahubAPIURL: "https://infrahub.example.com",
				ArtefactName:   "manifests",
			},
		},
	}
}

func validResource() *vidrav1alpha1.VidraResource {
	return &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "validation-"},
		Spec: vidrav1alpha1.VidraResourceSpec{
			Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
		},
	}
}

func ptr[T any](v T) *T { return &v }

// progressiveSync is a valid sync that rolls out in two waves.
func progressiveSync() *vidrav1alpha1.InfrahubSync {
	s := validSync()
	s.Spec.Rollout = &vidrav1alpha1.RolloutSpec{
		Strategy: vidrav1alpha1.RolloutProgressive,
		Waves: []vidrav1alpha1.RolloutWave{
			{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}, PauseAfter: &metav1.Duration{Duration: 5 * time.Minute}},
			{Name: "prod", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "prod"}}},
		},
		MaxUnavailable: ptr(intstr.FromString("25%")),
		HealthTimeout:  &metav1.Duration{Duration: 10 * time.Minute},
		OnFailure:      vidrav1alpha1.RolloutFailureRollback,
	}
	return s
}

// TestInvalidObjectsAreRejectedNamingTheField: whatever can be checked without the
// operator is checked by the API server, and its error names the offending field.
func TestInvalidObjectsAreRejectedNamingTheField(t *testing.T) {
	tests := []struct {
		name      string
		object    func() client.Object
		field     string
		inMessage string
	}{
		{"ftp infrahubAPIURL", func() client.Object {
			s := validSync()
			s.Spec.Source.InfrahubAPIURL = "ftp://infrahub.example.com"
			return s
		}, "spec.source.infrahubAPIURL", "must be an http or https URL"},
		{"infrahubAPIURL without host", func() client.Object {
			s := validSync()
			s.Spec.Source.InfrahubAPIURL = "https://"
			return s
		}, "spec.source.infrahubAPIURL", "must be an http or https URL"},
		{"missing infrahubAPIURL", func() client.Object {
			s := validSync()
			s.Spec.Source.InfrahubAPIURL = ""
			return s
		}, "spec.source.infrahubAPIURL", ""},
		{"missing artefactName", func() client.Object {
			s := validSync()
			s.Spec.Source.ArtefactName = ""
			return s
		}, "spec.source.artefactName", ""},
		{"targetDate neither RFC 3339 nor relative", func() client.Object {
			s := validSync()
			s.Spec.Source.TargetDate = "yesterday"
			return s
		}, "spec.source.targetDate", "RFC 3339"},
		{"targetDate relative without now", func() client.Object {
			s := validSync()
			s.Spec.Source.TargetDate = "-2h"
			return s
		}, "spec.source.targetDate", "now-2h"},
		{"targetDate with an impossible month", func() client.Object {
			s := validSync()
			s.Spec.Source.TargetDate = "2025-13-01T00:00:00Z"
			return s
		}, "spec.source.targetDate", "RFC 3339"},
		{"interval below a second", func() client.Object {
			s := validSync()
			s.Spec.Interval = &metav1.Duration{Duration: 1}
			return s
		}, "spec.interval", "at least 1s"},
		{"sync with cluster and server", func() client.Object {
			s := validSync()
			s.Spec.Destination.Cluster = "edge-1"
			s.Spec.Destination.Server = "https://edge-1.example.com:6443"
			return s
		}, "spec.destination", "at most one of cluster, server, clusterSelector and clusterFromTarget"},
		{"sync with cluster and clusterSelector", func() client.Object {
			s := validSync()
			s.Spec.Destination.Cluster = "edge-1"
			s.Spec.Destination.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"site": "a"}}
			return s
		}, "spec.destination", "at most one of cluster, server, clusterSelector and clusterFromTarget"},
		{"sync with clusterSelector and clusterFromTarget", func() client.Object {
			s := validSync()
			s.Spec.Destination.ClusterFromTarget = true
			s.Spec.Destination.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"site": "a"}}
			return s
		}, "spec.destination", "at most one of cluster, server, clusterSelector and clusterFromTarget"},
		{"sync named longer than a label value", func() client.Object {
			s := validSync()
			s.GenerateName = ""
			s.Name = strings.Repeat("a", 64)
			return s
		}, "<nil>", "at most 63 characters"},
		{"resource with cluster and server", func() client.Object {
			r := validResource()
			r.Spec.Destination.Cluster = "edge-1"
			r.Spec.Destination.Server = "https://edge-1.example.com:6443"
			return r
		}, "spec.destination.cluster", "mutually exclusive"},
		{"ftp server", func() client.Object {
			r := validResource()
			r.Spec.Destination.Server = "ftp://edge-1.example.com"
			return r
		}, "spec.destination.server", "must be an http or https URL"},
		{"cluster name not a DNS label", func() client.Object {
			r := validResource()
			r.Spec.Destination.Cluster = "Edge_1"
			return r
		}, "spec.destination.cluster", ""},
		{"maxUnavailable zero", func() client.Object {
			r := validResource()
			r.Spec.VMRollout = &vidrav1alpha1.VMRolloutSpec{MaxUnavailable: ptr(intstr.FromInt32(0))}
			return r
		}, "spec.vmRollout.maxUnavailable", "at least 1 or a percentage"},
		{"maxUnavailable over 100%", func() client.Object {
			r := validResource()
			r.Spec.VMRollout = &vidrav1alpha1.VMRolloutSpec{MaxUnavailable: ptr(intstr.FromString("150%"))}
			return r
		}, "spec.vmRollout.maxUnavailable", "at least 1 or a percentage"},
		{"maxUnavailable a word", func() client.Object {
			r := validResource()
			r.Spec.VMRollout = &vidrav1alpha1.VMRolloutSpec{MaxUnavailable: ptr(intstr.FromString("half"))}
			return r
		}, "spec.vmRollout.maxUnavailable", "at least 1 or a percentage"},
		{"unknown rollout strategy", func() client.Object {
			r := validResource()
			r.Spec.VMRollout = &vidrav1alpha1.VMRolloutSpec{Strategy: "Canary"}
			return r
		}, "spec.vmRollout.strategy", "Unsupported value"},
		{"negative readyTimeout", func() client.Object {
			r := validResource()
			r.Spec.VMRollout = &vidrav1alpha1.VMRolloutSpec{ReadyTimeout: &metav1.Duration{Duration: -1}}
			return r
		}, "spec.vmRollout.readyTimeout", "positive duration"},
		{"sync template with an unknown adoptExisting", func() client.Object {
			s := validSync()
			s.Spec.Template = &vidrav1alpha1.VidraResourceTemplate{AdoptExisting: "Sometimes"}
			return s
		}, "spec.template.adoptExisting", "Unsupported value"},
		{"unknown adoptExisting", func() client.Object {
			r := validResource()
			r.Spec.AdoptExisting = "Sometimes"
			return r
		}, "spec.adoptExisting", "Unsupported value"},
		{"a wave named as the implicit last wave", func() client.Object {
			s := progressiveSync()
			s.Spec.Rollout.Waves[1].Name = "remaining"
			return s
		}, "spec.rollout.waves", "implicit last wave"},
		{"rollout maxUnavailable 0", func() client.Object {
			s := progressiveSync()
			s.Spec.Rollout.MaxUnavailable = ptr(intstr.FromInt32(0))
			return s
		}, "spec.rollout.maxUnavailable", "at least 1"},
		{"rollout healthTimeout of zero", func() client.Object {
			s := progressiveSync()
			s.Spec.Rollout.HealthTimeout = &metav1.Duration{}
			return s
		}, "spec.rollout.healthTimeout", "positive duration"},
		{"unknown rollout onFailure", func() client.Object {
			s := progressiveSync()
			s.Spec.Rollout.OnFailure = "Retry"
			return s
		}, "spec.rollout.onFailure", "Unsupported value"},
		{"pending content both inline and stored", func() client.Object {
			r := validResource()
			r.Spec.Preview = &vidrav1alpha1.PendingContent{Manifest: r.Spec.Manifest, Content: &vidrav1alpha1.ContentReference{Digest: "sha256:" + strings.Repeat("a", 64)}}
			return r
		}, "spec.preview", "not both"},
		{"historyLimit over 100", func() client.Object {
			r := validResource()
			r.Spec.HistoryLimit = ptr[int32](101)
			return r
		}, "spec.historyLimit", "less than or equal to 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := hub.Client.Create(context.Background(), tt.object(), client.DryRunAll)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create = %v, want an Invalid error naming %s", err, tt.field)
			}
			var status *apierrors.StatusError
			if !errors.As(err, &status) || status.ErrStatus.Details == nil {
				t.Fatalf("error %v carries no field details", err)
			}
			for _, cause := range status.ErrStatus.Details.Causes {
				if cause.Field == tt.field && strings.Contains(cause.Message, tt.inMessage) {
					t.Logf("rejected: %v", err)
					return
				}
			}
			t.Errorf("error %q does not name field %s with %q", err, tt.field, tt.inMessage)
		})
	}
}

// TestValidObjectsAreAccepted: the forms the documentation promises are all accepted.
func TestValidObjectsAreAccepted(t *testing.T) {
	tests := []struct {
		name   string
		object func() client.Object
	}{
		{"targetDate RFC 3339 UTC", func() client.Object {
			s := validSync()
			s.Spec.Source.TargetDate = "2025-01-01T00:00:00Z"
			return s
		}},
		{"targetDate RFC 3339 with offset and fraction", func() client.Object {
			s := validSync()
			s.Spec.Source.TargetDate = "2025-06-30T23:59:59.123+02:00"
			return s
		}},
		{"targetDate now-2h", func() client.Object {
			s := validSync()
			s.Spec.Source.TargetDate = "now-2h"
			return s
		}},
		{"targetDate now-30m", func() client.Object {
			s := validSync()
			s.Spec.Source.TargetDate = "now-30m"
			return s
		}},
		{"targetDate now-1d", func() client.Object {
			s := validSync()
			s.Spec.Source.TargetDate = "now-1d"
			return s
		}},
		{"plain http Infrahub (refused later unless insecureAllowHTTP)", func() client.Object {
			s := validSync()
			s.Spec.Source.InfrahubAPIURL = "http://infrahub:8000"
			return s
		}},
		{"sync with a VidraResource template", func() client.Object {
			s := validSync()
			s.Spec.Template = &vidrav1alpha1.VidraResourceTemplate{
				Labels: map[string]string{"team": "network"}, AdoptExisting: vidrav1alpha1.AdoptAlways,
				VMRollout: &vidrav1alpha1.VMRolloutSpec{Strategy: vidrav1alpha1.VMRolloutRolling, MaxUnavailable: ptr(intstr.FromString("25%"))},
			}
			return s
		}},
		{"sync whose artifacts name their clusters", func() client.Object {
			s := validSync()
			s.Spec.Destination.ClusterFromTarget = true
			s.Spec.AllowEmpty = true
			s.Spec.Source.QueryName = "ArtifactIDs"
			return s
		}},
		{"sync rolled out in two waves", func() client.Object { return progressiveSync() }},
		{"sync fanned out by clusterSelector", func() client.Object {
			s := validSync()
			s.Spec.Destination.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"site": "a"}}
			s.Spec.Source.CredentialsSecretRef = &vidrav1alpha1.SecretReference{Namespace: "vidra-system", Name: "infrahub"}
			return s
		}},
		{"resource on a named cluster", func() client.Object {
			r := validResource()
			r.Spec.Destination = vidrav1alpha1.Destination{Cluster: "edge-1", Namespace: "apps"}
			return r
		}},
		{"resource on a server URL", func() client.Object {
			r := validResource()
			r.Spec.Destination.Server = "https://10.20.30.40:6443/"
			return r
		}},
		{"maxUnavailable percentage", func() client.Object {
			r := validResource()
			r.Spec.VMRollout = &vidrav1alpha1.VMRolloutSpec{
				Strategy: vidrav1alpha1.VMRolloutImmediate, MaxUnavailable: ptr(intstr.FromString("25%")),
				ReadyTimeout: &metav1.Duration{Duration: 90_000_000_000},
			}
			return r
		}},
		{"maxUnavailable number", func() client.Object {
			r := validResource()
			r.Spec.VMRollout = &vidrav1alpha1.VMRolloutSpec{MaxUnavailable: ptr(intstr.FromInt32(3))}
			r.Spec.AdoptExisting = vidrav1alpha1.AdoptAlways
			r.Spec.ServiceAccountName = "deployer"
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := hub.Client.Create(context.Background(), tt.object(), client.DryRunAll); err != nil {
				t.Errorf("create = %v, want accepted", err)
			}
		})
	}
}
