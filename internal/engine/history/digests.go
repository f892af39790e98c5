package history

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Digests returns the stored content the revisions in the namespace name, so the content
// store keeps it while a revision may be rolled back to.
func Digests(reader client.Reader, namespace string) func(context.Context) (map[string]bool, error) {
	return func(ctx context.Context) (map[string]bool, error) {
		var list appsv1.ControllerRevisionList
		if err := reader.List(ctx, &list, client.InNamespace(namespace), client.HasLabels{vidrav1alpha1.RevisionOfLabel}); err != nil {
			return nil, fmt.Errorf("list revisions: %w", err)
		}
		named := map[string]bool{}
		for i := range list.Items {
			var d struct { // only the content's reference: no manifest or inventory decoded
				Content *vidrav1alpha1.ContentReference `json:"content"`
			}
			if err := json.Unmarshal(list.Items[i].Data.Raw, &d); err == nil && d.Content != nil {
				named[d.Content.Digest] = true
			}
		}
		return named, nil
	}
}
