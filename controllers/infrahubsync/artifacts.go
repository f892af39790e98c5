package infrahubsync

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/runtime/tracing"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
)

// artifacts is an InfrahubSync's source as its delivery fetches from it: Infrahub's
// artifacts, read at one snapshot.
type artifacts struct {
	client  *infrahub.Client
	snap    infrahub.Snapshot
	metrics *Metrics
	// quota bounds the sync's downloads, and holds memory for the last one while the
	// delivery decodes and stores it.
	quota *infrahub.Quota
}

// itemsOf are the listed artifacts as the delivery sees them: an artifact not Ready in
// Infrahub keeps its last delivered content.
func itemsOf(listed []infrahub.Artifact) []fanout.Item {
	items := make([]fanout.Item, 0, len(listed))
	for _, a := range listed {
		it := fanout.Item{ID: a.ID, Name: a.Name, Target: a.Target.Label, Definition: a.Definition, Checksum: a.Checksum, State: a.Status}
		switch a.Status {
		case infrahub.StatusReady:
		case infrahub.StatusError:
			it.Unready = "Infrahub failed to generate it (status Error); the last delivered content is kept"
		default:
			it.Unready = fmt.Sprintf("status %s in Infrahub; the last delivered content is kept until it is Ready", a.Status)
			it.Generating = true
		}
		items = append(items, it)
	}
	return items
}

// Fetch downloads an artifact's content, which must match its checksum.
func (s artifacts) Fetch(ctx context.Context, it fanout.Item) ([]byte, error) {
	ctx, span := tracing.Tracer().Start(ctx, "infrahub.download", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("infrahub.artifact_id", it.ID), attribute.String("infrahub.checksum", it.Checksum)))
	data, err := s.client.Download(ctx, s.snap, infrahub.Artifact{ID: it.ID, Checksum: it.Checksum}, s.quota)
	span.SetAttributes(attribute.Int("infrahub.bytes", len(data)))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	s.metrics.observeDownload(err)
	var mismatch *infrahub.ChecksumMismatchError
	switch {
	case errors.As(err, &mismatch):
		return nil, fmt.Errorf("content refused: %w", err)
	case err != nil:
		return nil, err
	}
	return data, nil
}
