package credentials

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
)

// Use is one Secret a sync names, and the URL its content would serve.
type Use struct {
	// Sync names the sync for messages, as "InfrahubSync team-a".
	Sync string
	// Field is where the sync names the Secret, as "spec.source.credentialsSecretRef".
	Field string
	// Secret is the Secret named.
	Secret vidrav1alpha1.SecretReference
	// URL is the source the Secret's credentials would be sent to, or whose certificate
	// its CA would verify.
	URL string
	// Requester is who last changed the sync's spec; nil when none is recorded.
	Requester *policy.Requester
}

// UseOf is the use of the Secret ref that a sync's field names, for url ("" for a Secret
// rendered into what the sync delivers), by whoever last changed the sync.
func UseOf(sync vidrav1alpha1.Sync, field string, ref vidrav1alpha1.SecretReference, url string) Use {
	use := Use{Sync: sync.SyncKind().Kind + " " + sync.GetName(), Field: field, Secret: ref, URL: url}
	if who, ok := policy.RequesterOf(sync.GetAnnotations()); ok {
		use.Requester = &who
	}
	return use
}

// Refusal is a Secret the sync may not use as written: only a change of the sync, of the
// Secret or of RBAC helps. Reason is the condition reason to report.
type Refusal struct {
	Reason  string
	Message string
	// Missing says the Secret does not exist: what a reference marked optional allows.
	Missing bool
}

func (r *Refusal) Error() string { return r.Message }

func refuse(reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Gate reads the Secrets syncs name, for the syncs that may use them.
type Gate struct {
	secrets   client.Reader
	reviewer  client.Client
	namespace string

	mu sync.Mutex
	// allowed holds when each review that allowed was asked.
	allowed map[reviewKey]time.Time
}

// NewGate reads Secrets through secrets, only in namespace (the operator's), and asks the
// API server through reviewer whether a requester may use one.
func NewGate(secrets client.Reader, reviewer client.Client, namespace string) *Gate {
	return &Gate{secrets: secrets, reviewer: reviewer, namespace: namespace, allowed: map[reviewKey]time.Time{}}
}

// Namespace is the only namespace the gate reads Secrets from.
func (g *Gate) Namespace() string { return g.namespace }

// GetRendered reads a Secret a sync renders into what it delivers (a HelmSync's values),
// which goes to no source: only the requester's right to use it is checked.
func (g *Gate) GetRendered(ctx context.Context, use Use) (*corev1.Secret, error) {
	return g.get(ctx, use, false)
}

// Get reads the Secret a sync names once the sync may use it for its URL. Its errors are
// a *Refusal where the sync cannot use the Secret as written. The requester's right is
// asked before the Secret is read, so a refusal tells nothing of a Secret one may not use.
func (g *Gate) Get(ctx context.Context, use Use) (*corev1.Secret, error) {
	return g.get(ctx, use, true)
}

func (g *Gate) get(ctx context.Context, use Use, toURL bool) (*corev1.Secret, error) {
	ref := use.Secret
	if err := g.inNamespace(use); err != nil {
		return nil, err
	}
	if err := g.authorize(ctx, use); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	err := g.secrets.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		missing := refuse(vidrav1alpha1.ReasonSourceInvalid, "%s: Secret %s/%s not found", use.Field, ref.Namespace, ref.Name)
		missing.Missing = true
		return nil, missing
	case err != nil:
		return nil, fmt.Errorf("%s: get Secret %s/%s: %w", use.Field, ref.Namespace, ref.Name, err)
	}
	if toURL {
		if err := checkURL(use, secret); err != nil {
			return nil, err
		}
	}
	return secret, nil
}

// AuthorizeConfigMap checks, at each use, that whoever last changed the sync may still get
// the ConfigMap named of the operator's namespace, which the sync renders into what it
// delivers (a HelmSync's valuesFrom): admission asked when the spec changed, and a right
// taken away since must hold. Its errors are a *Refusal where the sync may not.
func (g *Gate) AuthorizeConfigMap(ctx context.Context, sync, field, name string, requester *policy.Requester) error {
	if requester == nil {
		return refuse(vidrav1alpha1.ReasonCredentialsRefused,
			"%s: %s records no requester (the annotation %s, which the chart's admission policy writes), so it may read no ConfigMap; %s/%s is not read",
			field, sync, vidrav1alpha1.RequestedByAnnotation, g.namespace, name)
	}
	allowed, reason, err := g.review(ctx, *requester, "configmaps", g.namespace, name, "get")
	if err != nil {
		return fmt.Errorf("%s: review whether %s may get ConfigMap %s/%s: %w", field, requester.User, g.namespace, name, err)
	}
	if !allowed {
		msg := fmt.Sprintf("%s: %s, who last changed %s, may not get ConfigMap %s/%s: that needs the verb get on configmaps named %s in namespace %s",
			field, requester.User, sync, g.namespace, name, name, g.namespace)
		if reason != "" {
			msg += " (" + reason + ")"
		}
		return &Refusal{Reason: vidrav1alpha1.ReasonCredentialsRefused, Message: msg}
	}
	return nil
}

