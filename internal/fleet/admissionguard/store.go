package admissionguard

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GapStoreName is the ConfigMap, in the operator's namespace, that keeps when the
// required policies were not in force.
const GapStoreName = "vidra-admission-gaps"

// The ConfigMap's keys.
const (
	gapsKey     = "gaps"
	inForceKey  = "inForce"
	maxStoreLen = 64 << 10
)

// GapStore keeps the record of gaps in a ConfigMap: a restarted operator must still
// distrust what was written while the policies were not in force.
type GapStore struct {
	// Reader reads the ConfigMap from the API server (ConfigMaps are not cached).
	Reader client.Reader
	// Writer writes it.
	Writer client.Client
	// Namespace is the operator's namespace.
	Namespace string
}

// load reads the record; none is empty, not an error.
func (s *GapStore) load(ctx context.Context) (identity []string, gaps []Gap, err error) {
	cm := &corev1.ConfigMap{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: GapStoreName}, cm); apierrors.IsNotFound(err) {
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("read ConfigMap %s/%s: %w", s.Namespace, GapStoreName, err)
	}
	if len(cm.Data[inForceKey])+len(cm.Data[gapsKey]) > maxStoreLen {
		return nil, nil, fmt.Errorf("ConfigMap %s/%s is larger than %d bytes: not written by the operator", s.Namespace, GapStoreName, maxStoreLen)
	}
	if err := json.Unmarshal([]byte(cm.Data[inForceKey]), &identity); err != nil && cm.Data[inForceKey] != "" {
		return nil, nil, fmt.Errorf("ConfigMap %s/%s key %s: %w", s.Namespace, GapStoreName, inForceKey, err)
	}
	if err := json.Unmarshal([]byte(cm.Data[gapsKey]), &gaps); err != nil && cm.Data[gapsKey] != "" {
		return nil, nil, fmt.Errorf("ConfigMap %s/%s key %s: %w", s.Namespace, GapStoreName, gapsKey, err)
	}
	return identity, gaps, nil
}

// save writes the record, creating the ConfigMap the first time.
func (s *GapStore) save(ctx context.Context, identity []string, gaps []Gap) error {
	idJSON, err := json.Marshal(identity)
	if err != nil {
		return err
	}
	gapsJSON, err := json.Marshal(gaps)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: GapStoreName}}
	data := map[string]string{inForceKey: string(idJSON), gapsKey: string(gapsJSON)}
	err = s.Reader.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	switch {
	case apierrors.IsNotFound(err):
		cm.Data = data
		err = s.Writer.Create(ctx, cm)
	case err == nil:
		cm.Data = data
		err = s.Writer.Update(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("write ConfigMap %s/%s: %w", s.Namespace, GapStoreName, err)
	}
	return nil
}

// gaps is the replica's log, started from the store at the first call (an error is
// returned, and the next call tries again, while the store cannot be read).
func (c *Checker) gaps(ctx context.Context) (*gapLog, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	log := c.logLocked()
	if c.seeded || c.Store == nil {
		return log, nil
	}
	identity, gaps, err := c.Store.load(ctx)
	if err != nil {
		return nil, fmt.Errorf("when the admission policies were last not in force cannot be read: %w", err)
	}
	log.seed(identity, gaps)
	c.seeded = true
	return log, nil
}

// changed is signalled when the log changes.
func (c *Checker) changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logLocked().changed
}

// logLocked is the replica's log, made at first use; c.mu is held.
func (c *Checker) logLocked() *gapLog {
	if c.log == nil {
		c.log = newGapLog()
	}
	return c.log
}

// Recorder writes the record of gaps whenever the checker's log changes: run by the
// leader alone. It writes nothing while nothing changes, and looks at no policy itself:
// the checker's users observe them (each check, and the log's report every 30s).
type Recorder struct {
	Checker *Checker
	Log     logr.Logger
}

// NeedLeaderElection says that one replica writes the record: the leader.
func (r Recorder) NeedLeaderElection() bool { return true }

// Start writes the record at each change of the log until ctx ends, and once at start
// if it differs from the stored one; a failed write is tried again a minute later.
func (r Recorder) Start(ctx context.Context) error {
	var writtenID []string
	var written []Gap
	var err error
	for {
		if writtenID, written, err = r.Checker.Store.load(ctx); err == nil {
			break
		}
		r.Log.Error(err, "cannot read when the admission policies were not in force")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(Retry):
		}
	}
	for {
		if log, err := r.Checker.gaps(ctx); err != nil {
			r.Log.Error(err, "cannot tell when the admission policies were not in force")
		} else if identity, gaps := log.record(); !slices.Equal(identity, writtenID) || !gapsEqual(gaps, written) {
			if err := r.Checker.Store.save(ctx, identity, gaps); err != nil {
				r.Log.Error(err, "cannot record when the admission policies were not in force")
			} else {
				writtenID, written = identity, gaps
				r.Log.Info("recorded when the admission policies were not in force", "gaps", len(gaps))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.Checker.changed():
		case <-time.After(Retry):
		}
	}
}

func gapsEqual(a, b []Gap) bool {
	return slices.EqualFunc(a, b, func(x, y Gap) bool { return x.From.Equal(y.From) && x.To.Equal(y.To) })
}
