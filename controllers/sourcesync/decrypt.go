package sourcesync

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"filippo.io/age"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/source/decryption"
)

// ageKeys reads the age identities of the Secret spec.decryption names, once whoever
// last changed the sync may use it; keysKey identifies them in this process (it is not
// shown anywhere).
func (p *PostBuild) ageKeys(ctx context.Context, obj Object, spec *vidrav1alpha1.Decryption) ([]age.Identity, string, error) {
	ref := spec.SecretRef
	data, err := p.Secrets.data(ctx, obj, "spec.decryption.secretRef", &ref, "")
	if err != nil {
		return nil, "", err
	}
	ids, err := decryption.ParseAgeKeys(data)
	if err != nil {
		return nil, "", &syncs.Failure{Reason: vidrav1alpha1.ReasonDecryptionFailed, Stalled: true,
			Err: fmt.Errorf("spec.decryption: Secret %s/%s: %w", p.Secrets.Namespace, ref.Name, err)}
	}
	parts := []string{"age"}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if strings.HasSuffix(k, decryption.AgeKeySuffix) {
			parts = append(parts, k, string(data[k]))
		}
	}
	return ids, digestOf(parts...), nil
}

// decrypt decrypts the SOPS-encrypted documents of the base: a document that does not
// decrypt stops the sync (what was delivered stays), until a new revision or new
// identities.
func (s *substitution) decrypt(data []byte, revision string) ([]byte, error) {
	plain, _, err := decryption.Bundle(data, s.keys)
	if err != nil {
		return nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonDecryptionFailed, Stalled: true,
			Err: fmt.Errorf("spec.decryption with Secret %s/%s: %s: %w", s.kind.PostBuild.Secrets.Namespace, s.decryption.SecretRef.Name, revision, err)}
	}
	return plain, nil
}