// Admit checks a Secret the sync found by other means (a label naming its host) as Get
// checks one it names.
func (g *Gate) Admit(ctx context.Context, use Use, secret *corev1.Secret) error {
	use.Secret = vidrav1alpha1.SecretReference{Namespace: secret.Namespace, Name: secret.Name}
	if err := g.inNamespace(use); err != nil {
		return err
	}
	if err := g.authorize(ctx, use); err != nil {
		return err
	}
	return checkURL(use, secret)
}

// inNamespace refuses a Secret outside the operator's namespace: anyone who may write a
// sync could otherwise send any Secret of the cluster.
func (g *Gate) inNamespace(use Use) error {
	if use.Secret.Namespace != g.namespace {
		return refuse(vidrav1alpha1.ReasonSourceInvalid, "%s %s/%s: Secrets are read only from the operator's namespace %s",
			use.Field, use.Secret.Namespace, use.Secret.Name, g.namespace)
	}
	return nil
}

// checkURL refuses a Secret whose annotation does not cover the URL.
func checkURL(use Use, secret *corev1.Secret) error {
	allowed := AllowedURLs(secret.Annotations)
	if len(allowed) == 0 {
		return refuse(vidrav1alpha1.ReasonCredentialsRefused,
			"%s: Secret %s/%s lists no URL it may be sent to, so it is sent nowhere: an admin annotates it %s=<URL prefix>[,<URL prefix>...]",
			use.Field, secret.Namespace, secret.Name, vidrav1alpha1.AllowedURLsAnnotation)
	}
	if !Covers(allowed, use.URL) {
		return refuse(vidrav1alpha1.ReasonCredentialsRefused,
			"%s: Secret %s/%s may be sent only to %s (its annotation %s), not to %s",
			use.Field, secret.Namespace, secret.Name, strings.Join(allowed, ", "), vidrav1alpha1.AllowedURLsAnnotation, use.URL)
	}
	return nil
}

// UseRight spells the RBAC right that lets a person have a sync use the Secret.
func UseRight(ref vidrav1alpha1.SecretReference) string {
	return fmt.Sprintf("the verb %s on secrets named %s in namespace %s", vidrav1alpha1.UseVerb, ref.Name, ref.Namespace)
}

// authorize refuses a use whose requester is unknown or may not use the Secret.
func (g *Gate) authorize(ctx context.Context, use Use) error {
	ref := use.Secret
	if use.Requester == nil {
		return refuse(vidrav1alpha1.ReasonCredentialsRefused,
			"%s: %s records no requester (the annotation %s, which the chart's admission policy writes), so it may use no Secret; %s is not used",
			use.Field, use.Sync, vidrav1alpha1.RequestedByAnnotation, ref.Namespace+"/"+ref.Name)
	}
	allowed, reason, err := g.review(ctx, *use.Requester, "secrets", ref.Namespace, ref.Name, vidrav1alpha1.UseVerb)
	if err != nil {
		return fmt.Errorf("%s: review whether %s may use Secret %s/%s: %w", use.Field, use.Requester.User, ref.Namespace, ref.Name, err)
	}
	if !allowed {
		msg := fmt.Sprintf("%s: %s, who last changed %s, may not use Secret %s/%s: that needs %s",
			use.Field, use.Requester.User, use.Sync, ref.Namespace, ref.Name, UseRight(ref))
		if reason != "" {
			msg += " (" + reason + ")"
		}
		return &Refusal{Reason: vidrav1alpha1.ReasonCredentialsRefused, Message: msg}
	}
	return nil
}

// answerTTL is how long one SubjectAccessReview's answer is reused: a right taken away
// holds within it.
const answerTTL = time.Minute

type reviewKey struct {
	who, resource, name, verb string
}

// review asks the API server whether who may verb the object resource/name of namespace;
// an answer that allows is reused for a minute.
func (g *Gate) review(ctx context.Context, who policy.Requester, resource, namespace, name, verb string) (bool, string, error) {
	key := reviewKey{who: who.Key(), resource: resource, name: name, verb: verb}
	now := time.Now()
	g.mu.Lock()
	at, ok := g.allowed[key]
	g.mu.Unlock()
	if ok && now.Sub(at) < answerTTL {
		return true, "", nil
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: who.ReviewSpec()}
	sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Namespace: namespace, Resource: resource, Name: name, Verb: verb}
	if err := g.reviewer.Create(ctx, sar); err != nil {
		return false, "", err
	}
	reason := strings.TrimSpace(sar.Status.Reason)
	if !sar.Status.Allowed {
		// Not kept: a right granted takes effect at the sync's next look.
		return false, reason, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, at := range g.allowed {
		if now.Sub(at) >= answerTTL {
			delete(g.allowed, k)
		}
	}
	g.allowed[key] = now
	return true, "", nil
}
